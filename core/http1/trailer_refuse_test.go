package http1

import (
	"errors"
	"testing"
)

// TestChunkedRefusesTrailersTheProxyStrips: a request trailer field that
// the proxy strips or sets in the head (any case, '_' for '-') fails the
// body with ErrTrailerRefused at its ':', whatever read boundaries split
// it, so neither its value nor its line's end is passed on; other
// trailers pass. Before, every such trailer reached the server unchanged.
func TestChunkedRefusesTrailersTheProxyStrips(t *testing.T) {
	const all = RefuseHopByHop | RefuseXForwardedFor | RefuseXForwardedProto
	for _, tt := range []struct {
		trailer string
		refuse  uint8
		prefix  string
		refused bool
	}{
		{"X-Forwarded-Proto: https", all, "X-Client-Cert-", true},
		{"x_forwarded_proto: https", all, "", true},
		{"X-Forwarded-Proto: https", RefuseHopByHop, "", false}, // the proxy does not set it
		{"X-Forwarded-For: 1.2.3.4", all, "", true},
		{"X-Forwarded-For: 1.2.3.4", RefuseHopByHop, "", false},
		{"X-Client-Cert-Verified: SUCCESS", all, "X-Client-Cert-", true},
		{"x_client_cert_subject: CN=x", RefuseHopByHop, "X-Client-Cert-", true},
		{"X-Client-Cert-: a", RefuseHopByHop, "X-Client-Cert-", true},
		{"X-Client-Cer: a", all, "X-Client-Cert-", false},
		{"X-Client-Cert-Verified: SUCCESS", all, "", false},
		{"Content-Length: 5", RefuseHopByHop, "", true},
		{"Transfer-Encoding: chunked", RefuseHopByHop, "", true},
		{"Host: evil", RefuseHopByHop, "", true},
		{"Connection: close", RefuseHopByHop, "", true},
		{"TE: trailers", RefuseHopByHop, "", true},
		{"Trailer: x", RefuseHopByHop, "", true},
		{"Upgrade: h2c", RefuseHopByHop, "", true},
		{"Keep-Alive: 1", RefuseHopByHop, "", true},
		{"Proxy-Connection: x", RefuseHopByHop, "", true},
		{"Expect: 100-continue", RefuseHopByHop, "", true},
		{"Content-Length: 5", 0, "", false},
		{"Tee: x", all, "", false},
		{"Hosts: x", all, "", false},
		{"X-Forwarded-Protocol: x", all, "", false},
		{"Checksum: abc", all, "X-Client-Cert-", false},
		{"Server-Timing: a", all, "X-Client-Cert-", false},
	} {
		body := "3\r\nabc\r\n0\r\nChecksum: 1\r\n" + tt.trailer + "\r\n\r\n"
		for split := 1; split < len(body); split++ {
			c := Chunked{Refuse: tt.refuse, RefusePrefix: tt.prefix}
			c.Reset()
			var err error
			for _, part := range []string{body[:split], body[split:]} {
				in := []byte(part)
				for len(in) > 0 && err == nil && !c.Done() {
					var n int
					n, _, err = c.Decode(in)
					if n == 0 {
						break
					}
					in = in[n:]
				}
			}
			if tt.refused {
				if !errors.Is(err, ErrTrailerRefused) {
					t.Fatalf("%q (refuse %b, prefix %q, split %d): err %v, want ErrTrailerRefused", tt.trailer, tt.refuse, tt.prefix, split, err)
				}
				continue
			}
			if err != nil || !c.Done() {
				t.Fatalf("%q (refuse %b, prefix %q, split %d): err %v, done %v", tt.trailer, tt.refuse, tt.prefix, split, err, c.Done())
			}
		}
	}
}

// TestChunkedRefuseAllocatesNothing: the trailer check is on the request
// path: zero allocation.
func TestChunkedRefuseAllocatesNothing(t *testing.T) {
	body := []byte("3\r\nabc\r\n0\r\nChecksum: 1\r\nX-Other: 2\r\n\r\n")
	c := Chunked{Refuse: RefuseHopByHop | RefuseXForwardedFor | RefuseXForwardedProto, RefusePrefix: "X-Client-Cert-"}
	if n := testing.AllocsPerRun(100, func() {
		c.Reset()
		for in := body; len(in) > 0 && !c.Done(); {
			n, _, err := c.Decode(in)
			if err != nil || n == 0 {
				t.Fatal(err)
			}
			in = in[n:]
		}
	}); n != 0 {
		t.Errorf("%v allocations per body", n)
	}
}
