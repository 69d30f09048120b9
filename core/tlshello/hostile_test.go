package tlshello

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

// A small builder of hand-made ClientHellos: each hostile case below is one
// field changed from a valid hello.

func u16(v int) []byte { return []byte{byte(v >> 8), byte(v)} }

func vec16(parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	return append(u16(len(body)), body...)
}

func vec8(parts ...[]byte) []byte {
	body := bytes.Join(parts, nil)
	return append([]byte{byte(len(body))}, body...)
}

func ext(typ int, data []byte) []byte { return append(u16(typ), vec16(data)...) }

func hostEntry(name string) []byte { return append([]byte{0}, vec16([]byte(name))...) }

func sni(names ...string) []byte {
	var entries [][]byte
	for _, n := range names {
		entries = append(entries, hostEntry(n))
	}
	return ext(extServerName, vec16(entries...))
}

func alpn(protos ...string) []byte {
	var l [][]byte
	for _, p := range protos {
		l = append(l, vec8([]byte(p)))
	}
	return ext(extALPN, vec16(l...))
}

func versions(vs ...int) []byte {
	var l [][]byte
	for _, v := range vs {
		l = append(l, u16(v))
	}
	return ext(extSupportedVersions, vec8(l...))
}

// body is a ClientHello body: legacy_version, random, empty session id,
// one suite, null compression, then the extensions block (omitted if nil).
func body(legacy int, exts [][]byte) []byte {
	b := append(u16(legacy), make([]byte, 32)...)
	b = append(b, 0)                     // session id
	b = append(b, vec16(u16(0x1301))...) // cipher suites
	b = append(b, 1, 0)                  // compression: null
	if exts != nil {
		b = append(b, vec16(exts...)...)
	}
	return b
}

func message(body []byte) []byte {
	n := len(body)
	return append([]byte{typeClientHello, byte(n >> 16), byte(n >> 8), byte(n)}, body...)
}

func record(frag []byte) []byte {
	return append([]byte{22, 3, 1, byte(len(frag) >> 8), byte(len(frag))}, frag...)
}

// records cuts msg into records of size bytes.
func records(msg []byte, size int) []byte {
	var out []byte
	for len(msg) > 0 {
		n := min(size, len(msg))
		out = append(out, record(msg[:n])...)
		msg = msg[n:]
	}
	return out
}

func hello(exts ...[]byte) []byte {
	if exts == nil {
		exts = [][]byte{}
	}
	return record(message(body(0x0303, exts)))
}

func TestHostileHellos(t *testing.T) {
	good := [][]byte{sni("a.example"), alpn("h2"), versions(0x0304, 0x0303)}
	long := strings.Repeat("a", 63)
	cases := []struct {
		name string
		in   []byte
		want error
	}{
		{"valid hand-made", hello(good...), nil},
		{"no extensions at all (TLS 1.2 allows it)", record(message(body(0x0303, nil))), nil},
		{"plain HTTP, first byte", []byte("G"), ErrNotTLS},
		{"plain HTTP", []byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"), ErrNotTLS},
		{"SSLv2-compatible hello", []byte{0x80, 0x2e, 0x01, 0x03, 0x01}, ErrNotTLS},
		{"record major version not 3", []byte{22, 2}, ErrNotTLS},
		{"record version SSL 3.0", []byte{22, 3, 0}, ErrRecordVersion},
		{"record version 0x0304", []byte{22, 3, 4}, ErrRecordVersion},
		{"zero-length record", []byte{22, 3, 1, 0, 0}, ErrRecordLength},
		{"record over 2^14", []byte{22, 3, 1, 0x40, 1}, ErrRecordLength},
		{"not a ClientHello (ServerHello)", []byte{22, 3, 3, 0, 4, 2}, ErrNotClientHello},
		{"hello over MaxHello", []byte{22, 3, 3, 0, 4, 1, 0, 0x40, 0}, ErrTooLarge},
		{"alert record after the first", append(record(message(body(0x0303, good))[:10]), 21, 3, 3, 0, 2), ErrNotHandshake},
		{"record carries bytes after the hello", record(append(message(body(0x0303, good)), 0)), ErrTrailing},
		{"legacy_version SSL 3.0", record(message(body(0x0300, good))), ErrLegacyVersion},
		{"legacy_version 0x0304", record(message(body(0x0304, good))), ErrLegacyVersion},
		{"message shorter than its fields", record(message(body(0x0303, nil)[:36])), ErrMalformed},
		{"extensions block longer than message", record(message(append(body(0x0303, nil), 0, 9, 0, 1, 0, 0))), ErrMalformed},
		{"extension length past the block", record(message(append(body(0x0303, nil), 0, 4, 0, 1, 0, 9))), ErrMalformed},
		{"duplicate extension", hello(sni("a.example"), alpn("h2"), alpn("h2")), ErrDuplicateExt},
		{"duplicate unknown extension", hello(ext(0xfe0d, nil), ext(0xfe0d, nil)), ErrDuplicateExt},
		{"several SNI entries", hello(sni("a.example", "b.example")), ErrSeveralNames},
		{"several SNI entries, same name", hello(sni("a.example", "a.example")), ErrSeveralNames},
		{"SNI entry of another type", hello(ext(extServerName, vec16([]byte{1, 0, 1, 'a'}))), ErrNameType},
		{"empty SNI list", hello(ext(extServerName, vec16())), ErrMalformed},
		{"empty SNI extension", hello(ext(extServerName, nil)), ErrMalformed},
		{"SNI name longer than its list", hello(ext(extServerName, vec16([]byte{0, 0, 9, 'a'}))), ErrMalformed},
		{"zero-length name", hello(sni("")), ErrBadHostName},
		{"trailing dot", hello(sni("a.example.")), ErrBadHostName},
		{"leading dot", hello(sni(".a.example")), ErrBadHostName},
		{"empty label", hello(sni("a..example")), ErrBadHostName},
		{"IPv4 literal", hello(sni("192.0.2.1")), ErrBadHostName},
		{"IPv6 literal", hello(sni("2001:db8::1")), ErrBadHostName},
		{"bracketed IPv6", hello(sni("[::1]")), ErrBadHostName},
		{"label of 64", hello(sni(long + "a.example")), ErrBadHostName},
		{"label of 63", hello(sni(long + ".example")), nil},
		{"name of 254", hello(sni(strings.Repeat(long+".", 4)[:254])), ErrBadHostName},
		{"hyphen first in a label", hello(sni("-a.example")), ErrBadHostName},
		{"hyphen last in a label", hello(sni("a-.example")), ErrBadHostName},
		{"underscore", hello(sni("a_b.example")), ErrBadHostName},
		{"NUL in name", hello(sni("a\x00.example")), ErrBadHostName},
		{"space in name", hello(sni("a b.example")), ErrBadHostName},
		{"non-ASCII name", hello(sni("é.example")), ErrBadHostName},
		{"numeric labels before a TLD", hello(sni("1.2.3.example")), nil},
		{"empty ALPN list", hello(alpn()), ErrALPN},
		{"empty protocol name", hello(alpn("h2", "")), ErrALPN},
		{"ALPN over MaxALPNList", hello(alpn(strings.Repeat("p", 200), strings.Repeat("q", 60))), ErrALPN},
		{"ALPN name past its list", hello(ext(extALPN, vec16([]byte{5, 'h', '2'}))), ErrALPN},
		{"oversized unknown extension", records(message(body(0x0303, [][]byte{ext(0x1234, make([]byte, MaxHello))})), MaxRecord), ErrTooLarge},
		{"one byte over MaxHello", records(message(body(0x0303, [][]byte{ext(0x1234, make([]byte, MaxHello-50))})), MaxRecord), ErrTooLarge},
		{"largest hello, in two records", records(message(body(0x0303, [][]byte{ext(0x1234, make([]byte, MaxHello-51))})), MaxRecord), nil},
		{"supported_versions odd length", hello(ext(extSupportedVersions, vec8([]byte{3, 4, 3}))), ErrSupportedVersion},
		{"supported_versions only GREASE", hello(versions(0x0a0a)), ErrSupportedVersion},
		{"supported_versions GREASE and 1.3", hello(versions(0x0a0a, 0x0304)), nil},
		{"too many extensions", hello(manyExtensions(MaxExtensions + 1)...), ErrTooManyExt},
		{"MaxExtensions extensions", hello(manyExtensions(MaxExtensions)...), nil},
		{"garbage", []byte{22, 3, 1, 0, 5, 1, 0xff, 0xff, 0xff, 0}, ErrTooLarge},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse(tc.in)
			if err != tc.want {
				t.Fatalf("got %v, want %v", err, tc.want)
			}
			// Whatever the verdict, a refusal stays one when more bytes come,
			// and no prefix of an accepted hello is refused.
			if err != nil {
				if _, err2 := Parse(append(tc.in, make([]byte, 64)...)); err2 != err {
					t.Fatalf("with more bytes: %v, was %v", err2, err)
				}
				return
			}
			for n := range len(tc.in) {
				if _, err := Parse(tc.in[:n]); err != ErrIncomplete {
					t.Fatalf("prefix %d: %v", n, err)
				}
			}
			// What we accept, crypto/tls's server reads the same way.
			h, _ := Parse(tc.in)
			ok, name, protos, _ := serverSees(tc.in)
			if !ok || name != string(h.ServerName()) || !slices.Equal(protos, protocols(&h)) {
				t.Fatalf("crypto/tls: parsed %v, name %q, ALPN %q", ok, name, protos)
			}
		})
	}
}

func manyExtensions(n int) [][]byte {
	var e [][]byte
	for i := range n {
		e = append(e, ext(0x3000+i, nil))
	}
	return e
}

// A hello split into so many records that it does not end within
// MaxInspect bytes is refused as soon as a record would cross the bound,
// not buffered.
func TestInspectBound(t *testing.T) {
	msg := message(body(0x0303, [][]byte{sni("a.example"), ext(0x1234, make([]byte, 4000))}))
	var in []byte
	for _, c := range msg {
		in = append(in, record([]byte{c})...)
	}
	if len(in) <= MaxInspect {
		t.Fatalf("test input %d bytes, want over %d", len(in), MaxInspect)
	}
	if _, err := Parse(in[:MaxInspect-6]); err != ErrIncomplete {
		t.Fatalf("within the bound: %v", err)
	}
	if _, err := Parse(in[:MaxInspect]); err != ErrTooLarge {
		t.Fatalf("past the bound: %v", err)
	}
}
