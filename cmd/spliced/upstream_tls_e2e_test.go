package main

// End-to-end test of TLS to servers: the real binary speaks https to its
// origins (a server's "tls"), verifies them, reuses and resumes.

import (
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// httpsOrigin serves HTTPS with cert: "/" answers "secure" on a kept-alive
// connection, "/close" answers with Connection: close. It counts accepted
// connections, resumed handshakes and health checks (User-Agent
// spliced-check).
type httpsOrigin struct {
	port                      int
	accepted, resumed, checks atomic.Int64
}

func newHTTPSOrigin(t *testing.T, cert *testutil.Cert) *httpsOrigin {
	t.Helper()
	o := &httpsOrigin{}
	cfg := &tls.Config{
		Certificates: []tls.Certificate{cert.TLS()},
		VerifyConnection: func(cs tls.ConnectionState) error {
			if cs.DidResume {
				o.resumed.Add(1)
			}
			return nil
		},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Path == "/close" {
				w.Header().Set("Connection", "close")
			}
			if r.UserAgent() == "spliced-check" {
				o.checks.Add(1)
			}
			io.WriteString(w, "secure")
		}),
		ConnState: func(_ net.Conn, s http.ConnState) {
			if s == http.StateNew {
				o.accepted.Add(1)
			}
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go srv.Serve(tls.NewListener(ln, cfg))
	t.Cleanup(func() { srv.Close() })
	o.port = ln.Addr().(*net.TCPAddr).Port
	return o
}

// checkedUp: backend checked's server s1 is up in the stats.
func checkedUp(t *testing.T, in *instance) bool {
	var snap struct {
		Backends []struct {
			Name    string `json:"name"`
			Servers []struct {
				Up bool `json:"up"`
			} `json:"servers"`
		} `json:"backends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &snap)
	for _, b := range snap.Backends {
		if b.Name == "checked" && len(b.Servers) == 1 {
			return b.Servers[0].Up
		}
	}
	t.Fatal("backend checked not in the stats")
	return false
}

// tlsCounts are a server's "tls" in /api/v1/stats.
type tlsCounts struct {
	Full     int64 `json:"handshakes_full"`
	Resumed  int64 `json:"handshakes_resumed"`
	Failed   int64 `json:"handshakes_failed"`
	Timeouts int64 `json:"handshake_timeouts"`
}

// webTLS is the tls of backend web's server s1 in the stats.
func webTLS(t *testing.T, in *instance) tlsCounts {
	t.Helper()
	var snap struct {
		Backends []struct {
			Name    string `json:"name"`
			Servers []struct {
				Name string     `json:"name"`
				TLS  *tlsCounts `json:"tls"`
			} `json:"servers"`
		} `json:"backends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &snap)
	for _, b := range snap.Backends {
		for _, s := range b.Servers {
			if b.Name == "web" && s.Name == "s1" && s.TLS != nil {
				return *s.TLS
			}
		}
	}
	t.Fatal("no tls in the stats of web/s1")
	return tlsCounts{}
}

func TestUpstreamTLSEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	ca := testutil.NewCert(t, testutil.CertSpec{Names: []string{"test ca"}, CA: true})
	leaf := testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin.test"}, Parent: ca})
	other := testutil.NewCert(t, testutil.CertSpec{Names: []string{"other ca"}, CA: true})
	o := newHTTPSOrigin(t, leaf)
	server := func(tl map[string]any) []map[string]any {
		return []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": o.port, "tls": tl}}
	}

	// Refused with a JSON pointer: a ca_pem that is not PEM, an sni that is
	// not a host name.
	bad := in.Do("POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": server(map[string]any{"verify": "required", "ca_pem": "not pem", "sni": "a b"})})
	if bad.Status != 422 || !strings.Contains(string(bad.Body), `"field":"/servers/0/tls/ca_pem"`) ||
		!strings.Contains(string(bad.Body), `"field":"/servers/0/tls/sni"`) {
		t.Fatalf("bad tls: status %d: %s", bad.Status, bad.Body)
	}

	// An http check of a TLS server runs over TLS: up with the right CA,
	// down with another one (an origin of its own: o counts connections).
	co := newHTTPSOrigin(t, leaf)
	checked := func(tl map[string]any) map[string]any {
		return map[string]any{"name": "checked", "mode": "http",
			"servers":      []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": co.port, "tls": tl}},
			"health_check": map[string]any{"type": "http", "path": "/health", "interval_ms": 100, "timeout_ms": 100, "rise": 1, "fall": 1}}
	}
	in.MustDo(201, "POST", "/api/v1/backends", checked(map[string]any{"ca_pem": ca.CertPEM, "sni": "origin.test"}))
	testutil.Eventually(t, 5*time.Second, func() bool { return co.checks.Load() >= 2 && checkedUp(t, in) },
		"the https origin checked over TLS and up")
	in.MustDo(200, "PUT", "/api/v1/backends/checked", checked(map[string]any{"ca_pem": other.CertPEM, "sni": "origin.test"}))
	// The loop flips the state before it logs the change: wait for both.
	testutil.Eventually(t, 5*time.Second, func() bool {
		logs := in.Logs()
		return !checkedUp(t, in) && strings.Contains(logs, "server health changed") &&
			strings.Contains(logs, "tls handshake: tls: failed to verify certificate: x509: certificate signed by unknown authority")
	}, "a certificate of another CA takes the server down, logged with the handshake's error")
	in.MustDo(204, "DELETE", "/api/v1/backends/checked", nil)

	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": server(map[string]any{"ca_pem": ca.CertPEM, "sni": "origin.test"})})
	// verify defaults to required, and GET shows it.
	if b := in.MustDo(200, "GET", "/api/v1/backends/web", nil).Body; !strings.Contains(string(b), `"verify":"required"`) {
		t.Fatalf("verify not defaulted: %s", b)
	}
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "www", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
	})
	base := "http://127.0.0.1:" + strconv.Itoa(port)
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 1}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	// Kept alive: five requests, one connection to the origin.
	for i := range 5 {
		if st, body := get("/"); st != 200 || body != "secure" {
			t.Fatalf("request %d: %d %q", i, st, body)
		}
	}
	if n := o.accepted.Load(); n != 1 {
		t.Fatalf("origin accepted %d connections for 5 kept-alive requests, want 1", n)
	}
	// The origin closes after each /close (the first one reuses the pooled
	// connection): every server connection after the first resumes.
	for i := range 3 {
		if st, body := get("/close"); st != 200 || body != "secure" {
			t.Fatalf("/close %d: %d %q", i, st, body)
		}
	}
	if a, r := o.accepted.Load(), o.resumed.Load(); a < 3 || r != a-1 {
		t.Fatalf("%d server connections, %d resumed: want all but the first", a, r)
	}
	// The server's handshakes in the stats: as many as the origin saw.
	if h := webTLS(t, in); h.Full != 1 || h.Resumed != o.resumed.Load() || h.Failed != 0 {
		t.Fatalf("server tls stats %+v, origin: %d connections, %d resumed", h, o.accepted.Load(), o.resumed.Load())
	}

	// The wrong CA: the handshake fails, counted as a connect error; 503.
	in.MustDo(200, "PUT", "/api/v1/backends/web", map[string]any{"name": "web", "mode": "http",
		"servers": server(map[string]any{"ca_pem": other.CertPEM, "sni": "origin.test"})})
	if st, _ := get("/"); st != 503 {
		t.Fatalf("wrong CA: status %d, want 503", st)
	}
	var stats struct {
		Backends []struct {
			Name          string `json:"name"`
			ConnectErrors int64  `json:"connect_errors"`
		} `json:"backends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &stats)
	for _, b := range stats.Backends {
		if b.Name == "web" && b.ConnectErrors == 0 {
			t.Fatalf("no connect error counted for a refused certificate: %+v", stats.Backends)
		}
	}
	// A new server (its tls changed): its counters start again.
	if h := webTLS(t, in); h.Full != 0 || h.Failed == 0 {
		t.Fatalf("server tls stats after a refused certificate: %+v", h)
	}
	if m := string(in.MustDo(200, "GET", "/metrics", nil).Body); !strings.Contains(m, `spliced_server_tls_handshakes_total{backend="web",result="failed",server="s1"} `) {
		t.Fatal("no spliced_server_tls_handshakes_total for web/s1 in /metrics")
	}

	// verify none (through the server's own path, as the README does):
	// served again.
	in.MustDo(200, "PUT", "/api/v1/backends/web/servers/s1", server(map[string]any{"verify": "none"})[0])
	if st, body := get("/"); st != 200 || body != "secure" {
		t.Fatalf("verify none: %d %q", st, body)
	}

	// tcp mode through the same origin: the tunnel speaks TLS to it.
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "raw", "mode": "tcp",
		"servers": server(map[string]any{"ca_pem": ca.CertPEM, "sni": "origin.test"})})
	tport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "tun", "mode": "tcp", "default_backend": "raw", "splice": "on",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": tport}},
	})
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(tport), 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: origin.test\r\nConnection: close\r\n\r\n")
	b, _ := io.ReadAll(c)
	if !strings.HasPrefix(string(b), "HTTP/1.1 200 OK\r\n") || !strings.HasSuffix(string(b), "secure") {
		t.Fatalf("tcp tunnel to the https origin: %q", b)
	}
}
