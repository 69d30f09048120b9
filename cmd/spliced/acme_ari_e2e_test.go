package main

// End-to-end test of the renewal following the CA's renewal information
// (ACME ARI, RFC 9773) served by pebble.

import (
	"bytes"
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	acmeproto "github.com/mholt/acmez/v3/acme"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// storedLeaf reads the leaf of the certificate c from the state directory.
func storedLeaf(t *testing.T, in *instance, c managedCert) (*x509.Certificate, []byte) {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(in.StateDir, "certs", c.ChainSHA256+".pem"))
	if err != nil {
		t.Fatal(err)
	}
	for blk, rest := pem.Decode(b); blk != nil; blk, rest = pem.Decode(rest) {
		if blk.Type == "CERTIFICATE" {
			leaf, err := x509.ParseCertificate(blk.Bytes)
			if err != nil {
				t.Fatal(err)
			}
			return leaf, pem.EncodeToMemory(blk)
		}
	}
	t.Fatalf("no certificate in %s", c.ChainSHA256)
	return nil, nil
}

// TestACMERenewalFollowsRenewalInfo: an issued certificate's
// next_renewal_at lies in the suggested window pebble's renewal info gives
// for it (shown as acme.ari_window), and a window in the past (set through
// pebble's management API, as for a revoked certificate) makes spliced
// renew it at once, years before two thirds of its lifetime.
func TestACMERenewalFollowsRenewalInfo(t *testing.T) {
	t.Parallel()
	httpPort := testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t)})
	in := startSpliced(t, "", "--acme-retry", "1s")
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http",
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": httpPort}}})
	in.MustDo(201, "POST", "/api/v1/certificates", managedBody("site", ca, "http-01", "localhost"))
	var raw map[string]any
	first := waitManaged(t, in, "site", 60*time.Second, "site valid with its renewal window", func(c managedCert) bool {
		in.MustDo(200, "GET", "/api/v1/certificates/site", nil).JSON(t, &raw)
		_, ok := raw["acme"].(map[string]any)["ari_window"]
		return c.ACME.Status == "valid" && ok
	})
	leaf, leafPEM := storedLeaf(t, in, first)

	// The window pebble gives for this certificate, asked by the test.
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	client := &acmeproto.Client{Directory: ca.Directory, HTTPClient: ca.client()}
	info, err := client.GetRenewalInfo(ctx, leaf)
	if err != nil {
		t.Fatal(err)
	}
	next, err := time.Parse(time.RFC3339, first.ACME.NextRenewalAt)
	if err != nil {
		t.Fatal(err)
	}
	start, end := info.SuggestedWindow.Start.Truncate(time.Second), info.SuggestedWindow.End
	if next.Before(start) || next.After(end) {
		t.Errorf("next_renewal_at %s outside pebble's window %s to %s", next, start, end)
	}
	win := raw["acme"].(map[string]any)["ari_window"].(map[string]any)
	if win["start"] != info.SuggestedWindow.Start.UTC().Format(time.RFC3339) || win["end"] != info.SuggestedWindow.End.UTC().Format(time.RFC3339) {
		t.Errorf("ari_window %v, pebble's %s to %s", win, info.SuggestedWindow.Start, info.SuggestedWindow.End)
	}
	twoThirds := leaf.NotBefore.Add(leaf.NotAfter.Sub(leaf.NotBefore) * 2 / 3)
	t.Logf("next_renewal_at %s: window %s to %s, two thirds %s", next, start, end, twoThirds)

	// pebble says "renew now" (a window an hour ago, as for a revoked
	// certificate); spliced reads it at its next look (a restart: the CA's
	// Retry-After is 6 h) and renews the certificate at once.
	past := time.Now().Add(-time.Hour).UTC()
	ari, _ := json.Marshal(map[string]any{"suggestedWindow": map[string]string{
		"start": past.Format(time.RFC3339), "end": past.Add(time.Minute).Format(time.RFC3339)}})
	body, _ := json.Marshal(map[string]string{"Certificate": string(leafPEM), "ARIResponse": string(ari)})
	resp, err := ca.client().Post(ca.mgmt+"/set-renewal-info/", "application/json", bytes.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("pebble set-renewal-info: %d", resp.StatusCode)
	}
	in.ExpectDeath("killed to restart on the same state directory")
	in.Kill()
	again := startSpliced(t, in.StateDir, "--acme-retry", "1s")
	restarted := time.Now()
	second := waitManaged(t, again, "site", 60*time.Second, "renewed as the renewal info says", func(c managedCert) bool {
		return c.ACME.Status == "valid" && c.ChainSHA256 != "" && c.ChainSHA256 != first.ChainSHA256
	})
	t.Logf("renewed %s after the restart, %s before its two thirds", time.Since(restarted).Round(time.Millisecond), time.Until(twoThirds).Round(time.Hour))
	if l, _ := storedLeaf(t, again, second); !l.NotBefore.After(leaf.NotBefore.Add(-time.Second)) {
		t.Errorf("renewed leaf not before %s, first %s", l.NotBefore, leaf.NotBefore)
	}
}
