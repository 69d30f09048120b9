package main

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestAccessLogFileHTTPTerminations: with --access-log-file, each http
// request of a frontend with access_log on is one JSON line in the file:
// a normal 200 (and a kept-alive second request), the proxy's 400, no
// usable server, a refused connect, a server timeout and a client abort,
// each with its status and termination state; the frontend's byte counts
// are exact; GET /api/v1/logs lists the same entries; SIGHUP reopens the
// file after a rotation.
func TestAccessLogFileHTTPTerminations(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	logPath := filepath.Join(dir, "access.log")
	in := startSpliced(t, "", "--access-log-file", logPath)
	web := newHTTPOrigin(t, "web", nil)
	silent := newHTTPOrigin(t, "silent", func(c net.Conn, r *rawReq) string {
		io.Copy(io.Discard, c) // never answers
		return ""
	})
	refused := testutil.FreePort(t)
	slow := httpBackend("slow", "roundrobin", silent.server("s1"))
	slow["timeouts"] = map[string]any{"connect_ms": 1000, "server_ms": 300}
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{
			httpBackend("web", "roundrobin", web.server("s1")),
			httpBackend("maint", "roundrobin", web.server("s1", "admin_state", "maint")),
			httpBackend("refused", "roundrobin", map[string]any{"name": "s1", "address": "127.0.0.1", "port": refused}),
			slow,
		},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	use := func(be string) {
		in.MustDo(200, "PATCH", "/api/v1/frontends/pub", map[string]any{"default_backend": be})
	}

	get := "GET /a?token=secret HTTP/1.1\r\nHost: x\r\n\r\n"
	c := dialProxy(t, port)
	br := bufio.NewReader(c)
	io.WriteString(c, get)
	readResp(t, br, "GET")
	time.Sleep(30 * time.Millisecond) // the second request's idle time (not synchronisation)
	io.WriteString(c, get)
	readResp(t, br, "GET")
	c.Close()
	roundTrip(t, port, "GET /\x01 HTTP/1.1\r\n\r\n")
	use("maint")
	roundTrip(t, port, get)
	use("refused")
	roundTrip(t, port, get)
	use("slow")
	roundTrip(t, port, get)
	use("web")
	a := dialProxy(t, port)
	io.WriteString(a, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npart")
	time.Sleep(50 * time.Millisecond) // let the proxy forward the head first (pacing)
	a.(*net.TCPConn).SetLinger(0)
	a.Close()

	want := []struct {
		status int
		term   string
	}{{200, "--"}, {200, "--"}, {400, "PR"}, {503, "SC"}, {503, "SC"}, {504, "sH"}, {0, "CD"}}
	var lines []map[string]any
	testutil.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		lines = lines[:0]
		for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "access" {
				lines = append(lines, m)
			}
		}
		return len(lines) >= len(want)
	}, "access lines in the file")
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d", len(lines), len(want))
	}
	// In the order the requests ended, whichever loop served them.
	for i, w := range want {
		m := lines[i]
		if m["status"] != float64(w.status) || m["termination"] != w.term || m["frontend"] != "pub" || m["mode"] != "http" {
			t.Errorf("line %d: status %v termination %v, want %d %s: %v", i, m["status"], m["termination"], w.status, w.term, m)
		}
	}
	first, second := lines[0], lines[1]
	if first["request"] != "GET /a?token=REDACTED HTTP/1.1" || first["backend"] != "web" || first["server"] != "s1" ||
		first["bytes_in"] != float64(len(get)) || first["bytes_out"] != float64(len(okResp("web"))) ||
		first["tc_ms"].(float64) < 0 || second["tc_ms"] != -1.0 || second["tq_ms"].(float64) < 30 {
		t.Errorf("kept-alive requests: %v\n%v", first, second)
	}
	if lines[4]["retries"] != 1.0 || lines[3]["server"] != "" {
		t.Errorf("refused: %v; no server: %v", lines[4], lines[3])
	}

	var recs []map[string]any
	in.MustDo(200, "GET", "/api/v1/logs?limit=3", nil).JSON(t, &recs)
	if len(recs) != 3 || recs[0]["termination"] != "SC" || recs[1]["termination"] != "sH" || recs[2]["termination"] != "CD" {
		t.Errorf("/api/v1/logs?limit=3: %v", recs)
	}

	// logrotate: rename, SIGHUP, the next line goes to a new file.
	if err := os.Rename(logPath, logPath+".1"); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(in.Pid(), syscall.SIGHUP); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { _, err := os.Stat(logPath); return err == nil }, "reopened on SIGHUP")
	roundTrip(t, port, get)
	testutil.Eventually(t, 5*time.Second, func() bool {
		b, _ := os.ReadFile(logPath)
		return strings.Count(string(b), `"msg":"access"`) == 1
	}, "a line in the new file")
}

// TestAccessLogSyslogText: --access-log-syslog sends each line as one
// datagram (RFC 5424 here), in --access-log-format text, and nothing of
// it goes to stderr.
func TestAccessLogSyslogText(t *testing.T) {
	t.Parallel()
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	in := startSpliced(t, "", "--log-format", "json", "--access-log-format", "text",
		"--access-log-syslog", "udp://"+pc.LocalAddr().String(), "--access-log-syslog-format", "rfc5424")
	web := newHTTPOrigin(t, "web", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	roundTrip(t, port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	buf := make([]byte, 4096)
	pc.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no syslog datagram: %v", err)
	}
	msg := string(buf[:n])
	for _, want := range []string{"<134>1 ", " spliced ", " access - ", "msg=access", "frontend=pub", `request="GET /hello HTTP/1.1"`,
		"status=200", "termination=--"} {
		if !strings.Contains(msg, want) {
			t.Errorf("datagram %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "\n") {
		t.Errorf("datagram %q holds a newline", msg)
	}
	if strings.Contains(in.Logs(), `"msg":"access"`) || strings.Contains(in.Logs(), "msg=access") {
		t.Errorf("access line on stderr too")
	}
}

// TestLogsKeepA502FindableAfterThousandsOfRequests: a 502 (the server
// closes before its response head: SH), then 5 000 normal requests: the
// last 1000 entries no longer hold it, but GET /api/v1/logs finds it by
// status (class or code), termination, abnormal=1, client and since,
// alone among the entries; a bad filter value is a 400 naming it.
func TestLogsKeepA502FindableAfterThousandsOfRequests(t *testing.T) {
	t.Parallel()
	const normal = 5000
	dir := t.TempDir()
	in := startSpliced(t, "", "--access-log-file", filepath.Join(dir, "access.log"))
	web := newHTTPOrigin(t, "web", func(_ net.Conn, r *rawReq) string {
		if r.Path == "/boom" {
			return "" // closes without an answer
		}
		return okResp("web")
	})
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	began := time.Now().UTC().Add(-time.Second).Format(time.RFC3339)
	resp, _ := roundTrip(t, port, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("/boom: %d, want 502", resp.StatusCode)
	}
	type rec struct {
		Request, Termination, Client, Server string
		Status                               int
	}
	logs := func(query string) []rec {
		t.Helper()
		var out []rec
		in.MustDo(200, "GET", "/api/v1/logs?"+query, nil).JSON(t, &out)
		return out
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return len(logs("status=502")) == 1 }, "the 502 logged")

	// 5 000 normal requests on kept-alive connections, bounded in time.
	deadline := time.Now().Add(60 * time.Second)
	c := dialProxy(t, port)
	br := bufio.NewReader(c)
	for i := range normal {
		if time.Now().After(deadline) {
			t.Fatalf("only %d requests in 60 s", i)
		}
		if i%500 == 0 { // a new connection now and then: dialProxy's deadline is 10 s
			c.Close()
			c = dialProxy(t, port)
			br = bufio.NewReader(c)
		}
		io.WriteString(c, "GET /n-"+strconv.Itoa(i)+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp, _ := readResp(t, br, "GET")
		if resp.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, resp.StatusCode)
		}
	}
	c.Close()
	last := "GET /n-" + strconv.Itoa(normal-1) + " HTTP/1.1"
	testutil.Eventually(t, 10*time.Second, func() bool {
		l := logs("limit=1")
		return len(l) == 1 && l[0].Request == last
	}, "the last request logged")

	for _, r := range logs("limit=1000") {
		if r.Status != 200 {
			t.Fatalf("the last 1000 entries hold %+v", r)
		}
	}
	for _, q := range []string{"status=5xx", "status=502", "termination=SH", "abnormal=1", "abnormal=1&client=127.0.0.1",
		"status=5xx&frontend=pub&backend=web&server=s1", "abnormal=1&since=" + began} {
		got := logs(q)
		if len(got) != 1 || got[0].Request != "GET /boom HTTP/1.1" || got[0].Status != 502 || got[0].Termination != "SH" ||
			!strings.HasPrefix(got[0].Client, "127.0.0.1:") {
			t.Errorf("%s: %d entries (%.300v), want the 502 alone", q, len(got), got)
		}
	}
	if got := logs("abnormal=1&client=127.0.0.2"); len(got) != 0 {
		t.Errorf("another client: %+v", got)
	}
	for _, q := range []string{"status=5x", "termination=ZZ", "client=localhost", "since=today", "abnormal=2"} {
		r := in.MustDo(400, "GET", "/api/v1/logs?"+q, nil)
		if param := q[:strings.IndexByte(q, '=')]; !strings.Contains(string(r.Body), `"detail":"`+param+` must be`) {
			t.Errorf("%s: %s, want a problem naming %s", q, r.Body, param)
		}
	}
}

// TestLogsKeepA502FindableAfterAFloodOfBadRequests: the tester's repro
// of issue 23 item 11's F1 — a 502 (SH), then more garbage requests (the
// proxy's 400, PR) and 404s than the abnormal ring holds: the 502 is
// still found by status=502, because the client side's faults have a ring
// of their own; the garbage is logged as PR 400s.
func TestLogsKeepA502FindableAfterAFloodOfBadRequests(t *testing.T) {
	t.Parallel()
	const garbage, notFound = 1001, 300
	in := startSpliced(t, "", "--access-log-file", filepath.Join(t.TempDir(), "access.log"))
	web := newHTTPOrigin(t, "web", func(_ net.Conn, r *rawReq) string {
		switch r.Path {
		case "/boom":
			return "" // closes without an answer
		case "/missing":
			return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
		}
		return okResp("web")
	})
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	type rec struct {
		Request, Termination string
		Status               int
	}
	logs := func(query string) []rec {
		t.Helper()
		var out []rec
		in.MustDo(200, "GET", "/api/v1/logs?"+query, nil).JSON(t, &out)
		return out
	}
	resp, _ := roundTrip(t, port, "GET /boom HTTP/1.1\r\nHost: x\r\n\r\n")
	resp.Body.Close()
	if resp.StatusCode != 502 {
		t.Fatalf("/boom: %d, want 502", resp.StatusCode)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return len(logs("status=502")) == 1 }, "the 502 logged")

	deadline := time.Now().Add(60 * time.Second)
	for i := range garbage {
		if time.Now().After(deadline) {
			t.Fatalf("only %d garbage requests in 60 s", i)
		}
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GARBAGE\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
		c.Close()
		if err != nil || resp.StatusCode != 400 {
			t.Fatalf("garbage request %d: %v %v", i, resp, err)
		}
	}
	c := dialProxy(t, port)
	br := bufio.NewReader(c)
	for i := range notFound {
		if time.Now().After(deadline) {
			t.Fatalf("only %d 404s in 60 s", i)
		}
		io.WriteString(c, "GET /missing HTTP/1.1\r\nHost: x\r\n\r\n")
		if resp, _ := readResp(t, br, "GET"); resp.StatusCode != 404 {
			t.Fatalf("404 number %d: %d", i, resp.StatusCode)
		}
	}
	io.WriteString(c, "GET /last HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, br, "GET")
	c.Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		l := logs("limit=1")
		return len(l) == 1 && l[0].Request == "GET /last HTTP/1.1"
	}, "the last request logged")

	if got := logs("status=400&limit=1"); len(got) != 1 || got[0].Termination != "PR" {
		t.Errorf("a garbage request is logged as %+v, want a PR 400", got)
	}
	if got := logs("status=4xx&limit=2000"); len(got) < accesslog.KeepAbnormalDefault {
		t.Errorf("%d 4xx entries kept, want the abnormal ring full of them", len(got))
	}
	for _, q := range []string{"status=502", "status=5xx", "termination=SH"} {
		if got := logs(q); len(got) != 1 || got[0].Request != "GET /boom HTTP/1.1" {
			t.Errorf("%s: %+v, want the 502", q, got)
		}
	}
}
