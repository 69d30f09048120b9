package proxy

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// transport is the layer under a Side, as HAProxy's xprt under its
// connection (raw_sock.c, ssl_sock.c): how the bytes of one fd get in and
// out. Everything above it — the Side, the mover, the http and tunnel
// state machines — calls these operations and never knows which transport
// it has (Envoy's TransportSocket: the connection never asks which one).
// The raw socket is rawSock, below; TLS is tlsSock (xprt_tls.go). What an
// upper layer needs to know about a transport it asks it: whether the
// bytes cross the network encrypted (secure: X-Forwarded-Proto), the
// subject of the peer's certificate (the access log), and what is left to
// do once a TCP connect completed (afterConnect: nothing for a raw socket,
// the client handshake for TLS). Only the transport's own files
// (xprt*.go) name a transport type.
//
// The operations return the raw errno (0 = success), as the sys.go
// wrappers do, so that callers switch on it without boxing an error:
// EAGAIN means "not now, wait for readiness", n == 0 with errno 0 from a
// receive is end of stream. EINTR never comes out of a transport.
type transport interface {
	// rcvBuf reads into p (len(p) > 0).
	rcvBuf(fd int, p []byte) (int, unix.Errno)
	// sndBuf writes p; more says that more bytes follow at once
	// (MSG_MORE): the transport may hold a partial segment back until
	// push.
	sndBuf(fd int, p []byte, more bool) (int, unix.Errno)
	// push sends at once what a send with more held back.
	push(fd int)
	// canSplice: the bytes of fd are the bytes of the stream, so splice(2)
	// may move them (rcvPipe, sndPipe). TLS cannot: its bytes are records.
	canSplice() bool
	// rcvPipe splices at most n bytes from fd into p; sndPipe at most n
	// bytes from p to fd (more: SPLICE_F_MORE). Both leave p.Data to the
	// caller. Only called when canSplice.
	rcvPipe(fd int, p *Pipe, n int) (int, unix.Errno)
	sndPipe(fd int, p *Pipe, n int, more bool) (int, unix.Errno)
	// shutw ends the write direction after the last byte (a FIN).
	shutw(fd int) unix.Errno
	// close releases fd: a FIN, or an RST when reset is set (abort).
	close(fd int, reset bool)
	// rcvEvents and sndEvents are the readiness bits (loop.FD.Ready), any
	// of which lets the next receive, resp. send, make progress or report
	// its end. A TLS transport in the middle of a handshake or a
	// renegotiation answers with the other direction's bits: its read may
	// need the socket writable, its write the socket readable.
	rcvEvents() uint32
	sndEvents() uint32
	// rcvPending: the transport holds what the next receive returns
	// (bytes, or the end of stream) and the socket will not signal it
	// again, so a short read must not clear the read readiness
	// (Side.shortRead). Always false for a raw socket; TLS: an end of
	// stream read together with the last record, or a read stopped after
	// maxReadsPerCall records (tiny records, see rcvCost).
	rcvPending() bool
	// rcvCost is what receives that returned n bytes (since the last
	// rcvCost) cost against a run's read budget (runCap): n for a raw
	// socket; TLS charges each record received at least minRecordCost,
	// so that a client sending tiny records cannot make one run decrypt
	// hundreds of thousands of them.
	rcvCost(n int) int
	// secure: the bytes cross the network encrypted (TLS), whatever
	// they carry.
	secure() bool
	// peerSubject is the subject of the peer's certificate ("" without
	// one, or before the transport is established).
	peerSubject() string
	// serverName is the server name the peer asked for (a TLS client's
	// SNI, once established; "" for a raw socket or without one): the
	// AUTHORITY of a server's PROXY header (proxyhdr.go).
	serverName() string
	// afterConnect is the transport's step once the TCP connect of s
	// completed (EPOLLOUT without error): false when there is none and s
	// is ready at once (raw); true when the step runs (TLS: s leaves the
	// loop, the client handshake runs on st.pool within st.within) and its
	// end reaches st.owner on the loop thread (connectOwner).
	afterConnect(s *Side, st connectStep) bool
}

// connectStep is what a transport's step after a connect needs: the loop,
// the pool the handshake runs on and how long it may take, the server's
// stats slot that counts the handshake (nil: not counted, health checks),
// and who waits for it, with the number of its attempt.
type connectStep struct {
	l       *loop.Loop
	pool    *tlsHandshakes
	within  time.Duration
	ss      *stats.Slot
	owner   connectOwner
	attempt uint32
}

// connectOwner waits for the step of a connect (Side.afterConnect): the
// tcp tunnel, an http server connection, a health-check probe. Loop
// thread, never after the pool's stop (errTLSStopped is nobody's: the
// worker's CloseAll closes the connections).
type connectOwner interface {
	// stepStarted: the step runs; its end comes later (loop thread).
	stepStarted()
	// stepCurrent: attempt is still wanted (not given up meanwhile by a
	// timeout, a retry, the client leaving). false: the side layer closes
	// what the step opened; the owner releases what it kept for it.
	stepCurrent(attempt uint32) bool
	// stepDone: the step of the current attempt ended: nil, the side is
	// registered again and readable and writable (crypto/tls may have
	// read past the handshake); an error, the connect failed (the side
	// holds no fd, or one its close releases).
	stepDone(err error)
}

// registerError is a step's error that is not the transport's: the loop
// refused the established fd (epoll_ctl), which the side holds.
type registerError struct{ err error }

func (e *registerError) Error() string { return "register: " + e.err.Error() }
func (e *registerError) Unwrap() error { return e.err }

// plainTransport is the transport of a plain socket, for the layers above
// that open or accept one.
func plainTransport() transport { return rawSock{} }

// rawSock is the plain socket transport: today's sys.go wrappers. It is a
// zero-size value, so storing it in a transport field allocates nothing
// (the interface points at the runtime's zero base), and an indirect call
// costs a few nanoseconds next to a syscall of a microsecond.
type rawSock struct{}

func (rawSock) rcvBuf(fd int, p []byte) (int, unix.Errno) { return recv(fd, p) }

func (rawSock) sndBuf(fd int, p []byte, more bool) (int, unix.Errno) { return sendMore(fd, p, more) }

func (rawSock) push(fd int) { pushFrames(fd) }

func (rawSock) canSplice() bool { return true }

// isRaw: xp is the plain socket: what the socket says about the stream (a
// FIN after the last byte, MSG_MORE before a shutdown) is the stream's.
func isRaw(xp transport) bool { _, ok := xp.(rawSock); return ok }

func (rawSock) rcvPipe(fd int, p *Pipe, n int) (int, unix.Errno) {
	return spliceMore(fd, p.w, n, false)
}

func (rawSock) sndPipe(fd int, p *Pipe, n int, more bool) (int, unix.Errno) {
	return spliceMore(p.r, fd, n, more)
}

func (rawSock) shutw(fd int) unix.Errno { return shutWrite(fd) }

func (rawSock) close(fd int, reset bool) {
	if reset {
		noLinger(fd)
	}
	closeFd(fd)
}

func (rawSock) rcvEvents() uint32 { return evIn | evRdHup | evErr | evHup }

func (rawSock) sndEvents() uint32 { return evOut | evErr | evHup }

func (rawSock) rcvPending() bool { return false }

func (rawSock) rcvCost(n int) int { return n }

func (rawSock) secure() bool { return false }

func (rawSock) peerSubject() string { return "" }

func (rawSock) serverName() string { return "" }

func (rawSock) afterConnect(*Side, connectStep) bool { return false }

// noLinger sets SO_LINGER {1, 0} on fd, so that its close(2) drops what
// the send queue still holds and resets the connection: the peer reads
// ECONNRESET instead of a clean end of stream (HAProxy's NOLINGER on an
// aborted stream). Errors are ignored: a socket that is not TCP (tests use
// unix socket pairs) is simply closed.
func noLinger(fd int) {
	l := unix.Linger{Onoff: 1, Linger: 0}
	_, _, _ = unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_LINGER,
		uintptr(unsafe.Pointer(&l)), unsafe.Sizeof(l), 0)
}
