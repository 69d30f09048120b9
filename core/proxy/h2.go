package proxy

import (
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/h2"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// HTTP/2 from clients (h2.go: the connection; h2_stream.go: each stream's
// client end)
//
// The second mux of http mode, beside h1Conn: one client connection
// carries many requests, each a stream of the same layer as an HTTP/1.1
// request (http_stream.go: routing, server attempt, queues, retries,
// bodies, timeouts, counters, log entry), carried to the servers over
// HTTP/1.1 (HAProxy's default with H2 in front), or over HTTP/2 to a
// server with proto h2 (h2_server.go). Framing, HPACK, stream
// states, flow control and the hostile-client bounds are core/h2's Conn,
// a state machine without I/O driven here on the loop: no goroutine per
// connection or stream.
//
// A stream meets its HTTP/2 stream through a client end that speaks
// HTTP/1.1 (h2_stream.go, HAProxy 1.8's design before HTX): the request
// head is written as an HTTP/1.1 head (h2.AppendHTTP1: validated fields
// only, so no CR/LF/NUL and no framing of the client's can reach the
// server) and parsed back by core/http1 exactly as an HTTP/1.1 client's;
// the request body comes from the DATA frames (chunked when the client
// gave no content-length); the response the stream writes (head, body,
// chunked trailers) is parsed as it comes and sent as HEADERS, DATA and
// trailing HEADERS. The client window is credited back only as the
// stream forwards body bytes, so a stream holds at most its window of
// request body; a response waits in the stream's buffers while the
// client's window is closed, bounded by client_ms like a client that does
// not read.
//
// Connections start two ways: TLS binds whose client chose "h2" by ALPN
// (startH2), and clear binds whose first bytes are the HTTP/2 preface
// (prior knowledge, h1Conn.readHead: the h1Conn hands its fd and input
// over). No Upgrade: h2c.
//
// Timeouts: http_request_ms from the accept to the first request's
// HEADERS and for a stream's head (the HEADERS block); http_keep_alive_ms
// while no stream is open; each stream then has the exchange timeouts of
// an HTTP/1.1 request. A stop, a drain or the frontend's removal sends
// GOAWAY with the last stream id; the streams under way finish.

// h2 connection phases (h2Conn.phase).
const (
	h2Open    uint8 = iota
	h2Closing       // GOAWAY queued (error or stop): the output drains, then linger
	h2Linger        // output out and write side shut: client input discarded, then close
	h2Closed
)

// h2OutMax bounds what a connection's output may hold before its streams
// stop sending (their send returns EAGAIN until the socket took it).
const h2OutMax = 64 << 10

// speaksH2 reports whether the frontend's binds speak HTTP/2.
func (h *HTTPFront) speaksH2() bool { return h.Versions&HTTPVersion2 != 0 }

// speaksH1 reports whether the frontend's binds speak HTTP/1.1 (no
// versions at all: HTTP/1.1, as before versions existed).
func (h *HTTPFront) speaksH1() bool { return h.Versions&HTTPVersion1 != 0 || h.Versions == 0 }

// h2Conn is an HTTP/2 client connection (the second mux).
type h2Conn struct {
	link ilist.Link[h2Conn] // in httpState.live2; first: ilist finds the h2Conn from it
	w    *Worker
	client
	cli   Side
	codec *h2.Conn
	// rbuf holds client bytes not fed yet (a partial frame): rb, a pool
	// buffer, or a frame's size when a frame longer than that comes
	// (rb nil then). Taken while
	// the connection is busy, given back when it is idle.
	rbuf []byte
	rb   *Buffer
	rlen int
	// streams are the streams in flight, at most max_concurrent_streams.
	streams  []*h2Stream
	timer    loop.Timer
	deadline int64
	nreq     int
	phase    uint8
	// wantOut: a stream waits for the output to drain (h2OutMax).
	wantOut bool
	// away: GOAWAY was queued by goAway; the timer then bounds the
	// connection's end (lingerTimeout).
	away bool
	// counted: the codec's counts already added to the frontend's
	// counters (count).
	counted h2.Counts
	// running: the connection's tasklet runs (process), which flushes
	// when it ends: flushSoon need not wake it.
	running bool
}

var _ = [1]struct{}{}[unsafe.Offsetof(h2Conn{}.link)] // link first (ilist)

func runH2Task(tk *loop.Tasklet) {
	c := tk.Owner.(*h2Conn)
	c.w.budget = runCap
	c.running = true
	c.process()
	c.running = false
}

func runH2Timer(tm *loop.Timer) { tm.Owner.(*h2Conn).onTimer() }

// h2Config is the codec configuration of a frontend's connections.
func (w *Worker) h2Config(hf *HTTPFront) h2.Config {
	l := w.L
	return h2.Config{
		Settings: h2.Settings{
			MaxConcurrentStreams: hf.H2.MaxConcurrentStreams,
			InitialWindowSize:    hf.H2.InitialWindowSize,
			MaxFrameSize:         hf.H2.MaxFrameSize,
			MaxHeaderListSize:    hf.H2.MaxHeaderListSize,
		},
		Now:  func() time.Time { return time.Unix(0, l.Now()) },
		Pool: &w.h.h2mem,
	}
}

// startH2 serves HTTP/2 on the accepted client fd over transport xp (a TLS
// one that negotiated "h2"); in holds client bytes already read (the
// preface read by an h1Conn), nil when none.
func (w *Worker) startH2(fd int, xp transport, fe *Frontend, cur *atomic.Pointer[Frontend], pp uint32, in []byte, ready uint32) *h2Conn {
	c := &h2Conn{w: w}
	c.pp = pp // given back by close
	c.h2 = true
	c.cli.Task.Run, c.cli.Task.Owner = runH2Task, c
	c.timer.Run, c.timer.Owner = runH2Timer, c
	c.acc, c.cur = fe, cur
	c.fe, c.hf = fe, fe.HTTP
	c.cli.adopt(fd, xp)
	c.cli.Connected = true
	w.h.live2.PushFront(&c.link)
	w.nlive++
	w.act.Conns.Add(1)
	c.fs = fe.Stats.Loop(w.id)
	if in == nil { // a connection handed over by an h1Conn was counted there
		c.fs.ConnTotal.Add(1)
		c.fs.ConnCur.Add(1)
		c.fs.ConnStarted(stats.Sec(w.L.Now()))
		// TCP_NODELAY: inherited from the listening socket (core/listen).
	}
	c.t0 = w.L.Now()
	ap := w.clientAddr(fd, pp)
	c.peer, c.port = ap.Addr(), ap.Port()
	c.codec = h2.NewConn(w.h2Config(c.hf), c)
	c.fs.H2ConnCur.Add(1)
	if len(in) > 0 {
		c.takeIn()
		c.rlen = copy(c.rbuf, in) // the preface and what followed: at most a pool buffer
	}
	if err := c.cli.register(w.L); err != nil {
		c.close(closeAbort)
		return nil
	}
	c.cli.FD.Ready |= ready
	c.armIn(c.hf.RequestTimeout)
	w.L.Wake(&c.cli.Task, loop.Urgent) // the SETTINGS to send, maybe bytes to feed
	return c
}

// takeIn gives the connection a buffer for client bytes: a pool buffer
// (most clients send nothing longer), grown to one frame of our
// max_frame_size and its header when a longer frame comes (grow).
func (c *h2Conn) takeIn() {
	c.rb = c.w.Bufs.Get()
	c.rbuf = c.rb.b
}

// grow replaces a full pool buffer by one that holds a whole frame: a
// frame longer than the pool's buffers is being received (the codec
// refuses any frame past our max_frame_size as soon as its header is in).
func (c *h2Conn) grow() {
	big := make([]byte, max(c.codec.MaxFrameLen(), len(c.rbuf)+1))
	copy(big, c.rbuf[:c.rlen])
	c.releaseIn()
	c.rbuf = big
}

// releaseIn gives the input buffer back (pool buffers to the pool).
func (c *h2Conn) releaseIn() {
	if c.rb != nil {
		c.rb.head, c.rb.tail = 0, 0
		c.w.Bufs.Put(c.rb)
		c.rb = nil
	}
	c.rbuf = nil
}

func (c *h2Conn) armIn(d time.Duration) {
	if d <= 0 {
		c.w.L.Disarm(&c.timer)
		c.deadline = 0
		return
	}
	c.deadline = c.w.L.Now() + int64(d)
	c.w.L.Arm(&c.timer, c.deadline)
}

// process reads and feeds what the client sent, then writes what the
// codec queued; it runs for each run of the connection's tasklet.
func (c *h2Conn) process() {
	w := c.w
	if c.phase == h2Linger {
		c.linger()
		return
	}
	for c.phase == h2Open && c.cli.canRecv() && !w.spent(&c.cli.Task) {
		if c.rbuf == nil {
			c.takeIn()
		}
		if c.rlen == len(c.rbuf) {
			c.grow()
		}
		room := len(c.rbuf) - c.rlen
		n, e := c.cli.recv(c.rbuf[c.rlen:])
		switch {
		case e == 0 && n > 0:
			w.budget -= c.cli.cost(n)
			c.rlen += n
			if n < room {
				c.cli.shortRead()
			}
		case e == unix.EAGAIN:
			c.cli.drained()
		case e == 0:
			// The client closed: the streams under way cannot answer.
			c.close(closeNormal)
			return
		default:
			c.close(closeAbort)
			return
		}
		if !c.feed() {
			break
		}
	}
	if c.phase == h2Open && c.rlen > 0 {
		c.feed() // bytes handed over by an h1Conn
	}
	c.flush()
}

// feed gives the buffered client bytes to the codec; false when the
// connection failed (GOAWAY queued).
func (c *h2Conn) feed() bool {
	k, err := c.codec.Feed(c.rbuf[:c.rlen])
	c.rlen = copy(c.rbuf, c.rbuf[k:c.rlen])
	if err != nil {
		c.fs.Errors.Add(1)
		c.phase = h2Closing
		c.abortStreams()
		return false
	}
	return true
}

// count adds what the codec counted since the last call to the
// frontend's counters (per stream event, never per frame of data).
func (c *h2Conn) count() {
	n, p := c.codec.Counts(), &c.counted
	if n == *p {
		return
	}
	fs := c.fs
	if d := n.StreamsOpened - p.StreamsOpened; d != 0 {
		fs.H2Streams.Add(int64(d))
	}
	if d := int64(n.StreamsOpened-n.StreamsClosed) - int64(p.StreamsOpened-p.StreamsClosed); d != 0 {
		fs.H2StreamsCur.Add(d)
	}
	if d := n.StreamsRefused - p.StreamsRefused; d != 0 {
		fs.H2StreamsRefused.Add(int64(d))
	}
	if d := n.ResetsSent - p.ResetsSent; d != 0 {
		fs.H2ResetsSent.Add(int64(d))
	}
	if d := n.ResetsReceived - p.ResetsReceived; d != 0 {
		fs.H2ResetsReceived.Add(int64(d))
	}
	*p = n
}

// flushSoon: a stream queued frames (a response, a reset, a window
// update). The connection's tasklet writes them (process, then flush)
// once the streams this round runs queued theirs: one write for the
// responses of all of a round's streams rather than one per stream
// (HAProxy's H2 mux sends from its own tasklet the same way). It is
// woken as Normal, so it runs after the round's I/O tasklets, the server
// reads that queue responses, and after the streams started before it.
// Measured on the h2 bench row (h2load -c100 -m10, 64 B): 2.0 write
// syscalls per request before (one to the server, one to the client),
// about 1.1 after.
func (c *h2Conn) flushSoon() {
	if c.running || c.phase == h2Closed {
		return
	}
	c.w.L.Wake(&c.cli.Task, loop.Normal)
}

// flush writes what the codec queued; when it is all out, a closing
// connection closes and an idle one gives its buffers back.
func (c *h2Conn) flush() {
	if c.phase == h2Closed || c.phase == h2Linger {
		return
	}
	c.count()
	for out := c.codec.Output(); len(out) > 0; out = c.codec.Output() {
		if !c.cli.canSend() {
			return
		}
		n, e := c.cli.send(out, false)
		if e == unix.EAGAIN || (e == 0 && n == 0) {
			c.cli.blocked()
			return
		}
		if e != 0 {
			c.close(closeAbort)
			return
		}
		c.codec.Drained(n)
	}
	if c.wantOut {
		c.wantOut = false
		for _, hs := range c.streams {
			if hs.wantOut {
				hs.wantOut = false
				hs.side.FD.Ready |= evOut
				c.w.L.Wake(&hs.side.Task, loop.Urgent)
			}
		}
	}
	if c.phase == h2Closing || c.codec.Done() {
		c.startLinger()
		return
	}
	if since := c.codec.HeadersPendingSince(); !since.IsZero() && c.hf.RequestTimeout > 0 {
		// A header block half read holds the whole connection (nothing
		// may come between its frames): http_request_ms bounds it, as an
		// HTTP/1.1 head.
		if at := since.UnixNano() + int64(c.hf.RequestTimeout); c.deadline == 0 || at < c.deadline {
			c.deadline = at
			c.w.L.Arm(&c.timer, at)
		}
	}
	if len(c.streams) == 0 && c.codec.Idle() && c.rlen == 0 {
		c.codec.ReleaseBuffers()
		c.releaseIn()
		if c.deadline == 0 || c.nreq > 0 {
			c.armIn(c.hf.KeepAliveTimeout)
		}
	}
}

// startLinger: the output is out, GOAWAY last. The write side is shut,
// then what the client still sends is read and discarded until it closes
// or lingerTimeout passes: closing with unread input makes the kernel send
// a RST that can destroy the GOAWAY (its code, its last stream id) before
// the client read it. h1Conn lingers the same way after its last answer.
func (c *h2Conn) startLinger() {
	c.phase = h2Linger
	c.rbuf, c.rlen = nil, 0
	c.cli.shutw()
	c.armIn(lingerTimeout) // onTimer closes
	c.linger()
}

// linger discards client input until end of stream (then close).
func (c *h2Conn) linger() {
	w := c.w
	var b *Buffer
	defer func() {
		if b != nil {
			w.Bufs.Put(b)
		}
	}()
	for c.phase == h2Linger && c.cli.canRecv() && !w.spent(&c.cli.Task) {
		if b == nil {
			b = w.Bufs.Get()
		}
		n, e := c.cli.recv(b.b)
		switch {
		case e == 0 && n > 0:
			w.budget -= c.cli.cost(n)
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

// onTimer: no stream opened within http_request_ms of the accept, or
// none for http_keep_alive_ms since the last one ended; or, after GOAWAY,
// the connection still not done lingerTimeout later with no stream: a
// header block half sent (no other frame may come between its frames, so
// nothing else can end it) or a client that does not read the GOAWAY.
func (c *h2Conn) onTimer() {
	if c.phase != h2Open {
		c.close(closeTimeout)
		return
	}
	now := c.w.L.Now()
	if since := c.codec.HeadersPendingSince(); !since.IsZero() && c.hf.RequestTimeout > 0 &&
		now >= since.UnixNano()+int64(c.hf.RequestTimeout) {
		c.fs.Timeouts.Add(1) // a header block that did not end in time
		c.close(closeTimeout)
		return
	}
	if len(c.streams) > 0 {
		c.deadline = 0
		return // the streams have their own timeouts
	}
	if now < c.deadline {
		c.w.L.Arm(&c.timer, c.deadline)
		return
	}
	if c.away {
		c.close(closeTimeout)
		return
	}
	if c.nreq == 0 {
		c.fs.Timeouts.Add(1)
	}
	c.goAway()
}

// goAway stops the connection gracefully: GOAWAY with the last stream id;
// the streams under way finish, then the connection closes.
func (c *h2Conn) goAway() {
	c.away = true
	c.codec.GoAway()
	c.armIn(lingerTimeout) // bounds the final write
	c.flush()
}

// Headers opens a stream for a validated request (h2.Handler).
func (c *h2Conn) Headers(id uint32, req *h2.Request, endStream bool) {
	w := c.w
	if c.phase != h2Open {
		c.codec.ResetStream(id, http2.ErrCodeRefusedStream)
		return
	}
	c.resolve()
	hs := w.getH2Stream(c, id)
	c.streams = append(c.streams, hs)
	s := w.getStream(c, &c.client, &hs.side, &hs.in)
	hs.st = s
	c.nreq++
	w.L.Disarm(&c.timer)
	c.deadline = 0
	hs.in = w.Bufs.Get()
	hs.req.end = endStream
	hs.req.chunked = !endStream && req.ContentLength < 0 && !req.IsConnect()
	d := h2.AppendHTTP1(hs.in.b[:0:len(hs.in.b)], req, !endStream)
	d = append(d, "\r\n"...)
	if len(d) > len(hs.in.b) || len(d) > headLimit(hs.in.Cap()) {
		hs.headErr = 431 // too large for the buffer it is parsed from
	} else {
		hs.in.head, hs.in.tail = 0, len(d)
	}
	w.L.Wake(&hs.side.Task, loop.Normal) // the stream's start: routing, a server
	if c.gone && !c.away {
		c.goAway() // the bind was removed: this stream is the last
	}
}

// Data queues request body bytes for the stream's client end
// (h2.Handler).
func (c *h2Conn) Data(id uint32, p []byte, endStream bool) {
	hs := c.find(id)
	if hs == nil {
		c.codec.Consumed(id, len(p)) // a stream already answered: nothing waits for it
		return
	}
	hs.req.body = append(hs.req.body, p...)
	if endStream {
		hs.req.end = true
	}
	hs.side.FD.Ready |= evIn
	c.w.L.Wake(&hs.side.Task, loop.Urgent)
}

// Trailers ends a request body with trailer fields (h2.Handler): a
// chunked body carries them to the server, one with a content-length
// cannot (dropped, as a server would).
func (c *h2Conn) Trailers(id uint32, fields []hpack.HeaderField) {
	hs := c.find(id)
	if hs == nil {
		return
	}
	if hs.req.chunked {
		hs.req.trailers = h2.AppendHTTP1Trailers(hs.req.trailers[:0], fields)
	}
	hs.req.end = true
	hs.side.FD.Ready |= evIn
	c.w.L.Wake(&hs.side.Task, loop.Urgent)
}

// Reset: the client reset the stream, or it broke a rule (h2.Handler).
func (c *h2Conn) Reset(id uint32, code http2.ErrCode) {
	hs := c.find(id)
	if hs == nil {
		return
	}
	hs.resetByPeer = true
	s := hs.st
	if s.phase != phDone {
		s.blame('C', s.phaseByte())
		s.close(closeAbort)
	}
}

// WindowOpened: a stream blocked by the client's window may send again
// (h2.Handler).
func (c *h2Conn) WindowOpened(id uint32) {
	if hs := c.find(id); hs != nil {
		hs.side.FD.Ready |= evOut
		c.w.L.Wake(&hs.side.Task, loop.Urgent)
	}
}

func (c *h2Conn) find(id uint32) *h2Stream {
	for i := len(c.streams) - 1; i >= 0; i-- {
		if c.streams[i].id == id {
			return c.streams[i]
		}
	}
	return nil
}

func (c *h2Conn) of(s *stream) *h2Stream {
	for i := len(c.streams) - 1; i >= 0; i-- {
		if c.streams[i].st == s {
			return c.streams[i]
		}
	}
	return nil
}

// run: the stream's server side has work (streamMux).
func (c *h2Conn) run(s *stream) {
	s.process()
	c.flushSoon()
}

// streamDone: the stream's response is complete, or its proxy answer sent
// (streamMux). closing (an HTTP/1.1 notion: Connection: close) does not
// end an HTTP/2 connection. A response that did not end the stream, or a
// request body the server did not wait for, ends it with RST_STREAM.
func (c *h2Conn) streamDone(s *stream, _ bool) {
	hs := c.of(s)
	w := c.w
	w.putStream(s)
	if hs == nil {
		return
	}
	switch {
	case !hs.resp.end:
		hs.reset(http2.ErrCodeInternal)
	case !hs.req.end || hs.req.pending() > 0:
		// RFC 9113 §8.1: a complete response before the whole request,
		// then RST_STREAM NO_ERROR, so that the client stops sending.
		hs.reset(http2.ErrCodeNo)
	}
	c.drop(hs)
	c.flushSoon()
}

// streamAbort: the stream cannot go on (streamMux): it ends with
// RST_STREAM (CANCEL for a timeout, INTERNAL_ERROR otherwise); the
// connection and its other streams go on.
func (c *h2Conn) streamAbort(s *stream, why uint8) {
	hs := c.of(s)
	s.end(why)
	c.w.putStream(s)
	if hs == nil {
		return
	}
	code := http2.ErrCodeInternal
	switch {
	case hs.rstCode != 0:
		code = hs.rstCode // the server's (passReset)
	case why == closeTimeout:
		code = http2.ErrCodeCancel
	}
	hs.reset(code)
	c.drop(hs)
	c.flushSoon()
}

// upgrade cannot happen: an HTTP/2 request carries no Upgrade (the
// codec refuses it), so no 101 is relayed (streamMux).
func (c *h2Conn) upgrade(s *stream) { c.streamAbort(s, closeAbort) }

// drop removes hs from the connection and gives it back.
func (c *h2Conn) drop(hs *h2Stream) {
	for i, x := range c.streams {
		if x == hs {
			last := len(c.streams) - 1
			c.streams[i] = c.streams[last]
			c.streams[last] = nil
			c.streams = c.streams[:last]
			break
		}
	}
	c.w.putH2Stream(hs)
	if len(c.streams) == 0 && c.phase == h2Open {
		c.t0 = c.w.L.Now()
		if c.w.stopping {
			c.goAway()
			return
		}
		c.armIn(c.hf.KeepAliveTimeout)
	}
}

// abortStreams cuts every stream of a connection that failed or closes.
func (c *h2Conn) abortStreams() {
	for len(c.streams) > 0 {
		hs := c.streams[len(c.streams)-1]
		hs.resetByPeer = true // nothing more is sent on it
		if s := hs.st; s != nil && s.phase != phDone {
			s.end(closeAbort)
			c.w.putStream(s)
		}
		c.drop(hs)
	}
}

// close ends the connection and every stream on it.
func (c *h2Conn) close(why uint8) {
	if c.phase == h2Closed {
		return
	}
	w := c.w
	c.phase = h2Closed
	c.abortStreams()
	w.L.Disarm(&c.timer)
	w.limitConnEnd(c.cli.FD.Fd) // limits.go
	c.cli.close(w.L, why == closeAbort)
	c.count()
	// Streams the codec still had open end with the connection.
	c.fs.H2StreamsCur.Add(-int64(c.counted.StreamsOpened - c.counted.StreamsClosed))
	c.fs.H2ConnCur.Add(-1)
	c.releaseIn()
	c.rlen = 0
	c.codec = nil
	c.fs.ConnCur.Add(-1)
	if why == closeAbort {
		c.fs.Aborts.Add(1)
	}
	w.h.live2.Remove(&c.link)
	w.nlive--
	w.act.Conns.Add(-1)
	w.dropCarried(c.pp)
	c.pp = 0
	if c.acc.OnClose != nil {
		c.acc.OnClose(w.id)
	}
}

// toH2 hands an HTTP/1.1 connection whose first bytes are the HTTP/2
// preface (prior knowledge) over to an h2Conn, with what it read.
func (c *h1Conn) toH2() {
	w := c.w
	fd, ready := c.cli.detach(w.L)
	xp := c.cli.xp
	in := c.in
	c.in = nil
	acc, cur, pp := c.acc, c.cur, c.pp
	c.pp = 0 // the h2Conn's now
	c.phase = cClosed
	w.L.Disarm(&c.timer)
	w.L.Unqueue(&c.cli.Task)
	w.unlinkHTTP(c)
	c.recycle()
	w.startH2(fd, xp, acc, cur, pp, in.Data(), ready)
	in.head, in.tail = 0, 0
	w.Bufs.Put(in)
}
