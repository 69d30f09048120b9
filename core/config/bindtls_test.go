package config

import (
	"crypto/tls"
	"slices"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsConfig is goodConfig with two certificates and a tls bind on each
// frontend that can have one (public: http; db_front: tcp).
func tlsConfig() *Config {
	c := goodConfig()
	c.Certificates = []Certificate{
		{Name: "site", ChainSHA256: strings.Repeat("a", 64)},
		{Name: "site-rsa", ChainSHA256: strings.Repeat("b", 64)},
	}
	c.Frontends[0].Binds[0].TLS = &BindTLS{Certificates: []string{"site", "site-rsa"}}
	c.Frontends[1].Binds[0].TLS = &BindTLS{Certificates: []string{"site"}, ALPN: []string{"postgresql", "h2"}}
	c.Normalize()
	return c
}

func TestValidateBindTLS(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	ca2 := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"other ca"}})
	tls0 := func(c *Config) *BindTLS { return c.Frontends[0].Binds[0].TLS }
	tls1 := func(c *Config) *BindTLS { return c.Frontends[1].Binds[0].TLS }
	const p0 = "/frontends/0/binds/0/tls"
	const p1 = "/frontends/1/binds/0/tls"
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []want
	}{
		{name: "tls binds on http and tcp frontends pass", mutate: func(c *Config) {}},
		{name: "no certificate", mutate: func(c *Config) { tls0(c).Certificates = []string{} },
			want: []want{{p0 + "/certificates", CodeRequired}}},
		{name: "unknown certificate", mutate: func(c *Config) { tls0(c).Certificates = []string{"site", "nope"} },
			want: []want{{p0 + "/certificates/1", CodeUnknownReference}}},
		{name: "certificate listed twice", mutate: func(c *Config) { tls0(c).Certificates = []string{"site", "site"} },
			want: []want{{p0 + "/certificates/1", CodeDuplicate}}},
		{name: "min_version 1.0 passes with a cipher TLS 1.0 can use", mutate: func(c *Config) {
			tls0(c).MinVersion = "1.0"
			tls0(c).Ciphers = append(tls0(c).Ciphers, "TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA")
		}},
		{name: "min_version 1.1 with the default AEAD ciphers only", mutate: func(c *Config) { tls0(c).MinVersion = "1.1" },
			want: []want{{p0 + "/ciphers", CodeInvalid}}},
		{name: "min_version 1.3 passes", mutate: func(c *Config) { tls0(c).MinVersion = "1.3" }},
		{name: "min_version unknown", mutate: func(c *Config) { tls0(c).MinVersion = "1.4" },
			want: []want{{p0 + "/min_version", CodeOneOf}}},
		{name: "h2 passes in http mode", mutate: func(c *Config) { tls0(c).ALPN = []string{"h2", "http/1.1"} }},
		{name: "h2 refused when http.versions lacks 2", mutate: func(c *Config) {
			tls0(c).ALPN = []string{"h2", "http/1.1"}
			c.Frontends[0].HTTP.Versions = []string{"1.1"}
		}, want: []want{{p0 + "/alpn/0", CodeInvalid}}},
		{name: "http/1.x refused when http.versions lacks 1.1", mutate: func(c *Config) {
			tls0(c).ALPN = []string{"h2", "http/1.1", "http/1.0"}
			c.Frontends[0].HTTP.Versions = []string{"2"}
		}, want: []want{{p0 + "/alpn/1", CodeInvalid}, {p0 + "/alpn/2", CodeInvalid}}},
		{name: "h2 listed twice", mutate: func(c *Config) { tls0(c).ALPN = []string{"h2", "h2"} },
			want: []want{{p0 + "/alpn/1", CodeDuplicate}}},
		{name: "other protocol refused in http mode", mutate: func(c *Config) { tls0(c).ALPN = []string{"http/1.1", "spdy/3"} },
			want: []want{{p0 + "/alpn/1", CodeOneOf}}},
		{name: "http/1.0 passes in http mode", mutate: func(c *Config) { tls0(c).ALPN = []string{"http/1.1", "http/1.0"} }},
		{name: "any protocol passes in tcp mode", mutate: func(c *Config) { tls1(c).ALPN = []string{"h2", "imap", strings.Repeat("x", 255)} }},
		{name: "empty protocol", mutate: func(c *Config) { tls1(c).ALPN = []string{""} },
			want: []want{{p1 + "/alpn/0", CodeOutOfRange}}},
		{name: "protocol of 256 bytes", mutate: func(c *Config) { tls1(c).ALPN = []string{strings.Repeat("x", 256)} },
			want: []want{{p1 + "/alpn/0", CodeOutOfRange}}},
		{name: "protocol listed twice", mutate: func(c *Config) { tls1(c).ALPN = []string{"imap", "imap"} },
			want: []want{{p1 + "/alpn/1", CodeDuplicate}}},
		{name: "too many protocols", mutate: func(c *Config) {
			tls1(c).ALPN = nil
			for i := range MaxALPNProtocols + 1 {
				tls1(c).ALPN = append(tls1(c).ALPN, strings.Repeat("p", i+1))
			}
		}, want: []want{{p1 + "/alpn", CodeOutOfRange}}},
		{name: "cipher by Go name passes, insecure too when asked for", mutate: func(c *Config) {
			tls0(c).Ciphers = []string{"TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA", "TLS_RSA_WITH_AES_128_CBC_SHA256"}
		}},
		{name: "unknown cipher", mutate: func(c *Config) {
			tls0(c).Ciphers = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "ECDHE-RSA-AES128-GCM-SHA256"}
		},
			want: []want{{p0 + "/ciphers/1", CodeOneOf}}},
		{name: "TLS 1.3 suite is not configurable", mutate: func(c *Config) { tls0(c).Ciphers = []string{"TLS_AES_128_GCM_SHA256"} },
			want: []want{{p0 + "/ciphers/0", CodeOneOf}}},
		{name: "cipher listed twice", mutate: func(c *Config) {
			tls0(c).Ciphers = []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256", "TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}
		}, want: []want{{p0 + "/ciphers/1", CodeDuplicate}}},
		{name: "client_ca of two certificates passes", mutate: func(c *Config) {
			tls0(c).ClientCA = "# our CAs\n" + ca.CertPEM + ca2.CertPEM
			c.Normalize()
		}},
		{name: "client_ca not PEM", mutate: func(c *Config) { tls0(c).ClientCA = "not a certificate"; c.Normalize() },
			want: []want{{p0 + "/client_ca", CodeBadPEM}}},
		{name: "client_ca with a key block", mutate: func(c *Config) { tls0(c).ClientCA = ca.CertPEM + ca.KeyPEM; c.Normalize() },
			want: []want{{p0 + "/client_ca", CodeBadPEM}}},
		{name: "client_ca truncated", mutate: func(c *Config) { tls0(c).ClientCA = ca.CertPEM + ca2.CertPEM[:100]; c.Normalize() },
			want: []want{{p0 + "/client_ca", CodeBadPEM}}},
		{name: "client_ca block that does not parse", mutate: func(c *Config) {
			tls0(c).ClientCA = "-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"
			c.Normalize()
		}, want: []want{{p0 + "/client_ca", CodeBadPEM}}},
		{name: "client_ca over 64 KiB", mutate: func(c *Config) {
			tls0(c).ClientCA = strings.Repeat(ca.CertPEM, MaxClientCABytes/len(ca.CertPEM)+1)
			c.Normalize()
		}, want: []want{{p0 + "/client_ca", CodeOutOfRange}}},
		{name: "client_auth optional passes", mutate: func(c *Config) { tls0(c).ClientCA = ca.CertPEM; tls0(c).ClientAuth = "optional" }},
		{name: "client_auth unknown", mutate: func(c *Config) { tls0(c).ClientCA = ca.CertPEM; tls0(c).ClientAuth = "sometimes" },
			want: []want{{p0 + "/client_auth", CodeOneOf}}},
		{name: "client_auth without client_ca", mutate: func(c *Config) { tls0(c).ClientAuth = "required" },
			want: []want{{p0 + "/client_auth", CodeInvalid}}},
		{name: "client cert prefix in tcp mode", mutate: func(c *Config) {
			tls1(c).ClientCA = ca.CertPEM
			tls1(c).ClientCertHeaderPrefix = "X-Cert-"
			c.Normalize()
		}, want: []want{{p1 + "/client_cert_header_prefix", CodeModeMismatch}}},
		{name: "client cert prefix without client_ca", mutate: func(c *Config) { tls0(c).ClientCertHeaderPrefix = "X-Cert-" },
			want: []want{{p0 + "/client_cert_header_prefix", CodeInvalid}}},
		{name: "client cert prefix not a token", mutate: func(c *Config) {
			tls0(c).ClientCA = ca.CertPEM
			tls0(c).ClientCertHeaderPrefix = "X Cert:"
			c.Normalize()
		}, want: []want{{p0 + "/client_cert_header_prefix", CodeFormat}}},
		{name: "client cert prefix too long", mutate: func(c *Config) {
			tls0(c).ClientCA = ca.CertPEM
			tls0(c).ClientCertHeaderPrefix = strings.Repeat("X", MaxClientCertPrefixLen+1)
		}, want: []want{{p0 + "/client_cert_header_prefix", CodeFormat}}},
		{name: "tcp frontend with sni routes cannot terminate", mutate: func(c *Config) {
			c.Frontends[1].Routes = []Route{{SNI: "a.example.com", Backend: "db"}}
		}, want: []want{{p1, CodeModeMismatch}}},
		{name: "ticket rotation below a minute", mutate: func(c *Config) { c.Tuning.TLS.TicketRotationMs = 59999 },
			want: []want{{"/tuning/tls/ticket_rotation_ms", CodeOutOfRange}}},
		{name: "max_handshakes negative", mutate: func(c *Config) { c.Tuning.TLS.MaxHandshakes = -1 },
			want: []want{{"/tuning/tls/max_handshakes", CodeOutOfRange}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tlsConfig()
			tt.mutate(c)
			err := Validate(c, fourCPUs)
			if got := fieldErrors(t, err); !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() problems\n got: %v\nwant: %v\n err: %v", got, tt.want, err)
			}
		})
	}
}

func TestNormalizeBindTLS(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true})
	c := Config{Frontends: []Frontend{
		{Name: "web", Mode: ModeHTTP, Binds: []Bind{
			{Name: "plain"},
			{Name: "tls", TLS: &BindTLS{Certificates: []string{"a"}}},
			{Name: "mtls", TLS: &BindTLS{Certificates: []string{"a"}, ClientCA: ca.CertPEM}},
			{Name: "set", TLS: &BindTLS{Certificates: []string{"a"}, ALPN: []string{"http/1.0"}, MinVersion: "1.3",
				Ciphers: []string{"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256"}, ClientCA: ca.CertPEM, ClientAuth: "optional", ClientCertHeaderPrefix: "X-Mtls-"}},
		}},
		{Name: "raw", Mode: ModeTCP, Binds: []Bind{{Name: "tls", TLS: &BindTLS{Certificates: []string{"a"}, ClientCA: ca.CertPEM}}}},
		{Name: "plain", Mode: ModeTCP, Binds: []Bind{{Name: "b"}}},
	}}
	c.Normalize()
	web, raw := c.Frontends[0].Binds, c.Frontends[1].Binds
	if web[0].TLS != nil {
		t.Error("a plain bind got a tls member")
	}
	def := web[1].TLS
	// alpn stays unset: the list offered is derived from http.versions
	// when the bind is applied (OfferedALPN), so a stored list is one a
	// client set.
	if def.MinVersion != "1.2" || def.ALPN != nil || !slices.Equal(def.Ciphers, DefaultCiphers()) ||
		def.ClientAuth != "" || def.ClientCertHeaderPrefix != "" {
		t.Errorf("http tls defaults: %+v", def)
	}
	if m := web[2].TLS; m.ClientAuth != ClientAuthRequired || m.ClientCertHeaderPrefix != "X-Client-Cert-" {
		t.Errorf("mtls defaults: %+v", m)
	}
	if s := web[3].TLS; s.MinVersion != "1.3" || !slices.Equal(s.ALPN, []string{"http/1.0"}) || len(s.Ciphers) != 1 ||
		s.ClientAuth != "optional" || s.ClientCertHeaderPrefix != "X-Mtls-" {
		t.Errorf("chosen values changed: %+v", s)
	}
	if r := raw[0].TLS; r.ALPN != nil || r.ClientAuth != ClientAuthRequired || r.ClientCertHeaderPrefix != "" {
		t.Errorf("tcp tls defaults: %+v", r)
	}
	if c.Frontends[0].Timeouts.HandshakeMs != DefaultHandshakeMs || c.Frontends[1].Timeouts.HandshakeMs != DefaultHandshakeMs ||
		c.Frontends[2].Timeouts.HandshakeMs != 0 {
		t.Errorf("handshake_ms: %d %d %d", c.Frontends[0].Timeouts.HandshakeMs, c.Frontends[1].Timeouts.HandshakeMs, c.Frontends[2].Timeouts.HandshakeMs)
	}
	if c.Tuning.TLS.MaxHandshakes != DefaultMaxHandshakes || c.Tuning.TLS.TicketRotationMs != DefaultTicketRotationMs {
		t.Errorf("tuning.tls: %+v", c.Tuning.TLS)
	}
}

// TestDefaultCiphersAreSecureAEAD: the default list names only suites Go
// deems secure, with ECDHE and an AEAD (GCM or ChaCha20-Poly1305): no CBC.
func TestDefaultCiphersAreSecureAEAD(t *testing.T) {
	secure := map[uint16]bool{}
	for _, s := range tls.CipherSuites() {
		secure[s.ID] = true
	}
	for _, name := range DefaultCiphers() {
		id, ok := CipherSuiteID(name)
		if !ok || !secure[id] || !strings.HasPrefix(name, "TLS_ECDHE_") || strings.Contains(name, "CBC") ||
			!strings.Contains(name, "GCM") && !strings.Contains(name, "CHACHA20_POLY1305") {
			t.Errorf("default cipher %s is not a secure ECDHE AEAD suite", name)
		}
	}
}

func TestCertificateUsers(t *testing.T) {
	c := tlsConfig()
	c.Frontends[0].Binds[1].TLS = &BindTLS{Certificates: []string{"site-rsa", "site"}}
	got := CertificateUsers(c, "site")
	want := []CertificateUse{
		{Field: "/frontends/0/binds/0/tls/certificates/0", Object: "frontend/public/bind/b1"},
		{Field: "/frontends/0/binds/1/tls/certificates/1", Object: "frontend/public/bind/b2"},
		{Field: "/frontends/1/binds/0/tls/certificates/0", Object: "frontend/db_front/bind/b1"},
	}
	if !slices.Equal(got, want) {
		t.Fatalf("users of site:\n got %v\nwant %v", got, want)
	}
	if u := CertificateUsers(c, "nope"); u != nil {
		t.Fatalf("users of an unused name: %v", u)
	}
}

func TestTLSVersion(t *testing.T) {
	for s, want := range map[string]uint16{"1.0": tls.VersionTLS10, "1.1": tls.VersionTLS11, "1.2": tls.VersionTLS12, "1.3": tls.VersionTLS13} {
		if got, ok := TLSVersion(s); !ok || got != want {
			t.Errorf("TLSVersion(%q) = %x, %v", s, got, ok)
		}
	}
	if _, ok := TLSVersion("1.4"); ok {
		t.Error("1.4 accepted")
	}
}
