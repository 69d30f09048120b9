package proxy

import (
	"bufio"
	"errors"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// expectEOF reads c until end of stream, which must come within d with no
// byte before it.
func expectEOF(t *testing.T, c net.Conn, br *bufio.Reader, d time.Duration, what string) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	b, err := br.ReadByte()
	if err == nil {
		t.Fatalf("%s: got byte %q, want end of stream", what, b)
	}
	if !errors.Is(err, io.EOF) {
		t.Fatalf("%s: %v, want end of stream", what, err)
	}
}

// TestSoftStop: an idle keep-alive client and the pooled server connection
// are closed at once; a request in flight and a head being received
// finish, their responses carry Connection: close and the connections
// close after them; a tcp tunnel goes on.
func TestSoftStop(t *testing.T) {
	e := newEnv(t, defaultTuning())
	release := make(chan struct{})
	o := newRawOrigin(t, func(head string) string {
		if strings.HasPrefix(head, "GET /slow ") {
			<-release
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"
	})
	fe := httpFrontend(t, nil, o.addr)

	idle := e.dialHTTP(fe)
	idleBR := bufio.NewReader(idle)
	if resp, body := exchangeOn(t, idle, idleBR, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("idle client's first request: %d %q", resp.StatusCode, body)
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		n := 0
		e.do(func() { n = e.w.h.nidle })
		return n == 1
	}, "the server connection pooled")

	slow := e.dialHTTP(fe)
	io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(o.received(), "GET /slow ")
	}, "the slow request at the origin")
	partial := e.dialHTTP(fe)
	io.WriteString(partial, "GET /p HTTP/1.1\r\nHo")

	echoAddr := testutil.ServeOrigin(t, func(c *net.TCPConn) { defer c.Close(); io.Copy(c, c) }).Addr
	tunnel := e.dial(frontend(t, SpliceOff, echoAddr))
	echo(t, tunnel, "before")

	e.do(func() { e.w.SoftStop() })

	expectEOF(t, idle, idleBR, 2*time.Second, "idle keep-alive client")
	n := -1
	e.do(func() { n = e.w.h.nidle })
	if n != 0 {
		t.Fatalf("%d pooled server connections after SoftStop", n)
	}

	io.WriteString(partial, "st: a\r\n\r\n")
	pbr := bufio.NewReader(partial)
	resp, err := http.ReadResponse(pbr, nil)
	if err != nil {
		t.Fatalf("partial head finished after SoftStop: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello" || !resp.Close {
		t.Fatalf("partial head: %d %q close=%v, want 200 hello with Connection: close", resp.StatusCode, b, resp.Close)
	}
	expectEOF(t, partial, pbr, 2*time.Second, "connection of the partial head after its response")

	close(release)
	sbr := bufio.NewReader(slow)
	resp, err = http.ReadResponse(sbr, nil)
	if err != nil {
		t.Fatalf("request in flight: %v", err)
	}
	b, _ = io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello" || !resp.Close {
		t.Fatalf("request in flight: %d %q close=%v, want 200 hello with Connection: close", resp.StatusCode, b, resp.Close)
	}
	expectEOF(t, slow, sbr, 2*time.Second, "connection of the request in flight after its response")

	echo(t, tunnel, "after")
	e.do(func() { n = e.w.Live() })
	if n != 1 {
		t.Fatalf("%d live connections after the http ones ended, want the tunnel", n)
	}
	e.do(func() { e.w.CloseAll() })
	tunnel.SetReadDeadline(time.Now().Add(2 * time.Second))
	if _, err := tunnel.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("tunnel after CloseAll: %v, want closed", err)
	}
}

// TestSoftStopServesAFreshConnectionsFirstRequest: a connection accepted
// before the stop whose first request has not arrived yet is not idle
// between requests (its client retries nothing): SoftStop leaves it open,
// its request is served with Connection: close, then it closes. Closing it
// made a client that connected just before an nbthread 2->1 see an empty
// close (cmd/spliced/faults TestShardedBindAcrossNbthread, 1 in ~650).
func TestSoftStopServesAFreshConnectionsFirstRequest(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, func(string) string { return "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello" })
	fe := httpFrontend(t, nil, o.addr)
	fresh := e.dialHTTP(fe)
	e.do(func() { e.w.SoftStop() })
	io.WriteString(fresh, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(fresh)
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatalf("first request of a connection accepted before the stop: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "hello" || !resp.Close {
		t.Fatalf("first request: %d %q close=%v, want 200 hello with Connection: close", resp.StatusCode, b, resp.Close)
	}
	expectEOF(t, fresh, br, 2*time.Second, "connection after its only response")
}
