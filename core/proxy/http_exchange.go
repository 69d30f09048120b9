package proxy

import (
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/stats"
)

// The forwarded request head is the request line and every end-to-end
// field as received, byte for byte; hop-by-hop fields are dropped
// (Connection and the fields it names, Keep-Alive, Proxy-Connection, TE,
// Trailer, Upgrade unless upgrading) and X-Forwarded-For,
// X-Forwarded-Proto and Via are appended per the frontend's http options.
// Transfer-Encoding: chunked is kept: a chunked body is forwarded as it
// came, its framing validated by http1.Chunked while it passes (the bytes
// that came with the head are checked before anything is sent, so a
// malformed body sent in one piece never reaches a server). A
// Content-Length body is counted down; once at least 64 KiB of it remain
// and the frontend's splice is not off, the rest moves through a pipe.
// While bytes of a Content-Length body are still to come, the head and
// the body go out with MSG_MORE (SPLICE_F_MORE from a pipe), as HAProxy
// does while to_forward > 0, so TCP sends whole segments rather than one
// short segment per write; when the source runs dry the held segment is
// pushed at once (pushFrames), so a slow server delays nothing it sent.
// An HTTP/1.0 client does not know chunked framing (RFC 9112 §6.1), so a
// chunked response to one is de-chunked as HAProxy's H1 mux does: the
// head goes without Transfer-Encoding and Trailer and with Connection:
// close, and body.frameIn drops the framing bytes (sizes, extensions,
// trailers) from the server buffer as Decode reports them, moving the
// chunk data already framed up over them in place (at most dechunkMove
// bytes per chunk: beyond, that data is sent first); the client
// connection closes after the last chunk. Such a body is never spliced
// (only Content-Length bodies are).
// Bodies are never buffered whole: backpressure works as in tcp mode.
//
// Expect: 100-continue is forwarded to the server and its 100 relayed
// (every 1xx is relayed to HTTP/1.1 clients, dropped for 1.0 ones); the
// proxy does not answer 100 itself, so a server that refuses the body
// can say so before the client sends it. A request with Upgrade
// (websocket) switches to the tcp Tunnel only when the server answers
// 101; bytes either side sent beyond the heads go with it. Responses to
// HEAD, 1xx, 204 and 304 have no body; other responses are framed by
// chunked, Content-Length, or the server's close (then the client
// connection closes after it).
//
// The rewritten request head (qout) lives until it is sent entirely (and
// until a response head comes, for a replay), or until the request side
// is aborted on purpose (abortRequest): a final response that comes
// before the whole request was sent, or a server that stops reading it.
// Then nothing more of the request is forwarded, the response is relayed
// with Connection: close, the server connection is not pooled and the
// backend and server count an abort. An interim response does not end
// the sending of the request.

// spliceMin is the length of a Content-Length body left to relay from
// which the rest moves through a pipe (when the frontend's splice policy
// is not off): below it, taking a pipe costs more than the copy it saves.
// A body spliced once is spliced to its end (mover.wantSplice).
const spliceMin = 64 << 10

// body is one message body being relayed: the mover that moves its bytes
// (its pipe splices a long Content-Length body; bytes counts what was
// relayed) and the framing that tells the mover which bytes belong to it
// (mover.run's fr).
type body struct {
	mover
	left int64 // BodyLength: bytes not framed yet
	ck   http1.Chunked
	ok   int // framed bytes at the front of the source buffer, not sent yet
	// kind, broken and dechunk share the last word (see
	// TestConnectionObjectsKeepTheirSizeClass).
	kind   http1.Body
	broken bool // the destination failed: stop relaying
	// dechunk: a chunked body relayed to an HTTP/1.0 client, which does
	// not know chunked framing: only the chunk data goes out (framing,
	// extensions and trailers are dropped), delimited by the close.
	dechunk bool
}

func (b *body) start(kind http1.Body, cl, maxBody int64) {
	b.kind, b.left, b.ok, b.eof, b.broken, b.bytes, b.corked = kind, 0, 0, false, false, 0, false
	b.spliced = 0 // this body's (wantSplice)
	b.dechunk = false
	switch kind {
	case http1.BodyLength:
		b.left = cl
	case http1.BodyChunked:
		b.ck.MaxBody = maxBody
		b.ck.Refuse, b.ck.RefusePrefix = 0, "" // a request's: refuseTrailers
		b.ck.Reset()
	}
}

// refuseTrailers makes the chunked request body fail (400) on a trailer
// field that the head path strips or sets (http1.Chunked.Refuse): the
// trailers are forwarded as they came, and servers that merge them into
// the header fields would take a forged one for the proxy's.
func (b *body) refuseTrailers(refuse uint8, prefix string) {
	b.ck.Refuse, b.ck.RefusePrefix = refuse, prefix
}

// frame marks the body bytes at the start of p (the source bytes after the
// ones already framed) as ready to send. It returns 0, or the status of a
// framing error (malformed chunked body: 400; over the size bound: 413).
func (b *body) frame(p []byte) int {
	switch b.kind {
	case http1.BodyLength:
		n := int64(len(p))
		if n > b.left {
			n = b.left
		}
		b.ok += int(n)
		b.left -= n
	case http1.BodyChunked:
		for len(p) > 0 && !b.ck.Done() {
			n, _, err := b.ck.Decode(p)
			if err != nil {
				return err.(*http1.Error).Status
			}
			if n == 0 {
				break
			}
			b.ok += n
			p = p[n:]
		}
	case http1.BodyUntilClose:
		b.ok += len(p)
	}
	return 0
}

// dechunkMove bounds the payload already framed that frameIn moves over
// the framing of the next chunk: beyond it, that payload is sent first, so
// tiny chunks cost at most this many bytes of copy per chunk.
const dechunkMove = 512

// frameIn frames the bytes of in from b.ok up to lim (an offset in
// in.Data()) like frame. For a dechunked body it drops the framing bytes
// from in as it goes: the payload already framed is moved up over them
// (in place, overlapping copy), so the framed bytes at the front of in
// are only chunk data.
func (b *body) frameIn(in *Buffer, lim int) int {
	if !b.dechunk {
		return b.frame(in.Data()[b.ok:lim])
	}
	for !b.ck.Done() && lim > b.ok {
		if inData, _ := b.ck.InData(); !inData && b.ok > dechunkMove {
			break
		}
		d := in.Data()
		n, data, err := b.ck.Decode(d[b.ok:lim])
		if err != nil {
			return err.(*http1.Error).Status
		}
		if n == 0 {
			break
		}
		if skip := n - data; skip > 0 {
			copy(d[skip:skip+b.ok], d[:b.ok])
			in.Consumed(skip)
			lim -= skip
		}
		b.ok += data
	}
	return 0
}

// more: bytes of the body are still to come from the source, so what is
// sent now is not the end of the message. Writes then carry MSG_MORE
// (SPLICE_F_MORE), as HAProxy does while a known length is left to
// forward (to_forward): TCP fills whole segments instead of pushing one
// short segment per write. On loopback (MSS 64 KiB) every pipe flush
// (at most 16 pages) and the head were otherwise a short segment, and a
// short segment gives the receiver no RTT sample (tcp_rcv_rtt_measure_ts
// wants at least rcv_mss): its receive-buffer autotuning was left with the
// microsecond samples of ACK-clocked bursts, its window stayed at ~400 KB
// (5-9 MB with HAProxy or with spliced's buffered copy, which is slower
// to fill it), and the proxy's socket queued tens of MB unsent, which the
// kernel then transmitted from the client's own ACK processing, on the
// client's CPU. Only Content-Length bodies: the end of a chunked or
// until-close body is not known in advance.
func (b *body) more() bool { return b != nil && b.kind == http1.BodyLength && b.left > 0 }

// complete: every byte of the body was relayed.
func (b *body) complete() bool {
	if b.ok > 0 || (b.pipe != nil && b.pipe.Data > 0) {
		return false
	}
	switch b.kind {
	case http1.BodyLength:
		return b.left == 0
	case http1.BodyChunked:
		return b.ck.Done()
	case http1.BodyUntilClose:
		return b.eof
	}
	return true
}

// coalesce moves the body bytes that arrived with the head (in) behind
// the rewritten head (out) when they fit, framing them on the way: one
// send instead of two for the common small message. It returns a framing
// status like frame.
func (b *body) coalesce(in, out *Buffer) int {
	if in == nil || in.Len() == 0 || b.kind == http1.BodyNone {
		return 0
	}
	room := len(out.b) - out.tail
	if room <= 0 {
		return 0
	}
	lim := in.Len()
	if lim > room {
		lim = room
	}
	if lim > b.ok {
		if st := b.frameIn(in, lim); st != 0 {
			return st
		}
	}
	n := copy(out.b[out.tail:], in.Data()[:b.ok])
	out.tail += n
	in.Consumed(n)
	b.ok -= n
	b.bytes += int64(n)
	return 0
}

// relay moves body bytes from src (through the buffer *pin, or a pipe)
// to dst with the body's mover, framed by the body, until the body is
// complete, the source is drained, or dst would block with no room left
// to read into (mover.run). The read budget is the connection's, shared
// by every read of this run. It returns 0, relSrc, relDst or a framing
// status.
func (c *stream) relay(b *body, src *Side, pin **Buffer, dst *Side) int {
	b.mode = c.fe.Splice
	sent := b.bytes
	res := b.run(c.w, src, dst, pin, &c.w.budget, b)
	if b.bytes != sent {
		c.moved = true
	}
	return res
}

// startExchange: a connected server connection carries the request.
func (c *stream) startExchange() {
	if lg := c.lg; lg != nil && lg.ConnStart != 0 && lg.Connected == 0 {
		lg.Connected = c.w.L.Now()
	}
	if c.phase == phConnect && c.be.B.ConnectTimeout > 0 {
		// A new connection (a pooled one has no connect to measure): the
		// connect started connect_ms before the deadline it armed.
		c.countConnect(c.w.L.Now())
	}
	if !c.srvCounted {
		c.srvCounted = true
		c.ss.Requests.Add(1)
		c.ss.ReqStarted(stats.Sec(c.w.L.Now()))
	}
	c.phase = phExchange
	c.startExchangeTimers()
}

// exchange moves the request to the server and the response to the
// client, each as far as it can go without blocking.
func (c *stream) exchange() {
	for {
		sc := c.sc
		c.moved = false
		if !c.reqHeadSent && !c.reqAborted && sc.side.canSend() {
			if !c.flushTo(&sc.side, c.qout) {
				if c.canReplay() {
					c.replay()
					return
				}
				// The server stopped reading: it may have answered
				// already (an early 413 or 431...); read on, and answer
				// 502 only when no response head comes.
				c.abortRequest()
			} else if c.reqHeadSent = c.qout.Len() == 0; c.reqHeadSent {
				c.sentAt = c.w.L.Now()
				if c.srvAnswered {
					c.putQout() // sent: it served only a replay, which is excluded now
				}
			}
		}
		if c.reqHeadSent && !c.reqAborted && !c.reqBody.broken && !c.reqBody.complete() {
			switch st := c.relay(&c.reqBody, c.cli, c.pin, &sc.side); {
			case st == relSrc:
				c.blame('C', 'D')
				c.close(closeAbort) // the client left in the middle of its body
				return
			case st == relDst:
				// The server stopped reading: it may have answered
				// already (a 413 of its own...); read on, then close.
				c.reqBody.broken = true
				c.closeAfter = true
			case st > 0:
				c.fs.Errors.Add(1)
				c.fail(st)
				return
			}
		}
		if !c.respHead && !c.readResponse() {
			return
		}
		if c.rout != nil {
			if c.rout.Len() > 0 && c.cli.canSend() && !c.flushTo(c.cli, c.rout) {
				c.close(closeAbort)
				return
			}
			if c.rout.Len() == 0 {
				c.putRout()
			}
		}
		if c.respHead && c.rout == nil {
			if c.upgrade {
				c.phase = phDone
				c.mux.upgrade(c)
				return
			}
			if !c.respBody.complete() {
				if st := c.relay(&c.respBody, &sc.side, &sc.in, c.cli); st != 0 {
					// A server that breaks its framing or vanishes in the
					// middle of a body, or a client that went away: the
					// response cannot be completed, cut the connection.
					if st == relDst {
						c.blame('C', 'D')
					} else {
						c.blame('S', 'D')
						c.responseError() // a cut response
					}
					c.close(closeAbort)
					return
				}
			}
			if c.respBody.complete() {
				c.finishExchange()
				return
			}
		}
		if !c.moved {
			return
		}
	}
}

// readResponse reads and parses the server's response head (interim
// responses are relayed as they come). It returns false when the
// connection left the exchange phase (error answered, replay started).
// Every 502 it answers is a response the server spoiled (badResponse).
func (c *stream) readResponse() bool {
	sc := c.sc
	for {
		if c.rout != nil && c.rout.Len() > 0 {
			return true // an interim response is still being sent
		}
		if sc.in != nil && sc.in.Len() > 0 {
			r := sc.resp
			r.Limits.MaxHead = headLimit(sc.in.Cap()) // the buffer's, as readHead
			n, err := r.Parse(sc.in.Data(), c.req.MethodID)
			if err != nil {
				c.blame('P', 'H') // HAProxy's PH: a response it refused
				c.badResponse()
				return false
			}
			if n > 0 {
				// The server answered: no replay from here on. The
				// rewritten head is given back only once it was sent
				// entirely (an interim response may come before).
				c.srvAnswered = true
				if c.reqHeadSent {
					c.putQout()
				}
				if r.Interim {
					// 1xx (100 Continue, 103 Early Hints) go to HTTP/1.1
					// clients only (RFC 9110 §15.2).
					if c.req.Minor == 1 && !c.buildRespHead(n, false) {
						c.badResponse()
						return false
					}
					sc.in.Consumed(n)
					r.Reset()
					continue
				}
				if !c.reqHeadSent {
					// A final answer before the request head was sent (an
					// early 413, 431): relay it, forward nothing of the
					// request, close both connections after the response.
					c.bs.Aborts.Add(1)
					c.ss.Aborts.Add(1)
					c.abortRequest()
				}
				// A final answer while the request body still flows
				// (gRPC's bidirectional calls, a server that answers
				// early): the body goes on being forwarded for as long
				// as the server reads it (full duplex); the connections
				// close after the response (closeAfter below) unless the
				// request completed by then.
				if r.Upgrade {
					if r.Status != 101 || !c.req.Upgrade || c.reqAborted || !c.reqBody.complete() {
						c.blame('P', 'H')
						c.badResponse()
						return false
					}
					c.upgrade = true
				}
				c.respHead = true
				// A chunked body to an HTTP/1.0 client goes dechunked,
				// delimited by the close.
				dechunk := r.Body == http1.BodyChunked && c.req.Minor == 0
				if dechunk || r.Body == http1.BodyUntilClose || !c.reqBody.complete() || c.reqBody.broken || c.reqAborted {
					c.closeAfter = true
				}
				if c.responseRules(n) {
					return false // a response rule denied it (http_rules.go)
				}
				if !c.buildRespHead(n, true) {
					c.badResponse()
					return false
				}
				sc.in.Consumed(n)
				c.respBody.start(r.Body, r.ContentLength, 0)
				c.respBody.dechunk = dechunk
				if st := c.respBody.coalesce(sc.in, c.rout); st != 0 {
					c.badResponse()
					return false
				}
				c.fs.CountStatus(r.Status)
				c.limitStatus(r.Status) // limits.go: err_rate
				c.bs.CountStatus(r.Status)
				c.ss.CountStatus(r.Status)
				if c.reqHeadSent { // else an early answer: no request time to measure
					rt := c.w.L.Now() - c.sentAt
					c.bs.RespNs.Add(rt)
					c.bs.RespCount.Add(1)
					c.ss.RespNs.Add(rt)
					c.ss.RespCount.Add(1)
				}
				if lg := c.lg; lg != nil {
					lg.Resp = c.w.L.Now()
					lg.Status = int32(r.Status)
				}
				return true
			}
		}
		if !sc.side.canRecv() || c.w.spent(&sc.side.Task) {
			return true
		}
		if sc.in == nil {
			sc.in = c.w.Bufs.Get()
		}
		compact(sc.in)
		room := sc.in.Room()
		if room == 0 {
			c.badResponse() // cannot happen: the head limit is below the buffer size
			return false
		}
		n, e := sc.side.recv(sc.in.Free())
		switch {
		case e == 0 && n > 0:
			sc.in.Produced(n)
			c.w.budget -= sc.side.cost(n)
			c.moved = true
			sc.side.moved = true
			if n < room {
				sc.side.shortRead()
			}
		case e == unix.EAGAIN:
			sc.side.drained()
			return true
		default:
			// End of stream or reset before a complete head.
			if c.canReplay() {
				c.replay()
				return false
			}
			if c.passReset() { // h2_server.go: an HTTP/2 server's RST_STREAM to an HTTP/2 client
				return false
			}
			c.badResponse()
			return false
		}
	}
}

// canReplay: the server connection was a pooled one that failed before
// answering anything, and the request can be sent again as it was. A
// server that began to answer (a byte of a response head; for HTTP/2 a
// HEADERS frame, even one the codec refused, DATA, or its own
// RST_STREAM but REFUSED_STREAM) saw the request: sent again, a server
// that breaks its heads on purpose would get it retries+1 times (HAProxy
// answers 502 at once).
func (c *stream) canReplay() bool {
	sc := c.sc
	if c.qout == nil || c.srvAnswered || c.reqAborted || c.respSent || (sc.in != nil && sc.in.Len() > 0) ||
		sc.upAnswered() || int(c.attempts) > c.be.B.Retries {
		return false
	}
	if sc.refusedReplay() {
		// An HTTP/2 server refused the stream: it processed nothing of
		// it (RFC 9113 §8.7), any method may go again, as long as the
		// whole request is still held.
		return c.req.Body == http1.BodyNone || c.qWhole
	}
	return sc.reused && c.req.Body == http1.BodyNone
}

// abortRequest stops forwarding the request on purpose: the server gave
// its final answer before the request was sent entirely, or stopped
// reading it. Nothing more of the request goes to the server (its
// rewritten head is given back, the body is left unread in the client
// connection), the server connection is not pooled, and the client
// connection closes after the response (Connection: close), lingering to
// discard what the client still sends.
func (c *stream) abortRequest() {
	c.reqAborted = true
	c.closeAfter = true
	c.putQout()
}

// replay sends the request again on a new connection to the same server
// (the slot is kept). The rewritten head is still in qout's storage.
func (c *stream) replay() {
	c.w.closeSrv(c.sc)
	c.sc = nil
	c.qout.head, c.qout.tail = 0, c.qlen
	c.reqHeadSent = false
	c.connect()
}

// buildRespHead writes the relayed response head (status line and
// end-to-end fields as received, plus Connection and Via as needed) into
// rout; the head, n bytes, is at the front of the server buffer. It
// returns false, writing nothing, when the head does not fit rout: the
// server buffer it was parsed from is larger (bufsize lowered since).
func (c *stream) buildRespHead(n int, final bool) bool {
	sc := c.sc
	r := sc.resp
	buf := sc.in.Data()
	if c.rout == nil {
		c.rout = c.w.Bufs.Get()
	}
	if n+headSlack+c.respRuleExtra() > c.rout.Cap() {
		return false
	}
	d := c.rout.b[:0:len(c.rout.b)]
	line := buf[:r.Reason.Off+r.Reason.Len]
	if line[7] > '1' {
		// HTTP/1.2..1.9, handled as 1.1 (the parser refuses other
		// versions): the client is told the version we speak.
		d = append(d, "HTTP/1.1"...)
		line = line[8:]
	}
	d = append(d, line...)
	d = append(d, "\r\n"...)
	keep := http1.KeepTransferEncoding
	if final && r.Body == http1.BodyChunked && c.req.Minor == 0 {
		keep = 0 // dechunked (readResponse): no Transfer-Encoding, no Trailer
	}
	if r.Status == 101 {
		keep |= http1.KeepUpgrade
	}
	d = r.AppendEndToEndFilter(d, buf, keep, nil, c.respDrop(final))
	if final {
		switch {
		case c.upgrade:
			d = append(d, "Connection: upgrade\r\n"...)
		case c.closeAfter:
			d = append(d, "Connection: close\r\n"...)
		case c.req.Minor == 0:
			d = append(d, "Connection: keep-alive\r\n"...)
		}
	}
	if c.hf.Via {
		d = http1.AppendVia(d, r.Minor, viaName)
	}
	d = c.appendRespFields(d, final)
	d = append(d, "\r\n"...)
	if len(d) > len(c.rout.b) {
		return false // cannot happen (headSlack covers what is added)
	}
	c.rout.head, c.rout.tail = 0, len(d)
	c.bytesOut += int64(len(d))
	return true
}

// finishExchange: the response is complete. The server connection goes
// back to the pool when both sides kept the framing and want to go on;
// the stream ends, and its connection goes on or closes (streamDone).
func (c *stream) finishExchange() {
	w := c.w
	sc := c.sc
	c.sc = nil
	if c.reqHeadSent && !c.reqAborted && !c.reqBody.broken && !c.reqBody.complete() {
		// The response ended before the request did (an early answer):
		// the rest of the request is not forwarded, both connections
		// close (closeAfter), and the request counts as cut.
		c.bs.Aborts.Add(1)
		c.ss.Aborts.Add(1)
	}
	keep := !sc.resp.Close && c.reqHeadSent && !c.reqAborted && !c.reqBody.broken && c.reqBody.complete() &&
		(sc.in == nil || sc.in.Len() == 0) && c.req.Minor == 1
	if sc.in != nil && sc.in.Len() == 0 {
		w.Bufs.Put(sc.in)
		sc.in = nil
	}
	if !keep || !w.poolSrv(sc) {
		w.closeSrv(sc)
	}
	c.be.Stats.Timing(w.id).Request.Observe(w.L.Now() - c.reqAt)
	c.endRequest()
	c.putQout()
	c.releaseServer()
	w.L.Disarm(&c.timer)
	c.phase = phDone
	c.mux.streamDone(c, c.closeAfter)
}
