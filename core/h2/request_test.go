package h2

import (
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/spliced-proxy/spliced/core/http1"
)

var base = []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "example.com"}

func with(kv ...string) []string { return append(append([]string(nil), base...), kv...) }

// malformedRequests are refused with RST_STREAM PROTOCOL_ERROR (RFC 9113
// §8.1.1) and never reach the Handler.
var malformedRequests = []struct {
	name string
	kv   []string
	end  bool // END_STREAM on HEADERS (default: true)
}{
	{"no :method", []string{":scheme", "https", ":path", "/"}, true},
	{"no :scheme", []string{":method", "GET", ":path", "/"}, true},
	{"no :path", []string{":method", "GET", ":scheme", "https"}, true},
	{"empty :path", []string{":method", "GET", ":scheme", "https", ":path", ""}, true},
	{"relative :path", []string{":method", "GET", ":scheme", "https", ":path", "a/b"}, true},
	{"* not OPTIONS", []string{":method", "GET", ":scheme", "https", ":path", "*"}, true},
	{":path with space", []string{":method", "GET", ":scheme", "https", ":path", "/a b"}, true},
	{":path with fragment", []string{":method", "GET", ":scheme", "https", ":path", "/a#b"}, true},
	{":path with CRLF", []string{":method", "GET", ":scheme", "https", ":path", "/a\r\nx: y"}, true},
	{":method not a token", []string{":method", "GE T", ":scheme", "https", ":path", "/"}, true},
	{":method with CRLF", []string{":method", "GET\r\n", ":scheme", "https", ":path", "/"}, true},
	{"bad :scheme", []string{":method", "GET", ":scheme", "ht tp", ":path", "/"}, true},
	{"duplicate :path", with(":path", "/x"), true},
	{"duplicate :method", []string{":method", "GET", ":method", "GET", ":scheme", "https", ":path", "/"}, true},
	{":status in a request", with(":status", "200"), true},
	{"unknown pseudo", with(":foo", "bar"), true},
	{":protocol not offered", with(":protocol", "websocket"), true},
	{"pseudo after regular", []string{":method", "GET", ":scheme", "https", "accept", "*/*", ":path", "/"}, true},
	{"uppercase name", with("Accept", "*/*"), true},
	{"name with space", with("a b", "c"), true},
	{"name with colon", with("a:b", "c"), true},
	{"empty name", with("", "c"), true},
	{"connection", with("connection", "close"), true},
	{"keep-alive", with("keep-alive", "timeout=5"), true},
	{"proxy-connection", with("proxy-connection", "keep-alive"), true},
	{"transfer-encoding", with("transfer-encoding", "chunked"), false},
	{"upgrade", with("upgrade", "websocket"), true},
	{"te gzip", with("te", "gzip"), true},
	{"te trailers, gzip", with("te", "trailers, gzip"), true},
	{"value with LF", with("x", "a\nb"), true},
	{"value with CR", with("x", "a\rb"), true},
	{"value with NUL", with("x", "a\x00b"), true},
	{"value with other control", with("x", "a\x01b"), true},
	{"value leading space", with("x", " a"), true},
	{"value trailing tab", with("x", "a\t"), true},
	{"content-length not digits", with("content-length", "1x"), false},
	{"content-length negative", with("content-length", "-1"), false},
	{"content-length list", with("content-length", "1,1"), false},
	{"content-length twice", with("content-length", "1", "content-length", "1"), false},
	{"content-length empty", with("content-length", ""), false},
	{"content-length huge", with("content-length", "99999999999999999999"), false},
	{"content-length with END_STREAM", with("content-length", "3"), true},
	{"host differs from :authority", with("host", "other.example"), true},
	{"two hosts", []string{":method", "GET", ":scheme", "https", ":path", "/", "host", "a", "host", "a"}, true},
	{"bad host", []string{":method", "GET", ":scheme", "https", ":path", "/", "host", "a b"}, true},
	{"bad :authority", []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "a/b"}, true},
	{":authority with userinfo", []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "u@a"}, true},
	{"empty :authority", []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", ""}, true},
	{"CONNECT with :path", []string{":method", "CONNECT", ":authority", "a:443", ":path", "/"}, false},
	{"CONNECT with :scheme", []string{":method", "CONNECT", ":authority", "a:443", ":scheme", "https"}, false},
	{"CONNECT without port", []string{":method", "CONNECT", ":authority", "a"}, false},
	{"CONNECT without :authority", []string{":method", "CONNECT"}, false},
}

func TestMalformedRequestsRefused(t *testing.T) {
	for _, tc := range malformedRequests {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.headers(1, tc.end, tc.kv...)
			if err := cl.feed(); err != nil {
				t.Fatal(err)
			}
			wantFrames(t, cl.frames(), "RST_STREAM 1 PROTOCOL_ERROR")
			if len(cl.h.events) != 0 {
				t.Fatalf("handler called: %q", cl.h.events)
			}
			// the connection goes on: the HPACK state stayed in step
			cl.get(3, "/next")
			if err := cl.feed(); err != nil || cl.h.reqs[3] == nil || cl.h.reqs[3].Path != "/next" {
				t.Fatalf("next request: %v %q", err, cl.h.events)
			}
		})
	}
}

func TestTrailersRules(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
		end  bool
	}{
		{"pseudo in trailers", []string{":path", "/"}, true},
		{"trailers without END_STREAM", []string{"x", "y"}, false},
		{"content-length in trailers", []string{"content-length", "0"}, true},
		{"connection in trailers", []string{"connection", "close"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.post(1, "/")
			cl.fr.WriteData(1, false, []byte("a"))
			cl.headers(1, tc.end, tc.kv...)
			cl.feed()
			wantFrames(t, cl.frames(), "RST_STREAM 1 PROTOCOL_ERROR")
			if cl.h.resets[1] != http2.ErrCodeProtocol || len(cl.h.trail) != 0 {
				t.Fatalf("events %q", cl.h.events)
			}
		})
	}
}

func TestValidRequestsAccepted(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
	}{
		{"plain", base},
		{"OPTIONS *", []string{":method", "OPTIONS", ":scheme", "https", ":path", "*", ":authority", "a"}},
		{"no :authority, host", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "a:80"}},
		{"host equal to :authority, other case", with("host", "EXAMPLE.com")},
		{"te trailers", with("te", "trailers")},
		{"empty value", with("x-empty", "")},
		{"inner space and obs-text", with("x", "a b\t\xe9")},
		{"CONNECT", []string{":method", "CONNECT", ":authority", "a.example:443"}},
		{"IPv6 authority", []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "[::1]:8443"}},
		{"content-length 0", with("content-length", "0")},
		{"other scheme", []string{":method", "GET", ":scheme", "coap+tcp", ":path", "/"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.headers(1, true, tc.kv...)
			cl.feed()
			if fs := cl.frames(); len(fs) != 0 || cl.h.reqs[1] == nil {
				t.Fatalf("refused: %q %q", fs, cl.h.events)
			}
		})
	}
}

// h1 parses a head written by AppendHTTP1 (plus the final CRLF) with the
// proxy's HTTP/1.1 parser.
func h1(t testing.TB, head []byte) (*http1.Request, error) {
	r := &http1.Request{}
	r.Reset()
	r.Limits.MaxHead = 1 << 20
	n, err := r.Parse(head)
	if err == nil && n != len(head) {
		t.Fatalf("parsed %d of %d bytes: %q", n, len(head), head)
	}
	return r, err
}

func TestHTTP1RoundTrip(t *testing.T) {
	for _, tc := range []struct {
		name string
		kv   []string
		body bool
		want string
	}{
		{"GET", with("accept", "*/*", "user-agent", "t/1"), false,
			"GET / HTTP/1.1\r\nhost: example.com\r\naccept: */*\r\nuser-agent: t/1\r\n\r\n"},
		{"cookies joined", with("cookie", "a=1", "x", "y", "cookie", "b=2"), false,
			"GET / HTTP/1.1\r\nhost: example.com\r\nx: y\r\ncookie: a=1; b=2\r\n\r\n"},
		{"POST with length", []string{":method", "POST", ":scheme", "https", ":path", "/u", ":authority", "h", "content-length", "12"}, true,
			"POST /u HTTP/1.1\r\nhost: h\r\ncontent-length: 12\r\n\r\n"},
		{"POST chunked", []string{":method", "POST", ":scheme", "https", ":path", "/u", ":authority", "h", "te", "trailers"}, true,
			"POST /u HTTP/1.1\r\nhost: h\r\ntransfer-encoding: chunked\r\n\r\n"},
		{"POST empty", []string{":method", "POST", ":scheme", "https", ":path", "/u", ":authority", "h"}, false,
			"POST /u HTTP/1.1\r\nhost: h\r\ncontent-length: 0\r\n\r\n"},
		{"host field only", []string{":method", "GET", ":scheme", "http", ":path", "/", "host", "a:81"}, false,
			"GET / HTTP/1.1\r\nhost: a:81\r\n\r\n"},
		{"no authority at all", []string{":method", "GET", ":scheme", "http", ":path", "/"}, false,
			"GET / HTTP/1.1\r\nhost: \r\n\r\n"},
		{"CONNECT", []string{":method", "CONNECT", ":authority", "a:443"}, true,
			"CONNECT a:443 HTTP/1.1\r\nhost: a:443\r\n\r\n"},
		{"OPTIONS *", []string{":method", "OPTIONS", ":scheme", "https", ":path", "*", ":authority", "a"}, false,
			"OPTIONS * HTTP/1.1\r\nhost: a\r\n\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.headers(1, !tc.body, tc.kv...)
			cl.feed()
			r := cl.h.reqs[1]
			if r == nil {
				t.Fatalf("refused: %q", cl.frames())
			}
			head := append(AppendHTTP1(nil, r, tc.body), "\r\n"...)
			if string(head) != tc.want {
				t.Fatalf("head\n%q\nwant\n%q", head, tc.want)
			}
			p, err := h1(t, head)
			if err != nil {
				t.Fatalf("http1 refuses %q: %v", head, err)
			}
			if string(p.Method.Bytes(head)) != r.Method {
				t.Fatalf("method %q", p.Method.Bytes(head))
			}
			switch {
			case r.IsConnect():
			case r.ContentLength >= 0:
				if p.Body != http1.BodyLength || p.ContentLength != r.ContentLength {
					t.Fatalf("framing %v %d", p.Body, p.ContentLength)
				}
			case tc.body:
				if p.Body != http1.BodyChunked {
					t.Fatalf("framing %v", p.Body)
				}
			}
		})
	}
}

func TestHTTP1Trailers(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/")
	cl.fr.WriteData(1, false, []byte("abc"))
	cl.headers(1, true, "x-sum", "1", "te", "trailers")
	cl.feed()
	got := string(AppendHTTP1Trailers(nil, cl.h.trail[1]))
	if got != "0\r\nx-sum: 1\r\n\r\n" {
		t.Fatalf("%q", got)
	}
	if !strings.HasSuffix(got, "\r\n\r\n") {
		t.Fatal("no final CRLF")
	}
}
