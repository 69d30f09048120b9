package listen

import (
	"bytes"
	"net"
	"net/netip"
	"os"
	"runtime"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Moving a listener to a group over more loops keeps what waits in the
// kernel backlog (the socket is duplicated, never closed) and spreads new
// connections over the new loops.
func TestAdoptMovesAListenerWithoutLosingItsBacklog(t *testing.T) {
	big := startGroup(t, 3, 0)
	small := NewGroup(big.Loops()[:1], 0, distribution(t, "", 0))
	s := newSink(t, big)
	ln, err := small.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, "owner", s.accept)
	if err != nil {
		t.Fatal(err)
	}
	ln.Pause()
	waitPaused(t, ln)
	dialN(t, ln.Addr().String(), 5) // in the backlog: nobody accepts

	moved, err := big.Adopt(ln, nil, "owner2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if !moved.Paused() || moved.Addr() != ln.Addr() || moved.Owner != "owner2" || moved.Group() != big {
		t.Fatalf("adopted listener: paused %v addr %v owner %v", moved.Paused(), moved.Addr(), moved.Owner)
	}
	ln.Close()
	small.Retire()
	moved.Resume()
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 5 }, "the 5 connections of the backlog")

	big.SetDistribution(distribution(t, config.DistRoundRobin, 0))
	dialN(t, moved.Addr().String(), 30)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 35 }, "30 more")
	for id, n := range s.counts(3) {
		if n == 0 {
			t.Errorf("loop %d got no connection after the move: %v", id, s.counts(3))
		}
	}
}

// Retire (unlike Close) never closes a connection: what was handed off
// stays with its AcceptFunc.
func TestRetireIsIdempotentAndClosesNothingHandedOff(t *testing.T) {
	big := startGroup(t, 2, 0)
	g := NewGroup(big.Loops(), 0, distribution(t, "", 0))
	s := newSink(t, big)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	dialN(t, ln.Addr().String(), 10)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 10 }, "accepted")
	ln.Close()
	g.Retire()
	g.Retire() // idempotent
	if n := s.total.Load(); n != 10 {
		t.Fatalf("%d connections handed off, want 10", n)
	}
}

func TestAdoptRefusesAClosedListener(t *testing.T) {
	g := startGroup(t, 1, 0)
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := g.Adopt(ln, nil, nil, nil); err == nil {
		t.Fatal("adopting a closed listener succeeded")
	}
	if _, err := g.Adopt(ln, []int{5}, nil, nil); err == nil {
		t.Fatal("thread out of range accepted")
	}
}

// greetAndClose is an AcceptFunc that writes one byte and closes: a client
// that reads the byte knows its connection was accepted.
func greetAndClose(_ *loop.Loop, fd int, _ netip.AddrPort, ln *Listener) {
	_, _ = unix.Write(fd, []byte{'a'})
	closeFd(fd)
	ln.Release()
}

// Moving a listener back and forth between groups of 4 and 2 loops (each
// registering with EPOLLEXCLUSIVE) while a client opens one connection at a
// time, as the engine does on an nbthread change (Adopt, then Close of the
// old listener, then Retire): every connection is accepted at once. The
// client waits for each connection before it opens the next, so one whose
// wake-up is lost stays in the backlog: nothing else arrives to wake a loop
// (TestPinNbthreadUnderTrafficNoFailure, issue 12). With the old listener
// still registered while the new one registers, 25 connections stalled in
// every run, within 105 to 214 moves (see Adopt).
func TestAdoptUnderTrafficLosesNoWakeUp(t *testing.T) {
	loops := looptest.Run(t, 0, 4, nil)
	dist := distribution(t, config.DistRoundRobin, 0)
	cur := NewGroup(loops[:2], 0, dist)
	ln, err := cur.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, greetAndClose)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { ln.Close(); cur.Close() }()
	addr := ln.Addr().String()

	const stall = 500 * time.Millisecond // an accept takes microseconds
	var ok, stalls atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	deadline := time.Now().Add(20 * time.Second)
	go func() {
		defer close(done)
		buf := make([]byte, 1)
		for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				continue // counted as neither: the loop below waits for ok
			}
			c.SetReadDeadline(time.Now().Add(stall))
			if _, err := c.Read(buf); err != nil {
				stalls.Add(1)
			} else {
				ok.Add(1)
			}
			c.Close()
		}
	}()
	defer func() { close(stop); <-done }()

	moves := 0
	for ; moves < 300 && stalls.Load() < 3 && time.Now().Before(deadline.Add(-3*time.Second)); moves++ {
		n := 4
		if moves%2 == 1 {
			n = 2
		}
		g := NewGroup(loops[:n], 0, dist)
		moved, err := g.Adopt(ln, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close() // as the engine: right after Adopt
		cur.Retire()
		ln, cur = moved, g
		from, s0 := ok.Load(), stalls.Load()
		testutil.Eventually(t, 5*time.Second, func() bool { return ok.Load() >= from+3 || stalls.Load() > s0 }, "traffic flows")
	}
	if n := stalls.Load(); n > 0 {
		t.Fatalf("%d of %d connections waited %v in the backlog (not accepted) within %d moves", n, n+ok.Load(), stall, moves)
	}
	t.Logf("%d connections over %d moves, none waited", ok.Load(), moves)
}

// The kernel behaviour behind Adopt's order, on raw epoll instances: a
// connection's wake-up goes to the first EPOLLEXCLUSIVE entry of the
// socket's wait queue whose epoll has a thread asleep in epoll_wait, and to
// no later exclusive entry; deleting the entry that took it loses it, though
// the connection waits in the backlog; an entry added afterwards polls the
// socket and reports it. (A non-exclusive entry, added at the head of the
// queue, sees every connection: why registering adopted listeners without
// the flag hid the loss.) ep0 plays an old listener's registration on a
// sleeping loop, ep1 the adopted duplicate's, registered after it.
func TestEpollExclusiveWakeUpDiesWithItsEntry(t *testing.T) {
	sa, family, err := sockaddr("127.0.0.1", 0)
	if err != nil {
		t.Fatal(err)
	}
	sock, err := openSocket(sa, family, 16, false)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFd(sock)
	addr, err := boundAddr(sock)
	if err != nil {
		t.Fatal(err)
	}
	dup, err := unix.FcntlInt(uintptr(sock), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer closeFd(dup)
	epoll := func(fd int, events uint32) int {
		t.Helper()
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { closeFd(ep) })
		if fd >= 0 {
			if err := unix.EpollCtl(ep, unix.EPOLL_CTL_ADD, fd, &unix.EpollEvent{Events: events, Fd: int32(fd)}); err != nil {
				t.Fatal(err)
			}
		}
		return ep
	}
	ready := func(ep int) int {
		t.Helper()
		var evs [4]unix.EpollEvent
		n, err := unix.EpollWait(ep, evs[:], 0)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	// accept drains the backlog, so that each attempt starts empty.
	accept := func() int {
		n := 0
		for {
			fd, errno := accept4(sock)
			if errno != 0 {
				return n
			}
			closeFd(fd)
			n++
		}
	}
	const excl = unix.EPOLLIN | unix.EPOLLEXCLUSIVE

	// The waiter on ep0 must be asleep when the connection arrives; a
	// signal (the runtime preempts with SIGURG) can take it out for a
	// moment, then both entries get the event: such an attempt proves
	// nothing and is made again.
	for attempt := range 20 {
		ep0 := epoll(sock, excl)
		ep1 := epoll(dup, excl)
		epAll := epoll(dup, unix.EPOLLIN) // non-exclusive, added last

		tidc := make(chan int, 1)
		woke := make(chan int, 1)
		go func() {
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			tidc <- unix.Gettid()
			var evs [1]unix.EpollEvent
			r, _, e := unix.Syscall6(unix.SYS_EPOLL_PWAIT, uintptr(ep0), uintptr(unsafe.Pointer(&evs[0])), 1, 5000, 0, 0)
			if e != 0 {
				woke <- -1
				return
			}
			woke <- int(r)
		}()
		tid := <-tidc
		testutil.Eventually(t, 5*time.Second, func() bool { return asleepIn(tid, unix.SYS_EPOLL_PWAIT) }, "the waiter asleep in epoll_pwait")

		c, err := net.DialTimeout("tcp", addr.String(), 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		var n0 int
		select {
		case n0 = <-woke:
		case <-time.After(5 * time.Second):
			t.Fatal("the thread asleep on ep0 was not woken by the connection")
		}
		if n1 := ready(ep1); n0 != 1 || n1 != 0 {
			t.Logf("attempt %d: ep0's waiter got %d events, ep1 has %d ready: the waiter was not asleep, again", attempt, n0, n1)
			c.Close()
			accept()
			continue
		}
		if n := ready(epAll); n != 1 {
			t.Errorf("the non-exclusive entry has %d events ready, want 1", n)
		}
		// ep0's loop unregisters before it accepts (old.Close).
		if err := unix.EpollCtl(ep0, unix.EPOLL_CTL_DEL, sock, nil); err != nil {
			t.Fatal(err)
		}
		pfd := []unix.PollFd{{Fd: int32(dup), Events: unix.POLLIN}}
		if n, err := unix.Poll(pfd, 0); err != nil || n != 1 {
			t.Fatalf("poll of the listening socket: %d %v: the connection is not in the backlog", n, err)
		}
		if n := ready(ep1); n != 0 {
			t.Fatalf("ep1 has %d events ready after ep0's entry went: this kernel passes the wake-up on (the comment of Adopt is out of date)", n)
		}
		// A registration made now polls the socket and finds it.
		if n := ready(epoll(dup, excl)); n != 1 {
			t.Fatalf("a new exclusive entry has %d events ready, want 1 (EPOLL_CTL_ADD polls)", n)
		}
		if n := accept(); n != 1 {
			t.Fatalf("accepted %d, want the 1 connection left in the backlog", n)
		}
		c.Close()
		t.Logf("attempt %d: the wake-up went to ep0 alone and was lost with its entry; a new entry found the connection", attempt)
		return
	}
	t.Skip("the waiter on ep0 was never asleep when the connection arrived in 20 attempts")
}

// asleepIn reports whether thread tid of this process is asleep in system
// call nr (/proc/self/task/TID/stat and syscall).
func asleepIn(tid int, nr uintptr) bool {
	dir := "/proc/self/task/" + strconv.Itoa(tid) + "/"
	stat, err := os.ReadFile(dir + "stat")
	if err != nil {
		return false
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 || i+2 >= len(stat) || stat[i+2] != 'S' {
		return false
	}
	sc, err := os.ReadFile(dir + "syscall")
	return err == nil && bytes.HasPrefix(sc, []byte(strconv.FormatUint(uint64(nr), 10)+" "))
}

// The engine's nbthread 2 -> 1 -> 2 under a client that opens one
// connection at a time: the listener moves between a group over loops 0
// and 1 and a group over loop 0 alone, and loop 1 stops after each shrink
// and a new one starts for each growth, as the engine's drain and resize
// do. Every connection is accepted at once, whatever the move.
func TestAdoptShrinkingToOneLoopLosesNoWakeUp(t *testing.T) {
	loops := looptest.Run(t, 0, 1, nil)
	dist := distribution(t, config.DistRoundRobin, 0)
	cur := NewGroup(loops, 0, dist)
	ln, err := cur.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, greetAndClose)
	if err != nil {
		t.Fatal(err)
	}
	var second *loop.Loop // loop 1 while the group has it
	var secondDone chan struct{}
	defer func() {
		ln.Close()
		cur.Close()
		if second != nil {
			second.Stop()
			<-secondDone
			second.Close()
		}
	}()
	addr := ln.Addr().String()

	const stall = 500 * time.Millisecond // an accept takes microseconds
	var ok, stalls atomic.Int64
	stop := make(chan struct{})
	done := make(chan struct{})
	deadline := time.Now().Add(10 * time.Second)
	go func() {
		defer close(done)
		buf := make([]byte, 1)
		for i := 0; i < 1_000_000 && time.Now().Before(deadline); i++ {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.DialTimeout("tcp", addr, 2*time.Second)
			if err != nil {
				continue // counted as neither: the loop below waits for ok
			}
			c.SetReadDeadline(time.Now().Add(stall))
			if _, err := c.Read(buf); err != nil {
				stalls.Add(1)
			} else {
				ok.Add(1)
			}
			c.Close()
		}
	}()
	defer func() { close(stop); <-done }()

	moves := 0
	for ; moves < 200 && stalls.Load() == 0 && time.Now().Before(deadline.Add(-3*time.Second)); moves++ {
		group := loops
		if moves%2 == 0 { // grow: a new loop 1, as the engine starts one
			second, err = loop.New(looptest.Options(1))
			if err != nil {
				t.Fatal(err)
			}
			secondDone = make(chan struct{})
			go func(l *loop.Loop, done chan struct{}) { l.Run(); close(done) }(second, secondDone)
			testutil.Eventually(t, 5*time.Second, second.Running, "loop 1 runs")
			group = []*loop.Loop{loops[0], second}
		}
		g := NewGroup(group, 0, dist)
		moved, err := g.Adopt(ln, nil, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close() // as the engine: right after Adopt
		cur.Retire()
		ln, cur = moved, g
		if moves%2 == 1 { // shrunk: loop 1 drains (nothing to drain) and stops
			second.Stop()
			<-secondDone
			second.Close()
			second = nil
		}
		from, s0 := ok.Load(), stalls.Load()
		testutil.Eventually(t, 5*time.Second, func() bool { return ok.Load() >= from+3 || stalls.Load() > s0 }, "traffic flows")
	}
	if n := stalls.Load(); n > 0 {
		t.Fatalf("%d of %d connections waited %v in the backlog (not accepted) within %d moves", n, n+ok.Load(), stall, moves)
	}
	t.Logf("%d connections over %d moves, none waited", ok.Load(), moves)
}
