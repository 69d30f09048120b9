package api

import (
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spliced-proxy/spliced/core/acme"
	"github.com/spliced-proxy/spliced/core/config"
)

// Certificates: the API takes a chain and its key, checks them
// (config.ParseCertificate), has the store write them in the state
// directory (UpdateOptions.Certificates, before the revision that refers
// to them)
// and keeps only their metadata in the config document. No answer, log
// line, audit entry, revision or diff ever holds a key: they all see the
// document, and the document has none.

// CertificateUpload is the body of POST /api/v1/certificates and PUT
// /api/v1/certificates/{name}.
type CertificateUpload struct {
	// Name is the certificate's name (same rules as other object names);
	// on PUT it may be empty or must equal the name in the path.
	Name string `json:"name" example:"site"`
	// CertPEM is the chain: the leaf first, then each certificate that
	// signed the previous one (PEM CERTIFICATE blocks).
	CertPEM string `json:"cert_pem" example:"-----BEGIN CERTIFICATE-----\n..."`
	// KeyPEM is the leaf's private key: PKCS #8, PKCS #1 (RSA) or SEC 1
	// (EC), unencrypted. It is stored 0600 and never answered.
	KeyPEM string `json:"key_pem" example:"-----BEGIN PRIVATE KEY-----\n..."`
	// ACME makes the certificate managed instead (acme.go): spliced
	// obtains and renews it; cert_pem and key_pem are then left out.
	ACME *ACMERequest `json:"acme,omitempty"`
}

// CertificateInfo is a certificate as GET answers it: its metadata and the
// objects that use it.
type CertificateInfo struct {
	config.Certificate
	// ACME is a managed certificate's settings and, in GET answers, its
	// run-time state on this node (acme.go).
	ACME *ManagedInfo `json:"acme,omitempty"`
	// UsedBy names the binds that serve this certificate
	// ("frontend/public/bind/b1"), from their tls.certificates.
	UsedBy []string `json:"used_by"`
}

func certificateInfo(c *config.Config, i int) CertificateInfo {
	info := CertificateInfo{Certificate: c.Certificates[i], UsedBy: []string{}}
	if a := c.Certificates[i].ACME; a != nil {
		// Its run-time state is added by GET (getCertificates); "pending"
		// in write answers and ETags, so that the state never moves one.
		info.ACME = &ManagedInfo{CertificateACME: *a, State: acme.State{Status: acme.StatusPending}}
	}
	for _, u := range config.CertificateUsers(c, c.Certificates[i].Name) {
		info.UsedBy = append(info.UsedBy, u.Object)
	}
	return info
}

func certificateList(c *config.Config) (any, error) {
	out := make([]CertificateInfo, 0, len(c.Certificates))
	for i := range c.Certificates {
		out = append(out, certificateInfo(c, i))
	}
	return out, nil
}

func certificateView(name string) func(c *config.Config) (any, error) {
	return func(c *config.Config) (any, error) {
		i := c.FindCertificate(name)
		if i < 0 {
			return nil, fmt.Errorf("certificate %q: %w", name, config.ErrNotFound)
		}
		return certificateInfo(c, i), nil
	}
}

func certificateResult(name string) func(c *config.Config) any {
	view := certificateView(name)
	return func(c *config.Config) any {
		v, err := view(c)
		if err != nil {
			return nil
		}
		return v
	}
}

// certificateInUse refuses to delete a certificate something refers to.
func certificateInUse(c *config.Config, name string) error {
	users := config.CertificateUsers(c, name)
	if len(users) == 0 {
		return nil
	}
	refs := make([]config.FieldError, 0, len(users))
	for _, u := range users {
		refs = append(refs, config.FieldError{Field: u.Field, Code: "in_use", Message: u.Object + " uses it"})
	}
	return &apiError{Status: http.StatusConflict, Code: "in-use", Err: config.ErrInUse, Errors: refs,
		Detail: fmt.Sprintf("certificate %q is still used: %s", name, refs[0].Message)}
}

// parseUpload checks an upload named name; the bundle it returns goes to
// the store with the write (writeOp.certificates), which stores it before
// the revision that refers to it.
func parseUpload(up *CertificateUpload, name string) (config.Certificate, map[string][]byte, error) {
	switch {
	case name == "":
		return config.Certificate{}, nil, &config.ValidationError{Errors: []config.FieldError{{Field: "/name", Code: config.CodeRequired, Message: "a certificate needs a name"}}}
	case !config.ValidName(name):
		return config.Certificate{}, nil, &config.ValidationError{Errors: []config.FieldError{{Field: "/name", Code: config.CodeFormat,
			Message: fmt.Sprintf("certificate name %q must be 1-%d characters of a-z, 0-9, '-' and '_', starting and ending with a letter or digit", truncate(name, 64), config.MaxNameLen)}}}
	}
	meta, bundle, err := config.ParseCertificate(name, up.CertPEM, up.KeyPEM, time.Now())
	if err != nil {
		return meta, nil, err
	}
	return meta, map[string][]byte{meta.ChainSHA256: bundle}, nil
}

// listCertificates godoc
//
//	@Summary		List certificates
//	@Description	Metadata only (subject, SANs, issuer, validity, fingerprints, key type, chain length, used_by); never a key.
//	@Tags			certificates
//	@Produce		json
//	@Success		200	{array}		CertificateInfo
//	@Header			200	{string}	ETag					"strong ETag of the list"
//	@Header			200	{integer}	X-Spliced-Generation	"generation read"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/certificates [get]
func (s *server) listCertificates(w http.ResponseWriter, r *http.Request) error {
	return s.getCertificates(w, r, certificateList)
}

// createCertificate godoc
//
//	@Summary		Upload a certificate, or create a managed one
//	@Description	With "acme" instead of cert_pem and key_pem: a managed certificate, obtained and renewed by spliced from the ACME server (http-01 answered on the clear binds of http frontends, or tls-alpn-01 on TLS binds); its settings are checked (422 with pointers under /acme), an account key is made (or the one of a managed certificate with the same directory and e-mail reused) and stored 0600 with eab.hmac_key, which is never answered; the certificate is then ordered in the background (GET shows acme.status, acme.error, acme.next_renewal_at). Otherwise: takes a chain (leaf first, each certificate signed by the next; a self-signed leaf alone is complete; no system root is consulted) and the leaf's private key. Refused with 422 and a pointer (/name, /cert_pem, /key_pem) for bad PEM, no certificate, a key that is not the leaf's, a certificate expired or not yet valid, a chain that does not link, an unsupported key (RSA below 2048 bits, other curves than P-256/P-384, encrypted keys). The chain and key are stored 0600 in the state directory; the config document, revisions, diffs and audit trail hold only the metadata. If-Match is compared with the ETag of the certificate list.
//	@Tags			certificates
//	@Accept			json
//	@Produce		json
//	@Param			certificate	body		CertificateUpload	true	"name, chain and key"
//	@Param			dry_run		query		bool				false	"check, return the plan and change nothing (nothing is stored)"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string				false	"ETag the certificate list must still have"
//	@Success		201			{object}	WriteResult{result=CertificateInfo}
//	@Success		200			{object}	WriteResult{result=CertificateInfo}	"dry run"
//	@Header			201			{string}	Location				"URL of the new certificate"
//	@Header			201			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem	"malformed body"
//	@Failure		409			{object}	Problem	"name taken"
//	@Failure		412			{object}	Problem	"If-Match does not match"
//	@Failure		413			{object}	Problem	"body over 1 MiB"
//	@Failure		415			{object}	Problem	"Content-Type is not application/json"
//	@Failure		422			{object}	Problem	"bad name, bad PEM, key mismatch, expired, not yet valid, broken chain, unsupported key"
//	@Failure		503			{object}	Problem	"the process is stopping, or the state directory refused the write: nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/certificates [post]
func (s *server) createCertificate(w http.ResponseWriter, r *http.Request) error {
	var up CertificateUpload
	if err := decodeBody(r, &up); err != nil {
		return err
	}
	meta, bundles, err := s.parseCertificate(&up, up.Name)
	if err != nil {
		return err
	}
	op := s.c.certificates.createOp("", meta)
	op.certificates = bundles
	op.target = certificateList
	op.result = certificateResult(meta.Name)
	return s.write(w, r, op)
}

// getCertificate godoc
//
//	@Summary		Get a certificate's metadata
//	@Description	A managed certificate's acme member adds its run-time state on this node: status (pending, valid, renewing, failed), error (the CA's problem document), renewed_at, next_renewal_at, retry_at; it is not part of the configuration (the ETag ignores it).
//	@Tags		certificates
//	@Produce	json
//	@Param		name	path		string	true	"certificate name"
//	@Success	200		{object}	CertificateInfo
//	@Header		200		{string}	ETag	"strong ETag of the certificate"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/certificates/{name} [get]
func (s *server) getCertificate(w http.ResponseWriter, r *http.Request) error {
	return s.getCertificates(w, r, certificateView(param(r, "name")))
}

// putCertificate godoc
//
//	@Summary		Replace a certificate
//	@Description	Same body and checks as POST; the name in the path wins (a different name in the body is 422). The previous chain and key stay in the state directory, so restoring an earlier revision brings them back.
//	@Tags			certificates
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string				true	"certificate name"
//	@Param			certificate	body		CertificateUpload	true	"chain and key"
//	@Param			dry_run		query		bool				false	"check, return the plan and change nothing (nothing is stored)"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string				false	"ETag the certificate must still have"
//	@Success		200			{object}	WriteResult{result=CertificateInfo}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, or the state directory refused the write: nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/certificates/{name} [put]
func (s *server) putCertificate(w http.ResponseWriter, r *http.Request) error {
	var up CertificateUpload
	if err := decodeBody(r, &up); err != nil {
		return err
	}
	name := param(r, "name")
	if up.Name != "" && up.Name != name {
		return &apiError{Status: http.StatusUnprocessableEntity, Code: "validation",
			Detail: fmt.Sprintf("the body names certificate %q but the path names %q; renaming is not supported", truncate(up.Name, 64), name),
			Errors: []config.FieldError{{Field: "/name", Code: "name_mismatch", Message: "must be empty or equal the name in the path"}}}
	}
	meta, bundles, err := s.parseCertificate(&up, name)
	if err != nil {
		return err
	}
	op := replaceOp(s.c.certificates, "", name, func(cur *config.Certificate) (config.Certificate, error) {
		if meta.ACME != nil && cur.Issued() {
			// New settings for a certificate issued before: it keeps
			// serving until core/acme obtains the next one.
			kept := *cur // cur is in the clone the write changes
			kept.ACME = meta.ACME
			return kept, nil
		}
		return meta, nil
	})
	op.certificates = bundles
	op.target = certificateView(name)
	op.result = certificateResult(name)
	return s.write(w, r, op)
}

// deleteCertificate godoc
//
//	@Summary		Delete a certificate
//	@Description	Refused with 409 while a bind uses it. Its file stays in the state directory for the revisions that refer to it.
//	@Tags			certificates
//	@Param			name		path	string	true	"certificate name"
//	@Param			dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header	string	false	"ETag the certificate must still have"
//	@Success		204
//	@Success		200	{object}	WriteResult	"dry run"
//	@Header			204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure		404	{object}	Problem
//	@Failure		409	{object}	Problem	"still used"
//	@Failure		412	{object}	Problem
//	@Failure		503	{object}	Problem	"the process is stopping, or the state directory refused the write: nothing changed"
//	@Failure		507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/certificates/{name} [delete]
func (s *server) deleteCertificate(w http.ResponseWriter, r *http.Request) error {
	return s.c.certificates.del(s, w, r)
}

// certExpiryWarning: /readyz warns about a certificate that expires within
// this long (Let's Encrypt renews 30 days ahead; 14 days leaves two weeks
// to notice a renewal that failed).
const certExpiryWarning = 14 * 24 * time.Hour

// certificateWarnings lists the certificates of c that expire within
// certExpiryWarning of now (or have expired): warnings, not unreadiness.
func certificateWarnings(c *config.Config, now time.Time) []string {
	var out []string
	for i := range c.Certificates {
		ct := &c.Certificates[i]
		na, err := time.Parse(time.RFC3339, ct.NotAfter)
		if err != nil || na.Sub(now) > certExpiryWarning {
			continue
		}
		if na.Before(now) {
			out = append(out, fmt.Sprintf("certificate %q expired at %s", ct.Name, ct.NotAfter))
		} else {
			out = append(out, fmt.Sprintf("certificate %q expires at %s (in %d hours)", ct.Name, ct.NotAfter, int(na.Sub(now).Hours())))
		}
	}
	return out
}

// certCollector exports spliced_certificate_not_after_seconds{name}: the
// expiry of each certificate of the current config, read at scrape time.
type certCollector struct {
	store *config.Store
	desc  *prometheus.Desc
}

func newCertCollector(store *config.Store) *certCollector {
	return &certCollector{store: store, desc: prometheus.NewDesc("spliced_certificate_not_after_seconds",
		"Expiry (not_after) of the certificate, Unix seconds.", []string{"name"}, nil)}
}

func (cc *certCollector) Describe(ch chan<- *prometheus.Desc) { ch <- cc.desc }

func (cc *certCollector) Collect(ch chan<- prometheus.Metric) {
	if cc.store == nil {
		return
	}
	c := cc.store.Current()
	if c == nil {
		return
	}
	for i := range c.Certificates {
		ct := &c.Certificates[i]
		na, err := time.Parse(time.RFC3339, ct.NotAfter)
		if err != nil {
			continue
		}
		ch <- prometheus.MustNewConstMetric(cc.desc, prometheus.GaugeValue, float64(na.Unix()), ct.Name)
	}
}
