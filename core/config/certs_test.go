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
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestCertificateNamesAndHashesAreValidated(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	c := &Config{Certificates: []Certificate{
		{Name: "site", ChainSHA256: sum},
		{Name: "site", ChainSHA256: sum},
		{Name: "Bad!", ChainSHA256: "xyz"},
	}}
	c.Normalize()
	err := Validate(c, Env{})
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("want a *ValidationError, got %v", err)
	}
	want := []string{"/certificates/1/name duplicate", "/certificates/2/chain_sha256 format", "/certificates/2/name format"}
	var got []string
	for _, fe := range ve.Errors {
		got = append(got, fe.Field+" "+fe.Code)
	}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("got %v, want %v", got, want)
	}
}

func TestDiffListsCertificates(t *testing.T) {
	sum := strings.Repeat("ab", 32)
	old := &Config{Certificates: []Certificate{{Name: "a", ChainSHA256: sum}, {Name: "b", ChainSHA256: sum}}}
	new := &Config{Certificates: []Certificate{{Name: "a", ChainSHA256: strings.Repeat("cd", 32)}, {Name: "c", ChainSHA256: sum}}}
	old.Normalize()
	new.Normalize()
	if s := Diff(old, new).Summary(); s != "update certificate/a (chain_sha256); create certificate/c; delete certificate/b" {
		t.Fatalf("plan: %s", s)
	}
}

func testCertPEM(t testing.TB, cn string) (string, string) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: cn},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{cn}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k8, _ := x509.MarshalPKCS8PrivateKey(key)
	return string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8}))
}

// TestCertificateFilesLiveAsLongAsTheHistory: a replaced certificate's
// file stays while a kept revision refers to it, and is removed (key
// included) by the next certificate write once no revision does.
func TestCertificateFilesLiveAsLongAsTheHistory(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	put := func(cn string) Certificate {
		cp, kp := testCertPEM(t, cn)
		meta, bundle, err := ParseCertificate("site", cp, kp, time.Now())
		if err != nil {
			t.Fatal(err)
		}
		_, err = s.Update(t.Context(), func(c *Config) error {
			if i := c.FindCertificate("site"); i >= 0 {
				c.Certificates[i] = meta
			} else {
				c.Certificates = append(c.Certificates, meta)
			}
			return nil
		}, UpdateOptions{Certificates: map[string][]byte{meta.ChainSHA256: bundle}})
		if err != nil {
			t.Fatal(err)
		}
		return meta
	}
	exists := func(c Certificate) bool {
		_, err := os.Stat(filepath.Join(dir, CertsDir, c.ChainSHA256+".pem"))
		return err == nil
	}
	a := put("a.test")
	b := put("b.test")
	if !exists(a) || !exists(b) {
		t.Fatal("a replaced certificate's file is gone while revision 1 refers to it")
	}
	// Push revisions 1 (a) and 2 (b) out of the kept history (the
	// deltas' chain and the prune at snapshots may keep 2*SnapshotEvery
	// more).
	for i := range MaxRevisions + 2*SnapshotEvery {
		if _, err := s.Update(t.Context(), func(c *Config) error { c.Tuning.Maxaccept = 1000 + i; return nil }, UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	dirOf(s).WaitSnapshots() // the revisions are pruned after the snapshot's commit
	if !exists(a) {
		t.Fatal("pruned before a certificate write (documented: at the next one)")
	}
	if _, err := s.Update(t.Context(), func(c *Config) error { c.Certificates = nil; return nil }, UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if exists(a) {
		t.Fatal("the file of a certificate no revision refers to is still there")
	}
	if !exists(b) {
		t.Fatal("the file of a certificate kept revisions refer to was removed")
	}
}
