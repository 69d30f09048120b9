package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"testing"
)

// TestStricterThanNetHTTP records heads that net/http.ReadRequest accepts
// and we refuse on purpose (see doc.go for each decision). If net/http
// starts refusing one, the row can go; if we start accepting one, that is a
// regression of a smuggling defence.
func TestStricterThanNetHTTP(t *testing.T) {
	cases := []struct {
		name string
		in   string
		why  string
	}{
		{"bare LF", "GET / HTTP/1.1\nHost: a\n\n", "bare LF line endings"},
		{"obs-fold", "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", "obsolete line folding"},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n", "net/http drops Content-Length"},
		{"TE in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", "net/http ignores TE in HTTP/1.0"},
		{"TE unknown coding in HTTP/1.0", "POST / HTTP/1.0\r\nTransfer-Encoding: gzip\r\n\r\n", "net/http ignores TE in HTTP/1.0"},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", "net/http checks Host in its server, not ReadRequest"},
		{"fragment in target", "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", "fragments are not part of a request-target"},
		{"non-ASCII target", "GET /\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", "request-target is ASCII"},
		{"asterisk for GET", "GET * HTTP/1.1\r\nHost: a\r\n\r\n", "asterisk-form is OPTIONS only"},
		{"absolute-form Host mismatch", "GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n", "proxy and server must route on one host"},
		{"absolute-form ftp", "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", "only http and https absolute-form"},
		{"Host with slash", "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", "Host is an authority"},
		{"Connection not tokens", "GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n", "Connection is a token list"},
		{"method too long", "ABCDEFGHIJKLMNOPQRSTUVWXYZABCDEFG / HTTP/1.1\r\nHost: a\r\n\r\n", "501 beyond 32 bytes"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var r Request
			if _, err := r.Parse([]byte(tc.in)); err == nil {
				t.Fatalf("accepted; we refuse it because: %s", tc.why)
			}
			if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader([]byte(tc.in)))); err != nil {
				t.Skipf("net/http now refuses it too (%v): row no longer needed", err)
			}
		})
	}
}
