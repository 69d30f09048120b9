package faults

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"
)

// TestErrorsOnAKeptAliveConnection: after a complete exchange, a second
// request that stalls gets 408, a malformed one 400, as a first one does.
func TestErrorsOnAKeptAliveConnection(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"http_request_ms": 300, "client_ms": 5000}})
	for _, tc := range []struct {
		name   string
		second string
		status int
	}{
		{"stalled head", "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: abc\r\n", 408},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, fp)
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, _, err := readResp(br, "GET"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("first request: %v %v", resp, err)
			}
			io.WriteString(c, tc.second)
			resp, _, err := readResp(br, "GET")
			if err != nil || resp.StatusCode != tc.status {
				t.Fatalf("second request: got %v, %v; want %d", resp, err, tc.status)
			}
			closedAfter(t, c, br, 2*time.Second)
		})
	}
	p.healthy(t)
}

// TestResponseWithAHigherMinorVersion: RFC 9110 §2.5: a response whose
// status line says HTTP/1.2 is handled as HTTP/1.1, as requests are.
func TestResponseWithAHigherMinorVersion(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, b, err := readResp(bufio.NewReader(c), "GET")
	if err != nil || resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("got %v %q %v; want 200 ok", resp, b, err)
	}
	p.healthy(t)
}

// TestBadChunkWithTheHeadIs502: a response whose head is valid but whose
// first chunk size (in the same read) is not: nothing went to the client
// yet, so it gets a 502, not an empty close.
func TestBadChunkWithTheHeadIs502(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nMARK\r\n0\r\n\r\n")
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	all, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(all), "HTTP/1.1 502 ") {
		t.Fatalf("got %q; want a 502", all)
	}
	p.healthy(t)
}

// TestServerResetReachesTheClientAsAReset: a server that resets its
// connection (SO_LINGER 0) after a close-delimited http body, or in a tcp
// stream, aborted: the client must see a reset, not a clean end (which
// reads as a complete body or stream).
func TestServerResetReachesTheClientAsAReset(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	body := make([]byte, 100<<10)
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		c.Write(body)
		rst(c)
		return false
	})
	tport, _ := listen(t, func(c net.Conn) {
		c.Write(body)
		rst(c)
	})
	p.backend("web", "http", nil, srv{"s1", port})
	p.backend("tweb", "tcp", nil, srv{"t1", tport})
	fp := p.frontend("pub", "http", "web", nil)
	tp := p.frontend("tpub", "tcp", "tweb", nil)
	for i := 0; i < 5; i++ {
		c := dial(t, fp)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if !isReset(err) {
			t.Errorf("http, close-delimited: %d bytes then %v; want a reset", len(got), err)
		}
		tc := dial(t, tp)
		got, err = io.ReadAll(tc)
		if !isReset(err) {
			t.Errorf("tcp: %d bytes then %v; want a reset", len(got), err)
		}
	}
	p.healthy(t)
}
