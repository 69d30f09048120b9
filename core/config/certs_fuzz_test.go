package config

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"strings"
	"testing"
	"time"
)

func fuzzSeedCert(f *testing.F) (certPEM, keyPEM string) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		f.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "a.test"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{"a.test"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		f.Fatal(err)
	}
	k8, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}))
}

// FuzzParseCertificate: whatever the cert_pem and key_pem of an upload,
// ParseCertificate does not panic, refuses with a *ValidationError
// pointing at /cert_pem or /key_pem, and never echoes the key's text in a
// message; what it accepts parses again from its own bundle to the same
// metadata.
func FuzzParseCertificate(f *testing.F) {
	c, k := fuzzSeedCert(f)
	f.Add(c, k)
	f.Add(c+c, k)
	f.Add(k, c)
	f.Add("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n", "")
	f.Add(c, "-----BEGIN EC PRIVATE KEY-----\nProc-Type: 4,ENCRYPTED\n\nAAAA\n-----END EC PRIVATE KEY-----\n")
	f.Fuzz(func(t *testing.T, certPEM, keyPEM string) {
		meta, bundle, err := ParseCertificate("site", certPEM, keyPEM, time.Now())
		if err != nil {
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) == 0 {
				t.Fatalf("error %v is not a non-empty *ValidationError", err)
			}
			for _, fe := range ve.Errors {
				if fe.Field != "/cert_pem" && fe.Field != "/key_pem" {
					t.Fatalf("problem points at %q", fe.Field)
				}
				if len(keyPEM) >= 16 && strings.Contains(fe.Message, keyPEM) {
					t.Fatalf("message echoes the key: %q", fe.Message)
				}
			}
			return
		}
		cp, kp := splitBundle(bundle)
		again, _, err := ParseCertificate("site", cp, kp, time.Time{})
		if err != nil || again.ChainSHA256 != meta.ChainSHA256 || again.FingerprintSHA256 != meta.FingerprintSHA256 {
			t.Fatalf("the stored bundle does not parse to the same metadata: %v", err)
		}
	})
}
