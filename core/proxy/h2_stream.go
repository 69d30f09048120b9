package proxy

import (
	"bytes"
	"strconv"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/h2"
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
	// body: request DATA payload not yet read by the stream, at most the
	// stream's window; off: what of it was read.
	body []byte
	off  int
	// trailers: the chunked body's end (last chunk, trailer fields, empty
	// line), written once the client's trailers (or END_STREAM) came.
	trailers []byte
	// chunk: bytes of the current chunk not read yet (chunked bodies);
	// chunkEnd: its CRLF is still to be read.
	chunk    int
	headErr  int // a proxy answer the head gets instead of being routed (431)
	chunked  bool
	chunkEnd bool
	reqEnd   bool // the client's END_STREAM came
	lastSent bool // the last chunk and trailers were read (chunked)

	// The response, as the stream writes it.
	respHead    bool  // the final head was sent (HEADERS)
	respEnd     bool  // END_STREAM sent
	respKind    uint8 // http1.Body of the response
	respLeft    int64 // Content-Length bytes still to send
	dec         http1.Chunked
	tail        []byte // framing since the last chunk data: the trailer section at the end
	wantOut     bool   // waits for the connection's output to drain
	resetByPeer bool   // the codec forgot the stream: nothing more is sent on it
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
	c.flush()
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
	body, trailers, tail := hs.body[:0], hs.trailers[:0], hs.tail[:0]
	task := hs.side.Task
	*hs = h2Stream{body: body, trailers: trailers, tail: tail}
	hs.side.Task = task
	hs.side.Task.Owner = hs
	if cap(body) > 1<<20 {
		hs.body = nil // a large window's buffer is not kept
	}
	if len(w.h.freeH2) < maxFreeConns {
		w.h.freeH2 = append(w.h.freeH2, hs)
	}
}

// pending is the request payload received and not read by the stream.
func (hs *h2Stream) pending() int { return len(hs.body) - hs.off }

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
// chunks; EAGAIN while the client has not sent more; never an end of
// stream (the body ends by its framing).
func (hs *h2Stream) rcvBuf(_ int, p []byte) (int, unix.Errno) {
	if !hs.chunked {
		n := copy(p, hs.body[hs.off:])
		hs.consume(n)
		if n == 0 {
			return 0, unix.EAGAIN
		}
		return n, 0
	}
	d := p[:0]
	for {
		switch {
		case hs.chunk > 0:
			k := min(hs.chunk, len(p)-len(d), hs.pending())
			if k == 0 {
				break
			}
			d = append(d, hs.body[hs.off:hs.off+k]...)
			hs.chunk -= k
			hs.consume(k)
			continue
		case hs.chunkEnd:
			if len(p)-len(d) < 2 {
				break
			}
			d = append(d, "\r\n"...)
			hs.chunkEnd = false
			continue
		case hs.pending() > 0:
			if len(p)-len(d) < 20 {
				break
			}
			hs.chunk = min(hs.pending(), len(p)-len(d)-12)
			hs.chunkEnd = true
			d = strconv.AppendInt(d, int64(hs.chunk), 16)
			d = append(d, "\r\n"...)
			continue
		case hs.reqEnd && !hs.lastSent:
			if len(hs.trailers) == 0 {
				hs.trailers = append(hs.trailers, "0\r\n\r\n"...)
			}
			if len(p)-len(d) < len(hs.trailers) {
				if len(d) == 0 {
					return 0, unix.EMSGSIZE // cannot happen: trailers are bounded below a buffer
				}
				break
			}
			d = append(d, hs.trailers...)
			hs.lastSent = true
		}
		break
	}
	if len(d) == 0 {
		return 0, unix.EAGAIN
	}
	return len(d), 0
}

// consume gives n payload bytes read back to the client's window.
func (hs *h2Stream) consume(n int) {
	if n == 0 {
		return
	}
	hs.off += n
	if hs.off == len(hs.body) {
		hs.body, hs.off = hs.body[:0], 0
	}
	if hs.c.codec != nil {
		hs.c.codec.Consumed(hs.id, n)
	}
}

// sndBuf takes HTTP/1.1 response bytes from the stream: the head (and
// interim heads) become HEADERS, the body DATA within the client's
// windows, a chunked body's trailers trailing HEADERS. It returns what it
// took, EAGAIN when the window or the connection's output is full.
func (hs *h2Stream) sndBuf(_ int, p []byte, _ bool) (int, unix.Errno) {
	c := hs.c
	if hs.resetByPeer || c.codec == nil || hs.respEnd {
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
	if taken == len(p) || hs.respEnd {
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
	hs.respEnd = end
	hs.respKind = uint8(r.Body)
	hs.respLeft = r.ContentLength
	if r.Body == http1.BodyChunked {
		hs.dec.Reset()
	}
	return n, 0
}

// data sends response body bytes.
func (hs *h2Stream) data(p []byte) (int, unix.Errno) {
	codec := hs.c.codec
	switch http1.Body(hs.respKind) {
	case http1.BodyLength:
		k := int(min(int64(len(p)), hs.respLeft))
		n := codec.SendData(hs.id, p[:k], int64(k) == hs.respLeft)
		hs.respLeft -= int64(n)
		if hs.respLeft == 0 {
			hs.respEnd = true
		}
		if n < k {
			hs.side.blocked()
		}
		return n, 0
	case http1.BodyChunked:
		return hs.chunkedData(p)
	default: // until close: shutw ends it
		n := codec.SendData(hs.id, p, false)
		if n < len(p) {
			hs.side.blocked()
		}
		return n, 0
	}
}

// chunkedData decodes a chunked response body: its data go out as DATA,
// its trailer section as trailing HEADERS (or an empty DATA with
// END_STREAM when it has no field).
func (hs *h2Stream) chunkedData(p []byte) (int, unix.Errno) {
	codec := hs.c.codec
	taken := 0
	for taken < len(p) && !hs.dec.Done() {
		n, data, err := hs.dec.Decode(p[taken:])
		if err != nil {
			return taken, unix.EPROTO
		}
		if n == 0 {
			break
		}
		frame := n - data
		if data > 0 {
			hs.tail = hs.tail[:0]
			sent := codec.SendData(hs.id, p[taken+frame:taken+n], false)
			if sent < data {
				// the window took part of this run: the rest is offered
				// again when it opens
				hs.dec.Unread(data - sent)
				hs.side.blocked()
				return taken + frame + sent, 0
			}
		} else {
			hs.tail = append(hs.tail, p[taken:taken+frame]...)
		}
		taken += n
	}
	if hs.dec.Done() {
		hs.sendTrailers()
	}
	return taken, 0
}

// sendTrailers ends the response with the trailer fields of the chunked
// body's end (hs.tail: the data's CRLF, the last chunk line, the fields,
// the empty line; validated by the decoder).
func (hs *h2Stream) sendTrailers() {
	codec := hs.c.codec
	hs.respEnd = true
	t := hs.tail
	// Skip to the line after the last chunk's size line.
	for len(t) > 0 {
		i := bytes.IndexByte(t, '\n')
		if i < 0 {
			break
		}
		line := t[:i]
		t = t[i+1:]
		if len(line) > 0 && line[0] == '0' {
			break
		}
	}
	var fields [16]h2.Field
	nf := 0
	for len(t) > 0 && nf < len(fields) {
		i := bytes.IndexByte(t, '\n')
		if i < 0 {
			break
		}
		line := bytes.TrimSuffix(t[:i], []byte{'\r'})
		t = t[i+1:]
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			continue
		}
		fields[nf] = h2.Field{Name: line[:colon], Value: bytes.Trim(line[colon+1:], " \t")}
		nf++
	}
	if nf == 0 || codec.SendTrailers(hs.id, fields[:nf]) != nil {
		codec.SendData(hs.id, nil, true)
	}
}

func (hs *h2Stream) push(int) {}

func (hs *h2Stream) canSplice() bool { return false }

func (hs *h2Stream) rcvPipe(int, *Pipe, int) (int, unix.Errno) { return 0, unix.EINVAL }

func (hs *h2Stream) sndPipe(int, *Pipe, int, bool) (int, unix.Errno) { return 0, unix.EINVAL }

// shutw: the response ends (a body delimited by the server's close).
func (hs *h2Stream) shutw(int) unix.Errno {
	if !hs.respEnd && hs.respHead && !hs.resetByPeer && hs.c.codec != nil {
		hs.c.codec.SendData(hs.id, nil, true)
		hs.respEnd = true
	}
	return 0
}

func (hs *h2Stream) close(int, bool) {}

func (hs *h2Stream) rcvEvents() uint32 { return evIn | evErr | evHup }

func (hs *h2Stream) sndEvents() uint32 { return evOut | evErr | evHup }

// rcvPending: body bytes (or the body's end) wait, so a short read must
// not clear the readiness: nothing else will set it again.
func (hs *h2Stream) rcvPending() bool {
	return hs.pending() > 0 || (hs.chunked && hs.reqEnd && !hs.lastSent) || hs.chunkEnd
}

func (hs *h2Stream) rcvCost(n int) int { return n }

func (hs *h2Stream) secure() bool { return hs.c.cli.xp.secure() }

func (hs *h2Stream) peerSubject() string { return hs.c.cli.xp.peerSubject() }

func (hs *h2Stream) serverName() string { return hs.c.cli.xp.serverName() }

func (hs *h2Stream) afterConnect(*Side, connectStep) bool { return false }
