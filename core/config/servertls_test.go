package config

import (
	"slices"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// testCAPEM is a self-signed CA certificate in PEM.
func testCAPEM(t *testing.T) string {
	t.Helper()
	return testutil.NewCert(t, testutil.CertSpec{Names: []string{"test ca"}, CA: true}).CertPEM
}

func TestServerTLSValidation(t *testing.T) {
	ca := testCAPEM(t)
	const sp = "/backends/1/servers/0/tls" // backend 1 has no http check
	tests := []struct {
		name string
		tls  ServerTLS
		want []want
	}{
		{name: "verify none passes", tls: ServerTLS{Verify: VerifyNone}},
		{name: "verify required with system roots passes", tls: ServerTLS{Verify: VerifyRequired}},
		{name: "ca_pem and sni pass", tls: ServerTLS{Verify: VerifyRequired, CAPEM: ca, SNI: "Origin.example.com"}},
		{name: "two CA blocks with text before pass", tls: ServerTLS{CAPEM: "subject=x\n" + ca + ca}},
		{name: "unknown verify refused", tls: ServerTLS{Verify: "optional"},
			want: []want{{sp + "/verify", CodeOneOf}}},
		{name: "sni not a host name refused", tls: ServerTLS{SNI: "a b"},
			want: []want{{sp + "/sni", CodeFormat}}},
		{name: "sni an IP refused", tls: ServerTLS{SNI: "10.0.0.1"},
			want: []want{{sp + "/sni", CodeFormat}}},
		{name: "ca_pem not PEM refused", tls: ServerTLS{CAPEM: "hello"},
			want: []want{{sp + "/ca_pem", CodeBadPEM}}},
		{name: "ca_pem with a key block refused", tls: ServerTLS{CAPEM: ca + "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"},
			want: []want{{sp + "/ca_pem", CodeBadPEM}}},
		{name: "ca_pem block that does not parse refused", tls: ServerTLS{CAPEM: "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"},
			want: []want{{sp + "/ca_pem", CodeBadPEM}}},
		{name: "ca_pem with trailing text refused", tls: ServerTLS{CAPEM: ca + "junk"},
			want: []want{{sp + "/ca_pem", CodeBadPEM}}},
		{name: "ca_pem over 64 KiB refused", tls: ServerTLS{CAPEM: strings.Repeat(ca, MaxCAPEM/len(ca)+1)},
			want: []want{{sp + "/ca_pem", CodeOutOfRange}}},
		{name: "ca_pem with verify none refused", tls: ServerTLS{Verify: VerifyNone, CAPEM: ca},
			want: []want{{sp + "/ca_pem", CodeModeMismatch}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tls := tt.tls
			c.Backends[1].Servers[0].TLS = &tls
			c.Normalize()
			got := fieldErrors(t, Validate(c, Env{}))
			if !slices.Equal(got, tt.want) {
				t.Fatalf("problems\n got: %v\nwant: %v", got, tt.want)
			}
		})
	}
}

// TestChecksAcceptedWithTLSServers: http and tcp checks of a backend with
// a TLS server are accepted (the probe runs over TLS, core/proxy/check.go).
func TestChecksAcceptedWithTLSServers(t *testing.T) {
	c := goodConfig() // backend 0 has an http check
	c.Backends[0].Servers[1].TLS = &ServerTLS{Verify: VerifyNone}
	c.Normalize()
	if err := Validate(c, Env{}); err != nil {
		t.Fatalf("an http check of a TLS server refused: %v", err)
	}
	c.Backends[0].HealthCheck = &HealthCheck{Type: CheckTCP}
	c.Normalize()
	if err := Validate(c, Env{}); err != nil {
		t.Fatalf("a tcp check of a TLS server refused: %v", err)
	}
}

func TestServerTLSDefaults(t *testing.T) {
	s := Server{Name: "s", Address: "origin.example.com", Port: 443, TLS: &ServerTLS{}}
	s.Normalize()
	if s.TLS.Verify != VerifyRequired {
		t.Fatalf("verify defaults to %q, want required", s.TLS.Verify)
	}
	var plain Server
	plain.Normalize()
	if plain.TLS != nil {
		t.Fatal("Normalize added tls to a plain server")
	}
}

// TestChangedServerTLSIsCheckedAgain: the field rules (ca_pem included)
// skip a server equal to the previous config's; equal must see a change
// of its tls, or a bad ca_pem would get through.
func TestChangedServerTLSIsCheckedAgain(t *testing.T) {
	prev := goodConfig()
	prev.Backends[1].Servers[0].TLS = &ServerTLS{Verify: VerifyRequired, CAPEM: testCAPEM(t)}
	if err := Validate(prev, Env{}); err != nil {
		t.Fatal(err)
	}
	next := prev.Clone()
	next.Backends[1].Servers[0].TLS.CAPEM = "garbage"
	got := fieldErrors(t, validate(next, Env{}, prev, nil))
	if !slices.Equal(got, []want{{"/backends/1/servers/0/tls/ca_pem", CodeBadPEM}}) {
		t.Fatalf("a changed ca_pem was not checked: %v", got)
	}
}
