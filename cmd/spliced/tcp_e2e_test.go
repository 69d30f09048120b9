package main

// End-to-end tests of tcp mode: the real binary, configured only through
// the admin API, in front of Go test servers on 127.0.0.1. Each test proves
// one runtime change or fault with live connections across it.

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tcpOrigin is a Go test server that greets every connection with its name
// and then echoes; it counts the connections it got.
type tcpOrigin struct {
	name   string
	port   int
	origin *testutil.Origin
}

func newTCPOrigin(t *testing.T, name string) *tcpOrigin {
	t.Helper()
	o := &tcpOrigin{name: name}
	o.origin = testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.Write([]byte(name))
		io.Copy(c, c)
	})
	o.port = o.origin.Port()
	return o
}

func (o *tcpOrigin) server(name string) map[string]any {
	return map[string]any{"name": name, "address": "127.0.0.1", "port": o.port}
}

// setupTCP creates backend "web" (roundrobin) with servers and frontend
// "pub" with bind b1 on a free port, through the API; it returns the port.
func setupTCP(t *testing.T, in *instance, servers ...map[string]any) int {
	t.Helper()
	if servers == nil {
		servers = []map[string]any{}
	}
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "tcp", "balance": "roundrobin", "servers": servers,
		"timeouts": map[string]any{"connect_ms": 1000}, "retries": 1,
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "pub", "mode": "tcp", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
	})
	return port
}

func mustOK(t *testing.T, r apiResponse, what string) {
	t.Helper()
	if r.Status < 200 || r.Status > 299 {
		t.Fatalf("%s: status %d: %s", what, r.Status, r.Body)
	}
}

// greet connects through the proxy and returns the connection and the name
// of the origin that answered.
func greet(t *testing.T, port int) (net.Conn, string) {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		t.Fatalf("dial proxy port %d: %v", port, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c, b); err != nil {
		t.Fatalf("greeting through port %d: %v", port, err)
	}
	c.SetReadDeadline(time.Time{})
	return c, string(b)
}

func echoes(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatalf("write %q: %v", msg, err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, len(msg))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != msg {
		t.Fatalf("echo %q: got %q, %v", msg, b, err)
	}
	c.SetReadDeadline(time.Time{})
}

func refuses(port int) bool {
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
	if err != nil {
		return true
	}
	c.Close()
	return false
}

// TestTCPRoundRobinAndDrain: two servers share new connections; a drained
// server gets no new connection while its live one continues.
func TestTCPRoundRobinAndDrain(t *testing.T) {
	in := startSpliced(t, "")
	a, b := newTCPOrigin(t, "A"), newTCPOrigin(t, "B")
	port := setupTCP(t, in, a.server("s1"), b.server("s2"))
	seen := map[string]int{}
	var onA net.Conn
	for i := 0; i < 8; i++ {
		c, name := greet(t, port)
		seen[name]++
		if name == "A" && onA == nil {
			onA = c
		} else {
			c.Close()
		}
	}
	// Each loop has its own round-robin picker, so the exact sequence
	// depends on which loop accepted; the share may not.
	if seen["A"] < 2 || seen["B"] < 2 {
		t.Fatalf("roundrobin spread over 8 connections: %v", seen)
	}
	mustOK(t, in.Do("PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"admin_state": "drain"}), "drain s1")
	before := a.origin.Accepted()
	for i := 0; i < 6; i++ {
		c, name := greet(t, port)
		if name != "B" {
			t.Fatalf("new connection %d went to drained server %s", i, name)
		}
		c.Close()
	}
	if a.origin.Accepted() != before {
		t.Fatal("drained server got a new connection")
	}
	echoes(t, onA, "drained but alive")
}

// TestTCPRemoveServerLiveConnectionFinishes: deleting a server leaves its
// established connection working; new ones go to the remaining server.
func TestTCPRemoveServerLiveConnectionFinishes(t *testing.T) {
	in := startSpliced(t, "")
	a, b := newTCPOrigin(t, "A"), newTCPOrigin(t, "B")
	port := setupTCP(t, in, a.server("s1"), b.server("s2"))
	var onA net.Conn
	for i := 0; i < 8 && onA == nil; i++ {
		c, name := greet(t, port)
		if name == "A" {
			onA = c
		} else {
			c.Close()
		}
	}
	if onA == nil {
		t.Fatal("no connection reached s1")
	}
	mustOK(t, in.Do("DELETE", "/api/v1/backends/web/servers/s1", nil), "delete s1")
	for i := 0; i < 4; i++ {
		c, name := greet(t, port)
		if name != "B" {
			t.Fatalf("connection after removing s1 reached %s", name)
		}
		c.Close()
	}
	echoes(t, onA, "removed server, live connection")
	onA.(*net.TCPConn).CloseWrite()
	onA.SetReadDeadline(time.Now().Add(5 * time.Second))
	if rest, err := io.ReadAll(onA); err != nil || len(rest) != 0 {
		t.Fatalf("closing the live connection: %q, %v", rest, err)
	}
}

// TestTCPBindChanges: a bind added accepts at once; a bind on a taken port
// is a 409 problem and leaves the config as it was; a bind removed closes
// its port while the connection made through it goes on.
func TestTCPBindChanges(t *testing.T) {
	in := startSpliced(t, "")
	a := newTCPOrigin(t, "A")
	p1 := setupTCP(t, in, a.server("s1"))
	p2 := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends/pub/binds", map[string]any{"name": "b2", "address": "127.0.0.1", "port": p2})
	c2, name := greet(t, p2)
	if name != "A" {
		t.Fatalf("through b2: %s", name)
	}

	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	before := in.MustDo(200, "GET", "/api/v1/config", nil).Body
	r := in.Do("POST", "/api/v1/frontends/pub/binds", map[string]any{
		"name": "b3", "address": "127.0.0.1", "port": taken.Addr().(*net.TCPAddr).Port})
	if r.Status != 409 || !strings.Contains(r.Header.Get("Content-Type"), "problem+json") {
		t.Fatalf("bind on a taken port: %d %s %s", r.Status, r.Header.Get("Content-Type"), r.Body)
	}
	after := in.MustDo(200, "GET", "/api/v1/config", nil).Body
	if !bytes.Equal(before, after) {
		t.Fatalf("config changed by a refused bind:\nbefore %s\nafter  %s", before, after)
	}
	greet(t, p1)

	mustOK(t, in.Do("DELETE", "/api/v1/frontends/pub/binds/b2", nil), "delete b2")
	if !refuses(p2) {
		t.Fatal("removed bind still accepts")
	}
	echoes(t, c2, "bind gone, connection alive")
	greet(t, p1)
}

// TestTCPServerRefusingClosesClientNoLeak: with every server refusing, the
// client is closed after the retries and the process's fd count returns to
// where it was.
func TestTCPServerRefusingClosesClientNoLeak(t *testing.T) {
	in := startSpliced(t, "")
	dead := testutil.FreePort(t) // nothing listens there
	port := setupTCP(t, in, map[string]any{"name": "s1", "address": "127.0.0.1", "port": dead})
	start := dataFDs(t, in)
	var wg sync.WaitGroup
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
			if err != nil {
				t.Errorf("dial: %v", err)
				return
			}
			defer c.Close()
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err = c.Read(make([]byte, 1))
			if errors.Is(err, os.ErrDeadlineExceeded) {
				t.Errorf("client not closed although the server refuses")
			}
		}()
	}
	wg.Wait()
	testutil.Eventually(t, 5*time.Second, func() bool {
		return dataFDs(t, in) == start
	}, "fd count back to its start value")
}

// TestTCPClientNeverReads: a client that never reads stalls its tunnel
// with bounded memory in the proxy; the tunnel timeout then closes it and
// the fds are released.
func TestTCPClientNeverReads(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var written atomic.Int64
	srvErr := make(chan error, 1)
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		buf := make([]byte, 64<<10)
		for {
			n, err := c.Write(buf)
			written.Add(int64(n))
			if err != nil {
				srvErr <- err
				return
			}
		}
	}()
	port := setupTCP(t, in, map[string]any{"name": "s1", "address": "127.0.0.1", "port": ln.Addr().(*net.TCPAddr).Port})
	mustOK(t, in.Do("PATCH", "/api/v1/frontends/pub", map[string]any{"timeouts": map[string]any{"tunnel_ms": 1500}}), "tunnel timeout")
	start := dataFDs(t, in)
	rss0 := rssKiB(t, in.Pid())

	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.(*net.TCPConn).SetReadBuffer(64 << 10)
	// The server stalls: no progress for 300 ms.
	last := int64(-1)
	for deadline := time.Now().Add(10 * time.Second); ; {
		time.Sleep(150 * time.Millisecond)
		w := written.Load()
		if w == last && w > 0 {
			break
		}
		last = w
		if time.Now().After(deadline) {
			t.Fatalf("server kept writing (%d bytes) to a client that never reads", w)
		}
	}
	if grow := rssKiB(t, in.Pid()) - rss0; grow > 16<<10 {
		t.Fatalf("proxy RSS grew by %d KiB for one stalled tunnel", grow)
	}
	select {
	case err := <-srvErr:
		t.Logf("server write ended with %v after %d bytes", err, written.Load())
	case <-time.After(10 * time.Second):
		t.Fatalf("tunnel timeout did not close the stalled tunnel (server wrote %d bytes)", written.Load())
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		return dataFDs(t, in) == start
	}, "fd count back to its start value")
}

// TestTCPSIGTERMLetsConnectionFinish: SIGTERM stops accepting, a live
// connection keeps working until it closes, then the process exits 0.
func TestTCPSIGTERMLetsConnectionFinish(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	a := newTCPOrigin(t, "A")
	port := setupTCP(t, in, a.server("s1"))
	c, _ := greet(t, port)
	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return refuses(port) }, "the bind to close after SIGTERM")
	echoes(t, c, "after SIGTERM")
	select {
	case <-in.exited:
		t.Fatalf("exited with a live connection: %v", in.exitErr)
	case <-time.After(200 * time.Millisecond):
	}
	c.Close()
	select {
	case <-in.exited:
		if in.exitErr != nil {
			t.Fatalf("exit: %v\n%s", in.exitErr, in.Logs())
		}
	case <-time.After(8 * time.Second):
		t.Fatal("did not exit after the last connection closed")
	}
}

func rssKiB(t *testing.T, pid int) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.TrimSuffix(strings.TrimSpace(v), " kB"))
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}
