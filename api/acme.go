package api

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spliced-proxy/spliced/core/acme"
	"github.com/spliced-proxy/spliced/core/config"
)

// Managed certificates (issue 29): POST or PUT /api/v1/certificates with
// an "acme" member instead of cert_pem and key_pem. The API checks the
// settings, creates the ACME account's key (or reuses the one of a
// managed certificate with the same directory and e-mail, without EAB)
// and stores it, with the EAB HMAC key, in an account file written like a
// certificate's (0600, content-addressed, committed with the revision
// that refers to it: acme.account_sha256). The HMAC key is write-only:
// the document, its revisions, the audit trail and every answer see only
// the account file's hash. core/acme orders the certificate and stores it
// through commitIssued, the same write as an upload (actor "acme").

// ACMERequest is the acme member of a certificate write.
type ACMERequest struct {
	// Domains are the DNS names of the certificate (no wildcard).
	Domains []string `json:"domains" example:"example.com,www.example.com"`
	// Directory is the ACME server's directory URL (https).
	Directory string `json:"directory" example:"https://acme-v02.api.letsencrypt.org/directory"`
	// Email is the account's contact (optional).
	Email string `json:"email,omitempty" example:"ops@example.com"`
	// Challenge: "http-01" (default) or "tls-alpn-01".
	Challenge string `json:"challenge,omitempty" example:"http-01" enums:"http-01,tls-alpn-01"`
	// DirectoryCAPEM trusts a private ACME server's HTTPS (pebble's).
	DirectoryCAPEM string `json:"directory_ca_pem,omitempty"`
	// KeyType: "ecdsa-p256" (default) or "rsa-2048".
	KeyType string `json:"key_type,omitempty" example:"ecdsa-p256" enums:"ecdsa-p256,rsa-2048"`
	// EAB is the external account binding (optional).
	EAB *EABRequest `json:"eab,omitempty"`
}

// EABRequest is an external account binding; hmac_key is write-only.
type EABRequest struct {
	KID string `json:"kid" example:"kid-1"`
	// HMACKey is the CA's MAC key, base64url: stored in the account file,
	// never answered, logged, revisioned or audited.
	HMACKey string `json:"hmac_key" example:"c2VjcmV0"`
}

// ManagedInfo is a managed certificate's settings and its run-time state
// on this node (core/acme; not part of the configuration: a state change
// makes no generation, revision or audit entry).
type ManagedInfo struct {
	config.CertificateACME
	acme.State
}

// parseCertificate checks an upload, or a managed certificate's settings.
func (s *server) parseCertificate(up *CertificateUpload, name string) (config.Certificate, map[string][]byte, error) {
	if up.ACME == nil {
		return parseUpload(up, name)
	}
	if err := checkName(name); err != nil {
		return config.Certificate{}, nil, err
	}
	var fe []config.FieldError
	if up.CertPEM != "" {
		fe = append(fe, config.FieldError{Field: "/cert_pem", Code: config.CodeInvalid, Message: "a managed certificate (acme) is obtained, not uploaded: leave cert_pem out"})
	}
	if up.KeyPEM != "" {
		fe = append(fe, config.FieldError{Field: "/key_pem", Code: config.CodeInvalid, Message: "a managed certificate (acme) is obtained, not uploaded: leave key_pem out"})
	}
	a := up.ACME
	spec := &config.CertificateACME{Domains: a.Domains, Directory: a.Directory, Email: a.Email,
		Challenge: a.Challenge, DirectoryCAPEM: a.DirectoryCAPEM, KeyType: a.KeyType}
	if spec.Challenge == "" {
		spec.Challenge = config.ChallengeHTTP01
	}
	if spec.KeyType == "" {
		spec.KeyType = config.ACMEKeyECDSAP256
	}
	var hmacKey string
	if a.EAB != nil {
		spec.EAB = &config.ACMEEAB{KID: a.EAB.KID}
		hmacKey = a.EAB.HMACKey
		if hmacKey == "" {
			fe = append(fe, config.FieldError{Field: "/acme/eab/hmac_key", Code: config.CodeRequired, Message: "the external account binding's HMAC key (base64url)"})
		} else if _, err := base64.RawURLEncoding.DecodeString(hmacKey); err != nil {
			fe = append(fe, config.FieldError{Field: "/acme/eab/hmac_key", Code: config.CodeFormat, Message: "the HMAC key must be base64url without padding"})
		}
	}
	if len(fe) > 0 {
		return config.Certificate{}, nil, &config.ValidationError{Errors: fe}
	}
	meta := config.Certificate{Name: name, SANs: []string{}, ACME: spec}
	// The account of a managed certificate with the same directory and
	// e-mail, without EAB, is reused: one account per CA and contact.
	if spec.EAB == nil {
		if c := s.store.Current(); c != nil {
			for i := range c.Certificates {
				o := c.Certificates[i].ACME
				if o != nil && o.EAB == nil && o.Directory == spec.Directory && o.Email == spec.Email {
					spec.AccountSHA256 = o.AccountSHA256
					return meta, nil, nil
				}
			}
		}
	}
	file, err := newAccountFile(hmacKey)
	if err != nil {
		return config.Certificate{}, nil, err
	}
	sum := sha256.Sum256(file)
	spec.AccountSHA256 = hex.EncodeToString(sum[:])
	return meta, map[string][]byte{spec.AccountSHA256: file}, nil
}

// newAccountFile makes an ACME account key (ECDSA P-256, what Let's
// Encrypt's clients use) and the file that holds it, with the EAB HMAC
// key when there is one.
func newAccountFile(hmacKey string) ([]byte, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	der, err := x509.MarshalPKCS8PrivateKey(k)
	if err != nil {
		return nil, err
	}
	var b bytes.Buffer
	_ = pem.Encode(&b, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	if hmacKey != "" {
		_ = pem.Encode(&b, &pem.Block{Type: config.ACMEAccountPEMType, Bytes: []byte(hmacKey)})
	}
	return b.Bytes(), nil
}

// checkName is the name rule of every certificate write.
func checkName(name string) error {
	switch {
	case name == "":
		return &config.ValidationError{Errors: []config.FieldError{{Field: "/name", Code: config.CodeRequired, Message: "a certificate needs a name"}}}
	case !config.ValidName(name):
		return &config.ValidationError{Errors: []config.FieldError{{Field: "/name", Code: config.CodeFormat,
			Message: fmt.Sprintf("certificate name %q must be 1-%d characters of a-z, 0-9, '-' and '_', starting and ending with a letter or digit", truncate(name, 64), config.MaxNameLen)}}}
	}
	return nil
}

// getCertificates answers view with each managed certificate's run-time
// state added; the ETag is the configuration's view's (what If-Match
// compares on writes), so a state change does not fail a conditional
// write.
func (s *server) getCertificates(w http.ResponseWriter, r *http.Request, view func(c *config.Config) (any, error)) error {
	c := s.store.Current()
	v, err := view(c)
	if err != nil {
		return err
	}
	tag, err := etagOf(v)
	if err != nil {
		return err
	}
	switch x := v.(type) {
	case CertificateInfo:
		s.addState(&x)
		v = x
	case []CertificateInfo:
		for i := range x {
			s.addState(&x[i])
		}
	}
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("X-Spliced-Generation", strconv.FormatInt(c.Generation, 10))
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	return writeValue(w, http.StatusOK, v)
}

func (s *server) addState(info *CertificateInfo) {
	if info.ACME == nil {
		return
	}
	info.ACME.State = acme.State{Status: acme.StatusPending}
	if s.acme != nil {
		if st, ok := s.acme.State(info.Name); ok {
			info.ACME.State = st
		}
	}
}

// commitIssued stores a certificate core/acme obtained for the managed
// certificate name: the write of a PUT with cert_pem and key_pem (checked,
// persisted, audited with actor "acme", applied; in a cluster, committed
// for every node), keeping the acme member.
func (s *server) commitIssued(ctx context.Context, name, certPEM, keyPEM string) error {
	meta, bundles, err := parseUpload(&CertificateUpload{CertPEM: certPEM, KeyPEM: keyPEM}, name)
	if err != nil {
		return fmt.Errorf("the certificate obtained: %w", err)
	}
	op := replaceOp(s.c.certificates, "", name, func(cur *config.Certificate) (config.Certificate, error) {
		if cur.ACME == nil {
			return config.Certificate{}, fmt.Errorf("certificate %q is no longer managed: %w", name, config.ErrConflict)
		}
		meta.ACME = cur.ACME
		return meta, nil
	})
	op.certificates = bundles
	op.target = certificateView(name)
	op.result = certificateResult(name)
	r, err := http.NewRequestWithContext(ctx, http.MethodPut, base+"/certificates/"+name, nil)
	if err != nil {
		return err
	}
	r.RemoteAddr = "acme"
	h := s.obs.audit.middleware(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		r = withActor(r, "acme")
		if err := s.write(w, r, op); err != nil {
			writeError(w, r, s.log, err)
		}
	}))
	rec := &answerRecorder{header: http.Header{}}
	h.ServeHTTP(rec, r)
	if rec.status >= 300 {
		return fmt.Errorf("storing the certificate: %d %s", rec.status, truncate(rec.body.String(), 512))
	}
	return nil
}

// answerRecorder keeps the answer of an in-process write.
type answerRecorder struct {
	header http.Header
	status int
	body   bytes.Buffer
}

func (a *answerRecorder) Header() http.Header { return a.header }
func (a *answerRecorder) WriteHeader(st int) {
	if a.status == 0 {
		a.status = st
	}
}
func (a *answerRecorder) Write(b []byte) (int, error) {
	if a.status == 0 {
		a.status = http.StatusOK
	}
	return a.body.Write(b)
}

// acmeWarnings: a managed certificate whose orders fail while it expires
// within certExpiryWarning (or was never issued) is a /readyz warning.
func (s *server) acmeWarnings(c *config.Config, now time.Time) []string {
	if s.acme == nil || c == nil {
		return nil
	}
	var out []string
	for i := range c.Certificates {
		ct := &c.Certificates[i]
		if ct.ACME == nil {
			continue
		}
		st, ok := s.acme.State(ct.Name)
		if !ok || st.Status != acme.StatusFailed {
			continue
		}
		na, err := time.Parse(time.RFC3339, ct.NotAfter)
		if ct.Issued() && err == nil && na.Sub(now) > certExpiryWarning {
			continue
		}
		detail := ""
		if st.Error != nil {
			detail = ": " + truncate(st.Error.Detail, 200)
		}
		out = append(out, fmt.Sprintf("managed certificate %q: its ACME orders fail (next try at %s)%s", ct.Name, st.RetryAt, detail))
	}
	return out
}

// acmeCollector exports spliced_certificate_acme_renewals_total{result}.
type acmeCollector struct {
	m    *acme.Manager
	desc *prometheus.Desc
}

func newACMECollector(m *acme.Manager) *acmeCollector {
	return &acmeCollector{m: m, desc: prometheus.NewDesc("spliced_certificate_acme_renewals_total",
		"ACME orders of managed certificates that ended, by result (success, failure).", []string{"result"}, nil)}
}

func (ac *acmeCollector) Describe(ch chan<- *prometheus.Desc) { ch <- ac.desc }

func (ac *acmeCollector) Collect(ch chan<- prometheus.Metric) {
	var ok, fail uint64
	if ac.m != nil {
		ok, fail = ac.m.Renewals()
	}
	ch <- prometheus.MustNewConstMetric(ac.desc, prometheus.CounterValue, float64(ok), "success")
	ch <- prometheus.MustNewConstMetric(ac.desc, prometheus.CounterValue, float64(fail), "failure")
}
