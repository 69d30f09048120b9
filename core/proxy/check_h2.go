package proxy

import (
	"encoding/binary"
	"slices"

	"golang.org/x/net/http2"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/h2"
)

// HTTP/2 health checks (servers with proto h2: balance.Server.H2)
//
// An http check of an h2 server speaks HTTP/2 as the proxy's own
// connections to it do: h2c with prior knowledge on a clear connection, h2
// over TLS (the server's tls.Config offers ALPN "h2" alone and refuses a
// server that does not select it: core/tlsconf.Client, so such a server
// fails the handshake, "tls handshake: tlsconf: server did not select
// h2 ..."). What it sends is built once per server, as the HTTP/1.1
// request is, by core/h2's ClientConn (the encoder the data plane uses):
// the connection preface, SETTINGS, and one HEADERS frame with END_STREAM
// on stream 1 (:method, :scheme http or https, :authority, :path from the
// check's method, path and host as for HTTP/1.1, and user-agent:
// spliced-check). Its encoder uses no dynamic table, so the same bytes are
// valid on every new connection.
//
// The answer is read by h2CheckReader, a byte-level state machine with
// fixed buffers, so an h2 probe cycle allocates nothing either: frames
// are walked by their 9-byte headers, their payloads skipped, except
// those of stream 1's response header block (HEADERS, CONTINUATION:
// the start of the block is kept), RST_STREAM and GOAWAY. The response's
// first field must be :status (RFC 9113 §8.3: pseudo-header fields come
// first, and a response has only that one), decoded from the HPACK block
// without a decoder: a static-table entry (200, 204, 206, 304, 400, 404,
// 500) or a literal whose name is :status, its value raw or Huffman-coded
// digits. The status decides as for HTTP/1.1 (status_min..status_max);
// interim 1xx heads are read past.
//
// Failures (all L7RSP, with their reason):
//   - the first frame is not SETTINGS, or is longer than our
//     SETTINGS_MAX_FRAME_SIZE: "not an HTTP/2 server" — what an
//     HTTP/1.1-only server answers the preface with ("HTTP/1.1 400 ...",
//     read as a frame header, is a 4 MB frame of type 'P');
//   - a later frame longer than that, a header block interrupted or
//     frames out of order: "HTTP/2 protocol error";
//   - a header block whose first field is not a :status of three digits:
//     "malformed HTTP/2 response headers";
//   - RST_STREAM on stream 1: "stream reset by the server (CODE)";
//   - GOAWAY that leaves stream 1 unprocessed (last stream id 0):
//     "GOAWAY from the server (CODE)"; a GOAWAY that covers it (a
//     graceful shutdown's first) is read past, the answer still comes.
//
// The probe never acknowledges the server's SETTINGS nor answers a PING:
// it closes the connection once the status is read, within timeout_ms,
// and RFC 9113 leaves the SETTINGS timeout to "a reasonable time".

// h2CheckMaxFrame is the largest frame payload an h2 probe accepts: the
// SETTINGS_MAX_FRAME_SIZE its SETTINGS frame advertises (core/h2's default,
// the RFC's minimum).
const h2CheckMaxFrame = h2.DefaultMaxFrameSize

// h2CheckBlock is how much of the response header block a probe keeps:
// the first field (:status), after any dynamic table size updates, fits
// in far less.
const h2CheckBlock = 64

// h2CheckReadBuf is how much a probe reads from the socket at once.
const h2CheckReadBuf = 1024

// Kinds of resH2 (probe.resVal).
const (
	h2ChkNotH2     = iota + 1 // first frame not SETTINGS, or too long
	h2ChkProtocol             // frame too long, out of order
	h2ChkMalformed            // no :status of three digits first
	h2ChkRequest              // the check cannot be an HTTP/2 request
)

// checkRequestH2 is the h2 check of hc for s, built once: the client
// preface, SETTINGS and the request's HEADERS (see the top of this file).
// nil when the check cannot be expressed in HTTP/2 (method CONNECT).
func checkRequestH2(hc *config.HealthCheck, s *balance.Server) []byte {
	scheme := "http"
	if s.TLS != nil {
		scheme = "https"
	}
	c := h2.NewClientConn(h2.ClientConfig{
		Scheme: scheme,
		// No WINDOW_UPDATE: the probe reads nothing of a body.
		Config: h2.Config{Limits: h2.Limits{ConnWindowSize: 65535}},
	}, nil)
	ua := h2.Field{Name: []byte("user-agent"), Value: []byte("spliced-check")}
	if _, err := c.OpenStream(hc.Method, checkHost(hc, s), hc.Path, []h2.Field{ua}, true); err != nil {
		return nil
	}
	return slices.Clone(c.Output())
}

// h2CheckReader reads an HTTP/2 server's answer to a check's request up to
// the response's :status. Its zero value is ready; reset makes it so again
// for the next probe. Loop thread only.
type h2CheckReader struct {
	hdr    [9]byte
	nh     int // bytes of hdr read
	left   int // payload bytes of the current frame not read yet
	length int // the current frame's payload length
	typ    http2.FrameType
	flags  http2.Flags
	stream uint32
	frames int // frames whose header was read

	// Stream 1's response header block: skip is what precedes the
	// fragment in this frame's payload (pad length, priority), pad the
	// padding after it; inBlock says CONTINUATION must follow.
	skip, pad int
	inBlock   bool
	blk       [h2CheckBlock]byte
	nb        int
	// ctl holds the start of an RST_STREAM or GOAWAY payload.
	ctl [8]byte
	nc  int

	rbuf [h2CheckReadBuf]byte
}

func (r *h2CheckReader) reset() {
	r.nh, r.left, r.frames, r.inBlock, r.nb, r.nc = 0, 0, 0, false, 0, 0
}

// feed reads b, the next bytes from the server. It returns done when the
// answer is known: the final response's status (res resStatus), or a
// failure (res resH2, resH2Reset or resH2GoAway, with val).
func (r *h2CheckReader) feed(b []byte) (done bool, res uint8, val int) {
	for len(b) > 0 {
		if r.nh < len(r.hdr) {
			n := copy(r.hdr[r.nh:], b)
			r.nh += n
			b = b[n:]
			if r.nh < len(r.hdr) {
				return false, 0, 0
			}
			if done, res, val = r.frameHeader(); done {
				return
			}
			if r.left == 0 {
				if done, res, val = r.frameEnd(); done {
					return
				}
			}
			continue
		}
		n := min(r.left, len(b))
		r.payload(b[:n])
		b = b[n:]
		r.left -= n
		if r.left == 0 {
			if done, res, val = r.frameEnd(); done {
				return
			}
		}
	}
	return false, 0, 0
}

// frameHeader starts the frame whose header hdr holds.
func (r *h2CheckReader) frameHeader() (bool, uint8, int) {
	h := &r.hdr
	r.length = int(h[0])<<16 | int(h[1])<<8 | int(h[2])
	r.typ, r.flags = http2.FrameType(h[3]), http2.Flags(h[4])
	r.stream = binary.BigEndian.Uint32(h[5:9]) & (1<<31 - 1)
	r.left, r.skip, r.pad, r.nc = r.length, 0, 0, 0
	r.frames++
	if r.frames == 1 && (r.typ != http2.FrameSettings || r.flags.Has(http2.FlagSettingsAck) || r.length > h2CheckMaxFrame) {
		// RFC 9113 §3.4: the server's preface is a SETTINGS frame.
		return true, resH2, h2ChkNotH2
	}
	if r.length > h2CheckMaxFrame {
		return true, resH2, h2ChkProtocol
	}
	if r.inBlock != (r.typ == http2.FrameContinuation) || r.inBlock && r.stream != 1 {
		return true, resH2, h2ChkProtocol // §6.10: nothing between the block's frames
	}
	if r.typ == http2.FrameHeaders && r.stream == 1 {
		r.nb = 0
		if r.flags.Has(http2.FlagHeadersPadded) {
			r.skip = 1 // the pad length, read in payload
		}
		if r.flags.Has(http2.FlagHeadersPriority) {
			r.skip += 5
		}
		if r.skip > r.length {
			return true, resH2, h2ChkProtocol
		}
	}
	return false, 0, 0
}

// payload reads p, the next bytes of the current frame's payload.
func (r *h2CheckReader) payload(p []byte) {
	switch {
	case r.stream == 1 && (r.typ == http2.FrameHeaders || r.typ == http2.FrameContinuation):
		at := r.length - r.left // offset of p[0] in the payload
		for i, c := range p {
			off := at + i
			switch {
			case r.typ == http2.FrameHeaders && off < r.skip:
				if off == 0 && r.flags.Has(http2.FlagHeadersPadded) {
					r.pad = int(c)
				}
			case off >= r.length-r.pad:
				// padding
			case r.nb < len(r.blk):
				r.blk[r.nb] = c
				r.nb++
			}
		}
	case r.typ == http2.FrameRSTStream || r.typ == http2.FrameGoAway:
		r.nc += copy(r.ctl[r.nc:], p)
	}
}

// frameEnd: the current frame was read whole; the next one's header
// comes next.
func (r *h2CheckReader) frameEnd() (bool, uint8, int) {
	r.nh = 0
	switch r.typ {
	case http2.FrameHeaders, http2.FrameContinuation:
		if r.stream != 1 {
			return false, 0, 0
		}
		if r.typ == http2.FrameHeaders && r.skip+r.pad > r.length {
			return true, resH2, h2ChkProtocol // padding longer than the payload
		}
		r.inBlock = !r.flags.Has(http2.FlagHeadersEndHeaders)
		if r.inBlock {
			return false, 0, 0
		}
		status, ok := checkH2Status(r.blk[:r.nb])
		switch {
		case !ok:
			return true, resH2, h2ChkMalformed
		case status < 200:
			r.nb = 0 // an interim head: the final one follows
			return false, 0, 0
		}
		return true, resStatus, status
	case http2.FrameRSTStream:
		if r.stream == 1 && r.nc >= 4 {
			return true, resH2Reset, int(binary.BigEndian.Uint32(r.ctl[:4]))
		}
	case http2.FrameGoAway:
		if r.nc >= 8 && binary.BigEndian.Uint32(r.ctl[:4])&(1<<31-1) == 0 {
			return true, resH2GoAway, int(binary.BigEndian.Uint32(r.ctl[4:8]))
		}
	}
	return false, 0, 0
}

// checkStaticStatus maps the HPACK static table's :status entries (RFC 7541
// Appendix A, indices 8 to 14) to their status.
var checkStaticStatus = [...]int{8: 200, 9: 204, 10: 206, 11: 304, 12: 400, 13: 404, 14: 500}

// checkH2Status decodes the :status that must open a response header
// block (after any dynamic table size updates): ok=false when the block
// starts otherwise, or is cut short.
func checkH2Status(b []byte) (status int, ok bool) {
	for len(b) > 0 && b[0]&0xe0 == 0x20 { // dynamic table size update
		_, n := checkHpackInt(b, 5)
		if n == 0 {
			return 0, false
		}
		b = b[n:]
	}
	if len(b) == 0 {
		return 0, false
	}
	var prefix uint8
	switch c := b[0]; {
	case c&0x80 != 0: // indexed field
		idx, n := checkHpackInt(b, 7)
		if n == 0 || idx < 8 || idx > 14 {
			return 0, false
		}
		return checkStaticStatus[idx], true
	case c&0xc0 == 0x40: // literal with incremental indexing
		prefix = 6
	case c&0xf0 == 0x00, c&0xf0 == 0x10: // literal without / never indexed
		prefix = 4
	default:
		return 0, false
	}
	idx, n := checkHpackInt(b, prefix)
	if n == 0 {
		return 0, false
	}
	b = b[n:]
	var s [8]byte
	switch {
	case idx == 0: // the name as a literal
		name, rest, ok := checkHpackString(b, s[:])
		if !ok || string(name) != ":status" {
			return 0, false
		}
		b = rest
	case idx < 8 || idx > 14:
		return 0, false
	}
	v, _, ok := checkHpackString(b, s[:])
	if !ok || len(v) != 3 || v[0] < '1' || v[0] > '5' {
		return 0, false
	}
	for _, c := range v {
		if c < '0' || c > '9' {
			return 0, false
		}
		status = status*10 + int(c-'0')
	}
	return status, true
}

// checkHpackInt decodes an HPACK integer with an n-bit prefix (RFC 7541 §5.1)
// at the start of b; n=0 when b is cut short or the value is absurd (a
// status or an index needs no more than two continuation bytes; four are
// allowed).
func checkHpackInt(b []byte, prefix uint8) (v uint64, n int) {
	if len(b) == 0 {
		return 0, 0
	}
	mask := uint64(1)<<prefix - 1
	v = uint64(b[0]) & mask
	if v < mask {
		return v, 1
	}
	for i := 1; i < len(b) && i <= 4; i++ {
		v += uint64(b[i]&0x7f) << (7 * (i - 1))
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return 0, 0
}

// checkHpackString decodes a string literal (RFC 7541 §5.2) at the start of b
// into buf when it is Huffman-coded (only digits and the characters of
// ":status" are decoded: a :status needs no other), and returns it and
// what follows it; ok=false when cut short, longer than buf, or not
// decodable.
func checkHpackString(b, buf []byte) (s, rest []byte, ok bool) {
	if len(b) == 0 {
		return nil, nil, false
	}
	huff := b[0]&0x80 != 0
	l, n := checkHpackInt(b, 7)
	if n == 0 || l > uint64(len(buf)) || uint64(len(b)-n) < l {
		return nil, nil, false
	}
	raw, rest := b[n:n+int(l)], b[n+int(l):]
	if !huff {
		return raw, rest, true
	}
	s, ok = checkHuffman(raw, buf)
	return s, rest, ok
}

// checkHuffCodes are the Huffman codes (RFC 7541 Appendix B) of the
// characters a :status field may need, name and value: digits, and
// ":status" for a literal name.
var checkHuffCodes = [...]struct {
	c    byte
	code uint32
	bits uint8
}{
	{'0', 0x0, 5}, {'1', 0x1, 5}, {'2', 0x2, 5}, {'a', 0x3, 5}, {'s', 0x8, 5}, {'t', 0x9, 5},
	{'3', 0x19, 6}, {'4', 0x1a, 6}, {'5', 0x1b, 6}, {'6', 0x1c, 6}, {'7', 0x1d, 6},
	{'8', 0x1e, 6}, {'9', 0x1f, 6}, {'u', 0x2d, 6}, {':', 0x5c, 7},
}

// checkHuffman decodes raw, Huffman-coded, into buf: only the
// characters of checkHuffCodes; the padding must be the EOS prefix (1 bits,
// fewer than 8).
func checkHuffman(raw, buf []byte) ([]byte, bool) {
	var acc uint64 // bits not consumed yet, right-aligned
	var nbits uint8
	out := 0
	for i := 0; ; {
		for nbits <= 56 && i < len(raw) {
			acc = acc<<8 | uint64(raw[i])
			nbits += 8
			i++
		}
		if nbits == 0 {
			break
		}
		matched := false
		for _, hc := range checkHuffCodes {
			if hc.bits <= nbits && uint32(acc>>(nbits-hc.bits))&(1<<hc.bits-1) == hc.code {
				if out == len(buf) {
					return nil, false
				}
				buf[out] = hc.c
				out++
				nbits -= hc.bits
				acc &= 1<<nbits - 1
				matched = true
				break
			}
		}
		if !matched {
			// The rest must be padding: fewer than 8 bits, all ones.
			if i < len(raw) || nbits >= 8 || acc != 1<<nbits-1 {
				return nil, false
			}
			break
		}
	}
	return buf[:out], true
}
