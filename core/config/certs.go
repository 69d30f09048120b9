package config

import (
	"bytes"
	"crypto"
	"crypto/ecdsa"
	"crypto/ed25519"
	"crypto/elliptic"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"fmt"
	"strconv"
	"time"
)

// Certificate is the metadata of a TLS certificate (its chain and private
// key) uploaded through /api/v1/certificates. The config document, its
// revisions, their diffs and the audit trail hold only this metadata; the
// PEM chain and key live in the state directory, in
// certs/<chain_sha256>.pem (mode 0600), content-addressed so that a
// revision always finds the exact chain and key it was accepted with. The
// metadata is derived from that file, never chosen by a client: the store
// refuses a document whose certificate metadata differs from its file.
type Certificate struct {
	Name string `json:"name" validate:"required"`
	// Subject and Issuer are the leaf's distinguished names (RFC 2253).
	Subject string `json:"subject" example:"CN=www.example.com"`
	Issuer  string `json:"issuer" example:"CN=Example CA"`
	// SANs are the leaf's subject alternative names: DNS names, then IP
	// addresses, e-mail addresses and URIs.
	SANs []string `json:"sans" example:"www.example.com,example.com"`
	// NotBefore and NotAfter bound the leaf's validity (RFC 3339, UTC).
	NotBefore string `json:"not_before" example:"2026-01-01T00:00:00Z"`
	NotAfter  string `json:"not_after" example:"2027-01-01T00:00:00Z"`
	// FingerprintSHA256 is the SHA-256 of the leaf's DER, in hex.
	FingerprintSHA256 string `json:"fingerprint_sha256"`
	// ChainSHA256 is the SHA-256 of the DER of every certificate of the
	// chain, concatenated in order: the name of the file holding the chain
	// and the key (two uploads of the same chain have the same key, since
	// the key must match the leaf).
	ChainSHA256 string `json:"chain_sha256"`
	// KeyType is rsa-<bits>, ecdsa-p256, ecdsa-p384 or ed25519.
	KeyType string `json:"key_type" example:"ecdsa-p256"`
	// ChainLength counts the certificates of the chain, leaf included.
	ChainLength int `json:"chain_length" example:"2"`
	// ACME, when set, makes the certificate managed (acme.go): obtained
	// and renewed by spliced; the fields above then describe the last
	// certificate issued (empty before the first).
	ACME *CertificateACME `json:"acme,omitempty"`
}

// Codes of certificate problems (FieldError.Code), besides CodeRequired
// (no certificate, no key) and CodeFormat (a bad name).
const (
	CodeBadPEM         = "bad_pem"         // not PEM, or a block that does not parse
	CodeKeyMismatch    = "key_mismatch"    // the key is not the leaf's
	CodeExpired        = "expired"         // a certificate's not_after is past
	CodeNotYetValid    = "not_yet_valid"   // a certificate's not_before is ahead
	CodeChain          = "chain"           // certificate i is not signed by i+1
	CodeUnsupportedKey = "unsupported_key" // key type or size not accepted
)

// MaxChainLength bounds the certificates of one upload: real chains have
// 2 to 4; more is a mistake (a bundle of roots) or an attack on parsing.
const MaxChainLength = 8

// noValidityCheck as ParseCertificate's now skips the validity dates.
var noValidityCheck = time.Time{}

// minRSABits is the smallest RSA key accepted (NIST SP 800-131A: 2048).
const minRSABits = 2048

// maxRSABits is the largest RSA key accepted, in any certificate of the
// chain as in key_pem (crypto/tls refuses larger server keys by default,
// GODEBUG tlsmaxrsasize): the cost of one RSA operation grows with the
// square of the modulus or worse, and a chain holding a multi-megabit
// modulus (and a signature as long) fits the body limit and would cost a
// minute of CPU to check. Sizes are checked before any signature or key.
const maxRSABits = 8192

// maxKeyDER bounds the DER of key_pem, checked before it is parsed (parsing
// an RSA key validates it, at a cost that grows with its size): a PKCS #8
// RSA key of maxRSABits takes about 4.8 KB.
const maxKeyDER = 16 << 10

// ParseCertificate checks an upload (cert_pem: the leaf first, then each
// certificate that signed the previous one; key_pem: the leaf's private
// key) at time now, and returns its metadata (named name) and the bundle
// to store: the chain and the key (PKCS #8) re-encoded as PEM. Every problem
// found is a FieldError in a *ValidationError pointing at /cert_pem or
// /key_pem. The chain must link (each certificate signed by the next); its
// last certificate need not be a root, and no system root is consulted.
// now == noValidityCheck skips the validity period (a stored file checked
// again).
func ParseCertificate(name, certPEM, keyPEM string, now time.Time) (Certificate, []byte, error) {
	var p problems
	chain := parseChain(&p, []byte(certPEM))
	key := parseKey(&p, []byte(keyPEM))
	if len(p.list) > 0 {
		return Certificate{}, nil, p.err()
	}
	leaf := chain[0]
	if !publicKeyMatches(leaf.PublicKey, key) {
		p.add("/key_pem", CodeKeyMismatch, "the private key does not belong to the first certificate of cert_pem")
	}
	if kt, ok := keyType(leaf.PublicKey); !ok {
		p.add("/cert_pem", CodeUnsupportedKey, "the first certificate's key is "+kt+"; supported: RSA of 2048 to 8192 bits, ECDSA P-256 or P-384, Ed25519")
	}
	for i, c := range chain {
		if now.IsZero() {
			break
		}
		if now.After(c.NotAfter) {
			p.addf("/cert_pem", CodeExpired, "certificate %d (%s) expired at %s", i, c.Subject, c.NotAfter.UTC().Format(time.RFC3339))
		} else if now.Before(c.NotBefore) {
			p.addf("/cert_pem", CodeNotYetValid, "certificate %d (%s) is not valid before %s", i, c.Subject, c.NotBefore.UTC().Format(time.RFC3339))
		}
	}
	for i := 0; i+1 < len(chain); i++ {
		if err := chain[i].CheckSignatureFrom(chain[i+1]); err != nil {
			p.addf("/cert_pem", CodeChain, "certificate %d (%s) is not signed by certificate %d (%s): the chain must list the leaf first, then each issuer: %v",
				i, chain[i].Subject, i+1, chain[i+1].Subject, err)
		}
	}
	if len(p.list) > 0 {
		return Certificate{}, nil, p.err()
	}
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return Certificate{}, nil, &ValidationError{Errors: []FieldError{{Field: "/key_pem", Code: CodeUnsupportedKey, Message: "the key cannot be stored as PKCS #8"}}}
	}
	var bundle bytes.Buffer
	h := sha256.New()
	for _, c := range chain {
		h.Write(c.Raw)
		_ = pem.Encode(&bundle, &pem.Block{Type: "CERTIFICATE", Bytes: c.Raw})
	}
	_ = pem.Encode(&bundle, &pem.Block{Type: "PRIVATE KEY", Bytes: der})
	kt, _ := keyType(leaf.PublicKey)
	fp := sha256.Sum256(leaf.Raw)
	meta := Certificate{
		Name:              name,
		Subject:           leaf.Subject.String(),
		Issuer:            leaf.Issuer.String(),
		SANs:              sans(leaf),
		NotBefore:         leaf.NotBefore.UTC().Format(time.RFC3339),
		NotAfter:          leaf.NotAfter.UTC().Format(time.RFC3339),
		FingerprintSHA256: hex.EncodeToString(fp[:]),
		ChainSHA256:       hex.EncodeToString(h.Sum(nil)),
		KeyType:           kt,
		ChainLength:       len(chain),
	}
	return meta, bundle.Bytes(), nil
}

// parseChain decodes every CERTIFICATE block of data. Text before a block
// (openssl's "Bag Attributes" or "subject=" lines) is skipped by
// pem.Decode, as tls.X509KeyPair does, and never stored (the bundle is
// re-encoded from the parsed blocks); text after the last block, and any
// block of another type, is refused.
func parseChain(p *problems, data []byte) []*x509.Certificate {
	var chain []*x509.Certificate
	rest := bytes.TrimSpace(data)
	if len(rest) == 0 {
		p.add("/cert_pem", CodeRequired, "cert_pem must hold at least one PEM CERTIFICATE block")
		return nil
	}
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			p.add("/cert_pem", CodeBadPEM, "cert_pem holds data that is not a PEM block")
			return nil
		}
		rest = bytes.TrimSpace(rest)
		if b.Type != "CERTIFICATE" {
			p.addf("/cert_pem", CodeBadPEM, "cert_pem holds a %q block; only CERTIFICATE blocks are accepted (the key goes in key_pem)", truncateString(b.Type, 40))
			return nil
		}
		if len(chain) == MaxChainLength {
			p.addf("/cert_pem", CodeChain, "cert_pem holds more than %d certificates", MaxChainLength)
			return nil
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			p.addf("/cert_pem", CodeBadPEM, "certificate %d does not parse: %v", len(chain), err)
			return nil
		}
		if k, ok := c.PublicKey.(*rsa.PublicKey); ok && k.N.BitLen() > maxRSABits {
			p.addf("/cert_pem", CodeUnsupportedKey, "certificate %d (%s) has an RSA key of %d bits; at most %d are accepted",
				len(chain), truncateString(c.Subject.String(), 200), k.N.BitLen(), maxRSABits)
			return nil
		}
		chain = append(chain, c)
	}
	return chain
}

// parseKey decodes the one private key block of data: PKCS #8 ("PRIVATE
// KEY"), PKCS #1 ("RSA PRIVATE KEY") or SEC 1 ("EC PRIVATE KEY").
// Encrypted keys are refused: spliced has nowhere to keep a passphrase.
func parseKey(p *problems, data []byte) any {
	b, rest := pem.Decode(bytes.TrimSpace(data))
	switch {
	case len(bytes.TrimSpace(data)) == 0:
		p.add("/key_pem", CodeRequired, "key_pem must hold the PEM private key of the first certificate")
		return nil
	case b == nil || len(bytes.TrimSpace(rest)) > 0:
		p.add("/key_pem", CodeBadPEM, "key_pem must hold exactly one PEM block")
		return nil
	case b.Headers["Proc-Type"] != "" || b.Type == "ENCRYPTED PRIVATE KEY":
		p.add("/key_pem", CodeUnsupportedKey, "encrypted private keys are not supported")
		return nil
	case len(b.Bytes) > maxKeyDER:
		p.addf("/key_pem", CodeUnsupportedKey, "the private key takes %d bytes; supported keys (RSA of at most %d bits) take less than %d", len(b.Bytes), maxRSABits, maxKeyDER)
		return nil
	}
	var key any
	var err error
	switch b.Type {
	case "PRIVATE KEY":
		key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
	case "RSA PRIVATE KEY":
		key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
	case "EC PRIVATE KEY":
		key, err = x509.ParseECPrivateKey(b.Bytes)
	default:
		p.addf("/key_pem", CodeBadPEM, "key_pem holds a %q block; expected PRIVATE KEY, RSA PRIVATE KEY or EC PRIVATE KEY", truncateString(b.Type, 40))
		return nil
	}
	if err != nil {
		// The parser's message names the structure, never key material.
		p.addf("/key_pem", CodeBadPEM, "the private key does not parse: %v", err)
		return nil
	}
	switch k := key.(type) {
	case *rsa.PrivateKey, *ecdsa.PrivateKey, ed25519.PrivateKey:
		if _, ok := keyType(publicOf(k)); !ok {
			p.add("/key_pem", CodeUnsupportedKey, "supported keys: RSA of 2048 to 8192 bits, ECDSA P-256 or P-384, Ed25519")
			return nil
		}
		return k
	default:
		p.addf("/key_pem", CodeUnsupportedKey, "%T keys are not supported", key)
		return nil
	}
}

func publicOf(key any) any {
	switch k := key.(type) {
	case *rsa.PrivateKey:
		return &k.PublicKey
	case *ecdsa.PrivateKey:
		return &k.PublicKey
	case ed25519.PrivateKey:
		return k.Public()
	}
	return nil
}

func publicKeyMatches(pub, key any) bool {
	kp, ok := publicOf(key).(interface{ Equal(crypto.PublicKey) bool })
	if !ok {
		return false
	}
	return kp.Equal(pub)
}

// keyType names a public key and says whether it is accepted.
func keyType(pub any) (string, bool) {
	switch k := pub.(type) {
	case *rsa.PublicKey:
		return "rsa-" + strconv.Itoa(k.N.BitLen()), k.N.BitLen() >= minRSABits && k.N.BitLen() <= maxRSABits
	case *ecdsa.PublicKey:
		switch k.Curve {
		case elliptic.P256():
			return "ecdsa-p256", true
		case elliptic.P384():
			return "ecdsa-p384", true
		}
		return "ecdsa-" + k.Curve.Params().Name, false
	case ed25519.PublicKey:
		return "ed25519", true
	}
	return fmt.Sprintf("%T", pub), false
}

func sans(c *x509.Certificate) []string {
	out := append([]string{}, c.DNSNames...)
	for _, ip := range c.IPAddresses {
		out = append(out, ip.String())
	}
	out = append(out, c.EmailAddresses...)
	for _, u := range c.URIs {
		out = append(out, u.String())
	}
	return out
}

func truncateString(s string, n int) string {
	if len(s) > n {
		return s[:n]
	}
	return s
}

// CertificateUse is one reference to a certificate: Field is its JSON
// pointer in the document, Object names the user as used_by shows it
// ("frontend/public/bind/b1").
type CertificateUse struct {
	Field  string
	Object string
}

// CertificateUsers lists what refers to the certificate named name in c:
// the binds whose tls.certificates name it, in document order. The delete
// check (409) and used_by read this function only.
func CertificateUsers(c *Config, name string) []CertificateUse {
	var out []CertificateUse
	for i := range c.Frontends {
		f := &c.Frontends[i]
		for j := range f.Binds {
			b := &f.Binds[j]
			if b.TLS == nil {
				continue
			}
			for k, n := range b.TLS.Certificates {
				if n == name {
					out = append(out, CertificateUse{
						Field:  "/frontends/" + strconv.Itoa(i) + "/binds/" + strconv.Itoa(j) + "/tls/certificates/" + strconv.Itoa(k),
						Object: "frontend/" + f.Name + "/bind/" + b.Name,
					})
				}
			}
		}
	}
	return out
}

// FindCertificate returns the index of the named certificate or -1.
func (c *Config) FindCertificate(name string) int {
	for i := range c.Certificates {
		if c.Certificates[i].Name == name {
			return i
		}
	}
	return -1
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !('0' <= s[i] && s[i] <= '9' || 'a' <= s[i] && s[i] <= 'f') {
			return false
		}
	}
	return true
}

// certificates checks names (unique, DNS-label-like) and the form of the
// hashes and dates; that each certificate's file exists and matches its
// metadata is the store's check (it reads the state directory).
func (v *validation) certificates() {
	names := uniqueNames{}
	for i := range v.c.Certificates {
		c := &v.c.Certificates[i]
		cp := "/certificates/" + strconv.Itoa(i)
		v.name(cp+"/name", "certificate", c.Name)
		names.check(v.p, cp+"/name", "certificate", c.Name)
		if c.ACME != nil {
			v.acme(cp, c)
		}
		if !isHexSHA256(c.ChainSHA256) && (c.ACME == nil || c.ChainSHA256 != "") {
			v.p.add(cp+"/chain_sha256", CodeFormat, "chain_sha256 must be 64 lower-case hex digits")
		}
	}
}

func (c *Certificate) clone() Certificate {
	out := *c
	if c.SANs != nil {
		out.SANs = append([]string{}, c.SANs...)
	}
	out.ACME = c.ACME.clone()
	return out
}
