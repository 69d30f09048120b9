package proxy

import (
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
)

// Side is one connection of the data plane — a tunnel's client or server,
// an http client or server connection, a health-check probe — and owns its
// fd from open (adopt, register) to close: the fd as the loop sees it, the
// tasklet the loop wakes (class Urgent) when the fd becomes ready, and the
// transport under it. Loop thread only.
//
// Every byte goes through the transport (recv, send, spliceIn, spliceOut,
// shutw), and so does the readiness a side waits for (canRecv, canSend):
// nothing above a Side knows whether it talks to a raw socket or TLS.
type Side struct {
	FD        loop.FD
	Task      loop.Tasklet
	Connected bool      // the fd may carry data (client: from accept; server: connect done)
	reg       bool      // registered with the loop's epoll
	moved     bool      // http exchange: bytes moved to or from it in this run (http_timeout.go)
	noOut     bool      // registered without EPOLLOUT (registerNoOut) until a send blocks (wantOut)
	xp        transport // set by adopt; kept after close (a recycled side is adopted again)
}

// Readiness bits as the loop ORs them into loop.FD.Ready (edge-triggered).
// A side clears evIn when a read reports the socket drained and evOut when
// a write would block; the next edge sets them again.
const (
	evIn    = unix.EPOLLIN
	evOut   = unix.EPOLLOUT
	evRdHup = unix.EPOLLRDHUP
	evErr   = unix.EPOLLERR
	evHup   = unix.EPOLLHUP
)

// adopt makes fd (non-blocking, open) the side's, over transport xp, not
// registered yet: from here on only close releases it.
func (s *Side) adopt(fd int, xp transport) {
	s.FD = loop.FD{Fd: fd, T: &s.Task}
	s.xp = xp
	s.reg, s.noOut = false, false
}

// register adds the side's fd to l's epoll set (edge-triggered, both
// directions): readiness then wakes s.Task. A transport that holds what
// the next read returns (rcvPending: an established TLS connection may
// hold the client's first bytes) makes the side readable at once: no
// edge will say so.
func (s *Side) register(l *loop.Loop) error {
	if err := l.Register(&s.FD); err != nil {
		return err
	}
	s.reg = true
	if s.xp.rcvPending() {
		s.FD.Ready |= evIn
	}
	return nil
}

// noOutEvents: registerNoOut's events, DefaultEvents without EPOLLOUT.
const noOutEvents = loop.DefaultEvents &^ unix.EPOLLOUT

// registerNoOut is register without EPOLLOUT, for an accepted raw socket
// that is rarely written to faster than it drains (a tunnel's client):
// it starts writable (evOut set, as the first edge would say), and
// EPOLLOUT joins the set only once a send blocks (wantOut, one
// epoll_ctl). Edge-triggered with EPOLLOUT, every state change of the
// socket is an edge: the registration of a writable socket before its
// first bytes came, and after a shutdown the peer's ACK of the FIN
// (FIN_WAIT1 -> FIN_WAIT2), woke the loop with an EPOLLOUT that nothing
// waited for (nginx registers a client without EPOLLOUT too, HAProxy only
// while it has something to send). The side's tasklet owner must be a
// loopOwner. Other transports register as usual.
func (s *Side) registerNoOut(l *loop.Loop) error {
	if !isRaw(s.xp) {
		return s.register(l)
	}
	if err := l.RegisterEvents(&s.FD, noOutEvents); err != nil {
		return err
	}
	s.reg, s.noOut = true, true
	s.FD.Ready |= evOut
	return nil
}

// loopOwner is the owner of a side's tasklet (a tunnel, an http client
// connection): the loop it runs on, for wantOut.
type loopOwner interface{ loopOf() *loop.Loop }

// wantOut adds EPOLLOUT to a side registered without it once a send
// blocked (blocked, evOut cleared): the kernel polls the socket again, so
// room that came meanwhile is reported at the next poll. An error leaves
// the side as it is: the send timeout ends a side that never drains.
func (s *Side) wantOut() {
	if !s.noOut || !s.reg || s.FD.Ready&evOut != 0 {
		return
	}
	if o, ok := s.Task.Owner.(loopOwner); ok && o.loopOf().ModifyEvents(&s.FD, loop.DefaultEvents) == nil {
		s.noOut = false
	}
}

// open is adopt then register. On a registration error the fd is still
// the side's: the caller closes it (close).
func (s *Side) open(l *loop.Loop, fd int, xp transport) error {
	s.adopt(fd, xp)
	return s.register(l)
}

// close ends the side, in one order that every teardown shares (as Go's
// internal/poll FD.destroy keeps the poller's before the close): its
// tasklet leaves the run queue, the loop forgets the fd, the transport
// closes it — with an RST when reset is set (an abort: see the package
// doc, "Aborts") — and the fields are cleared. The loop forgets the fd
// without epoll_ctl(DEL): the fd is closed right after and never shared
// (no dup, no fork), so close(2) takes it out of the epoll set (one
// syscall less per side). Closing a closed side only unqueues its tasklet.
func (s *Side) close(l *loop.Loop, reset bool) {
	l.Unqueue(&s.Task)
	if s.FD.Fd >= 0 {
		if s.reg {
			l.Forget(&s.FD)
			s.reg = false
		}
		s.xp.close(s.FD.Fd, reset)
		s.FD.Fd = -1
	}
	s.FD.Ready = 0
	s.Connected = false
}

// detach gives the fd up without closing it, for another owner (an http
// connection upgraded to a tcp tunnel: toTunnel). The fd leaves the epoll
// set (its new side registers it again) and the side is left closed.
func (s *Side) detach(l *loop.Loop) (fd int, ready uint32) {
	fd, ready = s.FD.Fd, s.FD.Ready
	if s.reg {
		l.Unregister(&s.FD)
		s.reg = false
	}
	s.FD.Fd = -1
	s.FD.Ready = 0
	return fd, ready
}

// canRecv: a receive would make progress, or report end of stream or an
// error.
func (s *Side) canRecv() bool { return s.FD.Ready&s.xp.rcvEvents() != 0 }

// canSend: a send would make progress, or report an error.
func (s *Side) canSend() bool { return s.FD.Ready&s.xp.sndEvents() != 0 }

// recv reads into p through the transport; n == 0 with errno 0 is end of
// stream.
func (s *Side) recv(p []byte) (int, unix.Errno) { return s.xp.rcvBuf(s.FD.Fd, p) }

// send writes p through the transport (more: MSG_MORE, see push).
func (s *Side) send(p []byte, more bool) (int, unix.Errno) { return s.xp.sndBuf(s.FD.Fd, p, more) }

// cost is what the receives that returned n bytes cost against a run's
// read budget (transport.rcvCost).
func (s *Side) cost(n int) int { return s.xp.rcvCost(n) }

// push sends what sends with more held back.
func (s *Side) push() { s.xp.push(s.FD.Fd) }

// shutw ends the write direction (a FIN after the last byte). ENOTCONN
// (the peer already reset) is not reported: the direction is finished
// either way.
func (s *Side) shutw() unix.Errno { return s.xp.shutw(s.FD.Fd) }

// drained: a receive found nothing (EAGAIN). The readiness it needed is
// gone until the next edge: the bits the transport asked for (evIn and
// evRdHup for a raw socket; a TLS transport that must write to read asked
// for evOut), except the error bits, which stay until the close.
func (s *Side) drained() { s.FD.Ready &^= s.xp.rcvEvents() &^ (evErr | evHup) }

// blocked: a send would block (EAGAIN). The readiness it needed is gone
// until the next edge (evOut for a raw socket), as in drained.
func (s *Side) blocked() {
	s.FD.Ready &^= s.xp.sndEvents() &^ (evErr | evHup)
	if s.noOut {
		s.wantOut() // registered without EPOLLOUT (registerNoOut): now it is needed
	}
}

// shortRead: a receive returned less than it asked for, so the socket is
// empty now; with edge-triggered epoll the next arrival raises a new edge,
// so no EAGAIN round trip is needed to re-arm (HAProxy's fd_done_recv).
// Not when the peer already closed or failed: read on to see it now; nor
// when the transport holds what the next read returns (rcvPending).
func (s *Side) shortRead() {
	if s.FD.Ready&(evRdHup|evHup|evErr) == 0 && !s.xp.rcvPending() {
		s.FD.Ready &^= evIn & s.xp.rcvEvents()
	}
}

// closedByPeer: the fd reported the peer's end of stream or an error.
func (s *Side) closedByPeer() bool { return s.FD.Ready&(evRdHup|evHup|evErr) != 0 }

// drainedToEOF: a receive just returned less than it asked for on a raw
// socket whose peer's FIN came (EPOLLRDHUP) with no error: the FIN comes
// after the last byte in sequence, so the socket holds nothing more and
// the next read would return the end of stream. The caller takes it as
// read: one read(2) and one run less per end of stream (HAProxy's
// raw_sock_to_buf: "if (fdtab[fd].state & FD_POLL_HUP) goto read0"). Not
// for TLS: its records may still hold bytes (rcvPending).
func (s *Side) drainedToEOF() bool {
	return s.FD.Ready&(evRdHup|evErr) == evRdHup && isRaw(s.xp)
}

// Refuse closes an accepted connection fd that no frontend takes (the
// engine's accept, when the bind has no frontend any more): a FIN, through
// the same close as every side of the data plane. Loop thread.
func Refuse(fd int) { plainTransport().close(fd, false) }

// Stages of Side.connect that can fail, for callers that tell them apart
// (a health check reports them; a socket that cannot be made is no
// reason to try another server).
const (
	connOK       uint8 = iota
	connSocket         // socket(2) failed: EMFILE, ENFILE, ENOBUFS
	connRefused        // connect(2) failed at once
	connRegister       // the loop refused the fd (epoll_ctl)
)

// connect opens the side to server srv, the one way every connection to a
// server starts (the tcp tunnel, an http server connection, a health-check
// probe): a non-blocking socket with TCP_NODELAY over the server's
// transport (TLS when srv says so, chosen now so that a mover reading the
// other side meanwhile already sees a destination that cannot splice),
// connect(2) under way, registered on l. sa is the caller's scratch for
// the address. On failure it says at which stage with the errno; the side
// keeps an fd the caller's close releases (connRefused, connRegister).
// Then connectResult reads the outcome, and afterConnect runs the
// transport's step.
func (s *Side) connect(l *loop.Loop, srv *balance.Server, sa *balance.SockaddrBuf) (uint8, unix.Errno) {
	family := unix.AF_INET
	if _, ok := srv.Sockaddr.(*unix.SockaddrInet6); ok {
		family = unix.AF_INET6
	}
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return connSocket, unix.Errno(errnoOf(err))
	}
	setNoDelay(fd)
	s.adopt(fd, srvTransport(srv, fd))
	s.Connected = false
	switch e := connectTo(fd, srv.SockaddrInto(sa)); e {
	case 0, unix.EINPROGRESS, unix.EINTR, unix.EALREADY:
		// 0: loopback may complete at once; the registration still
		// reports EPOLLOUT. EINTR: the connect goes on asynchronously
		// (POSIX), as EINPROGRESS.
	default:
		return connRefused, e
	}
	if err := s.register(l); err != nil {
		return connRegister, unix.Errno(errnoOf(err))
	}
	return connOK, 0
}

// connectPending: the pending connect has no outcome yet (none of
// EPOLLOUT, EPOLLERR, EPOLLHUP came). Unlike connectResult it reads no
// socket error, which SO_ERROR would clear: a caller may ask first, then
// read the result in a later run.
func (s *Side) connectPending() bool { return s.FD.Ready&(evOut|evErr|evHup) == 0 }

// connectResult reads the outcome of the side's pending connect from its
// readiness: pending while none of EPOLLOUT, EPOLLERR, EPOLLHUP came;
// else the socket's error, 0 when connected. EPOLLOUT without EPOLLERR or
// EPOLLHUP is a connected socket (a failed connect always raises
// EPOLLERR: sk_err set, tcp_poll), so SO_ERROR is read only otherwise
// (one getsockopt less per connection, as HAProxy). A hang-up with no
// error and no EPOLLOUT says ENOTCONN.
func (s *Side) connectResult() (pending bool, e unix.Errno) {
	r := s.FD.Ready
	switch {
	case r&(evOut|evErr|evHup) == 0:
		return true, 0
	case r&(evErr|evHup) == 0:
		return false, 0
	}
	if e = sockError(s.FD.Fd); e == 0 && r&evOut == 0 {
		e = unix.ENOTCONN
	}
	return false, e
}
