package main

// End-to-end tests of HTTP/2 from clients: the real binary configured
// through its API, curl and h2spec as the clients, HTTP/1.1 origins.

import (
	"bufio"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// h2E2EOrigin answers every request with a 2 KiB body (h2spec's flow
// control cases need DATA to shrink windows with).
func h2E2EOrigin(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	body := strings.Repeat("h2-body.", 256)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		w.Header().Set("X-Proto-Seen", r.Proto)
		io.WriteString(w, body)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// h2Setup starts spliced with an http frontend "web" on a clear and a TLS
// bind (both with the default http.versions) in front of h2E2EOrigin.
func h2Setup(t *testing.T) (in *instance, clear, secure string) {
	in = startSpliced(t, "")
	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"h2.example.com"}})
	uploadCert(in, "h2", cert, false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": h2E2EOrigin(t)}},
	})
	port, tport := testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "web", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{
			{"name": "clear", "address": "127.0.0.1", "port": port},
			{"name": "tls", "address": "127.0.0.1", "port": tport, "tls": map[string]any{"certificates": []string{"h2"}}},
		},
	})
	return in, "127.0.0.1:" + strconv.Itoa(port), "127.0.0.1:" + strconv.Itoa(tport)
}

// curlVersion runs curl with args and returns "<http_version> <status>".
func curlVersion(t *testing.T, args ...string) string {
	t.Helper()
	args = append([]string{"-s", "-o", "/dev/null", "--max-time", "10", "-w", "%{http_version} %{http_code}"}, args...)
	out, err := e2e.RunCmd(t, 15*time.Second, exec.Command("curl", args...))
	if err != nil {
		t.Logf("curl %v: %v", args, err)
	}
	return strings.TrimSpace(out)
}

// TestH2EndToEnd: curl speaks HTTP/2 with prior knowledge on the clear
// bind and by ALPN on the TLS bind (the README's walk-through), HTTP/1.1
// still works on both, the origin is spoken to in HTTP/1.1, and a
// frontend whose http.versions is ["1.1"] speaks HTTP/2 on neither.
func TestH2EndToEnd(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	in, clear, secure := h2Setup(t)
	for _, c := range []struct {
		name string
		args []string
		want string
	}{
		{"h2c prior knowledge", []string{"--http2-prior-knowledge", "http://" + clear + "/"}, "2 200"},
		{"h2 by ALPN", []string{"--http2", "-k", "https://" + secure + "/"}, "2 200"},
		{"http/1.1 clear", []string{"--http1.1", "http://" + clear + "/"}, "1.1 200"},
		{"http/1.1 TLS", []string{"--http1.1", "-k", "https://" + secure + "/"}, "1.1 200"},
		{"h2c POST", []string{"--http2-prior-knowledge", "--data-binary", strings.Repeat("x", 100000), "http://" + clear + "/"}, "2 200"},
	} {
		if got := curlVersion(t, c.args...); got != c.want {
			t.Errorf("%s: curl says %q, want %q", c.name, got, c.want)
		}
	}

	// The origin is spoken to in HTTP/1.1 whatever the client spoke.
	tr := &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + secure + "/")
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.Header.Get("X-Proto-Seen") != "HTTP/1.1" {
		t.Errorf("Go client: %s, origin saw %q", resp.Proto, resp.Header.Get("X-Proto-Seen"))
	}

	// The frontend's HTTP/2 counts, in the stats and the metrics: the
	// three HTTP/2 requests above (curl twice, the Go client once).
	var st struct {
		Frontends []struct {
			Name string `json:"name"`
			H2   *struct {
				StreamsTotal int64 `json:"streams_total"`
				StreamsCur   int64 `json:"streams_cur"`
			} `json:"h2"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
	if len(st.Frontends) != 1 || st.Frontends[0].H2 == nil || st.Frontends[0].H2.StreamsTotal != 4 {
		t.Errorf("stats: %+v, want h2 streams_total 4", st.Frontends)
	}
	if m := string(in.MustDo(200, "GET", "/metrics", nil).Body); !strings.Contains(m, `spliced_frontend_h2_streams_total{frontend="web"} 4`) {
		t.Errorf("/metrics lacks the HTTP/2 streams of web")
	}

	// HTTP/1.1 only.
	in.MustDo(200, "PATCH", "/api/v1/frontends/web", map[string]any{"http": map[string]any{"versions": []string{"1.1"}}})
	testutil.Eventually(t, 5*time.Second, func() bool {
		return curlVersion(t, "--http2", "-k", "https://"+secure+"/") == "1.1 200"
	}, "the TLS bind to stop offering h2")
	if got := curlVersion(t, "--http2-prior-knowledge", "http://"+clear+"/"); strings.HasPrefix(got, "2 ") {
		t.Errorf("h2c prior knowledge on an HTTP/1.1-only frontend: %q", got)
	}
}

// TestH2Spec runs h2spec (every test of its HTTP/2 suite, strict) against
// an HTTP/2-only clear bind and a TLS bind; on a clear bind that speaks
// both versions every case but the invalid preface passes (answered as
// HTTP/1.1).
func TestH2Spec(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("h2spec")
	if err != nil {
		t.Fatal("h2spec is needed: make test installs it (go install github.com/summerwind/h2spec/cmd/h2spec@v2.2.1+incompatible)")
	}
	in, clear, secure := h2Setup(t)
	// An HTTP/2-only frontend: on a clear bind of a frontend that speaks
	// both, bytes that are not the HTTP/2 preface are an HTTP/1.1
	// request, answered 400 when malformed (h2spec's "invalid connection
	// preface" case expects a silent close, which only an HTTP/2-only
	// bind gives).
	only := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "h2only", "mode": "http", "default_backend": "web", "http": map[string]any{"versions": []string{"2"}},
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": only}},
	})
	for _, c := range []struct {
		name, addr string
		tls        bool
	}{{"h2c", "127.0.0.1:" + strconv.Itoa(only), false}, {"tls", secure, true}} {
		host, port, _ := net.SplitHostPort(c.addr)
		args := []string{"-h", host, "-p", port, "-o", "5", "--strict"}
		if c.tls {
			args = append(args, "-t", "-k")
		}
		out, err := e2e.RunCmd(t, 3*time.Minute, exec.Command(bin, args...))
		summary := ""
		if i := strings.LastIndex(out, "tests,"); i >= 0 {
			summary = strings.TrimSpace(out[strings.LastIndex(out[:i], "\n")+1:])
		}
		if err != nil || !strings.Contains(summary, " 0 failed") {
			t.Errorf("h2spec %s: %v: %s\n%s", c.name, err, summary, h2specFailures(out))
			continue
		}
		t.Logf("h2spec %s: %s", c.name, summary)
	}
	host, port, _ := net.SplitHostPort(clear)
	out, _ := e2e.RunCmd(t, 3*time.Minute, exec.Command(bin, "-h", host, "-p", port, "-o", "5", "--strict"))
	if !strings.Contains(out, "145 passed") || !strings.Contains(out, "Sends invalid connection preface") {
		t.Errorf("h2spec on a clear bind of both versions: want all but the invalid preface:\n%s", h2specFailures(out))
	}
}

// h2specFailures is the part of h2spec's output after "Failures:" (the
// failed cases with what was expected and what came), else its tail.
func h2specFailures(out string) string {
	if i := strings.Index(out, "Failures:"); i >= 0 {
		return out[i:]
	}
	return e2e.Tail(out, 60)
}

// TestH2GoAwayWhenTheFrontendIsRemoved: deleting a frontend through the
// API sends GOAWAY on its HTTP/2 connections (and closes its idle HTTP/1.1
// ones) instead of letting them serve on.
func TestH2GoAwayWhenTheFrontendIsRemoved(t *testing.T) {
	t.Parallel()
	in, clear, _ := h2Setup(t)
	// Idle connections must not end by themselves within the test.
	in.MustDo(200, "PATCH", "/api/v1/frontends/web", map[string]any{"timeouts": map[string]any{"http_keep_alive_ms": 60000}})
	c, err := net.DialTimeout("tcp", clear, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(15 * time.Second))
	fr := http2.NewFramer(c, c)
	io.WriteString(c, http2.ClientPreface)
	fr.WriteSettings()
	if _, err := fr.ReadFrame(); err != nil { // the server's SETTINGS: the connection is served
		t.Fatal(err)
	}
	h1, err := net.DialTimeout("tcp", clear, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer h1.Close()
	h1.SetDeadline(time.Now().Add(15 * time.Second))
	br := bufio.NewReader(h1)
	io.WriteString(h1, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)

	in.MustDo(204, "DELETE", "/api/v1/frontends/web", nil)
	// At once, not at a timeout.
	c.SetDeadline(time.Now().Add(5 * time.Second))
	h1.SetDeadline(time.Now().Add(5 * time.Second))
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY after the frontend's removal: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY %v, want NO_ERROR", g.ErrCode)
			}
			break
		}
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Errorf("the idle HTTP/1.1 connection: %v, want EOF", err)
	}
}

// TestH2LoadThroughSpliced: h2load (nghttp2's load generator, as the
// bench's h2 rows use it) with 20 clients x 10 streams completes every
// request through spliced, bounded in count: to an HTTP/1.1 server, and
// to an HTTP/2 (h2c) server whose streams are multiplexed over the
// loop's shared connections.
func TestH2LoadThroughSpliced(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("h2load"); err != nil {
		t.Fatal("h2load is needed (make test installs nghttp2-client)")
	}
	in, clear, _ := h2Setup(t)
	// An h2c origin and a frontend whose server speaks HTTP/2.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var protos http.Protocols
	protos.SetUnencryptedHTTP2(true)
	h2srv := &http.Server{Protocols: &protos, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Proto-Seen", r.Proto)
		io.WriteString(w, strings.Repeat("h2c.", 256))
	})}
	go h2srv.Serve(ln)
	t.Cleanup(func() { h2srv.Close() })
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "h2c", "mode": "http", "servers": []map[string]any{{"name": "g1", "address": "127.0.0.1",
			"port": ln.Addr().(*net.TCPAddr).Port, "proto": "h2"}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "h2c", "mode": "http", "default_backend": "h2c",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
	})
	for _, target := range []string{"http://" + clear + "/", "http://127.0.0.1:" + strconv.Itoa(port) + "/"} {
		out, err := e2e.RunCmd(t, 60*time.Second, exec.Command("h2load", "-n", "4000", "-c", "20", "-m", "10", target))
		if err != nil {
			t.Fatalf("h2load %s: %v\n%s", target, err, out)
		}
		if !strings.Contains(out, "4000 succeeded, 0 failed, 0 errored") {
			t.Errorf("h2load %s: not every request succeeded:\n%s", target, out)
		}
	}
}
