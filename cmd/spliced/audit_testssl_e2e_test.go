package main

// The TLS audit (issue 15): testssl.sh, a real scanner, against a TLS bind
// of the real binary with the default settings must report no finding of
// severity LOW or above beyond those any self-signed test certificate gets.

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/internal/testssl"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// testsslLimit bounds the whole scan (testssl.Stall a scan that stopped
// printing): 40-60 s here (most of it testssl.sh's own openssl
// processes), more than 3 min under the load of other jobs; the e2e
// lane runs the package within 15 min, the scan beside its other tests.
const testsslLimit = 10 * time.Minute

func TestTLSAuditOfADefaultBindWithTestssl(t *testing.T) {
	bin, err := testssl.Binary()
	if err != nil {
		if os.Getenv("CI") != "" {
			t.Fatalf("%v: CI must run the TLS audit", err)
		}
		t.Skipf("%v: the TLS audit is skipped", err)
	}
	in := startSpliced(t, "")
	origin := newHTTPOrigin(t, "audit", nil)
	// A certificate that gets everything right a test can get right (see
	// testssl.TestCertificate): the scanned address among its names, a
	// 90-day validity, a random serial, ECDSA P-256.
	cert := testutil.NewCert(t, testutil.CertSpec{
		Names:    []string{"localhost", "127.0.0.1"},
		NotAfter: time.Now().Add(90 * 24 * time.Hour),
	})
	in.MustDo(201, "POST", "/api/v1/certificates", map[string]any{
		"name": "audit", "cert_pem": cert.ChainPEM, "key_pem": cert.KeyPEM,
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "origin", "mode": "http", "servers": []map[string]any{origin.server("o1")},
	})
	port := testutil.FreePort(t)
	// Nothing but the certificate: every other TLS setting is the default.
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "audit", "mode": "http", "default_backend": "origin",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"tls": map[string]any{"certificates": []string{"audit"}}}},
	})

	// crypto/tls advertises every TLS 1.3 session ticket with a lifetime
	// hint of 7 days (maxSessionTicketLifetime, not configurable), which
	// testssl.sh grades LOW because forward secrecy asks for ticket keys
	// rotated within a day. What protects past sessions is the rotation:
	// a ticket older than the keys kept cannot be decrypted, whatever its
	// hint. The finding is expected only while the defaults keep every
	// key less than a day.
	var tuning struct {
		TLS struct {
			TicketRotationMs int `json:"ticket_rotation_ms"`
		} `json:"tls"`
	}
	in.MustDo(200, "GET", "/api/v1/tuning", nil).JSON(t, &tuning)
	keyLife := time.Duration(tuning.TLS.TicketRotationMs) * time.Millisecond * tlsconf.KeptTicketKeys
	expected := testssl.Merge(testssl.Scanner, testssl.TestCertificate)
	if keyLife > 0 && keyLife <= 24*time.Hour {
		expected["TLS_session_ticket"] = fmt.Sprintf("crypto/tls hints 7 days on TLS 1.3 tickets; the keys that decrypt them live %v (rotation %v, %d kept)",
			keyLife, keyLife/tlsconf.KeptTicketKeys, tlsconf.KeptTicketKeys)
	}

	// The scan is the package's longest test (about a minute, two under
	// load): it starts now, while the package's serial tests run (this
	// file's name puts the test among the first), and the test then waits
	// its turn among the parallel ones for its result. Started after
	// t.Parallel it began when most of them had, and ended last, a minute
	// after them.
	type scan struct {
		findings []testssl.Finding
		out      string
		err      error
		took     time.Duration
	}
	done := make(chan scan, 1)
	dir := t.TempDir()
	go func() {
		start := time.Now()
		f, out, err := testssl.Run(context.Background(), bin, dir, "127.0.0.1:"+strconv.Itoa(port), testssl.Stall, testsslLimit)
		done <- scan{f, out, err, time.Since(start)}
	}()
	t.Parallel()
	res := <-done
	findings, out, err := res.findings, res.out, res.err
	if err != nil {
		t.Fatalf("%v\n--- testssl.sh output ---\n%s", err, out)
	}
	t.Logf("testssl.sh: %d findings in %v", len(findings), res.took.Round(time.Second))
	if m := testssl.Missing(findings); len(m) > 0 {
		t.Fatalf("the scan is incomplete, no result for %v\n--- testssl.sh output ---\n%s", m, out)
	}
	if bad := testssl.Unexpected(findings, expected); len(bad) > 0 {
		t.Errorf("testssl.sh graded spliced's default TLS settings:\n%s--- testssl.sh output ---\n%s", testssl.Report(bad), out)
	}
	for _, f := range findings {
		if _, ok := expected[f.ID]; ok && !testssl.Clean(f.Severity) {
			t.Logf("expected: %s (%s)", f, expected[f.ID])
		}
	}
}
