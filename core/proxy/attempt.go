package proxy

import (
	"net/netip"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// The server attempt: the backend half of a stream (HAProxy's stream's
// backend side, Envoy's upstream request), written once for every mux —
// the tcp tunnel (one stream per connection) and each HTTP/1.1 request
// alike. It chooses a server, holds its slot (maxconn), waits in the
// backend's queue when every usable server is full, opens the connection
// through the owner (Side.connect: a tunnel dials; an http request may
// reuse a pooled connection first), reads the connect's outcome, runs the
// transport's step after it (the TLS handshake), retries on another
// server after a failure, and counts all of it on the backend and the
// server.
//
// One behaviour for every balance algorithm:
//   - a server at its maxconn is skipped for the next one the picker
//     gives (bounded by the server count), except with balance=source,
//     whose client stays on the server its address hashes to;
//   - when no usable server has a free slot, the attempt waits in the
//     backend's queue for queue_ms at most (queue_ms 0: no queue, refused
//     at once): for any server, or with balance=source for the hashed one
//     only (HAProxy: a hash-assigned stream queues on its server);
//   - a failed connect (refused, reset, timeout, TLS handshake refused)
//     retries up to the backend's retries, each time on another server
//     than the one that just failed while another is usable — with
//     balance=source too (HAProxy's option redispatch): a server that
//     refuses connections must not hold its clients.
//
// srvAttempt is embedded in its owner (Tunnel, stream), whose fields it
// provides (be, server, bs, ss, hash, deadline, attempts, term, wait, w):
// the owner is the queue's waiter (its methods waiting, granted and
// refused are these, promoted), and this part finds its owner from there
// (wait.bw.Owner), so that it costs no interface field per connection
// (TestConnectionObjectsKeepTheirSizeClass). Loop thread only.
type srvAttempt struct {
	w  *Worker
	be *Backend
	// server is the server whose slot the attempt holds, nil when none;
	// bs and ss are this loop's counter slots of the backend and of
	// server.
	server *balance.Server
	bs, ss *stats.Slot
	hash   uint64 // balance=source: the client's address hash
	// deadline is the owner's current phase deadline (loop.Now units; 0 =
	// none): the queue and the connect set it, the owner's later phases
	// reuse it.
	deadline int64
	wait     waiter // in the backend's queue while inQueue
	// attempts counts connects so far (and reuses of a pooled connection
	// after a failed connect): beyond the first, retries.
	attempts int32
	// term is the access log's termination state, set where the cause is
	// known; unset, the owner derives it when the stream ends.
	term    stats.Termination
	inQueue bool // waiting in the backend's queue since deadline - queue_ms
}

// attemptOwner is what a server attempt asks of its stream.
type attemptOwner interface {
	queued
	// useServer: the attempt holds a slot of a.server (a.ss set): open a
	// connection to it (Side.connect) — or, for an http request, reuse a
	// pooled one — and take its outcome to checkConnect.
	useServer()
	// waitQueue: the attempt waits in the backend's queue; arm its phase
	// timer at a.deadline.
	waitQueue()
	// noServer: no usable server, or the queue refused the attempt.
	noServer()
	// dropConn closes the connection of a failed attempt.
	dropConn()
	// gaveUp: the last of the backend's retries failed.
	gaveUp()
	// established: the connection to the server is ready for bytes (the
	// connect completed, and the transport's step, if any, ended).
	established()
	// proxyAddrs: the client and the address it connected to, and the
	// name it asked for (nil: unknown), for a server's PROXY header.
	proxyAddrs() (src, dst netip.AddrPort, authority []byte)
}

// decideInNormal reports whether an outcome may be decided in the run
// going on: a connect's result and all that follows from it (the PROXY
// header, the transport's step, a retry on another server, the start of
// the exchange), and a health check's result, are request processing,
// class Normal (seed 000), while the fd event that brings them runs as
// Urgent. An Urgent run requeues t as Normal — the same round's Normal
// phase runs it — and returns false.
func decideInNormal(l *loop.Loop, t *loop.Tasklet) bool {
	if l.Class() != loop.Urgent {
		return true
	}
	l.Wake(t, loop.Normal)
	return false
}

func (a *srvAttempt) owner() attemptOwner { return a.wait.bw.Owner.(attemptOwner) }

func (a *srvAttempt) waiting() *waiter { return &a.wait }

// acquire chooses a server and takes a slot of it (never exclude while
// another is usable), or queues, or refuses (see the top of this file).
// A free slot goes on at once (granted).
func (a *srvAttempt) acquire(exclude *balance.Server) {
	w := a.w
	picker := a.be.pickers[w.id]
	var first *balance.Server
	for i := 0; i <= len(a.be.B.Servers); i++ {
		s := picker.Pick(a.hash, exclude)
		if s == nil {
			break
		}
		if first == nil {
			first = s
		}
		if s.Acquire() {
			a.granted(s)
			return
		}
		if a.be.source {
			break // affinity: wait for the hashed server
		}
		exclude = s
	}
	if first == nil || a.be.B.QueueTimeout <= 0 {
		a.bs.NoServer.Add(1)
		a.owner().noServer()
		return
	}
	// Every usable server is at its maxconn: wait in the backend's queue
	// (queue.go) for at most queue_ms.
	s, queued := w.wait(&a.wait, a.be, first)
	switch {
	case s != nil: // a slot freed meanwhile: no wait
		a.granted(s)
	case queued:
		a.inQueue = true
		a.deadline = w.L.Now() + int64(a.be.B.QueueTimeout)
		a.owner().waitQueue()
	default:
		a.bs.NoServer.Add(1)
		a.owner().noServer()
	}
}

// granted: the attempt holds a slot of s, from acquire or from the queue.
func (a *srvAttempt) granted(s *balance.Server) {
	a.queued()
	a.server = s
	a.ss = a.w.ServerSlot(s)
	a.bs.ConnCur.Add(1)
	a.owner().useServer()
}

// refused: the queue found no usable server any more.
func (a *srvAttempt) refused() {
	a.queued()
	a.bs.NoServer.Add(1)
	a.owner().noServer()
}

// queued: the attempt's wait for a slot ends (granted, refused, timed out,
// given up); the queue histogram counts it, 0 when the first slot was free
// at once (a retry that did not wait is not another stream).
func (a *srvAttempt) queued() {
	switch {
	case a.inQueue:
		a.inQueue = false
		a.be.Stats.Timing(a.w.id).Queue.Observe(a.w.L.Now() - (a.deadline - int64(a.be.B.QueueTimeout)))
	case a.attempts == 0:
		a.be.Stats.Timing(a.w.id).Queue.Observe(0)
	}
}

// queueTimeout: queue_ms passed in the queue (the owner's timer).
func (a *srvAttempt) queueTimeout() {
	a.queued()
	a.w.dequeue(&a.wait)
	a.bs.NoServer.Add(1)
}

// countAttempt counts one more try on a server: beyond the first, a
// retry.
func (a *srvAttempt) countAttempt() {
	a.attempts++
	if a.attempts > 1 {
		a.bs.Retries.Add(1)
	}
}

// connectResult takes the outcome of the pending connect of s (the
// owner's side to the server) and runs the transport's step after it,
// whose end goes to step (a connectOwner: the tunnel, or the http
// request's server connection) for attempt number attempt: false while
// the step runs or the connect is pending.
func (a *srvAttempt) checkConnect(s *Side, step connectOwner) {
	pending, e := s.connectResult()
	switch {
	case pending:
		return
	case e != 0:
		a.connectFailed()
		return
	}
	w := a.w
	if a.server.SendProxy != 0 {
		src, dst, auth := a.owner().proxyAddrs()
		if !sendProxy(s, a.server, src, dst, auth) {
			a.connectFailed()
			return
		}
	}
	if s.xp.afterConnect(s, connectStep{l: w.L, pool: w.tlsOut, within: handshakeWithin(w.L, a.deadline),
		ss: a.ss, owner: step, attempt: uint32(a.attempts)}) {
		return
	}
	a.owner().established()
}

// countConnect counts the connect time of an established attempt, which
// started at deadline - connect_ms.
func (a *srvAttempt) countConnect(now int64) {
	ct := now - (a.deadline - int64(a.be.B.ConnectTimeout))
	a.bs.ConnectNs.Add(ct)
	a.bs.ConnectCount.Add(1)
	a.ss.ConnectNs.Add(ct)
	a.ss.ConnectCount.Add(1)
	a.be.Stats.Timing(a.w.id).Connect.Observe(ct)
}

// connectFailed drops the attempt and retries on another server (the
// failed one excluded while another is usable), up to the backend's
// retries; then the owner gives up.
func (a *srvAttempt) connectFailed() {
	o := a.owner()
	s := a.server
	a.bs.ConnectErrors.Add(1)
	if s != nil {
		s.ConnectFailed()
	}
	o.dropConn()
	a.releaseServer()
	if int(a.attempts) > a.be.B.Retries {
		o.gaveUp()
		return
	}
	a.term = stats.Termination{} // the last attempt's outcome is what counts
	a.acquire(s)
}

// releaseServer gives the server slot back, if held: Release hands it to
// the oldest stream queued for it, on whichever loop.
func (a *srvAttempt) releaseServer() {
	if a.server == nil {
		return
	}
	a.server.Release()
	a.server = nil
	a.bs.ConnCur.Add(-1)
}
