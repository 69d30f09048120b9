package config

import (
	"slices"
	"testing"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestValidateClientCertPrefixSparesFramingFields: the proxy drops every
// field of the client whose name starts with client_cert_header_prefix
// (any case, '_' for '-'), so a prefix that starts a field it frames,
// routes or upgrades with is refused: with "Content-", the client's
// Content-Length was dropped while its body was forwarded, and the server
// read that body as a next request (smuggled past the proxy's routing).
func TestValidateClientCertPrefixSparesFramingFields(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	const field = "/frontends/0/binds/0/tls/client_cert_header_prefix"
	for _, tt := range []struct {
		prefix string
		bad    bool
	}{
		{"Content-", true}, {"content-l", true}, {"Content_Length", true}, {"Transfer-", true},
		{"Host", true}, {"Upgrade", true}, {"Expect", true},
		{"X-Client-Cert-", false}, {"X-SSL-", false}, {"Ssl-Client-", false}, {"Content-Type-Cert-", false},
	} {
		c := tlsConfig()
		c.Frontends[0].Binds[0].TLS.ClientCA = ca.CertPEM
		c.Frontends[0].Binds[0].TLS.ClientCertHeaderPrefix = tt.prefix
		c.Normalize()
		var wantErr []want
		if tt.bad {
			wantErr = []want{{field, CodeInvalid}}
		}
		if got := fieldErrors(t, Validate(c, fourCPUs)); !slices.Equal(got, wantErr) {
			t.Errorf("prefix %q: problems %v, want %v", tt.prefix, got, wantErr)
		}
	}
}

// TestValidateClientCertPrefixSparesCommonFields: a prefix that equals or
// starts (any case, '_' for '-') a standard or common field a proxy passes
// is refused, and so is one shorter than MinClientCertPrefixLen: "Cookie"
// removed every client's Cookie on the bind, "X-Forwarded-" every
// X-Forwarded-For, "X" every X-* field. Prefixes that start no such field
// stay valid, the default first.
func TestValidateClientCertPrefixSparesCommonFields(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	const field = "/frontends/0/binds/0/tls/client_cert_header_prefix"
	for _, tt := range []struct {
		prefix string
		code   string // "" for valid
	}{
		{"Cookie", CodeInvalid}, {"cookie", CodeInvalid}, {"Cook", CodeInvalid},
		{"Authorization", CodeInvalid}, {"Proxy-Auth", CodeInvalid},
		{"Connection", CodeInvalid}, {"Te", CodeFormat}, {"TE", CodeFormat}, {"Trailer", CodeInvalid},
		{"Transfer-Encoding", CodeInvalid}, {"Content-Type", CodeInvalid}, {"Content_", CodeInvalid},
		{"X", CodeFormat}, {"X-F", CodeFormat}, {"X-Forwarded-", CodeInvalid}, {"x_forwarded_", CodeInvalid},
		{"X-Forwarded-Proto", CodeInvalid}, {"X-Real-", CodeInvalid}, {"X-Real-IP", CodeInvalid},
		{"Forwarded", CodeInvalid}, {"Forw", CodeInvalid}, {"Via", CodeFormat}, {"Accept", CodeInvalid},
		{"Accept-", CodeInvalid}, {"User-Agent", CodeInvalid}, {"User", CodeInvalid},
		{"Keep-Alive", CodeInvalid}, {"Sec-WebSocket-", CodeInvalid}, {"Origin", CodeInvalid},
		{"If-None", CodeInvalid}, {"Range", CodeInvalid}, {"Referer", CodeInvalid},
		{"X-Client-Cert-", ""}, {"X-SSL-", ""}, {"Ssl-Client-", ""}, {"X-Mtls-", ""},
		{"Content-Type-Cert-", ""}, {"X-Forwarded-Client-Cert-", ""}, {"Cert-", ""},
	} {
		c := tlsConfig()
		c.Frontends[0].Binds[0].TLS.ClientCA = ca.CertPEM
		c.Frontends[0].Binds[0].TLS.ClientCertHeaderPrefix = tt.prefix
		c.Normalize()
		var wantErr []want
		if tt.code != "" {
			wantErr = []want{{field, tt.code}}
		}
		if got := fieldErrors(t, Validate(c, fourCPUs)); !slices.Equal(got, wantErr) {
			t.Errorf("prefix %q: problems %v, want %v", tt.prefix, got, wantErr)
		}
	}
}
