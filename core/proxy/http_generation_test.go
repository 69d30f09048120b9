package proxy

import (
	"bufio"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPKeptAliveConnectionFollowsTheCurrentGeneration: an http
// connection resolves each new request against its bind's current
// frontend (as the engine swaps it on a configuration change), while a
// request in flight finishes on the generation it started with, and the
// frontend that accepted the connection keeps its OnClose.
func TestHTTPKeptAliveConnectionFollowsTheCurrentGeneration(t *testing.T) {
	e := newEnv(t, defaultTuning())
	release := make(chan struct{})
	a := newRawOrigin(t, func(head string) string {
		if strings.HasPrefix(head, "GET /slow ") {
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 1\r\n\r\na"
	})
	b := newRawOrigin(t, okAnswer("b"))
	r := newRawOrigin(t, okAnswer("r"))

	var closed1, closed2 atomic.Int64
	fe1 := httpFrontend(t, nil, a.addr)
	fe1.OnClose = func(int) { closed1.Add(1) }
	fe2 := httpFrontend(t, nil, b.addr)
	fe2.OnClose = func(int) { closed2.Add(1) }
	fe2.Stats = fe1.Stats // as the engine carries them by name
	routed := httpFrontend(t, nil, r.addr)
	fe2.HTTP.Routes = []Route{NewRoute("", "/new/", "", routed.Backend)}

	var cur atomic.Pointer[Frontend]
	cur.Store(fe1)
	c := e.connect(func(fd int) { e.w.StartHTTP(fd, fe1, &cur) })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	get := func(path string) string {
		t.Helper()
		if _, err := c.Write([]byte("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, body)
		}
		return string(body)
	}
	if got := get("/"); got != "a" {
		t.Fatalf("first request went to %q, want a", got)
	}
	// A request in flight when the generation changes finishes on its own.
	if _, err := c.Write([]byte("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(a.received(), "GET /slow ")
	}, "the slow request at the origin")
	cur.Store(fe2)
	close(release)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	if body, _ := io.ReadAll(resp.Body); string(body) != "a" {
		t.Fatalf("in-flight request answered by %q, want a", body)
	}
	// The next requests on the same connection use the new generation:
	// its default backend and a route it added.
	if got := get("/"); got != "b" {
		t.Fatalf("after the change the request went to %q, want b", got)
	}
	if got := get("/new/x"); got != "r" {
		t.Fatalf("a route added after the connection opened: %q, want r", got)
	}
	c.Close()
	e.waitIdle()
	if closed1.Load() != 1 || closed2.Load() != 0 {
		t.Fatalf("OnClose of the accepting frontend %d, of the new one %d; want 1, 0", closed1.Load(), closed2.Load())
	}
}
