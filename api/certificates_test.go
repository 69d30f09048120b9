package api

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"io/fs"
	"math/big"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core/config"
)

// testCert is a certificate made for a test, with its PEM forms.
type testCert struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM string
	keyPEM  string // PKCS #8, as the store writes it
}

// makeCert issues a certificate for cn valid from nb to na, signed by
// parent (self-signed when nil); ca makes it a CA.
func makeCert(t testing.TB, cn string, nb, na time.Time, parent *testCert, ca bool) *testCert {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	serial, _ := rand.Int(rand.Reader, big.NewInt(1<<62))
	tmpl := &x509.Certificate{
		SerialNumber: serial, Subject: pkix.Name{CommonName: cn}, NotBefore: nb, NotAfter: na,
		DNSNames: []string{cn}, BasicConstraintsValid: true, IsCA: ca,
		KeyUsage: x509.KeyUsageDigitalSignature | x509.KeyUsageCertSign,
	}
	signer, signerCert := key, tmpl
	if parent != nil {
		signer, signerCert = parent.key, parent.cert
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signerCert, &key.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return &testCert{cert: c, key: key,
		certPEM: string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		keyPEM:  string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}))}
}

func upload(name, certPEM, keyPEM string) string {
	b, _ := json.Marshal(CertificateUpload{Name: name, CertPEM: certPEM, KeyPEM: keyPEM})
	return string(b)
}

// keyFragments are the strings that would betray a key: its PEM, and each
// base64 line of it.
func keyFragments(keyPEM string) []string {
	out := []string{keyPEM}
	for _, l := range strings.Split(keyPEM, "\n") {
		if len(l) >= 16 && !strings.HasPrefix(l, "-----") {
			out = append(out, l)
		}
	}
	return out
}

func assertNoKey(t *testing.T, where, body string, keys ...*testCert) {
	t.Helper()
	for _, k := range keys {
		for _, frag := range keyFragments(k.keyPEM) {
			if strings.Contains(body, frag) {
				t.Fatalf("%s holds key material %q", where, truncate(frag, 20))
			}
		}
	}
}

func TestCertificateUploadRefusals(t *testing.T) {
	now := time.Now()
	day := 24 * time.Hour
	root := makeCert(t, "root.test", now.Add(-day), now.Add(365*day), nil, true)
	leaf := makeCert(t, "www.test", now.Add(-day), now.Add(90*day), root, false)
	other := makeCert(t, "other.test", now.Add(-day), now.Add(90*day), nil, false)
	expired := makeCert(t, "old.test", now.Add(-90*day), now.Add(-day), nil, false)
	future := makeCert(t, "new.test", now.Add(day), now.Add(90*day), nil, false)
	strayRoot := makeCert(t, "stray.test", now.Add(-day), now.Add(365*day), nil, true)
	p224, err := ecdsa.GenerateKey(elliptic.P224(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	k224, _ := x509.MarshalPKCS8PrivateKey(p224)
	p224PEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k224}))

	for _, tc := range []struct {
		name, body, field, code string
	}{
		{"bad PEM", upload("site", "not a certificate", leaf.keyPEM), "/cert_pem", config.CodeBadPEM},
		{"no certificate", upload("site", "", leaf.keyPEM), "/cert_pem", config.CodeRequired},
		{"key in cert_pem", upload("site", leaf.keyPEM, leaf.keyPEM), "/cert_pem", config.CodeBadPEM},
		{"corrupt DER", upload("site", "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", leaf.keyPEM), "/cert_pem", config.CodeBadPEM},
		{"no key", upload("site", leaf.certPEM, ""), "/key_pem", config.CodeRequired},
		{"bad key PEM", upload("site", leaf.certPEM, "garbage"), "/key_pem", config.CodeBadPEM},
		{"mismatched key", upload("site", leaf.certPEM+root.certPEM, other.keyPEM), "/key_pem", config.CodeKeyMismatch},
		{"expired", upload("site", expired.certPEM, expired.keyPEM), "/cert_pem", config.CodeExpired},
		{"not yet valid", upload("site", future.certPEM, future.keyPEM), "/cert_pem", config.CodeNotYetValid},
		{"wrong-order chain", upload("site", root.certPEM+leaf.certPEM, leaf.keyPEM), "/cert_pem", config.CodeChain},
		{"chain that does not link", upload("site", leaf.certPEM+strayRoot.certPEM, leaf.keyPEM), "/cert_pem", config.CodeChain},
		{"unsupported key", upload("site", leaf.certPEM, p224PEM), "/key_pem", config.CodeUnsupportedKey},
		{"bad name", upload("Site!", leaf.certPEM, leaf.keyPEM), "/name", config.CodeFormat},
		{"no name", upload("", leaf.certPEM, leaf.keyPEM), "/name", config.CodeRequired},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			w := f.must(t, 422, "POST", "/api/v1/certificates", tc.body)
			p := problemOf(t, w)
			found := false
			for _, e := range p.Errors {
				found = found || e.Field == tc.field && e.Code == tc.code
			}
			if !found {
				t.Fatalf("want %s %s; got %+v", tc.field, tc.code, p.Errors)
			}
			assertNoKey(t, "the problem", w.Body.String(), leaf, other, expired, future)
			if _, err := os.Stat(filepath.Join(f.store.Dir(), config.CertsDir)); err == nil {
				if ents, _ := os.ReadDir(filepath.Join(f.store.Dir(), config.CertsDir)); len(ents) > 0 {
					t.Fatalf("a refused upload stored %d files", len(ents))
				}
			}
			if f.store.Current().Generation != 0 {
				t.Fatal("a refused upload created a generation")
			}
		})
	}
}

// TestCertificateLifecycle uploads, reads, replaces, restores and deletes
// a certificate, and checks that its key appears in no answer, no audit
// entry, no revision or diff and no file of the state directory but its
// own 0600 file.
func TestCertificateLifecycle(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	day := 24 * time.Hour
	root := makeCert(t, "root.test", now.Add(-day), now.Add(365*day), nil, true)
	leaf := makeCert(t, "www.test", now.Add(-day), now.Add(90*day), root, false)
	self := makeCert(t, "self.test", now.Add(-day), now.Add(60*day), nil, false)

	// A dry run checks and stores nothing.
	f.must(t, 200, "POST", "/api/v1/certificates?dry_run=true", upload("site", leaf.certPEM+root.certPEM, leaf.keyPEM))
	if _, err := os.Stat(filepath.Join(f.store.Dir(), config.CertsDir)); err == nil {
		t.Fatal("a dry run stored a file")
	}

	w := f.must(t, 201, "POST", "/api/v1/certificates", upload("site", leaf.certPEM+root.certPEM, leaf.keyPEM))
	if loc := w.Header().Get("Location"); loc != "/api/v1/certificates/site" {
		t.Fatalf("Location %q", loc)
	}
	res := decodeJSON[struct {
		Generation int64           `json:"generation"`
		Result     CertificateInfo `json:"result"`
	}](t, w)
	got := res.Result
	if got.Name != "site" || got.Subject != "CN=www.test" || got.Issuer != "CN=root.test" || got.ChainLength != 2 ||
		got.KeyType != "ecdsa-p256" || len(got.SANs) != 1 || got.SANs[0] != "www.test" || got.UsedBy == nil || len(got.UsedBy) != 0 ||
		got.NotAfter != leaf.cert.NotAfter.UTC().Format(time.RFC3339) || len(got.FingerprintSHA256) != 64 {
		t.Fatalf("metadata: %+v", got)
	}
	gen1 := res.Generation

	// The file: content-addressed, 0600 in a 0700 directory.
	dir := filepath.Join(f.store.Dir(), config.CertsDir)
	fi, err := os.Stat(filepath.Join(dir, got.ChainSHA256+".pem"))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("certificate file: %v, %v", fi, err)
	}
	if di, err := os.Stat(dir); err != nil || di.Mode().Perm() != 0o700 {
		t.Fatalf("certs dir: %v, %v", di, err)
	}

	one := f.must(t, 200, "GET", "/api/v1/certificates/site", "")
	if decodeJSON[CertificateInfo](t, one).FingerprintSHA256 != got.FingerprintSHA256 {
		t.Fatal("GET one differs from the POST result")
	}
	list := decodeJSON[[]CertificateInfo](t, f.must(t, 200, "GET", "/api/v1/certificates", ""))
	if len(list) != 1 || list[0].Name != "site" {
		t.Fatalf("list: %+v", list)
	}
	f.must(t, 409, "POST", "/api/v1/certificates", upload("site", self.certPEM, self.keyPEM))

	// PUT replaces (If-Match on the certificate's ETag).
	f.must(t, 412, "PUT", "/api/v1/certificates/site", upload("", self.certPEM, self.keyPEM), hdr{"If-Match": `"nope"`})
	f.must(t, 422, "PUT", "/api/v1/certificates/site", upload("other", self.certPEM, self.keyPEM))
	f.must(t, 404, "PUT", "/api/v1/certificates/none", upload("", self.certPEM, self.keyPEM))
	w = f.must(t, 200, "PUT", "/api/v1/certificates/site", upload("", self.certPEM, self.keyPEM), hdr{"If-Match": one.Header().Get("ETag")})
	if r := decodeJSON[struct{ Result CertificateInfo }](t, w).Result; r.Subject != "CN=self.test" || r.ChainLength != 1 {
		t.Fatalf("after PUT: %+v", r)
	}
	gen2 := f.store.Current().Generation

	// Restoring the first revision brings the first chain back; its file
	// was kept.
	f.must(t, 200, "POST", "/api/v1/config/revisions/"+itoa(gen1)+"/restore", "")
	back := decodeJSON[CertificateInfo](t, f.must(t, 200, "GET", "/api/v1/certificates/site", ""))
	if back.ChainSHA256 != got.ChainSHA256 || back.Subject != "CN=www.test" {
		t.Fatalf("restored: %+v", back)
	}
	b, err := f.store.CertificateBundle(back.Certificate)
	if err != nil || !strings.Contains(string(b), leaf.keyPEM) {
		t.Fatalf("restored bundle: %v", err)
	}

	// Nothing a client or an operator reads holds a key.
	bodies := map[string]string{}
	for _, p := range []string{"/api/v1/certificates", "/api/v1/certificates/site", "/api/v1/config",
		"/api/v1/config/revisions", "/api/v1/config/revisions/" + itoa(gen1), "/api/v1/config/revisions/" + itoa(gen2),
		"/api/v1/config/revisions/" + itoa(gen2+1), "/api/v1/audit", "/metrics"} {
		bodies[p] = f.must(t, 200, "GET", p, "").Body.String()
	}
	if !strings.Contains(bodies["/api/v1/audit"], got.FingerprintSHA256) {
		t.Fatal("the audit diff does not show the fingerprint")
	}
	if !strings.Contains(bodies["/metrics"], `spliced_certificate_not_after_seconds{name="site"} `+strconv.FormatFloat(float64(leaf.cert.NotAfter.Unix()), 'g', -1, 64)) {
		t.Fatalf("no expiry metric:\n%s", bodies["/metrics"])
	}
	_ = filepath.WalkDir(f.store.Dir(), func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || filepath.Dir(path) == dir {
			return err
		}
		data, _ := os.ReadFile(path)
		bodies[path] = string(data)
		return nil
	})
	for where, body := range bodies {
		assertNoKey(t, where, body, leaf, self, root)
	}

	// Delete: 204, then gone; the files stay for the revisions.
	f.must(t, 204, "DELETE", "/api/v1/certificates/site", "")
	f.must(t, 404, "GET", "/api/v1/certificates/site", "")
	if ents, _ := os.ReadDir(dir); len(ents) != 2 {
		t.Fatalf("certs/ holds %d files, want 2", len(ents))
	}
}

func itoa(n int64) string { b, _ := json.Marshal(n); return string(b) }

// TestCertificateDocumentCannotForge: a PUT of the whole document may keep
// or restore certificates, but not name a chain that is not stored nor
// change metadata, which is derived from the file.
func TestCertificateDocumentCannotForge(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	c := makeCert(t, "www.test", now.Add(-time.Hour), now.Add(48*time.Hour), nil, false)
	f.must(t, 201, "POST", "/api/v1/certificates", upload("site", c.certPEM, c.keyPEM))
	doc := f.must(t, 200, "GET", "/api/v1/config", "").Body.String()
	f.must(t, 200, "PUT", "/api/v1/config", doc) // unchanged: accepted

	forged := strings.Replace(doc, `"CN=www.test"`, `"CN=bank.test"`, 1)
	p := problemOf(t, f.must(t, 422, "PUT", "/api/v1/config", forged))
	if p.Errors[0].Field != "/certificates/0" {
		t.Fatalf("forged metadata: %+v", p.Errors)
	}
	var cfg config.Config
	if err := json.Unmarshal([]byte(doc), &cfg); err != nil {
		t.Fatal(err)
	}
	cfg.Certificates[0].ChainSHA256 = strings.Repeat("0", 64)
	missing, _ := json.Marshal(cfg)
	p = problemOf(t, f.must(t, 422, "PUT", "/api/v1/config", string(missing)))
	if p.Errors[0].Field != "/certificates/0/chain_sha256" || p.Errors[0].Code != config.CodeUnknownReference {
		t.Fatalf("missing file: %+v", p.Errors)
	}
}

// TestCertificateExpiryWarning: /readyz stays ready and warns about a
// certificate that expires within 14 days.
func TestCertificateExpiryWarning(t *testing.T) {
	f := newFixture(t)
	now := time.Now()
	c := makeCert(t, "soon.test", now.Add(-time.Hour), now.Add(10*24*time.Hour), nil, false)
	far := makeCert(t, "far.test", now.Add(-time.Hour), now.Add(60*24*time.Hour), nil, false)
	f.must(t, 201, "POST", "/api/v1/certificates", upload("far", far.certPEM, far.keyPEM))
	if h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", "")); len(h.Warnings) != 0 {
		t.Fatalf("warnings for a certificate valid 60 days: %v", h.Warnings)
	}
	f.must(t, 201, "POST", "/api/v1/certificates", upload("soon", c.certPEM, c.keyPEM))
	h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", ""))
	if h.Status != "ready" || len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], `certificate "soon" expires`) {
		t.Fatalf("readyz: %+v", h)
	}
}

// TestCertificateRolesAndLogs: only an admin uploads; a viewer reads the
// metadata; the server log of accepted and refused uploads holds no key.
func TestCertificateRolesAndLogs(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	now := time.Now()
	c := makeCert(t, "www.test", now.Add(-time.Hour), now.Add(48*time.Hour), nil, false)
	other := makeCert(t, "other.test", now.Add(-time.Hour), now.Add(48*time.Hour), nil, false)
	body := upload("site", c.certPEM, c.keyPEM)
	for _, r := range []tokens.Role{tokens.Viewer, tokens.Operator} {
		if w := f.do(req{method: "POST", path: "/api/v1/certificates", body: body, token: f.secrets[r]}); w.Code != 403 {
			t.Fatalf("%s POST: %d", r, w.Code)
		}
	}
	if w := f.do(req{method: "POST", path: "/api/v1/certificates", body: upload("site", c.certPEM, other.keyPEM), token: f.secrets[tokens.Admin]}); w.Code != 422 {
		t.Fatalf("admin POST of a mismatched key: %d", w.Code)
	}
	if w := f.do(req{method: "POST", path: "/api/v1/certificates", body: body, token: f.secrets[tokens.Admin]}); w.Code != 201 {
		t.Fatalf("admin POST: %d %s", w.Code, w.Body.String())
	}
	w := f.do(req{method: "GET", path: "/api/v1/certificates/site", token: f.secrets[tokens.Viewer]})
	if w.Code != 200 || !strings.Contains(w.Body.String(), `"subject":"CN=www.test"`) {
		t.Fatalf("viewer GET: %d %s", w.Code, w.Body.String())
	}
	if w := f.do(req{method: "DELETE", path: "/api/v1/certificates/site", token: f.secrets[tokens.Operator]}); w.Code != 403 {
		t.Fatalf("operator DELETE: %d", w.Code)
	}
	if !strings.Contains(f.logs.String(), "config updated") {
		t.Fatalf("the log shows no write:\n%s", f.logs.String())
	}
	assertNoKey(t, "the server log", f.logs.String(), c, other)
}

// TestCertificateInUse: a bind's tls.certificates shows in used_by, and a
// certificate in use cannot be deleted (409 naming the bind) until the bind
// lets it go.
func TestCertificateInUse(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	now := time.Now()
	c := makeCert(t, "www.test", now.Add(-time.Hour), now.Add(24*time.Hour), nil, false)
	f.must(t, 201, "POST", "/api/v1/certificates", upload("site", c.certPEM, c.keyPEM))
	f.must(t, 201, "POST", "/api/v1/certificates", upload("spare", c.certPEM, c.keyPEM))

	// A bind naming a certificate that does not exist is refused.
	p := problemOf(t, f.must(t, 422, "POST", "/api/v1/frontends/public/binds",
		`{"name":"tls","address":"127.0.0.1","port":8443,"tls":{"certificates":["site","nope"]}}`))
	if len(p.Errors) != 1 || p.Errors[0].Field != "/tls/certificates/1" || p.Errors[0].Code != config.CodeUnknownReference {
		t.Fatalf("unknown certificate: %+v", p.Errors)
	}
	f.must(t, 201, "POST", "/api/v1/frontends/public/binds", `{"name":"tls","address":"127.0.0.1","port":8443,"tls":{"certificates":["site"]}}`)

	info := decodeJSON[CertificateInfo](t, f.must(t, 200, "GET", "/api/v1/certificates/site", ""))
	if len(info.UsedBy) != 1 || info.UsedBy[0] != "frontend/public/bind/tls" {
		t.Fatalf("used_by: %v", info.UsedBy)
	}
	list := decodeJSON[[]CertificateInfo](t, f.must(t, 200, "GET", "/api/v1/certificates", ""))
	if len(list) != 2 || len(list[0].UsedBy) != 1 || list[1].UsedBy == nil || len(list[1].UsedBy) != 0 {
		t.Fatalf("list used_by: %+v", list)
	}

	p = problemOf(t, f.must(t, 409, "DELETE", "/api/v1/certificates/site", ""))
	if !strings.Contains(p.Detail, "frontend/public/bind/tls") || len(p.Errors) != 1 ||
		p.Errors[0].Field != "/frontends/0/binds/1/tls/certificates/0" {
		t.Fatalf("409: %+v", p)
	}
	f.must(t, 200, "GET", "/api/v1/certificates/site", "")
	f.must(t, 204, "DELETE", "/api/v1/certificates/spare", "")

	// Once the bind lets it go, it can be deleted.
	f.must(t, 204, "DELETE", "/api/v1/frontends/public/binds/tls", "")
	f.must(t, 204, "DELETE", "/api/v1/certificates/site", "")
}

// TestBindTLSRefusedUntilWired: in this build, where the data plane does
// not terminate TLS yet, a bind with tls is refused (never accepted and
// served in plaintext).
func TestBindTLSRefusedUntilWired(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	now := time.Now()
	c := makeCert(t, "www.test", now.Add(-time.Hour), now.Add(24*time.Hour), nil, false)
	f.must(t, 201, "POST", "/api/v1/certificates", upload("site", c.certPEM, c.keyPEM))
	w := f.do("POST", "/api/v1/frontends/public/binds", `{"name":"tls","address":"127.0.0.1","port":8443,"tls":{"certificates":["site"]}}`)
	if w.Code == 201 {
		t.Skip("the data plane terminates TLS: the guard is gone")
	}
	p := problemOf(t, w)
	if w.Code != 422 || len(p.Errors) != 1 || p.Errors[0].Field != "/tls" || !strings.Contains(p.Errors[0].Message, "not wired") {
		t.Fatalf("%d %+v", w.Code, p)
	}
}
