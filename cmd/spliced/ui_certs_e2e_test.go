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
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
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

	u := newUITest(t, in, 60*time.Second)
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
