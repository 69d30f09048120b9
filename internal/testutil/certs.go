package testutil

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"testing"
	"time"
)

// CertSpec describes a test certificate (NewCert). The zero value is a
// self-signed ECDSA P-256 server certificate for "localhost" valid from
// an hour ago to an hour from now.
type CertSpec struct {
	// Names are the DNS SANs (IP literals become IP SANs); the first is
	// also the subject's common name. Default: "localhost".
	Names []string
	// RSABits > 0 makes an RSA key of that size instead of ECDSA P-256.
	RSABits int
	// CA makes a certificate authority (may sign others, no server use).
	CA bool
	// Client makes a client-authentication certificate (mTLS).
	Client bool
	// Parent signs the certificate; nil: self-signed.
	Parent *Cert
	// NotBefore and NotAfter default to one hour around now.
	NotBefore, NotAfter time.Time
}

// Cert is a generated certificate with its key, in the forms tests need.
type Cert struct {
	X509 *x509.Certificate
	Key  crypto.Signer
	// CertPEM is the certificate alone; ChainPEM is it followed by its
	// parents up to (and including) the self-signed root.
	CertPEM, ChainPEM, KeyPEM string
	parent                    *Cert
}

// NewCert generates a certificate per s; it fails the test on error.
func NewCert(t testing.TB, s CertSpec) *Cert {
	t.Helper()
	var key crypto.Signer
	var err error
	if s.RSABits > 0 {
		key, err = rsa.GenerateKey(rand.Reader, s.RSABits)
	} else {
		key, err = ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	}
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Names) == 0 {
		s.Names = []string{"localhost"}
	}
	if s.NotBefore.IsZero() {
		s.NotBefore = time.Now().Add(-time.Hour)
	}
	if s.NotAfter.IsZero() {
		s.NotAfter = time.Now().Add(time.Hour)
	}
	// A random 128-bit serial, as CAs make them (RFC 5280 wants them
	// unique per issuer; testssl.sh grades short ones LOW).
	sn, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 128))
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: sn,
		Subject:      pkix.Name{CommonName: s.Names[0], Organization: []string{"spliced tests"}},
		NotBefore:    s.NotBefore, NotAfter: s.NotAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	switch {
	case s.CA:
		tmpl.IsCA = true
		tmpl.KeyUsage |= x509.KeyUsageCertSign
	case s.Client:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}
	default:
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
	}
	if _, ok := key.(*rsa.PrivateKey); ok && !s.CA {
		tmpl.KeyUsage |= x509.KeyUsageKeyEncipherment
	}
	for _, n := range s.Names {
		if ip := net.ParseIP(n); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else if !s.CA {
			tmpl.DNSNames = append(tmpl.DNSNames, n)
		}
	}
	parent, signer := tmpl, key
	if s.Parent != nil {
		parent, signer = s.Parent.X509, s.Parent.Key
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	c := &Cert{Key: key, parent: s.Parent}
	if c.X509, err = x509.ParseCertificate(der); err != nil {
		t.Fatal(err)
	}
	kder, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	c.CertPEM = string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}))
	c.KeyPEM = string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kder}))
	c.ChainPEM = c.CertPEM
	if s.Parent != nil {
		c.ChainPEM += s.Parent.ChainPEM
	}
	return c
}

// SelfSigned is a self-signed ECDSA P-256 server certificate for names
// (default "localhost").
func SelfSigned(t testing.TB, names ...string) *Cert {
	t.Helper()
	return NewCert(t, CertSpec{Names: names})
}

// TLS is the certificate as crypto/tls serves it (leaf and parents, not
// the root when it has a parent: a root is never sent).
func (c *Cert) TLS() tls.Certificate {
	out := tls.Certificate{PrivateKey: c.Key, Leaf: c.X509}
	for p := c; p != nil; p = p.parent {
		if p != c && p.parent == nil {
			break // the root
		}
		out.Certificate = append(out.Certificate, p.X509.Raw)
	}
	return out
}

// Pool is a cert pool holding the root of c's chain (what a client that
// trusts c, or a server that verifies clients signed by c's root, needs).
func (c *Cert) Pool() *x509.CertPool {
	root := c
	for root.parent != nil {
		root = root.parent
	}
	p := x509.NewCertPool()
	p.AddCert(root.X509)
	return p
}
