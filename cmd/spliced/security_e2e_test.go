package main

// End-to-end tests of the admin plane's security (issue 7) through the
// built binary: tokens and roles, the start refusal off loopback, Host and
// Origin checks, failed-auth rate limit, limits, the hostile-input corpus
// and concurrent If-Match writers.

import (
	"bufio"
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"io"
	"math/big"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tokenCLI runs `spliced token ARGS --state-dir dir` and returns stdout.
func tokenCLI(t *testing.T, dir string, args ...string) (string, string, error) {
	t.Helper()
	cmd := exec.Command(buildBinary(t), append(append([]string{"token"}, args...), "--state-dir", dir)...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	_, err := runCmd(t, cmd)
	return out.String(), errb.String(), err
}

func newToken(t *testing.T, dir, role, name string) string {
	t.Helper()
	out, errs, err := tokenCLI(t, dir, "add", "--role", role, "--name", name)
	if err != nil {
		t.Fatalf("token add: %v\n%s", err, errs)
	}
	return strings.TrimSpace(out)
}

func bearerHdr(tok string) string { return "Authorization: Bearer " + tok }

func TestTokenCommandAddListRevoke(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	secret := newToken(t, dir, "operator", "ci")
	if !strings.HasPrefix(secret, "spliced_") || strings.ContainsAny(secret, " \n") {
		t.Fatalf("token add printed %q, want the secret alone", secret)
	}
	if _, _, err := tokenCLI(t, dir, "add", "--role", "operator", "--name", "ci"); err == nil {
		t.Fatal("a second token with the same name was accepted")
	}
	if _, errs, err := tokenCLI(t, dir, "add", "--role", "root", "--name", "x"); err == nil || !strings.Contains(errs, "viewer, operator or admin") {
		t.Fatalf("unknown role: %v %s", err, errs)
	}
	list, _, err := tokenCLI(t, dir, "list")
	if err != nil || !strings.Contains(list, "ci") || !strings.Contains(list, "operator") {
		t.Fatalf("list: %v\n%s", err, list)
	}
	file, _ := os.ReadFile(filepath.Join(dir, "tokens.json"))
	for what, s := range map[string]string{"list": list, "tokens.json": string(file)} {
		if strings.Contains(s, secret[len("spliced_"):]) {
			t.Fatalf("%s shows the secret", what)
		}
	}
	if _, errs, err := tokenCLI(t, dir, "revoke", "ci"); err != nil {
		t.Fatalf("revoke: %v %s", err, errs)
	}
	if list, _, _ := tokenCLI(t, dir, "list"); strings.Contains(list, "ci") {
		t.Fatalf("revoked token still listed:\n%s", list)
	}
	if _, _, err := tokenCLI(t, dir, "revoke", "ci"); err == nil {
		t.Fatal("revoking an unknown token succeeded")
	}
}

func TestUnixSocketAdminIsOpenToItsOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	sock := filepath.Join(dir, "admin.sock")
	client := &http.Client{Transport: &http.Transport{
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	startAt(t, dir, "unix:"+sock, "http://spliced/healthz", client)
	fi, err := os.Stat(sock)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("socket mode %v (%v), want 0600", fi.Mode().Perm(), err)
	}
	// No Host check on a socket (any name reaches it), still no cross-site.
	get := func(origin string) int {
		req, _ := http.NewRequest("GET", "http://any-name/api/v1/info", nil)
		if origin != "" {
			req.Header.Set("Origin", origin)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if st := get(""); st != 200 {
		t.Fatalf("GET over the socket: %d", st)
	}
	if st := get("http://evil.example"); st != 403 {
		t.Fatalf("cross-origin GET over the socket: %d, want 403", st)
	}
	tok := newToken(t, dir, "viewer", "v")
	if st := get(""); st != 401 {
		t.Fatalf("GET over the socket once a token exists, without it: %d, want 401", st)
	}
	req, _ := http.NewRequest("GET", "http://any-name/api/v1/info", nil)
	req.Header.Set("Authorization", "Bearer "+tok)
	resp, err := client.Do(req)
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("with the token: %v %v", resp.StatusCode, err)
	}
	resp.Body.Close()
}

func TestNonLoopbackAdminNeedsAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	port := testutil.FreePort(t)
	addr := fmt.Sprintf("0.0.0.0:%d", port)
	out, err := runSpliced(t, "--admin-addr", addr, "--state-dir", dir)
	if err == nil {
		t.Fatal("spliced started on a non-loopback admin address without any token")
	}
	if !strings.Contains(string(out), "spliced token add") {
		t.Fatalf("the refusal does not say how to create a token:\n%s", out)
	}
	tok := newToken(t, dir, "admin", "root")
	in := startAt(t, dir, addr, fmt.Sprintf("http://127.0.0.1:%d/healthz", port), http.DefaultClient)
	in.Admin = fmt.Sprintf("127.0.0.1:%d", port)
	in.MustDo(401, "GET", "/api/v1/config", nil)
	in.MustDo(200, "GET", "/api/v1/config", nil, bearerHdr(tok))
	// Revoking the last token closes the API; it never opens it.
	if _, errs, err := tokenCLI(t, dir, "revoke", "root"); err != nil {
		t.Fatal(err, errs)
	}
	r := in.MustDo(401, "GET", "/api/v1/config", nil, bearerHdr(tok))
	if !strings.Contains(string(r.Body), "spliced token add") {
		t.Fatalf("401 without tokens off loopback should say how to create one: %s", r.Body)
	}
}

func TestRolesAndRevocationThroughTheBinary(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "root")
	viewer := newToken(t, dir, "viewer", "dashboard")
	op := newToken(t, dir, "operator", "oncall")
	in := startSpliced(t, dir)

	r := in.MustDo(401, "GET", "/api/v1/config", nil)
	if r.Header.Get("WWW-Authenticate") == "" || r.Header.Get("Content-Type") != "application/problem+json" {
		t.Fatalf("401 answer: %v %s", r.Header, r.Body)
	}
	in.MustDo(401, "GET", "/api/v1/config", nil, bearerHdr(viewer+"x"))
	in.MustDo(401, "GET", "/api/v1/config", nil, "Authorization: Basic "+viewer)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "servers": []map[string]any{
		{"name": "s1", "address": "127.0.0.1", "port": testutil.FreePort(t)}}}, bearerHdr(admin))

	var info struct {
		Role string `json:"role"`
		Auth bool   `json:"auth"`
	}
	for tok, role := range map[string]string{viewer: "viewer", op: "operator", admin: "admin"} {
		in.MustDo(200, "GET", "/api/v1/info", nil, bearerHdr(tok)).JSON(t, &info)
		if info.Role != role || !info.Auth {
			t.Fatalf("/info as %s: %+v", role, info)
		}
	}
	in.MustDo(200, "GET", "/api/v1/backends/web", nil, bearerHdr(viewer))
	in.MustDo(403, "GET", "/api/v1/audit", nil, bearerHdr(viewer))
	in.MustDo(403, "GET", "/api/v1/audit", nil, bearerHdr(op))
	in.MustDo(200, "GET", "/api/v1/audit", nil, bearerHdr(admin))
	in.MustDo(403, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":5}`, bearerHdr(viewer))
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"drain"}`, bearerHdr(op))
	in.MustDo(403, "PATCH", "/api/v1/backends/web/servers/s1", `{"port":1}`, bearerHdr(op))
	in.MustDo(403, "DELETE", "/api/v1/backends/web", nil, bearerHdr(op))

	// The audit trail names the token, never shows it.
	var audit []struct {
		Actor string `json:"actor"`
		Path  string `json:"path"`
	}
	in.MustDo(200, "GET", "/api/v1/audit", nil, bearerHdr(admin)).JSON(t, &audit)
	found := false
	for _, e := range audit {
		found = found || (e.Actor == "oncall" && e.Path == "/api/v1/backends/web/servers/s1")
	}
	if !found {
		t.Fatalf("no audit entry by oncall: %+v", audit)
	}

	// Revoked while running: refused on the next request.
	if _, errs, err := tokenCLI(t, dir, "revoke", "dashboard"); err != nil {
		t.Fatal(err, errs)
	}
	in.MustDo(401, "GET", "/api/v1/config", nil, bearerHdr(viewer))
	in.MustDo(200, "GET", "/api/v1/config", nil, bearerHdr(op))
	late := newToken(t, dir, "viewer", "late")
	in.MustDo(200, "GET", "/api/v1/config", nil, bearerHdr(late))

	auditFile, _ := os.ReadFile(filepath.Join(dir, "audit.log"))
	for _, s := range []string{admin, viewer, op, late} {
		for what, text := range map[string]string{"log": in.Logs(), "audit.log": string(auditFile)} {
			if strings.Contains(text, s[len("spliced_"):]) {
				t.Fatalf("a token secret appears in the %s", what)
			}
		}
	}
}

// doHost is in.Do with the Host header set (net/http's client takes it
// from Request.Host, not from the header map).
func doHost(t *testing.T, in *instance, method, path, host string, body string, hdr ...string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+in.Admin+path, rd)
	if err != nil {
		t.Fatal(err)
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	if host != "" {
		req.Host = host
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, b
}

func TestHostAndOriginRefusedWithoutTokens(t *testing.T) {
	in := startSpliced(t, "")
	_, port, _ := net.SplitHostPort(in.Admin)
	self := "http://" + in.Admin
	tests := []struct {
		name, method, path, host string
		hdr                      []string
		status                   int
	}{
		{"UI page", "GET", "/ui/", "", nil, 200},
		{"UI same-origin write", "POST", "/api/v1/backends", "", []string{"Origin: " + self}, 201},
		{"UI via localhost", "GET", "/api/v1/info", "localhost:" + port, []string{"Origin: http://localhost:" + port}, 200},
		{"curl, no Origin", "GET", "/api/v1/config", "", nil, 200},
		{"cross-site POST", "POST", "/api/v1/backends", "", []string{"Origin: http://evil.example"}, 403},
		{"cross-site DELETE", "DELETE", "/api/v1/backends/b1", "", []string{"Origin: http://evil.example:" + port}, 403},
		{"null Origin", "POST", "/api/v1/backends", "", []string{"Origin: null"}, 403},
		{"DNS rebinding", "GET", "/api/v1/config", "evil.example:" + port, nil, 403},
		{"DNS rebinding write", "POST", "/api/v1/backends", "evil.example:" + port, []string{"Origin: http://evil.example:" + port}, 403},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			body := ""
			if tc.method == "POST" {
				body = fmt.Sprintf(`{"name":"b%d"}`, i)
			}
			status, b := doHost(t, in, tc.method, tc.path, tc.host, body, tc.hdr...)
			if status != tc.status {
				t.Fatalf("%d, want %d: %s", status, tc.status, b)
			}
			if tc.status == 403 && !strings.Contains(string(b), "urn:spliced:problem:forbidden-") {
				t.Fatalf("not a forbidden-host/origin problem: %s", b)
			}
		})
	}
	in.MustDo(200, "GET", "/api/v1/backends/b1", nil) // the cross-site DELETE did nothing
}

func TestFailedAuthIsRateLimited(t *testing.T) {
	dir := t.TempDir()
	good := newToken(t, dir, "viewer", "v")
	admin := newToken(t, dir, "admin", "root")
	in := startSpliced(t, dir)
	for i := 0; i < 10; i++ {
		in.MustDo(401, "GET", "/api/v1/config", nil, bearerHdr("spliced_guess"+strconv.Itoa(i)))
	}
	r := in.MustDo(429, "GET", "/api/v1/config", nil, bearerHdr("spliced_guess"))
	if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 {
		t.Fatalf("Retry-After %q", r.Header.Get("Retry-After"))
	}
	// Issue 13: failures from 127.0.0.1 (every local user) never lock out
	// a valid token from the same address; bad tries stay limited.
	in.MustDo(200, "GET", "/api/v1/config", nil, bearerHdr(good))
	in.MustDo(200, "GET", "/api/v1/config", nil, bearerHdr(admin))
	in.MustDo(429, "GET", "/api/v1/config", nil, bearerHdr("spliced_guess"))
	in.MustDo(200, "GET", "/healthz", nil) // public routes stay reachable
}

func TestAdminLimits(t *testing.T) {
	in := startSpliced(t, "", "--admin-max-body", "2000", "--admin-max-conns", "3")
	big := `{"name":"x","servers":[` + strings.Repeat(`{"name":"s","address":"127.0.0.1","port":1},`, 60) + `{}]}`
	in.MustDo(413, "POST", "/api/v1/backends", big)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"small"}`)

	// Three kept-alive anonymous connections fill the cap (each proven
	// accepted by an answer); a fourth is served at once, and the oldest
	// idle anonymous one is closed for it (issue 13: they used to make
	// everyone else wait).
	http.DefaultClient.CloseIdleConnections() // the harness's own keep-alive
	var idle []*bufio.Reader
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", in.Admin)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		_ = c.SetDeadline(time.Now().Add(10 * time.Second))
		fmt.Fprintf(c, "GET /healthz HTTP/1.1\r\nHost: %s\r\n\r\n", in.Admin)
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("connection %d: %v", i, err)
		}
		resp.Body.Close()
		idle = append(idle, br)
	}
	c := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := c.Get("http://" + in.Admin + "/healthz")
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("a fourth connection at the cap: %v", err)
	}
	resp.Body.Close()
	if _, err := idle[0].ReadByte(); err != io.EOF {
		t.Fatalf("the oldest idle connection: %v, want closed", err)
	}
}

func TestAdminTLS(t *testing.T) {
	dir := t.TempDir()
	certFile, keyFile, pool := selfSigned(t, dir)
	port := testutil.FreePort(t)
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := fmt.Sprintf("https://127.0.0.1:%d", port)
	startAt(t, dir, fmt.Sprintf("127.0.0.1:%d", port), url+"/healthz", client,
		"--admin-tls-cert", certFile, "--admin-tls-key", keyFile)
	req, _ := http.NewRequest("POST", url+"/api/v1/backends", strings.NewReader(`{"name":"t"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", url)
	resp, err := client.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 201 {
		t.Fatalf("same-origin https write: %d", resp.StatusCode)
	}
	// Plain HTTP to the TLS port is not served.
	if resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/config", port)); err == nil {
		resp.Body.Close()
		if resp.StatusCode == 200 {
			t.Fatal("plain HTTP served on the TLS admin port")
		}
	}
}

func selfSigned(t *testing.T, dir string) (string, string, *x509.CertPool) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "spliced test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		IPAddresses: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := filepath.Join(dir, "admin.crt"), filepath.Join(dir, "admin.key")
	if err := os.WriteFile(cf, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(kf, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	pool := x509.NewCertPool()
	pool.AddCert(cert)
	return cf, kf, pool
}

// hostileBodies is the malformed-input corpus sent to every write endpoint.
func hostileBodies() map[string]string {
	deepObj := strings.Repeat(`{"a":`, 10000) + "1" + strings.Repeat("}", 10000)
	deepArr := strings.Repeat("[", 100000) + strings.Repeat("]", 100000)
	many := func(item string) string {
		return "[" + strings.TrimSuffix(strings.Repeat(item+",", 10000), ",") + "]"
	}
	return map[string]string{
		"empty":                  "",
		"not json":               "hello",
		"truncated":              `{"name":`,
		"trailing garbage":       `{"name":"x"} {"name":"y"}`,
		"null":                   "null",
		"array":                  "[]",
		"string":                 `"x"`,
		"number":                 "123",
		"wrong type name":        `{"name":1}`,
		"wrong type port":        `{"name":"x","port":"80","address":"127.0.0.1"}`,
		"wrong type servers":     `{"name":"x","servers":{}}`,
		"wrong type weight":      `{"name":"x","weight":true}`,
		"huge exponent":          `{"name":"x","port":1e400}`,
		"huge integer":           `{"name":"x","port":99999999999999999999999999,"maxconn":99999999999999999999999}`,
		"negative overflow":      `{"name":"x","maxconn":-9223372036854775809}`,
		"fraction":               `{"name":"x","port":80.5,"weight":1.5}`,
		"deep object":            deepObj,
		"deep array":             deepArr,
		"invalid utf-8":          "{\"name\":\"\xff\xfe\"}",
		"invalid utf-8 key":      "{\"\xc3\x28\":1}",
		"lone surrogate":         `{"name":"\ud800"}`,
		"path traversal":         `{"name":"../../etc/passwd","address":"127.0.0.1","port":1}`,
		"encoded traversal":      `{"name":"..%2f..%2fetc","address":"127.0.0.1","port":1}`,
		"crlf in name":           `{"name":"a\r\nX-Injected: 1","address":"127.0.0.1","port":1}`,
		"raw crlf in name":       "{\"name\":\"a\r\nX-Injected: 1\"}",
		"nul in name":            `{"name":"a\u0000b"}`,
		"duplicate member":       `{"name":"a","name":"b"}`,
		"unknown member":         `{"name":"a","nope":1}`,
		"10k wrong-type servers": `{"name":"x","servers":` + many("1") + `}`,
		"10k nameless binds":     `{"name":"x","binds":` + many("{}") + `}`,
		"10k top-level array":    many(`{"name":"x"}`),
		"10k cpus":               `{"nbthread":` + many("0") + `}`,
		"over 1 MiB":             `{"name":"` + strings.Repeat("a", 1<<20+10) + `"}`,
	}
}

// TestHostileInputNeverChangesTheConfig sends the corpus to every write
// endpoint through the binary: every answer is a 4xx problem, and the
// config is byte for byte what it was.
func TestHostileInputNeverChangesTheConfig(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	origin := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "servers": []map[string]any{
		{"name": "s1", "address": "127.0.0.1", "port": origin}}})
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "tcp", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": testutil.FreePort(t)}}})
	before := in.MustDo(200, "GET", "/api/v1/config", nil)

	bodyEndpoints := []struct{ method, path string }{
		{"POST", "/api/v1/frontends"}, {"PUT", "/api/v1/frontends/public"}, {"PATCH", "/api/v1/frontends/public"},
		{"POST", "/api/v1/frontends/public/binds"}, {"PUT", "/api/v1/frontends/public/binds/b1"},
		{"POST", "/api/v1/backends"}, {"PUT", "/api/v1/backends/web"}, {"PATCH", "/api/v1/backends/web"},
		{"POST", "/api/v1/backends/web/servers"}, {"PUT", "/api/v1/backends/web/servers/s1"},
		{"PATCH", "/api/v1/backends/web/servers/s1"},
		{"PUT", "/api/v1/config"}, {"PUT", "/api/v1/tuning"}, {"PATCH", "/api/v1/tuning"},
		{"PUT", "/api/v1/cpu-map"}, {"PUT", "/api/v1/irqs/12"},
	}
	n := 0
	check := func(method, path, what string, status int, header http.Header, body []byte) {
		t.Helper()
		n++
		if status < 400 || status > 499 {
			t.Errorf("%s %s (%s): %d, want 4xx: %.300s", method, path, what, status, body)
			return
		}
		if !strings.HasPrefix(what, "raw:") && header.Get("Content-Type") != "application/problem+json" {
			t.Errorf("%s %s (%s): %d with Content-Type %q, want a problem", method, path, what, status, header.Get("Content-Type"))
		}
		for k := range header {
			if strings.EqualFold(k, "X-Injected") || strings.EqualFold(k, "Set-Cookie") {
				t.Errorf("%s %s (%s): injected header %s in the answer", method, path, what, k)
			}
		}
	}
	for _, ep := range bodyEndpoints {
		for what, body := range hostileBodies() {
			r := in.Do(ep.method, ep.path, body)
			check(ep.method, ep.path, what, r.Status, r.Header, r.Body)
		}
		r := in.Do(ep.method, ep.path, `{"name":"x"}`, "Content-Type: text/plain")
		check(ep.method, ep.path, "text/plain", r.Status, r.Header, r.Body)
	}
	// Hostile names in paths, for every method that takes one.
	names := []string{"..%2F..%2Fetc%2Fpasswd", "%2e%2e", "a%0d%0aX-Injected:%201", "%ff%fe", "a%00b",
		strings.Repeat("n", 5000), "%252e%252e%252f"}
	for _, name := range names {
		for _, ep := range []struct{ method, path, body string }{
			{"PUT", "/api/v1/frontends/" + name, `{"mode":"tcp"}`},
			{"PATCH", "/api/v1/backends/" + name, `{"retries":1}`},
			{"DELETE", "/api/v1/backends/" + name, ""},
			{"DELETE", "/api/v1/frontends/public/binds/" + name, ""},
			{"PATCH", "/api/v1/backends/web/servers/" + name, `{"weight":1}`},
			{"DELETE", "/api/v1/backends/" + name + "/servers/s1", ""},
			{"POST", "/api/v1/config/revisions/" + name + "/restore", ""},
			{"PUT", "/api/v1/irqs/" + name, `{}`},
		} {
			var body any
			if ep.body != "" {
				body = ep.body
			}
			r := in.Do(ep.method, ep.path, body)
			check(ep.method, ep.path, "name "+name[:min(len(name), 20)], r.Status, r.Header, r.Body)
		}
	}
	for _, rev := range []string{"-1", "99999999999999999999", "1e5", "0x10", "999999"} {
		r := in.Do("POST", "/api/v1/config/revisions/"+rev+"/restore", nil)
		check("POST", "restore", rev, r.Status, r.Header, r.Body)
	}
	// Header injection and malformed requests at the byte level.
	raw := []string{
		"PATCH /api/v1/backends/web HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nIf-Match: \"x\"\r\n X-Injected: 1\r\nContent-Length: 13\r\n\r\n{\"retries\":1}",
		"PATCH /api/v1/backends/web HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\rX-Injected: 1\r\nContent-Length: 13\r\n\r\n{\"retries\":1}",
		"PATCH /api/v1/backends/web HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 13\r\nContent-Length: 14\r\n\r\n{\"retries\":1}",
		"PATCH /api/v1/backends/web HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\nContent-Length: 13\r\n\r\nzz\r\n",
		"PUT /api/v1/backends/we\x00b HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nContent-Length: 2\r\n\r\n{}",
		"PATCH /api/v1/backends/web HTTP/1.1\r\nHost: %s\r\nContent-Type: application/json\r\nX-Big: " + strings.Repeat("a", 70<<10) + "\r\nContent-Length: 13\r\n\r\n{\"retries\":1}",
	}
	for i, rq := range raw {
		status, hdr := rawRequest(t, in.Admin, fmt.Sprintf(rq, in.Admin))
		// net/http itself may answer these (400, 431) before any handler:
		// plain text, still a refusal.
		check("raw", strconv.Itoa(i), "raw: byte-level request", status, hdr, nil)
	}
	after := in.MustDo(200, "GET", "/api/v1/config", nil)
	if !bytes.Equal(before.Body, after.Body) || before.Header.Get("ETag") != after.Header.Get("ETag") {
		t.Fatalf("the config changed under hostile input:\nbefore %s\nafter  %s", before.Body, after.Body)
	}
	if strings.Contains(in.Logs(), "panic") {
		t.Fatalf("a handler panicked:\n%s", in.Logs())
	}
	t.Logf("%d hostile requests, all 4xx, config unchanged", n)
}

// rawRequest writes req on a new connection and returns the status and
// header of the answer.
func rawRequest(t *testing.T, addr, req string) (int, http.Header) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("reading the answer to %.60q: %v", req, err)
	}
	resp.Body.Close()
	return resp.StatusCode, resp.Header
}

// TestConcurrentIfMatchWriters: 50 clients read the same ETag and write
// with If-Match at once, round after round: exactly one wins each round
// (one generation), the others get 412, and the revisions hold a
// contiguous history whose every generation has the winner's content.
func TestConcurrentIfMatchWriters(t *testing.T) {
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "servers": []map[string]any{
		{"name": "s1", "address": "127.0.0.1", "port": testutil.FreePort(t), "weight": 1}}})
	const clients, rounds = 50, 5
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: clients}}
	path := "http://" + in.Admin + "/api/v1/backends/web/servers/s1"
	winners := map[int64]int{} // generation -> weight written
	startGen := int64(0)
	for round := 0; round < rounds; round++ {
		g := in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil)
		etag := g.Header.Get("ETag")
		gen, _ := strconv.ParseInt(g.Header.Get("X-Spliced-Generation"), 10, 64)
		if round == 0 {
			startGen = gen
		}
		var wg sync.WaitGroup
		start := make(chan struct{})
		type result struct {
			status, weight int
			gen            int64
		}
		results := make(chan result, clients)
		for c := 0; c < clients; c++ {
			weight := 2 + round*clients + c // unique per write, <= 256
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				req, _ := http.NewRequest("PATCH", path, strings.NewReader(fmt.Sprintf(`{"weight":%d}`, weight)))
				req.Header.Set("Content-Type", "application/merge-patch+json")
				req.Header.Set("If-Match", etag)
				resp, err := client.Do(req)
				if err != nil {
					results <- result{status: -1}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				ng, _ := strconv.ParseInt(resp.Header.Get("X-Spliced-Generation"), 10, 64)
				results <- result{status: resp.StatusCode, weight: weight, gen: ng}
			}()
		}
		close(start)
		wg.Wait()
		close(results)
		won, lost := 0, 0
		for r := range results {
			switch r.status {
			case 200:
				won++
				if r.gen != gen+1 {
					t.Fatalf("round %d: the winner created generation %d, want %d", round, r.gen, gen+1)
				}
				winners[r.gen] = r.weight
			case 412:
				lost++
			default:
				t.Fatalf("round %d: status %d", round, r.status)
			}
		}
		if won != 1 || lost != clients-1 {
			t.Fatalf("round %d: %d won, %d got 412; want exactly 1 and %d", round, won, lost, clients-1)
		}
	}
	var revs []struct {
		Generation int64 `json:"generation"`
	}
	in.MustDo(200, "GET", "/api/v1/config/revisions", nil).JSON(t, &revs)
	seen := map[int64]bool{}
	for i, r := range revs {
		seen[r.Generation] = true
		if i > 0 && revs[i-1].Generation != r.Generation+1 {
			t.Fatalf("revisions not contiguous: %d then %d", revs[i-1].Generation, r.Generation)
		}
	}
	for g := startGen + 1; g <= startGen+rounds; g++ {
		if !seen[g] {
			t.Fatalf("generation %d missing from the revisions", g)
		}
		var rev struct {
			Config struct {
				Backends []struct {
					Servers []struct {
						Weight int `json:"weight"`
					} `json:"servers"`
				} `json:"backends"`
			} `json:"config"`
		}
		in.MustDo(200, "GET", fmt.Sprintf("/api/v1/config/revisions/%d", g), nil).JSON(t, &rev)
		if w := rev.Config.Backends[0].Servers[0].Weight; w != winners[g] {
			t.Fatalf("revision %d holds weight %d, its winner wrote %d", g, w, winners[g])
		}
	}
	var cur struct {
		Weight int `json:"weight"`
	}
	in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).JSON(t, &cur)
	if cur.Weight != winners[startGen+rounds] {
		t.Fatalf("current weight %d, last winner wrote %d", cur.Weight, winners[startGen+rounds])
	}
	_ = json.Valid
}

// Issue 13: `spliced token revoke` ends the revoked token's open event
// streams within a second (they kept delivering stats and config events).
func TestTokenRevokeEndsItsEventStreams(t *testing.T) {
	dir := t.TempDir()
	viewer := newToken(t, dir, "viewer", "dashboard")
	in := startSpliced(t, dir)
	ctx, cancel := context.WithTimeout(t.Context(), 15*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+in.Admin+"/api/v1/events", nil)
	req.Header.Set("Authorization", "Bearer "+viewer)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("stream: %d", resp.StatusCode)
	}
	ended := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, resp.Body)
		ended <- time.Now()
	}()
	if _, errs, err := tokenCLI(t, dir, "revoke", "dashboard"); err != nil {
		t.Fatal(err, errs)
	}
	revoked := time.Now()
	select {
	case at := <-ended:
		if d := at.Sub(revoked); d > time.Second {
			t.Fatalf("stream ended %v after the revocation, want within a second", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the revoked token's stream still runs 5 s after `spliced token revoke`")
	}
}
