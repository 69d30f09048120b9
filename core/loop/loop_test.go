package loop

import (
	"errors"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// startLoop runs a new loop on its own goroutine and stops it at cleanup.
func startLoop(t testing.TB, o Options) *Loop {
	t.Helper()
	// The tuning fields left at zero take the default tuning.
	d := defaultOptions(o.ID)
	if o.RunqueueDepth == 0 {
		o.RunqueueDepth = d.RunqueueDepth
	}
	if o.Maxpollevents == 0 {
		o.Maxpollevents = d.Maxpollevents
	}
	if o.Sched == (Sched{}) {
		o.Sched = d.Sched
	}
	l, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { l.Run(); close(done) }()
	t.Cleanup(func() {
		l.Stop()
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Error("loop did not stop")
		}
		if err := l.Close(); err != nil {
			t.Error(err)
		}
	})
	return l
}

// execWait runs fn on the loop thread and waits for it.
func execWait(t testing.TB, l *Loop, fn func(l *Loop)) {
	t.Helper()
	done := make(chan struct{})
	if !l.Exec(func(l *Loop) { fn(l); close(done) }) {
		t.Fatal("Exec refused")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Exec'd function did not run")
	}
}

func TestExecRunsOnLoopInOrderAndNotAfterStop(t *testing.T) {
	l, err := New(defaultOptions(3))
	if err != nil {
		t.Fatal(err)
	}
	var got []int
	for i := range 5 { // queued before Run: run at the first round
		if !l.Exec(func(*Loop) { got = append(got, i) }) {
			t.Fatal("Exec before Run refused")
		}
	}
	done := make(chan struct{})
	go func() { l.Run(); close(done) }()
	execWait(t, l, func(*Loop) {})
	for i, v := range got {
		if v != i {
			t.Fatalf("order %v", got)
		}
	}
	if len(got) != 5 {
		t.Fatalf("ran %d of 5", len(got))
	}
	l.Stop()
	<-done
	if l.Exec(func(*Loop) {}) {
		t.Fatal("Exec after Stop accepted")
	}
	if l.ID() != 3 {
		t.Fatalf("ID %d", l.ID())
	}
	l.Close()
}

func TestExecRacingStopRunsOrIsRefused(t *testing.T) {
	for range 20 {
		l, err := New(defaultOptions(0))
		if err != nil {
			t.Fatal(err)
		}
		done := make(chan struct{})
		go func() { l.Run(); close(done) }()
		var accepted, ran atomic.Int64
		stopAt := make(chan struct{})
		go func() { <-stopAt; l.Stop() }()
		for i := range 200 {
			if i == 100 {
				close(stopAt)
			}
			if l.Exec(func(*Loop) { ran.Add(1) }) {
				accepted.Add(1)
			}
		}
		<-done
		if accepted.Load() != ran.Load() {
			t.Fatalf("accepted %d, ran %d", accepted.Load(), ran.Load())
		}
		l.Close()
	}
}

func TestWakeRunsTaskletOnceWhenWokenTwice(t *testing.T) {
	l := startLoop(t, Options{})
	var runs int
	tk := &Tasklet{Run: func(*Tasklet) { runs++ }}
	execWait(t, l, func(l *Loop) {
		l.Wake(tk, Normal)
		l.Wake(tk, Urgent) // already queued: no-op
		if u, n, _ := l.Queued(); u != 0 || n != 1 {
			t.Errorf("queued %d urgent %d normal", u, n)
		}
	})
	execWait(t, l, func(*Loop) {})
	execWait(t, l, func(*Loop) {
		if runs != 1 {
			t.Errorf("ran %d times", runs)
		}
	})
}

func TestUnqueueRemovesAQueuedTasklet(t *testing.T) {
	l := startLoop(t, Options{})
	var ran []string
	a := &Tasklet{Run: func(*Tasklet) { ran = append(ran, "a") }}
	b := &Tasklet{Run: func(*Tasklet) { ran = append(ran, "b") }}
	c := &Tasklet{Run: func(*Tasklet) { ran = append(ran, "c") }}
	execWait(t, l, func(l *Loop) {
		l.Wake(a, Bulk)
		l.Wake(b, Bulk)
		l.Wake(c, Bulk)
		l.Unqueue(b)
		if b.Queued() {
			t.Error("b still queued")
		}
	})
	execWait(t, l, func(*Loop) {})
	execWait(t, l, func(*Loop) {
		if len(ran) != 2 || ran[0] != "a" || ran[1] != "c" {
			t.Errorf("ran %v, want [a c]", ran)
		}
	})
}

// A round runs exactly the Split budget per class: with 1000 tasklets queued
// in each class and the defaults (200, 33/50/17), a round runs 66 urgent,
// 100 normal and 34 bulk. The tasklets are woken from an Exec'd function,
// which runs in the normal class of its round, after the urgent class: the
// round after it is the first with every class queued from its start.
func TestRoundRunsTheSplitBudgetPerClass(t *testing.T) {
	tests := []struct {
		name       string
		depth      int
		s          Sched
		nU, nN, nB int
	}{
		{"defaults", 200, Sched{Urgent: 33, Normal: 50, Bulk: 17}, 1000, 1000, 1000},
		{"urgent short flows down", 200, Sched{Urgent: 33, Normal: 50, Bulk: 17}, 10, 1000, 1000},
		{"bulk only", 50, Sched{Urgent: 33, Normal: 50, Bulk: 17}, 0, 0, 300},
		{"custom shares", 100, Sched{Urgent: 10, Normal: 10, Bulk: 80}, 500, 500, 500},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l := startLoop(t, Options{RunqueueDepth: tt.depth, Sched: tt.s})
			var round uint64
			var perRound [nClasses]int
			var ran atomic.Int64
			mk := func(c Class, k int) {
				for range k {
					tk := &Tasklet{}
					tk.Run = func(*Tasklet) {
						ran.Add(1)
						if l.cLoops == round {
							perRound[c]++
						}
					}
					l.Wake(tk, c)
				}
			}
			execWait(t, l, func(l *Loop) {
				round = l.cLoops + 1 // the next round starts with them queued
				mk(Urgent, tt.nU)
				mk(Normal, tt.nN)
				mk(Bulk, tt.nB)
			})
			// Wait for that round to end without Exec'ing anything: an
			// Exec'd function is a unit of its normal class.
			testutil.Eventually(t, 5*time.Second, func() bool { return l.Activity().Loops.Load() > round },
				"the round to end")
			u, n, b := Split(tt.depth, tt.s, tt.nU, tt.nN, tt.nB)
			execWait(t, l, func(*Loop) {
				if perRound != [nClasses]int{u, n, b} {
					t.Errorf("first round ran %v, want [%d %d %d]", perRound, u, n, b)
				}
			})
			// Everything runs eventually, without sleeping in between.
			testutil.Eventually(t, 5*time.Second, func() bool { return ran.Load() == int64(tt.nU+tt.nN+tt.nB) },
				"all tasklets to run")
		})
	}
}

func TestTimersFireInOrderAndDisarmedOnesDoNot(t *testing.T) {
	l := startLoop(t, Options{})
	fired := make(chan int, 10)
	mk := func(i int) *Timer { return &Timer{Run: func(*Timer) { fired <- i }} }
	t1, t2, t3, t4 := mk(1), mk(2), mk(3), mk(4)
	execWait(t, l, func(l *Loop) {
		now := l.Now()
		l.Arm(t3, now+int64(30*time.Millisecond))
		l.Arm(t1, now+int64(10*time.Millisecond))
		l.Arm(t2, now+int64(20*time.Millisecond))
		l.Arm(t4, now+int64(15*time.Millisecond))
		l.Disarm(t4)
		l.Arm(t2, now+int64(5*time.Millisecond)) // re-arm earlier
	})
	var got []int
	for len(got) < 3 {
		select {
		case i := <-fired:
			got = append(got, i)
		case <-time.After(5 * time.Second):
			t.Fatalf("timers fired %v", got)
		}
	}
	if got[0] != 2 || got[1] != 1 || got[2] != 3 {
		t.Fatalf("fired %v, want [2 1 3]", got)
	}
	execWait(t, l, func(l *Loop) {
		if t4.Armed() || len(l.timers) != 0 {
			t.Errorf("heap not empty: %d", len(l.timers))
		}
	})
	select {
	case i := <-fired:
		t.Fatalf("timer %d fired after disarm", i)
	default:
	}
}

func TestTimerHeapKeepsOrderUnderRandomArmDisarm(t *testing.T) {
	var h timerHeap
	ts := make([]Timer, 200)
	seed := uint64(12345)
	rnd := func() int64 { seed ^= seed << 13; seed ^= seed >> 7; seed ^= seed << 17; return int64(seed % 1000) }
	for i := range ts {
		h.arm(&ts[i], rnd())
	}
	for i := 0; i < len(ts); i += 3 {
		h.disarm(&ts[i])
	}
	for i := 1; i < len(ts); i += 5 {
		h.arm(&ts[i], rnd())
	}
	prev := int64(-1)
	n := 0
	for len(h) > 0 {
		for i, x := range h {
			if x.idx != i+1 {
				t.Fatalf("index %d stored %d", i, x.idx)
			}
		}
		x := h[0]
		if x.when < prev {
			t.Fatalf("out of order: %d after %d", x.when, prev)
		}
		prev = x.when
		h.disarm(x)
		n++
	}
	want := 0
	for i := range ts {
		if i%3 != 0 || i%5 == 1 { // never disarmed, or re-armed after
			want++
		}
	}
	if n != want {
		t.Fatalf("popped %d, want %d", n, want)
	}
}

// A pipe's read end registered on the loop: a write makes the loop OR EPOLLIN
// into Ready and run the tasklet as urgent.
func TestReadinessWakesTaskletAsUrgent(t *testing.T) {
	l := startLoop(t, Options{})
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	defer unix.Close(p[1])
	got := make(chan uint32, 4)
	f := &FD{Fd: p[0]}
	f.T = &Tasklet{Run: func(*Tasklet) {
		got <- f.Ready
		var b [16]byte
		for {
			if _, err := unix.Read(f.Fd, b[:]); err == unix.EAGAIN {
				f.Ready &^= unix.EPOLLIN
				return
			} else if err != nil {
				return
			}
		}
	}}
	execWait(t, l, func(l *Loop) {
		if err := l.Register(f); err != nil {
			t.Error(err)
		}
	})
	unix.Write(p[1], []byte("x"))
	select {
	case r := <-got:
		if r&unix.EPOLLIN == 0 {
			t.Fatalf("Ready %#x lacks EPOLLIN", r)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("tasklet not woken")
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return l.Activity().Tasklets[Urgent].Load() >= 1 }, "urgent count")
	execWait(t, l, func(l *Loop) { l.Unregister(f) })
	unix.Close(p[0])
	if a := l.Activity(); a.PollIO.Load() == 0 || a.Loops.Load() == 0 {
		t.Fatalf("activity not counted: %+v", a.Snapshot())
	}
}

func TestRegisterRejectsBadFd(t *testing.T) {
	l := startLoop(t, Options{})
	execWait(t, l, func(l *Loop) {
		var se interface{ Unwrap() error }
		err := l.Register(&FD{Fd: -1})
		if !errors.As(err, &se) || !errors.Is(err, unix.EBADF) {
			t.Errorf("got %v, want EBADF syscall error", err)
		}
		if err := l.Register(&FD{Fd: 1 << 20}); !errors.Is(err, unix.EBADF) {
			t.Errorf("got %v, want EBADF", err)
		}
	})
}

// Forget relies on close(2) taking an unshared fd out of the epoll set:
// after Forget and close, a readiness raised before the close is not
// reported; after Forget alone the kernel entry is still there (the reason
// to close right away).
func TestForgetThenCloseLeavesNothingInTheEpollSet(t *testing.T) {
	for _, tc := range []struct {
		name  string
		close bool
		want  int
	}{
		{"forget and close: no event", true, 0},
		{"forget without close: the kernel still reports it", false, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l, err := New(defaultOptions(0))
			if err != nil {
				t.Fatal(err)
			}
			defer l.Close()
			var p [2]int
			if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
				t.Fatal(err)
			}
			defer unix.Close(p[1])
			f := &FD{Fd: p[0]}
			if err := l.Register(f); err != nil {
				t.Fatal(err)
			}
			l.Forget(f)
			if l.fds[p[0]] != nil {
				t.Fatal("Forget left the fd in the loop's table")
			}
			if _, err := unix.Write(p[1], []byte{1}); err != nil {
				t.Fatal(err)
			}
			if tc.close {
				unix.Close(p[0])
			} else {
				defer unix.Close(p[0])
			}
			evs := make([]unix.EpollEvent, 8)
			n, err := epollWait(l.epfd, evs, 0, false)
			if err != nil {
				t.Fatal(err)
			}
			if n != tc.want {
				t.Fatalf("epoll_wait reported %d events, want %d", n, tc.want)
			}
		})
	}
}

// An idle loop sleeps: over 100 ms without work it runs only a handful of
// rounds (no busy polling), yet a timer wakes it on time.
func TestIdleLoopSleepsUntilTimer(t *testing.T) {
	l := startLoop(t, Options{})
	execWait(t, l, func(*Loop) {})
	before := l.Activity().Loops.Load()
	fired := make(chan int64, 1)
	tm := &Timer{}
	tm.Run = func(*Timer) { fired <- monoNow() }
	var armedAt int64
	execWait(t, l, func(l *Loop) { armedAt = l.Now(); l.Arm(tm, l.Now()+int64(50*time.Millisecond)) })
	select {
	case at := <-fired:
		if d := time.Duration(at - armedAt); d < 50*time.Millisecond {
			t.Fatalf("timer fired early after %v", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("timer did not fire")
	}
	if n := l.Activity().Loops.Load() - before; n > 20 {
		t.Fatalf("%d rounds for one timer: busy loop", n)
	}
}

func TestNotifyCoalesces(t *testing.T) {
	l, err := New(defaultOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	l.Notify() // awake loop: no write at all
	l.sleeping.Store(true)
	for range 100 {
		l.Notify()
	}
	var b [8]byte
	if _, err := unix.Read(l.evfd, b[:]); err != nil {
		t.Fatal(err)
	}
	if b[0] != 1 {
		t.Fatalf("eventfd counter %d, want 1 write for 100 Notify", b[0])
	}
}

// defaultOptions is loop id with the default tuning, as the engine runs it
// (the defaults live in config.Normalize only).
func defaultOptions(id int) Options {
	var t config.Tuning
	t.Normalize()
	return Options{ID: id, RunqueueDepth: t.RunqueueDepth, Maxpollevents: t.Maxpollevents, Sched: Sched(t.Sched)}
}

func TestNewRefusesATuningThatSkippedNormalize(t *testing.T) {
	ok := defaultOptions(0)
	for name, o := range map[string]Options{
		"zero":               {},
		"no runqueue depth":  {RunqueueDepth: 0, Maxpollevents: ok.Maxpollevents, Sched: ok.Sched},
		"no maxpollevents":   {RunqueueDepth: ok.RunqueueDepth, Maxpollevents: -1, Sched: ok.Sched},
		"no class has share": {RunqueueDepth: ok.RunqueueDepth, Maxpollevents: ok.Maxpollevents},
	} {
		if l, err := New(o); err == nil {
			l.Close()
			t.Errorf("%s: New accepted %+v", name, o)
		}
	}
}

func TestSetTuningAppliesValuesAsGiven(t *testing.T) {
	l, err := New(defaultOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if d, m, s := l.Tuning(); d != 200 || m != 200 || s != (Sched{Urgent: 33, Normal: 50, Bulk: 17}) {
		t.Fatalf("defaults %d %d %+v", d, m, s)
	}
	l.SetTuning(10, 5, Sched{Urgent: 1, Normal: 2, Bulk: 3})
	if d, m, s := l.Tuning(); d != 10 || m != 5 || s.Bulk != 3 {
		t.Fatalf("after SetTuning %d %d %+v", d, m, s)
	}
}

type countSource struct{ polls, budget int }

func (s *countSource) Poll(l *Loop, budget int) int { s.polls++; s.budget = budget; return 0 }
func (s *countSource) Pending() bool                { return false }

func TestSourcesArePolledEachRound(t *testing.T) {
	l := startLoop(t, Options{RunqueueDepth: 17})
	s := &countSource{}
	execWait(t, l, func(l *Loop) { l.AddSource(s); l.AddSource(s) })
	execWait(t, l, func(*Loop) {})
	execWait(t, l, func(l *Loop) {
		// Sources are urgent work: offered the urgent share, ceil(17*33/100).
		if s.polls < 1 || s.budget != 6 || len(l.sources) != 1 {
			t.Errorf("polls %d budget %d sources %d", s.polls, s.budget, len(l.sources))
		}
		l.RemoveSource(s)
	})
	execWait(t, l, func(*Loop) {})
	p := 0
	execWait(t, l, func(*Loop) { p = s.polls })
	execWait(t, l, func(*Loop) {
		if s.polls != p {
			t.Errorf("removed source polled")
		}
	})
}

// Round trips from several goroutines to a mostly idle loop: a lost wake-up
// (the loop asleep with work in its inbox) shows up as a timeout.
func TestExecRoundTripsNeverLoseAWakeup(t *testing.T) {
	l := startLoop(t, Options{})
	const producers, each = 4, 500
	errc := make(chan error, producers)
	for range producers {
		go func() {
			done := make(chan struct{}, 1)
			fn := func(*Loop) { done <- struct{}{} }
			for range each {
				l.Exec(fn)
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					errc <- errors.New("Exec'd function did not run: lost wake-up")
					return
				}
			}
			errc <- nil
		}()
	}
	for range producers {
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

type flagSource struct {
	pending atomic.Bool
	ran     chan struct{}
}

func (s *flagSource) Poll(l *Loop, budget int) int {
	if s.pending.CompareAndSwap(true, false) {
		s.ran <- struct{}{}
		return 1
	}
	return 0
}
func (s *flagSource) Pending() bool { return s.pending.Load() }

// A Source fed from another thread, as an accept ring: set + Notify must
// always get it polled.
func TestPendingSourceIsPolledAfterNotify(t *testing.T) {
	l := startLoop(t, Options{})
	s := &flagSource{ran: make(chan struct{}, 1)}
	execWait(t, l, func(l *Loop) { l.AddSource(s) })
	for range 2000 {
		s.pending.Store(true)
		l.Notify()
		select {
		case <-s.ran:
		case <-time.After(5 * time.Second):
			t.Fatal("source not polled: lost wake-up")
		}
	}
}

func TestCloseRunsWhatWasExecdToALoopThatNeverRan(t *testing.T) {
	l, err := New(defaultOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	ran := false
	if !l.Exec(func(*Loop) { ran = true }) {
		t.Fatal("Exec refused")
	}
	if err := l.Close(); err != nil {
		t.Fatal(err)
	}
	if !ran {
		t.Fatal("Exec'd function dropped by Close")
	}
	if l.Exec(func(*Loop) {}) {
		t.Fatal("Exec after Close accepted")
	}
}

// unitSource is a Source holding n entries, each one unit of work.
type unitSource struct {
	n    int
	unit func()
}

func (s *unitSource) Poll(_ *Loop, budget int) int {
	k := min(s.n, budget)
	s.n -= k
	for range k {
		s.unit()
	}
	return k
}
func (s *unitSource) Pending() bool { return s.n > 0 }

// Work that a round's budget leaves over — tasklets of each class, expired
// timers, Exec'd functions, a Source's entries — runs in the rounds that
// follow without anything waking the loop: the round that leaves it must
// poll without sleeping. With GOMAXPROCS 1 the loop's blocking poll gives
// its P back (spareP false), so the runtime does not interrupt it every
// 10 ms (sysmon's preemption of a loop that keeps its P returns
// epoll_wait with EINTR and starts a round), which would run the
// leftovers anyway and hide a lost wake-up; here a lost one is a timeout.
func TestWorkLeftByTheBudgetRunsWithoutAWakeUp(t *testing.T) {
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(1))
	const depth = 10
	const n = 5 * depth // five rounds' worth of one kind at least
	for _, tc := range []struct {
		name  string
		queue func(l *Loop, unit func())
	}{
		{"urgent tasklets", func(l *Loop, unit func()) { wakeN(l, Urgent, n, unit) }},
		{"normal tasklets", func(l *Loop, unit func()) { wakeN(l, Normal, n, unit) }},
		{"bulk tasklets", func(l *Loop, unit func()) { wakeN(l, Bulk, n, unit) }},
		{"expired timers", func(l *Loop, unit func()) {
			for range n {
				l.Arm(&Timer{Run: func(*Timer) { unit() }}, l.Now())
			}
		}},
		{"execs", func(l *Loop, unit func()) {
			for range n {
				l.Exec(func(*Loop) { unit() }) // from the loop: no eventfd write
			}
		}},
		// Sources are polled first in a round: one added (or fed) by an
		// Exec'd function waits for the next round, which its Pending
		// must not let the loop sleep through.
		{"source added by an exec", func(l *Loop, unit func()) { l.AddSource(&unitSource{n: n, unit: unit}) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := startLoop(t, Options{RunqueueDepth: depth})
			for try := range 10 {
				units := 0
				done := make(chan struct{})
				unit := func() {
					if units++; units == n {
						close(done)
					}
				}
				if !l.Exec(func(l *Loop) { tc.queue(l, unit) }) {
					t.Fatal("Exec refused")
				}
				select {
				case <-done:
				case <-time.After(5 * time.Second):
					var ran int
					execWait(t, l, func(*Loop) { ran = units })
					t.Fatalf("try %d: %d of %d units ran, then the loop slept with work left: lost wake-up", try, ran, n)
				}
			}
		})
	}
}

func wakeN(l *Loop, c Class, n int, unit func()) {
	for range n {
		l.Wake(&Tasklet{Run: func(*Tasklet) { unit() }}, c)
	}
}

// TestClassSaysWhatRunsNow: Class is the class of the work running:
// Normal for Exec'd functions, timers and tasklets woken as Normal,
// Urgent and Bulk for tasklets of those classes.
func TestClassSaysWhatRunsNow(t *testing.T) {
	l := startLoop(t, Options{})
	got := make(chan [4]Class, 1)
	var seen [4]Class
	var urgent, normal, bulk Tasklet
	var tm Timer
	urgent.Run = func(*Tasklet) { seen[0] = l.Class() }
	normal.Run = func(*Tasklet) { seen[1] = l.Class() }
	bulk.Run = func(*Tasklet) {
		seen[2] = l.Class()
		got <- seen
	}
	tm.Run = func(*Timer) {
		seen[3] = l.Class()
		l.Wake(&urgent, Urgent)
		l.Wake(&normal, Normal)
		l.Wake(&bulk, Bulk)
	}
	execWait(t, l, func(l *Loop) {
		if c := l.Class(); c != Normal {
			t.Errorf("an Exec'd function runs in %v, want Normal", c)
		}
		l.Arm(&tm, l.Now())
	})
	select {
	case s := <-got:
		if s != [4]Class{Urgent, Normal, Bulk, Normal} {
			t.Errorf("classes seen (urgent, normal, bulk tasklets, timer): %v", s)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the tasklets did not run")
	}
}

// TestSleepsAndWakeUpsAreCounted: an Exec to a sleeping loop is one
// wake-up (Activity.Notified) after one sleep (Activity.Sleeps), and the
// time asleep is counted (Activity.SleepNs).
func TestSleepsAndWakeUpsAreCounted(t *testing.T) {
	l := startLoop(t, Options{})
	a := l.Activity()
	asleep := func() {
		testutil.Eventually(t, 5*time.Second, func() bool { return l.sleeping.Load() }, "the loop sleeps")
	}
	asleep()
	s0, n0, ns0 := a.Sleeps.Load(), a.Notified.Load(), a.SleepNs.Load()
	const n = 10
	for range n {
		asleep()
		execWait(t, l, func(*Loop) {})
	}
	asleep() // the round that ran the last one published the counters
	s, w, ns := a.Sleeps.Load()-s0, a.Notified.Load()-n0, a.SleepNs.Load()-ns0
	if w != n {
		t.Errorf("%d wake-ups for %d Exec to a sleeping loop, want %d", w, n, n)
	}
	// Each Exec found the loop asleep; a preemption signal (EINTR) may
	// end a sleep early and add one.
	if s < n || s > 3*n {
		t.Errorf("%d sleeps for %d Exec to a sleeping loop", s, n)
	}
	if ns == 0 {
		t.Error("no time asleep counted")
	}
}

// TestBusyPollTakesWorkWithoutAWakeUp: a loop that busy polls
// (tuning.busy_poll_us) takes what other threads Exec without sleeping
// and without an eventfd write (Notified), and counts its polls; with
// nothing to do it still sleeps once the busy poll is over.
func TestBusyPollTakesWorkWithoutAWakeUp(t *testing.T) {
	l := startLoop(t, Options{BusyPollUs: 1_000_000})
	a := l.Activity()
	execWait(t, l, func(*Loop) {})
	n0, p0 := a.Notified.Load(), a.BusyPolls.Load()
	const n = 20
	for range n {
		// Spacing, not synchronisation: an Exec pushed before the round
		// that ran the last one ended leaves the loop work, and a loop
		// with work does not poll (seen under load: 21 rounds, no busy
		// poll, no sleep). The busy poll lasts 1 s.
		time.Sleep(100 * time.Microsecond)
		execWait(t, l, func(*Loop) {})
	}
	execWait(t, l, func(*Loop) {}) // publishes the counters of the round before
	// A preemption of the test (not the loop) past the busy poll's second
	// lets the loop sleep; allow two.
	if w := a.Notified.Load() - n0; w > 2 {
		t.Errorf("%d eventfd wake-ups for %d Exec to a busy-polling loop, want none", w, n)
	}
	if p := a.BusyPolls.Load() - p0; p == 0 {
		t.Errorf("no busy poll counted in %d rounds", n)
	}
	s0 := a.Sleeps.Load()
	execWait(t, l, func(l *Loop) { l.SetBusyPoll(1000) }) // 1 ms
	asleep := func() {
		testutil.Eventually(t, 5*time.Second, func() bool { return l.sleeping.Load() }, "the loop sleeps after its busy poll")
	}
	asleep()
	execWait(t, l, func(*Loop) {})
	asleep() // the round that ran it published the sleep before it
	if a.Sleeps.Load() == s0 {
		t.Error("no sleep counted after the busy poll")
	}
}
