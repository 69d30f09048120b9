package main

// End-to-end tests of the PROXY protocol with the real binary: an HAProxy
// in front of a bind with accept_proxy (v2, as an AWS NLB sends), spliced
// sending v1 and v2 to an HAProxy that reads them (accept-proxy), and the
// hostile cases of a bind that reads headers.

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// startHAProxy runs haproxy in the foreground with cfg and waits until it
// accepts connections on port; the test's cleanup stops it with SIGTERM.
// Skipped when haproxy is not installed (make test installs it:
// scripts/test-deps.sh).
func startHAProxy(t *testing.T, cfg string, port int) {
	t.Helper()
	bin, err := exec.LookPath("haproxy")
	if err != nil {
		t.Skip("haproxy is not installed (scripts/test-deps.sh installs it)")
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "haproxy.cfg")
	if err := os.WriteFile(path, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	out := &testutil.SyncBuffer{}
	cmd := exec.Command(bin, "-db", "-f", path)
	cmd.Stdout, cmd.Stderr = out, out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
	})
	testutil.Eventually(t, 10*time.Second, func() bool {
		select {
		case <-done:
			t.Fatalf("haproxy exited: %s", out.String())
		default:
		}
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err == nil {
			c.Close()
		}
		return err == nil
	}, "haproxy listening")
}

// xffOrigin is an http origin that answers each request with its
// X-Forwarded-For field.
func xffOrigin(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "xff="+r.Header.Get("X-Forwarded-For"))
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// clientFrom is an http client whose connections leave from source (a
// loopback address other than the balancer's).
func clientFrom(source string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// TestProxyProtocolBehindHAProxyEndToEnd: an HAProxy in front sends PROXY
// v2 to a bind with accept_proxy; the client behind it (curl, and a Go
// client) leaves from 127.0.0.3, HAProxy from 127.0.0.1. The origin's
// X-Forwarded-For and spliced's access log name 127.0.0.3, the log keeps
// HAProxy's address as the peer, and the stats and metrics count the
// headers.
func TestProxyProtocolBehindHAProxyEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	origin := xffOrigin(t)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": origin}},
	})
	port, hport := testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "edge", "mode": "http", "default_backend": "web", "access_log": true,
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"accept_proxy": map[string]any{"trusted": []string{"127.0.0.1"}}}},
	})
	var fe map[string]any
	in.MustDo(200, "GET", "/api/v1/frontends/edge", nil).JSON(t, &fe)
	if to := fe["timeouts"].(map[string]any); to["handshake_ms"] != float64(5000) {
		t.Fatalf("handshake_ms %v, want the default 5000 with accept_proxy", to["handshake_ms"])
	}
	startHAProxy(t, fmt.Sprintf(`global
    nbthread 1
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend lb
    bind 127.0.0.1:%d
    default_backend spliced
backend spliced
    server s1 127.0.0.1:%d send-proxy-v2
`, hport, port), hport)

	url := "http://127.0.0.1:" + strconv.Itoa(hport) + "/hello"
	if curl, err := exec.LookPath("curl"); err == nil {
		out, err := exec.Command(curl, "-sS", "--max-time", "10", "--interface", "127.0.0.3", url).CombinedOutput()
		if err != nil || string(out) != "xff=127.0.0.3" {
			t.Fatalf("curl through haproxy: %q %v", out, err)
		}
	} else {
		t.Log("curl not installed: the Go client only")
	}
	resp, err := clientFrom("127.0.0.3").Get(url)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(body) != "xff=127.0.0.3" {
		t.Fatalf("Go client through haproxy: %q", body)
	}

	var logs []map[string]any
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/logs?frontend=edge", nil).JSON(t, &logs)
		return len(logs) >= 1
	}, "access log entries")
	for _, l := range logs {
		c, _ := l["client"].(string)
		p, _ := l["peer"].(string)
		if !strings.HasPrefix(c, "127.0.0.3:") || !strings.HasPrefix(p, "127.0.0.1:") {
			t.Fatalf("access log client %q peer %q, want 127.0.0.3 through 127.0.0.1", c, p)
		}
	}
	var st struct {
		Frontends []struct {
			Name  string         `json:"name"`
			Proxy map[string]int `json:"proxy"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
	if len(st.Frontends) != 1 || st.Frontends[0].Proxy["accepted"] < 1 || st.Frontends[0].Proxy["invalid"] != 0 {
		t.Fatalf("stats %+v", st.Frontends)
	}
	m := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	if !strings.Contains(m, `spliced_frontend_proxy_headers_total{frontend="edge",result="accepted"}`) {
		t.Fatalf("metrics lack the accepted headers:\n%s", grepLines(m, "proxy_headers"))
	}
}

func grepLines(s, sub string) string {
	var b strings.Builder
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			b.WriteString(l + "\n")
		}
	}
	return b.String()
}

// TestSendProxyEndToEnd: spliced sends v1 and v2 to an HAProxy that reads
// them (accept-proxy) and answers with the source it was told: the client
// behind spliced (127.0.0.3), in http and in tcp mode. Health checks of
// such servers send a header too (LOCAL): HAProxy, which drops a
// connection without one, answers their http requests, so L7OK.
func TestSendProxyEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	p1, p2 := testutil.FreePort(t), testutil.FreePort(t)
	startHAProxy(t, fmt.Sprintf(`global
    nbthread 1
defaults
    mode http
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend v1
    bind 127.0.0.1:%d accept-proxy
    http-request return status 200 content-type text/plain lf-string "src=%%[src] v=1"
frontend v2
    bind 127.0.0.1:%d accept-proxy
    http-request return status 200 content-type text/plain lf-string "src=%%[src] v=2"
`, p1, p2), p1)
	for v, port := range map[string]int{"v1": p1, "v2": p2} {
		for _, mode := range []string{"http", "tcp"} {
			in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
				"name": mode + v, "mode": mode,
				"servers":      []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": port, "send_proxy": v}},
				"health_check": map[string]any{"type": "http", "path": "/", "interval_ms": 100, "timeout_ms": 100, "rise": 1, "fall": 1},
			})
		}
	}
	// A value that is no version: 422 with the pointer.
	bad := in.Do("POST", "/api/v1/backends/httpv1/servers", map[string]any{"name": "s2", "address": "127.0.0.1", "port": p1, "send_proxy": "v3"})
	if bad.Status != 422 || !strings.Contains(string(bad.Body), `"field":"/send_proxy"`) {
		t.Fatalf("send_proxy v3: %d %s", bad.Status, bad.Body)
	}
	for _, v := range []string{"v1", "v2"} {
		for _, mode := range []string{"http", "tcp"} {
			port := testutil.FreePort(t)
			in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
				"name": mode + v, "mode": mode, "default_backend": mode + v,
				"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
			})
			want := "src=127.0.0.3 v=" + v[1:]
			for i := 0; i < 3; i++ { // new server connections each time (no pooling with send_proxy)
				resp, err := clientFrom("127.0.0.3").Get("http://127.0.0.1:" + strconv.Itoa(port) + "/")
				if err != nil {
					t.Fatalf("%s %s: %v", mode, v, err)
				}
				body, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(body) != want {
					t.Fatalf("%s %s: %q, want %q", mode, v, body, want)
				}
			}
		}
	}
	var st struct {
		Backends []struct {
			Name    string `json:"name"`
			Servers []struct {
				Up    bool `json:"up"`
				Check *struct {
					Status string `json:"status"`
				} `json:"check"`
			} `json:"servers"`
		} `json:"backends"`
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		for _, b := range st.Backends {
			if s := b.Servers[0]; !s.Up || s.Check == nil || s.Check.Status != "L7OK" {
				return false
			}
		}
		return len(st.Backends) == 4
	}, "health checks with a PROXY header pass")
}

// TestProxyProtocolHostileEndToEnd: a bind with accept_proxy trusts
// 127.0.0.1 only and waits handshake_ms 400 for the header. A client
// from elsewhere, bytes that are no header, a malformed, truncated or
// oversized one, and a header sent a byte at a time past the deadline are
// each closed before any server hears of them, and counted; a good
// connection is served after all of them.
func TestProxyProtocolHostileEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	var mu sync.Mutex
	var seen []string
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		l, _ := bufio.NewReader(c).ReadString('\n')
		mu.Lock()
		seen = append(seen, l)
		mu.Unlock()
		c.Write([]byte("ok\n"))
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "be", "mode": "tcp",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": origin.Port()}},
	})
	port := testutil.FreePort(t)
	// Refused first: a trusted entry that is not a prefix (422, pointer).
	bad := in.Do("POST", "/api/v1/frontends", map[string]any{
		"name": "fe", "mode": "tcp", "default_backend": "be",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"accept_proxy": map[string]any{"trusted": []string{"127.0.0.1/8"}}}},
	})
	if bad.Status != 422 || !strings.Contains(string(bad.Body), `"field":"/binds/0/accept_proxy/trusted/0"`) {
		t.Fatalf("host bits set: %d %s", bad.Status, bad.Body)
	}
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "fe", "mode": "tcp", "default_backend": "be", "timeouts": map[string]any{"handshake_ms": 400},
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"accept_proxy": map[string]any{"trusted": []string{"127.0.0.1"}}}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	header := "PROXY TCP4 203.0.113.9 198.51.100.1 4242 443\r\n"
	oversized := []byte("\r\n\r\n\x00\r\nQUIT\n\x21\x11\xff\x00")
	for _, tc := range []struct {
		name   string
		source string
		send   func(c *net.TCPConn)
	}{
		{"untrusted peer", "127.0.0.3", func(c *net.TCPConn) { c.Write([]byte(header + "hi\n")) }},
		{"no header", "127.0.0.1", func(c *net.TCPConn) { c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")) }},
		{"malformed", "127.0.0.1", func(c *net.TCPConn) { c.Write([]byte("PROXY TCP4 203.0.113.9 198.51.100.1 4242 99999\r\nhi\n")) }},
		{"truncated", "127.0.0.1", func(c *net.TCPConn) { c.Write([]byte(header[:20])); c.CloseWrite() }},
		{"oversized", "127.0.0.1", func(c *net.TCPConn) { c.Write(oversized) }},
		{"slowloris", "127.0.0.1", func(c *net.TCPConn) {
			for i := 0; i < len(header); i++ {
				if _, err := c.Write([]byte{header[i]}); err != nil {
					return
				}
				time.Sleep(100 * time.Millisecond) // the attack's pace, not a synchronisation
			}
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(tc.source)}}
			conn, err := d.Dial("tcp", addr)
			if errors.Is(err, syscall.ECONNRESET) {
				return // reset before the dial even returned: closed at accept
			}
			if err != nil {
				t.Fatal(err)
			}
			c := conn.(*net.TCPConn)
			defer c.Close()
			c.SetDeadline(time.Now().Add(10 * time.Second))
			start := time.Now()
			go tc.send(c)
			got, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() || len(got) != 0 {
				t.Fatalf("not closed: read %q, %v", got, err)
			}
			if tc.name == "slowloris" && time.Since(start) > 3*time.Second {
				t.Fatalf("closed after %v, handshake_ms is 400", time.Since(start))
			}
		})
	}
	var st struct {
		Frontends []struct {
			ConnCur int64          `json:"conn_cur"`
			Proxy   map[string]int `json:"proxy"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
	if p := st.Frontends[0].Proxy; p["refused"] != 1 || p["invalid"] != 4 || p["timeouts"] != 1 || p["accepted"] != 0 {
		t.Fatalf("proxy counts %v", p)
	}
	mu.Lock()
	n := len(seen)
	mu.Unlock()
	if n != 0 {
		t.Fatalf("the server saw %d connections: %q", n, seen)
	}
	// Still serving: a good header from the trusted peer.
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte(header + "hi\n"))
	if l, err := bufio.NewReader(c).ReadString('\n'); err != nil || l != "ok\n" {
		t.Fatalf("good connection: %q %v", l, err)
	}
}

// TestProxyAuthorityRoutesSNIEndToEnd: an HAProxy terminates TLS in front
// (as an NLB with a TLS listener) and sends PROXY v2 with the SNI as
// AUTHORITY (proxy-v2-options authority, with a CRC32C and the SSL TLVs
// too); spliced's tcp frontend routes
// the clear connection on it with its sni routes.
func TestProxyAuthorityRoutesSNIEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	tag := func(s string) int {
		return testutil.ServeOrigin(t, func(c *net.TCPConn) { c.Write([]byte(s + "\n")); c.Close() }).Port()
	}
	for name, port := range map[string]int{"a": tag("A"), "def": tag("D")} {
		in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
			"name": name, "mode": "tcp", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": port}},
		})
	}
	port, hport := testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "sni", "mode": "tcp", "default_backend": "def",
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port, "accept_proxy": map[string]any{"trusted": []string{"127.0.0.1"}}}},
		"routes": []map[string]any{{"sni": "a.example.com", "backend": "a"}},
	})
	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.example.com", "b.example.com"}})
	pem := filepath.Join(t.TempDir(), "site.pem")
	if err := os.WriteFile(pem, []byte(cert.CertPEM+cert.KeyPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	startHAProxy(t, fmt.Sprintf(`global
    nbthread 1
defaults
    mode tcp
    timeout connect 5s
    timeout client 30s
    timeout server 30s
frontend tls
    bind 127.0.0.1:%d ssl crt %s
    default_backend spliced
backend spliced
    server s1 127.0.0.1:%d send-proxy-v2 proxy-v2-options authority,crc32c,ssl,ssl-cipher,cert-cn
`, hport, pem, port), hport)
	for name, want := range map[string]string{"a.example.com": "A\n", "b.example.com": "D\n"} {
		c, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(hport), &tls.Config{ServerName: name, InsecureSkipVerify: true})
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		got, _ := io.ReadAll(c)
		c.Close()
		if string(got) != want {
			t.Fatalf("SNI %s: got %q, want %q", name, got, want)
		}
	}
}
