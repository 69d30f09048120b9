package h2

import (
	"unsafe"

	"golang.org/x/net/http2"

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

func (c *Conn) encodeStatus(status int) {
	var d [3]byte
	d[0] = byte('0' + status/100)
	d[1] = byte('0' + status/10%10)
	d[2] = byte('0' + status%10)
	c.writeField(":status", stringOf(d[:]))
}

// sendable returns the stream if a response frame may be sent on it.
func (c *Conn) sendable(id uint32) (*stream, error) {
	if c.err != nil {
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
		c.encodeField(fields[i].Name, fields[i].Value, false)
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
		c.encodeField(r.Name(buf, i), r.Value(buf, i), false)
	}
	c.endResponse(st, r.Status, endStream)
	return nil
}

func (c *Conn) responseState(st *stream, status int, endStream bool) error {
	switch {
	case st.sentHead, status < 100, status > 999, status == 101, status < 200 && endStream:
		return ErrResponseState
	}
	return nil
}

func (c *Conn) endResponse(st *stream, status int, endStream bool) {
	id := st.id
	c.writeBlock(id, endStream)
	if status >= 200 {
		st.sentHead = true
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
	if !st.sentHead {
		return ErrResponseState
	}
	c.eblock = c.eblock[:0]
	for i := range fields {
		c.encodeField(fields[i].Name, fields[i].Value, false)
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
	if err != nil || !st.sentHead {
		return 0
	}
	n, done := c.sendData(st, p, endStream)
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
