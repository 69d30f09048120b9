package proxyproto

import (
	"encoding/binary"
	"hash/crc32"
	"net/netip"
	"strings"
	"testing"
)

// v2 builds a v2 header: ver_cmd, fam, then body (addresses and TLVs);
// the length is body's.
func v2(verCmd, fam byte, body ...[]byte) []byte {
	var p []byte
	for _, x := range body {
		p = append(p, x...)
	}
	b := append([]byte(v2sig), verCmd, fam, byte(len(p)>>8), byte(len(p)))
	return append(b, p...)
}

func tlv(typ byte, v string) []byte {
	return append([]byte{typ, byte(len(v) >> 8), byte(len(v))}, v...)
}

// inet4 is the address block 192.0.2.1:56324 -> 198.51.100.7:443.
var inet4 = []byte{192, 0, 2, 1, 198, 51, 100, 7, 0xdc, 0x04, 0x01, 0xbb}

func inet6Block() []byte {
	s := netip.MustParseAddr("2001:db8::1").As16()
	d := netip.MustParseAddr("2001:db8::2").As16()
	b := append(s[:], d[:]...)
	return append(b, 0x30, 0x39, 0x00, 0x50)
}

// withCRC appends a CRC32C TLV to a v2 header and fills it in.
func withCRC(h []byte) []byte {
	h = append(h, tlvCRC32C, 0, 4, 0, 0, 0, 0)
	binary.BigEndian.PutUint16(h[14:16], uint16(len(h)-v2Fixed))
	c := crc32.Checksum(h, castagnoli)
	binary.BigEndian.PutUint32(h[len(h)-4:], c)
	return h
}

func TestParseAccepts(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		name      string
		in        []byte
		local     bool
		src, dst  netip.AddrPort
		authority string
	}{
		{"v1 tcp4", []byte("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n"), false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), ""},
		{"v1 tcp6", []byte("PROXY TCP6 2001:db8::1 2001:db8::2 12345 80\r\n"), false, ap("[2001:db8::1]:12345"), ap("[2001:db8::2]:80"), ""},
		{"v1 tcp6 longest", []byte("PROXY TCP6 ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff 65535 65535\r\n"), false,
			ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), ap("[ffff:ffff:ffff:ffff:ffff:ffff:ffff:ffff]:65535"), ""},
		{"v1 port 0", []byte("PROXY TCP4 10.0.0.1 10.0.0.2 0 0\r\n"), false, ap("10.0.0.1:0"), ap("10.0.0.2:0"), ""},
		{"v1 unknown", []byte("PROXY UNKNOWN\r\n"), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v1 unknown with addresses", []byte("PROXY UNKNOWN ffff:f::1 ffff:f::2 1 2\r\n"), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v2 tcp4", v2(0x21, 0x11, inet4), false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), ""},
		{"v2 tcp6", v2(0x21, 0x21, inet6Block()), false, ap("[2001:db8::1]:12345"), ap("[2001:db8::2]:80"), ""},
		{"v2 local", v2(0x20, 0x00), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v2 local with a block", v2(0x20, 0x11, inet4, []byte{1, 2, 3}), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v2 unspec", v2(0x21, 0x00), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v2 unix", v2(0x21, 0x31, make([]byte, addrLenUnix)), true, netip.AddrPort{}, netip.AddrPort{}, ""},
		{"v2 authority", v2(0x21, 0x11, inet4, tlv(tlvAuthority, "WWW.Example.com")), false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), "www.example.com"},
		{"v2 tlvs skipped", v2(0x21, 0x11, inet4, tlv(tlvALPN, "h2"), tlv(tlvNoop, ""), tlv(0xEA, "\x01vpce-0123456789abcdef"), tlv(tlvAuthority, "a.example"), tlv(0x20, "\x01\x00\x00\x00\x00")),
			false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), "a.example"},
		{"v2 crc32c", withCRC(v2(0x21, 0x11, inet4, tlv(tlvAuthority, "a.example"))), false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), "a.example"},
		{"v2 largest", v2(0x21, 0x11, inet4, tlv(0xE0, strings.Repeat("x", MaxHeader-v2Fixed-addrLenInet-3))), false, ap("192.0.2.1:56324"), ap("198.51.100.7:443"), ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// With the bytes the next layer reads after it: never consumed.
			in := append(append([]byte(nil), tc.in...), "GET / HTTP/1.1\r\n"...)
			var h Header
			if err := Parse(in, &h); err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if h.Len != len(tc.in) || h.Local != tc.local || h.Src != tc.src || h.Dst != tc.dst || string(h.Authority()) != tc.authority {
				t.Fatalf("got len %d local %v %v -> %v authority %q", h.Len, h.Local, h.Src, h.Dst, h.Authority())
			}
			for i := 0; i < len(tc.in); i++ {
				if err := Parse(tc.in[:i], &h); err != ErrIncomplete {
					t.Fatalf("prefix of %d bytes: %v, want ErrIncomplete", i, err)
				}
			}
		})
	}
}

func TestParseRefuses(t *testing.T) {
	bad := withCRC(v2(0x21, 0x11, inet4))
	bad[len(bad)-1] ^= 1
	long := v2(0x21, 0x11, inet4, tlv(0xE0, strings.Repeat("x", MaxHeader-v2Fixed-addrLenInet-2)))
	for _, tc := range []struct {
		name string
		in   []byte
		want error
	}{
		{"http", []byte("GET / HTTP/1.1\r\n"), ErrNotProxy},
		{"tls", []byte{0x16, 0x03, 0x01}, ErrNotProxy},
		{"lower case", []byte("proxy TCP4"), ErrNotProxy},
		{"v1 prefix then garbage", []byte("PROXX"), ErrNotProxy},
		{"v2 signature broken", []byte("\r\n\r\n\x00\r\nQUIX"), ErrNotProxy},
		{"v1 no CR", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2\n"), ErrMalformed},
		{"v1 too long", []byte("PROXY TCP4 " + strings.Repeat("1", 100)), ErrTooLarge},
		{"v1 too long with LF", []byte("PROXY TCP6 " + strings.Repeat("1", 100) + "\r\n"), ErrTooLarge},
		{"v1 two spaces", []byte("PROXY TCP4 1.2.3.4  5.6.7.8 1 2\r\n"), ErrMalformed},
		{"v1 missing port", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1\r\n"), ErrMalformed},
		{"v1 extra field", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 3\r\n"), ErrMalformed},
		{"v1 trailing space", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 1 2 \r\n"), ErrMalformed},
		{"v1 udp", []byte("PROXY UDP4 1.2.3.4 5.6.7.8 1 2\r\n"), ErrFamily},
		{"v1 unknown glued", []byte("PROXY UNKNOWNX\r\n"), ErrMalformed},
		{"v1 tcp4 with v6", []byte("PROXY TCP4 ::1 ::1 1 2\r\n"), ErrAddress},
		{"v1 tcp6 with v4", []byte("PROXY TCP6 1.2.3.4 5.6.7.8 1 2\r\n"), ErrAddress},
		{"v1 leading zero octet", []byte("PROXY TCP4 01.2.3.4 5.6.7.8 1 2\r\n"), ErrAddress},
		{"v1 octet over 255", []byte("PROXY TCP4 1.2.3.256 5.6.7.8 1 2\r\n"), ErrAddress},
		{"v1 three octets", []byte("PROXY TCP4 1.2.3 5.6.7.8 1 2\r\n"), ErrAddress},
		{"v1 zone", []byte("PROXY TCP6 fe80::1%eth0 ::1 1 2\r\n"), ErrAddress},
		{"v1 port over 65535", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 65536 2\r\n"), ErrAddress},
		{"v1 port leading zero", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 080 2\r\n"), ErrAddress},
		{"v1 port sign", []byte("PROXY TCP4 1.2.3.4 5.6.7.8 +80 2\r\n"), ErrAddress},
		{"v1 NUL", []byte("PROXY TCP4 1.2.3.4\x00 5.6.7.8 1 2\r\n"), ErrAddress},
		{"v2 version 1", v2(0x11, 0x11, inet4), ErrVersion},
		{"v2 command 2", v2(0x22, 0x11, inet4), ErrVersion},
		{"v2 family 4", v2(0x21, 0x41, inet4), ErrFamily},
		{"v2 transport 3", v2(0x21, 0x13, inet4), ErrFamily},
		{"v2 udp", v2(0x21, 0x12, inet4), ErrFamily},
		{"v2 inet unspec transport", v2(0x21, 0x10, inet4), ErrFamily},
		{"v2 unspec with transport", v2(0x21, 0x01), ErrFamily},
		{"v2 short address block", v2(0x21, 0x21, inet4), ErrMalformed},
		{"v2 oversized", v2(0x21, 0x11, inet4, make([]byte, 65000)), ErrTooLarge},
		{"v2 one past MaxHeader", long, ErrTooLarge},
		{"v2 tlv header cut", v2(0x21, 0x11, inet4, []byte{0x04, 0}), ErrTLV},
		{"v2 tlv value cut", v2(0x21, 0x11, inet4, []byte{0x04, 0, 5, 1}), ErrTLV},
		{"v2 authority empty", v2(0x21, 0x11, inet4, tlv(tlvAuthority, "")), ErrAuthority},
		{"v2 authority twice", v2(0x21, 0x11, inet4, tlv(tlvAuthority, "a"), tlv(tlvAuthority, "b")), ErrAuthority},
		{"v2 authority CRLF", v2(0x21, 0x11, inet4, tlv(tlvAuthority, "a\r\nb")), ErrAuthority},
		{"v2 authority too long", v2(0x21, 0x11, inet4, tlv(tlvAuthority, strings.Repeat("a", 256))), ErrAuthority},
		{"v2 unique id too long", v2(0x21, 0x11, inet4, tlv(tlvUniqueID, strings.Repeat("a", 129))), ErrTLV},
		{"v2 crc32c wrong size", v2(0x21, 0x11, inet4, tlv(tlvCRC32C, "abc")), ErrTLV},
		{"v2 crc32c twice", v2(0x21, 0x11, inet4, tlv(tlvCRC32C, "abcd"), tlv(tlvCRC32C, "abcd")), ErrTLV},
		{"v2 crc32c mismatch", bad, ErrChecksum},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var h Header
			if err := Parse(tc.in, &h); err != tc.want {
				t.Fatalf("Parse: %v, want %v", err, tc.want)
			}
			// More bytes do not change a refusal.
			if err := Parse(append(append([]byte(nil), tc.in...), "\r\n\r\nmore"...), &h); err != tc.want {
				t.Fatalf("Parse with more bytes: %v, want %v", err, tc.want)
			}
		})
	}
}

func TestRoundTrip(t *testing.T) {
	ap := netip.MustParseAddrPort
	for _, tc := range []struct {
		src, dst netip.AddrPort
		auth     string
	}{
		{ap("192.0.2.1:56324"), ap("198.51.100.7:443"), ""},
		{ap("[2001:db8::1]:1"), ap("[2001:db8::2]:65535"), "www.example.com"},
		{ap("[::ffff:192.0.2.1]:1"), ap("198.51.100.7:2"), "a"},              // mapped: written as IPv4
		{ap("192.0.2.1:1"), ap("[2001:db8::2]:2"), strings.Repeat("a", 255)}, // mixed: written as IPv6
	} {
		var h Header
		v1 := AppendV1(nil, tc.src, tc.dst)
		if len(v1) > MaxV1 {
			t.Fatalf("v1 of %d bytes", len(v1))
		}
		if err := Parse(v1, &h); err != nil || h.Len != len(v1) || !same(h.Src, tc.src) || !same(h.Dst, tc.dst) {
			t.Fatalf("v1 %q: %v %v %v", v1, err, h.Src, h.Dst)
		}
		b := AppendV2(nil, tc.src, tc.dst, []byte(tc.auth))
		if err := Parse(b, &h); err != nil || h.Len != len(b) || !same(h.Src, tc.src) || !same(h.Dst, tc.dst) || string(h.Authority()) != tc.auth {
			t.Fatalf("v2 %x: %v %v %v %q", b, err, h.Src, h.Dst, h.Authority())
		}
	}
	var h Header
	for _, b := range [][]byte{AppendV1(nil, netip.AddrPort{}, netip.AddrPort{}), AppendV2(nil, netip.AddrPort{}, netip.AddrPort{}, nil), AppendV2Local(nil)} {
		if err := Parse(b, &h); err != nil || !h.Local || h.Len != len(b) {
			t.Fatalf("%q: %v local %v", b, err, h.Local)
		}
	}
}

// same: a and b name the same endpoint (an IPv4 address and its mapped
// IPv6 form are the same).
func same(a, b netip.AddrPort) bool {
	return a.Addr().Unmap() == b.Addr().Unmap() && a.Port() == b.Port()
}

func TestParseAllocatesNothing(t *testing.T) {
	inputs := [][]byte{
		[]byte("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n"),
		[]byte("PROXY TCP6 2001:db8::1 2001:db8::2 12345 80\r\n"),
		[]byte("PROXY TCP6 2001:db8::1::1 2001:db8::2 12345 80\r\n"), // refused by netip
		[]byte("PROXY TCP4 1.2.3.999 5.6.7.8 1 2\r\n"),
		withCRC(v2(0x21, 0x11, inet4, tlv(tlvAuthority, "a.example"))),
		v2(0x21, 0x21, inet6Block()),
		[]byte("PROXY TCP4 1.2."),
		[]byte("GET /"),
	}
	var h Header
	for _, in := range inputs {
		if n := testing.AllocsPerRun(100, func() { _ = Parse(in, &h) }); n != 0 {
			t.Errorf("%q: %v allocations", in, n)
		}
	}
	buf := make([]byte, 0, 512)
	src, dst := netip.MustParseAddrPort("[2001:db8::1]:1"), netip.MustParseAddrPort("[2001:db8::2]:2")
	if n := testing.AllocsPerRun(100, func() {
		buf = AppendV1(buf[:0], src, dst)
		buf = AppendV2(buf, src, dst, []byte("a.example"))
	}); n != 0 {
		t.Errorf("Append: %v allocations", n)
	}
}

func BenchmarkParse(b *testing.B) {
	for _, bc := range []struct {
		name string
		in   []byte
	}{
		{"v1", []byte("PROXY TCP4 192.0.2.1 198.51.100.7 56324 443\r\n")},
		{"v2", v2(0x21, 0x11, inet4, tlv(tlvAuthority, "www.example.com"))},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			var h Header
			for i := 0; i < b.N; i++ {
				if err := Parse(bc.in, &h); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
