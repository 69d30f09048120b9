package h2

// The HPACK encoder of what we send (response heads and trailers to
// clients, request heads to servers): RFC 7541 without a dynamic table
// and without Huffman coding, as HAProxy's hpack-enc.c. Each field is
//
//   - an indexed field (§6.1) when the static table holds it whole
//     (:status 200, :method GET...);
//   - else a literal without indexing (§6.2.2), its name by its static
//     table index when the table has it, its strings raw (§5.2, H=0).
//
// x/net's Encoder did the same but looked both tables up in maps (a
// string hash per field) and Huffman-coded every string: on the h2 bench
// row (nine nginx response fields) they were 5% of the proxy's CPU, for
// about 50 bytes saved per response head that the client reads off the
// loopback anyway. Nothing goes through a table, so nothing of the
// caller's buffers is kept past a call, and the peer's decoder table,
// which we never use, is set to 0 by the first block (§6.3), as x/net's
// Encoder did with a table limit of 0.

// hpackEncoder is the per-connection state of the encoder.
type hpackEncoder struct {
	sizeSent bool // the dynamic table size update to 0 went out
}

// writeField appends the field name: value to the block being built
// (c.eblock). name is lowercase.
func (c *connCore) writeField(name, value string) {
	b := c.eblock
	if !c.henc.sizeSent {
		c.henc.sizeSent = true
		b = append(b, 0x20) // §6.3: dynamic table size update, 0
	}
	idx, whole := staticIndex(name, value)
	switch {
	case whole:
		b = appendHpackInt(b, 0x80, 7, uint64(idx))
		c.eblock = b
		return
	case idx > 0:
		b = appendHpackInt(b, 0x00, 4, uint64(idx))
	default:
		b = append(b, 0x00)
		b = appendHpackInt(b, 0x00, 7, uint64(len(name)))
		b = append(b, name...)
	}
	b = appendHpackInt(b, 0x00, 7, uint64(len(value)))
	c.eblock = append(b, value...)
}

// appendHpackInt appends v as an HPACK integer with an n-bit prefix
// (RFC 7541 §5.1), the byte's other bits set to first.
func appendHpackInt(b []byte, first byte, n uint, v uint64) []byte {
	max := uint64(1)<<n - 1
	if v < max {
		return append(b, first|byte(v))
	}
	b = append(b, first|byte(max))
	v -= max
	for v >= 128 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// staticIndex is the index of name in the static table (RFC 7541
// Appendix A), 0 when it is not there; whole when the entry at that index
// also has value. A switch, not a map: no hashing per field.
func staticIndex(name, value string) (idx uint8, whole bool) {
	switch name {
	case ":authority":
		return 1, false
	case ":method":
		switch value {
		case "GET":
			return 2, true
		case "POST":
			return 3, true
		}
		return 2, false
	case ":path":
		switch value {
		case "/":
			return 4, true
		case "/index.html":
			return 5, true
		}
		return 4, false
	case ":scheme":
		switch value {
		case "http":
			return 6, true
		case "https":
			return 7, true
		}
		return 6, false
	case ":status":
		switch value {
		case "200":
			return 8, true
		case "204":
			return 9, true
		case "206":
			return 10, true
		case "304":
			return 11, true
		case "400":
			return 12, true
		case "404":
			return 13, true
		case "500":
			return 14, true
		}
		return 8, false
	case "accept-charset":
		return 15, false
	case "accept-encoding":
		return 16, value == "gzip, deflate"
	case "accept-language":
		return 17, false
	case "accept-ranges":
		return 18, false
	case "accept":
		return 19, false
	case "access-control-allow-origin":
		return 20, false
	case "age":
		return 21, false
	case "allow":
		return 22, false
	case "authorization":
		return 23, false
	case "cache-control":
		return 24, false
	case "content-disposition":
		return 25, false
	case "content-encoding":
		return 26, false
	case "content-language":
		return 27, false
	case "content-length":
		return 28, false
	case "content-location":
		return 29, false
	case "content-range":
		return 30, false
	case "content-type":
		return 31, false
	case "cookie":
		return 32, false
	case "date":
		return 33, false
	case "etag":
		return 34, false
	case "expect":
		return 35, false
	case "expires":
		return 36, false
	case "from":
		return 37, false
	case "host":
		return 38, false
	case "if-match":
		return 39, false
	case "if-modified-since":
		return 40, false
	case "if-none-match":
		return 41, false
	case "if-range":
		return 42, false
	case "if-unmodified-since":
		return 43, false
	case "last-modified":
		return 44, false
	case "link":
		return 45, false
	case "location":
		return 46, false
	case "max-forwards":
		return 47, false
	case "proxy-authenticate":
		return 48, false
	case "proxy-authorization":
		return 49, false
	case "range":
		return 50, false
	case "referer":
		return 51, false
	case "refresh":
		return 52, false
	case "retry-after":
		return 53, false
	case "server":
		return 54, false
	case "set-cookie":
		return 55, false
	case "strict-transport-security":
		return 56, false
	case "transfer-encoding":
		return 57, false
	case "user-agent":
		return 58, false
	case "vary":
		return 59, false
	case "via":
		return 60, false
	case "www-authenticate":
		return 61, false
	}
	return 0, false
}
