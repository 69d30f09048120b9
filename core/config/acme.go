package config

import (
	"crypto/x509"
	"encoding/pem"
	"net/url"
	"strconv"
	"strings"
)

// CertificateACME makes a certificate managed: spliced obtains and renews
// it from an ACME server (RFC 8555) through core/acme, instead of taking
// it uploaded. It is the desired state only: what the issuer did last
// (status, error, next renewal) is run-time state kept by core/acme, not
// in the document, so a retry or a state change makes no generation,
// revision or audit entry. Each certificate the issuer obtains is
// committed like an upload: its metadata (subject, SANs, not_after, the
// chain_sha256 of the file holding chain and key) fills the Certificate,
// and the binds naming it hot-swap it. Before the first issuance the
// metadata is empty and chain_sha256 is "".
type CertificateACME struct {
	// Domains are the DNS names the certificate is for (the first is its
	// subject); no wildcard (dns-01 is not supported), no IP address.
	Domains []string `json:"domains" example:"example.com,www.example.com"`
	// Directory is the ACME server's directory URL (https).
	Directory string `json:"directory" example:"https://acme-v02.api.letsencrypt.org/directory"`
	// Email is the account's contact (optional).
	Email string `json:"email,omitempty" example:"ops@example.com"`
	// Challenge is how the domains are proven: "http-01" (spliced answers
	// /.well-known/acme-challenge/ on the clear binds of every http
	// frontend; default) or "tls-alpn-01" (spliced answers the acme-tls/1
	// protocol on its TLS binds).
	Challenge string `json:"challenge" example:"http-01" enums:"http-01,tls-alpn-01"`
	// DirectoryCAPEM are the certificates trusted for the directory's
	// HTTPS (a private ACME server's, as pebble's); empty: the system's.
	DirectoryCAPEM string `json:"directory_ca_pem,omitempty"`
	// KeyType is the certificate key: "ecdsa-p256" (default) or "rsa-2048".
	KeyType string `json:"key_type" example:"ecdsa-p256" enums:"ecdsa-p256,rsa-2048"`
	// EAB is the external account binding some CAs require; its HMAC key
	// is write-only: kept in the account's file, never in the document.
	EAB *ACMEEAB `json:"eab,omitempty"`
	// AccountSHA256 names the file (as chain_sha256 names a chain's) that
	// holds the ACME account's private key and the EAB HMAC key: created
	// by the API, never set by a client.
	AccountSHA256 string `json:"account_sha256"`
}

// ACMEEAB is the external account binding's key id.
type ACMEEAB struct {
	KID string `json:"kid" example:"kid-1"`
}

// Challenge types and key types of a managed certificate.
const (
	ChallengeHTTP01    = "http-01"
	ChallengeTLSALPN01 = "tls-alpn-01"
	ACMEKeyECDSAP256   = "ecdsa-p256"
	ACMEKeyRSA2048     = "rsa-2048"
)

// maxACMEDomains bounds a managed certificate's names (Let's Encrypt
// takes 100 per order).
const maxACMEDomains = 100

// ACMEAccountPEMType is the PEM block type of the EAB HMAC key in an
// account file (beside the account's PRIVATE KEY block).
const ACMEAccountPEMType = "ACME EAB HMAC KEY"

// Managed reports whether the certificate is obtained through ACME.
func (c *Certificate) Managed() bool { return c.ACME != nil }

// Issued reports whether the certificate has a chain to serve (a managed
// certificate has none until its first issuance).
func (c *Certificate) Issued() bool { return c.ChainSHA256 != "" }

// Files names the stored files (by SHA-256) c refers to: its chain and
// key, and a managed certificate's account file. What commits, caches,
// reseeds and prunes keep.
func (c *Certificate) Files() []string {
	out := make([]string, 0, 2)
	if c.ChainSHA256 != "" {
		out = append(out, c.ChainSHA256)
	}
	if c.ACME != nil && c.ACME.AccountSHA256 != "" {
		out = append(out, c.ACME.AccountSHA256)
	}
	return out
}

// SplitACMEAccount reads an account file: the account's private key (PKCS
// #8 DER) and the EAB HMAC key (empty without EAB).
func SplitACMEAccount(b []byte) (keyDER []byte, hmacKey string) {
	for {
		var blk *pem.Block
		blk, b = pem.Decode(b)
		if blk == nil {
			return keyDER, hmacKey
		}
		switch blk.Type {
		case "PRIVATE KEY":
			keyDER = blk.Bytes
		case ACMEAccountPEMType:
			hmacKey = string(blk.Bytes)
		}
	}
}

// acme checks a managed certificate's member (pointer cp + "/acme").
func (v *validation) acme(cp string, c *Certificate) {
	a := c.ACME
	ap := cp + "/acme"
	if len(a.Domains) == 0 {
		v.p.add(ap+"/domains", CodeRequired, "a managed certificate needs at least one domain")
	}
	if len(a.Domains) > maxACMEDomains {
		v.p.addf(ap+"/domains", CodeOutOfRange, "at most %d domains", maxACMEDomains)
	}
	seen := map[string]bool{}
	for i, d := range a.Domains {
		dp := ap + "/domains/" + strconv.Itoa(i)
		switch {
		case strings.Contains(d, "*"):
			v.p.add(dp, CodeFormat, "wildcard names need dns-01, which spliced does not answer")
		case !validDNSName(d):
			v.p.addf(dp, CodeFormat, "%q is not a DNS name (letters, digits, '-' and dots; no IP address, no trailing dot)", truncateString(d, 80))
		case seen[strings.ToLower(d)]:
			v.p.addf(dp, CodeDuplicate, "%q is listed twice", truncateString(d, 80))
		}
		seen[strings.ToLower(d)] = true
	}
	if u, err := url.Parse(a.Directory); a.Directory == "" {
		v.p.add(ap+"/directory", CodeRequired, "the ACME server's directory URL")
	} else if err != nil || u.Scheme != "https" || u.Host == "" {
		v.p.add(ap+"/directory", CodeFormat, "the directory must be an https URL")
	}
	if a.Email != "" && (!strings.Contains(a.Email, "@") || strings.ContainsAny(a.Email, " \t\r\n<>")) {
		v.p.add(ap+"/email", CodeFormat, "not an e-mail address")
	}
	switch a.Challenge {
	case ChallengeHTTP01, ChallengeTLSALPN01:
	default:
		v.p.addf(ap+"/challenge", CodeOneOf, `%q: challenge is "http-01" or "tls-alpn-01"`, truncateString(a.Challenge, 40))
	}
	switch a.KeyType {
	case ACMEKeyECDSAP256, ACMEKeyRSA2048:
	default:
		v.p.addf(ap+"/key_type", CodeOneOf, `%q: key_type is "ecdsa-p256" or "rsa-2048"`, truncateString(a.KeyType, 40))
	}
	if a.DirectoryCAPEM != "" {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM([]byte(a.DirectoryCAPEM)) {
			v.p.add(ap+"/directory_ca_pem", CodeFormat, "directory_ca_pem holds no PEM certificate")
		}
	}
	if a.EAB != nil && a.EAB.KID == "" {
		v.p.add(ap+"/eab/kid", CodeRequired, "the external account binding's key id")
	}
	if !isHexSHA256(a.AccountSHA256) {
		v.p.add(ap+"/account_sha256", CodeFormat, "account_sha256 must be 64 lower-case hex digits")
	}
}

// validDNSName: labels of letters, digits and '-', 1 to 63 bytes, not
// starting or ending with '-', 253 bytes at most, not an IP address.
func validDNSName(d string) bool {
	if d == "" || len(d) > 253 || strings.HasSuffix(d, ".") {
		return false
	}
	allDigits := true
	for _, l := range strings.Split(d, ".") {
		if l == "" || len(l) > 63 || l[0] == '-' || l[len(l)-1] == '-' {
			return false
		}
		for i := 0; i < len(l); i++ {
			ch := l[i]
			switch {
			case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', ch == '-':
				allDigits = false
			case '0' <= ch && ch <= '9':
			default:
				return false
			}
		}
	}
	return !allDigits
}

func (a *CertificateACME) clone() *CertificateACME {
	if a == nil {
		return nil
	}
	out := *a
	out.Domains = append([]string(nil), a.Domains...)
	if a.EAB != nil {
		e := *a.EAB
		out.EAB = &e
	}
	return &out
}
