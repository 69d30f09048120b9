package main

import (
	"bufio"
	"errors"
	"io"
	"net"
	"os"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestSIGTERMSoftStop: on SIGTERM an idle keep-alive client is closed at
// once, a slow response in flight completes with Connection: close and its
// connection closes after it, a tcp tunnel runs until tuning.grace_ms ends
// and is closed then, and the process exits right after.
func TestSIGTERMSoftStop(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const graceMs = 3000
	in.MustDo(200, "PATCH", "/api/v1/tuning", map[string]any{"grace_ms": graceMs})

	release := make(chan struct{})
	o := newHTTPOrigin(t, "A", func(_ net.Conn, r *rawReq) string {
		if r.Path == "/slow" {
			<-release
		}
		return okResp("A")
	})
	hport := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("hweb", "roundrobin", o.server("s1"))},
		frontend: map[string]any{"default_backend": "hweb"},
	})
	tcpO := newTCPOrigin(t, "T")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "tweb", "mode": "tcp", "servers": []map[string]any{tcpO.server("t1")},
	})
	tport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "tpub", "mode": "tcp", "default_backend": "tweb",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": tport}},
	})

	idle := dialProxy(t, hport)
	idleBR := bufio.NewReader(idle)
	io.WriteString(idle, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, body := readResp(t, idleBR, "GET"); resp.StatusCode != 200 || string(body) != "A" || resp.Close {
		t.Fatalf("keep-alive request: %d %q close=%v", resp.StatusCode, body, resp.Close)
	}
	slow := dialProxy(t, hport)
	io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, func() bool {
		return strings.Contains(o.received(), "GET /slow ")
	}, "the slow request at the origin")
	tunnel, _ := greet(t, tport)

	if err := in.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	idle.SetReadDeadline(time.Now().Add(graceMs / 2 * time.Millisecond))
	if b, err := idleBR.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("idle keep-alive client after SIGTERM: %q, %v; want end of stream at once", b, err)
	}
	t.Logf("idle keep-alive connection closed %v after SIGTERM", time.Since(t0))
	testutil.Eventually(t, 5*time.Second, func() bool { return refuses(hport) && refuses(tport) }, "the binds to close")

	close(release)
	sbr := bufio.NewReader(slow)
	resp, body := readResp(t, sbr, "GET")
	if resp.StatusCode != 200 || string(body) != "A" || !resp.Close {
		t.Fatalf("response in flight at SIGTERM: %d %q close=%v; want 200 with Connection: close", resp.StatusCode, body, resp.Close)
	}
	if _, err := sbr.ReadByte(); !errors.Is(err, io.EOF) {
		t.Fatalf("after the last response: %v, want end of stream", err)
	}

	if since := time.Since(t0); since < graceMs*time.Millisecond*2/3 {
		echoes(t, tunnel, "still within the grace")
	}
	tunnel.SetReadDeadline(time.Now().Add(graceMs*time.Millisecond + 5*time.Second))
	_, err := tunnel.Read(make([]byte, 1))
	if err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("tcp tunnel after grace_ms: %v, want closed", err)
	}
	if d := time.Since(t0); d < graceMs*time.Millisecond*9/10 {
		t.Fatalf("tcp tunnel closed %v after SIGTERM, before grace_ms (%d ms)", d, graceMs)
	}
	select {
	case <-in.exited:
		if in.exitErr != nil {
			t.Fatalf("exit: %v\n%s", in.exitErr, in.Logs())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the process did not exit after grace_ms")
	}
	// The -race runtime adds ~1 s at exit (atexit_sleep_ms).
	t.Logf("process exited %v after SIGTERM (grace_ms %d)", time.Since(t0), graceMs)
}

// TestGraceMsValidated: grace_ms beyond one hour is refused with a 422
// naming the field.
func TestGraceMsValidated(t *testing.T) {
	in := startSpliced(t, "")
	r := in.MustDo(422, "PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 3600001})
	if !strings.Contains(string(r.Body), `"/grace_ms"`) && !strings.Contains(string(r.Body), `"/tuning/grace_ms"`) {
		t.Fatalf("422 does not name grace_ms: %s", r.Body)
	}
	var got map[string]any
	in.MustDo(200, "GET", "/api/v1/tuning", nil).JSON(t, &got)
	if got["grace_ms"] != float64(10000) {
		t.Fatalf("default grace_ms %v, want 10000", got["grace_ms"])
	}
}

// frontendConns is conn_cur of frontend name from /api/v1/stats.
func frontendConns(t *testing.T, in *instance, name string) int64 {
	t.Helper()
	var snap struct {
		Frontends []struct {
			Name    string `json:"name"`
			ConnCur int64  `json:"conn_cur"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &snap)
	for _, f := range snap.Frontends {
		if f.Name == name {
			return f.ConnCur
		}
	}
	t.Fatalf("no frontend %q in the stats", name)
	return 0
}

// TestClientTimeoutBoundsAClientThatStopsReading: with client_ms 300 and
// server_ms 8000, a client that asks for an endless response and never
// reads is dropped after about client_ms, in http and in tcp mode (issue
// 12: it was 8.1 s in http mode and never in tcp mode).
func TestClientTimeoutBoundsAClientThatStopsReading(t *testing.T) {
	in := startSpliced(t, "")
	stream := func(httpHead bool) int {
		return testutil.ServeOrigin(t, func(c *net.TCPConn) {
			defer c.Close()
			if httpHead {
				br := bufio.NewReader(c)
				for {
					line, err := br.ReadString('\n')
					if err != nil {
						return
					}
					if line == "\r\n" {
						break
					}
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 107374182400\r\n\r\n")
			}
			buf := make([]byte, 64<<10)
			for {
				if _, err := c.Write(buf); err != nil {
					return
				}
			}
		}).Port()
	}
	for _, mode := range []string{"http", "tcp"} {
		port := testutil.FreePort(t)
		in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
			"name": mode + "-be", "mode": mode,
			"servers":  []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": stream(mode == "http")}},
			"timeouts": map[string]any{"server_ms": 8000},
		})
		in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
			"name": mode + "-fe", "mode": mode, "default_backend": mode + "-be",
			"timeouts": map[string]any{"client_ms": 300},
			"binds":    []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
		})
		c := dialProxy(t, port)
		start := time.Now()
		if mode == "http" {
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
		}
		testutil.Eventually(t, 5*time.Second, func() bool { return frontendConns(t, in, mode+"-fe") == 1 }, mode+" connection counted")
		testutil.Eventually(t, 5*time.Second, func() bool { return frontendConns(t, in, mode+"-fe") == 0 }, mode+" client that never reads dropped")
		t.Logf("%s: client that never reads dropped within %v (client_ms 300, server_ms 8000)", mode, time.Since(start))
	}
}
