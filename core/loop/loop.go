package loop

import (
	"errors"
	"fmt"
	"os"
	"runtime"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// FD is embedded in a connection side (or an acceptor). On readiness the loop
// ORs the epoll event bits into Ready and wakes T in class Urgent. The owner
// clears the bits it consumed (e.g. EPOLLIN after read returned EAGAIN).
type FD struct {
	Fd    int
	T     *Tasklet
	Ready uint32
}

// Events registered by Register: edge-triggered, both directions, peer
// half-close reported.
const DefaultEvents = unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET

// Options configure a loop. The tuning values are used as given: the
// defaults are filled once, where a config enters (config.Config.Normalize),
// and the engine passes a normalized tuning; New refuses values a loop
// cannot run with.
type Options struct {
	ID            int
	RunqueueDepth int   // most tasklets per round (tuning.runqueue_depth), > 0
	Maxpollevents int   // most events per epoll_wait (tuning.maxpollevents), > 0
	Sched         Sched // class shares (tuning.sched), not all zero
	BusyPollUs    int   // µs a loop with nothing to run polls without sleeping first (tuning.busy_poll_us), 0 = off
	PollNapUs     int   // µs a loop whose events come fast naps before it polls (tuning.poll_nap_us), 0 = off
}

// Sched is the share of a round's budget, in percent, each class of
// tasklets is offered (tuning.sched; see Split). It has the fields of
// config.Sched, so one converts to the other.
type Sched struct {
	Urgent, Normal, Bulk int
}

// Source is polled once per round, first in the urgent class, with a
// budget of entries it may handle; Poll returns how many it handled. A
// Source that returns its whole budget is assumed to have more, and the
// loop then polls without sleeping. Accept rings are Sources.
//
// Pending tells, from any goroutine, whether the Source holds work (an
// accept ring that is not empty). The loop asks every Source before it
// sleeps, after announcing the sleep: that is how entries pushed by other
// threads while the loop goes to sleep, and entries a round gave it after
// its Poll (an Exec'd function, a timer or a normal or bulk tasklet runs
// after the Sources, and may add a Source or feed one), get polled without
// another wake-up.
type Source interface {
	Poll(l *Loop, budget int) int
	Pending() bool
}

// base is the origin of Now(): read once at start-up, never written, so that
// all loops share one time base (a timer value means the same on every loop).
var base = time.Now()

func monoNow() int64 { return int64(time.Since(base)) }

// Loop is one event loop: one OS thread, one epoll fd, one eventfd, the
// tasklets, timers and fds registered on it. See doc.go for thread rules.
type Loop struct {
	id   int
	epfd int
	evfd int

	// Cross-thread state.
	inbox    inbox
	notified atomic.Bool // an eventfd write is pending; coalesces Notify
	sleeping atomic.Bool // the loop is in (or about to enter) a blocking epoll_wait
	stopping atomic.Bool
	state    atomic.Int32 // stateNew, stateRunning, stateStopped
	act      *Activity

	// Loop-thread state.
	now     int64
	depth   int
	sched   Sched
	events  []unix.EpollEvent
	fds     []*FD
	rq      [nClasses]runq
	cur     Class // the class the round runs now (Class)
	timers  timerHeap
	sources []Source
	evbuf   [8]byte
	avgLoop float64 // ns, EWMA
	spare   bool    // spareP() as of spareAt-spareCheck: blocking polls keep the P
	spareAt int64
	busyNs  int64 // busy polling before a sleep (SetBusyPoll), 0 = off
	napNs   int64 // nap before a poll (SetPollNap), 0 = off
	// gap is how long the loop last waited, from the end of a round
	// that left nothing to run to the event or work that ended the wait
	// (ns); a loop naps only while gaps are short (napGaps naps).
	gap      int64
	idleFrom int64         // the end of the last round that did work
	napTs    unix.Timespec // the nap's length, for clock_nanosleep
	slack    bool          // the loop thread's timer slack is set (nap)
	// napOK: the last nap took at least napBatch events, or a sleep
	// since did (events come faster than one per wake-up).
	napOK bool
	// exec holds the Exec'd functions taken from the inbox and not run
	// yet (a round runs them within the normal class's budget), oldest
	// first; execTail is its last node.
	exec, execTail *execNode
	srcMore        bool // a Source used its whole budget: it may hold more
	// woke is when the last sleep ended (monoNow), read once there and
	// taken by the next round as its start, 0 if that round must read
	// the clock itself.
	woke int64

	// Counters accumulated on the loop thread, published once per round.
	cLoops, cPollIO, cWake, cTimers uint64
	cSleeps, cSleepNs, cNotified    uint64
	cBusyPolls, cBusyNs             uint64
	cNaps, cNapNs                   uint64
	cTasklets                       [nClasses]uint64
	cCPU                            [nClasses]uint64 // ns spent running each class
}

const (
	stateNew int32 = iota
	stateRunning
	stateStopped
)

// New creates a loop's epoll fd and eventfd. It does not start the loop.
func New(o Options) (*Loop, error) {
	if o.RunqueueDepth <= 0 || o.Maxpollevents <= 0 || o.Sched == (Sched{}) {
		// A depth of 0 runs no tasklet, 0 events is EINVAL from epoll_wait,
		// all shares 0 starve urgent: a tuning that skipped Normalize.
		return nil, fmt.Errorf("loop %d: runqueue depth %d, maxpollevents %d and sched %+v must be set (config.Normalize)",
			o.ID, o.RunqueueDepth, o.Maxpollevents, o.Sched)
	}
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("epoll_create1", err)
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, os.NewSyscallError("eventfd", err)
	}
	// Level-triggered: the loop reads the counter back to zero on each event.
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(evfd)
		unix.Close(epfd)
		return nil, os.NewSyscallError("epoll_ctl", err)
	}
	l := &Loop{id: o.ID, epfd: epfd, evfd: evfd, act: new(Activity), now: monoNow()}
	l.SetTuning(o.RunqueueDepth, o.Maxpollevents, o.Sched)
	l.SetBusyPoll(o.BusyPollUs)
	l.SetPollNap(o.PollNapUs)
	return l, nil
}

// ID is the loop's index (thread number).
func (l *Loop) ID() int { return l.id }

// Activity returns the loop's counters; any goroutine may read them.
func (l *Loop) Activity() *Activity { return l.act }

// Now is the monotonic time in nanoseconds, refreshed at the start of each
// round (loop thread) — cheap and identical for everything run in a round.
func (l *Loop) Now() int64 { return l.now }

// Running reports whether Run is executing (any goroutine).
func (l *Loop) Running() bool { return l.state.Load() == stateRunning }

// SetTuning changes the round budget, the events per poll and the class
// shares, as given (the values New accepts: a validated, normalized
// tuning). Loop thread (or before Run); reach it with Exec from elsewhere.
func (l *Loop) SetTuning(depth, maxpollevents int, s Sched) {
	l.depth, l.sched = depth, s
	if cap(l.events) < maxpollevents {
		l.events = make([]unix.EpollEvent, maxpollevents)
	}
	l.events = l.events[:maxpollevents]
}

// SetBusyPoll sets how long, in µs, a loop that has nothing left to run
// polls without sleeping before it sleeps (tuning.busy_poll_us; 0 = off,
// negative values too). Loop thread (or before Run).
//
// HAProxy's busy-polling (ev_epoll.c, _do_poll: epoll_wait with a zero
// timeout again and again until an event, a wake-up or the next timer):
// a sleeping loop's CPU goes idle, and whoever wakes it pays for the
// wake-up (a reschedule IPI; in a VM, an exit on both sides) and waits for
// it; a polling one takes the next event at once, and producers on other
// threads skip the eventfd write (Notify sees it awake). The price is the
// CPU spent polling, charged to the proxy: off by default, bounded here so
// that an idle loop still sleeps.
func (l *Loop) SetBusyPoll(us int) {
	l.busyNs = int64(max(us, 0)) * int64(time.Microsecond)
}

// SetPollNap sets how long, in µs, a loop naps before it polls when it
// has nothing left to run and its events come fast (tuning.poll_nap_us; 0
// = off, negative values too). Loop thread (or before Run).
//
// A loop that sleeps in epoll_wait is woken by the first event: the CPU
// that queued it (the softirq of a peer's write, on another CPU) pays for
// the wake-up (an IPI to an idle CPU; in a VM, an exit), and the loop
// takes that one event in a round. Where events come faster than the
// loop's rounds end, that is one wake-up, one round and one epoll_wait
// per event, and each of the loop's writes wakes a peer with one reply.
// A nap is a sleep on the loop's own timer (clock_nanosleep, the thread's
// timer slack set to 1 ns) with no epoll waiter, so an event that comes
// meanwhile wakes nobody; the poll after it takes all of them in one
// round, as a NIC coalesces interrupts. The price is up to the nap's
// length of latency per hop: a loop naps only after a round that did
// work and while its last wait was shorter than napGaps naps (the next
// event is near), so an idle or lightly loaded loop sleeps as without it.
//
// A nap pays only if it gathers: one that took fewer than napBatch events
// (a single client's ping-pong, a lone transfer) stops the naps until a
// sleep wakes to napBatch events or more, so a loop whose events come one
// at a time sleeps as without it.
func (l *Loop) SetPollNap(us int) {
	l.napNs = int64(max(us, 0)) * int64(time.Microsecond)
	l.napTs = unix.NsecToTimespec(l.napNs)
	l.napOK = true
}

// napGaps: a loop naps while its last wait was shorter than this many
// naps. napBatch: the events a nap (or a sleep, to start napping again)
// must take for the naps to go on.
const (
	napGaps  = 4
	napBatch = 2
)

// Tuning returns the values in force (loop thread).
func (l *Loop) Tuning() (depth, maxpollevents int, s Sched) {
	return l.depth, len(l.events), l.sched
}

// Exec queues fn to run on the loop thread at its next round (control path:
// it allocates one node). Any goroutine, including the loop itself. It
// returns false if the loop has stopped and fn will never run; true means fn
// will run, at the latest in the final drain when Run returns.
func (l *Loop) Exec(fn func(l *Loop)) bool {
	if !l.inbox.push(fn) {
		return false
	}
	l.Notify()
	return true
}

// Notify interrupts epoll_wait. Any goroutine. It writes the eventfd only
// when the loop sleeps (or is about to): an awake loop checks its inbox and
// Sources before it sleeps again (see round). Calls are coalesced: until the
// loop has consumed a wake-up, further Notify calls cost atomic loads.
func (l *Loop) Notify() {
	if !l.sleeping.Load() || l.notified.Load() || l.notified.Swap(true) {
		return
	}
	if l.state.Load() == stateStopped {
		return
	}
	var one = [8]byte{1}
	for {
		_, err := unix.Write(l.evfd, one[:])
		if err != unix.EINTR {
			// EAGAIN means the counter is saturated: a wake-up is pending anyway.
			return
		}
	}
}

// Stop asks Run to return at the end of the current round. Any goroutine.
func (l *Loop) Stop() {
	l.stopping.Store(true)
	l.Notify()
}

// Close releases the epoll fd and the eventfd. Call it once, after Run has
// returned (or if Run was never called), when no goroutine uses l any more.
// Functions Exec'd to a loop that never ran are run here, on the caller's
// goroutine, before the fds close: Exec's promise holds and nobody waiting
// for them hangs.
func (l *Loop) Close() error {
	l.state.Store(stateStopped)
	for n := l.inbox.take(true); n != nil; n = n.next {
		n.fn(l)
	}
	return errors.Join(unix.Close(l.evfd), unix.Close(l.epfd))
}

// Class is the class of the work running now (loop thread): Urgent for
// I/O tasklets and Sources, Normal for tasklets woken as Normal, Exec'd
// functions and timers, Bulk for self-waking transfers. A tasklet that
// finds an outcome to decide during an I/O run (a connect's result)
// requeues itself as Normal with it (seed 000: decisions are Normal).
func (l *Loop) Class() Class { return l.cur }

// Wake queues t in class c unless it is already queued (then it keeps its
// place and class). Loop thread only; no allocation.
func (l *Loop) Wake(t *Tasklet, c Class) {
	if t.queued != 0 {
		return
	}
	if c >= nClasses {
		c = Bulk
	}
	t.queued = uint8(c) + 1
	l.rq[c].push(t)
	l.cWake++
}

// Demote queues t in class Bulk, moving it there (to the tail) if it
// waits in another class: t's owner used its share of the round (a
// transfer past its per-run byte cap, HAProxy's TASK_SELF_WAKING), and an
// I/O event that queued it as Urgent before must not give it another full
// run in the urgent class. Its readiness bits stay in FD.Ready for the
// Bulk run. A Bulk tasklet keeps its place. Loop thread only; no
// allocation.
func (l *Loop) Demote(t *Tasklet) {
	switch t.queued {
	case uint8(Bulk) + 1:
		return
	case 0:
	default:
		l.rq[t.queued-1].remove(t)
	}
	t.queued = uint8(Bulk) + 1
	l.rq[Bulk].push(t)
	l.cWake++
}

// Unqueue removes t from its run queue if it is queued (e.g. its owner is
// being freed). Loop thread only.
func (l *Loop) Unqueue(t *Tasklet) {
	if t.queued != 0 {
		l.rq[t.queued-1].remove(t)
	}
}

// Queued returns the run-queue lengths per class (loop thread).
func (l *Loop) Queued() (urgent, normal, bulk int) {
	return l.rq[Urgent].n, l.rq[Normal].n, l.rq[Bulk].n
}

// Register adds f.Fd to the loop's epoll set with DefaultEvents. Loop thread.
func (l *Loop) Register(f *FD) error { return l.RegisterEvents(f, DefaultEvents) }

// RegisterEvents is Register with explicit epoll events, e.g. a level-
// triggered EPOLLIN|EPOLLEXCLUSIVE for a listening socket shared by loops.
// Loop thread.
func (l *Loop) RegisterEvents(f *FD, events uint32) error {
	if f.Fd < 0 {
		return os.NewSyscallError("epoll_ctl", unix.EBADF)
	}
	if f.Fd >= len(l.fds) {
		n := max(2*len(l.fds), 64, f.Fd+1)
		fds := make([]*FD, n)
		copy(fds, l.fds)
		l.fds = fds
	}
	ev := unix.EpollEvent{Events: events, Fd: int32(f.Fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_ADD, f.Fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	l.fds[f.Fd] = f
	return nil
}

// ModifyEvents changes the epoll events of the registered f.Fd
// (EPOLL_CTL_MOD); the kernel polls the fd again, so a readiness already
// there is reported at the next poll. Loop thread.
func (l *Loop) ModifyEvents(f *FD, events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(f.Fd)}
	if err := unix.EpollCtl(l.epfd, unix.EPOLL_CTL_MOD, f.Fd, &ev); err != nil {
		return os.NewSyscallError("epoll_ctl", err)
	}
	return nil
}

// Unregister removes f.Fd from the epoll set; call it before close(fd).
// Readiness already collected stays in f.Ready; a queued f.T stays queued
// (use Unqueue). Loop thread.
func (l *Loop) Unregister(f *FD) {
	if f.Fd < 0 || f.Fd >= len(l.fds) || l.fds[f.Fd] != f {
		return
	}
	l.fds[f.Fd] = nil
	// ENOENT/EBADF: already gone (closed elsewhere); nothing to undo.
	_ = unix.EpollCtl(l.epfd, unix.EPOLL_CTL_DEL, f.Fd, nil)
}

// Forget is Unregister without the epoll_ctl call, for an fd the caller
// closes right away and that nothing else holds (not dup'd, not inherited:
// the process does not fork). close(2) then takes the fd out of the epoll
// set, since epoll drops an entry when the last reference to its file
// goes; EPOLL_CTL_DEL first is one syscall per fd for nothing. Loop thread.
func (l *Loop) Forget(f *FD) {
	if f.Fd >= 0 && f.Fd < len(l.fds) && l.fds[f.Fd] == f {
		l.fds[f.Fd] = nil
	}
}

// Arm sets t to fire at `at` (Now() units), re-arming it if armed. Loop thread.
func (l *Loop) Arm(t *Timer, at int64) { l.timers.arm(t, at) }

// Disarm cancels t if armed. Loop thread.
func (l *Loop) Disarm(t *Timer) { l.timers.disarm(t) }

// AddSource adds s to the sources polled each round. Loop thread.
func (l *Loop) AddSource(s Source) {
	for _, x := range l.sources {
		if x == s {
			return
		}
	}
	l.sources = append(l.sources, s)
}

// RemoveSource removes s. Loop thread.
func (l *Loop) RemoveSource(s Source) {
	for i, x := range l.sources {
		if x == s {
			l.sources = append(l.sources[:i], l.sources[i+1:]...)
			return
		}
	}
}

// Run runs rounds on the calling goroutine, locked to its OS thread, until
// Stop. It then runs the functions still in the inbox (so that Exec's
// promise holds) and returns. Run may be called once.
func (l *Loop) Run() {
	if !l.state.CompareAndSwap(stateNew, stateRunning) {
		panic(fmt.Sprintf("loop %d: Run called twice or after Close", l.id))
	}
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	running.Add(1)
	defer running.Add(-1)
	for !l.stopping.Load() {
		l.round()
	}
	l.state.Store(stateStopped)
	for n := l.exec; n != nil; n = n.next {
		n.fn(l)
	}
	l.exec, l.execTail = nil, nil
	for n := l.inbox.take(true); n != nil; n = n.next {
		n.fn(l)
	}
	l.publish()
}

// round is one iteration. Every unit of work it does is inside the
// budget of one class (seed 000, HAProxy's process_runnable_tasks), and a
// round does at most depth units:
//
//  1. refresh Now(); take the Exec'd functions out of the inbox (they wait
//     in l.exec for their turn);
//  2. urgent, offered ceil(depth*U/100): the Sources (accept rings, the
//     queue's grants: hand-offs from other threads, one unit per entry),
//     then the tasklets woken by I/O readiness;
//  3. normal, offered ceil(left*N/(N+B)) of what urgent really left: the
//     Exec'd functions (control path, handshakes handed back), the expired
//     timers (as HAProxy queues expired tasks in its run queue: a Timer's
//     Run is one unit, and what it wakes runs in its own class), then the
//     tasklets woken as Normal;
//  4. bulk, offered what normal really left: the self-waking transfers;
//  5. poll: without sleeping if work is left, else until the next timer;
//  6. dispatch events: OR bits into FD.Ready, Wake(FD.T, Urgent).
//
// Each offer is computed from what the classes before really ran, so a
// class that runs less than its offer (its queue emptied, a tasklet
// unqueued mid-round) hands the rest down. The time each class takes is
// counted (Activity.CPUNs): the seed's TC0/TC1/TC2 shares.
func (l *Loop) round() {
	start := l.woke
	if start == 0 {
		start = monoNow()
	}
	l.woke = 0
	l.now = start
	busy := false
	l.takeInbox()
	ran0 := l.cTasklets[Urgent] + l.cTasklets[Normal] + l.cTasklets[Bulk]
	end := l.runClasses(start)
	worked := l.cTasklets[Urgent]+l.cTasklets[Normal]+l.cTasklets[Bulk] != ran0

	if l.rq[Urgent].n+l.rq[Normal].n+l.rq[Bulk].n > 0 || l.exec != nil || !l.inbox.empty() ||
		l.srcMore || l.timerDue() || l.stopping.Load() {
		busy = true
	}
	timeout := 0
	if !busy {
		timeout = l.pollTimeout(end)
	}
	l.cLoops++
	l.avgLoop += (float64(end-start) - l.avgLoop) / 16
	l.publish()

	if worked {
		l.idleFrom = end // the wait starts; rounds that run nothing (EINTR) do not restart it
	}
	idle := l.idleFrom
	// Busy polling and naps follow work: a round that ran nothing (its
	// sleep cut by the runtime's preemption signal every 10-20 ms, see
	// epollWait) sleeps again at once, or an idle loop would poll busyNs
	// of every such interval (from 20 ms up, all the time).
	if timeout != 0 && l.busyNs > 0 && worked {
		var got bool
		if got, end = l.busyPoll(timeout); got {
			l.woke, l.gap = end, end-idle // the next round starts now
			return                        // an event or work came while polling: no sleep
		}
	}
	if timeout != 0 && l.napNs > 0 && worked && l.napOK && l.gap < napGaps*l.napNs {
		var got bool
		if got, end = l.nap(timeout, end); got {
			l.woke, l.gap = end, end-idle
			return // events or work came during the nap: no sleep
		}
	}
	announced := timeout != 0
	if announced {
		// Announce the sleep, then look again for work queued by other
		// threads. A producer queues, then reads sleeping: either it sees
		// true and writes the eventfd, or we see its work here (both sides
		// use sequentially consistent atomics). Notify skips the write
		// for a loop that is awake, so a busy loop costs producers nothing.
		l.sleeping.Store(true)
		if !l.inbox.empty() || l.stopping.Load() || l.sourcesPending() {
			timeout = 0
		}
	}
	if l.poll(timeout, end) && l.woke != 0 {
		l.gap = l.woke - idle // the sleep ended with events; the nap and busy poll before it count
	}
	if announced {
		l.sleeping.Store(false)
	}
}

// busyPoll polls without sleeping, for at most busyNs and not past the
// sleep's timeout (ms, -1 = none), until an event comes (dispatched) or
// work is queued by another thread (the inbox, a Source, Stop: the loop is
// not announced asleep, so their producers do not write the eventfd, and
// it looks itself); it reports whether one did, and when it stopped
// (monoNow). Then the loop sleeps as without it.
func (l *Loop) busyPoll(timeout int) (bool, int64) {
	start := monoNow()
	end := start + l.busyNs
	if timeout > 0 {
		end = min(end, start+int64(timeout)*int64(time.Millisecond))
	}
	l.cBusyPolls++
	for {
		n, err := epollWait(l.epfd, l.events, 0, false)
		got := err == nil && n > 0
		if got {
			l.dispatch(l.events[:n])
		} else {
			got = !l.inbox.empty() || l.stopping.Load() || l.sourcesPending()
		}
		now := monoNow()
		if got || now >= end {
			l.cBusyNs += uint64(now - start)
			return got, now
		}
	}
}

// nap sleeps on the loop thread's own timer for napNs, not past the
// sleep's timeout (ms, -1 = none), then polls without sleeping (see
// SetPollNap); it reports whether an event (dispatched) or work queued by
// another thread (unannounced, as in busyPoll) came, and when it stopped
// (monoNow). start is when the round ended.
func (l *Loop) nap(timeout int, start int64) (bool, int64) {
	if !l.slack {
		// The default slack (50 µs) would stretch every nap by that
		// much: a thread's slack is its own, and the loop's goroutine
		// is locked to this thread for as long as the loop runs.
		_ = unix.Prctl(unix.PR_SET_TIMERSLACK, 1, 0, 0, 0)
		l.slack = true
	}
	ts := l.napTs
	if timeout > 0 && int64(timeout)*int64(time.Millisecond) < l.napNs {
		ts = unix.Timespec{Nsec: int64(timeout) * int64(time.Millisecond)}
	}
	// Raw: the nap is µs long, the P stays with the loop. EINTR (the
	// runtime's preemption signal) ends it early, as any event would.
	unix.RawSyscall6(unix.SYS_CLOCK_NANOSLEEP, unix.CLOCK_MONOTONIC, 0, uintptr(unsafe.Pointer(&ts)), 0, 0, 0)
	l.cNaps++
	n, err := epollWait(l.epfd, l.events, 0, false)
	got := err == nil && n > 0
	l.napOK = got && n >= napBatch
	if got {
		l.dispatch(l.events[:n])
	} else {
		got = !l.inbox.empty() || l.stopping.Load() || l.sourcesPending()
	}
	now := monoNow()
	l.cNapNs += uint64(now - start)
	return got, now
}

// runClasses runs the three classes within the round's depth (steps 2-4
// above), from start (monoNow), and returns when it ended.
func (l *Loop) runClasses(start int64) int64 {
	left := l.depth
	l.cur = Urgent
	// A class that ran nothing took no time worth a clock read (a
	// vDSO call of 30-50 ns here; a round per request reads it often).
	ran := l.runUrgent(urgentOffer(left, l.sched))
	t1 := start
	if ran > 0 {
		t1 = monoNow()
	}
	l.cCPU[Urgent] += uint64(t1 - start)
	left -= ran
	l.cur = Normal
	ran = l.runNormal(normalOffer(left, l.sched))
	t2 := t1
	if ran > 0 {
		t2 = monoNow()
	}
	l.cCPU[Normal] += uint64(t2 - t1)
	left -= ran
	l.cur = Bulk
	end := t2
	if l.runQueue(Bulk, left) > 0 {
		end = monoNow()
	}
	l.cur = Urgent
	l.cCPU[Bulk] += uint64(end - t2)
	return end
}

// takeInbox appends the inbox's functions to l.exec, oldest first.
func (l *Loop) takeInbox() {
	n := l.inbox.take(false)
	if n == nil {
		return
	}
	if l.exec == nil {
		l.exec = n
	} else {
		l.execTail.next = n
	}
	for n.next != nil {
		n = n.next
	}
	l.execTail = n
}

// timerDue: the earliest timer has expired.
func (l *Loop) timerDue() bool { return len(l.timers) > 0 && l.timers[0].when <= l.now }

// runUrgent runs up to offer units of the urgent class: the Sources first,
// with the offer less what the queued I/O tasklets need of it (at least
// half the offer is left to them when both wait), then the tasklets. It
// returns the units run.
func (l *Loop) runUrgent(offer int) int {
	done := 0
	l.srcMore = false
	if len(l.sources) > 0 && offer > 0 {
		budget := offer - min(l.rq[Urgent].n, offer/2)
		for i := 0; i < len(l.sources); i++ {
			b := budget - done
			if b <= 0 {
				l.srcMore = true // not polled this round: maybe work waits
				break
			}
			if k := l.sources[i].Poll(l, b); k >= b {
				done += b
				l.srcMore = true
			} else {
				done += k
			}
		}
		l.cTasklets[Urgent] += uint64(done)
	}
	return done + l.runQueue(Urgent, offer-done)
}

// runNormal runs up to offer units of the normal class: the Exec'd
// functions, the expired timers, then the tasklets woken as Normal, each
// one unit. It returns the units run.
func (l *Loop) runNormal(offer int) int {
	done := 0
	for done < offer && l.exec != nil {
		n := l.exec
		if l.exec = n.next; l.exec == nil {
			l.execTail = nil
		}
		n.next = nil
		done++
		n.fn(l)
	}
	for done < offer && l.timerDue() {
		t := l.timers[0]
		l.timers.disarm(t)
		l.cTimers++
		done++
		t.Run(t)
	}
	l.cTasklets[Normal] += uint64(done)
	return done + l.runQueue(Normal, offer-done)
}

// sourcesPending: a Source holds work (see Source.Pending).
func (l *Loop) sourcesPending() bool {
	for _, s := range l.sources {
		if s.Pending() {
			return true
		}
	}
	return false
}

// runQueue runs up to budget tasklets of class c, oldest first, and
// returns how many ran. A tasklet woken while the round runs is queued at
// the tail and may run in this round if the budget is not used up, else
// in the next one.
func (l *Loop) runQueue(c Class, budget int) int {
	q := &l.rq[c]
	done := 0
	for ; done < budget; done++ {
		t := q.pop()
		if t == nil {
			break
		}
		t.Run(t)
	}
	l.cTasklets[c] += uint64(done)
	return done
}

// pollTimeout is the epoll_wait timeout in ms from now (monoNow): until
// the earliest timer, rounded up so the loop does not wake before it, or
// -1 with no timer.
func (l *Loop) pollTimeout(now int64) int {
	if len(l.timers) == 0 {
		return -1
	}
	d := l.timers[0].when - now
	if d <= 0 {
		return 0
	}
	ms := (d + int64(time.Millisecond) - 1) / int64(time.Millisecond)
	if ms > 1<<30 {
		ms = 1 << 30
	}
	return int(ms)
}

// poll waits for events for at most timeout ms (-1: no limit, 0: does not
// sleep) and dispatches them; now is monoNow() at the end of the round. It
// reports whether it dispatched any.
func (l *Loop) poll(timeout int, now int64) bool {
	var n int
	var err error
	holdP := false
	var slept int64
	if timeout != 0 {
		// runtime.GOMAXPROCS takes the scheduler's lock: look again at
		// most every spareCheck, not at every sleep.
		if l.now >= l.spareAt {
			l.spare, l.spareAt = spareP(), l.now+spareCheck
		}
		holdP = l.spare
		l.cSleeps++
		slept = now
	}
	for {
		n, err = epollWait(l.epfd, l.events, timeout, holdP)
		if err != unix.EINTR {
			break
		}
		timeout = 0 // interrupted by a signal: do not sleep again, start a round
	}
	if slept != 0 {
		l.woke = monoNow()
		l.cSleepNs += uint64(l.woke - slept)
	}
	if err != nil || n <= 0 {
		return false
	}
	if n >= napBatch {
		l.napOK = true
	}
	l.dispatch(l.events[:n])
	return true
}

// running counts the loops inside Run in this process. It is process-wide
// on purpose: it is weighed against GOMAXPROCS, which is process-wide too.
var running atomic.Int32

// spareCheck is how often a loop re-evaluates spareP.
const spareCheck = int64(100 * time.Millisecond)

// spareP reports whether GOMAXPROCS leaves at least one P to the goroutines
// that are not loops (admin API, health checks, GC workers, timers) while
// every loop holds its own. The engine sets GOMAXPROCS to nbthread+1.
func spareP() bool { return runtime.GOMAXPROCS(0) > int(running.Load()) }

// epollWait is epoll_pwait without a signal mask. A poll that cannot block
// (timeout 0, the busy case) is a raw syscall: no scheduler hand-off for a
// call that returns at once.
//
// A blocking poll is raw too when a spare P exists (holdP). Through
// Syscall6, sysmon finds the loop's P "in a syscall" and, since a locked
// loop goroutine never passes through schedule(), its scheduling tick looks
// 10 ms stale: sysmon retakes the P at each of its ticks while the loop
// sleeps, and each retake resets sysmon's own sleep to 20 µs. Measured
// (make bench's ka row, perf record -e raw_syscalls:sys_enter): 600-900
// sysmon nanosleeps per second, 4.3% of the proxy's CPU (perf record -g).
// Raw, the P stays with the loop; sysmon sees a running goroutine, preempts
// it with a signal every 10 ms (epoll_wait returns EINTR, the round goes on)
// and otherwise backs off to 10 ms sleeps. Without a spare P, a raw sleep
// would leave other goroutines only those 10 ms preemption slots (tests with
// more loops than Ps crawl), so the blocking Syscall6 stays.
func epollWait(epfd int, evs []unix.EpollEvent, timeout int, holdP bool) (int, error) {
	p := unsafe.Pointer(&evs[0])
	var r uintptr
	var e unix.Errno
	if timeout == 0 || holdP {
		r, _, e = unix.RawSyscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(p), uintptr(len(evs)), uintptr(timeout), 0, 0)
	} else {
		r, _, e = unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(epfd), uintptr(p), uintptr(len(evs)), uintptr(timeout), 0, 0)
	}
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// dispatch handles one batch of epoll events: a slice lookup by fd, no map.
func (l *Loop) dispatch(evs []unix.EpollEvent) {
	l.cPollIO += uint64(len(evs))
	for i := range evs {
		fd := int(evs[i].Fd)
		if fd == l.evfd {
			// Read the counter back to zero, then clear the flag. In this
			// order a Notify racing with us either saw the flag still set
			// (its work was queued before, and the next round, which starts
			// after the clear, sees it) or writes again after the clear.
			// Clearing first could let the read swallow a write whose
			// Notify then left the flag set with no event pending: a lost
			// wake-up.
			_, _ = unix.Read(l.evfd, l.evbuf[:])
			l.notified.Store(false)
			l.cNotified++
			continue
		}
		if fd >= len(l.fds) {
			continue
		}
		f := l.fds[fd]
		if f == nil {
			continue // unregistered since the kernel queued the event
		}
		f.Ready |= evs[i].Events
		if f.T != nil {
			l.Wake(f.T, Urgent)
		}
	}
}

// publish stores the counters that changed since the last publish: an
// atomic store is an XCHG on amd64 (a full barrier, 20-odd cycles), a load
// a plain MOV, and a round of the keep-alive row changes half of them.
func (l *Loop) publish() {
	a := l.act
	set(&a.Loops, l.cLoops)
	set(&a.PollIO, l.cPollIO)
	set(&a.WakeTasks, l.cWake)
	set(&a.Timers, l.cTimers)
	for c := range nClasses {
		set(&a.Tasklets[c], l.cTasklets[c])
		set(&a.CPUNs[c], l.cCPU[c])
	}
	set(&a.AvgLoopUs, uint64(l.avgLoop/1e3))
	set(&a.Sleeps, l.cSleeps)
	set(&a.SleepNs, l.cSleepNs)
	set(&a.Notified, l.cNotified)
	set(&a.BusyPolls, l.cBusyPolls)
	set(&a.BusyPollNs, l.cBusyNs)
	set(&a.Naps, l.cNaps)
	set(&a.NapNs, l.cNapNs)
}

// set stores v in c unless c holds it (only the loop writes c).
func set(c *atomic.Uint64, v uint64) {
	if c.Load() != v {
		c.Store(v)
	}
}
