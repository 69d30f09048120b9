package listen

import (
	"fmt"
	"math"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
)

// Changing the set of loops at run time (tuning.nbthread, issue 6) without
// closing a listening socket: closing one resets the connections waiting in
// its backlog. The engine builds a new Group over the new loops, moves every
// Listener to it with Adopt (the new Listener serves duplicates of the same
// sockets, so the kernel backlog is shared and nothing is lost), closes the
// old Listeners (only their duplicates close) and retires the old Group with
// Retire (what its rings still hold is handed off, not closed).

// Group returns the group the listener accepts for. Any goroutine.
func (ln *Listener) Group() *Group { return ln.g }

// Adopt makes a Listener on g that serves the socket(s) of old (duplicated
// with F_DUPFD_CLOEXEC, so old.Close later closes only its own copies), with
// threads as the loop indexes of g allowed to accept (empty = all) and the
// shard layout of old. The new Listener starts paused if old is paused and
// accepts when Adopt returns; old keeps accepting too until the caller closes
// it (both accepting from one socket is harmless: each connection is
// accepted once). Control goroutine only (it waits for g's running loops).
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
	ln := &Listener{Owner: owner, g: g, fn: fn, addr: old.addr, targets: ts, limits: old.limits}
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
	if old.sharded {
		for i, s := range ln.socks {
			ln.addAcceptor(ts[i%len(ts)], s, unix.EPOLLIN, true)
		}
	} else {
		// Not EPOLLEXCLUSIVE here (Open uses it): with the adopted
		// duplicate registered exclusively on the loops of the new group,
		// TestPinNbthreadUnderTrafficNoFailure saw a connection stay in
		// the backlog for 5 s after nbthread 2->4 (no loop of the new
		// group was woken for it: loops 2 and 3 ran no acceptor, loops 0
		// and 1 accepted nothing) in about 1 run of 12; without the flag,
		// 0 in 24. Why the exclusive wake-up went nowhere is not
		// established; the cost is that every loop of the group wakes for
		// each connection of an adopted (after an nbthread change)
		// listener, and all but one find EAGAIN.
		ev := uint32(unix.EPOLLIN)
		for _, t := range ts {
			ln.addAcceptor(t, ln.socks[0], ev, len(ts) == 1)
		}
	}
	if err := ln.start(); err != nil {
		ln.Close()
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
					fd, ln, ok := r.pop()
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
