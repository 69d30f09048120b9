package main

// End-to-end tests of managed certificates (issue 29): the real binary
// obtains certificates from a real ACME server (pebble, acme_harness_test.go)
// through the API only, answers its challenges on its own binds and serves
// what it obtained.

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// managedCert is GET /api/v1/certificates/{name} as these tests read it.
type managedCert struct {
	Name        string   `json:"name"`
	ChainSHA256 string   `json:"chain_sha256"`
	Fingerprint string   `json:"fingerprint_sha256"`
	NotAfter    string   `json:"not_after"`
	SANs        []string `json:"sans"`
	ACME        struct {
		Domains       []string `json:"domains"`
		Challenge     string   `json:"challenge"`
		AccountSHA256 string   `json:"account_sha256"`
		Status        string   `json:"status"`
		Error         *struct {
			Type   string `json:"type"`
			Detail string `json:"detail"`
		} `json:"error"`
		RenewedAt     string `json:"renewed_at"`
		NextRenewalAt string `json:"next_renewal_at"`
		RetryAt       string `json:"retry_at"`
	} `json:"acme"`
}

func getManaged(t *testing.T, in *instance, name string) managedCert {
	t.Helper()
	var c managedCert
	in.MustDo(200, "GET", "/api/v1/certificates/"+name, nil).JSON(t, &c)
	return c
}

// waitManaged polls the certificate until cond holds.
func waitManaged(t *testing.T, in *instance, name string, d time.Duration, what string, cond func(c managedCert) bool) managedCert {
	t.Helper()
	var c managedCert
	testutil.Eventually(t, d, func() bool {
		c = getManaged(t, in, name)
		return cond(c)
	}, what)
	return c
}

// helloOrigin answers every request with "hello".
func helloOrigin(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// servedLeaf is the leaf a TLS bind on port serves for name, verified
// against roots (nil: not verified).
func servedLeaf(t *testing.T, port int, name string, roots *x509.CertPool) (*x509.Certificate, error) {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(port),
		&tls.Config{ServerName: name, RootCAs: roots, InsecureSkipVerify: roots == nil, NextProtos: []string{"http/1.1"}})
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0], nil
}

func fingerprint(c *x509.Certificate) string {
	s := sha256.Sum256(c.Raw)
	return hex.EncodeToString(s[:])
}

func managedBody(name string, ca *pebble, challenge string, domains ...string) map[string]any {
	return map[string]any{"name": name, "acme": map[string]any{
		"domains": domains, "directory": ca.Directory, "email": "ops@example.com",
		"challenge": challenge, "directory_ca_pem": ca.CAPEM}}
}

// TestACMEIssuesWithHTTP01: a managed certificate is obtained from pebble
// through http-01 answered on the frontend's clear bind, stored, and
// served by the TLS bind that names it, which answered no handshake
// before (not issued yet).
func TestACMEIssuesWithHTTP01(t *testing.T) {
	t.Parallel()
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t)})
	in := startSpliced(t, "", "--acme-retry", "1s")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": helloOrigin(t)}}})
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": httpPort}}})
	start := time.Now()
	in.MustDo(201, "POST", "/api/v1/certificates", managedBody("site", ca, "http-01", "localhost"))
	in.MustDo(201, "POST", "/api/v1/frontends/public/binds", map[string]any{"name": "tls", "address": "127.0.0.1", "port": tlsPort,
		"tls": map[string]any{"certificates": []string{"site"}}})
	c := waitManaged(t, in, "site", 60*time.Second, "site valid", func(c managedCert) bool { return c.ACME.Status == "valid" })
	t.Logf("issued through http-01 in %s", time.Since(start).Round(time.Millisecond))
	if c.ChainSHA256 == "" || c.ACME.RenewedAt == "" || c.ACME.NextRenewalAt == "" || len(c.SANs) != 1 || c.SANs[0] != "localhost" {
		t.Fatalf("after issuance: %+v", c)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca.root()))
	var leaf *x509.Certificate
	testutil.Eventually(t, 10*time.Second, func() bool {
		l, err := servedLeaf(t, tlsPort, "localhost", roots)
		leaf = l
		return err == nil && fingerprint(l) == c.Fingerprint
	}, "the TLS bind serves the certificate obtained, verified by pebble's root")
	_ = leaf
	// And the request goes through.
	cl := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	resp, err := cl.Get("https://localhost:" + strconv.Itoa(tlsPort) + "/")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "hello" {
		t.Fatalf("through the managed certificate: %d %q", resp.StatusCode, b)
	}
	// The issuance is a revision by actor acme; the metric counts it.
	var revs []struct {
		Actor string `json:"actor"`
	}
	in.MustDo(200, "GET", "/api/v1/config/revisions", nil).JSON(t, &revs)
	found := false
	for _, r := range revs {
		found = found || r.Actor == "acme"
	}
	if !found {
		t.Errorf("no revision by actor acme: %+v", revs)
	}
	m := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	if !strings.Contains(m, `spliced_certificate_acme_renewals_total{result="success"} 1`) {
		t.Errorf("metrics: %s", grepLines(m, "acme"))
	}
}

// TestACMEIssuesWithTLSALPN01: the challenge is answered on the TLS bind
// that names the certificate (acme-tls/1 although its alpn is set and
// the certificate is not issued yet), and ordinary handshakes are
// refused until it is.
func TestACMEIssuesWithTLSALPN01(t *testing.T) {
	t.Parallel()
	tlsPort := testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: testutil.FreePort(t), TLSPort: tlsPort})
	in := startSpliced(t, "", "--acme-retry", "1s")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": helloOrigin(t)}}})
	start := time.Now()
	in.MustDo(201, "POST", "/api/v1/certificates", managedBody("site", ca, "tls-alpn-01", "localhost"))
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "tls", "address": "127.0.0.1", "port": tlsPort,
			"tls": map[string]any{"certificates": []string{"site"}, "alpn": []string{"http/1.1"}}}}})
	c := waitManaged(t, in, "site", 60*time.Second, "site valid", func(c managedCert) bool { return c.ACME.Status == "valid" })
	t.Logf("issued through tls-alpn-01 in %s", time.Since(start).Round(time.Millisecond))
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM([]byte(ca.root()))
	testutil.Eventually(t, 10*time.Second, func() bool {
		l, err := servedLeaf(t, tlsPort, "localhost", roots)
		return err == nil && fingerprint(l) == c.Fingerprint
	}, "the TLS bind serves the certificate obtained")
	// A client asking for acme-tls/1 with no challenge pending is refused.
	if cn, err := tls.Dial("tcp", "127.0.0.1:"+strconv.Itoa(tlsPort), &tls.Config{ServerName: "localhost", RootCAs: roots, NextProtos: []string{"acme-tls/1"}}); err == nil {
		cn.Close()
		t.Fatal("acme-tls/1 negotiated with no challenge pending")
	}
}

// TestACMERefusedOrderShowsTheProblem: the CA's refusal is the
// certificate's state (status failed, the problem document, retry_at),
// counted and warned about by /readyz; no revision is made for it.
func TestACMERefusedOrderShowsTheProblem(t *testing.T) {
	t.Parallel()
	ca := startPebble(t, pebbleOptions{HTTPPort: testutil.FreePort(t), TLSPort: testutil.FreePort(t), Blocked: []string{"blocked-domain.example"}})
	in := startSpliced(t, "", "--acme-retry", "1s")
	res := in.MustDo(201, "POST", "/api/v1/certificates", managedBody("refused", ca, "http-01", "blocked-domain.example"))
	gen := res.Header.Get("X-Spliced-Generation")
	c := waitManaged(t, in, "refused", 60*time.Second, "refused failed", func(c managedCert) bool { return c.ACME.Status == "failed" })
	if c.ACME.Error == nil || c.ACME.Error.Type != "urn:ietf:params:acme:error:rejectedIdentifier" || !strings.Contains(c.ACME.Error.Detail, "blocked-domain.example") || c.ACME.RetryAt == "" {
		t.Fatalf("state of a refused order: %+v", c.ACME)
	}
	// Retried with backoff: more failures counted, still no new generation.
	testutil.Eventually(t, 30*time.Second, func() bool {
		m := string(in.MustDo(200, "GET", "/metrics", nil).Body)
		return strings.Contains(m, `spliced_certificate_acme_renewals_total{result="failure"} 2`) ||
			strings.Contains(m, `spliced_certificate_acme_renewals_total{result="failure"} 3`)
	}, "a second failure counted")
	if got := in.MustDo(200, "GET", "/api/v1/certificates/refused", nil).Header.Get("X-Spliced-Generation"); got != gen {
		t.Errorf("generation %s after failed orders, %s before: run-time state made a revision", got, gen)
	}
	// A bind naming it before it is issued refuses ordinary handshakes
	// with an alert (crypto/tls sends internal_error when no certificate
	// is chosen), counted in the frontend's handshakes_failed.
	tlsPort := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http",
		"binds": []map[string]any{{"name": "tls", "address": "127.0.0.1", "port": tlsPort, "tls": map[string]any{"certificates": []string{"refused"}}}}})
	if _, err := servedLeaf(t, tlsPort, "blocked-domain.example", nil); err == nil || !strings.Contains(err.Error(), "remote error: tls") {
		t.Fatalf("a handshake on a bind whose managed certificate is not issued: %v", err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return tlsStats(t, in, "public")["handshakes_failed"] >= 1 },
		"the refused handshake counted")
	var h struct {
		Warnings []string `json:"warnings"`
	}
	in.MustDo(200, "GET", "/readyz", nil).JSON(t, &h)
	if !strings.Contains(strings.Join(h.Warnings, "\n"), `managed certificate "refused"`) {
		t.Errorf("/readyz warnings: %q", h.Warnings)
	}
}

// TestACMERenewsAndKeepsServingWhileTheCAIsDown: a short-lived certificate
// is renewed at two thirds of its lifetime; with the CA down the renewal
// fails (status failed, retried with backoff) while the certificate last
// obtained keeps serving; the CA back, the next retry renews it.
func TestACMERenewsAndKeepsServingWhileTheCAIsDown(t *testing.T) {
	t.Parallel()
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t), Validity: 12 * time.Second})
	in := startSpliced(t, "", "--acme-retry", "1s")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": helloOrigin(t)}}})
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": httpPort}}})
	in.MustDo(201, "POST", "/api/v1/certificates", managedBody("short", ca, "http-01", "localhost"))
	in.MustDo(201, "POST", "/api/v1/frontends/public/binds", map[string]any{"name": "tls", "address": "127.0.0.1", "port": tlsPort,
		"tls": map[string]any{"certificates": []string{"short"}}})
	first := waitManaged(t, in, "short", 60*time.Second, "first issuance", func(c managedCert) bool { return c.ACME.Status == "valid" })
	due, err := time.Parse(time.RFC3339, first.ACME.NextRenewalAt)
	if err != nil {
		t.Fatal(err)
	}
	second := waitManaged(t, in, "short", 60*time.Second, "renewed", func(c managedCert) bool {
		return c.ACME.Status == "valid" && c.ChainSHA256 != first.ChainSHA256
	})
	t.Logf("renewed %s after its next_renewal_at", time.Since(due).Round(time.Millisecond))
	testutil.Eventually(t, 10*time.Second, func() bool {
		l, err := servedLeaf(t, tlsPort, "localhost", nil)
		return err == nil && fingerprint(l) == second.Fingerprint
	}, "the bind serves the renewed certificate")

	ca.stop()
	failed := waitManaged(t, in, "short", 60*time.Second, "a renewal failing with the CA down", func(c managedCert) bool {
		return c.ACME.Status == "failed" && c.ACME.RetryAt != ""
	})
	if failed.ChainSHA256 != second.ChainSHA256 {
		t.Fatalf("the certificate changed while the CA was down: %+v", failed)
	}
	if l, err := servedLeaf(t, tlsPort, "localhost", nil); err != nil || fingerprint(l) != second.Fingerprint {
		t.Fatalf("with the CA down the bind no longer serves the last certificate: %v", err)
	}
	ca.start()
	waitManaged(t, in, "short", 60*time.Second, "renewed once the CA is back", func(c managedCert) bool {
		return c.ACME.Status == "valid" && c.ChainSHA256 != second.ChainSHA256
	})
}

// TestACMEEABKeyIsWriteOnly: the external account binding's HMAC key goes
// to the account file only: no answer, log line, revision, audit entry or
// config document holds it.
func TestACMEEABKeyIsWriteOnly(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "", "--acme-retry", "1s")
	const secret = "c3BsaWNlZC13cml0ZS1vbmx5LWhtYWMta2V5LTI5"
	body := map[string]any{"name": "eab", "acme": map[string]any{
		"domains": []string{"localhost"}, "directory": "https://127.0.0.1:1/dir",
		"eab": map[string]any{"kid": "kid-1", "hmac_key": secret}}}
	res := in.MustDo(201, "POST", "/api/v1/certificates", body)
	if strings.Contains(string(res.Body), secret) {
		t.Fatalf("the POST answer holds the HMAC key: %s", res.Body)
	}
	waitManaged(t, in, "eab", 30*time.Second, "the order fails (no CA there)", func(c managedCert) bool { return c.ACME.Status == "failed" })
	for _, p := range []string{"/api/v1/certificates/eab", "/api/v1/certificates", "/api/v1/config", "/api/v1/config/revisions/1", "/api/v1/config/revisions", "/api/v1/audit"} {
		if b := in.MustDo(200, "GET", p, nil).Body; strings.Contains(string(b), secret) {
			t.Errorf("GET %s holds the HMAC key", p)
		}
	}
	if strings.Contains(in.Logs(), secret) {
		t.Error("the log holds the HMAC key")
	}
	// The account file keeps it (PEM: base64 of it), 0600 in certs/;
	// no other file of the state directory holds it in any form.
	c := getManaged(t, in, "eab")
	acct := filepath.Join(in.StateDir, "certs", c.ACME.AccountSHA256+".pem")
	b, err := os.ReadFile(acct)
	if err != nil || !strings.Contains(string(b), "ACME EAB HMAC KEY") {
		t.Fatalf("account file %s: %v\n%s", acct, err, b)
	}
	if fi, _ := os.Stat(acct); fi.Mode().Perm() != 0o600 {
		t.Errorf("account file mode %v", fi.Mode())
	}
	filepath.Walk(in.StateDir, func(p string, fi os.FileInfo, err error) error {
		if err != nil || fi.IsDir() {
			return nil
		}
		b, _ := os.ReadFile(p)
		if strings.Contains(string(b), secret) {
			t.Errorf("%s holds the HMAC key", p)
		}
		return nil
	})
}

// TestACMESettingsAreValidated: the acme member's problems point at their
// fields.
func TestACMESettingsAreValidated(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	res := in.MustDo(422, "POST", "/api/v1/certificates", map[string]any{"name": "bad", "cert_pem": "x", "acme": map[string]any{
		"domains": []string{"*.example.com", "ok.example.com", "ok.example.com"}, "directory": "http://ca.example/dir",
		"challenge": "dns-01", "key_type": "ed25519", "eab": map[string]any{"kid": "k"}}})
	for _, f := range []string{"/cert_pem", "/acme/eab/hmac_key"} {
		if !strings.Contains(string(res.Body), `"field":"`+f+`"`) {
			t.Errorf("no problem at %s: %s", f, res.Body)
		}
	}
	res = in.MustDo(422, "POST", "/api/v1/certificates", map[string]any{"name": "bad", "acme": map[string]any{
		"domains": []string{"*.example.com", "ok.example.com", "ok.example.com", "127.0.0.1"}, "directory": "http://ca.example/dir",
		"challenge": "dns-01", "key_type": "ed25519"}})
	for _, f := range []string{"/acme/domains/0", "/acme/domains/2", "/acme/domains/3", "/acme/directory", "/acme/challenge", "/acme/key_type"} {
		if !strings.Contains(string(res.Body), `"field":"`+f+`"`) {
			t.Errorf("no problem at %s: %s", f, res.Body)
		}
	}
}

// TestACMEReadme runs the README's "# acme:" block (the managed
// certificate walk-through) against a pebble of its own, with its ports.
func TestACMEReadme(t *testing.T) {
	t.Parallel()
	var block string
	for _, b := range readmeAllShellBlocks(t) {
		if strings.HasPrefix(b, "# acme:") {
			block = b
		}
	}
	if block == "" {
		t.Fatal(`README has no "# acme:" block`)
	}
	httpPort, tlsPort := testutil.FreePort(t), testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t)})
	in := startSpliced(t, "", "--acme-retry", "1s")
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "pebble.crt"), []byte(ca.CAPEM), 0o600); err != nil {
		t.Fatal(err)
	}
	script := strings.NewReplacer(
		"localhost:9900", in.Admin,
		"https://127.0.0.1:14000/dir", ca.Directory,
		"https://127.0.0.1:15000", ca.mgmt,
		`"port":5002`, `"port":`+strconv.Itoa(httpPort),
		`"port":8463`, `"port":`+strconv.Itoa(tlsPort),
		":8463", ":"+strconv.Itoa(tlsPort),
	).Replace(block)
	cmd := exec.Command("bash", "-euo", "pipefail", "-c", script)
	cmd.Dir = dir
	start := time.Now()
	out, err := runCmd(t, cmd)
	if err != nil {
		t.Fatalf("README acme block: %v\n%s", err, out)
	}
	t.Logf("README block: %s\n%s", time.Since(start).Round(time.Millisecond), out)
	if !strings.Contains(out, `"status":"valid"`) || !strings.Contains(out, "503 verify=0") {
		t.Fatalf("README acme block output:\n%s", out)
	}
}
