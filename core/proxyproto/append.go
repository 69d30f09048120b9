package proxyproto

import (
	"encoding/binary"
	"net/netip"
	"strconv"
)

// family is how a pair of addresses is written: both IPv4 (an IPv4-mapped
// IPv6 address counts as IPv4), else both IPv6 (an IPv4 one mapped), or
// none when either is missing.
func family(src, dst netip.AddrPort) (s, d netip.Addr, af byte) {
	s, d = src.Addr().Unmap(), dst.Addr().Unmap()
	switch {
	case !s.IsValid() || !d.IsValid() || s.Zone() != "" || d.Zone() != "":
		return s, d, afUnspec
	case s.Is4() && d.Is4():
		return s, d, afInet
	}
	return netip.AddrFrom16(s.As16()), netip.AddrFrom16(d.As16()), afInet6
}

// AppendV1 appends the v1 line for a client src that connected to dst:
// "PROXY TCP4 …" or "PROXY TCP6 …"; "PROXY UNKNOWN" when either address
// is missing (the spec's answer for a connection the sender cannot
// name). At most MaxV1 bytes; no allocation when b has room.
func AppendV1(b []byte, src, dst netip.AddrPort) []byte {
	s, d, af := family(src, dst)
	switch af {
	case afInet:
		b = append(b, "PROXY TCP4 "...)
	case afInet6:
		b = append(b, "PROXY TCP6 "...)
	default:
		return append(b, "PROXY UNKNOWN\r\n"...)
	}
	b = s.AppendTo(b)
	b = append(b, ' ')
	b = d.AppendTo(b)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(src.Port()), 10)
	b = append(b, ' ')
	b = strconv.AppendUint(b, uint64(dst.Port()), 10)
	return append(b, "\r\n"...)
}

// AppendV2 appends a v2 header (command PROXY, TCP) for a client src that
// connected to dst, with an AUTHORITY TLV when authority is not empty (at
// most MaxAuthority bytes: a longer one is left out). Either address
// missing: command LOCAL, as for a connection of the sender's own. No
// allocation when b has room (16 + 36 + 3 + 255 bytes at most).
func AppendV2(b []byte, src, dst netip.AddrPort, authority []byte) []byte {
	s, d, af := family(src, dst)
	if af == afUnspec {
		return AppendV2Local(b)
	}
	if len(authority) > MaxAuthority {
		authority = nil
	}
	alen := addrLenInet
	if af == afInet6 {
		alen = addrLenInet6
	}
	n := alen
	if len(authority) > 0 {
		n += 3 + len(authority)
	}
	b = append(b, v2sig...)
	b = append(b, 2<<4|cmdProxy, af<<4|tpStream, byte(n>>8), byte(n))
	if af == afInet {
		s4, d4 := s.As4(), d.As4()
		b = append(b, s4[:]...)
		b = append(b, d4[:]...)
	} else {
		s16, d16 := s.As16(), d.As16()
		b = append(b, s16[:]...)
		b = append(b, d16[:]...)
	}
	b = binary.BigEndian.AppendUint16(b, src.Port())
	b = binary.BigEndian.AppendUint16(b, dst.Port())
	if len(authority) > 0 {
		b = append(b, tlvAuthority, byte(len(authority)>>8), byte(len(authority)))
		b = append(b, authority...)
	}
	return b
}

// AppendV2Local appends a v2 header with command LOCAL and no address: a
// connection of the sender's own (a health check), whose endpoints the
// receiver takes as they are.
func AppendV2Local(b []byte) []byte {
	b = append(b, v2sig...)
	return append(b, 2<<4|cmdLocal, afUnspec<<4|tpUnspec, 0, 0)
}
