package proxy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Soft stop (stop.go)
//
// Worker.SoftStop, run by the engine on SIGTERM and on a loop removed by a
// smaller nbthread: idle keep-alive http clients (no byte pending) and
// pooled server connections are closed at once; other http connections
// finish their current request with Connection: close; tcp tunnels go on
// until CloseAll, when tuning.grace_ms ends. On SIGTERM the engine runs
// its two halves on all loops in turn (BeginStop everywhere, confirmed,
// then CloseIdle), so that a client that sees its idle connection closed
// knows every request in flight ends with Connection: close. Resume undoes
// it for a draining loop taken back.

// Soft stop (HAProxy's soft-stop, then hard-stop-after): on SIGTERM and on
// a loop removed by a smaller nbthread, the engine stops giving the loop
// new connections and calls SoftStop on it; whatever is still open when
// tuning.grace_ms ends is closed by CloseAll.
//
//   - an http client connection between requests, with no byte pending
//     (nothing buffered, nothing in the socket), is closed at once: it
//     holds nothing a client would lose (a request sent at that very
//     moment is lost as it would be on any keep-alive timeout; clients
//     retry idempotent requests on a fresh connection);
//   - a connection that has not sent its first request yet is not idle
//     between requests: it was accepted before the stop, and its client
//     (which retries nothing on a fresh connection) is about to send. It
//     is served like a partial head: one request, with Connection: close,
//     bounded by http_request_ms (408) and the grace;
//   - every other http client connection (a head partly received, a
//     request queued, connecting or in flight) finishes its current
//     request; the response carries Connection: close and the connection
//     closes after it. A partial head still has its http_request_ms;
//   - idle pooled server connections are closed, and no connection goes
//     back to a pool afterwards;
//   - tcp tunnels (and upgraded http connections) carry on: a byte stream
//     has no point at which it may be cut cleanly, so they get the grace.

// SoftStop puts the worker into its stopping state (loop thread): see
// above. It is BeginStop then CloseIdle; it may be called more than once.
func (w *Worker) SoftStop() {
	w.BeginStop()
	w.CloseIdle()
}

// BeginStop is the first half of SoftStop (loop thread): from now on every
// response is the last of its connection, and no server connection is
// pooled. The engine runs it on every loop and waits for all of them before
// CloseIdle, so that once any client sees its idle connection closed,
// every request in flight on every loop already ends with Connection:
// close.
func (w *Worker) BeginStop() {
	w.stopping = true
	for c := w.h.live.Front(); c != nil; c = c.link.Next() {
		if c.st == nil {
			continue
		}
		switch c.st.phase {
		case phQueue, phConnect, phExchange:
			// buildRespHead writes Connection: close when the head is
			// not sent yet; finishExchange closes after the response
			// either way. A head being received sees w.stopping in
			// startRequest.
			c.st.closeAfter = true
		}
	}
	for c := w.h.live2.Front(); c != nil; {
		next := c.link.Next() // c may close (unlinked) below
		if c.phase == h2Open {
			c.goAway() // the streams under way finish, no new one starts
		}
		c = next
	}
	for _, p := range w.h.idle {
		for sc := p.l.Front(); sc != nil; sc = p.l.Front() {
			w.closeSrv(sc)
		}
	}
}

// CloseIdle closes the http client connections that are between requests
// (after at least one) with no byte pending (loop thread).
func (w *Worker) CloseIdle() {
	for c := w.h.live.Front(); c != nil; {
		next := c.link.Next() // c may be closed (unlinked) below
		if c.phase == cHead && c.st == nil && c.nreq > 0 && (c.in == nil || c.in.Len() == 0) && !c.inputPending() {
			c.close(closeNormal)
		}
		c = next
	}
}

// Resume leaves the stopping state (loop thread): a draining loop taken
// back by a larger nbthread keeps its connections alive again. Those
// already told to close after their response still do.
func (w *Worker) Resume() { w.stopping = false }

// Stopping tells whether SoftStop was called and not resumed (loop thread).
func (w *Worker) Stopping() bool { return w.stopping }

// inputPending tells whether the client sent bytes not read yet (a new
// request head may be arriving). An edge the loop has not delivered yet is
// seen too: the socket is peeked, not the readiness bits.
func (c *h1Conn) inputPending() bool {
	var b [1]byte
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(c.cli.FD.Fd), uintptr(unsafe.Pointer(&b[0])), 1,
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		switch e {
		case unix.EINTR:
			continue
		case 0:
			// n == 0: end of stream, nothing to serve.
			return n > 0
		}
		// EAGAIN: nothing pending. Any other error: the connection is
		// dead, closing it is right.
		return false
	}
}
