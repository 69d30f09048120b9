package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// endlessServer answers every connection with a response head (http: a
// head announcing 1 GiB) and then writes until the connection fails.
func endlessServer(t *testing.T, httpHead bool) *net.TCPAddr {
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
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
	}).Addr
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
	testutil.Eventually(t, 5*time.Second, func() bool { return e.state().live == 0 }, "the stalled client dropped")
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
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello")
		<-release
		io.WriteString(c, "world")
	}).Addr
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
	testutil.Eventually(t, 5*time.Second, func() bool {
		return time.Since(start) > time.Second || e.state().live == 0
	}, "1 s of server pause")
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
	testutil.Eventually(t, 5*time.Second, func() bool { return e.state().live == 0 }, "the stalled client dropped")
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
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) { <-stop; c.Close() }).Addr // never reads
	fe := frontend(t, SpliceOff, addr)
	cfg := config.Backend{Name: "be", Servers: []*config.Server{{Name: "s0", Address: addr.IP.String(), Port: addr.Port}}}
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
	testutil.Eventually(t, 5*time.Second, func() bool { return e.state().live == 0 }, "the stalled server dropped")
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

// TestHTTPClientTimeoutBoundsAStalledRequestBody: a client that stops in
// the middle of its request body gets a 408 after client_ms, although the
// server (which waits for the body) has a longer server_ms.
func TestHTTPClientTimeoutBoundsAStalledRequestBody(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c) // reads, never answers
	}).Addr
	fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.ServerMs = 10000 }, addr)
	fe.HTTP.ClientTimeout = 300 * time.Millisecond
	c := e.dialHTTP(fe)
	start := time.Now()
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\nonly part of it")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("stalled request body: %v, want a 408", err)
	}
	if resp.StatusCode != 408 {
		t.Fatalf("stalled request body: %d, want 408", resp.StatusCode)
	}
	if d := time.Since(start); d < 300*time.Millisecond || d > 5*time.Second {
		t.Fatalf("408 after %v, want about client_ms (300 ms)", d)
	}
}

// TestHTTPServerTimeoutBoundsAServerThatStopsReading: a server that stops
// reading a request body (and never answers) gets server_ms, then the
// client a 504, although client_ms is longer.
func TestHTTPServerTimeoutBoundsAServerThatStopsReading(t *testing.T) {
	e := newEnv(t, defaultTuning())
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetReadBuffer(4096)
		readHead(bufio.NewReader(c))
		<-stop // never reads the body
	}).Addr
	fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.ServerMs = 300 }, addr)
	fe.HTTP.ClientTimeout = 10 * time.Second
	c := e.dialHTTP(fe)
	go func() {
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 1073741824\r\n\r\n")
		buf := make([]byte, 64<<10)
		for {
			if _, err := c.Write(buf); err != nil {
				return
			}
		}
	}()
	start := time.Now()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("server that stopped reading: %v, want a 504", err)
	}
	if resp.StatusCode != 504 {
		t.Fatalf("server that stopped reading: %d, want 504", resp.StatusCode)
	}
	t.Logf("504 after %v (server_ms 300, client_ms 10 s)", time.Since(start))
}

// TestHTTPTimeoutCuttingAResponseResets: server_ms that cuts an exchange
// after the response started (the server stalls in the middle of the
// body) resets both connections, as an abort does (package doc, "Aborts"):
// a clean end would make a close-delimited body, or a dechunked one for an
// HTTP/1.0 client, look complete to the client. The client reads the
// bytes before the cut, then ECONNRESET; the stalled server reads
// ECONNRESET, not an end of stream. The cut still counts as a timeout,
// not as an abort.
func TestHTTPTimeoutCuttingAResponseResets(t *testing.T) {
	for _, tc := range []struct {
		name, head, proto string
	}{
		{"server stalls/close-delimited", "HTTP/1.1 200 OK\r\n\r\n", "1.1"},
		{"server stalls/content-length", "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n", "1.1"},
		{"server stalls/dechunked for 1.0", "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\n", "1.0"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			srvEnd := make(chan error, 1)
			addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				if _, err := readHead(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, tc.head+"hello")
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err := c.Read(make([]byte, 1)) // stalls: the proxy cuts
				srvEnd <- err
			}).Addr
			fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.ServerMs = 200 }, addr)
			c := e.dialHTTP(fe)
			io.WriteString(c, "GET / HTTP/"+tc.proto+"\r\nHost: a\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			got, err := io.ReadAll(resp.Body)
			if string(got) != "hello" || !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("client read %q then %v, want hello then ECONNRESET", got, err)
			}
			if err := <-srvEnd; !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("stalled server read %v, want ECONNRESET", err)
			}
			e.waitIdle()
			if n := fe.Stats.Loop(0).Aborts.Load(); n != 0 {
				t.Errorf("%d aborts counted for a timeout", n)
			}
		})
	}
}
