package faults

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestServerQueueIsFIFOAcrossLoops: one server with maxconn 1 behind 2
// loops; 12 requests queue one after the other (each seen in the queue
// before the next is sent): the server gets them in that order, whatever
// loop each came through (one FIFO per backend, as HAProxy's).
func TestServerQueueIsFIFOAcrossLoops(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2, "distribution": "round-robin"})
	var mu sync.Mutex
	var order []string
	first := make(chan struct{})
	release := make(chan struct{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		mu.Lock()
		order = append(order, r.URL.Path)
		n := len(order)
		mu.Unlock()
		if n == 1 {
			close(first)
			<-release
		}
		_, err := io.WriteString(c, okResp("ok"))
		return err == nil
	})
	p.must("POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers":  []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": port, "maxconn": 1}},
		"timeouts": map[string]any{"server_ms": 10000, "queue_ms": 10000}})
	fp := p.frontend("pub", "http", "web", nil)
	var wg sync.WaitGroup
	send := func(i int) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second)
			if err != nil {
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(15 * time.Second))
			fmt.Fprintf(c, "GET /%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
			readResp(bufio.NewReader(c), "GET")
		}()
	}
	send(0)
	<-first
	for i := 1; i <= 12; i++ {
		send(i)
		testutil.Eventually(t, 5*time.Second, func() bool {
			_, be := p.stats("", "web")
			return be.Queue == int64(i)
		}, "request "+strconv.Itoa(i)+" queued")
	}
	close(release)
	wg.Wait()
	for i, pth := range order {
		if pth != "/"+strconv.Itoa(i) {
			t.Fatalf("the server got %v, want /0 to /12 in order", order)
		}
	}
	p.healthy(t)
}

// TestQueuedRequestsOnARemovedLoop: requests queued behind a busy server
// on both loops when nbthread goes 2 -> 1: every one is served, the ones
// of the removed loop too (they are in flight), each with its own answer.
func TestQueuedRequestsOnARemovedLoop(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2, "distribution": "round-robin", "grace_ms": 10000})
	first := make(chan struct{})
	release := make(chan struct{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		if r.URL.Path == "/hold" {
			close(first)
			<-release
		}
		_, err := io.WriteString(c, okResp(r.URL.Path))
		return err == nil
	})
	p.must("POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers":  []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": port, "maxconn": 1}},
		"timeouts": map[string]any{"server_ms": 10000, "queue_ms": 10000}})
	fp := p.frontend("pub", "http", "web", nil)
	hold := dial(t, fp)
	io.WriteString(hold, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
	<-first
	var cs []net.Conn
	for i := 0; i < 6; i++ {
		c := dial(t, fp)
		fmt.Fprintf(c, "GET /q%d HTTP/1.1\r\nHost: a\r\n\r\n", i)
		cs = append(cs, c)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { _, be := p.stats("", "web"); return be.Queue == 6 }, "6 queued")
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1})
	close(release)
	for i, c := range append([]net.Conn{hold}, cs...) {
		want := "/hold"
		if i > 0 {
			want = "/q" + strconv.Itoa(i-1)
		}
		resp, b, err := readResp(bufio.NewReader(c), "GET")
		if err != nil || resp.StatusCode != 200 || string(b) != want {
			t.Fatalf("client %d: %v %q %v; want 200 %s", i, resp, b, err, want)
		}
	}
	p.healthy(t)
}
