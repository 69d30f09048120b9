package http1

import (
	"strconv"
	"strings"
	"testing"
)

var responseCases = []struct {
	name    string
	in      string
	req     Method
	status  int // 0 accepted, else the error status (always 502)
	code    int
	body    Body
	cl      int64
	close   bool
	upgrade bool
	interim bool
}{
	{name: "200 with Content-Length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello", req: MethodGET, code: 200, body: BodyLength, cl: 5},
	{name: "200 chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", req: MethodGET, code: 200, body: BodyChunked, cl: -1},
	{name: "200 without framing reads until close", in: "HTTP/1.1 200 OK\r\nServer: x\r\n\r\n", req: MethodGET, code: 200, body: BodyUntilClose, cl: -1, close: true},
	{name: "204 has no body despite Content-Length", in: "HTTP/1.1 204 No Content\r\nContent-Length: 10\r\n\r\n", req: MethodGET, code: 204, body: BodyNone, cl: 10},
	{name: "304 has no body", in: "HTTP/1.1 304 Not Modified\r\nContent-Length: 1234\r\n\r\n", req: MethodGET, code: 304, body: BodyNone, cl: 1234},
	{name: "HEAD response has no body", in: "HTTP/1.1 200 OK\r\nContent-Length: 1234\r\n\r\n", req: MethodHEAD, code: 200, body: BodyNone, cl: 1234},
	{name: "HEAD response chunked has no body", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", req: MethodHEAD, code: 200, body: BodyNone, cl: -1},
	{name: "HEAD response without Content-Length", in: "HTTP/1.1 200 OK\r\n\r\n", req: MethodHEAD, code: 200, body: BodyNone, cl: -1},
	{name: "100 Continue is interim", in: "HTTP/1.1 100 Continue\r\n\r\n", req: MethodPOST, code: 100, body: BodyNone, cl: -1, interim: true},
	{name: "103 Early Hints is interim", in: "HTTP/1.1 103 Early Hints\r\nLink: </a>\r\n\r\n", req: MethodGET, code: 103, body: BodyNone, cl: -1, interim: true},
	{name: "101 Switching Protocols", in: "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n", req: MethodGET, code: 101, body: BodyNone, cl: -1, upgrade: true},
	{name: "2xx to CONNECT is a tunnel", in: "HTTP/1.1 200 Connection established\r\n\r\n", req: MethodCONNECT, code: 200, body: BodyNone, cl: -1, upgrade: true},
	{name: "HTTP/1.0 closes", in: "HTTP/1.0 200 OK\r\nContent-Length: 1\r\n\r\nx", req: MethodGET, code: 200, body: BodyLength, cl: 1, close: true},
	{name: "HTTP/1.0 keep-alive", in: "HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nContent-Length: 1\r\n\r\nx", req: MethodGET, code: 200, body: BodyLength, cl: 1},
	{name: "Connection close", in: "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: 0\r\n\r\n", req: MethodGET, code: 200, body: BodyLength, cl: 0, close: true},
	{name: "missing reason", in: "HTTP/1.1 404\r\nContent-Length: 0\r\n\r\n", req: MethodGET, code: 404, body: BodyLength, cl: 0},
	{name: "empty reason", in: "HTTP/1.1 404 \r\nContent-Length: 0\r\n\r\n", req: MethodGET, code: 404, body: BodyLength, cl: 0},
	// RFC 9110 §2.5: a higher minor version is handled as 1.1 (keep-alive).
	{name: "HTTP/1.2 is handled as 1.1", in: "HTTP/1.2 200 OK\r\nContent-Length: 1\r\n\r\nx", req: MethodGET, code: 200, body: BodyLength, cl: 1},
	{name: "HTTP/1.9 without framing", in: "HTTP/1.9 200 OK\r\n\r\n", req: MethodGET, code: 200, body: BodyUntilClose, cl: -1, close: true},
	{name: "unknown status", in: "HTTP/1.1 599 Whatever\r\nContent-Length: 0\r\n\r\n", req: MethodGET, code: 599, body: BodyLength, cl: 0},

	{name: "CL and TE", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", req: MethodGET, status: 502},
	{name: "TE gzip only", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip\r\n\r\n", req: MethodGET, status: 502},
	{name: "TE gzip, chunked", in: "HTTP/1.1 200 OK\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", req: MethodGET, status: 502},
	{name: "TE in HTTP/1.0", in: "HTTP/1.0 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", req: MethodGET, status: 502},
	{name: "Content-Length identical list", in: "HTTP/1.1 200 OK\r\nContent-Length: 5, 5\r\n\r\nhello", req: MethodGET, status: 502},
	{name: "Content-Length identical lines", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 5\r\n\r\nhello", req: MethodGET, status: 502},
	{name: "differing Content-Length", in: "HTTP/1.1 200 OK\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\n", req: MethodGET, status: 502},
	{name: "HTTP/2.0", in: "HTTP/2.0 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "HTTP/0.9", in: "HTTP/0.9 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "HTTP/3.0", in: "HTTP/3.0 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "HTTP/1.x", in: "HTTP/1.x 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "HTTP/11.1", in: "HTTP/11.1 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "two-digit status", in: "HTTP/1.1 20 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "four-digit status", in: "HTTP/1.1 2000 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "status below 100", in: "HTTP/1.1 099 X\r\n\r\n", req: MethodGET, status: 502},
	{name: "CTL in reason", in: "HTTP/1.1 200 O\x01K\r\n\r\n", req: MethodGET, status: 502},
	{name: "bare LF", in: "HTTP/1.1 200 OK\nContent-Length: 0\r\n\r\n", req: MethodGET, status: 502},
	{name: "bare CR in value", in: "HTTP/1.1 200 OK\r\nX: a\rb\r\n\r\n", req: MethodGET, status: 502},
	{name: "obs-fold", in: "HTTP/1.1 200 OK\r\nX: a\r\n b\r\n\r\n", req: MethodGET, status: 502},
	{name: "space before colon", in: "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\n", req: MethodGET, status: 502},
	{name: "leading empty line", in: "\r\nHTTP/1.1 200 OK\r\n\r\n", req: MethodGET, status: 502},
	{name: "head over limit", in: "HTTP/1.1 200 OK\r\nX: " + strings.Repeat("v", 17000) + "\r\n\r\n", req: MethodGET, status: 502},
}

func TestResponseFramingTable(t *testing.T) {
	for _, tc := range responseCases {
		t.Run(tc.name, func(t *testing.T) {
			r := &Response{} // the zero value is ready
			n, err := r.Parse([]byte(tc.in), tc.req)
			if tc.status != 0 {
				if e, ok := err.(*Error); !ok || e.Status != tc.status {
					t.Fatalf("n=%d err=%v, want status %d", n, err, tc.status)
				}
				return
			}
			if err != nil || n != strings.Index(tc.in, "\r\n\r\n")+4 {
				t.Fatalf("n=%d err=%v", n, err)
			}
			if r.Status != tc.code || r.Body != tc.body || r.ContentLength != tc.cl || r.Close != tc.close ||
				r.Upgrade != tc.upgrade || r.Interim != tc.interim {
				t.Errorf("got status %d body %v cl %d close %v upgrade %v interim %v",
					r.Status, r.Body, r.ContentLength, r.Close, r.Upgrade, r.Interim)
			}
		})
	}
}

func TestResponseIncrementalSameAsWhole(t *testing.T) {
	type res struct {
		n      int
		err    error
		status int
		body   Body
		cl     int64
		reason Span
	}
	for _, tc := range responseCases {
		buf := []byte(tc.in)
		r := &Response{}
		r.Reset()
		n, err := r.Parse(buf, tc.req)
		want := res{n, err, r.Status, r.Body, r.ContentLength, r.Reason}
		step := 1
		if len(buf) > 2000 {
			step = 89
		}
		for i := 0; i <= len(buf); i += step {
			r2 := &Response{}
			r2.Reset()
			n2, err2 := r2.Parse(buf[:i], tc.req)
			if err2 == nil && n2 == 0 {
				n2, err2 = r2.Parse(buf, tc.req)
			}
			if got := (res{n2, err2, r2.Status, r2.Body, r2.ContentLength, r2.Reason}); got != want {
				t.Fatalf("%s: split at %d: got %+v want %+v", tc.name, i, got, want)
			}
		}
	}
}

// TestErrorResponsesAreValid parses every proxy-generated error with our own
// response parser: status, Connection: close, Cache-Control: no-cache (a
// cache in front must not keep a 503) and an exact Content-Length.
func TestErrorResponsesAreValid(t *testing.T) {
	for _, status := range []int{400, 403, 404, 405, 408, 413, 414, 417, 431, 501, 502, 503, 504, 505, 999} {
		out := AppendError(nil, status)
		r := &Response{}
		r.Reset()
		n, err := r.Parse(out, MethodGET)
		if err != nil {
			t.Fatalf("%d: %v", status, err)
		}
		want := status
		if status == 999 {
			want = 500
		}
		body := out[n:]
		if !strings.Contains(string(out[:n]), "\r\nCache-Control: no-cache\r\n") {
			t.Errorf("%d: no Cache-Control: no-cache in %q", status, out[:n])
		}
		if r.Status != want || !r.Close || r.Body != BodyLength || r.ContentLength != int64(len(body)) {
			t.Errorf("%d: status %d close %v cl %d body %q", status, r.Status, r.Close, r.ContentLength, body)
		}
		if !strings.HasPrefix(string(body), strconv.Itoa(want)+" "+StatusText(want)) ||
			string(r.Reason.Bytes(out)) != StatusText(want) {
			t.Errorf("%d: body %q reason %q", status, body, r.Reason.Bytes(out))
		}
	}
}
