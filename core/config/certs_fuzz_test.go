package config

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// FuzzParseCertificate: whatever the cert_pem and key_pem of an upload,
// ParseCertificate does not panic, refuses with a *ValidationError
// pointing at /cert_pem or /key_pem, and never echoes the key's text in a
// message; what it accepts parses again from its own bundle to the same
// metadata.
func FuzzParseCertificate(f *testing.F) {
	c, k := testCertPEM(f, "a.test")
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
