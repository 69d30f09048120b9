package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/asn1"
	"encoding/pem"
	"errors"
	"math/big"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestCertificateRefusesHugeRSAKeysBeforeVerifying: an issuer carrying a
// multi-megabit RSA modulus and a leaf whose signature is as long makes
// the chain check one public-key operation on megabit numbers (seconds to
// minutes of CPU per request, within the 1 MiB body limit). Such keys are
// refused before any signature is checked, quickly.
func TestCertificateRefusesHugeRSAKeysBeforeVerifying(t *testing.T) {
	signer, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	// A 1.5-Mbit "modulus": odd, not a real key, only its size matters.
	n := new(big.Int).SetBytes(append([]byte{0xc1}, make([]byte, 192<<10)...))
	n.SetBit(n, 0, 1)
	huge := &rsa.PublicKey{N: n, E: 65537}
	now := time.Now()
	issuerT := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "huge CA"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign}
	issuerDER, err := x509.CreateCertificate(rand.Reader, issuerT, issuerT, huge, signer)
	if err != nil {
		t.Fatal(err)
	}
	leafKey, _ := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	leafT := &x509.Certificate{SerialNumber: big.NewInt(2), Subject: pkix.Name{CommonName: "leaf"},
		NotBefore: now.Add(-time.Hour), NotAfter: now.Add(time.Hour), DNSNames: []string{"leaf"}}
	leafDER, err := x509.CreateCertificate(rand.Reader, leafT, issuerT, &leafKey.PublicKey, signer)
	if err != nil {
		t.Fatal(err)
	}
	// Give the leaf a signature as long as the issuer's modulus.
	var outer struct {
		TBS asn1.RawValue
		Alg asn1.RawValue
		Sig asn1.BitString
	}
	if _, err := asn1.Unmarshal(leafDER, &outer); err != nil {
		t.Fatal(err)
	}
	sig := make([]byte, (n.BitLen()+7)/8)
	sig[0] = 0x01
	outer.Sig = asn1.BitString{Bytes: sig, BitLength: 8 * len(sig)}
	if leafDER, err = asn1.Marshal(outer); err != nil {
		t.Fatal(err)
	}
	certPEM := string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leafDER})) +
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: issuerDER}))
	if len(certPEM) > 1<<20 {
		t.Fatalf("the upload (%d bytes) must fit the default body limit", len(certPEM))
	}
	kd, _ := x509.MarshalPKCS8PrivateKey(leafKey)
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: kd}))

	start := time.Now()
	_, _, err = ParseCertificate("huge", certPEM, keyPEM, now)
	took := time.Since(start)
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) == 0 || ve.Errors[0].Code != CodeUnsupportedKey || !strings.Contains(ve.Errors[0].Message, "certificate 1") {
		t.Fatalf("want unsupported_key on certificate 1, got %v", err)
	}
	if took > 2*time.Second {
		t.Fatalf("refusing took %v: the signature was checked first", took)
	}
}

// TestCertificateRefusesOversizedKeyBeforeParsing: key_pem is bounded
// before it is parsed (an RSA key is validated while parsed).
func TestCertificateRefusesOversizedKeyBeforeParsing(t *testing.T) {
	cp, _ := testCertPEM(t, "site")
	keyPEM := string(pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: make([]byte, maxKeyDER+1)}))
	_, _, err := ParseCertificate("site", cp, keyPEM, time.Now())
	var ve *ValidationError
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "/key_pem" || ve.Errors[0].Code != CodeUnsupportedKey {
		t.Fatalf("want one unsupported_key on /key_pem, got %v", err)
	}
}

// TestOpenRefusesCertificateKeysOthersCanRead: the files of certs/ hold
// private keys; a start with them (or the directory) reachable by other
// users is refused, as for tokens.json.
func TestOpenRefusesCertificateKeysOthersCanRead(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	cp, kp := testCertPEM(t, "site")
	meta, bundle, err := ParseCertificate("site", cp, kp, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Update(t.Context(), func(c *Config) error {
		c.Certificates = append(c.Certificates, meta)
		return nil
	}, UpdateOptions{Certificates: map[string][]byte{meta.ChainSHA256: bundle}}); err != nil {
		t.Fatal(err)
	}
	certs := filepath.Join(dir, CertsDir)
	file := filepath.Join(certs, meta.ChainSHA256+".pem")
	for _, tc := range []struct {
		path string
		mode os.FileMode
		want string
	}{
		{file, 0o644, "chmod 600"},
		{certs, 0o755, "chmod 700"},
	} {
		if err := os.Chmod(tc.path, tc.mode); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, "", nil); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Fatalf("%s at %o: want a refusal naming %q, got %v", tc.path, tc.mode, tc.want, err)
		}
	}
	if err := os.Chmod(certs, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(file, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(dir, "", nil); err != nil {
		t.Fatal(err)
	}
}
