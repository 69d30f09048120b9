package listen

import (
	"fmt"
	"math"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
)

// Changing the set of loops at run time (tuning.nbthread) without
// closing a listening socket: closing one resets the connections waiting in
// its backlog. The engine builds a new Group over the new loops, moves every
// Listener to it with Adopt (the new Listener serves duplicates of the same
// sockets, so the kernel backlog is shared and nothing is lost; the old one
// stops accepting first, see Adopt for why), closes the old Listeners (only
// their duplicates close) and retires the old Group with Retire (what its
// rings still hold is handed off, not closed).

// Group returns the group the listener accepts for. Any goroutine.
func (ln *Listener) Group() *Group { return ln.g }

// Adopt makes a Listener on g that serves the socket(s) of old (duplicated
// with F_DUPFD_CLOEXEC, so old.Close later closes only its own copies), with
// threads as the loop indexes of g allowed to accept (empty = all) and the
// shard layout of old. The new Listener starts paused if old is paused and
// accepts when Adopt returns. old stops accepting before the new Listener
// registers (connections arriving meanwhile wait in the backlog, which the
// new registrations find); the caller closes it. If Adopt fails, old
// accepts again. Control goroutine only (it waits for the loops of both).
//
// The order is what makes EPOLLEXCLUSIVE safe here. With it, a connection
// runs ep_poll_callback over the socket's wait queue in order (exclusive
// entries are appended, so old's entries come before the new ones) and the
// walk stops at the first exclusive entry whose epoll has a thread asleep in
// epoll_wait: that epoll alone gets the event (fs/eventpoll.c,
// __wake_up_common). Deleting that entry (EPOLL_CTL_DEL, old.Close) before
// its loop accepted drops the event with it, and the kernel passes it to no
// other entry; the entries added before the connection arrived polled the
// socket when it was empty. The connection then waits in the backlog until
// another one arrives and wakes a loop, for ever with a client that waits for
// it. Measured with both registered at once, as Adopt did before (old
// unregistered only by old.Close, after the new registrations), in two
// instrumented runs of TestAdoptUnderTrafficLosesNoWakeUp: 25 and 23
// connections stalled in the backlog (1 s each) over 105 and 195 moves, and
// for each of the 48 the Close of old had, 20 µs to 9 ms after the client
// dialled, deleted an entry that held its wake-up (old's acceptor tasklet
// queued with EPOLLIN, or the entry still on its epoll's ready list), while
// /proc/self/fdinfo showed the new listener registered on every loop and
// /proc/net/tcp the connection in the accept queue.
// TestEpollExclusiveWakeUpDiesWithItsEntry shows the kernel side alone.
// That is the "connection left in the backlog
// 5 s after nbthread 2->4" of TestPinNbthreadUnderTrafficNoFailure (issue
// 12), which dropping EPOLLEXCLUSIVE on adopted listeners only hid
// (non-exclusive entries sit at the head of the queue and see every
// connection). Unregistering old first leaves no entry that can take a
// wake-up and then go, and EPOLL_CTL_ADD polls the socket, so what arrived
// in between is reported by the new registrations. Nothing else deletes a
// registration for good while another stays: Pause, a full Limit and the
// fd back-off unregister, but register again with EPOLL_CTL_ADD (which
// polls) on Resume, on the Limit's wake-up and after the back-off; a loop
// that stopped calls epoll_wait no more, so its epoll never has a waiter
// and cannot end the walk.
func (g *Group) Adopt(old *Listener, threads []int, owner any, fn AcceptFunc) (*Listener, error) {
	if fn == nil {
		fn = old.fn
	}
	ts, err := g.checkThreads(threads)
	if err != nil {
		return nil, err
	}
	if old.closed.Load() || len(old.socks) == 0 {
		return nil, fmt.Errorf("listen: adopt %s: listener closed", old.addr)
	}
	if old.moved.Load() {
		return nil, fmt.Errorf("listen: adopt %s: listener adopted already", old.addr)
	}
	// The bind's connection counts go with it (by loop ID): its
	// connections live on, on their loops.
	ln := &Listener{Owner: owner, g: g, fn: fn, addr: old.addr, targets: ts, limits: old.limits, conns: old.conns}
	ln.conns.prealloc(g)
	ln.paused.Store(old.paused.Load())
	for _, s := range old.socks {
		fd, err := unix.FcntlInt(uintptr(s), unix.F_DUPFD_CLOEXEC, 0)
		if err != nil {
			ln.closeSockets()
			return nil, os.NewSyscallError("fcntl", err)
		}
		ln.socks = append(ln.socks, fd)
	}
	ln.sharded = old.sharded
	ln.addAcceptors()
	old.moved.Store(true)
	old.onLoops(func(a *acceptor, l *loop.Loop) { a.sync(l) })
	if err := ln.start(); err != nil {
		ln.Close()
		old.moved.Store(false)
		old.onLoops(func(a *acceptor, l *loop.Loop) { a.sync(l) })
		return nil, err
	}
	return ln, nil
}

// Retire takes g's rings off their loops after handing what they still hold
// to the listeners' AcceptFunc on the ring's loop (Close would close those
// fds: right at shutdown, wrong when the loops live on). Call it after every
// Listener of g is closed, so nothing pushes any more. Control goroutine
// only; it waits for the loops (a stopped loop's entries are closed).
func (g *Group) Retire() {
	g.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for i, l := range g.loops {
			r := g.rings[i]
			wg.Add(1)
			if !l.Exec(func(l *loop.Loop) {
				r.Poll(l, math.MaxInt)
				l.RemoveSource(r)
				wg.Done()
			}) {
				for {
					fd, _, ln, ok := r.pop()
					if !ok {
						break
					}
					closeFd(fd)
					ln.Release()
				}
				wg.Done()
			}
		}
		wg.Wait()
	})
}
