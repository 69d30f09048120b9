package proxy

import (
	"bytes"
	"strconv"

	"github.com/spliced-proxy/spliced/core/h2"
	"github.com/spliced-proxy/spliced/core/http1"
)

// The two conversions between an HTTP/1.1 message body, as a stream
// reads or writes it, and an HTTP/2 stream's DATA frames and trailers,
// shared by both ends where HTTP/2 meets a stream: a client's HTTP/2
// stream (h2_stream.go: the request body in, the response body out) and a
// server's (h2_server.go: the request body out, the response body in).

// h2Sink is the side of an HTTP/2 codec a body is sent on: h2.Conn (to
// a client) and h2.ClientConn (to a server) alike.
type h2Sink interface {
	// SendData takes up to len(p) bytes within the windows (see
	// h2.Conn.SendData); endStream ends the stream once all of p is taken.
	SendData(id uint32, p []byte, endStream bool) int
	SendTrailers(id uint32, fields []h2.Field) error
}

// h1Out sends an HTTP/1.1 body, framed as its head said, as DATA frames:
// a Content-Length body as it comes, a chunked one decoded (its chunk data
// as DATA, its trailer section as trailing HEADERS), one delimited by the
// close until the caller ends it (finish).
type h1Out struct {
	dec  http1.Chunked
	tail []byte // framing since the last chunk data: the trailer section at the end
	left int64  // BodyLength: bytes still to send
	kind http1.Body
	end  bool // END_STREAM sent
}

// start prepares the body of a head just sent without END_STREAM.
func (o *h1Out) start(kind http1.Body, cl int64) {
	o.kind, o.left, o.end = kind, cl, false
	o.tail = o.tail[:0]
	if kind == http1.BodyChunked {
		o.dec.Reset()
	}
}

// send takes body bytes from p and sends them on stream id of k. It
// returns what it took and whether a window stopped it (the rest waits
// for the window to open); bad is a chunked body whose framing broke.
func (o *h1Out) send(k h2Sink, id uint32, p []byte) (taken int, blocked, bad bool) {
	switch o.kind {
	case http1.BodyLength:
		n := int(min(int64(len(p)), o.left))
		sent := k.SendData(id, p[:n], int64(n) == o.left)
		o.left -= int64(sent)
		o.end = o.left == 0
		return sent, sent < n, false
	case http1.BodyChunked:
		return o.chunked(k, id, p)
	default: // until close: finish ends it
		sent := k.SendData(id, p, false)
		return sent, sent < len(p), false
	}
}

// chunked decodes a chunked body: its data go out as DATA, its trailer
// section as trailing HEADERS (or an empty DATA with END_STREAM when it
// has no field).
func (o *h1Out) chunked(k h2Sink, id uint32, p []byte) (taken int, blocked, bad bool) {
	for taken < len(p) && !o.dec.Done() {
		n, data, err := o.dec.Decode(p[taken:])
		if err != nil {
			return taken, false, true
		}
		if n == 0 {
			break
		}
		frame := n - data
		if data > 0 {
			o.tail = o.tail[:0]
			sent := k.SendData(id, p[taken+frame:taken+n], false)
			if sent < data {
				// the window took part of this run: the rest is offered
				// again when it opens
				o.dec.Unread(data - sent)
				return taken + frame + sent, true, false
			}
		} else {
			o.tail = append(o.tail, p[taken:taken+frame]...)
		}
		taken += n
	}
	if o.dec.Done() && !o.end {
		o.sendTrailers(k, id)
	}
	return taken, false, false
}

// sendTrailers ends the body with the trailer fields of the chunked
// body's end (o.tail: the data's CRLF, the last chunk line, the fields,
// the empty line; validated by the decoder).
func (o *h1Out) sendTrailers(k h2Sink, id uint32) {
	o.end = true
	t := o.tail
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
	if nf == 0 || k.SendTrailers(id, fields[:nf]) != nil {
		k.SendData(id, nil, true)
	}
}

// finish ends a body delimited by the close (an empty DATA with
// END_STREAM), unless it ended already.
func (o *h1Out) finish(k h2Sink, id uint32) {
	if !o.end {
		k.SendData(id, nil, true)
		o.end = true
	}
}

// h2In gives an HTTP/2 stream's DATA payload, received and queued in
// body, to a stream as HTTP/1.1 body bytes: as it came (the head had a
// content-length), or framed in chunks, then the last chunk and the
// trailer section (trailers) once the HTTP/2 stream ended.
type h2In struct {
	// body: payload not read yet from off; at most the stream's window.
	body []byte
	off  int
	// trailers: the chunked body's end (last chunk, trailer fields, empty
	// line), written once the peer's trailers (or END_STREAM) came.
	trailers []byte
	// chunk: bytes of the current chunk not read yet (chunked bodies);
	// chunkEnd: its CRLF is still to be read.
	chunk    int
	chunked  bool
	chunkEnd bool
	end      bool // the peer's END_STREAM came
	lastSent bool // the last chunk and trailers were read (chunked)
}

// pending is the payload received and not read yet.
func (b *h2In) pending() int { return len(b.body) - b.off }

// rcvPending: body bytes (or the body's end) wait to be read.
func (b *h2In) rcvPending() bool {
	return b.pending() > 0 || (b.chunked && b.end && !b.lastSent) || b.chunkEnd
}

// reset clears b for the next stream, keeping its storage unless large.
func (b *h2In) reset() {
	body, trailers := b.body[:0], b.trailers[:0]
	if cap(body) > 1<<20 {
		body = nil // a large window's buffer is not kept
	}
	*b = h2In{body: body, trailers: trailers}
}

// read fills p with body bytes; payload is how many of them were DATA
// payload (the rest chunk framing), to be given back to the peer's
// window. n is 0 when nothing is ready.
func (b *h2In) read(p []byte) (n, payload int) {
	if !b.chunked {
		n = copy(p, b.body[b.off:])
		b.consume(n)
		return n, n
	}
	d := p[:0]
	for {
		switch {
		case b.chunk > 0:
			k := min(b.chunk, len(p)-len(d), b.pending())
			if k == 0 {
				break
			}
			d = append(d, b.body[b.off:b.off+k]...)
			b.chunk -= k
			b.consume(k)
			payload += k
			continue
		case b.chunkEnd:
			if len(p)-len(d) < 2 {
				break
			}
			d = append(d, "\r\n"...)
			b.chunkEnd = false
			continue
		case b.pending() > 0:
			if len(p)-len(d) < 20 {
				break
			}
			b.chunk = min(b.pending(), len(p)-len(d)-12)
			b.chunkEnd = true
			d = strconv.AppendInt(d, int64(b.chunk), 16)
			d = append(d, "\r\n"...)
			continue
		case b.end && !b.lastSent:
			if len(b.trailers) == 0 {
				b.trailers = append(b.trailers, "0\r\n\r\n"...)
			}
			if len(p)-len(d) < len(b.trailers) {
				break // trailers are bounded below a buffer: the next read takes them
			}
			d = append(d, b.trailers...)
			b.lastSent = true
		}
		break
	}
	return len(d), payload
}

func (b *h2In) consume(n int) {
	b.off += n
	switch {
	case b.off == len(b.body):
		b.body, b.off = b.body[:0], 0
	case b.off >= len(b.body)-b.off:
		// A reader that always lags (bytes pending at every read) never
		// empties body: without this, the next append would keep the
		// read bytes too, and body would grow by all the stream ever
		// carried. Moving the pending part down when the read part is
		// at least as long costs each byte one copy at most.
		k := copy(b.body, b.body[b.off:])
		b.body, b.off = b.body[:k], 0
	}
}
