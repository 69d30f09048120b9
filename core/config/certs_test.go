package config

import (
	"errors"
	"strings"
	"testing"
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
	if s := Diff(old, new).Summary(); s != "update certificate/a; create certificate/c; delete certificate/b" {
		t.Fatalf("plan: %s", s)
	}
}
