package proxy

import (
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/h2"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// HTTP mode (http.go: the HTTP/1.1 connection; http_stream.go: the
// request; http_exchange.go, http_timeout.go, http_log.go: its exchange,
// timeouts and log entry; http_server.go: server connections;
// http_route.go: routing)
//
// Two layers, as HAProxy's mux and stream (Envoy's codec and stream):
//   - the connection (h1Conn, the HTTP/1.1 mux) owns the client socket,
//     its input buffer and what lies between requests: reading and
//     parsing heads, keep-alive, pipelining, the head and keep-alive
//     timeouts, the graceful close and its linger, upgrades to a tunnel;
//   - the stream (stream) is one request and its response: routing, the
//     server attempt (attempt.go), the rewritten heads, both bodies, the
//     exchange timeouts, the counters and the access-log entry. It is
//     taken from its loop's free list when the first byte of a head
//     arrives and given back when the exchange ends, so that an idle
//     kept-alive connection holds no request state.
//
// The stream reaches its connection through streamMux only (the client
// end it reads from and writes to, and three calls: done, abort, upgrade),
// so that a second mux can create streams.
//
// A frontend with HTTP set (mode http) hands each accepted fd to
// StartHTTP. An h1Conn serves one request at a time: the head is parsed
// by core/http1 straight from the connection's pool buffer (the parser's
// head limit is that buffer's size minus 512, set at each parse from the
// buffer the head is in, so the rewritten head fits one buffer of the
// same size). A buffer keeps the size it was taken with; after bufsize
// changed, every head written (request head, response head, proxy
// answer) is checked against the buffer it goes into: a request head too
// large for it is answered 431, a response head 502. Pipelined requests stay in that buffer, unparsed and unread
// beyond, until the current response is complete, so answers go out in
// order. Keep-alive: HTTP/1.1 by default, 1.0 with "Connection:
// keep-alive" (answered with "Connection: keep-alive"). The state of an
// exchange (response sent, heads pending, backend, attempts, bodies) is
// cleared when it ends (endExchange), so a later request of the
// connection refused before it is routed is answered as a first one.

// Phases and their timers (one loop timer per connection):
//   - head: http_request_ms from the connection start, or from the first
//     byte of a later request; http_keep_alive_ms between requests. A
//     partial head at expiry is answered 408, and so is a new connection
//     that sent nothing (as HAProxy); an idle keep-alive connection
//     between requests is closed silently.
//   - queue: every usable server of the chosen backend is at its maxconn
//     (balance's Acquire fails): the request waits until queue_ms (503)
//     in the backend's FIFO, balance.Queue, one per backend shared by all
//     loops (source balancing waits in the FIFO of its server, as
//     HAProxy's server queue). Server.Release hands the slot to the oldest
//     waiter that may use it, whatever its loop, under a lock held only to
//     unlink it; the grant reaches the waiter's loop through that loop's
//     mailbox (a loop.Source woken by its eventfd, queue.go), so nothing
//     polls and a release costs O(1). A waiter that times out or closes
//     while a grant is on its way gives the slot back. Servers that come
//     up or get a larger maxconn take waiters; the waiters of a server
//     going away move to the others; with no usable server left they get
//     503. tcp tunnels use the same queue: a tunnel whose backend is full
//     waits (its client bytes held in one buffer) until a slot frees or
//     queue_ms passes, then is closed. A queued client that closes is
//     noticed when its wait ends (as HAProxy without abortonclose).
//   - connect: connect_ms per attempt, then another server (the failed one
//     excluded while another is usable) up to retries; 503 after.
//   - exchange (http_timeout.go): each side has its timeout only while the
//     exchange waits for it, restarted by every byte it moves. client_ms
//     while bytes for the client are left untaken (it stopped reading) or
//     request body bytes are still to come from it (408 before any answer,
//     else both connections cut); server_ms while request bytes for the
//     server are left untaken, the response head is awaited (504), or
//     response body bytes are still to come (cut).

// Proxy answers (http1.AppendError): 400 and 501 for malformed requests,
// 413 over http.max_body_size, 414, 431, 505, 408, 502 for a malformed or
// missing response head, 503 (no route, no usable server, queue timeout,
// connect failures), 504. All carry Connection: close; the connection is
// then closed gracefully (write side shut, input discarded for up to 1 s
// so that a RST does not destroy the answer). Once part of a response went
// to the client (respSent: a byte left for it, not a head only built), a
// failure can only cut the connection; a response head built but not sent
// (a bad chunk size in the same read as the head) is replaced by a 502.

// Counters (this loop's slots, per request, never per chunk): the
// frontend counts every request and the status of every answer, the
// proxy's own included; the backend its routed requests, its servers'
// response statuses, connect and response times; a server the requests
// handed to a connection of it (once: a replay on a new connection is the
// same request), their response statuses, connect and response times
// (request head sent -> response head). Health checks count apart
// (check.go). The backend's histograms (stats.TimingSlot) time each
// request from its head complete to its response complete, its wait for a
// server slot (0 when a slot was free) and each new server connection.

// closeCut (http only) ends an exchange whose server went silent in the
// middle of its response past server_ms: counted as a timeout, closed with
// an RST as an abort is, since a FIN would end a close-delimited or
// dechunked body as if it were whole.
const closeCut = closeConnect + 1

// Phases of an HTTP/1.1 client connection (h1Conn.phase).
const (
	cHead   uint8 = iota // waiting for / reading a request head
	cStream              // a request is in flight (c.st past its head)
	cLinger              // last answer sent and write side shut: discard input until EOF
	cClosed
)

// viaName is the pseudonym in the Via fields we add.
const viaName = "spliced"

// lingerTimeout bounds how long a closing connection keeps reading (and
// discarding) what the client still sends, so that closing with unread
// input (which makes the kernel send a RST that may destroy the answer
// before the client read it) is avoided.
const lingerTimeout = 1e9

// client is what a stream knows of the client connection that carries it,
// whatever its protocol: embedded in the mux, pointed to by its streams.
type client struct {
	// acc is the frontend the connection was accepted by: its OnClose
	// (maxconn accounting) runs when the connection ends. fe and hf are
	// the generation the next request resolves against, loaded from cur
	// (the bind's current frontend) when a request starts.
	acc *Frontend
	cur *atomic.Pointer[Frontend]
	fe  *Frontend
	hf  *HTTPFront
	// This loop's counter slot of the accepting frontend.
	fs   *stats.Slot
	peer netip.Addr
	// cert: the client-certificate fields of a TLS connection whose
	// frontend asks for them (xprt_tls_accept.go), nil otherwise.
	cert *clientCert
	// t0 is when the next request began for the access log's timers: the
	// accept, or the end of the previous request (HAProxy's Tq includes
	// the wait for the first byte).
	t0   int64
	port uint16 // the client's port, with peer
	h2   bool   // the connection speaks HTTP/2 (h2Conn): the log says HTTP/2.0
	gone bool   // its bind was removed (Removed): the connection winds down
	pp   uint32 // what the PROXY header carried (proxyhdr.go), 0 = none
}

// resolve loads the bind's current generation of the frontend for the
// request that starts (one atomic load: kept-alive connections see
// in-place server changes, added servers and routes as new connections
// do). A frontend no longer in http mode leaves the one held.
func (cl *client) resolve() {
	if cl.cur == nil {
		return
	}
	f := cl.cur.Load()
	if f == Removed {
		cl.gone = true // the request is served on the generation held, the last one
		return
	}
	if f != nil && f != cl.fe && f.HTTP != nil {
		cl.fe, cl.hf = f, f.HTTP
	}
}

// Removed is what the engine stores as the current frontend of a bind it
// removed (its frontend deleted, or the bind): the connections the bind
// accepted wind down instead of serving on for ever. An HTTP/1.1
// connection answers the request in flight, and the next one if it comes,
// with Connection: close; one idle between requests is closed
// (Worker.EndRemoved); an HTTP/2 connection sends GOAWAY: its streams
// under way finish, no new one starts.
var Removed = &Frontend{Name: "(removed)"}

// EndRemoved winds down the connections of removed binds (Removed) that
// are idle now: HTTP/1.1 connections between requests with nothing
// pending are closed, HTTP/2 connections get GOAWAY. The engine runs it
// on every loop after a change that removed a bind (loop thread).
func (w *Worker) EndRemoved() {
	for c := w.h.live.Front(); c != nil; {
		next := c.link.Next() // c may be closed (unlinked) below
		if c.cur == nil || c.cur.Load() != Removed {
			c = next
			continue
		}
		c.gone = true // a head under way: its startRequest sees it
		switch {
		case c.st != nil:
			c.st.closeAfter = true // a request under way: its response is the last
		case c.phase == cHead && (c.in == nil || c.in.Len() == 0) && !c.inputPending():
			c.close(closeNormal)
		}
		c = next
	}
	for c := w.h.live2.Front(); c != nil; {
		next := c.link.Next()
		if c.cur != nil && c.cur.Load() == Removed && c.phase == h2Open && !c.away {
			c.gone = true
			c.goAway()
		}
		c = next
	}
}

// streamMux is what a stream asks of the client connection (the mux)
// that carries it.
type streamMux interface {
	// run: the stream's server side has work (its tasklet ran, a TLS
	// handshake with the server ended, a pooled connection was attached):
	// run the stream and what follows it on the connection.
	run(s *stream)
	// streamDone: the stream ended (its response complete, or its proxy
	// answer sent); closing: the client connection ends after it. The mux
	// gives the stream back (putStream) and goes on with its next request.
	streamDone(s *stream, closing bool)
	// streamAbort: the stream cannot go on (why: closeAbort, closeCut,
	// closeTimeout, closeNormal); the mux ends it (s.end) and what it
	// must with it — for HTTP/1.1 the connection.
	streamAbort(s *stream, why uint8)
	// upgrade: a 101 response was relayed and flushed; the connection
	// becomes a tunnel (HTTP/1.1 only).
	upgrade(s *stream)
	// clientFd is the client connection's socket: the address the client
	// connected to, for a server's PROXY header (proxyhdr.go).
	clientFd() int
}

// h1Conn is an HTTP/1.1 client connection (the mux): one request at a
// time (pipelined requests wait in its input buffer until the current
// response is complete), each carried by a stream. It is owned by one
// loop.
type h1Conn struct {
	link ilist.Link[h1Conn] // in httpState.live; first: ilist finds the h1Conn from it
	w    *Worker
	client
	cli Side
	in  *Buffer // client bytes not yet forwarded (pipelined heads stay here)
	// st is the request in flight: from the first byte of its head until
	// its exchange ends; nil between requests.
	st       *stream
	timer    loop.Timer // head, keep-alive and linger deadlines
	deadline int64      // the head phase's deadline (the timer may fire early)
	nreq     int
	phase    uint8
}

var _ = [1]struct{}{}[unsafe.Offsetof(h1Conn{}.link)] // link first (ilist)

func runHTTPTask(tk *loop.Tasklet) {
	c := tk.Owner.(*h1Conn)
	c.w.budget = runCap
	c.process()
}

func runHTTPTimer(tm *loop.Timer) { tm.Owner.(*h1Conn).onTimer() }

func (c *h1Conn) loopOf() *loop.Loop { return c.w.L } // loopOwner (Side.registerNoOut)

// spent reports whether this run's read budget (Worker.budget) is used
// up, or t (the tasklet of the side that would be read) waits in class
// Bulk already (its cap was used earlier in the round: its Bulk run reads
// it, not this run of another tasklet); then t runs again later in class
// Bulk (Loop.Demote: out of Urgent if an fd event queued it there).
func (w *Worker) spent(t *loop.Tasklet) bool {
	if w.budget > 0 && !t.QueuedIn(loop.Bulk) {
		return false
	}
	w.L.Demote(t)
	return true
}

// StartHTTP takes ownership of the accepted client fd (non-blocking) and
// serves http requests on it per fe.HTTP. fe is the frontend the
// connection was accepted by; cur, when not nil, is its bind's current
// frontend (the engine swaps it on each configuration change): each new
// request is resolved (routes, default backend, http options, timeouts)
// against what it holds then, a request in flight finishes on what it
// started with. Loop thread only.
func (w *Worker) StartHTTP(fd int, fe *Frontend, cur *atomic.Pointer[Frontend]) {
	w.startHTTP(fd, plainTransport(), fe, cur, 0)
}

// startHTTP is StartHTTP over the client transport xp (a TLS one is
// established: xprt_tls_accept.go), for the client a PROXY header named
// (pp, proxyhdr.go; 0: the peer).
func (w *Worker) startHTTP(fd int, xp transport, fe *Frontend, cur *atomic.Pointer[Frontend], pp uint32) *h1Conn {
	c := w.newConn()
	c.acc, c.cur = fe, cur
	c.fe, c.hf = fe, fe.HTTP
	c.pp = pp // given back by recycle, whatever ends the connection
	c.cli.adopt(fd, xp)
	c.cli.Connected = true
	w.linkHTTP(c)
	c.fs = fe.Stats.Loop(w.id)
	c.fs.ConnTotal.Add(1)
	c.fs.ConnCur.Add(1)
	c.fs.ConnStarted(stats.Sec(w.L.Now()))
	c.t0 = w.L.Now()
	// TCP_NODELAY: inherited from the listening socket (core/listen).
	if err := c.cli.registerNoOut(w.L); err != nil {
		c.close(closeAbort)
		return nil
	}
	ap := w.clientAddr(fd, pp)
	c.peer, c.port = ap.Addr(), ap.Port()
	c.phase = cHead
	c.armIn(c.hf.RequestTimeout)
	if c.cli.canRecv() { // the transport holds the first request already (register)
		w.L.Wake(&c.cli.Task, loop.Urgent)
	}
	return c
}

func (w *Worker) newConn() *h1Conn {
	if c := popFree(&w.h.freeConn); c != nil {
		return c
	}
	c := &h1Conn{w: w}
	c.cli.Task.Run, c.cli.Task.Owner = runHTTPTask, c
	c.timer.Run, c.timer.Owner = runHTTPTimer, c
	return c
}

func (w *Worker) linkHTTP(c *h1Conn) {
	h := &w.h
	h.live.PushFront(&c.link)
	w.nlive++
	w.act.Conns.Add(1)
}

func (w *Worker) unlinkHTTP(c *h1Conn) {
	h := &w.h
	h.live.Remove(&c.link)
	w.nlive--
	w.act.Conns.Add(-1)
}

// peerAddrPort is the client's IP address and port, read into a stack
// buffer.
func peerAddrPort(fd int) netip.AddrPort {
	var rsa unix.RawSockaddrAny
	l := uint32(unsafe.Sizeof(rsa))
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
	if e != 0 {
		return netip.AddrPort{}
	}
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), ntohs(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr), ntohs(p.Port))
	}
	return netip.AddrPort{}
}

// armIn arms the head phase's deadline d from now; d <= 0 means none.
func (c *h1Conn) armIn(d time.Duration) {
	if d <= 0 {
		c.w.L.Disarm(&c.timer)
		return
	}
	c.deadline = c.w.L.Now() + int64(d)
	c.w.L.Arm(&c.timer, c.deadline)
}

// process runs whenever the client's tasklet runs (or the stream's server
// side had work: run): it advances the phases as far as it can without
// blocking.
func (c *h1Conn) process() {
	for i := 0; i < 16; i++ {
		ph := c.phase
		switch ph {
		case cHead:
			c.readHead()
			if c.cli.Task.Queued() {
				return // a request to start (Normal), or the budget spent (Bulk)
			}
		case cStream:
			start := c.st.phase == phHead
			c.st.process()
			if start {
				c.releaseIn() // the head is consumed: an idle connection holds no buffer
			}
		case cLinger:
			c.linger()
		default: // cClosed: nothing to do on I/O
			return
		}
		if c.phase == ph {
			return
		}
	}
	// Many pipelined requests in a row: yield, come back later.
	c.w.L.Wake(&c.cli.Task, loop.Bulk)
}

// run: the stream's server side has work (streamMux).
func (c *h1Conn) run(*stream) { c.process() }

// stream returns the stream of the request being received, taken when
// its first byte arrived (or for an answer to a connection that sent
// nothing).
func (c *h1Conn) stream() *stream {
	if c.st == nil {
		c.resolve()
		c.st = c.w.getStream(c, &c.client, &c.cli, &c.in)
	}
	return c.st
}

// answer ends the head phase with a proxy answer of status (a head
// refused, or not received in time): the stream of the request (one is
// taken for a connection that sent nothing) sends it, and the connection
// closes after it.
func (c *h1Conn) answer(status int) {
	s := c.stream()
	c.phase = cStream
	c.w.L.Disarm(&c.timer)
	s.fail(status)
}

// readHead reads and parses the next request head from the client.
func (c *h1Conn) readHead() {
	w := c.w
	for {
		if c.in != nil && c.in.Len() > 0 && c.nreq == 0 && c.st == nil && c.hf.speaksH2() {
			if !c.hf.speaksH1() {
				c.toH2() // an HTTP/2-only frontend: whatever came is HTTP/2's to judge
				return
			}
			// HTTP/2 with prior knowledge: its preface, whole or begun,
			// where the first request line would be.
			d := c.in.Data()
			k := min(len(d), len(h2.Preface))
			if string(d[:k]) == h2.Preface[:k] {
				if k == len(h2.Preface) {
					c.toH2()
					return
				}
				goto more // wait for the rest of the preface
			}
		}
		if c.in != nil && c.in.Len() > 0 {
			s := c.stream()
			// The head limit is that of the buffer the head is parsed
			// from (its size was fixed when it was taken; bufsize may
			// have changed since the parser was created).
			s.req.Limits.MaxHead = headLimit(c.in.Cap())
			n, err := s.req.Parse(c.in.Data())
			if err != nil {
				c.fs.Errors.Add(1)
				s.bytesIn += int64(c.in.Len()) // what came of the bad head
				s.logBadLine()
				c.answer(err.(*http1.Error).Status)
				return
			}
			if n > 0 {
				// The head is complete: the request starts (routing, the
				// server attempt) in the connection's next run, in class
				// Normal, HAProxy's stream processing; this run, an
				// Urgent I/O one, ends here.
				c.nreq++
				c.phase = cStream
				w.L.Disarm(&c.timer)
				w.L.Wake(&c.cli.Task, loop.Normal)
				return
			}
		}
	more:
		if !c.cli.canRecv() || w.spent(&c.cli.Task) {
			return
		}
		if c.in == nil {
			c.in = w.Bufs.Get()
		}
		compact(c.in)
		if c.in.Room() == 0 {
			// cannot happen: the parser's head limit is below the buffer
			// size; answer as the parser would.
			c.answer(431)
			return
		}
		fresh := c.in.Len() == 0
		room := c.in.Room()
		n, e := c.cli.recv(c.in.Free())
		switch {
		case e == 0 && n > 0:
			c.in.Produced(n)
			w.budget -= c.cli.cost(n)
			if fresh && c.nreq > 0 {
				// the keep-alive wait ends, the request timeout starts
				c.armIn(c.hf.RequestTimeout)
			}
			if n < room {
				c.cli.shortRead()
			}
		case e == 0:
			// End of stream between requests is the normal end of a
			// keep-alive connection; within a head it is an aborted
			// request: nothing to answer to.
			c.close(closeNormal)
			return
		case e == unix.EAGAIN:
			c.cli.drained()
			c.releaseIn()
			return
		default:
			c.close(closeAbort)
			return
		}
	}
}

// compact moves pending bytes to the front of b when it has no room left
// after them. Spans of a head being parsed stay valid: they are offsets
// from the first pending byte.
func compact(b *Buffer) {
	if b.head > 0 && b.tail == len(b.b) {
		n := copy(b.b, b.b[b.head:b.tail])
		b.head, b.tail = 0, n
	}
}

func (c *h1Conn) releaseIn() {
	if c.in != nil && c.in.Len() == 0 {
		c.w.Bufs.Put(c.in)
		c.in = nil
	}
}

// streamDone: the request in flight ended (streamMux). The connection
// waits for its next request, or closes gracefully.
func (c *h1Conn) streamDone(s *stream, closing bool) {
	w := c.w
	c.st = nil
	w.putStream(s)
	c.t0 = w.L.Now() // the next request's timers start here
	if closing {
		c.closeGracefully()
		return
	}
	c.phase = cHead
	c.resolve() // the next request's timeouts
	if c.in != nil && c.in.Len() > 0 {
		c.armIn(c.hf.RequestTimeout)
	} else {
		c.armIn(c.hf.KeepAliveTimeout)
	}
}

// streamAbort: the request in flight cannot go on; an HTTP/1.1
// connection ends with it (streamMux).
func (c *h1Conn) streamAbort(_ *stream, why uint8) { c.close(why) }

// closeGracefully ends a connection after its last response: close(2) at
// once when no client byte is pending (a FIN), otherwise shut the write
// side and read until the client closes, so that the kernel does not
// answer unread input with a RST that would destroy the response.
func (c *h1Conn) closeGracefully() {
	if (c.in == nil || c.in.Len() == 0) && !c.cli.canRecv() {
		// No byte known to be pending (the last read was short, no new
		// edge since): a plain close sends a FIN after the answer.
		c.close(closeNormal)
		return
	}
	if c.in == nil || c.in.Len() == 0 {
		var b [1]byte
		_, e := c.cli.recv(b[:])
		if e == unix.EAGAIN {
			c.close(closeNormal)
			return
		}
		if e != 0 {
			c.close(closeAbort)
			return
		}
	}
	c.cli.shutw()
	c.phase = cLinger
	c.deadline = c.w.L.Now() + lingerTimeout
	c.w.L.Arm(&c.timer, c.deadline)
	c.linger()
}

// linger discards client input until end of stream or the linger timeout.
func (c *h1Conn) linger() {
	w := c.w
	if c.in == nil {
		c.in = w.Bufs.Get()
	}
	for c.cli.canRecv() && !w.spent(&c.cli.Task) {
		c.in.head, c.in.tail = 0, 0
		n, e := c.cli.recv(c.in.b)
		switch {
		case e == 0 && n > 0:
			w.budget -= c.cli.cost(n)
			continue
		case e == unix.EAGAIN:
			c.cli.drained()
			return
		case e == 0:
			c.close(closeNormal)
			return
		default:
			c.close(closeAbort)
			return
		}
	}
}

// onTimer: the deadline of the head phase, or of the linger.
func (c *h1Conn) onTimer() {
	now := c.w.L.Now()
	switch c.phase {
	case cHead:
		if now < c.deadline {
			c.w.L.Arm(&c.timer, c.deadline)
			return
		}
		c.fs.Timeouts.Add(1)
		if (c.in != nil && c.in.Len() > 0) || c.nreq == 0 {
			// A head partly received, or nothing at all on a new
			// connection (HAProxy answers both): the client learns why.
			c.answer(408)
		} else {
			c.close(closeNormal) // idle keep-alive connection
		}
	case cLinger:
		c.close(closeTimeout)
	}
}

// popFree takes the last object of a loop's free list, or returns nil
// when the list is empty (the slot is cleared so the list holds no stale
// pointer).
func popFree[T any](l *[]*T) *T {
	n := len(*l)
	if n == 0 {
		return nil
	}
	p := (*l)[n-1]
	(*l)[n-1] = nil
	*l = (*l)[:n-1]
	return p
}

// close ends the client connection and the request in flight, if any.
func (c *h1Conn) close(why uint8) {
	if c.phase == cClosed {
		return
	}
	w := c.w
	c.phase = cClosed
	w.L.Disarm(&c.timer)
	if s := c.st; s != nil {
		c.st = nil
		s.end(why)
		w.putStream(s)
	}
	// An aborted connection is reset (see the package doc, "Aborts"): a
	// peer must not read a cut stream as a complete one.
	w.limitConnEnd(c.cli.FD.Fd) // limits.go
	c.cli.close(w.L, why == closeAbort || why == closeCut)
	if c.in != nil {
		c.in.head, c.in.tail = 0, 0
		w.Bufs.Put(c.in)
		c.in = nil
	}
	c.fs.ConnCur.Add(-1)
	if why == closeAbort {
		c.fs.Aborts.Add(1)
	}
	w.unlinkHTTP(c)
	if c.acc.OnClose != nil {
		c.acc.OnClose(w.id)
	}
	c.recycle()
}

// recycle clears c for reuse by the next accepted connection. Nothing
// refers to it any more: its tasklet is unqueued, its timer disarmed, its
// fd unregistered.
func (c *h1Conn) recycle() {
	w := c.w
	w.dropCarried(c.pp)
	c.client = client{}
	c.cli.FD.Ready = 0
	c.cli.Connected = false
	c.cli.xp = plainTransport() // a TLS transport's state goes with the connection
	c.nreq = 0
	c.deadline = 0
	if len(w.h.freeConn) < maxFreeConns {
		w.h.freeConn = append(w.h.freeConn, c)
	}
}

// upgrade hands the client and server connections of an upgraded
// exchange (101 relayed) to a tcp-mode Tunnel, with the bytes each side
// already sent beyond the heads (streamMux). The tunnel takes over the
// counters, the server slot and the frontend's OnClose.
func (c *h1Conn) upgrade(s *stream) {
	w := c.w
	sc := s.sc
	// The tunnel ends with the OnClose of the frontend that accepted the
	// connection; its splice mode and timeout are the request's.
	t := &Tunnel{fe: c.acc, fs: c.fs}
	t.w, t.be, t.server, t.bs, t.ss = w, s.be, s.server, s.bs, s.ss
	// The fds, buffers and slot leave the http side without being closed;
	// each side keeps its transport.
	fd, ready := c.cli.detach(w.L)
	t.cli.adopt(fd, c.cli.xp)
	t.cli.FD.Ready = ready
	fd, ready = sc.side.detach(w.L)
	t.srv.adopt(fd, sc.side.xp)
	t.srv.FD.Ready = ready
	t.cli.Connected, t.srv.Connected = true, true
	t.cli.Task.Run, t.cli.Task.Owner = runTunnelTask, t
	t.srv.Task.Run, t.srv.Task.Owner = runTunnelTask, t
	t.timer.Run, t.timer.Owner = runTunnelTimer, t
	t.c2s = dir{src: &t.cli, dst: &t.srv, other: &t.s2c, mover: mover{mode: s.fe.Splice}, buf: c.in, to: int64(s.be.B.ServerTimeout)}
	t.s2c = dir{src: &t.srv, dst: &t.cli, other: &t.c2s, mover: mover{mode: s.fe.Splice}, buf: sc.in, to: int64(s.hf.ClientTimeout)}
	t.idle = int64(s.fe.TunnelTimeout)
	if bt := int64(s.be.B.TunnelTimeout); bt > 0 && (t.idle <= 0 || bt < t.idle) {
		t.idle = bt
	}
	t.state = stEstablished
	c.in, sc.in = nil, nil
	s.server = nil
	s.sc = nil
	w.closeSrv(sc)
	// The upgrade request ends here (its entry says 101); the tunnel
	// counts the bytes that follow and logs nothing more.
	s.endRequest()
	c.st = nil
	s.end(closeNormal)
	w.putStream(s)
	c.phase = cClosed
	w.L.Disarm(&c.timer)
	w.L.Unqueue(&c.cli.Task)
	w.unlinkHTTP(c)
	c.recycle()

	w.link(t)
	if err := t.cli.register(w.L); err != nil {
		t.close(closeAbort)
		return
	}
	if err := t.srv.register(w.L); err != nil {
		t.close(closeAbort)
		return
	}
	t.lastIO = w.L.Now()
	if t.idle > 0 {
		t.armAt(t.lastIO + t.idle)
	}
	w.L.Wake(&t.cli.Task, loop.Urgent)
}
