package faults

// Hostile uses of the fixes of issue 12: odd timing, pipelining, repeated
// changes, smuggling attempts.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// TestEarlyAnswerDoesNotSmuggle: a POST whose 4 MB body is made of
// requests, then a pipelined GET /after; the server answers 413 right
// after the head (no Connection: close), then reads the body and goes on,
// as RFC 9112 lets it. The body must never be taken for requests: the
// server never parses /smuggled, the client gets the 413 and then the
// answer to /after or a close, never an answer to /smuggled.
func TestEarlyAnswerDoesNotSmuggle(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	var mu sync.Mutex
	var paths []string
	port, _ := listen(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			mu.Lock()
			paths = append(paths, r.URL.Path)
			mu.Unlock()
			if r.URL.Path == "/up" {
				io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 5\r\n\r\nearly")
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			if r.URL.Path != "/up" {
				io.WriteString(c, okResp(r.URL.Path))
			}
		}
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	inner := strings.Repeat("GET /smuggled HTTP/1.1\r\nHost: a\r\n\r\n", 4<<20/36)
	for i := 0; i < 4; i++ {
		c := dial(t, fp)
		go func() {
			io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: "+strconv.Itoa(len(inner))+"\r\n\r\n")
			io.WriteString(c, inner)
			io.WriteString(c, "GET /after HTTP/1.1\r\nHost: a\r\n\r\n")
		}()
		br := bufio.NewReader(c)
		resp, b, err := readResp(br, "POST")
		if err != nil || resp.StatusCode != 413 || string(b) != "early" {
			t.Fatalf("got %v %q %v; want the 413", resp, b, err)
		}
		// then either the answer to /after (the body went through) or a
		// close (the proxy stopped forwarding the request)
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		if _, err := br.Peek(1); err == io.EOF || isReset(err) {
			continue
		}
		resp, b, err = readResp(br, "GET")
		if err != nil || resp.StatusCode != 200 || string(b) != "/after" {
			t.Fatalf("after the 413: %v %q %v; want the answer to /after or a close", resp, b, err)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	for _, pth := range paths {
		if pth == "/smuggled" {
			t.Fatalf("a request inside a body reached the server: %v", paths[:min(len(paths), 10)])
		}
	}
	t.Logf("the server parsed %v", paths)
	p.healthy(t)
}

// TestRoutesChangeUnderAKeptAliveConnection: a client keeps one
// connection and pipelines requests while the frontend's routes flip
// between two backends; each response must come from the backend the
// routes named when the request was parsed, and after the API answered,
// from the new one. Deleting the frontend then closes the connection
// cleanly.
func TestRoutesChangeUnderAKeptAliveConnection(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("one", "http", nil, named(t, "one"))
	p.backend("two", "http", nil, named(t, "two"))
	fp := p.frontend("pub", "http", "one", nil)
	c := dial(t, fp)
	br := bufio.NewReader(c)
	get := func(n int) []string {
		var sb strings.Builder
		for i := 0; i < n; i++ {
			sb.WriteString("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, sb.String())
		var out []string
		for i := 0; i < n; i++ {
			resp, b, err := readResp(br, "GET")
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("pipelined request %d: %v %v", i, resp, err)
			}
			out = append(out, string(b))
		}
		return out
	}
	for round := 0; round < 6; round++ {
		to := []string{"one", "two"}[round%2]
		p.must("PATCH", "/api/v1/frontends/pub", map[string]any{"routes": []map[string]any{{"path_prefix": "/x", "backend": to}}})
		for _, got := range get(5) {
			if got != to {
				t.Fatalf("round %d: a request sent after the routes named %s went to %s", round, to, got)
			}
		}
	}
	p.must("DELETE", "/api/v1/frontends/pub", nil)
	c.SetDeadline(time.Now().Add(5 * time.Second))
	io.WriteString(c, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	// the frontend is gone: either this last request is still served
	// (the connection was accepted by it) or the connection closes
	resp, b, err := readResp(br, "GET")
	t.Logf("after the frontend was deleted: %v %q %v", resp, b, err)
	if err == nil && resp.StatusCode != 200 {
		t.Fatalf("after the frontend was deleted: %d", resp.StatusCode)
	}
	p.healthy(t)
}

// TestFrontendMaxconnHolds: frontend maxconn 2 on 2 loops; 12 clients
// connect at once: at no time do more than 2 tunnels run (issue 12 saw 3
// to 4); each waiting client is served when one leaves.
func TestFrontendMaxconnHolds(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2})
	var live, peak atomic.Int64
	port, _ := listen(t, func(c net.Conn) {
		n := live.Add(1)
		for {
			pk := peak.Load()
			if n <= pk || peak.CompareAndSwap(pk, n) {
				break
			}
		}
		c.Write([]byte("g"))
		io.Copy(io.Discard, c)
		live.Add(-1)
		c.Close()
	})
	p.backend("web", "tcp", nil, srv{"s1", port})
	fp := p.frontend("pub", "tcp", "web", map[string]any{"maxconn": 2})
	for round := 0; round < 3; round++ {
		var cs []net.Conn
		for i := 0; i < 12; i++ {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			cs = append(cs, c)
		}
		// serve them all, two at a time: read a greeting from whoever
		// has one, close it, go on
		served := 0
		deadline := time.Now().Add(10 * time.Second)
		for served < len(cs) && time.Now().Before(deadline) {
			for i, c := range cs {
				if c == nil {
					continue
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Millisecond))
				if _, err := c.Read(make([]byte, 1)); err == nil {
					c.Close()
					cs[i] = nil
					served++
				}
			}
		}
		if served < len(cs) {
			t.Fatalf("round %d: %d of %d clients served", round, served, len(cs))
		}
	}
	if pk := peak.Load(); pk > 2 {
		t.Fatalf("%d tunnels at once with frontend maxconn 2", pk)
	}
	p.healthy(t)
}

// TestPathNormalisationRouting: routes match the normalised path; what
// reaches the server is the path as sent. Every spelling that resolves
// under /admin must reach the admin backend (or be refused), never the
// public one.
func TestPathNormalisationRouting(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("public", "http", nil, named(t, "public"))
	p.backend("admin", "http", nil, named(t, "admin"))
	fp := p.frontend("pub", "http", "admin", map[string]any{"routes": []map[string]any{{"path_prefix": "/public/", "backend": "public"}}})
	for _, path := range []string{
		"/public/../admin",
		"/public/./../admin",
		"/public/%2e%2e/admin",
		"/public/%2E%2E/admin",
		"/public/.%2e/admin",
		"/public/../../admin",
		"/public/x/../../admin",
		"/public/..",
		"/public/%2e%2e",
		"/public/..?q",
		"/public/..#f",
	} {
		c := dial(t, fp)
		fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path)
		resp, b, err := readResp(bufio.NewReader(c), "GET")
		if err != nil {
			t.Errorf("%s: %v", path, err)
			continue
		}
		if resp.StatusCode == 200 && string(b) == "public" {
			t.Errorf("%s reached the public backend", path)
		}
	}
	p.healthy(t)
}
