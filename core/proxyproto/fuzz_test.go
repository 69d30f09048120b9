package proxyproto

import (
	"bytes"
	"net/netip"
	"testing"
)

// FuzzParse checks the invariants of Parse on any input:
//   - an answer (header or refusal) never needs more than MaxHeader bytes;
//   - an accepted header takes Len <= len(b) bytes, every shorter prefix of
//     those is ErrIncomplete, and b[:Len] gives the same Header;
//   - a refusal of a prefix is the refusal of the whole input;
//   - a header written again (AppendV1, AppendV2) from what was read reads
//     back as the same addresses and authority.
//
// The corpus (testdata/fuzz/FuzzParse) holds headers of both versions as
// real senders write them (HAProxy, AWS NLB with its VPC endpoint TLV) and
// the refusals of TestParseRefuses.
func FuzzParse(f *testing.F) {
	f.Add([]byte("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\nGET / HTTP/1.1\r\n"), uint16(20))
	f.Add([]byte("PROXY TCP6 2001:db8::1 2001:db8::2 12345 80\r\n"), uint16(30))
	f.Add([]byte("PROXY UNKNOWN\r\n"), uint16(3))
	f.Add(v2(0x21, 0x11, inet4, tlv(0xEA, "\x01vpce-0123456789abcdef")), uint16(17))
	f.Add(withCRC(v2(0x21, 0x21, inet6Block(), tlv(tlvAuthority, "www.example.com"))), uint16(40))
	f.Add(v2(0x20, 0x00), uint16(15))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		var h Header
		err := Parse(b, &h)
		if err == ErrIncomplete && len(b) >= MaxHeader {
			t.Fatalf("ErrIncomplete with %d bytes", len(b))
		}
		c := min(int(cut), len(b))
		var hp Header
		perr := Parse(b[:c], &hp)
		if perr != ErrIncomplete && perr != nil && perr != err {
			t.Fatalf("prefix %d refused with %v, whole input %v", c, perr, err)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok && err != ErrIncomplete {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if h.Len > len(b) || h.Len > MaxHeader || h.Len <= 0 {
			t.Fatalf("Len %d of %d", h.Len, len(b))
		}
		if c < h.Len && perr != ErrIncomplete {
			t.Fatalf("prefix %d of a %d-byte header: %v", c, h.Len, perr)
		}
		var h2 Header
		if err := Parse(b[:h.Len], &h2); err != nil || h2 != h {
			t.Fatalf("b[:Len] gives %v", err)
		}
		if a := h.Authority(); !bytes.Equal(a, bytes.ToLower(a)) {
			t.Fatalf("authority not lower-cased: %q", a)
		}
		if h.Local {
			if h.Src.IsValid() || h.Dst.IsValid() {
				t.Fatalf("local header with addresses %v %v", h.Src, h.Dst)
			}
			return
		}
		var r Header
		if err := Parse(AppendV2(nil, h.Src, h.Dst, h.Authority()), &r); err != nil || !same(r.Src, h.Src) || !same(r.Dst, h.Dst) || !bytes.Equal(r.Authority(), h.Authority()) {
			t.Fatalf("v2 written again: %v %v %v", err, r.Src, r.Dst)
		}
		if err := Parse(AppendV1(nil, h.Src, h.Dst), &r); err != nil || !same(r.Src, h.Src) || !same(r.Dst, h.Dst) {
			t.Fatalf("v1 written again: %v %v %v", err, r.Src, r.Dst)
		}
		_ = netip.AddrPort{}
	})
}

// FuzzTextAddr compares the v1 address parser with netip.ParseAddr: the
// same addresses accepted (zones and IPv4 leading zeros aside, which
// netip refuses too) and read the same.
func FuzzTextAddr(f *testing.F) {
	for _, s := range []string{"::", "::1", "1::", "2001:db8::1", "::ffff:1.2.3.4", "1:2:3:4:5:6:7:8", "1:2:3:4:5:6:1.2.3.4",
		"1::2::3", "1:2:3:4:5:6:7:8:9", ":1", "1:", "12345::", "1.2.3.4", "01.2.3.4", "1:2:3:4:5:6:7::", "::1:2:3:4:5:6:7"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if len(s) == 0 {
			return
		}
		for _, v6 := range []bool{false, true} {
			a, ok := textAddr([]byte(s), v6)
			n, err := netip.ParseAddr(s)
			nok := err == nil && n.Zone() == "" && n.Is6() == v6 && len(s) <= 45
			if ok != nok || ok && a != n {
				t.Fatalf("%q (v6 %v): ours %v %v, netip %v %v", s, v6, a, ok, n, err)
			}
		}
	})
}
