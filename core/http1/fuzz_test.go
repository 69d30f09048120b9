package http1

import (
	"bufio"
	"bytes"
	"net/http"
	"net/textproto"
	"net/url"
	"slices"
	"testing"
)

// knownLaxerThanNetHTTP explains, for a head we accept and net/http
// refuses, which documented difference it is; "" means none (a bug to
// investigate). Each reason is a deliberate choice, see doc.go.
func knownLaxerThanNetHTTP(r *Request, buf []byte) string {
	// Percent-encoding and IP-literal syntax of the target are the
	// server's to judge (HAProxy does not check them either); we only
	// refuse bytes that could split or hide parts of the request line.
	if _, err := url.ParseRequestURI(string(r.Target.Bytes(buf))); err != nil && r.MethodID != MethodCONNECT {
		return "target URI syntax (escapes, brackets) not validated"
	}
	return ""
}

// FuzzRequestVsNetHTTP feeds the same bytes to Request.Parse and to
// net/http.ReadRequest. Where both accept a complete head they must agree
// on method, target, version, Host, header fields and body framing. We may
// refuse what net/http accepts (we are stricter); net/http refusing what
// we accept must be one of the documented differences above.
func FuzzRequestVsNetHTTP(f *testing.F) {
	for _, tc := range requestCases {
		f.Add([]byte(tc.in))
	}
	f.Add(browserRequest)
	f.Fuzz(func(t *testing.T, data []byte) {
		r := &Request{}
		r.Reset()
		n, err := r.Parse(data)

		// incremental feeding must agree with the whole
		r2 := &Request{}
		r2.Reset()
		half := len(data) / 2
		n2, err2 := r2.Parse(data[:half])
		if err2 == nil && n2 == 0 {
			n2, err2 = r2.Parse(data)
		}
		if n != n2 || err != err2 || (err == nil && n > 0 && (r.Body != r2.Body || r.ContentLength != r2.ContentLength || r.N != r2.N)) {
			t.Fatalf("split at %d differs: %d %v vs %d %v", half, n2, err2, n, err)
		}
		if err != nil || n == 0 {
			return
		}
		// net/http does not skip empty lines before the request line.
		start := int(r.Method.Off)
		req, gerr := http.ReadRequest(bufio.NewReader(bytes.NewReader(data[start:n])))
		if gerr != nil {
			if why := knownLaxerThanNetHTTP(r, data); why == "" {
				t.Fatalf("we accept, net/http refuses (%v): %q", gerr, data[:n])
			}
			return
		}
		if req.Method != string(r.Method.Bytes(data)) || req.RequestURI != string(r.Target.Bytes(data)) ||
			req.ProtoMajor != 1 || min(req.ProtoMinor, 1) != r.Minor {
			// HTTP/1.2..1.9 are handled as 1.1 (RFC 9110 §2.5).
			t.Fatalf("request line differs: net/http %q %q %d.%d", req.Method, req.RequestURI, req.ProtoMajor, req.ProtoMinor)
		}
		host := r.Host
		if r.Form == FormAuthority {
			host = r.Authority // net/http takes the CONNECT target as Host
		}
		if !EqualFold(host.Bytes(data), req.Host) {
			t.Fatalf("host differs: ours %q net/http %q", host.Bytes(data), req.Host)
		}
		if req.Close != r.Close {
			t.Fatalf("close differs: ours %v net/http %v", r.Close, req.Close)
		}
		switch r.Body {
		case BodyChunked:
			if !slices.Equal(req.TransferEncoding, []string{"chunked"}) || req.ContentLength != -1 {
				t.Fatalf("chunked: net/http TE %q CL %d", req.TransferEncoding, req.ContentLength)
			}
		case BodyLength:
			if req.ContentLength != r.ContentLength || req.TransferEncoding != nil {
				t.Fatalf("length %d: net/http CL %d TE %q", r.ContentLength, req.ContentLength, req.TransferEncoding)
			}
		case BodyNone:
			if req.ContentLength != 0 || req.TransferEncoding != nil {
				t.Fatalf("no body: net/http CL %d TE %q", req.ContentLength, req.TransferEncoding)
			}
		}
		ours := map[string][]string{}
		for i := 0; i < r.N; i++ {
			k := textproto.CanonicalMIMEHeaderKey(string(r.Name(data, i)))
			ours[k] = append(ours[k], string(r.Value(data, i)))
		}
		skip := map[string]bool{"Host": true, "Content-Length": true, "Transfer-Encoding": true}
		if _, has := ours["Cache-Control"]; !has {
			skip["Cache-Control"] = true // net/http derives it from Pragma: no-cache
		}
		for k, v := range ours {
			if !skip[k] && !slices.Equal(v, req.Header[k]) {
				t.Fatalf("field %q: ours %q net/http %q", k, v, req.Header[k])
			}
		}
		for k := range req.Header {
			if _, ok := ours[k]; !ok && !skip[k] {
				t.Fatalf("net/http has field %q we do not", k)
			}
		}
	})
}

// FuzzChunked: the decoder never panics, never consumes more than it is
// given, reports payload inside what it consumed, and gives the same
// result fed in two pieces as whole.
func FuzzChunked(f *testing.F) {
	for _, tc := range chunkedCases {
		f.Add([]byte(tc.in), uint16(len(tc.in)/2))
	}
	f.Add(chunkedBody, uint16(7))
	f.Add([]byte("1\r\na\r\n0\r\nX-Client-Cert-Verified: SUCCESS\r\nx_forwarded_proto: https\r\n\r\n"), uint16(20))
	// The trailer refusal too gives the same result whatever the cut.
	const refuse = RefuseHopByHop | RefuseXForwardedFor | RefuseXForwardedProto
	f.Fuzz(func(t *testing.T, data []byte, cut uint16) {
		whole := &Chunked{MaxBody: 1 << 20, MaxTrailer: 512, Refuse: refuse, RefusePrefix: "X-Client-Cert-"}
		wn, wp, werr := decodeAll(whole, data)
		if wn > len(data) {
			t.Fatalf("consumed %d of %d", wn, len(data))
		}
		if whole.Total() != int64(len(wp)) {
			t.Fatalf("Total %d, payload %d", whole.Total(), len(wp))
		}
		c := int(cut)
		if c > len(data) {
			c = len(data)
		}
		d := &Chunked{MaxBody: 1 << 20, MaxTrailer: 512, Refuse: refuse, RefusePrefix: "X-Client-Cert-"}
		n1, p1, err := decodeAll(d, data[:c])
		if err == nil && n1 == c {
			n2, p2, e2 := decodeAll(d, data[c:])
			n1, p1, err = n1+n2, append(p1, p2...), e2
		}
		if err != werr || (err == nil && (n1 != wn || !bytes.Equal(p1, wp) || d.Done() != whole.Done())) {
			t.Fatalf("cut %d: n=%d err=%v done=%v; whole n=%d err=%v done=%v", c, n1, err, d.Done(), wn, werr, whole.Done())
		}
		// a body we accept must be one net/http's chunked reader accepts too
		if werr == nil && whole.Done() {
			if _, err := http.ReadRequest(bufio.NewReader(bytes.NewReader(
				append([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), data[:wn]...)))); err != nil {
				t.Fatalf("head refused: %v", err)
			}
			req, _ := http.ReadRequest(bufio.NewReader(bytes.NewReader(
				append([]byte("POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n"), data[:wn]...))))
			body := new(bytes.Buffer)
			if _, err := body.ReadFrom(req.Body); err != nil {
				t.Fatalf("net/http refuses a chunked body we accept: %v (%q)", err, data[:wn])
			}
			if !bytes.Equal(body.Bytes(), wp) {
				t.Fatalf("payload differs: ours %q net/http %q", wp, body.Bytes())
			}
		}
	})
}

// FuzzResponse: never panics, same result in two pieces as whole.
func FuzzResponse(f *testing.F) {
	for _, tc := range responseCases {
		f.Add([]byte(tc.in), uint8(tc.req), uint16(len(tc.in)/3))
	}
	f.Fuzz(func(t *testing.T, data []byte, m uint8, cut uint16) {
		req := Method(m % 10)
		r := &Response{}
		r.Reset()
		n, err := r.Parse(data, req)
		c := min(int(cut), len(data))
		r2 := &Response{}
		r2.Reset()
		n2, err2 := r2.Parse(data[:c], req)
		if err2 == nil && n2 == 0 {
			n2, err2 = r2.Parse(data, req)
		}
		if n != n2 || err != err2 || r.Body != r2.Body || r.Status != r2.Status {
			t.Fatalf("cut %d differs", c)
		}
		if err == nil && n > 0 {
			if r.Status < 100 || r.Status > 999 || (r.Body == BodyUntilClose && !r.Close) {
				t.Fatalf("status %d body %v close %v", r.Status, r.Body, r.Close)
			}
			resp, gerr := http.ReadResponse(bufio.NewReader(bytes.NewReader(data[:n])), &http.Request{Method: methodName(req)})
			if gerr != nil {
				return // net/http refuses more (e.g. 1xx with a body framing); fine
			}
			if resp.StatusCode != r.Status {
				t.Fatalf("status: ours %d net/http %d", r.Status, resp.StatusCode)
			}
			switch r.Body {
			case BodyChunked:
				if !slices.Equal(resp.TransferEncoding, []string{"chunked"}) {
					t.Fatalf("chunked: net/http TE %q", resp.TransferEncoding)
				}
			case BodyLength:
				if resp.ContentLength != r.ContentLength {
					t.Fatalf("length %d: net/http %d", r.ContentLength, resp.ContentLength)
				}
			case BodyUntilClose:
				if resp.ContentLength != -1 || resp.TransferEncoding != nil || !resp.Close {
					t.Fatalf("until close: net/http CL %d TE %q close %v", resp.ContentLength, resp.TransferEncoding, resp.Close)
				}
			case BodyNone:
				// a 2xx to CONNECT is a tunnel to us, a body to net/http
				if resp.Body != http.NoBody && req != MethodCONNECT {
					t.Fatalf("no body: net/http reads a body (CL %d TE %q)", resp.ContentLength, resp.TransferEncoding)
				}
			}
			if r.Body != BodyNone && resp.Close != r.Close {
				t.Fatalf("close: ours %v net/http %v", r.Close, resp.Close)
			}
		}
	})
}

func methodName(m Method) string {
	switch m {
	case MethodHEAD:
		return "HEAD"
	case MethodCONNECT:
		return "CONNECT"
	case MethodPOST:
		return "POST"
	}
	return "GET"
}
