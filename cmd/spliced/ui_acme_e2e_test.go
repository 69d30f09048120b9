package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestUIManagedCertificate: the Certificates page creates a managed
// certificate (the form sends an acme member, no PEM), and its row shows
// the state as it moves: pending, then valid with its next renewal, once
// pebble issued it through http-01 on the frontend's clear bind.
func TestUIManagedCertificate(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	httpPort := testutil.FreePort(t)
	ca := startPebble(t, pebbleOptions{HTTPPort: httpPort, TLSPort: testutil.FreePort(t)})
	in := startSpliced(t, "", "--acme-retry", "1s")
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "public", "mode": "http",
		"binds": []map[string]any{{"name": "clear", "address": "127.0.0.1", "port": httpPort}}})

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("certificates")
	u.recordSent()
	u.run("open the managed certificate form",
		chromedp.Click(chromedp.CSS(`#managed-cert`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/acme/domains"] input`)))
	u.fill(`dialog[open] [data-ptr="/name"] input`, "auto")
	u.fill(`dialog[open] [data-ptr="/acme/domains"] input`, "localhost")
	u.fill(`dialog[open] [data-ptr="/acme/directory"] input`, ca.Directory)
	u.fill(`dialog[open] [data-ptr="/acme/email"] input`, "ops@example.com")
	u.fill(`dialog[open] [data-ptr="/acme/directory_ca_pem"] textarea`, ca.CAPEM)
	u.run("submit", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)))
	u.waitJS(60*time.Second, "the row shows the certificate valid",
		`(() => { const c = document.querySelector('#cert-table tr[data-name="auto"] .acme-state'); return !!c && c.textContent.includes('valid') && c.textContent.includes('renews'); })()`)
	sent := u.lastSent()
	if !strings.Contains(sent, `"acme"`) || !strings.Contains(sent, `"domains":["localhost"]`) || strings.Contains(sent, "cert_pem") {
		t.Fatalf("the form sent %s", sent)
	}
	if s := u.text(`#cert-table tr[data-name="auto"]`); !strings.Contains(s, "localhost") || !strings.Contains(s, "http-01") {
		t.Fatalf("row auto = %q", s)
	}
	c := getManaged(t, in, "auto")
	if c.ACME.Status != "valid" || c.ChainSHA256 == "" {
		t.Fatalf("API: %+v", c)
	}
}
