package faults

// Faults of the client side: headers that never complete, a client that
// never reads what it asked for.

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestSlowClientHeaders: with http_request_ms 300, a head that does not
// complete in time gets 408 and a close, however it trickles in; nothing
// of it reaches the server.
func TestSlowClientHeaders(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	s := named(t, "a")
	p.backend("web", "http", nil, s)
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"http_request_ms": 300, "client_ms": 5000}})
	head := "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: " + "abcdefghijklmnopqrstuvwxyz" + "\r\n"
	for _, tc := range []struct {
		name string
		send func(c net.Conn)
	}{
		{"one byte every 20 ms", func(c net.Conn) {
			for i := 0; i < len(head); i++ {
				if _, err := c.Write([]byte{head[i]}); err != nil {
					return
				}
				time.Sleep(20 * time.Millisecond)
			}
		}},
		{"part of the head, then silence", func(c net.Conn) { io.WriteString(c, head) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// http_request_ms counts from the proxy's accept, which can
			// come before dial returns: the lower bound counts from
			// before the dial, the upper one from after it.
			t0 := time.Now()
			c := dial(t, fp)
			t1 := time.Now()
			go tc.send(c)
			br := bufio.NewReader(c)
			resp, _, err := readResp(br, "GET")
			el := time.Since(t0)
			if err != nil || resp.StatusCode != 408 {
				t.Fatalf("got %v, %v after %v; want 408", resp, err, el)
			}
			if el < 250*time.Millisecond || time.Since(t1) > 3*time.Second {
				t.Fatalf("408 %v after the dial began, want about http_request_ms (300 ms)", el)
			}
			closedAfter(t, c, br, 2*time.Second)
		})
	}
	f, _ := p.stats("pub", "web")
	t.Logf("counters: frontend %v", f)
	if f.Timeouts < 2 {
		t.Errorf("frontend timeouts %d, want 2", f.Timeouts)
	}
	p.healthy(t)
}

// dialSmallRcvbuf connects with a 4 KiB receive buffer: a client that
// does not read stops the flow at once.
func dialSmallRcvbuf(t *testing.T, port int) net.Conn {
	t.Helper()
	d := net.Dialer{Timeout: 2 * time.Second, Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	c, err := d.DialContext(context.Background(), "tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// bigOrigin answers every request with a 100 MiB body and counts the
// bytes it managed to write.
func bigOrigin(t *testing.T) (srv, *atomic.Int64) {
	var written atomic.Int64
	chunk := make([]byte, 256<<10)
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 104857600\r\n\r\n")
		for n := 0; n < 100<<20; n += len(chunk) {
			k, err := c.Write(chunk)
			written.Add(int64(k))
			if err != nil {
				return false
			}
		}
		return true
	})
	return srv{"s1", port}, &written
}

// stalls waits until n stops growing (the same value 300 ms apart) and
// returns it.
func stalls(t *testing.T, n *atomic.Int64, d time.Duration) int64 {
	t.Helper()
	last := int64(-1)
	var v int64
	testutil.Eventually(t, d, func() bool {
		time.Sleep(300 * time.Millisecond) // the sampling period of the measure
		v = n.Load()
		stalled := v == last && v > 0
		last = v
		return stalled
	}, "the transfer to stall")
	return v
}

// TestClientNeverReads: a client asks for 100 MiB and never reads. The
// transfer stops at what the socket buffers hold (backpressure), the
// proxy's resident memory stays bounded, with splice off and auto.
func TestClientNeverReads(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	s, written := bigOrigin(t)
	p.backend("web", "http", map[string]any{"server_ms": 30000}, s)
	ports := map[string]int{
		"off":  p.frontend("off", "http", "web", map[string]any{"splice": "off"}),
		"auto": p.frontend("auto", "http", "web", map[string]any{"splice": "auto"}),
	}
	base := p.rssKiB(t)
	for _, mode := range []string{"off", "auto"} {
		t.Run("splice "+mode, func(t *testing.T) {
			before := written.Load()
			c := dialSmallRcvbuf(t, ports[mode])
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
			got := stalls(t, written, 10*time.Second) - before
			rss := p.rssKiB(t)
			t.Logf("the server wrote %d KiB before the stall; RSS %d KiB (%+d KiB)", got>>10, rss, rss-base)
			if got > 32<<20 {
				t.Fatalf("the server wrote %d MiB to a client that reads nothing", got>>20)
			}
			if rss-base > 16<<10 {
				t.Fatalf("RSS grew by %d KiB for one client that does not read", rss-base)
			}
			c.Close()
		})
	}
	p.healthy(t)
}

// TestSilentConnectionGets408: a connection that sends nothing before
// http_request_ms gets 408, then a close (HAProxy does the same).
func TestSilentConnectionGets408(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"http_request_ms": 300}})
	c := dial(t, fp)
	t0 := time.Now()
	br := bufio.NewReader(c)
	resp, _, err := readResp(br, "GET")
	if err != nil || resp.StatusCode != 408 {
		t.Fatalf("got %v, %v after %v; want 408", resp, err, time.Since(t0))
	}
	closedAfter(t, c, br, 2*time.Second)
	p.healthy(t)
}

// TestClientTimeoutBoundsANonReadingClient: with client_ms 1000 and
// server_ms (http) or tunnel_ms (tcp) 8000, a client that asked for
// 100 MiB and reads nothing is closed about client_ms after the flow
// stopped, not after server_ms.
func TestClientTimeoutBoundsANonReadingClient(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	s, written := bigOrigin(t)
	p.backend("web", "http", map[string]any{"server_ms": 8000}, s)
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"client_ms": 1000}})
	blob := make([]byte, 1<<20)
	tport, _ := listen(t, func(c net.Conn) {
		for i := 0; i < 100; i++ {
			if _, err := c.Write(blob); err != nil {
				return
			}
		}
	})
	p.backend("tweb", "tcp", map[string]any{"tunnel_ms": 8000}, srv{"t1", tport})
	tp := p.frontend("tpub", "tcp", "tweb", map[string]any{"timeouts": map[string]any{"client_ms": 1000, "tunnel_ms": 8000}})
	for _, tc := range []struct {
		name string
		port int
		req  string
	}{{"http", fp, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n"}, {"tcp", tp, ""}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dialSmallRcvbuf(t, tc.port)
			t0 := time.Now()
			io.WriteString(c, tc.req)
			if tc.name == "http" {
				stalls(t, written, 5*time.Second)
			}
			// the client cannot see a close behind the data it does not
			// read: watch the frontend's current connections instead
			fe := map[string]string{"http": "pub", "tcp": "tpub"}[tc.name]
			// the stats are a snapshot: see the connection open first,
			// or a snapshot taken before the accept reads as "closed"
			testutil.Eventually(t, 6*time.Second, func() bool {
				f, _ := p.stats(fe, "")
				return f.ConnTotal == 1
			}, "the proxy to count the client")
			testutil.Eventually(t, 6*time.Second, func() bool {
				f, _ := p.stats(fe, "")
				return f.ConnCur == 0
			}, "the proxy to close the client")
			if el := time.Since(t0); el > 4*time.Second {
				t.Fatalf("closed %v after the request, want about client_ms (1 s) after the stall", el)
			}
			f, _ := p.stats(fe, "")
			t.Logf("counters: frontend %v", f)
			if f.Timeouts != 1 {
				t.Errorf("frontend timeouts %d, want 1", f.Timeouts)
			}
		})
	}
	p.healthy(t)
}

// TestIdleKeepAliveClosesSilently: a kept-alive connection silent for
// http_keep_alive_ms after its response is closed without a byte (no 408:
// the client sent nothing it waits an answer for).
func TestIdleKeepAliveClosesSilently(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"http_keep_alive_ms": 300, "http_request_ms": 3000}})
	c := dial(t, fp)
	br := bufio.NewReader(c)
	// The idle clock starts when the proxy has sent the response, which
	// can be well before the client reads it: the lower bound counts
	// from before the request, the upper one from the response read.
	t0 := time.Now()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _, err := readResp(br, "GET"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("request: %v %v", resp, err)
	}
	t1 := time.Now()
	closedAfter(t, c, br, 3*time.Second)
	if el := time.Since(t0); el < 250*time.Millisecond || time.Since(t1) > 2*time.Second {
		t.Fatalf("closed %v after the request was sent (%v after the response), want about http_keep_alive_ms (300 ms)", el, time.Since(t1))
	}
	p.healthy(t)
}

// TestManySilentConnections: 500 connections that send nothing: each gets
// its 408 at about http_request_ms, and every one is released.
func TestManySilentConnections(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"http_request_ms": 300}})
	var cs []net.Conn
	for i := 0; i < 500; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	for i, c := range cs {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, _, err := readResp(bufio.NewReader(c), "GET")
		if err != nil || resp.StatusCode != 408 {
			t.Fatalf("connection %d: %v %v; want 408", i, resp, err)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		f, _ := p.stats("pub", "")
		return f.ConnCur == 0 && f.ConnTotal == 500
	}, "every connection released")
	p.healthy(t)
}

// TestErrorsOnAKeptAliveConnection: after a complete exchange, a second
// request that stalls gets 408, a malformed one 400, an unrouted one 503,
// as a first one does.
func TestErrorsOnAKeptAliveConnection(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "", map[string]any{"timeouts": map[string]any{"http_request_ms": 300, "client_ms": 5000},
		"routes": []map[string]any{{"path_prefix": "/first", "backend": "web"}}})
	for _, tc := range []struct {
		name   string
		second string
		status int
	}{
		{"stalled head", "GET / HTTP/1.1\r\nHost: a\r\nX-Slow: abc\r\n", 408},
		{"missing Host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"CL and TE", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"no route", "GET /elsewhere HTTP/1.1\r\nHost: a\r\n\r\n", 503},
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
