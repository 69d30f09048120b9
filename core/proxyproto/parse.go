package proxyproto

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
)

// Sizes of the protocol.
const (
	// MaxV1 is the longest v1 line, CRLF included (the spec's 107: "PROXY
	// TCP6" with two full IPv6 addresses and ports).
	MaxV1 = 107
	// MaxHeader bounds a v2 header (16 bytes, addresses, TLVs). The spec
	// allows 64 KiB of TLVs; what balancers send is under 300 bytes (AWS
	// NLB: addresses and a VPC endpoint id; HAProxy with SSL TLVs: a few
	// hundred), so 4 KiB keeps every real header and bounds what a
	// connection may make the proxy read before it knows its client.
	MaxHeader = 4096
	// MaxAuthority is the longest AUTHORITY TLV kept (a DNS name).
	MaxAuthority = 255

	v2Fixed      = 16
	maxUniqueID  = 128
	addrLenInet  = 12
	addrLenInet6 = 36
	addrLenUnix  = 216
)

// v2sig is the signature that starts a v2 header.
const v2sig = "\r\n\r\n\x00\r\nQUIT\n"

// v2 command, family and transport values.
const (
	cmdLocal = 0x0
	cmdProxy = 0x1

	afUnspec = 0x0
	afInet   = 0x1
	afInet6  = 0x2
	afUnix   = 0x3

	tpUnspec = 0x0
	tpStream = 0x1
	tpDgram  = 0x2
)

// TLV types read or written.
const (
	tlvALPN      = 0x01
	tlvAuthority = 0x02
	tlvCRC32C    = 0x03
	tlvNoop      = 0x04
	tlvUniqueID  = 0x05
)

// castagnoli is the CRC32C table, and zeroCRC the CRC field as the sum
// covers it (both read only; zeroCRC is not a local array because
// crc32.Update would make it escape, an allocation per header).
var (
	castagnoli = crc32.MakeTable(crc32.Castagnoli)
	zeroCRC    = []byte{0, 0, 0, 0}
)

// Header is what a PROXY header says about the connection it starts.
// It is a value: copying it copies the authority.
type Header struct {
	// Len is the header's length in bytes: what to consume from the
	// connection before the next layer reads.
	Len int
	// Version is 1 or 2.
	Version uint8
	// Local: the header carries no client address (v2 LOCAL, a v2 PROXY
	// of family AF_UNSPEC or AF_UNIX, v1 UNKNOWN): the connection's own
	// endpoints stand (a balancer's health check, or a client the balancer
	// could not name). Src and Dst are then invalid.
	Local bool
	// Src is the client the balancer relays, Dst the address the client
	// connected to.
	Src, Dst netip.AddrPort
	alen     uint8
	auth     [MaxAuthority]byte
}

// Authority is the AUTHORITY TLV (v2: the server name the client asked
// for, its TLS SNI), lower case; nil without one.
func (h *Header) Authority() []byte {
	if h.alen == 0 {
		return nil
	}
	return h.auth[:h.alen]
}

// Parse reads the header at the start of b into h (see the package doc
// for what it accepts). On success h.Len bytes are the header; on any
// error h is left undefined.
func Parse(b []byte, h *Header) error {
	if len(b) == 0 {
		return ErrIncomplete
	}
	switch b[0] {
	case 'P':
		return parseV1(b, h)
	case '\r':
		return parseV2(b, h)
	}
	return ErrNotProxy
}

// hasPrefix: b and p agree on their common length.
func hasPrefix(b []byte, p string) bool {
	n := min(len(b), len(p))
	return string(b[:n]) == p[:n]
}

func parseV1(b []byte, h *Header) error {
	if !hasPrefix(b, "PROXY ") {
		return ErrNotProxy
	}
	end := -1
	for i := 0; i < len(b) && i < MaxV1; i++ {
		if b[i] == '\n' {
			end = i
			break
		}
	}
	if end < 0 {
		if len(b) >= MaxV1 {
			return ErrTooLarge
		}
		return ErrIncomplete
	}
	if b[end-1] != '\r' {
		return ErrMalformed
	}
	*h = Header{Len: end + 1, Version: 1}
	line := b[len("PROXY ") : end-1]
	if hasPrefix(line, "UNKNOWN") && (len(line) == 7 || len(line) > 7 && line[7] == ' ') {
		// The spec: the receiver ignores whatever follows UNKNOWN.
		h.Local = true
		return nil
	}
	// Exactly five fields, each after a single space.
	var f [5][]byte
	n := 0
	for start := 0; ; n++ {
		if n == len(f) {
			return ErrMalformed
		}
		sp := indexByte(line[start:], ' ')
		if sp < 0 {
			f[n] = line[start:]
			n++
			break
		}
		f[n] = line[start : start+sp]
		start += sp + 1
	}
	if n != len(f) {
		return ErrMalformed
	}
	var v6 bool
	switch string(f[0]) {
	case "TCP4":
	case "TCP6":
		v6 = true
	default:
		return ErrFamily
	}
	src, ok1 := textAddr(f[1], v6)
	dst, ok2 := textAddr(f[2], v6)
	sp, ok3 := textPort(f[3])
	dp, ok4 := textPort(f[4])
	if !ok1 || !ok2 || !ok3 || !ok4 {
		return ErrAddress
	}
	h.Src = netip.AddrPortFrom(src, sp)
	h.Dst = netip.AddrPortFrom(dst, dp)
	return nil
}

func indexByte(b []byte, c byte) int {
	for i := range b {
		if b[i] == c {
			return i
		}
	}
	return -1
}

// textAddr parses an IPv4 (v6 false) or IPv6 address of a v1 line
// (RFC 4291 §2.2 text forms, "::" and a trailing dotted quad included; no
// zone), without allocating, whatever the input.
func textAddr(f []byte, v6 bool) (netip.Addr, bool) {
	if len(f) == 0 || len(f) > 45 {
		return netip.Addr{}, false
	}
	if !v6 {
		return v4(f)
	}
	var a [16]byte
	n, gap := 0, -1 // bytes written; where "::" stands (byte index), -1 none
	i := 0
	if len(f) >= 2 && f[0] == ':' && f[1] == ':' {
		gap, i = 0, 2
		if len(f) == 2 {
			return netip.AddrFrom16(a), true
		}
	} else if f[0] == ':' {
		return netip.Addr{}, false
	}
	for i < len(f) {
		if n == 16 {
			return netip.Addr{}, false
		}
		// A dotted quad ends the address, in its last 4 bytes.
		j := i
		for j < len(f) && f[j] != ':' && f[j] != '.' {
			j++
		}
		if j < len(f) && f[j] == '.' {
			if n > 12 {
				return netip.Addr{}, false
			}
			q, ok := v4(f[i:])
			if !ok {
				return netip.Addr{}, false
			}
			q4 := q.As4()
			copy(a[n:], q4[:])
			n += 4
			break
		}
		if j == i || j-i > 4 {
			return netip.Addr{}, false
		}
		v := 0
		for _, c := range f[i:j] {
			switch {
			case '0' <= c && c <= '9':
				v = v<<4 | int(c-'0')
			case 'a' <= c && c <= 'f':
				v = v<<4 | int(c-'a'+10)
			case 'A' <= c && c <= 'F':
				v = v<<4 | int(c-'A'+10)
			default:
				return netip.Addr{}, false
			}
		}
		a[n], a[n+1] = byte(v>>8), byte(v)
		n += 2
		i = j
		if i == len(f) {
			break
		}
		i++ // the ':'
		if i < len(f) && f[i] == ':' {
			if gap >= 0 {
				return netip.Addr{}, false // a second "::"
			}
			gap = n
			i++
		} else if i == len(f) {
			return netip.Addr{}, false // a trailing single ':'
		}
	}
	switch {
	case gap < 0 && n != 16, gap >= 0 && n == 16:
		// Without "::", 8 groups; with it, fewer: it stands for at least
		// one zero group (as netip reads it).
		return netip.Addr{}, false
	case gap >= 0:
		copy(a[16-(n-gap):], a[gap:n])
		clear(a[gap : 16-(n-gap)])
	}
	return netip.AddrFrom16(a), true
}

// v4 parses a dotted quad: four decimal octets, no leading zeros.
func v4(f []byte) (netip.Addr, bool) {
	var o [4]byte
	n, v, digits := 0, 0, 0
	for i := 0; i <= len(f); i++ {
		if i == len(f) || f[i] == '.' {
			if digits == 0 || n == 4 {
				return netip.Addr{}, false
			}
			o[n] = byte(v)
			n++
			v, digits = 0, 0
			continue
		}
		if f[i] < '0' || f[i] > '9' || digits > 0 && v == 0 {
			return netip.Addr{}, false // not a digit, or a leading zero
		}
		v = v*10 + int(f[i]-'0')
		digits++
		if v > 255 {
			return netip.Addr{}, false
		}
	}
	if n != 4 {
		return netip.Addr{}, false
	}
	return netip.AddrFrom4(o), true
}

// textPort parses a decimal port 0..65535 without leading zeros.
func textPort(f []byte) (uint16, bool) {
	if len(f) == 0 || len(f) > 5 || len(f) > 1 && f[0] == '0' {
		return 0, false
	}
	v := 0
	for _, c := range f {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + int(c-'0')
	}
	if v > 65535 {
		return 0, false
	}
	return uint16(v), true
}

func parseV2(b []byte, h *Header) error {
	if !hasPrefix(b, v2sig) {
		return ErrNotProxy
	}
	if len(b) < v2Fixed {
		return ErrIncomplete
	}
	if b[12]>>4 != 2 {
		return ErrVersion
	}
	cmd := b[12] & 0xF
	if cmd != cmdLocal && cmd != cmdProxy {
		return ErrVersion
	}
	af, tp := b[13]>>4, b[13]&0xF
	if af > afUnix || tp > tpDgram {
		return ErrFamily
	}
	total := v2Fixed + int(binary.BigEndian.Uint16(b[14:16]))
	if total > MaxHeader {
		return ErrTooLarge
	}
	if len(b) < total {
		return ErrIncomplete
	}
	*h = Header{Len: total, Version: 2}
	if cmd == cmdLocal {
		// The balancer's own connection (a health check): the spec has the
		// receiver use the real endpoints and discard the block, family
		// included.
		h.Local = true
		return nil
	}
	var alen int
	switch af {
	case afInet:
		alen = addrLenInet
	case afInet6:
		alen = addrLenInet6
	default:
		// AF_UNSPEC (the balancer could not name its client) or AF_UNIX:
		// no address that means anything here; the block is discarded.
		if af == afUnspec && tp != tpUnspec {
			return ErrFamily
		}
		h.Local = true
		return nil
	}
	if tp != tpStream {
		return ErrFamily // a TCP connection does not relay a datagram flow
	}
	if total-v2Fixed < alen {
		return ErrMalformed
	}
	a := b[v2Fixed : v2Fixed+alen]
	if af == afInet {
		h.Src = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[0:4])), binary.BigEndian.Uint16(a[8:10]))
		h.Dst = netip.AddrPortFrom(netip.AddrFrom4([4]byte(a[4:8])), binary.BigEndian.Uint16(a[10:12]))
	} else {
		h.Src = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[0:16])), binary.BigEndian.Uint16(a[32:34]))
		h.Dst = netip.AddrPortFrom(netip.AddrFrom16([16]byte(a[16:32])), binary.BigEndian.Uint16(a[34:36]))
	}
	return parseTLVs(b[:total], v2Fixed+alen, h)
}

// parseTLVs reads the TLVs of the header b (whole) from offset off.
func parseTLVs(b []byte, off int, h *Header) error {
	crcAt := -1
	for off < len(b) {
		if len(b)-off < 3 {
			return ErrTLV
		}
		typ := b[off]
		n := int(binary.BigEndian.Uint16(b[off+1 : off+3]))
		off += 3
		if len(b)-off < n {
			return ErrTLV
		}
		v := b[off : off+n]
		switch typ {
		case tlvAuthority:
			if h.alen != 0 || n == 0 || n > MaxAuthority {
				return ErrAuthority
			}
			for i, c := range v {
				switch {
				case 'A' <= c && c <= 'Z':
					c += 'a' - 'A'
				case 'a' <= c && c <= 'z', '0' <= c && c <= '9', c == '-', c == '.', c == '_':
				default:
					return ErrAuthority
				}
				h.auth[i] = c
			}
			h.alen = uint8(n)
		case tlvCRC32C:
			if crcAt >= 0 || n != 4 {
				return ErrTLV
			}
			crcAt = off
		case tlvUniqueID:
			if n > maxUniqueID {
				return ErrTLV
			}
		}
		off += n
	}
	if crcAt >= 0 {
		c := crc32.Update(0, castagnoli, b[:crcAt])
		c = crc32.Update(c, castagnoli, zeroCRC)
		c = crc32.Update(c, castagnoli, b[crcAt+4:])
		if c != binary.BigEndian.Uint32(b[crcAt:crcAt+4]) {
			return ErrChecksum
		}
	}
	return nil
}
