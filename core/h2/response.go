package h2

import (
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// Field is a response or trailer field as the caller holds it: bytes of
// its own buffer, read only during the call. Names are lowercased when
// encoded.
type Field struct {
	Name, Value []byte
}

// bytesOf views s as bytes without copying; the result is only read.
func bytesOf(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// stringOf views b as a string without copying, for the HPACK encoder,
// which keeps nothing (its dynamic table is 0) past WriteField.
func stringOf(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }

// connectionSpecific: fields HTTP/2 does not carry (RFC 9113 §8.2.2).
func connectionSpecific(name []byte) bool {
	switch string(name) { // compared in place, no allocation
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade", "te", "trailer":
		return true
	}
	return false
}

// encodeField lowercases name and adds the field to the block being
// built, unless it is connection-specific or not a valid field.
func (c *Conn) encodeField(name, value []byte) {
	c.lname = c.lname[:0]
	for _, b := range name {
		if b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		c.lname = append(c.lname, b)
	}
	if len(c.lname) == 0 || c.lname[0] == ':' || connectionSpecific(c.lname) ||
		!http1.IsToken(c.lname) || !http1.ValidFieldValue(value) {
		return
	}
	_ = c.enc.WriteField(hpack.HeaderField{Name: stringOf(c.lname), Value: stringOf(value)})
}

func (c *Conn) encodeStatus(status int) {
	d := &c.status // in the Conn: a local array would escape through the encoder
	d[0] = byte('0' + status/100)
	d[1] = byte('0' + status/10%10)
	d[2] = byte('0' + status%10)
	_ = c.enc.WriteField(hpack.HeaderField{Name: ":status", Value: stringOf(d[:])})
}

// appendFrameHeader appends a frame header to the output.
func (c *Conn) appendFrameHeader(length int, typ http2.FrameType, flags http2.Flags, id uint32) {
	c.out = append(c.out, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// writeBlock sends the block built in eblock as HEADERS and as many
// CONTINUATION frames as the peer's SETTINGS_MAX_FRAME_SIZE requires.
// Written here rather than by the Framer: it copies once, into Output.
func (c *Conn) writeBlock(id uint32, endStream bool) {
	block := c.eblock
	maxF := int(c.peerMaxFrame)
	typ := http2.FrameHeaders
	for {
		n := min(len(block), maxF)
		var flags http2.Flags
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders
		}
		if typ == http2.FrameHeaders && endStream {
			flags |= http2.FlagHeadersEndStream
		}
		c.appendFrameHeader(n, typ, flags, id)
		c.out = append(c.out, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			break
		}
		typ = http2.FrameContinuation
	}
	c.eblock = c.eblock[:0]
}

// sendable returns the stream if a response frame may be sent on it.
func (c *Conn) sendable(id uint32) (*stream, error) {
	if c.state == stateFailed {
		return nil, c.err
	}
	st := c.stream(id)
	if st == nil || st.localClosed {
		return nil, ErrStreamClosed
	}
	return st, nil
}

// Respond sends a response head: status and fields, connection-specific
// fields dropped (RFC 9113 §8.2.2), names lowercased. A 1xx other than
// 101 may come before the final response; endStream says no body
// follows.
func (c *Conn) Respond(id uint32, status int, fields []Field, endStream bool) error {
	st, err := c.sendable(id)
	if err != nil {
		return err
	}
	if err := c.responseState(st, status, endStream); err != nil {
		return err
	}
	c.eblock = c.eblock[:0]
	c.encodeStatus(status)
	for i := range fields {
		c.encodeField(fields[i].Name, fields[i].Value)
	}
	c.endResponse(st, status, endStream)
	return nil
}

// RespondHTTP1 sends the head of an HTTP/1.1 response r parsed from buf:
// its status and its end-to-end fields (r.HopByHop ones dropped: Connection
// and what it names, Keep-Alive, Transfer-Encoding, Upgrade, TE, Trailer).
// The caller re-frames the body as DATA (a chunked body decoded first).
func (c *Conn) RespondHTTP1(id uint32, r *http1.Response, buf []byte, endStream bool) error {
	st, err := c.sendable(id)
	if err != nil {
		return err
	}
	if err := c.responseState(st, r.Status, endStream); err != nil {
		return err
	}
	c.eblock = c.eblock[:0]
	c.encodeStatus(r.Status)
	for i := 0; i < r.N; i++ {
		if r.HopByHop(buf, i, 0) {
			continue
		}
		c.encodeField(r.Name(buf, i), r.Value(buf, i))
	}
	c.endResponse(st, r.Status, endStream)
	return nil
}

func (c *Conn) responseState(st *stream, status int, endStream bool) error {
	switch {
	case st.respHead, status < 100, status > 999, status == 101, status < 200 && endStream:
		return ErrResponseState
	}
	return nil
}

func (c *Conn) endResponse(st *stream, status int, endStream bool) {
	id := st.id
	c.writeBlock(id, endStream)
	if status >= 200 {
		st.respHead = true
	}
	if endStream {
		c.endLocal(st)
	}
}

// SendTrailers ends a response body with trailer fields (no pseudo-header
// fields; connection-specific ones dropped).
func (c *Conn) SendTrailers(id uint32, fields []Field) error {
	st, err := c.sendable(id)
	if err != nil {
		return err
	}
	if !st.respHead {
		return ErrResponseState
	}
	c.eblock = c.eblock[:0]
	for i := range fields {
		c.encodeField(fields[i].Name, fields[i].Value)
	}
	c.writeBlock(id, true)
	c.endLocal(st)
	return nil
}

// SendData sends up to len(p) bytes of response body on stream id as DATA
// frames no larger than the peer's SETTINGS_MAX_FRAME_SIZE, within the
// stream's and the connection's send windows, and returns how many it
// took (copied into Output). endStream ends the stream once all of p is
// taken (an empty p with endStream sends an empty DATA with END_STREAM).
// When it takes less than len(p) the stream is blocked: WindowOpened
// says when to offer the rest, SendStalledSince since when it waits. It
// takes nothing from a stream that is closed, reset or has no response
// head yet. What it takes is copied into Output at once: offer what the
// socket can take (a window may be up to 2 GiB), e.g. only while Output
// is shorter than a buffer.
func (c *Conn) SendData(id uint32, p []byte, endStream bool) int {
	st, err := c.sendable(id)
	if err != nil || !st.respHead {
		return 0
	}
	w := min(st.sendWindow, c.sendWindow)
	n := int(min(int64(len(p)), max(w, 0)))
	maxF := int(c.peerMaxFrame)
	done := endStream && n == len(p)
	if n == 0 && done {
		c.appendFrameHeader(0, http2.FrameData, http2.FlagDataEndStream, id)
	}
	for off := 0; off < n; {
		k := min(n-off, maxF)
		var flags http2.Flags
		if done && off+k == n {
			flags = http2.FlagDataEndStream
		}
		c.appendFrameHeader(k, http2.FrameData, flags, id)
		c.out = append(c.out, p[off:off+k]...)
		off += k
	}
	st.sendWindow -= int64(n)
	c.sendWindow -= int64(n)
	if n < len(p) {
		st.blocked = true
		now := time.Time{}
		if st.stalledSince.IsZero() {
			now = c.cfg.Now()
			st.stalledSince = now
		}
		if c.sendWindow <= 0 && c.connStalledSince.IsZero() {
			if now.IsZero() {
				now = c.cfg.Now()
			}
			c.connStalledSince = now
		}
	}
	if done {
		c.endLocal(st)
	}
	return n
}

// endLocal follows our END_STREAM on st: the stream closes if the request
// had ended too; if its body is still coming, RST_STREAM NO_ERROR asks
// the client to stop sending it (RFC 9113 §8.1, as Go's server does), the
// DATA in flight is ignored and what was not consumed goes back to the
// connection. Either way no Handler call names the stream any more.
func (c *Conn) endLocal(st *stream) {
	st.localClosed = true
	if st.remoteClosed {
		c.remove(st, closedNormally)
		return
	}
	c.sendRST(st.id, http2.ErrCodeNo)
}
