package proxy

import (
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// HTTP mode (http.go, http_exchange.go, http_server.go, http_route.go)
//
// A frontend with HTTP set (mode http) hands each accepted fd to
// StartHTTP. An httpConn serves one request at a time: the head is parsed
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

// Phases of an http client connection.
const (
	phHead     uint8 = iota // waiting for / reading a request head
	phQueue                 // waiting for a server slot
	phConnect               // connecting to the server
	phExchange              // request to the server, response to the client
	phDrain                 // a proxy answer is flushed, then the connection closes
	phLinger                // answer sent and write side shut: discard input until EOF
	phClosed
)

// viaName is the pseudonym in the Via fields we add.
const viaName = "spliced"

// lingerTimeout bounds how long a closing connection keeps reading (and
// discarding) what the client still sends, so that closing with unread
// input (which makes the kernel send a RST that may destroy the answer
// before the client read it) is avoided.
const lingerTimeout = 1e9

// httpConn is an http-mode client connection and, while a request is in
// flight, its exchange with one server connection. It is owned by one
// loop; one request at a time (pipelined requests wait in the input buffer
// until the current response is complete).
type httpConn struct {
	link ilist.Link[httpConn] // in httpState.live; first: ilist finds the httpConn from it
	// The request's server attempt (attempt.go): the worker, the backend,
	// the server whose slot the request holds and the counter slots of
	// both, the queue, the current phase's deadline, the termination.
	srvAttempt
	// acc is the frontend the connection was accepted by: its OnClose
	// (maxconn accounting) runs when the connection ends. fe and hf are
	// the generation the current request resolves against, loaded from
	// cur (the bind's current frontend) when a request starts.
	acc *Frontend
	cur *atomic.Pointer[Frontend]
	fe  *Frontend
	hf  *HTTPFront

	cli  Side
	in   *Buffer // client bytes not yet forwarded
	qout *Buffer // rewritten request head: kept until sent entirely, and until a response head comes (replay), or the request is aborted
	qlen int     // length of the rewritten head in qout
	rout *Buffer // rewritten response head, or a proxy answer
	// req is the parser state of the request in flight, from the loop's
	// free list (getReq) from the first byte of its head until the
	// exchange ends or the connection closes (putReq); nil while idle.
	req *http1.Request
	sc  *srvConn
	// This loop's counter slot of the frontend (the backend's and the
	// server's are the attempt's).
	fs    *stats.Slot
	timer loop.Timer

	// phase, cliWait, srvWait and port share one word (see
	// TestConnectionObjectsKeepTheirSizeClass).
	phase uint8
	// Exchange timeouts per side (http_timeout.go): since when the client
	// (the server) holds the exchange up without progress, and whether it
	// did at the end of the last run.
	cliWait, srvWait   bool
	port               uint16 // the client's port, with peer
	cliSince, srvSince int64
	peer               netip.Addr
	// reqAt: when the request head was complete (loop.Now units);
	// sentAt: when its rewritten head left entirely for the server. The
	// request and response time measures start there.
	reqAt, sentAt int64
	// t0 is when the current request began for the access log's timers:
	// the accept, or the end of the previous request (HAProxy's Tq
	// includes the wait for the first byte).
	t0 int64
	// lg is the access-log entry of the request in flight (frontend
	// access_log on): from the worker's free list when the first byte of
	// the head arrives, pushed and given back when the request ends
	// (endRequest); nil otherwise.
	lg   *stats.LogEntry
	nreq int

	reqBody, respBody body
	reqHeadSent       bool // the rewritten head left entirely
	reqAborted        bool // nothing more of the request is forwarded (abortRequest)
	srvAnswered       bool // a response head (1xx included) came: no replay
	respHead          bool // the final response head was parsed
	respSent          bool // some response byte left for the client (flushTo): a built head not sent yet does not count
	closeAfter        bool // the client connection ends after this response
	upgrade           bool // 101 relayed: becomes a tunnel once flushed
	moved             bool
	srvCounted        bool // the request was counted for its server (a replay is not another one)

	// cert: the client-certificate fields of a TLS connection whose
	// frontend asks for them (xprt_tls_accept.go), nil otherwise.
	cert *clientCert

	bytesIn, bytesOut int64
	// budget is what the connection may still read in this run of one of
	// its tasklets (runCap per run, as a tunnel direction): every read
	// loop (heads, responses, bodies, lingering) stops at zero and wakes
	// its tasklet again in class Bulk, so that one connection that floods
	// (1xx responses to an HTTP/1.0 client, input after an error answer,
	// pipelined heads) cannot hold the loop thread.
	budget int
}

var _ = [1]struct{}{}[unsafe.Offsetof(httpConn{}.link)] // link first (ilist)

func runHTTPTask(tk *loop.Tasklet) {
	c := tk.Owner.(*httpConn)
	c.budget = runCap
	c.process()
}

// spent reports whether this run's read budget is used up; then t (the
// tasklet of the side that would be read) runs again later in class Bulk.
func (c *httpConn) spent(t *loop.Tasklet) bool {
	if c.budget > 0 {
		return false
	}
	c.w.L.Wake(t, loop.Bulk)
	return true
}

func runHTTPTimer(tm *loop.Timer) { tm.Owner.(*httpConn).onTimer() }

// StartHTTP takes ownership of the accepted client fd (non-blocking) and
// serves http requests on it per fe.HTTP. fe is the frontend the
// connection was accepted by; cur, when not nil, is its bind's current
// frontend (the engine swaps it on each configuration change): each new
// request is resolved (routes, default backend, http options, timeouts)
// against what it holds then, a request in flight finishes on what it
// started with. Loop thread only.
func (w *Worker) StartHTTP(fd int, fe *Frontend, cur *atomic.Pointer[Frontend]) {
	w.startHTTP(fd, plainTransport(), fe, cur)
}

// startHTTP is StartHTTP over the client transport xp (a TLS one is
// established: xprt_tls_accept.go).
func (w *Worker) startHTTP(fd int, xp transport, fe *Frontend, cur *atomic.Pointer[Frontend]) *httpConn {
	c := w.newConn()
	c.acc, c.cur = fe, cur
	c.fe, c.hf = fe, fe.HTTP
	c.cli.adopt(fd, xp)
	c.cli.Connected = true
	w.linkHTTP(c)
	c.fs = fe.Stats.Loop(w.id)
	c.fs.ConnTotal.Add(1)
	c.fs.ConnCur.Add(1)
	c.fs.ConnStarted(stats.Sec(w.L.Now()))
	c.t0 = w.L.Now()
	setNoDelay(fd)
	if err := c.cli.register(w.L); err != nil {
		c.close(closeAbort)
		return nil
	}
	ap := peerAddrPort(fd)
	c.peer, c.port = ap.Addr(), ap.Port()
	c.hash = balance.HashAddr(c.peer)
	c.phase = phHead
	c.armIn(c.hf.RequestTimeout)
	if c.cli.canRecv() { // the transport holds the first request already (register)
		w.L.Wake(&c.cli.Task, loop.Urgent)
	}
	return c
}

func (w *Worker) newConn() *httpConn {
	h := &w.h
	if n := len(h.freeConn); n > 0 {
		c := h.freeConn[n-1]
		h.freeConn[n-1] = nil
		h.freeConn = h.freeConn[:n-1]
		return c
	}
	c := new(httpConn)
	c.w = w
	w.initWaiter(c)
	c.cli.Task.Run, c.cli.Task.Owner = runHTTPTask, c
	c.timer.Run, c.timer.Owner = runHTTPTimer, c
	return c
}

func (w *Worker) linkHTTP(c *httpConn) {
	h := &w.h
	h.live.PushFront(&c.link)
	w.nlive++
	w.act.Conns.Add(1)
}

func (w *Worker) unlinkHTTP(c *httpConn) {
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

func (c *httpConn) arm(at int64) {
	c.deadline = at
	c.w.L.Arm(&c.timer, at)
}

// armIn arms the phase deadline d from now; d <= 0 means none.
func (c *httpConn) armIn(d time.Duration) {
	if d <= 0 {
		c.w.L.Disarm(&c.timer)
		return
	}
	c.arm(c.w.L.Now() + int64(d))
}

// process runs whenever the client's or the attached server connection's
// tasklet runs: it advances the phases as far as it can without blocking.
func (c *httpConn) process() {
	for i := 0; i < 16; i++ {
		ph := c.phase
		switch ph {
		case phHead:
			c.readHead()
		case phConnect:
			c.checkConnect(&c.sc.side, c.sc)
		case phExchange:
			c.exchange()
			if c.phase == phExchange {
				c.exchangeTimers()
			}
		case phDrain:
			c.drain()
		case phLinger:
			c.linger()
		case phQueue:
			// A client that resets while queued gives its place up
			// (HAProxy's CQ): no slot for a request nobody waits for. A
			// clean end (FIN) is a half-close: the request stays.
			if c.cli.FD.Ready&evErr != 0 {
				c.queued()
				c.blame('C', 'Q')
				c.close(closeAbort)
			}
			return
		default: // phClosed: nothing to do on I/O
			return
		}
		if c.phase == ph {
			return
		}
	}
	// Many pipelined requests in a row: yield, come back later.
	c.w.L.Wake(&c.cli.Task, loop.Bulk)
}

// readHead reads and parses the next request head from the client.
func (c *httpConn) readHead() {
	for {
		if c.in != nil && c.in.Len() > 0 {
			if c.req == nil {
				c.req = c.w.getReq()
				c.beginLog()
			}
			// The head limit is that of the buffer the head is parsed
			// from (its size was fixed when it was taken; bufsize may
			// have changed since the parser was created).
			c.req.Limits.MaxHead = headLimit(c.in.Cap())
			n, err := c.req.Parse(c.in.Data())
			if err != nil {
				c.fs.Errors.Add(1)
				c.bytesIn += int64(c.in.Len()) // what came of the bad head
				c.logBadLine()
				c.fail(err.(*http1.Error).Status)
				return
			}
			if n > 0 {
				c.startRequest(n)
				return
			}
		}
		if !c.cli.canRecv() || c.spent(&c.cli.Task) {
			return
		}
		if c.in == nil {
			c.in = c.w.Bufs.Get()
		}
		compact(c.in)
		if c.in.Room() == 0 {
			// cannot happen: the parser's head limit is below the buffer
			// size; answer as the parser would.
			c.fail(431)
			return
		}
		fresh := c.in.Len() == 0
		room := c.in.Room()
		n, e := c.cli.recv(c.in.Free())
		switch {
		case e == 0 && n > 0:
			c.in.Produced(n)
			c.budget -= c.cli.cost(n)
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

func (c *httpConn) releaseIn() {
	if c.in != nil && c.in.Len() == 0 {
		c.w.Bufs.Put(c.in)
		c.in = nil
	}
}

// startRequest handles a complete head of n bytes at the front of c.in:
// checks, routing, the rewritten head, then a server.
func (c *httpConn) startRequest(n int) {
	c.resolve()
	w, r, hf := c.w, c.req, c.hf
	buf := c.in.Data()
	c.nreq++
	c.reqAt = w.L.Now()
	c.fs.Requests.Add(1)
	c.fs.ReqStarted(stats.Sec(c.reqAt))
	c.w.L.Disarm(&c.timer)
	c.bytesIn += int64(n)
	if lg := c.lg; lg != nil {
		lg.Head = w.L.Now()
		lg.Frontend = c.fe.Name // the generation the request resolves against
		// The request line: method, target, " HTTP/1.x" (the parser
		// takes single spaces and an 8-byte version only).
		lg.SetLine(buf[r.Method.Off : r.Target.Off+r.Target.Len+9])
	}
	if r.MethodID == http1.MethodCONNECT {
		c.fail(501) // a reverse proxy does not open tunnels on request
		return
	}
	if r.Body == http1.BodyLength && hf.MaxBody > 0 && r.ContentLength > hf.MaxBody {
		c.fs.Denied.Add(1)
		c.fail(413)
		return
	}
	be, ok := hf.route(buf, r, &c.w.h.path)
	if !ok || be == nil {
		c.blame('P', 'R') // no route: the proxy's answer
		c.fail(503)
		return
	}
	c.be = be
	if c.lg != nil {
		c.lg.Backend = be.Name
	}
	c.reqBody.start(r.Body, r.ContentLength, hf.MaxBody)
	if r.Body == http1.BodyChunked {
		refuse := http1.RefuseHopByHop
		if hf.XForwardedFor {
			refuse |= http1.RefuseXForwardedFor
		}
		if hf.XForwardedProto {
			refuse |= http1.RefuseXForwardedProto
		}
		prefix := c.fe.CertStripName // the prefix the head strips, below
		if c.cert != nil && c.cert.fields != nil {
			prefix = c.cert.prefix
		}
		c.reqBody.refuseTrailers(refuse, prefix)
	}
	// Check the body bytes that came with the head now: a malformed
	// chunked body sent in one piece is refused before anything reaches
	// a server.
	if r.Body == http1.BodyChunked && len(buf) > n {
		if st := c.reqBody.frame(buf[n:]); st != 0 {
			c.fs.Errors.Add(1)
			c.fail(st)
			return
		}
	}
	// The rewritten head: request line and end-to-end fields as received,
	// the proxy's fields, and "Connection: upgrade" when upgrading.
	if c.qout == nil {
		c.qout = w.Bufs.Get()
	}
	if n+headSlack > c.qout.Cap() {
		// The head was parsed from a larger buffer than the one it is
		// rewritten into (bufsize lowered since): too large here.
		c.fs.Errors.Add(1)
		c.fail(431)
		return
	}
	d := c.qout.b[:0:len(c.qout.b)]
	d = append(d, buf[r.Method.Off:r.Target.Off+r.Target.Len]...)
	if r.Minor == 0 {
		d = append(d, " HTTP/1.0\r\n"...)
	} else {
		d = append(d, " HTTP/1.1\r\n"...)
	}
	keep := http1.KeepTransferEncoding
	if r.Upgrade {
		keep |= http1.KeepUpgrade
	}
	if hf.XForwardedProto {
		keep |= http1.DropXForwardedProto // replaced below, never forged
	}
	// The client's own client-certificate fields are dropped, on every
	// bind of a frontend that verifies client certificates on one (as it
	// is now: a kept-alive connection follows the change): only the
	// proxy's below reach the server.
	strip := c.fe.CertStrip
	if c.cert != nil && c.cert.fields != nil { // not a subject kept for the access log only
		strip = c.cert.strip
	}
	d = r.AppendEndToEndStrip(d, buf, keep, strip)
	if c.cert != nil {
		d = append(d, c.cert.fields...)
	}
	if r.Upgrade {
		d = append(d, "Connection: upgrade\r\n"...)
	}
	if hf.XForwardedFor && c.peer.IsValid() {
		d = http1.AppendXForwardedFor(d, c.peer)
	}
	if hf.XForwardedProto {
		d = http1.AppendXForwardedProto(d, c.cli.xp.secure())
	}
	if hf.Via {
		d = http1.AppendVia(d, r.Minor, viaName)
	}
	d = append(d, "\r\n"...)
	if len(d) > len(c.qout.b) {
		// cannot happen (headSlack covers what is added); never write
		// past the buffer
		c.fail(431)
		return
	}
	c.qout.head, c.qout.tail = 0, len(d)
	c.qlen = len(d)
	c.in.Consumed(n)
	if st := c.reqBody.coalesce(c.in, c.qout); st != 0 {
		c.fs.Errors.Add(1)
		c.fail(st)
		return
	}
	c.releaseIn()

	// The rest of the exchange state is clear: endExchange ran when the
	// previous one ended (or recycle, on a new connection).
	c.closeAfter = r.Close || w.stopping // stop.go: the last response
	c.bs = be.Stats.Loop(w.id)
	c.bs.Requests.Add(1)
	c.bs.ReqStarted(stats.Sec(w.L.Now()))
	c.bs.ConnTotal.Add(1)
	c.acquire(nil)
}

// resolve loads the bind's current generation of the frontend for the
// request that starts (one atomic load: kept-alive connections see
// in-place server changes, added servers and routes as new connections
// do). A frontend no longer in http mode leaves the one held.
func (c *httpConn) resolve() {
	if c.cur == nil {
		return
	}
	if f := c.cur.Load(); f != nil && f != c.fe && f.HTTP != nil {
		c.fe, c.hf = f, f.HTTP
	}
}

// useServer: the request holds a slot of c.server; reuse a pooled
// connection when that is safe, else connect (attemptOwner).
func (c *httpConn) useServer() {
	s := c.server
	if lg := c.lg; lg != nil {
		lg.Server = s.Name
		if lg.Granted == 0 {
			lg.Granted = c.w.L.Now()
		}
	}
	if c.mayReuse() {
		if sc := c.w.takeIdle(s); sc != nil {
			if c.attempts > 0 { // a retry after a failed connect, on a pooled connection
				c.countAttempt()
			}
			c.attach(sc)
			c.startExchange()
			c.process()
			return
		}
	}
	c.connect()
}

// waitQueue: the request waits for a server slot until c.deadline.
func (c *httpConn) waitQueue() {
	c.phase = phQueue
	c.armIn(c.be.B.QueueTimeout)
}

// noServer answers 503: no server can take the request (HAProxy's
// <NOSRV> SC).
func (c *httpConn) noServer() {
	c.blame('S', 'C')
	c.fail(503)
}

// dropConn closes the server connection of a failed connect.
func (c *httpConn) dropConn() {
	if c.sc != nil {
		c.w.closeSrv(c.sc)
		c.sc = nil
	}
}

// gaveUp answers 503 after the last connect failed: SC, or sC after a
// connect timeout (onTimer).
func (c *httpConn) gaveUp() {
	c.fs.ConnectErrors.Add(1)
	c.fail(503)
}

// established: the connection to the server is ready; the exchange
// starts.
func (c *httpConn) established() {
	c.sc.side.Connected = true
	c.startExchange()
}

// mayReuse: a pooled connection may have been closed by the server at the
// very moment we reuse it; then the request is replayed on a new
// connection, which is only possible when no body byte has left the
// client buffer and the method is idempotent (RFC 9110 §9.2.2).
func (c *httpConn) mayReuse() bool {
	if c.req.Body != http1.BodyNone || c.req.Upgrade || c.req.Minor == 0 {
		return false
	}
	switch c.req.MethodID {
	case http1.MethodGET, http1.MethodHEAD, http1.MethodOPTIONS, http1.MethodTRACE,
		http1.MethodPUT, http1.MethodDELETE:
		return true
	}
	return false
}

func (c *httpConn) attach(sc *srvConn) {
	sc.owner = c
	c.sc = sc
	if sc.resp == nil {
		sc.resp = c.w.getResp()
	}
	sc.resp.Reset()
}

// connect opens a new connection to the request's server.
func (c *httpConn) connect() {
	c.countAttempt()
	if lg := c.lg; lg != nil && lg.ConnStart == 0 {
		lg.ConnStart = c.w.L.Now()
	}
	sc, ok := c.w.dial(c.server)
	if !ok {
		c.connectFailed()
		return
	}
	c.attach(sc)
	c.phase = phConnect
	c.armIn(c.be.B.ConnectTimeout)
}

// fail answers the request with a proxy-generated error and closes the
// connection once it is sent. If part of a response already went to the
// client, there is nothing sensible to add: the connection is cut. A
// response head (or interim response) built but not sent yet is replaced
// by the answer: the client has seen nothing of it.
func (c *httpConn) fail(status int) {
	if c.phase == phClosed {
		return
	}
	if !c.respSent {
		// The answer the client gets counts where the request went: on
		// the backend once it was handed to one, on the server once one
		// was chosen (a 502 or 504 for it, a 503 after its connect
		// failed). An exchange cut after the response began counts the
		// server's status only.
		c.fs.CountStatus(status)
		if c.bs != nil {
			c.bs.CountStatus(status)
		}
		if c.ss != nil {
			c.ss.CountStatus(status)
		}
	}
	c.w.dequeue(&c.wait)
	if c.sc != nil {
		c.w.closeSrv(c.sc)
		c.sc = nil
	}
	c.releaseServer()
	if c.respSent {
		c.close(closeAbort)
		return
	}
	if c.rout == nil {
		c.rout = c.w.Bufs.Get()
	}
	ans := http1.AppendError(c.rout.b[:0:len(c.rout.b)], status)
	if len(ans) > len(c.rout.b) {
		// cannot happen (bufsize >= 1024, answers are shorter)
		c.close(closeAbort)
		return
	}
	c.rout.head, c.rout.tail = 0, len(ans)
	c.bytesOut += int64(len(ans))
	if c.lg != nil {
		c.lg.Status = int32(status)
		if c.term[0] == 0 {
			c.term = stats.Termination{failWho(status), c.phaseByte()}
		}
	}
	c.endRequest()
	c.putQout()
	c.phase = phDrain
	c.armIn(c.hf.ClientTimeout)
	c.drain()
}

// badResponse answers 502 for a response the server spoiled: not HTTP,
// too large, cut before its head ended, or a body framing broken with
// the head.
func (c *httpConn) badResponse() {
	c.responseError()
	c.fail(502)
}

// responseError counts a response the server spoiled (HAProxy's eresp): a
// bad or cut response, or none within server_ms. Malformed requests are
// Errors, failed connects ConnectErrors: each fault is counted once.
func (c *httpConn) responseError() {
	c.fs.ResponseErrors.Add(1)
	if c.bs != nil {
		c.bs.ResponseErrors.Add(1)
	}
	if c.ss != nil {
		c.ss.ResponseErrors.Add(1)
	}
}

// drain flushes a proxy answer, then shuts the write side and lingers.
func (c *httpConn) drain() {
	if c.rout != nil && c.rout.Len() > 0 {
		if !c.cli.canSend() {
			return
		}
		if !c.flushTo(&c.cli, c.rout) {
			c.close(closeAbort)
			return
		}
		if c.rout.Len() > 0 {
			return
		}
	}
	c.putRout()
	c.closeGracefully()
}

// closeGracefully ends a connection after its last response: close(2) at
// once when no client byte is pending (a FIN), otherwise shut the write
// side and read until the client closes, so that the kernel does not
// answer unread input with a RST that would destroy the response.
func (c *httpConn) closeGracefully() {
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
	c.phase = phLinger
	c.arm(c.w.L.Now() + lingerTimeout)
	c.linger()
}

// linger discards client input until end of stream or the linger timeout.
func (c *httpConn) linger() {
	if c.in == nil {
		c.in = c.w.Bufs.Get()
	}
	for c.cli.canRecv() && !c.spent(&c.cli.Task) {
		c.in.head, c.in.tail = 0, 0
		n, e := c.cli.recv(c.in.b)
		switch {
		case e == 0 && n > 0:
			c.budget -= c.cli.cost(n)
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

// onTimer: the deadline of the current phase.
func (c *httpConn) onTimer() {
	now := c.w.L.Now()
	switch c.phase {
	case phHead:
		if now < c.deadline {
			c.w.L.Arm(&c.timer, c.deadline)
			return
		}
		c.fs.Timeouts.Add(1)
		if (c.in != nil && c.in.Len() > 0) || c.nreq == 0 {
			// A head partly received, or nothing at all on a new
			// connection (HAProxy answers both): the client learns why.
			c.fail(408)
		} else {
			c.close(closeNormal) // idle keep-alive connection
		}
	case phQueue:
		c.queueTimeout()
		c.fs.Timeouts.Add(1)
		c.blame('s', 'Q')
		c.fail(503)
	case phConnect:
		c.fs.Timeouts.Add(1)
		c.blame('s', 'C')
		c.connectFailed()
	case phExchange:
		c.exchangeTimeout(now)
	case phDrain, phLinger:
		c.close(closeTimeout)
	}
}

// popFree takes the last parser of a loop's free list, or returns nil when
// the list is empty (the slot is cleared so the list holds no stale
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

// getReq returns a reset request parser from the loop's free list (at
// most maxFreeParsers are kept), so that steady-state requests do not
// allocate. Its head limit is set
// from the buffer of each head it parses (readHead), not here.
func (w *Worker) getReq() *http1.Request {
	if r := popFree(&w.h.freeReq); r != nil {
		return r
	}
	r := &http1.Request{}
	r.Reset()
	return r
}

// putReq gives the request parser back to the loop's free list; c.req is
// nil afterwards, so a second call does nothing.
func (c *httpConn) putReq() {
	if r := c.req; r != nil {
		c.req = nil
		if len(c.w.h.freeReq) < maxFreeParsers {
			r.Reset()
			c.w.h.freeReq = append(c.w.h.freeReq, r)
		}
	}
}

func (c *httpConn) putQout() {
	if c.qout != nil {
		c.qout.head, c.qout.tail = 0, 0
		c.w.Bufs.Put(c.qout)
		c.qout = nil
	}
}

func (c *httpConn) putRout() {
	if c.rout != nil {
		c.rout.head, c.rout.tail = 0, 0
		c.w.Bufs.Put(c.rout)
		c.rout = nil
	}
}

// flushTo writes b to s until it is empty or s would block; false on an
// I/O error.
func (c *httpConn) flushTo(s *Side, b *Buffer) bool {
	// A head followed by a Content-Length body goes with MSG_MORE, to
	// share its segment with the body (relay pushes when the source runs
	// dry).
	var next *body
	if c.phase == phExchange {
		switch {
		case b == c.rout && c.respHead && !c.upgrade:
			next = &c.respBody
		case b == c.qout && !c.reqHeadSent:
			next = &c.reqBody
		}
	}
	for b.Len() > 0 {
		more := next.more()
		n, e := s.send(b.Data(), more)
		if e == unix.EAGAIN || (e == 0 && n == 0) {
			s.blocked()
			return true
		}
		if e != 0 {
			return false
		}
		if more {
			next.corked = true
		}
		b.Consumed(n)
		c.moved = true
		s.moved = true
		if s == &c.cli {
			c.respSent = true
		}
	}
	return true
}

// close ends the client connection and whatever is attached to it.
func (c *httpConn) close(why uint8) {
	if c.phase == phClosed {
		return
	}
	w := c.w
	if c.lg != nil && c.term[0] == 0 {
		c.term = c.termination(why) // from the phase it ends in
	}
	w.dequeue(&c.wait)
	c.phase = phClosed
	w.L.Disarm(&c.timer)
	// An aborted connection is reset on both sides (see the package doc,
	// "Aborts"): a peer must not read a cut stream as a complete one.
	abort := why == closeAbort || why == closeCut
	if c.sc != nil {
		// The exchange is cut: an abort of the backend and server too,
		// as a tunnel's (abortRequest counted its own).
		if why == closeAbort && !c.reqAborted {
			c.bs.Aborts.Add(1)
			c.ss.Aborts.Add(1)
		}
		w.endSrv(c.sc, abort)
		c.sc = nil
	}
	c.releaseServer()
	c.cli.close(w.L, abort)
	if c.in != nil {
		c.in.head, c.in.tail = 0, 0
		w.Bufs.Put(c.in)
		c.in = nil
	}
	c.putQout()
	c.putRout()
	c.endRequest() // a request cut: counted and logged
	c.reqBody.release(w)
	c.respBody.release(w)
	fs := c.fs
	fs.ConnCur.Add(-1)
	switch why {
	case closeAbort:
		fs.Aborts.Add(1)
	}
	w.unlinkHTTP(c)
	if c.acc.OnClose != nil {
		c.acc.OnClose()
	}
	c.recycle()
}

// endExchange clears the state of one exchange (request and response)
// when it ends, so that none of it outlives it: the next request, refused
// or answered by the proxy before it is routed (fail from readHead or
// startRequest), must not see the previous response as sent, its head as
// pending, its backend or its attempts. Pipes are given back; the server
// connection, the slot and the buffers are the caller's.
func (c *httpConn) endExchange() {
	c.reqBody.release(c.w)
	c.respBody.release(c.w)
	c.reqBody, c.respBody = body{}, body{}
	c.be, c.bs, c.ss = nil, nil, nil
	c.term = stats.Termination{}
	c.reqHeadSent, c.reqAborted, c.srvAnswered, c.srvCounted = false, false, false, false
	c.respHead, c.respSent, c.closeAfter, c.upgrade = false, false, false, false
	c.attempts, c.qlen = 0, 0
	c.cliSince, c.srvSince, c.cliWait, c.srvWait = 0, 0, false, false
}

// recycle clears c for reuse by the next accepted connection. Nothing
// refers to it any more: its tasklet is unqueued, its timer disarmed, its
// fd unregistered.
func (c *httpConn) recycle() {
	w := c.w
	c.endExchange()
	c.acc, c.cur, c.fe, c.hf, c.server, c.sc = nil, nil, nil, nil, nil, nil
	c.fs = nil
	c.cli.FD.Ready = 0
	c.cli.Connected = false
	c.nreq = 0
	c.bytesIn, c.bytesOut = 0, 0
	c.deadline = 0
	c.cli.xp = plainTransport() // a TLS transport's state goes with the connection
	c.cert = nil
	c.peer, c.port = netip.Addr{}, 0
	c.putReq()
	if len(w.h.freeConn) < maxFreeConns {
		w.h.freeConn = append(w.h.freeConn, c)
	}
}
