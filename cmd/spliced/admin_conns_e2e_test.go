package main

// Issue 13: anonymous connections must not make the admin API unreachable.

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// anonConns opens n connections to addr; each sends first (a whole
// request, or a request's first header lines when slow), and whole
// requests get their answer read when the server serves them within
// a short time. The caller closes them.
func anonConns(t *testing.T, addr string, n int, first string, slow bool) []net.Conn {
	t.Helper()
	conns := make([]net.Conn, 0, n)
	for i := 0; i < n; i++ {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, first); err != nil {
			continue // evicted already
		}
		if !slow {
			_ = c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
			if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
				resp.Body.Close()
			}
			_ = c.SetReadDeadline(time.Time{})
		}
	}
	return conns
}

// adminWithin sends one request with token on a new connection and wants
// 200 within a second.
func adminWithin(t *testing.T, addr, token, what string) {
	t.Helper()
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	req, _ := http.NewRequest("GET", "http://"+addr+"/api/v1/config", nil)
	req.Header.Set("Authorization", "Bearer "+token)
	start := time.Now()
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatalf("%s: the admin's request failed after %v: %v", what, time.Since(start), err)
	}
	resp.Body.Close()
	if d := time.Since(start); resp.StatusCode != 200 || d > time.Second {
		t.Fatalf("%s: the admin's request answered %d after %v, want 200 within a second", what, resp.StatusCode, d)
	}
}

func closeAll(cs []net.Conn) {
	for _, c := range cs {
		c.Close()
	}
}

func TestAnonymousConnectionsCannotLockOutAdmins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	in := startSpliced(t, dir) // --admin-max-conns 128
	http.DefaultClient.CloseIdleConnections()

	// 200 idle keep-alive connections from 127.0.0.1, each after a /healthz.
	idle := anonConns(t, in.Admin, 200, fmt.Sprintf("GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", in.Admin), false)
	defer closeAll(idle)
	adminWithin(t, in.Admin, admin, "200 idle anonymous connections")
}

func TestSlowHeaderConnectionsCannotLockOutAdmins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	in := startSpliced(t, dir) // --admin-max-conns 128
	http.DefaultClient.CloseIdleConnections()
	// 128 connections sending their headers slowly.
	slow := anonConns(t, in.Admin, 128, fmt.Sprintf("GET /api/v1/config HTTP/1.1\r\nHost: %s\r\n", in.Admin), true)
	defer closeAll(slow)
	adminWithin(t, in.Admin, admin, "128 slow-header connections")
}

// A refused request closes its connection (Connection: close), whatever
// refused it: a bad Host (403), no token (401), a bad token (401).
func TestRefusedRequestsCloseTheConnection(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newToken(t, dir, "admin", "root")
	in := startSpliced(t, dir)
	for what, req := range map[string]string{
		"bad Host":  "GET /healthz HTTP/1.1\r\nHost: evil.example\r\n\r\n",
		"no token":  fmt.Sprintf("GET /api/v1/config HTTP/1.1\r\nHost: %s\r\n\r\n", in.Admin),
		"bad token": fmt.Sprintf("GET /api/v1/config HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer spliced_nope\r\n\r\n", in.Admin),
	} {
		c, err := net.Dial("tcp", in.Admin)
		if err != nil {
			t.Fatal(err)
		}
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		io.WriteString(c, req)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 401 && resp.StatusCode != 403 {
			t.Fatalf("%s: %d", what, resp.StatusCode)
		}
		if !resp.Close {
			t.Errorf("%s: %d without Connection: close", what, resp.StatusCode)
		}
		if _, err := br.ReadByte(); err != io.EOF {
			t.Errorf("%s: the connection stays open after the %d (%v)", what, resp.StatusCode, err)
		}
		c.Close()
	}
}

// Idle anonymous connections are closed after --admin-anon-idle-timeout;
// a connection a valid token was admitted on keeps the normal idle time.
func TestIdleAnonymousConnectionsAreClosed(t *testing.T) {
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	in := startSpliced(t, dir, "--admin-anon-idle-timeout", "300ms")
	open := func(hdr string) (net.Conn, *bufio.Reader) {
		c, err := net.Dial("tcp", in.Admin)
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(c, "GET /api/v1/info HTTP/1.1\r\nHost: %s\r\n%s\r\n", in.Admin, hdr)
		br := bufio.NewReader(c)
		_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return c, br
	}
	// /healthz is public: anonymous.
	anon, err := net.Dial("tcp", in.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	fmt.Fprintf(anon, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", in.Admin)
	abr := bufio.NewReader(anon)
	_ = anon.SetReadDeadline(time.Now().Add(5 * time.Second))
	if resp, err := http.ReadResponse(abr, nil); err != nil {
		t.Fatal(err)
	} else {
		resp.Body.Close()
	}
	known, kbr := open("Authorization: Bearer " + admin + "\r\n")
	defer known.Close()
	// A connection that sent nothing at all is anonymous and idle too.
	silent, err := net.Dial("tcp", in.Admin)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()

	start := time.Now()
	for what, br := range map[string]*bufio.Reader{"after /healthz": abr, "silent": bufio.NewReader(silent)} {
		if _, err := br.ReadByte(); err != io.EOF {
			t.Fatalf("idle anonymous connection (%s): %v, want EOF", what, err)
		}
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("idle anonymous connections closed after %v", d)
	}
	// The admin's keep-alive connection is still open and usable.
	_ = known.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
	if _, err := kbr.ReadByte(); err == io.EOF || !os.IsTimeout(err) {
		t.Fatalf("the admin's idle connection: %v, want still open", err)
	}
	_ = known.SetReadDeadline(time.Now().Add(5 * time.Second))
	fmt.Fprintf(known, "GET /api/v1/info HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\n\r\n", in.Admin, admin)
	resp, err := http.ReadResponse(kbr, nil)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("the admin's kept-alive connection: %v", err)
	}
	resp.Body.Close()
}

// 128 viewer event streams used to hold every admin connection: streams
// are capped per token (429) and in all (503), below --admin-max-conns.
func TestViewerStreamsCannotLockOutAdmins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	var viewers []string
	for i := 0; i < 10; i++ {
		viewers = append(viewers, newToken(t, dir, "viewer", fmt.Sprintf("v%d", i)))
	}
	in := startSpliced(t, dir) // defaults: 128 connections, 32 streams, 4 per token
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	tr := &http.Transport{}
	defer tr.CloseIdleConnections()
	cl := &http.Client{Transport: tr}
	codes := map[int]int{}
	for i := 0; i < 128; i++ {
		req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+in.Admin+"/api/v1/events", nil)
		req.Header.Set("Authorization", "Bearer "+viewers[i%len(viewers)])
		resp, err := cl.Do(req)
		if err != nil {
			t.Fatalf("stream %d: %v", i, err)
		}
		codes[resp.StatusCode]++
		if resp.StatusCode != 200 {
			if ct := resp.Header.Get("Content-Type"); ct != "application/problem+json" {
				t.Fatalf("stream %d refused with %d, Content-Type %q", i, resp.StatusCode, ct)
			}
			resp.Body.Close()
			continue
		}
		defer resp.Body.Close()
	}
	if codes[200] != 32 || codes[200]+codes[429]+codes[503] != 128 {
		t.Fatalf("128 stream requests by 10 viewers: %v, want 32 streams and the rest 429/503", codes)
	}
	adminWithin(t, in.Admin, admin, "32 viewer streams open")
}

// A viewer's GET with a body it does not send: the handler answers
// without reading it, then the server drains it (before it writes the
// answer) for up to ReadTimeout. That connection is no longer serving an
// admitted request: 128 of them used to hold every slot, and an admin
// waited 30 s for one.
func TestViewerUnreadBodiesCannotLockOutAdmins(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	viewer := newToken(t, dir, "viewer", "v")
	in := startSpliced(t, dir) // --admin-max-conns 128
	http.DefaultClient.CloseIdleConnections()
	head := fmt.Sprintf("GET /api/v1/info HTTP/1.1\r\nHost: %s\r\nAuthorization: Bearer %s\r\nContent-Length: 200000\r\n\r\nx", in.Admin, viewer)
	var conns []net.Conn
	defer func() { closeAll(conns) }()
	for i := 0; i < 128; i++ {
		c, err := net.DialTimeout("tcp", in.Admin, 5*time.Second)
		if err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
		conns = append(conns, c)
		if _, err := io.WriteString(c, head); err != nil {
			t.Fatalf("connection %d: %v", i, err)
		}
	}
	// Every handler has returned (its access log line is written then),
	// every server goroutine now waits for the rest of its body.
	testutil.Eventually(t, 10*time.Second, func() bool {
		return strings.Count(in.Logs(), `"path":"/api/v1/info","status":200`) >= 128
	}, "128 viewer requests handled")
	adminWithin(t, in.Admin, admin, "128 viewer connections draining unread bodies")
}
