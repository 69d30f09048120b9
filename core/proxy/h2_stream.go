package proxy

import (
	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
)

// h2Stream is an HTTP/2 stream's client end for its stream (see h2.go):
// a Side without fd whose transport is the h2Stream itself. Its receive
// gives the request body as HTTP/1.1 body bytes (chunked when the client
// sent no content-length); its send takes the HTTP/1.1 response the stream
// writes and sends it as HEADERS, DATA and trailing HEADERS within the
// client's windows. Its tasklet runs the stream: the start of the request
// in class Normal, then its exchange.
type h2Stream struct {
	side Side
	c    *h2Conn
	st   *stream
	id   uint32
	// in holds the request head written as HTTP/1.1 (the stream parses
	// it from there, as an h1Conn's head; then the body read from this
	// side passes through it).
	in *Buffer
	// req is the request body as DATA came (h2_body.go), read by the
	// stream as HTTP/1.1 body bytes.
	req     h2In
	headErr int // a proxy answer the head gets instead of being routed (431)

	// The response, as the stream writes it: its body as DATA
	// (h2_body.go).
	resp        h1Out
	respHead    bool // the final head was sent (HEADERS)
	wantOut     bool // waits for the connection's output to drain
	resetByPeer bool // the codec forgot the stream: nothing more is sent on it
	// rstCode, when set, is the code the stream is reset with when it is
	// cut: an HTTP/2 server's own (passReset, h2_server.go).
	rstCode http2.ErrCode
}

func runH2StreamTask(tk *loop.Tasklet) {
	hs := tk.Owner.(*h2Stream)
	c, s := hs.c, hs.st
	c.w.budget = runCap
	if s.phase == phHead {
		hs.start()
	} else {
		s.process()
	}
	c.flushSoon()
}

// start routes the request whose head hs.in holds (the stream's
// startRequest, as h1Conn.readHead after a complete head).
func (hs *h2Stream) start() {
	s := hs.st
	if hs.headErr != 0 {
		s.fail(hs.headErr)
		return
	}
	s.req.Limits.MaxHead = headLimit(hs.in.Cap())
	n, err := s.req.Parse(hs.in.Data())
	switch {
	case err != nil:
		s.bytesIn += int64(hs.in.Len())
		s.logBadLine()
		s.fail(err.(*http1.Error).Status)
	case n == 0: // cannot happen: the head ends with its empty line
		s.fail(400)
	default:
		s.startRequest(n)
		if hs.in != nil && hs.in.Len() == 0 { // the head is consumed
			hs.c.w.Bufs.Put(hs.in)
			hs.in = nil
		}
	}
}

func (w *Worker) getH2Stream(c *h2Conn, id uint32) *h2Stream {
	hs := popFree(&w.h.freeH2)
	if hs == nil {
		hs = &h2Stream{}
		hs.side.Task.Run, hs.side.Task.Owner = runH2StreamTask, hs
	}
	hs.c, hs.id = c, id
	hs.side.FD = loop.FD{Fd: -1, T: &hs.side.Task}
	hs.side.xp = hs
	hs.side.Connected = true
	hs.side.FD.Ready = evOut
	return hs
}

func (w *Worker) putH2Stream(hs *h2Stream) {
	w.L.Unqueue(&hs.side.Task)
	if hs.in != nil {
		hs.in.head, hs.in.tail = 0, 0
		w.Bufs.Put(hs.in)
	}
	hs.req.reset()
	req, tail := hs.req, hs.resp.tail[:0]
	task := hs.side.Task
	*hs = h2Stream{req: req}
	hs.resp.tail = tail
	hs.side.Task = task
	hs.side.Task.Owner = hs
	if len(w.h.freeH2) < maxFreeConns {
		w.h.freeH2 = append(w.h.freeH2, hs)
	}
}

// reset ends the HTTP/2 stream with RST_STREAM code, unless the codec
// already forgot it.
func (hs *h2Stream) reset(code http2.ErrCode) {
	if !hs.resetByPeer && hs.c.codec != nil {
		hs.c.codec.ResetStream(hs.id, code)
		hs.resetByPeer = true
	}
}

// The transport of the stream's client end.

// rcvBuf gives request body bytes: the payload as it came, or framed in
// chunks (h2In); EAGAIN while the client has not sent more; never an end
// of stream (the body ends by its framing). The payload read goes back to
// the client's window.
func (hs *h2Stream) rcvBuf(_ int, p []byte) (int, unix.Errno) {
	n, payload := hs.req.read(p)
	if payload > 0 && hs.c.codec != nil {
		hs.c.codec.Consumed(hs.id, payload)
	}
	if n == 0 {
		return 0, unix.EAGAIN
	}
	return n, 0
}

// sndBuf takes HTTP/1.1 response bytes from the stream: the head (and
// interim heads) become HEADERS, the body DATA within the client's
// windows, a chunked body's trailers trailing HEADERS. It returns what it
// took, EAGAIN when the window or the connection's output is full.
func (hs *h2Stream) sndBuf(_ int, p []byte, _ bool) (int, unix.Errno) {
	c := hs.c
	if hs.resetByPeer || c.codec == nil || hs.resp.end {
		return 0, unix.EPIPE
	}
	if len(c.codec.Output()) >= h2OutMax {
		hs.wantOut, c.wantOut = true, true
		return 0, unix.EAGAIN
	}
	taken := 0
	for !hs.respHead && taken < len(p) {
		n, e := hs.head(p[taken:])
		if e != 0 {
			return taken, e
		}
		taken += n
	}
	if taken == len(p) || hs.resp.end {
		return taken, 0
	}
	n, e := hs.data(p[taken:])
	taken += n
	if taken == 0 && e == 0 {
		return 0, unix.EAGAIN
	}
	return taken, e
}

// head parses one response head at the start of p and sends it.
func (hs *h2Stream) head(p []byte) (int, unix.Errno) {
	w, s := hs.c.w, hs.st
	r := w.getResp()
	defer w.putRespParser(r)
	r.Limits.MaxHead = len(p)
	n, err := r.Parse(p, s.req.MethodID)
	if err != nil || n == 0 {
		return 0, unix.EPROTO // the stream wrote a head it parsed itself: cannot happen
	}
	end := !r.Interim && (r.Body == http1.BodyNone || (r.Body == http1.BodyLength && r.ContentLength == 0))
	if err := hs.c.codec.RespondHTTP1(hs.id, r, p, end); err != nil {
		return 0, unix.EPIPE
	}
	if r.Interim {
		return n, 0
	}
	hs.respHead = true
	hs.resp.start(r.Body, r.ContentLength)
	hs.resp.end = end
	return n, 0
}

// data sends response body bytes.
func (hs *h2Stream) data(p []byte) (int, unix.Errno) {
	n, blocked, bad := hs.resp.send(hs.c.codec, hs.id, p)
	if bad {
		return n, unix.EPROTO
	}
	if blocked {
		hs.side.blocked()
	}
	return n, 0
}

func (hs *h2Stream) push(int) {}

func (hs *h2Stream) canSplice() bool { return false }

func (hs *h2Stream) rcvPipe(int, *Pipe, int) (int, unix.Errno) { return 0, unix.EINVAL }

func (hs *h2Stream) sndPipe(int, *Pipe, int, bool) (int, unix.Errno) { return 0, unix.EINVAL }

// shutw: the response ends (a body delimited by the server's close).
func (hs *h2Stream) shutw(int) unix.Errno {
	if hs.respHead && !hs.resetByPeer && hs.c.codec != nil {
		hs.resp.finish(hs.c.codec, hs.id)
	}
	return 0
}

func (hs *h2Stream) close(int, bool) {}

func (hs *h2Stream) rcvEvents() uint32 { return evIn | evErr | evHup }

func (hs *h2Stream) sndEvents() uint32 { return evOut | evErr | evHup }

// rcvPending: body bytes (or the body's end) wait, so a short read must
// not clear the readiness: nothing else will set it again.
func (hs *h2Stream) rcvPending() bool { return hs.req.rcvPending() }

func (hs *h2Stream) rcvCost(n int) int { return n }

func (hs *h2Stream) secure() bool { return hs.c.cli.xp.secure() }

func (hs *h2Stream) peerSubject() string { return hs.c.cli.xp.peerSubject() }

func (hs *h2Stream) serverName() string { return hs.c.cli.xp.serverName() }

func (hs *h2Stream) afterConnect(*Side, connectStep) bool { return false }
