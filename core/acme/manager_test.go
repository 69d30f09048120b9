package acme

import (
	"errors"
	"fmt"
	"testing"
	"time"

	acmeproto "github.com/mholt/acmez/v3/acme"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestRenewalAtTwoThirdsOfTheLifetimeOrNow(t *testing.T) {
	now := time.Date(2026, 12, 6, 8, 0, 0, 0, time.UTC)
	spec := &config.CertificateACME{Domains: []string{"example.com", "www.example.com"}, KeyType: config.ACMEKeyECDSAP256}
	issued := config.Certificate{Name: "site", ChainSHA256: "x", KeyType: "ecdsa-p256",
		SANs: []string{"www.example.com", "example.com"}, NotBefore: "2026-12-01T00:00:00Z", NotAfter: "2027-03-01T00:00:00Z", ACME: spec}
	for _, tc := range []struct {
		name string
		edit func(c *config.Certificate)
		want time.Time
	}{
		{"issued: two thirds of 90 days", func(*config.Certificate) {}, time.Date(2027, 1, 30, 0, 0, 0, 0, time.UTC)},
		{"not issued", func(c *config.Certificate) { c.ChainSHA256 = "" }, now},
		{"a domain added", func(c *config.Certificate) { c.SANs = []string{"example.com"} }, now},
		{"another key type", func(c *config.Certificate) { c.KeyType = "rsa-2048" }, now},
		{"names differ in case only", func(c *config.Certificate) { c.SANs = []string{"Example.com", "WWW.example.com"} }, time.Date(2027, 1, 30, 0, 0, 0, 0, time.UTC)},
		{"unreadable dates", func(c *config.Certificate) { c.NotAfter = "soon" }, now},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := issued
			tc.edit(&c)
			if got := renewalAt(&c, now); !got.Equal(tc.want) {
				t.Fatalf("renewalAt = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestProblemOfKeepsTheCAsProblemDocument(t *testing.T) {
	p := problemOf(fmt.Errorf("order: %w", acmeproto.Problem{Type: "urn:ietf:params:acme:error:rejectedIdentifier", Detail: "no", Status: 400,
		Subproblems: []acmeproto.Subproblem{{Problem: acmeproto.Problem{Detail: "blocked.example"}}}}))
	if p.Type != "urn:ietf:params:acme:error:rejectedIdentifier" || p.Status != 400 || p.Detail != "no; blocked.example" {
		t.Fatalf("%+v", p)
	}
	p = problemOf(errors.New("dial tcp: refused"))
	if p.Type != "about:blank" || p.Detail != "dial tcp: refused" {
		t.Fatalf("%+v", p)
	}
}

// TestTokensSwapWithoutLosingOthers: presenting and cleaning up one token
// leaves the others answered (the map is copied on write).
func TestTokensSwapWithoutLosingOthers(t *testing.T) {
	m := New(Options{})
	s := httpSolver{m}
	s.Present(t.Context(), acmeproto.Challenge{Token: "a", KeyAuthorization: "a.k"})
	s.Present(t.Context(), acmeproto.Challenge{Token: "b", KeyAuthorization: "b.k"})
	s.CleanUp(t.Context(), acmeproto.Challenge{Token: "a"})
	if _, ok := m.KeyAuthorization("a"); ok {
		t.Fatal("token a still answered after CleanUp")
	}
	if ka, ok := m.KeyAuthorization("b"); !ok || ka != "b.k" {
		t.Fatalf("token b: %q %v", ka, ok)
	}
}
