package loop

import (
	"strings"
	"testing"

	"golang.org/x/sys/unix"
)

// These run the loop's internals on the test goroutine, which acts as the
// loop thread of a loop that is not Running.

func newIdleLoop(t testing.TB) *Loop {
	t.Helper()
	l, err := New(defaultOptions(0))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

func TestWakeAndRunAllocateNothing(t *testing.T) {
	l := newIdleLoop(t)
	var tks [3]Tasklet
	for i := range tks {
		tks[i].Run = func(*Tasklet) {}
	}
	if n := testing.AllocsPerRun(1000, func() {
		l.Wake(&tks[0], Urgent)
		l.Wake(&tks[1], Normal)
		l.Wake(&tks[2], Bulk)
		l.runClasses(monoNow())
	}); n != 0 {
		t.Fatalf("%v allocations per wake+run", n)
	}
}

func TestTimerArmDisarmAllocateNothing(t *testing.T) {
	l := newIdleLoop(t)
	ts := make([]Timer, 64)
	for i := range ts { // grow the heap once
		l.Arm(&ts[i], int64(i))
	}
	for i := range ts {
		l.Disarm(&ts[i])
	}
	if n := testing.AllocsPerRun(1000, func() {
		for i := range ts {
			l.Arm(&ts[i], int64(i*7%64))
		}
		l.Arm(&ts[3], 1000)
		for i := range ts {
			l.Disarm(&ts[i])
		}
	}); n != 0 {
		t.Fatalf("%v allocations per arm/disarm", n)
	}
}

func TestEventDispatchAllocatesNothing(t *testing.T) {
	l := newIdleLoop(t)
	evs, fds := readyEvents(t, l, 32)
	if n := testing.AllocsPerRun(1000, func() {
		l.dispatch(evs)
		l.runClasses(monoNow())
	}); n != 0 {
		t.Fatalf("%v allocations per dispatch", n)
	}
	for _, f := range fds {
		if f.Ready&unix.EPOLLIN == 0 {
			t.Fatal("Ready not set")
		}
	}
}

// readyEvents registers n pipe read ends and returns one EPOLLIN event for
// each, as epoll_wait would.
func readyEvents(t testing.TB, l *Loop, n int) ([]unix.EpollEvent, []*FD) {
	t.Helper()
	evs := make([]unix.EpollEvent, n)
	fds := make([]*FD, n)
	for i := range n {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
		f := &FD{Fd: p[0], T: &Tasklet{Run: func(*Tasklet) {}}}
		if err := l.Register(f); err != nil {
			t.Fatal(err)
		}
		fds[i] = f
		evs[i] = unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(p[0])}
	}
	return evs, fds
}

func BenchmarkWakeRun(b *testing.B) {
	l := newIdleLoop(b)
	tk := &Tasklet{Run: func(*Tasklet) {}}
	b.ReportAllocs()
	for b.Loop() {
		l.Wake(tk, Urgent)
		l.runClasses(monoNow())
	}
}

func BenchmarkTimerArmDisarm(b *testing.B) {
	l := newIdleLoop(b)
	// A realistic heap: 1000 armed timers (connections' timeouts).
	bg := make([]Timer, 1000)
	for i := range bg {
		l.Arm(&bg[i], int64(i)*1000)
	}
	var t Timer
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		l.Arm(&t, (i*7919)%1000000)
		l.Disarm(&t)
	}
}

func BenchmarkTimerRearm(b *testing.B) {
	l := newIdleLoop(b)
	bg := make([]Timer, 1000)
	for i := range bg {
		l.Arm(&bg[i], int64(i)*1000)
	}
	b.ReportAllocs()
	i := int64(0)
	for b.Loop() {
		i++
		l.Arm(&bg[i%1000], (i*7919)%1000000) // a timeout pushed back
	}
}

// One event dispatched and its tasklet run, per op.
func BenchmarkDispatch32(b *testing.B) {
	l := newIdleLoop(b)
	evs, _ := readyEvents(b, l, 32)
	b.ReportAllocs()
	for b.Loop() {
		l.dispatch(evs)
		l.runClasses(monoNow())
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/32, "ns/event")
}

// A whole round with work left (so epoll_wait does not sleep) and nothing
// ready: the fixed cost of the loop per round, one epoll_wait included.
func BenchmarkRoundBusyNoEvents(b *testing.B) {
	l := newIdleLoop(b)
	tk := &Tasklet{}
	tk.Run = func(*Tasklet) { l.Wake(tk, Bulk) } // keeps the loop busy
	l.Wake(tk, Bulk)
	b.ReportAllocs()
	for b.Loop() {
		l.round()
	}
}

// Exec + Notify from another goroutine's point of view (control path: one
// allocation for the inbox node), and the loop taking it.
func BenchmarkExecTake(b *testing.B) {
	l := newIdleLoop(b)
	fn := func(*Loop) {}
	b.ReportAllocs()
	for b.Loop() {
		l.Exec(fn)
		for n := l.inbox.take(false); n != nil; n = n.next {
			n.fn(l)
		}
		l.notified.Store(false) // as dispatch does after reading the eventfd
		unix.Read(l.evfd, l.evbuf[:])
	}
}

// entrySource is a Source holding n entries; each one handled counts a
// unit.
type entrySource struct {
	n     int
	units *int
}

func (s *entrySource) Pending() bool { return s.n > 0 }

func (s *entrySource) Poll(_ *Loop, budget int) int {
	k := min(s.n, budget)
	s.n -= k
	*s.units += k
	return k
}

// TestRoundNeverRunsMoreThanDepthUnits: whatever mix of work is pending —
// tasklets of each class, expired timers, Exec'd functions, accept-ring
// entries — one round runs at most runqueue_depth units of it, and the
// rounds that follow run the rest.
func TestRoundNeverRunsMoreThanDepthUnits(t *testing.T) {
	type mix struct{ urgent, normal, bulk, timers, execs, entries int }
	for _, tc := range []struct {
		name string
		mix
	}{
		{"everything", mix{50, 50, 50, 50, 50, 50}},
		{"timers only", mix{timers: 100}},
		{"execs only", mix{execs: 100}},
		{"accepts only", mix{entries: 100}},
		{"timers and accepts", mix{timers: 60, entries: 60}},
		{"tasklets and execs", mix{urgent: 30, normal: 5, bulk: 40, execs: 40}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			const depth = 10
			l := newIdleLoop(t)
			l.SetTuning(depth, 16, Sched{Urgent: 33, Normal: 50, Bulk: 17})
			units := 0
			unit := func() { units++ }
			for c, k := range [nClasses]int{tc.urgent, tc.normal, tc.bulk} {
				for range k {
					tk := &Tasklet{Run: func(*Tasklet) { unit() }}
					l.Wake(tk, Class(c))
				}
			}
			for range tc.timers {
				l.Arm(&Timer{Run: func(*Timer) { unit() }}, 0)
			}
			for range tc.execs {
				l.Exec(func(*Loop) { unit() })
			}
			l.AddSource(&entrySource{n: tc.entries, units: &units})
			total := tc.urgent + tc.normal + tc.bulk + tc.timers + tc.execs + tc.entries
			for round := 0; units < total; round++ {
				if round > total {
					t.Fatalf("%d of %d units after %d rounds", units, total, round)
				}
				before := units
				l.now = monoNow()
				l.takeInbox()
				l.runClasses(l.now)
				if ran := units - before; ran > depth || ran == 0 {
					t.Fatalf("round %d ran %d units (depth %d)", round, ran, depth)
				}
			}
		})
	}
}

// TestClassBudgetFromWhatRan: each class is offered a share of what the
// classes before it really ran, not of what was queued: one urgent
// tasklet that unqueues the other urgent ones hands the rest of the
// urgent offer down (depth 10: urgent offered 4 runs 1, normal is offered
// ceil(9*50/67) = 7, bulk the remaining 2).
func TestClassBudgetFromWhatRan(t *testing.T) {
	l := newIdleLoop(t)
	l.SetTuning(10, 16, Sched{Urgent: 33, Normal: 50, Bulk: 17})
	var ran [nClasses]int
	var others [3]Tasklet
	first := &Tasklet{Run: func(*Tasklet) {
		ran[Urgent]++
		for i := range others {
			l.Unqueue(&others[i])
		}
	}}
	l.Wake(first, Urgent)
	for i := range others {
		others[i].Run = func(*Tasklet) { ran[Urgent]++ }
		l.Wake(&others[i], Urgent)
	}
	for c := Normal; c <= Bulk; c++ {
		for range 20 {
			cc := c
			l.Wake(&Tasklet{Run: func(*Tasklet) { ran[cc]++ }}, c)
		}
	}
	l.now = monoNow()
	l.runClasses(l.now)
	if ran != [nClasses]int{1, 7, 2} {
		t.Fatalf("ran %v, want [1 7 2]", ran)
	}
}

// TestDemoteMovesAnUrgentTaskletToBulk: a tasklet an fd event queued as
// Urgent and whose transfer then used its cap (Demote, from a run of
// another tasklet) runs once, in class Bulk, after the round's urgent and
// normal work; a Bulk tasklet keeps its place, and an fd event does not
// take a demoted one back to Urgent (Wake keeps the class).
func TestDemoteMovesAnUrgentTaskletToBulk(t *testing.T) {
	l := newIdleLoop(t)
	l.SetTuning(10, 16, Sched{Urgent: 33, Normal: 50, Bulk: 17})
	var order []string
	mk := func(name string) *Tasklet {
		return &Tasklet{Run: func(*Tasklet) { order = append(order, name) }}
	}
	xfer, other, bulk := mk("xfer"), mk("other"), mk("bulk")
	l.Wake(bulk, Bulk)
	l.Wake(xfer, Urgent) // its fd fired
	l.Wake(other, Urgent)
	l.Demote(xfer) // the other side's run spent xfer's budget
	l.Wake(xfer, Urgent)
	l.Demote(bulk) // already Bulk: keeps its place
	if !xfer.QueuedIn(Bulk) || xfer.QueuedIn(Urgent) {
		t.Fatal("a demoted tasklet is not queued in Bulk")
	}
	if u, n, b := l.Queued(); u != 1 || n != 0 || b != 2 {
		t.Fatalf("queued %d/%d/%d, want 1/0/2", u, n, b)
	}
	l.now = monoNow()
	l.runClasses(l.now)
	if got := strings.Join(order, " "); got != "other bulk xfer" {
		t.Fatalf("ran %q, want \"other bulk xfer\"", got)
	}
	if n := l.cTasklets; n != [nClasses]uint64{1, 0, 2} {
		t.Fatalf("runs per class %v, want [1 0 2]", n)
	}
	l.Demote(xfer) // idle: queued in Bulk
	if !xfer.QueuedIn(Bulk) {
		t.Fatal("Demote of an idle tasklet does not queue it")
	}
}

// A round that naps (tuning.poll_nap_us) and one that busy polls, each
// with an event to take, allocate nothing.
func TestRoundWithNapOrBusyPollAllocatesNothing(t *testing.T) {
	l := newIdleLoop(t)
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	if err := l.Register(&FD{Fd: p[0], T: &Tasklet{Run: func(*Tasklet) {}}}); err != nil {
		t.Fatal(err)
	}
	var b [1]byte
	for _, opt := range []struct{ nap, busy int }{{1, 0}, {0, 1000}} {
		l.SetPollNap(opt.nap)
		l.SetBusyPoll(opt.busy)
		tk := &Tasklet{}
		tk.Run = func(*Tasklet) {}
		if n := testing.AllocsPerRun(200, func() {
			// Work for the round (so that it naps or busy polls after
			// it), and an event for the nap or the busy poll to take.
			l.Wake(tk, Urgent)
			l.napOK, l.gap = true, 0
			if _, err := unix.Write(p[1], b[:]); err != nil {
				t.Fatal(err)
			}
			l.round()
			for {
				if _, err := unix.Read(p[0], b[:]); err != nil {
					break
				}
			}
		}); n != 0 {
			t.Fatalf("nap %d µs, busy poll %d µs: %v allocations per round", opt.nap, opt.busy, n)
		}
	}
	if l.cNaps == 0 || l.cBusyPolls == 0 {
		t.Fatalf("%d naps, %d busy polls: the rounds did not take the path measured", l.cNaps, l.cBusyPolls)
	}
}
