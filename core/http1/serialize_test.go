package http1

import (
	"net/netip"
	"testing"
)

func TestAppendHelpers(t *testing.T) {
	cases := []struct {
		name string
		got  []byte
		want string
	}{
		{"request line", AppendRequestLine(nil, []byte("GET"), []byte("/a?b")), "GET /a?b HTTP/1.1\r\n"},
		{"status line with reason", AppendStatusLine(nil, 200, []byte("Fine")), "HTTP/1.1 200 Fine\r\n"},
		{"status line default reason", AppendStatusLine(nil, 404, nil), "HTTP/1.1 404 Not Found\r\n"},
		{"header", AppendHeader(nil, "X-A", []byte("1")), "X-A: 1\r\n"},
		{"header string", AppendHeaderString(nil, "Connection", "upgrade"), "Connection: upgrade\r\n"},
		{"content length", AppendContentLength(nil, 1234567890123), "Content-Length: 1234567890123\r\n"},
		{"chunk size", AppendChunkSize(nil, 0x1f40), "1f40\r\n"},
		{"xff ipv4", AppendXForwardedFor(nil, netip.MustParseAddr("192.0.2.1")), "X-Forwarded-For: 192.0.2.1\r\n"},
		{"xff v4-mapped", AppendXForwardedFor(nil, netip.MustParseAddr("::ffff:192.0.2.1")), "X-Forwarded-For: 192.0.2.1\r\n"},
		{"xff ipv6", AppendXForwardedFor(nil, netip.MustParseAddr("2001:db8::1")), "X-Forwarded-For: 2001:db8::1\r\n"},
		{"xfp http", AppendXForwardedProto(nil, false), "X-Forwarded-Proto: http\r\n"},
		{"xfp https", AppendXForwardedProto(nil, true), "X-Forwarded-Proto: https\r\n"},
		{"via 1.1", AppendVia(nil, 1, "spliced"), "Via: 1.1 spliced\r\n"},
		{"via 1.0", AppendVia(nil, 0, "spliced"), "Via: 1.0 spliced\r\n"},
		{"appends", AppendVia([]byte("x"), 1, "p"), "xVia: 1.1 p\r\n"},
	}
	for _, tc := range cases {
		if string(tc.got) != tc.want {
			t.Errorf("%s: got %q want %q", tc.name, tc.got, tc.want)
		}
	}
}

// TestRewrittenHeadParses rebuilds a request the way the proxy will and
// parses the result: what we send a server must pass our own parser.
func TestRewrittenHeadParses(t *testing.T) {
	var r Request
	if _, err := r.Parse(browserRequest); err != nil {
		t.Fatal(err)
	}
	out := AppendRequestLine(nil, r.Method.Bytes(browserRequest), r.Target.Bytes(browserRequest))
	out = r.AppendEndToEnd(out, browserRequest, 0)
	out = AppendXForwardedFor(out, netip.MustParseAddr("192.0.2.9"))
	out = AppendXForwardedProto(out, true)
	out = AppendVia(out, r.Minor, "spliced")
	out = append(out, "\r\n"...)
	var r2 Request
	n, err := r2.Parse(out)
	if err != nil || n != len(out) {
		t.Fatalf("n=%d err=%v in %q", n, err, out)
	}
	if _, ok := r2.Get(out, "connection"); ok {
		t.Error("Connection forwarded")
	}
	if v, _ := r2.Get(out, "x-forwarded-for"); string(v) != "192.0.2.9" {
		t.Errorf("xff %q", v)
	}
	if r2.N != r.N-1+3 {
		t.Errorf("N = %d, want %d", r2.N, r.N+2)
	}
}

// TestInterimThenFinalResponse: 100 Continue, then the final response in
// the same buffer, parsed with one Response reset between them.
func TestInterimThenFinalResponse(t *testing.T) {
	in := []byte("HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok")
	var r Response
	n, err := r.Parse(in, MethodPOST)
	if err != nil || !r.Interim || r.Status != 100 {
		t.Fatalf("interim: n=%d err=%v status=%d", n, err, r.Status)
	}
	rest := in[n:]
	r.Reset()
	n2, err := r.Parse(rest, MethodPOST)
	if err != nil || r.Interim || r.Status != 201 || r.Body != BodyLength || string(rest[n2:]) != "ok" {
		t.Fatalf("final: n=%d err=%v status=%d", n2, err, r.Status)
	}
}

// TestAppendEndToEndStrip drops the fields with the prefix, whatever their
// case, and keeps the others (a name shorter than the prefix included).
func TestAppendEndToEndStrip(t *testing.T) {
	in := []byte("GET / HTTP/1.1\r\nHost: a\r\nx-client-cert-verified: SUCCESS\r\nX-CLIENT-CERT-Subject: CN=m\r\nX-Client: 1\r\nX-Client-Certs: 2\r\nConnection: close\r\n\r\n")
	var r Request
	if _, err := r.Parse(in); err != nil {
		t.Fatal(err)
	}
	got := string(r.AppendEndToEndStrip(nil, in, 0, []byte("X-Client-Cert-")))
	if want := "Host: a\r\nX-Client: 1\r\nX-Client-Certs: 2\r\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestAppendEndToEndStripUnderscore: a name that spells the prefix with
// '_' for '-' is dropped too: CGI, PHP, WSGI and Rack servers read both
// as HTTP_X_CLIENT_CERT_..., so the client's X_Client_Cert_Verified would
// stand beside (or replace) the proxy's X-Client-Cert-Verified there.
func TestAppendEndToEndStripUnderscore(t *testing.T) {
	in := []byte("GET / HTTP/1.1\r\nHost: a\r\nX_Client_Cert_Verified: SUCCESS\r\nx-client_cert-Subject: CN=m\r\nX_Client_Certs: 2\r\n\r\n")
	var r Request
	if _, err := r.Parse(in); err != nil {
		t.Fatal(err)
	}
	got := string(r.AppendEndToEndStrip(nil, in, 0, []byte("X-Client-Cert-")))
	if want := "Host: a\r\nX_Client_Certs: 2\r\n"; got != want {
		t.Errorf("got %q want %q", got, want)
	}
}

// TestAppendEndToEndDropXForwardedProto: with DropXForwardedProto every
// client X-Forwarded-Proto field goes, whatever its case or '_' for '-';
// other X-Forwarded-* fields and longer names stay; without it they all
// pass. A Connection field naming it drops it either way.
func TestAppendEndToEndDropXForwardedProto(t *testing.T) {
	const head = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: https\r\nx-forwarded-proto: https\r\nX_FORWARDED_PROTO: https\r\nX-Forwarded-Protocol: a\r\nX-Forwarded-Host: b\r\nX-Forwarded-Port: 443\r\nForwarded: proto=https\r\n"
	for _, tc := range []struct {
		name, in string
		keep     Keep
		want     string
	}{
		{"dropped", head + "\r\n", DropXForwardedProto,
			"Host: a\r\nX-Forwarded-Protocol: a\r\nX-Forwarded-Host: b\r\nX-Forwarded-Port: 443\r\nForwarded: proto=https\r\n"},
		{"kept without the option", head + "\r\n", 0,
			"Host: a\r\nX-Forwarded-Proto: https\r\nx-forwarded-proto: https\r\nX_FORWARDED_PROTO: https\r\nX-Forwarded-Protocol: a\r\nX-Forwarded-Host: b\r\nX-Forwarded-Port: 443\r\nForwarded: proto=https\r\n"},
		{"named by Connection", "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Forwarded-Proto\r\nX-Forwarded-Proto: https\r\n\r\n", 0,
			"Host: a\r\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := []byte(tc.in)
			var r Request
			if _, err := r.Parse(in); err != nil {
				t.Fatal(err)
			}
			if got := string(r.AppendEndToEnd(nil, in, tc.keep)); got != tc.want {
				t.Errorf("got  %q\nwant %q", got, tc.want)
			}
		})
	}
}
