package tlshello

import (
	"slices"
	"strings"
	"testing"
)

// FuzzParse checks the invariants of Parse on any input, and compares an
// accepted hello with what crypto/tls's server reads from the same bytes:
//   - an answer (hello or refusal) never needs more than MaxInspect bytes;
//   - an accepted hello takes Len <= len(b) bytes, and every shorter prefix
//     of those is ErrIncomplete, b[:Len] gives the same Hello;
//   - a refusal of a prefix is the refusal of the whole input;
//   - where crypto/tls also parses the hello, it sees the same name (up to
//     case) and ALPN list. crypto/tls may refuse what we accept only for
//     extensions we do not read (key_share, signature_algorithms...).
func FuzzParse(f *testing.F) {
	for _, tc := range realCases {
		f.Add(clientHello(f, tc.cfg), uint16(100))
	}
	f.Add(hello(sni("a.example", "b.example")), uint16(3))
	f.Add(hello(sni("a.example"), alpn("h2", "http/1.1"), versions(0x0a0a, 0x0304)), uint16(7))
	f.Add([]byte("GET / HTTP/1.1\r\n\r\n"), uint16(1))
	f.Fuzz(func(t *testing.T, b []byte, cut uint16) {
		h, err := Parse(b)
		if err == ErrIncomplete && len(b) >= MaxInspect {
			t.Fatalf("ErrIncomplete with %d bytes", len(b))
		}
		c := min(int(cut), len(b))
		_, perr := Parse(b[:c])
		if perr != ErrIncomplete && perr != nil && perr != err {
			t.Fatalf("prefix %d refused with %v, whole input %v", c, perr, err)
		}
		if err != nil {
			if _, ok := err.(*Error); !ok && err != ErrIncomplete {
				t.Fatalf("error of type %T", err)
			}
			return
		}
		if h.Len > len(b) || h.Len > MaxInspect {
			t.Fatalf("Len %d of %d", h.Len, len(b))
		}
		if c < h.Len && perr != ErrIncomplete {
			t.Fatalf("prefix %d of a %d-byte hello: %v", c, h.Len, perr)
		}
		h2, err := Parse(b[:h.Len])
		if err != nil || h2 != h {
			t.Fatalf("b[:Len] gives %v", err)
		}
		name := h.ServerName()
		if len(name) > 0 && strings.ToLower(string(name)) != string(name) {
			t.Fatalf("name not lower-cased: %q", name)
		}
		ok, tname, tprotos, tversions := serverSees(b[:h.Len])
		if !ok {
			return
		}
		if !strings.EqualFold(tname, string(name)) {
			t.Fatalf("crypto/tls sees name %q, we %q", tname, name)
		}
		if !slices.Equal(tprotos, protocols(&h)) {
			t.Fatalf("crypto/tls sees ALPN %q, we %q", tprotos, protocols(&h))
		}
		if h.HasSupportedVersions && !slices.Contains(tversions, h.Version) {
			t.Fatalf("crypto/tls sees versions %x, we %#x", tversions, h.Version)
		}
	})
}
