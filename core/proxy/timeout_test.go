package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
)

// endlessServer answers every connection with a response head (http: a
// head announcing 1 GiB) and then writes until the connection fails.
func endlessServer(t *testing.T, httpHead bool) *net.TCPAddr {
	return origin(t, func(c *net.TCPConn) {
		defer c.Close()
		if httpHead {
			if _, err := readHead(bufio.NewReader(c)); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1073741824\r\n\r\n")
		}
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	})
}

// TestHTTPClientTimeoutBoundsAClientThatStopsReading: a client that asks
// for a large response and never reads is dropped after client_ms of no
// progress towards it, not after the (longer) server_ms.
func TestHTTPClientTimeoutBoundsAClientThatStopsReading(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.ServerMs = 10000 }, endlessServer(t, true))
	fe.HTTP.ClientTimeout = 300 * time.Millisecond
	c := e.dialHTTP(fe)
	start := time.Now()
	io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
	waitUntil(t, 5*time.Second, "the stalled client dropped", func() bool { return e.state().live == 0 })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("dropped after %v, before client_ms", d)
	}
	t.Logf("client that stopped reading dropped after %v (client_ms 300, server_ms 10000)", time.Since(start))
	e.waitIdle()
}

// TestHTTPClientTimeoutDoesNotCutASlowServer: while the proxy waits for the
// server (a pause in the middle of a response body), the client timeout
// does not run: server_ms bounds the wait.
func TestHTTPClientTimeoutDoesNotCutASlowServer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	release := make(chan struct{})
	addr := origin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		<-release
		io.WriteString(c, "world")
	})
	fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.ServerMs = 10000 }, addr)
	fe.HTTP.ClientTimeout = 200 * time.Millisecond
	c := e.dialHTTP(fe)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, b); err != nil {
		t.Fatal(err)
	}
	// Several client_ms pass while the server pauses.
	start := time.Now()
	waitUntil(t, 5*time.Second, "1 s of server pause", func() bool {
		return time.Since(start) > time.Second || e.state().live == 0
	})
	if e.state().live == 0 {
		t.Fatal("connection cut by client_ms while waiting for the server")
	}
	close(release)
	rest, err := io.ReadAll(resp.Body)
	if err != nil || string(rest) != "world" {
		t.Fatalf("rest of the body: %q, %v", rest, err)
	}
}

// TestHTTPFirstRequestTimeoutAnswers408: a new connection that sends
// nothing within http_request_ms gets a 408, then is closed.
func TestHTTPFirstRequestTimeoutAnswers408(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, nil, newRawOrigin(t, okAnswer("x")).addr)
	fe.HTTP.RequestTimeout = 200 * time.Millisecond
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("silent new connection: %v, want a 408", err)
	}
	if resp.StatusCode != 408 || !resp.Close {
		t.Fatalf("silent new connection: %d close=%v, want 408 with Connection: close", resp.StatusCode, resp.Close)
	}
	io.ReadAll(resp.Body)
	if _, err := br.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the 408: %v, want end of stream", err)
	}
}

// TestHTTPIdleKeepAliveClosedSilently: between requests, the keep-alive
// timeout closes the connection without an answer.
func TestHTTPIdleKeepAliveClosedSilently(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, nil, newRawOrigin(t, okAnswer("x")).addr)
	fe.HTTP.KeepAliveTimeout = 200 * time.Millisecond
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	if resp, body := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 || body != "x" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
	b, err := br.ReadByte()
	if !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive connection: %q, %v; want a silent close", b, err)
	}
}

// TestTCPClientTimeoutBoundsAClientThatStopsReading: in tcp mode too, a
// client that does not take what the server sends is dropped after
// client_ms without progress, long before tunnel_ms.
func TestTCPClientTimeoutBoundsAClientThatStopsReading(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := frontend(t, SpliceOff, endlessServer(t, false))
	fe.ClientTimeout = 300 * time.Millisecond
	start := time.Now()
	e.dial(fe)
	waitUntil(t, 5*time.Second, "the stalled client dropped", func() bool { return e.state().live == 0 })
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Fatalf("dropped after %v, before client_ms", d)
	}
	t.Logf("tcp client that stopped reading dropped after %v (client_ms 300, tunnel 1h)", time.Since(start))
	e.waitIdle()
}

// TestTCPServerTimeoutBoundsAServerThatStopsReading: symmetrically, a
// server that does not take what the client sends is dropped after
// server_ms without progress.
func TestTCPServerTimeoutBoundsAServerThatStopsReading(t *testing.T) {
	e := newEnv(t, defaultTuning())
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	addr := origin(t, func(c *net.TCPConn) { <-stop; c.Close() }) // never reads
	fe := frontend(t, SpliceOff, addr)
	cfg := config.Backend{Name: "be", Servers: []config.Server{{Name: "s0", Address: addr.IP.String(), Port: addr.Port}}}
	cfg.Timeouts.ServerMs = 300
	fe.Backend = backendOf(t, &cfg)
	c := e.dial(fe)
	go func() {
		buf := []byte(strings.Repeat("x", 64<<10))
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	waitUntil(t, 5*time.Second, "the stalled server dropped", func() bool { return e.state().live == 0 })
	t.Logf("server that stopped reading dropped after %v (server_ms 300, tunnel 1h)", time.Since(start))
}

// backendOf builds the proxy backend of cfg (normalised here).
func backendOf(t *testing.T, cfg *config.Backend) *Backend {
	t.Helper()
	cfg.Normalize()
	b, err := balance.Build(cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return NewBackend(b, 1, new(Counters))
}
