package proxy

import (
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Phases of a stream (stream.phase).
const (
	phHead     uint8 = iota // its head is being received (by the mux)
	phQueue                 // waiting for a server slot
	phConnect               // connecting to the server
	phExchange              // request to the server, response to the client
	phDrain                 // a proxy answer is flushed, then the stream ends and its connection closes
	phDone                  // ended: back in (or on its way to) the free list
)

// stream is one request and its exchange with one server connection: the
// request half of an http client connection (see http.go). It is taken
// from its loop's free list (getStream) when the first byte of a request
// head arrives, and given back (putStream) when the exchange ends; its
// mux, client end and client are set by the mux that takes it.
type stream struct {
	// The request's server attempt (attempt.go): the worker, the backend,
	// the server whose slot the request holds and the counter slots of
	// both, the queue, the current phase's deadline, the termination.
	srvAttempt
	mux streamMux
	// cl is the client connection's state the request needs (peer,
	// certificate, frontend), owned by the mux.
	cl *client
	// fe and hf are the generation the request resolves against: the
	// connection's when the request started.
	fe *Frontend
	hf *HTTPFront
	fs *stats.Slot // this loop's counter slot of the accepting frontend
	// cli is the client end the request body is read from and the
	// response written to; pin the buffer of client bytes not forwarded
	// yet (the mux's: pipelined heads stay in it).
	cli  *Side
	pin  **Buffer
	qout *Buffer // rewritten request head: kept until sent entirely, and until a response head comes (replay), or the request is aborted
	qlen int     // length of the rewritten head in qout, and of the body with it when qWhole
	rout *Buffer // rewritten response head, or a proxy answer
	// req is the parser state of the request, from the loop's free list
	// (getReq) while the stream lives.
	req   *http1.Request
	sc    *srvConn
	timer loop.Timer // queue, connect, exchange and drain deadlines

	// phase, cliWait and srvWait share one word.
	phase uint8
	// Exchange timeouts per side (http_timeout.go): since when the client
	// (the server) holds the exchange up without progress, and whether it
	// did at the end of the last run.
	cliWait, srvWait   bool
	cliSince, srvSince int64
	// reqAt: when the request head was complete (loop.Now units);
	// sentAt: when its rewritten head left entirely for the server. The
	// request and response time measures start there.
	reqAt, sentAt int64
	// lg is the access-log entry of the request (frontend access_log on):
	// from the worker's free list when the first byte of the head arrives,
	// pushed and given back when the request ends (endRequest); nil
	// otherwise.
	lg *stats.LogEntry
	rs *ruleState // request and response rules (http_rules.go); nil until the stream meets a frontend with rules

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
	qWhole            bool // qout holds the whole request, body included: a refused HTTP/2 stream may send it again

	bytesIn, bytesOut int64

	lim *streamLimits // the limits the request was counted in (limits.go)
}

func runStreamTimer(tm *loop.Timer) { tm.Owner.(*stream).onTimer() }

// getStream returns a clear stream from the loop's free list (at most
// maxFreeConns are kept) for a request whose head begins on the client
// connection mux, with its request parser and, when the frontend logs,
// its access-log entry.
func (w *Worker) getStream(mux streamMux, cl *client, cli *Side, pin **Buffer) *stream {
	w.h.nstream++
	s := popFree(&w.h.freeStream)
	if s == nil {
		s = &stream{}
		s.w = w
		w.initWaiter(s)
		s.timer.Run, s.timer.Owner = runStreamTimer, s
	}
	s.mux, s.cl, s.cli, s.pin = mux, cl, cli, pin
	s.fe, s.hf, s.fs = cl.fe, cl.hf, cl.fs
	s.hash = balance.HashAddr(cl.peer)
	s.phase = phHead
	s.req = w.getReq()
	s.beginLog()
	return s
}

// putStream gives an ended stream (end, or its exchange finished) back to
// the loop's free list.
func (w *Worker) putStream(s *stream) {
	s.endExchange()
	s.mux, s.cl, s.cli, s.pin = nil, nil, nil, nil
	s.fe, s.hf, s.fs, s.server, s.sc = nil, nil, nil, nil, nil
	s.bytesIn, s.bytesOut = 0, 0
	s.deadline, s.hash = 0, 0
	s.phase = phDone
	s.putReq()
	w.h.nstream--
	if len(w.h.freeStream) < maxFreeConns {
		w.h.freeStream = append(w.h.freeStream, s)
	}
}

func (c *stream) arm(at int64) {
	c.deadline = at
	c.w.L.Arm(&c.timer, at)
}

// armIn arms the phase deadline d from now; d <= 0 means none.
func (c *stream) armIn(d time.Duration) {
	if d <= 0 {
		c.w.L.Disarm(&c.timer)
		return
	}
	c.arm(c.w.L.Now() + int64(d))
}

// process advances the stream's phases as far as it can without
// blocking; the mux runs it for each run of the client's or the server's
// tasklet.
func (c *stream) process() {
	for i := 0; i < 16; i++ {
		ph := c.phase
		switch ph {
		case phConnect:
			// The outcome, once there, is decided in class Normal.
			if up := c.sc.up; up != nil {
				if up.c.state != upReady && up.c.state != upDead {
					return
				}
				if !decideInNormal(c.w.L, &c.sc.side.Task) {
					return
				}
				c.checkUp() // a stream waiting for its HTTP/2 connection
			} else {
				if c.sc.side.connectPending() || !decideInNormal(c.w.L, &c.sc.side.Task) {
					return
				}
				c.checkConnect(&c.sc.side, c.sc)
			}
		case phExchange:
			c.exchange()
			if c.phase == phExchange {
				c.exchangeTimers()
			}
		case phDrain:
			c.drain()
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
		case phHead:
			// A head the mux parsed whole (HTTP/1.1: woken in class
			// Normal); an HTTP/2 stream starts from its own tasklet.
			if c.req == nil || c.req.Len == 0 {
				return
			}
			c.startRequest(c.req.Len)
		default: // phDone
			return
		}
		if c.phase == ph {
			return
		}
	}
	// A stream that keeps changing phase: yield, come back later.
	c.w.L.Wake(&c.cli.Task, loop.Bulk)
}

// startRequest handles a complete head of n bytes at the front of the
// client buffer: checks, routing, the rewritten head, then a server.
func (c *stream) startRequest(n int) {
	w, r, hf := c.w, c.req, c.hf
	in := *c.pin
	buf := in.Data()
	c.reqAt = w.L.Now()
	c.fs.Requests.Add(1)
	c.fs.ReqStarted(stats.Sec(c.reqAt))
	c.bytesIn += int64(n)
	if lg := c.lg; lg != nil {
		lg.Head = w.L.Now()
		lg.Frontend = c.fe.Name // the generation the request resolves against
		// The request line: method, target, " HTTP/1.x" (the parser
		// takes single spaces and an 8-byte version only).
		lg.SetLine(buf[r.Method.Off : r.Target.Off+r.Target.Len+9])
		lg.Proto = 10 + uint8(r.Minor)
		if c.cl.h2 {
			lg.Proto = 20
			if !lg.LineCut {
				copy(lg.Line[lg.LineLen-3:], "2.0") // the head an HTTP/2 request was written as says 1.1
			}
		}
	}
	if c.fe.ACME != nil && c.acmeChallenge(buf, r) { // acme.go: http-01, before limits, rules, routes
		return
	}
	if c.limitRequest() { // limits.go: denied or tarpitted
		return
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
	if c.requestRules(buf) {
		return // a rule answered (deny, redirect): http_rules.go
	}
	be, ok := c.ruleBackend(buf) // a use_backend rule, else the routes
	if !ok || be == nil {
		c.blame('P', 'R') // no route: the proxy's answer
		c.fail(503)
		return
	}
	c.be = be
	if c.lg != nil {
		c.lg.Backend = be.Name
	}
	cert := c.cl.cert
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
		if cert != nil && cert.fields != nil {
			prefix = cert.prefix
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
	if n+headSlack+c.ruleExtra() > c.qout.Cap() {
		// The head was parsed from a larger buffer than the one it is
		// rewritten into (bufsize lowered since): too large here.
		c.fs.Errors.Add(1)
		c.fail(431)
		return
	}
	d := c.qout.b[:0:len(c.qout.b)]
	d = c.appendTarget(d, buf) // method and target, or the path rules rewrote
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
	if cert != nil && cert.fields != nil { // not a subject kept for the access log only
		strip = cert.strip
	}
	d = r.AppendEndToEndFilter(d, buf, keep, strip, c.ruleDrop())
	if cert != nil {
		d = append(d, cert.fields...)
	}
	if r.Upgrade {
		d = append(d, "Connection: upgrade\r\n"...)
	}
	if hf.XForwardedFor && c.cl.peer.IsValid() {
		d = http1.AppendXForwardedFor(d, c.cl.peer)
	}
	if hf.XForwardedProto {
		d = http1.AppendXForwardedProto(d, c.cli.xp.secure())
	}
	if hf.Via {
		d = http1.AppendVia(d, r.Minor, viaName)
	}
	d = c.appendRuleFields(d)
	d = append(d, "\r\n"...)
	if len(d) > len(c.qout.b) {
		// cannot happen (headSlack covers what is added); never write
		// past the buffer
		c.fail(431)
		return
	}
	c.qout.head, c.qout.tail = 0, len(d)
	c.qlen = len(d)
	in.Consumed(n)
	if st := c.reqBody.coalesce(in, c.qout); st != 0 {
		c.fs.Errors.Add(1)
		c.fail(st)
		return
	}
	if r.Body != http1.BodyNone && c.reqBody.complete() {
		c.qlen, c.qWhole = c.qout.tail, true
	}

	c.closeAfter = r.Close || w.stopping || c.cl.gone // stop.go, Removed: the last response
	c.bs = be.Stats.Loop(w.id)
	c.bs.Requests.Add(1)
	c.bs.ReqStarted(stats.Sec(w.L.Now()))
	c.bs.ConnTotal.Add(1)
	c.acquire(nil)
}

// useServer: the request holds a slot of c.server; reuse a pooled
// connection when that is safe, else connect (attemptOwner).
func (c *stream) useServer() {
	s := c.server
	if lg := c.lg; lg != nil {
		lg.Server = s.Name
		if lg.Granted == 0 {
			lg.Granted = c.w.L.Now()
		}
	}
	if s.H2 {
		c.useH2() // a stream on a (shared) HTTP/2 connection: h2_server.go
		return
	}
	if c.mayReuse() {
		if sc := c.w.takeIdle(s); sc != nil {
			if c.attempts > 0 { // a retry after a failed connect, on a pooled connection
				c.countAttempt()
			}
			c.attach(sc)
			c.startExchange()
			c.mux.run(c)
			return
		}
	}
	c.connect()
}

// waitQueue: the request waits for a server slot until c.deadline.
func (c *stream) waitQueue() {
	c.phase = phQueue
	c.armIn(c.be.B.QueueTimeout)
}

// noServer answers 503: no server can take the request (HAProxy's
// <NOSRV> SC).
func (c *stream) noServer() {
	c.blame('S', 'C')
	c.fail(503)
}

// dropConn closes the server connection of a failed connect.
func (c *stream) dropConn() {
	if c.sc != nil {
		c.w.closeSrv(c.sc)
		c.sc = nil
	}
}

// gaveUp answers 503 after the last connect failed: SC, or sC after a
// connect timeout (onTimer).
func (c *stream) gaveUp() {
	c.fs.ConnectErrors.Add(1)
	c.fail(503)
}

// established: the connection to the server is ready; the exchange
// starts.
func (c *stream) established() {
	c.sc.side.Connected = true
	c.startExchange()
}

// mayReuse: a pooled connection may have been closed by the server at the
// very moment we reuse it; then the request is replayed on a new
// connection, which is only possible when no body byte has left the
// client buffer and the method is idempotent (RFC 9110 §9.2.2).
func (c *stream) mayReuse() bool {
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

func (c *stream) attach(sc *srvConn) {
	sc.owner = c
	c.sc = sc
	if sc.resp == nil {
		sc.resp = c.w.getResp()
	}
	sc.resp.Reset()
}

// connect opens a new connection to the request's server.
func (c *stream) connect() {
	if c.server.H2 {
		c.useH2()
		return
	}
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
func (c *stream) fail(status int) {
	if c.phase == phDone {
		return
	}
	if !c.respSent {
		// The answer the client gets counts where the request went: on
		// the backend once it was handed to one, on the server once one
		// was chosen (a 502 or 504 for it, a 503 after its connect
		// failed). An exchange cut after the response began counts the
		// server's status only.
		c.fs.CountStatus(status)
		c.limitStatus(status) // limits.go: err_rate
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
	ans := c.appendAnswer(c.rout.b[:0:len(c.rout.b)], status) // limits.go: a limit's 429; http_rules.go: a rule's answer
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
func (c *stream) badResponse() {
	c.responseError()
	c.fail(502)
}

// responseError counts a response the server spoiled (HAProxy's eresp): a
// bad or cut response, or none within server_ms. Malformed requests are
// Errors, failed connects ConnectErrors: each fault is counted once.
func (c *stream) responseError() {
	c.fs.ResponseErrors.Add(1)
	if c.bs != nil {
		c.bs.ResponseErrors.Add(1)
	}
	if c.ss != nil {
		c.ss.ResponseErrors.Add(1)
	}
}

// drain flushes a proxy answer; then the stream ends and its connection
// closes gracefully.
func (c *stream) drain() {
	if c.rout != nil && c.rout.Len() > 0 {
		if !c.cli.canSend() {
			return
		}
		if !c.flushTo(c.cli, c.rout) {
			c.close(closeAbort)
			return
		}
		if c.rout.Len() > 0 {
			return
		}
	}
	c.putRout()
	c.w.L.Disarm(&c.timer)
	c.phase = phDone
	c.mux.streamDone(c, true)
}

// onTimer: the deadline of the current phase.
func (c *stream) onTimer() {
	now := c.w.L.Now()
	switch c.phase {
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
	case phDrain:
		c.close(closeTimeout)
	case phTarpit:
		c.limitTarpitEnd() // limits.go
	}
}

// getReq returns a reset request parser from the loop's free list (at
// most maxFreeParsers are kept), so that steady-state requests do not
// allocate. Its head limit is set from the buffer of each head it parses
// (readHead), not here.
func (w *Worker) getReq() *http1.Request {
	w.h.nreq++
	if r := popFree(&w.h.freeReq); r != nil {
		return r
	}
	r := &http1.Request{}
	r.Reset()
	return r
}

// putReq gives the request parser back to the loop's free list; c.req is
// nil afterwards, so a second call does nothing.
func (c *stream) putReq() {
	if r := c.req; r != nil {
		c.req = nil
		c.w.putReqParser(r)
	}
}

func (c *stream) putQout() {
	if c.qout != nil {
		c.qout.head, c.qout.tail = 0, 0
		c.w.Bufs.Put(c.qout)
		c.qout = nil
	}
}

func (c *stream) putRout() {
	if c.rout != nil {
		c.rout.head, c.rout.tail = 0, 0
		c.w.Bufs.Put(c.rout)
		c.rout = nil
	}
}

// flushTo writes b to s until it is empty or s would block; false on an
// I/O error.
func (c *stream) flushTo(s *Side, b *Buffer) bool {
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
	// The last bytes of a response after which the connection closes go
	// with MSG_MORE too: the close(2) or shutdown that follows puts the
	// FIN on their segment (one packet, and one ACK, less per connection).
	last := next == &c.respBody && c.closeAfter && c.respBody.complete() && isRaw(s.xp)
	for b.Len() > 0 {
		more := next.more() || last
		n, e := s.send(b.Data(), more)
		if e == unix.EAGAIN || (e == 0 && n == 0) {
			s.blocked()
			return true
		}
		if e != 0 {
			return false
		}
		if more && !last {
			next.corked = true
		}
		b.Consumed(n)
		c.moved = true
		s.moved = true
		if s == c.cli {
			c.respSent = true
		}
	}
	return true
}

// close cuts the stream, and with it what its mux must (for HTTP/1.1 the
// client connection).
func (c *stream) close(why uint8) {
	if c.phase == phDone {
		return
	}
	c.mux.streamAbort(c, why)
}

// end releases what a cut stream holds (the mux calls it, then
// putStream): its wait, timer, server connection and slot, buffers and
// bodies; the request is counted and logged.
func (c *stream) end(why uint8) {
	w := c.w
	if c.lg != nil && c.term[0] == 0 {
		c.term = c.termination(why) // from the phase it ends in
	}
	w.dequeue(&c.wait)
	w.L.Disarm(&c.timer)
	if c.sc != nil {
		// The exchange is cut: an abort of the backend and server too,
		// as a tunnel's (abortRequest counted its own).
		if why == closeAbort && !c.reqAborted {
			c.bs.Aborts.Add(1)
			c.ss.Aborts.Add(1)
		}
		w.endSrv(c.sc, why == closeAbort || why == closeCut)
		c.sc = nil
	}
	c.releaseServer()
	c.putQout()
	c.putRout()
	c.endRequest() // a request cut: counted and logged
	c.reqBody.release(w)
	c.respBody.release(w)
	c.phase = phDone
}

// endExchange clears the state of one exchange (request and response), so
// that none of it outlives it in the recycled stream. Pipes are given
// back; the server connection, the slot and the buffers are the caller's.
func (c *stream) endExchange() {
	c.reqBody.release(c.w)
	c.respBody.release(c.w)
	c.reqBody, c.respBody = body{}, body{}
	c.be, c.bs, c.ss = nil, nil, nil
	c.term = stats.Termination{}
	c.reqHeadSent, c.reqAborted, c.srvAnswered, c.srvCounted = false, false, false, false
	c.respHead, c.respSent, c.closeAfter, c.upgrade, c.qWhole = false, false, false, false, false
	c.attempts, c.qlen = 0, 0
	c.cliSince, c.srvSince, c.cliWait, c.srvWait = 0, 0, false, false
	c.reqAt, c.sentAt = 0, 0
}
