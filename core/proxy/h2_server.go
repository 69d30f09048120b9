package proxy

import (
	"bytes"
	"net/netip"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/h2"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// HTTP/2 to servers (a server's "proto": "h2"; gRPC needs it)
//
// A server that speaks HTTP/2 carries many streams over one connection
// (upConn): h2c with prior knowledge on clear, h2 chosen by ALPN over the
// server's tls. Its framing, HPACK, flow control and the hostile-server
// bounds are core/h2's ClientConn, driven here on the loop (no goroutine).
// A loop keeps the connections it opened to each server in a list (upList,
// in httpState.up); a request takes the first one that may open a stream
// (h2.ClientConn.CanOpen: no GOAWAY either way, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS not reached), else opens another. An
// idle connection (no stream) stays for serverIdleTimeout, then ends with
// GOAWAY.
//
// The stream layer does not change for it: a request's server connection
// (srvConn) is, for such a server, a Side without fd whose transport is an
// upStream, the mirror of a client's h2Stream: its send takes the
// HTTP/1.1 request the stream writes (the rewritten head, parsed back by
// core/http1 and sent as HEADERS with RequestHTTP1; its body as DATA,
// a chunked one decoded, its trailers as trailing HEADERS), and its
// receive gives the response as HTTP/1.1 (h2.AppendHTTP1Response; the
// DATA payload as it came, or chunked when the server gave no
// content-length, with the trailers in the chunked body's trailer
// section), which the stream parses and relays as from any server. So
// routing, slots (maxconn counts requests), queues, retries, timeouts,
// counters and the log are the same for both protocols, and a response's
// trailers (grpc-status) reach an HTTP/2 client as trailing HEADERS and an
// HTTP/1.1 one in its chunked body.
//
// What HTTP/2 adds:
//   - te: trailers is sent with every request but an HTTP/1.0 client's
//     (whose response is dechunked, without its trailers): the proxy
//     relays trailers, and gRPC servers want it.
//   - A stream the server refused (RST_STREAM REFUSED_STREAM, or above a
//     GOAWAY's last stream id) was not processed (RFC 9113 §8.7): it is
//     sent again on another connection — any method, a body too when the
//     whole request was still held (a small gRPC call); otherwise it
//     answers 502. A connection that ends without GOAWAY replays as a
//     pooled HTTP/1.1 connection does (idempotent, no body).
//   - Cancellation passes both ways: a stream cut on the client's side
//     (the client's RST_STREAM, a timeout) resets the server's stream
//     (CANCEL); the server's RST_STREAM cuts the response (the client's
//     stream is reset, an HTTP/1.1 client's connection closed).
//   - A response stream holds at most its window of body (64 KiB, given
//     back as the stream relays it), the connection at most 1 MiB.
//   - send_proxy: the PROXY header names one client, so such a connection
//     carries one stream and closes after it.
//   - Health checks speak HTTP/2 to such a server (check.go).

// maxUpStreams bounds the streams of one server connection (the RFC's
// recommended least for SETTINGS_MAX_CONCURRENT_STREAMS; a server's
// SETTINGS may say fewer, never more here): more requests open more
// connections. A stream whose HEADERS the server's limit refuses after
// all is sent on another connection (refused, below).
const maxUpStreams = 100

// maxInterimPending bounds the interim (1xx) heads a stream holds for a
// client that has not taken them yet: a server that sends them without
// end would else grow the stream's memory without bound (no window
// applies to HEADERS). One or two heads is what servers send.
const maxInterimPending = 64 << 10

// upConn states.
const (
	upConnecting uint8 = iota // connect(2) under way
	upHandshake               // the transport's step (TLS) runs
	upReady                   // streams may open
	upDead                    // failed or closed: its streams end
)

// upConn is one HTTP/2 connection to a server.
type upConn struct {
	link   ilist.Link[upConn] // in its upList; first: ilist finds the upConn from it
	w      *Worker
	server *balance.Server
	list   *upList // nil once out of the list (dead, or no more streams)
	side   Side
	codec  *h2.ClientConn
	// rbuf holds server bytes not fed yet (a partial frame); nil while
	// the connection is idle.
	rbuf []byte
	rlen int
	// streams are the streams attached: waiting for the connection
	// (id 0) or opened.
	streams  []*upStream
	timer    loop.Timer // connect deadline, then idle expiry
	deadline int64
	state    uint8
	used     bool // has carried a stream: a later one replays as on a pooled connection
	private  bool // sent a PROXY header: one stream only
	wantOut  bool // a stream waits for the output to drain (h2OutMax)
	hs       uint8
}

// upList is a loop's HTTP/2 connections to one server.
type upList struct {
	l ilist.List[upConn]
	n int
}

// upStream is a request's server end on an upConn: the transport of the
// request's srvConn side (see the top of this file).
type upStream struct {
	c  *upConn
	sc *srvConn
	id uint32 // 0 until the request's HEADERS went out
	// The request, as the stream writes it.
	req     h1Out
	reqHead bool // the HEADERS were sent
	// The response: heads as HTTP/1.1 (rhead, read from roff), then the
	// body (h2In).
	rhead   []byte
	roff    int
	resp    h2In
	final   bool          // the final head came
	reset   bool          // the stream ended abnormally (RST_STREAM, connection lost)
	code    http2.ErrCode // the server's RST_STREAM code (reset by the server itself)
	refused bool          // ... without being processed: safe to send again
	// answered: the server began to answer (a HEADERS frame, even one
	// that failed; DATA; its own RST_STREAM but REFUSED_STREAM): the
	// request is never sent again (canReplay).
	answered bool
	wantOut  bool
}

func runUpTask(tk *loop.Tasklet) {
	c := tk.Owner.(*upConn)
	c.w.budget = runCap
	c.process()
}

func runUpTimer(tm *loop.Timer) { tm.Owner.(*upConn).onTimer() }

// upConfig is the codec configuration of server connections: RFC
// defaults but a 1 MiB connection window; a server's response head is
// bounded as a client's request head (64 KiB of fields).
func (w *Worker) upConfig(s *balance.Server) h2.ClientConfig {
	l := w.L
	cfg := h2.ClientConfig{Config: h2.Config{Now: func() time.Time { return time.Unix(0, l.Now()) }, Pool: &w.h.h2mem}}
	if s.TLS != nil {
		cfg.Scheme = "https"
	}
	return cfg
}

// useH2 gives the request a stream on a connection to its server (which
// speaks HTTP/2): on one that can open a stream now, else on a new one,
// whose connect the request waits for (phConnect, connect_ms). A stream
// on a ready connection starts its exchange at once.
func (c *stream) useH2() {
	w, s := c.w, c.server
	c.countAttempt()
	if lg := c.lg; lg != nil && lg.ConnStart == 0 {
		lg.ConnStart = w.L.Now()
	}
	uc := w.upFor(s)
	if uc == nil {
		if uc = w.dialUp(s); uc == nil {
			c.connectFailed()
			return
		}
		uc.deadline = w.L.Now() + int64(c.be.B.ConnectTimeout)
		if c.be.B.ConnectTimeout <= 0 {
			uc.deadline = w.L.Now() + int64(10*time.Second)
		}
		w.L.Arm(&uc.timer, uc.deadline)
		if s.SendProxy != 0 {
			uc.private = true
		}
	}
	sc := w.newSrv()
	sc.server = s
	us := w.getUpStream(uc, sc)
	sc.up = us
	sc.side.xp = us
	sc.side.FD.Ready = evOut
	c.attach(sc)
	if uc.state == upReady {
		sc.side.Connected = true
		sc.reused = uc.used
		uc.used = true
		w.L.Disarm(&uc.timer)
		c.startExchange()
		c.mux.run(c)
		return
	}
	c.phase = phConnect
	c.armIn(c.be.B.ConnectTimeout)
}

// checkUp: the request waits for its connection (phConnect).
func (c *stream) checkUp() {
	uc := c.sc.up.c
	switch uc.state {
	case upReady:
		uc.used = true
		c.established()
	case upDead:
		c.connectFailed()
	}
}

// upFor returns a ready or connecting connection to s on this loop that
// can take one more stream, or nil.
func (w *Worker) upFor(s *balance.Server) *upConn {
	ul := w.h.up[s]
	if ul == nil {
		return nil
	}
	for uc := ul.l.Front(); uc != nil; uc = uc.link.Next() {
		if uc.private || uc.state == upDead {
			continue
		}
		if uc.state != upReady {
			if len(uc.streams) < maxUpStreams {
				return uc
			}
			continue
		}
		if uc.codec.CanOpen() && uc.codec.Streams()+uc.opening() < maxUpStreams {
			return uc
		}
	}
	return nil
}

// opening counts the streams attached whose HEADERS are not sent yet.
func (uc *upConn) opening() int {
	n := 0
	for _, us := range uc.streams {
		if us.id == 0 {
			n++
		}
	}
	return n
}

// dialUp opens a new connection to s and lists it; nil when even the
// socket could not be made or the connect was refused at once.
func (w *Worker) dialUp(s *balance.Server) *upConn {
	uc := &upConn{w: w, server: s}
	uc.side.Task.Run, uc.side.Task.Owner = runUpTask, uc
	uc.timer.Run, uc.timer.Owner = runUpTimer, uc
	uc.side.FD = loop.FD{Fd: -1, T: &uc.side.Task}
	if stage, _ := uc.side.connect(w.L, s, &w.sa); stage != connOK {
		uc.side.close(w.L, false)
		s.ConnectFailed()
		return nil
	}
	h := &w.h
	if h.up == nil {
		h.up = make(map[*balance.Server]*upList)
	}
	ul := h.up[s]
	if ul == nil {
		ul = &upList{}
		h.up[s] = ul
	}
	ul.l.PushFront(&uc.link)
	ul.n++
	uc.list = ul
	return uc
}

// unlist takes uc out of its server's list: no new stream will find it.
func (uc *upConn) unlist() {
	ul := uc.list
	if ul == nil {
		return
	}
	ul.l.Remove(&uc.link)
	ul.n--
	uc.list = nil
	if ul.n == 0 {
		delete(uc.w.h.up, uc.server)
	}
}

// process advances the connection: the connect and its transport step,
// then the server's bytes fed to the codec and the codec's output
// written.
func (uc *upConn) process() {
	w := uc.w
	switch uc.state {
	case upConnecting:
		pending, e := uc.side.connectResult()
		switch {
		case pending:
			return
		case e != 0:
			uc.fail()
			return
		}
		if uc.server.SendProxy != 0 {
			src, dst, auth := uc.proxyAddrs()
			if !sendProxy(&uc.side, uc.server, src, dst, auth) {
				uc.fail()
				return
			}
		}
		uc.state = upHandshake
		if uc.side.xp.afterConnect(&uc.side, connectStep{l: w.L, pool: w.tlsOut, within: handshakeWithin(w.L, uc.deadline),
			ss: w.ServerSlot(uc.server), owner: uc}) {
			return
		}
		uc.ready()
	case upHandshake:
		return
	case upDead:
		return
	}
	for uc.state == upReady && uc.side.canRecv() && !w.spent(&uc.side.Task) {
		if uc.rbuf == nil {
			uc.rbuf = make([]byte, uc.codec.MaxFrameLen()+4096)
		}
		room := len(uc.rbuf) - uc.rlen
		n, e := uc.side.recv(uc.rbuf[uc.rlen:])
		switch {
		case e == 0 && n > 0:
			w.budget -= uc.side.cost(n)
			uc.rlen += n
			if n < room {
				uc.side.shortRead()
			}
		case e == unix.EAGAIN:
			uc.side.drained()
		default: // the server closed or failed
			uc.fail()
			return
		}
		k, err := uc.codec.Feed(uc.rbuf[:uc.rlen])
		uc.rlen = copy(uc.rbuf, uc.rbuf[k:uc.rlen])
		if err != nil {
			uc.flush() // the GOAWAY saying why
			uc.fail()
			return
		}
	}
	uc.flush()
}

// proxyAddrs are the addresses of the PROXY header: the first waiting
// stream's client (private connections carry one stream).
func (uc *upConn) proxyAddrs() (src, dst netip.AddrPort, authority []byte) {
	for _, us := range uc.streams {
		if s := us.sc.owner; s != nil {
			return s.proxyAddrs()
		}
	}
	return
}

// ready: the connection is established (and its TLS handshake chose h2):
// the codec starts, and the streams waiting for it go on.
func (uc *upConn) ready() {
	w := uc.w
	if x, ok := uc.side.xp.(*tlsSock); ok && x.c.ConnectionState().NegotiatedProtocol != "h2" {
		// A server configured for HTTP/2 that does not offer it by ALPN
		// would read our preface as a bad HTTP/1.1 request.
		w.ServerSlot(uc.server).TLSFailed.Add(1)
		uc.fail()
		return
	}
	uc.state = upReady
	uc.side.Connected = true
	uc.codec = h2.NewClientConn(w.upConfig(uc.server), uc)
	w.L.Disarm(&uc.timer)
	uc.deadline = 0
	for _, us := range uc.streams {
		us.wake()
	}
	w.L.Wake(&uc.side.Task, loop.Urgent) // the preface and SETTINGS to send
}

// The transport step's end (connectOwner), as a tunnel's.
func (uc *upConn) stepStarted() { uc.hs = hsActive }

func (uc *upConn) stepCurrent(uint32) bool {
	orphan := uc.hs == hsOrphan
	uc.hs = hsNone
	return !orphan
}

func (uc *upConn) stepDone(err error) {
	if err != nil {
		uc.fail()
		return
	}
	uc.ready()
	uc.w.budget = runCap
	uc.process()
}

// fail ends a connection that could not connect, or that the server
// closed, or whose codec failed: every stream on it ends (a waiting one
// retries its connect elsewhere, an opened one sees a reset).
func (uc *upConn) fail() {
	w := uc.w
	if uc.state == upDead {
		return
	}
	if uc.state != upReady {
		uc.server.ConnectFailed()
	}
	uc.state = upDead
	uc.unlist()
	w.L.Disarm(&uc.timer)
	if uc.hs == hsActive {
		uc.hs = hsOrphan // the handshake owns the fd: its end closes it
	} else {
		uc.side.close(w.L, true)
	}
	uc.rbuf, uc.rlen = nil, 0
	for _, us := range uc.streams {
		if us.id != 0 && uc.codec != nil && uc.codec.Heard(us.id) {
			us.answered = true // its head broke the connection (HPACK, size)
		}
		us.reset = true
		us.sc.side.FD.Ready |= evIn | evOut
		us.wake()
	}
}

// flush writes what the codec queued; streams waiting for room in the
// output go on once it is out; a connection done closes, an idle one
// gives its buffers back.
func (uc *upConn) flush() {
	if uc.state != upReady {
		return
	}
	for out := uc.codec.Output(); len(out) > 0; out = uc.codec.Output() {
		if !uc.side.canSend() {
			return
		}
		n, e := uc.side.send(out, false)
		if e == unix.EAGAIN || (e == 0 && n == 0) {
			uc.side.blocked()
			return
		}
		if e != 0 {
			uc.fail()
			return
		}
		uc.codec.Drained(n)
	}
	if uc.wantOut {
		uc.wantOut = false
		for _, us := range uc.streams {
			if us.wantOut {
				us.wantOut = false
				us.sc.side.FD.Ready |= evOut
				us.wake()
			}
		}
	}
	switch {
	case uc.codec.Done():
		uc.close()
	case len(uc.streams) == 0:
		uc.idle()
	}
}

// idle: no stream left. A connection that may carry more stays listed
// for serverIdleTimeout without buffers; others close.
func (uc *upConn) idle() {
	w := uc.w
	if uc.private || w.stopping || uc.server.Retired() || !uc.codec.CanOpen() {
		uc.close()
		return
	}
	if uc.rlen == 0 && uc.codec.Idle() {
		uc.codec.ReleaseBuffers()
		uc.rbuf = nil
	}
	if uc.deadline == 0 {
		uc.deadline = w.L.Now() + serverIdleTimeout
		w.L.Arm(&uc.timer, uc.deadline)
	}
}

// close ends a connection gracefully (GOAWAY when it can still say it):
// its streams, if any, see a reset.
func (uc *upConn) close() {
	if uc.state == upReady && uc.codec.Err() == nil {
		uc.codec.GoAway()
		if out := uc.codec.Output(); len(out) > 0 {
			n, _ := uc.side.send(out, false) // best effort: the close follows
			if n > 0 {
				uc.codec.Drained(n)
			}
		}
	}
	uc.fail()
}

// onTimer: the connect did not complete within the first request's
// connect_ms, or the connection stayed idle serverIdleTimeout.
func (uc *upConn) onTimer() {
	switch {
	case uc.state != upReady:
		uc.fail()
	case len(uc.streams) == 0:
		uc.close()
	default:
		uc.deadline = 0
	}
}

// kick has the connection write what a stream queued, in the same round.
func (uc *upConn) kick() {
	if uc.state == upReady {
		uc.w.L.Wake(&uc.side.Task, loop.Urgent)
	}
}

func (uc *upConn) find(id uint32) *upStream {
	for i := len(uc.streams) - 1; i >= 0; i-- {
		if uc.streams[i].id == id {
			return uc.streams[i]
		}
	}
	return nil
}

// The codec's calls (h2.ClientHandler).

// Response: a response head as HTTP/1.1 (an interim one, or the final
// one with its framing) for the stream to read.
func (uc *upConn) Response(id uint32, status int, fields []hpack.HeaderField, endStream bool) {
	us := uc.find(id)
	if us == nil {
		return
	}
	if status < 200 && len(us.rhead)-us.roff >= maxInterimPending {
		// interim heads faster than the client takes them: no flow
		// control bounds them, so the stream ends here
		uc.codec.ResetStream(id, http2.ErrCodeEnhanceYourCalm)
		uc.Reset(id, http2.ErrCodeEnhanceYourCalm)
		return
	}
	us.answered = true
	var chunked bool
	us.rhead, chunked = h2.AppendHTTP1Response(us.rhead, status, fields, !endStream)
	if status >= 200 {
		us.final = true
		us.resp.chunked = chunked
		us.resp.end = endStream
	}
	us.sc.side.FD.Ready |= evIn
	us.wake()
}

// Data queues response body bytes for the stream.
func (uc *upConn) Data(id uint32, p []byte, endStream bool) {
	us := uc.find(id)
	if us == nil {
		uc.codec.Consumed(id, len(p))
		return
	}
	us.resp.body = append(us.resp.body, p...)
	if endStream {
		us.resp.end = true
	}
	us.sc.side.FD.Ready |= evIn
	us.wake()
}

// Trailers end the response body: in the chunked body's trailer section
// (a body with a content-length has nowhere to carry them: dropped).
func (uc *upConn) Trailers(id uint32, fields []hpack.HeaderField) {
	us := uc.find(id)
	if us == nil {
		return
	}
	if us.resp.chunked {
		us.resp.trailers = h2.AppendHTTP1Trailers(us.resp.trailers[:0], fields)
	}
	us.resp.end = true
	us.sc.side.FD.Ready |= evIn
	us.wake()
}

// Reset: the server reset the stream, or its response broke a rule, or
// a GOAWAY left it unprocessed.
func (uc *upConn) Reset(id uint32, code http2.ErrCode) {
	us := uc.find(id)
	if us == nil {
		return
	}
	us.id = 0 // forgotten by the codec
	if code == http2.ErrCodeNo && us.final && us.resp.end {
		return // a complete response, then "stop sending" (RFC 9113 §8.1)
	}
	us.reset, us.code = true, code
	us.refused = code == http2.ErrCodeRefusedStream && !us.final && len(us.rhead) == 0
	if code != http2.ErrCodeRefusedStream {
		// The server's reset, or ours of a frame it sent on the stream
		// (a broken head, DATA out of place): it saw the request.
		us.answered = true
	}
	us.sc.side.FD.Ready |= evIn | evOut
	us.wake()
}

// GoAway: the server stops; no stream opens on this connection any more
// (those it did not process come as Reset REFUSED_STREAM).
func (uc *upConn) GoAway(uint32, http2.ErrCode) { uc.unlist() }

// WindowOpened: the stream's request body may go on.
func (uc *upConn) WindowOpened(id uint32) {
	if us := uc.find(id); us != nil {
		us.sc.side.FD.Ready |= evOut
		us.wake()
	}
}

// The request's side of it.

func (w *Worker) getUpStream(uc *upConn, sc *srvConn) *upStream {
	us := popFree(&w.h.freeUp)
	if us == nil {
		us = &upStream{}
	}
	us.c, us.sc = uc, sc
	uc.streams = append(uc.streams, us)
	if uc.deadline != 0 && uc.state == upReady {
		uc.deadline = 0 // no longer idle
	}
	return us
}

// endUp detaches a request's server end from its connection (the exchange
// ended, or was cut: reset); the server's stream is reset unless it ended
// both ways. sc is recycled.
func (w *Worker) endUp(sc *srvConn, reset bool) {
	us := sc.up
	uc := us.c
	if us.id != 0 && uc.state == upReady {
		code := http2.ErrCodeNo
		if reset || !us.final || !us.resp.end {
			code = http2.ErrCodeCancel
		}
		uc.codec.ResetStream(us.id, code) // nothing when it ended both ways
	}
	for i, x := range uc.streams {
		if x == us {
			last := len(uc.streams) - 1
			uc.streams[i] = uc.streams[last]
			uc.streams[last] = nil
			uc.streams = uc.streams[:last]
			break
		}
	}
	us.resp.reset()
	rhead, req := us.rhead[:0], us.req
	req.tail = req.tail[:0]
	*us = upStream{rhead: rhead, req: req, resp: us.resp}
	if len(w.h.freeUp) < maxFreeConns {
		w.h.freeUp = append(w.h.freeUp, us)
	}
	sc.up = nil
	sc.side.xp = nil
	if sc.in != nil {
		sc.in.head, sc.in.tail = 0, 0
		w.Bufs.Put(sc.in)
		sc.in = nil
	}
	w.recycleSrv(sc)
	switch uc.state {
	case upReady:
		uc.flush() // the RST_STREAM; an idle connection waits
	case upConnecting, upHandshake:
		// left connecting for the next request; its timer bounds it
	}
}

// wake runs the request's stream (its server tasklet).
func (us *upStream) wake() {
	if sc := us.sc; sc != nil && sc.owner != nil {
		us.c.w.L.Wake(&sc.side.Task, loop.Urgent)
	}
}

// passReset: the HTTP/2 server reset the stream before any response
// head, and the client is an HTTP/2 stream too: its stream is reset with
// the server's code (a gRPC server's CANCEL at a deadline stays a
// cancellation for the client, not a 502 it would read as UNAVAILABLE).
// The log says SH, the server counts a response error. false when the
// client speaks HTTP/1.1 (a 502 then) or the server gave no code.
func (c *stream) passReset() bool {
	us := c.sc.up
	hs, ok := c.cli.xp.(*h2Stream)
	if us == nil || !ok || us.code == 0 || us.refused || c.respSent {
		return false
	}
	hs.rstCode = us.code
	c.blame('S', 'H')
	c.responseError()
	c.close(closeAbort)
	return true
}

// refusedReplay: the server refused the stream before processing it.
func (sc *srvConn) refusedReplay() bool { return sc.up != nil && sc.up.refused }

// upAnswered: the HTTP/2 server began to answer the stream (upStream's
// answered): never replayed.
func (sc *srvConn) upAnswered() bool { return sc.up != nil && sc.up.answered }

// The transport of a request's server end.

// sndBuf takes the HTTP/1.1 request the stream writes: its head (whole,
// from the rewritten head buffer) as HEADERS, then its body as DATA
// within the server's windows.
func (us *upStream) sndBuf(_ int, p []byte, _ bool) (int, unix.Errno) {
	uc := us.c
	if us.reset || uc.state != upReady {
		return 0, unix.EPIPE
	}
	if len(uc.codec.Output()) >= h2OutMax {
		us.wantOut, uc.wantOut = true, true
		uc.kick()
		return 0, unix.EAGAIN
	}
	taken := 0
	if !us.reqHead {
		n, e := us.head(p)
		if e != 0 {
			return 0, e
		}
		taken = n
	}
	if taken < len(p) && !us.req.end {
		n, blocked, bad := us.req.send(uc.codec, us.id, p[taken:])
		if bad {
			return taken, unix.EPROTO // the stream validated the framing: cannot happen
		}
		taken += n
		if blocked {
			us.sc.side.blocked()
		}
	}
	uc.kick()
	if taken == 0 {
		return 0, unix.EAGAIN
	}
	return taken, 0
}

// head parses the request head at the start of p and sends it, with
// te: trailers (see the top of this file).
func (us *upStream) head(p []byte) (int, unix.Errno) {
	uc := us.c
	w := uc.w
	// The stream wrote the head itself (CRLF line ends): it ends at the
	// first empty line, and is parsed once, te: trailers added first.
	i := bytes.Index(p, []byte("\r\n\r\n"))
	if i < 0 {
		us.reset = true
		return 0, unix.EPROTO // the head is written whole: cannot happen
	}
	n := i + 4
	buf := p[:n]
	if s := us.sc.owner; s != nil && s.req.Minor == 1 {
		// The head with "te: trailers" added before its empty line.
		h := append(w.h.upHead[:0], p[:n-2]...)
		h = append(h, "te: trailers\r\n\r\n"...)
		w.h.upHead = h
		buf = h
	}
	r := w.getReq()
	defer w.putReqParser(r)
	r.Limits.MaxHead = len(buf)
	if k, err := r.Parse(buf); err != nil || k != len(buf) {
		us.reset = true
		return 0, unix.EPROTO // the stream wrote a head it parsed itself: cannot happen
	}
	end := r.Body == http1.BodyNone || (r.Body == http1.BodyLength && r.ContentLength == 0)
	id, err := uc.codec.RequestHTTP1(r, buf, end)
	switch err {
	case nil:
	case h2.ErrNoStream:
		// A GOAWAY (or the server's stream limit) came since the stream
		// was attached: not sent, so it may go elsewhere.
		us.reset, us.refused = true, true
		return 0, unix.EPIPE
	default:
		us.reset = true
		return 0, unix.EPROTO // CONNECT or an upgrade: no HTTP/2 form here
	}
	us.id = id
	us.reqHead = true
	us.req.start(r.Body, r.ContentLength)
	us.req.end = end
	return n, 0
}

// rcvBuf gives the response as HTTP/1.1: its heads, then its body.
// ECONNRESET once the stream was reset with nothing left to read.
func (us *upStream) rcvBuf(_ int, p []byte) (int, unix.Errno) {
	n := 0
	if us.roff < len(us.rhead) {
		n = copy(p, us.rhead[us.roff:])
		us.roff += n
		if us.roff == len(us.rhead) {
			us.rhead, us.roff = us.rhead[:0], 0
		}
	}
	if n < len(p) && us.final {
		k, payload := us.resp.read(p[n:])
		n += k
		if payload > 0 && us.id != 0 && us.c.state == upReady {
			us.c.codec.Consumed(us.id, payload)
			us.c.kick()
		}
	}
	switch {
	case n > 0:
		return n, 0
	case us.reset:
		return 0, unix.ECONNRESET
	}
	return 0, unix.EAGAIN
}

func (us *upStream) rcvPending() bool {
	return us.roff < len(us.rhead) || (us.final && us.resp.rcvPending()) || us.reset
}

func (us *upStream) push(int) {}

func (us *upStream) canSplice() bool { return false }

func (us *upStream) rcvPipe(int, *Pipe, int) (int, unix.Errno) { return 0, unix.EINVAL }

func (us *upStream) sndPipe(int, *Pipe, int, bool) (int, unix.Errno) { return 0, unix.EINVAL }

func (us *upStream) shutw(int) unix.Errno { return 0 } // a request body never ends by a close

func (us *upStream) close(int, bool) {}

func (us *upStream) rcvEvents() uint32 { return evIn | evErr | evHup }

func (us *upStream) sndEvents() uint32 { return evOut | evErr | evHup }

func (us *upStream) rcvCost(n int) int { return n }

func (us *upStream) secure() bool { return us.c.server.TLS != nil }

func (us *upStream) peerSubject() string { return "" }

func (us *upStream) serverName() string { return "" }

func (us *upStream) afterConnect(*Side, connectStep) bool { return false }

// closeUp closes every HTTP/2 server connection of the loop (shutdown),
// or (unusable) only those to servers retired or put in maint, once idle
// (the others stop taking streams: GOAWAY).
func (w *Worker) closeUp(unusable bool) {
	for s, ul := range w.h.up {
		if unusable && !s.Retired() && s.AdminState() != config.AdminMaint {
			continue
		}
		for uc := ul.l.Front(); uc != nil; {
			next := uc.link.Next()
			switch {
			case !unusable || len(uc.streams) == 0 || uc.state != upReady:
				uc.close() // a connecting one's streams retry elsewhere
			default:
				uc.unlist()
				uc.codec.GoAway()
				uc.kick()
			}
			uc = next
		}
	}
}
