package main

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"math/big"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// certPEMFor returns the PEM of a self-signed ECDSA certificate for cn that
// expires in validFor, and its key.
func certPEMFor(t *testing.T, cn string, validFor time.Duration) (certPEM, keyPEM string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(time.Now().UnixNano()), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(validFor), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}))
}

// TestUICertificatesList: certificates uploaded through the API appear in
// the page's read-only list with subject, SANs and expiry; one that
// expires within 14 days is shown in red; the page holds no key.
func TestUICertificatesList(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	var keys []string
	for _, c := range []struct {
		name, cn string
		valid    time.Duration
	}{{"far", "far.test", 90 * 24 * time.Hour}, {"soon", "soon.test", 5 * 24 * time.Hour}} {
		cp, kp := certPEMFor(t, c.cn, c.valid)
		keys = append(keys, kp)
		body, _ := json.Marshal(map[string]string{"name": c.name, "cert_pem": cp, "key_pem": kp})
		in.MustDo(201, "POST", "/api/v1/certificates", string(body))
	}

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("certificates")
	if s := u.text(`#cert-table tr[data-name="far"]`); !strings.Contains(s, "CN=far.test") || !strings.Contains(s, "far.test") {
		t.Fatalf("row far = %q", s)
	}
	if s := u.text(`#cert-table tr[data-name="soon"] .badge.bad`); s == "" {
		t.Fatal("a certificate expiring in 5 days is not shown in red")
	}
	if s := u.text(`#cert-table tr[data-name="far"] .badge.bad`); s != "" {
		t.Fatalf("a certificate valid 90 days is shown in red: %q", s)
	}
	page := u.text(`body`)
	for _, k := range keys {
		if strings.Contains(page, strings.Split(k, "\n")[1]) {
			t.Fatal("the page shows key material")
		}
	}
	u.errs.check(t, "certificates")
}

// TestUIBindTLSFields: the bind form's TLS section sends the tls member
// the API expects (certificates chosen among the uploaded ones,
// min_version, alpn, client_ca, client_auth), and a refusal of it is shown
// in that section. While the data plane does not terminate TLS the API
// refuses the bind ("not wired"); once it does, the bind is created and
// the page lists its certificates.
func TestUIBindTLSFields(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	for _, n := range []string{"site", "alt"} {
		cp, kp := certPEMFor(t, n+".test", 90*24*time.Hour)
		body, _ := json.Marshal(map[string]string{"name": n, "cert_pem": cp, "key_pem": kp})
		in.MustDo(201, "POST", "/api/v1/certificates", string(body))
	}
	caPEM, _ := certPEMFor(t, "client-ca.test", 90*24*time.Hour)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[]}`)
	in.MustDo(201, "POST", "/api/v1/frontends", `{"name":"pub","default_backend":"web","binds":[]}`)

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("frontends")
	u.recordSent()
	u.run("open add bind form",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="add-bind"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.fill(`dialog[open] [data-ptr="/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/port"] input`, strconv.Itoa(testutil.FreePort(t)))
	u.run("turn TLS on",
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/tls"] input[type="checkbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/certificates"] select`)))
	evalJS[bool](u, `(() => { const s = document.querySelector('dialog[open] [data-ptr="/tls/certificates"] select');
		for (const o of s.options) o.selected = true; s.dispatchEvent(new Event('change', {bubbles: true})); return true; })()`)
	u.fill(`dialog[open] [data-ptr="/tls/min_version"] select`, "1.3")
	u.fill(`dialog[open] [data-ptr="/tls/alpn"] input`, "imap, x-proto")
	u.fill(`dialog[open] [data-ptr="/tls/client_auth"] select`, "optional")
	u.fill(`dialog[open] [data-ptr="/tls/client_ca"] textarea`, caPEM)
	u.run("submit", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)))
	u.waitJS(10*time.Second, "an answer to the bind form",
		`!document.querySelector('dialog[open]') || !!document.querySelector('dialog[open] fieldset[data-ptr="/tls"].invalid')`)

	var sent struct {
		TLS struct {
			Certificates []string `json:"certificates"`
			MinVersion   string   `json:"min_version"`
			ALPN         []string `json:"alpn"`
			ClientCA     string   `json:"client_ca"`
			ClientAuth   string   `json:"client_auth"`
		} `json:"tls"`
	}
	body := u.lastSent()
	if err := json.Unmarshal([]byte(body), &sent); err != nil {
		t.Fatalf("sent %q: %v", body, err)
	}
	if s := sent.TLS; strings.Join(s.Certificates, ",") != "site,alt" || s.MinVersion != "1.3" || strings.Join(s.ALPN, ",") != "imap,x-proto" ||
		s.ClientCA != caPEM || s.ClientAuth != "optional" {
		t.Fatalf("the form sent %s", body)
	}
	if evalJS[bool](u, `!!document.querySelector('dialog[open]')`) {
		// This build refuses tls binds: the refusal sits in the TLS section.
		if msg := u.text(`dialog[open] fieldset[data-ptr="/tls"] > .err`); !strings.Contains(msg, "not wired") {
			t.Fatalf("error in the TLS section = %q", msg)
		}
		u.errs.check(t, "frontends")
		return
	}
	var got struct {
		TLS struct {
			Certificates []string `json:"certificates"`
			MinVersion   string   `json:"min_version"`
			ClientAuth   string   `json:"client_auth"`
		} `json:"tls"`
	}
	in.MustDo(200, "GET", "/api/v1/frontends/pub/binds/b1", nil).JSON(t, &got)
	if strings.Join(got.TLS.Certificates, ",") != "site,alt" || got.TLS.MinVersion != "1.3" || got.TLS.ClientAuth != "optional" {
		t.Fatalf("stored bind: %+v", got)
	}
	u.waitJS(10*time.Second, "the bind's TLS in the table",
		`(document.querySelector('tr[data-bind="pub/b1"] td.tls') || {}).textContent === 'site, alt · TLS 1.3+ · client certs optional'`)
	u.errs.check(t, "frontends")
}
