package http1

import (
	"strings"
	"testing"
)

func parseRequest(buf []byte, lim Limits) (*Request, int, error) {
	r := &Request{Limits: lim}
	r.Reset()
	n, err := r.Parse(buf)
	return r, n, err
}

// hostile lists requests by the defect they carry and the status the proxy
// must answer (0: accepted). Accepted rows state the framing the proxy will
// act on; every rejected row closes the connection and nothing of it may
// reach a server.
var requestCases = []struct {
	name   string
	in     string
	status int
	body   Body
	cl     int64
	check  func(t *testing.T, r *Request, buf []byte)
}{
	// accepted
	{name: "simple GET", in: "GET /index.html?q=1 HTTP/1.1\r\nHost: example.com\r\nUser-Agent: t\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if string(r.Method.Bytes(buf)) != "GET" || r.MethodID != MethodGET || string(r.Target.Bytes(buf)) != "/index.html?q=1" ||
				string(r.Host.Bytes(buf)) != "example.com" || r.Minor != 1 || r.Close || r.N != 2 || r.Form != FormOrigin {
				t.Errorf("fields wrong: %+v", r.Head.Headers[:r.N])
			}
			if v, ok := r.Get(buf, "user-agent"); !ok || string(v) != "t" {
				t.Errorf("Get user-agent = %q %v", v, ok)
			}
		}},
	{name: "POST with Content-Length", in: "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\n\r\nhello", body: BodyLength, cl: 5},
	{name: "Content-Length zero", in: "POST /f HTTP/1.1\r\nHost: a\r\nContent-Length: 0\r\n\r\n", body: BodyLength, cl: 0},
	{name: "chunked POST", in: "POST /f HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", body: BodyChunked, cl: -1},
	{name: "Transfer-Encoding case-insensitive", in: "POST /f HTTP/1.1\r\nHost: a\r\ntransfer-encoding: ChUnKeD\r\n\r\n", body: BodyChunked, cl: -1},
	{name: "HTTP/1.0 without Host closes", in: "GET / HTTP/1.0\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if !r.Close || r.Minor != 0 || r.HasHost {
				t.Errorf("Close=%v Minor=%d HasHost=%v", r.Close, r.Minor, r.HasHost)
			}
		}},
	// RFC 9110 §2.5: a higher minor version is handled as the highest we
	// support, 1.1 (keep-alive, Host required); HTTP/2.0 and others 505.
	{name: "HTTP/1.2 is handled as 1.1", in: "GET / HTTP/1.2\r\nHost: a\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Close || r.Minor != 1 {
				t.Errorf("Close=%v Minor=%d", r.Close, r.Minor)
			}
		}},
	{name: "HTTP/1.9 without Host", in: "GET / HTTP/1.9\r\n\r\n", status: 400},
	{name: "HTTP/1.0 keep-alive", in: "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Close {
				t.Error("Close with keep-alive")
			}
		}},
	{name: "Connection close", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: foo, close\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if !r.Close {
				t.Error("not Close")
			}
		}},
	{name: "websocket upgrade", in: "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if !r.Upgrade {
				t.Error("Upgrade not recognised")
			}
		}},
	{name: "Upgrade without Connection upgrade is not an upgrade", in: "GET /ws HTTP/1.1\r\nHost: a\r\nUpgrade: websocket\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Upgrade {
				t.Error("Upgrade without Connection: upgrade")
			}
		}},
	{name: "expect 100-continue", in: "PUT /x HTTP/1.1\r\nHost: a\r\nExpect: 100-Continue\r\nContent-Length: 3\r\n\r\n", body: BodyLength, cl: 3,
		check: func(t *testing.T, r *Request, buf []byte) {
			if !r.Expect100 {
				t.Error("Expect100 not set")
			}
		}},
	{name: "expect ignored in HTTP/1.0", in: "PUT /x HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 3\r\n\r\n", body: BodyLength, cl: 3,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Expect100 {
				t.Error("Expect100 set for HTTP/1.0")
			}
		}},
	{name: "OPTIONS asterisk", in: "OPTIONS * HTTP/1.1\r\nHost: a\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Form != FormAsterisk {
				t.Errorf("form %d", r.Form)
			}
		}},
	{name: "CONNECT authority-form", in: "CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Form != FormAuthority || string(r.Authority.Bytes(buf)) != "example.com:443" {
				t.Errorf("form %d authority %q", r.Form, r.Authority.Bytes(buf))
			}
		}},
	{name: "absolute-form with matching Host", in: "GET http://Example.com:8080/p?q HTTP/1.1\r\nHost: example.com:8080\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if r.Form != FormAbsolute || string(r.Authority.Bytes(buf)) != "Example.com:8080" {
				t.Errorf("form %d authority %q", r.Form, r.Authority.Bytes(buf))
			}
		}},
	{name: "absolute-form HTTP/1.0 takes Host from target", in: "GET https://h.example/ HTTP/1.0\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if !r.HasHost || string(r.Host.Bytes(buf)) != "h.example" {
				t.Errorf("host %q", r.Host.Bytes(buf))
			}
		}},
	{name: "leading empty lines skipped", in: "\r\n\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if string(r.Method.Bytes(buf)) != "GET" {
				t.Errorf("method %q", r.Method.Bytes(buf))
			}
		}},
	{name: "obs-text in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Name: caf\xc3\xa9\r\n\r\n", body: BodyNone, cl: -1},
	{name: "empty value and OWS trimmed", in: "GET / HTTP/1.1\r\nHost: a\r\nX-Empty:\r\nX-Pad: \t v \t\r\n\r\n", body: BodyNone, cl: -1,
		check: func(t *testing.T, r *Request, buf []byte) {
			if v, _ := r.Get(buf, "x-pad"); string(v) != "v" {
				t.Errorf("x-pad %q", v)
			}
		}},
	{name: "underscore name is just another field", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer_Encoding: chunked\r\n\r\n", body: BodyNone, cl: -1},
	{name: "empty Host allowed", in: "GET / HTTP/1.1\r\nHost:\r\n\r\n", body: BodyNone, cl: -1},
	{name: "unknown method token", in: "PROPFIND /d HTTP/1.1\r\nHost: a\r\n\r\n", body: BodyNone, cl: -1},
	{name: "CONNECT IP-literal", in: "CONNECT [2001:db8::1]:443 HTTP/1.1\r\nHost: [2001:db8::1]:443\r\n\r\n", body: BodyNone, cl: -1},
	{name: "Host with empty port", in: "GET / HTTP/1.1\r\nHost: a:\r\n\r\n", body: BodyNone, cl: -1},
	{name: "IPv6 Host", in: "GET / HTTP/1.1\r\nHost: [::1]:8080\r\n\r\n", body: BodyNone, cl: -1},

	// line endings
	{name: "bare LF ends request line", in: "GET / HTTP/1.1\nHost: a\r\n\r\n", status: 400},
	{name: "bare LF ends header", in: "GET / HTTP/1.1\r\nHost: a\n\r\n", status: 400},
	{name: "bare LF ends head", in: "GET / HTTP/1.1\r\nHost: a\r\n\n", status: 400},
	{name: "bare CR in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\rb\r\n\r\n", status: 400},
	{name: "bare CR in name", in: "GET / HTTP/1.1\r\nHost: a\r\nX\r: a\r\n\r\n", status: 400},
	{name: "bare CR in request line", in: "GET /\r HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CR CR LF", in: "GET / HTTP/1.1\r\r\nHost: a\r\n\r\n", status: 400},

	// request line
	{name: "method not a token", in: "G(T / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "tab after method", in: "GET\t/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "method too long", in: strings.Repeat("M", 33) + " / HTTP/1.1\r\nHost: a\r\n\r\n", status: 501},
	{name: "leading space", in: " GET / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "two spaces after method", in: "GET  / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "two spaces before version", in: "GET /  HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "space inside target", in: "GET /a b HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CTL in target", in: "GET /a\x01b HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "DEL in target", in: "GET /a\x7fb HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "fragment in target", in: "GET /a#b HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "non-ASCII target", in: "GET /caf\xc3\xa9 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "NUL in target", in: "GET /\x00 HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "asterisk for GET", in: "GET * HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "relative target", in: "GET index.html HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CONNECT origin-form", in: "CONNECT / HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CONNECT without port", in: "CONNECT example.com HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "CONNECT empty port", in: "CONNECT example.com: HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute-form other scheme", in: "GET ftp://a/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute-form userinfo", in: "GET http://u:p@a/ HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute-form empty authority", in: "GET http:///x HTTP/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "absolute-form Host mismatch", in: "GET http://a/ HTTP/1.1\r\nHost: b\r\n\r\n", status: 400},
	{name: "HTTP/0.9 request", in: "GET /\r\n\r\n", status: 400},
	{name: "HTTP/2.0 version", in: "GET / HTTP/2.0\r\nHost: a\r\n\r\n", status: 505},
	{name: "HTTP/0.9 version", in: "GET / HTTP/0.9\r\nHost: a\r\n\r\n", status: 505},
	{name: "HTTP/3.0 version", in: "GET / HTTP/3.0\r\nHost: a\r\n\r\n", status: 505},
	{name: "lower-case version", in: "GET / http/1.1\r\nHost: a\r\n\r\n", status: 400},
	{name: "version without dot", in: "GET / HTTP/11\r\nHost: a\r\n\r\n", status: 400},
	{name: "space after version", in: "GET / HTTP/1.1 \r\nHost: a\r\n\r\n", status: 400},
	{name: "request line over limit", in: "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", status: 414},
	{name: "over-long request line ending in bare LF", in: "GET /" + strings.Repeat("a", 9000) + "\nHost: a\r\n\r\n", status: 414},
	{name: "unterminated request line over limit", in: "GET /" + strings.Repeat("a", 9000), status: 414},

	// header fields
	{name: "space before colon", in: "GET / HTTP/1.1\r\nHost : a\r\n\r\n", status: 400},
	{name: "tab before colon on Transfer-Encoding", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\t: chunked\r\n\r\n", status: 400},
	{name: "space inside name", in: "GET / HTTP/1.1\r\nHost: a\r\nX Y: 1\r\n\r\n", status: 400},
	{name: "name not a token", in: "GET / HTTP/1.1\r\nHost: a\r\nX@Y: 1\r\n\r\n", status: 400},
	{name: "vertical tab in name", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding\x0b: chunked\r\n\r\n", status: 400},
	{name: "empty name", in: "GET / HTTP/1.1\r\nHost: a\r\n: v\r\n\r\n", status: 400},
	{name: "no colon", in: "GET / HTTP/1.1\r\nHost: a\r\nNoColon\r\n\r\n", status: 400},
	{name: "obs-fold", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n b\r\n\r\n", status: 400},
	{name: "obs-fold with tab", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\r\n\tb\r\n\r\n", status: 400},
	{name: "whitespace before first field", in: "GET / HTTP/1.1\r\n Host: a\r\n\r\n", status: 400},
	{name: "NUL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x00b\r\n\r\n", status: 400},
	{name: "CTL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x01b\r\n\r\n", status: 400},
	{name: "DEL in value", in: "GET / HTTP/1.1\r\nHost: a\r\nX: a\x7fb\r\n\r\n", status: 400},
	{name: "too many fields", in: "GET / HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X: y\r\n", 100) + "\r\n", status: 431},
	{name: "head over limit", in: "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("v", 17000) + "\r\n\r\n", status: 431},
	{name: "unterminated head over limit", in: "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("v", 17000), status: 431},
	{name: "sixteen Connection options", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: close, a1, a2, a3, a4, a5, a6, a7, a8, a9, b0, b1, b2, b3, b4, b5, b6\r\n\r\n", body: BodyNone, cl: -1},
	{name: "seventeen Connection options", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: a0, a1, a2, a3, a4, a5, a6, a7, a8\r\nConnection: a9, b0, b1, b2, b3, b4, b5, b6\r\n\r\n", status: 400},
	{name: "invalid Connection token", in: "GET / HTTP/1.1\r\nHost: a\r\nConnection: a b\r\n\r\n", status: 400},

	// Host
	{name: "missing Host", in: "GET / HTTP/1.1\r\nX: a\r\n\r\n", status: 400},
	{name: "duplicate Host", in: "GET / HTTP/1.1\r\nHost: a\r\nHost: a\r\n\r\n", status: 400},
	{name: "duplicate Host HTTP/1.0", in: "GET / HTTP/1.0\r\nHost: a\r\nhost: b\r\n\r\n", status: 400},
	{name: "Host with space", in: "GET / HTTP/1.1\r\nHost: a b\r\n\r\n", status: 400},
	{name: "Host with slash", in: "GET / HTTP/1.1\r\nHost: a/b\r\n\r\n", status: 400},
	{name: "Host bad escape", in: "GET / HTTP/1.1\r\nHost: a%zz\r\n\r\n", status: 400},
	{name: "Host unclosed IP-literal", in: "GET / HTTP/1.1\r\nHost: [::1\r\n\r\n", status: 400},
	{name: "Host port only", in: "GET / HTTP/1.1\r\nHost: :80\r\n\r\n", status: 400},
	{name: "Host non-numeric port", in: "GET / HTTP/1.1\r\nHost: a:b\r\n\r\n", status: 400},
	{name: "Host two colons", in: "GET / HTTP/1.1\r\nHost: a:1:2\r\n\r\n", status: 400},
	{name: "CONNECT bad escape", in: "CONNECT %:0 HTTP/1.0\r\n\r\n", status: 400},
	{name: "Host with userinfo", in: "GET / HTTP/1.1\r\nHost: u@a\r\n\r\n", status: 400},

	// Content-Length
	{name: "Content-Length sign", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: +5\r\n\r\n", status: 400},
	{name: "Content-Length negative", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: -1\r\n\r\n", status: 400},
	{name: "Content-Length inner space", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1 2\r\n\r\n", status: 400},
	{name: "Content-Length hex", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 0x5\r\n\r\n", status: 400},
	{name: "Content-Length empty", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length:\r\n\r\n", status: 400},
	{name: "Content-Length trailing comma", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5,\r\n\r\n", status: 400},
	// A list or a repeated field is refused even with one number: it is
	// forwarded as received, and what is behind us may read it otherwise.
	{name: "Content-Length identical list", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 5\r\n\r\n", status: 400},
	{name: "Content-Length identical lines", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\nContent-Length: 7\r\n\r\n", status: 400},
	{name: "Content-Length differing list", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5, 6\r\n\r\n", status: 400},
	{name: "Content-Length differing lines", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", status: 400},
	{name: "Content-Length overflow", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775808\r\n\r\n", status: 400},
	{name: "Content-Length max int64", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 9223372036854775807\r\n\r\n", body: BodyLength, cl: 9223372036854775807},
	{name: "Content-Length space before colon", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length : 5\r\n\r\n", status: 400},

	// Transfer-Encoding
	{name: "TE gzip only", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400},
	{name: "TE identity", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: identity\r\n\r\n", status: 400},
	{name: "TE chunked not final", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, gzip\r\n\r\n", status: 400},
	{name: "TE chunked twice", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked, chunked\r\n\r\n", status: 400},
	{name: "TE chunked on two lines", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
	{name: "TE chunked then gzip line", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: gzip\r\n\r\n", status: 400},
	{name: "TE gzip then chunked", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", status: 501},
	{name: "TE unknown then chunked on two lines", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: foo\r\nTransfer-Encoding: chunked\r\n\r\n", status: 501},
	{name: "TE with parameter", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked;q=1\r\n\r\n", status: 400},
	{name: "TE empty", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding:\r\n\r\n", status: 400},
	{name: "TE empty element", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: , chunked\r\n\r\n", status: 400},
	{name: "TE near miss", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: xchunked\r\n\r\n", status: 400},
	{name: "TE quoted", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: \"chunked\"\r\n\r\n", status: 400},
	{name: "TE in HTTP/1.0", in: "POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
	{name: "CL and TE", in: "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", status: 400},
	{name: "TE and CL zero", in: "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\nContent-Length: 0\r\n\r\n", status: 400},
	{name: "Connection names Content-Length", in: "POST / HTTP/1.1\r\nHost: a\r\nConnection: Content-Length\r\nContent-Length: 5\r\n\r\n", body: BodyLength, cl: 5,
		check: func(t *testing.T, r *Request, buf []byte) {
			i := r.Index(buf, "content-length", 0)
			if r.HopByHop(buf, i, 0) {
				t.Error("Content-Length stripped because Connection names it")
			}
		}},
}

func TestRequestHostileTable(t *testing.T) {
	for _, tc := range requestCases {
		t.Run(tc.name, func(t *testing.T) {
			buf := []byte(tc.in)
			r, n, err := parseRequest(buf, Limits{})
			if tc.status != 0 {
				e, ok := err.(*Error)
				if !ok || e.Status != tc.status {
					t.Fatalf("got n=%d err=%v, want status %d", n, err, tc.status)
				}
				return
			}
			if err != nil || n == 0 {
				t.Fatalf("got n=%d err=%v, want accepted", n, err)
			}
			if end := strings.Index(tc.in, "\r\n\r\n"); tc.in[:2] != "\r\n" && n != end+4 {
				t.Errorf("n = %d, want %d", n, end+4)
			}
			if r.Body != tc.body || r.ContentLength != tc.cl {
				t.Errorf("body %v cl %d, want %v %d", r.Body, r.ContentLength, tc.body, tc.cl)
			}
			if tc.check != nil {
				tc.check(t, r, buf)
			}
		})
	}
}

type outcome struct {
	n      int
	err    error
	body   Body
	cl     int64
	close  bool
	nh     int
	method Span
	target Span
}

func requestOutcome(r *Request, n int, err error) outcome {
	return outcome{n, err, r.Body, r.ContentLength, r.Close, r.N, r.Method, r.Target}
}

// TestRequestIncrementalSameAsWhole feeds every case split at every byte
// position (a prefix, then the whole) and one byte at a time, and requires
// the result of feeding it whole.
func TestRequestIncrementalSameAsWhole(t *testing.T) {
	for _, tc := range requestCases {
		buf := []byte(tc.in)
		r, n, err := parseRequest(buf, Limits{})
		want := requestOutcome(r, n, err)
		step := 1
		if len(buf) > 2000 {
			step = 97
		}
		for i := 0; i <= len(buf); i += step {
			r2 := &Request{}
			r2.Reset()
			n2, err2 := r2.Parse(buf[:i])
			if err2 == nil && n2 == 0 {
				n2, err2 = r2.Parse(buf)
			}
			if got := requestOutcome(r2, n2, err2); got != want {
				t.Fatalf("%s: split at %d: got %+v, want %+v", tc.name, i, got, want)
			}
		}
		r3 := &Request{}
		r3.Reset()
		var n3 int
		var err3 error
		for i := 0; i <= len(buf); i += step {
			n3, err3 = r3.Parse(buf[:i])
			if err3 != nil || n3 != 0 {
				break
			}
		}
		if err3 == nil && n3 == 0 {
			n3, err3 = r3.Parse(buf)
		}
		if got := requestOutcome(r3, n3, err3); got != want {
			t.Fatalf("%s: byte by byte: got %+v, want %+v", tc.name, got, want)
		}
	}
}

func TestRequestResetReusesForPipelinedRequests(t *testing.T) {
	in := []byte("GET /a HTTP/1.1\r\nHost: a\r\nContent-Length: 2\r\n\r\nxyGET /b HTTP/1.1\r\nHost: b\r\nConnection: close\r\n\r\n")
	r := &Request{}
	r.Reset()
	n, err := r.Parse(in)
	if err != nil || r.Body != BodyLength || r.ContentLength != 2 {
		t.Fatalf("first: n=%d err=%v", n, err)
	}
	rest := in[n+2:]
	r.Reset()
	n2, err := r.Parse(rest)
	if err != nil || n2 != len(rest) || string(r.Target.Bytes(rest)) != "/b" || !r.Close || r.ContentLength != -1 || r.N != 2 {
		t.Fatalf("second: n=%d err=%v target=%q close=%v", n2, err, r.Target.Bytes(rest), r.Close)
	}
}

func TestRequestLimits(t *testing.T) {
	in := []byte("GET /0123456789 HTTP/1.1\r\nHost: a\r\nA: 1\r\nB: 2\r\n\r\n")
	cases := []struct {
		name   string
		lim    Limits
		status int
	}{
		{"fits", Limits{MaxRequestLine: 26, MaxHead: len(in), MaxHeaders: 3}, 0},
		{"request line one byte over", Limits{MaxRequestLine: 25}, 414},
		{"head one byte over", Limits{MaxHead: len(in) - 1}, 431},
		{"headers one over", Limits{MaxHeaders: 2}, 431},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, n, err := parseRequest(in, tc.lim)
			if tc.status == 0 {
				if err != nil || n != len(in) {
					t.Fatalf("n=%d err=%v", n, err)
				}
				return
			}
			if e, ok := err.(*Error); !ok || e.Status != tc.status {
				t.Fatalf("n=%d err=%v want %d", n, err, tc.status)
			}
		})
	}
}

func TestRequestHopByHop(t *testing.T) {
	in := []byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: keep-alive, X-Secret, Upgrade\r\nKeep-Alive: 5\r\nProxy-Connection: x\r\nTE: trailers\r\nTrailer: X\r\n" +
		"Upgrade: websocket\r\nX-Secret: s\r\nX-Keep: k\r\nTransfer-Encoding: chunked\r\n\r\n")
	r, _, err := parseRequest(in, Limits{})
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		keep Keep
		want string
	}{
		{0, "Host: a\r\nX-Keep: k\r\n"},
		{KeepTransferEncoding, "Host: a\r\nTrailer: X\r\nX-Keep: k\r\nTransfer-Encoding: chunked\r\n"},
		{KeepUpgrade, "Host: a\r\nUpgrade: websocket\r\nX-Keep: k\r\n"},
	}
	for _, tc := range cases {
		if got := string(r.AppendEndToEnd(nil, in, tc.keep)); got != tc.want {
			t.Errorf("keep %d: got %q want %q", tc.keep, got, tc.want)
		}
	}
}
