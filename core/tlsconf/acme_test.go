package tlsconf

import (
	"crypto/tls"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// fakeChallenges holds tls-alpn-01 certificates by name.
type fakeChallenges map[string]*tls.Certificate

func (f fakeChallenges) ChallengeCertificate(name string) (*tls.Certificate, bool) {
	c, ok := f[name]
	return c, ok
}

// managed adds a managed certificate not issued yet.
func (e *env) managed(name string) {
	e.c.Certificates = append(e.c.Certificates, config.Certificate{Name: name, SANs: []string{},
		ACME: &config.CertificateACME{Domains: []string{"example.com"}}})
}

// TestACMEChallengeAnsweredBeforeIssuance: a bind whose only certificate
// is managed and not issued answers acme-tls/1 with the challenge
// certificate for a name with a pending challenge, refuses every other
// handshake, and never negotiates acme-tls/1 without a pending challenge.
func TestACMEChallengeAnsweredBeforeIssuance(t *testing.T) {
	e := newEnv(t)
	chal := testutil.SelfSigned(t, "example.com").TLS()
	e.certs.SetChallenges(fakeChallenges{"example.com": &chal})
	e.managed("site")
	b := bind("site")
	b.ALPN = []string{"http/1.1"}
	srv := e.server(t, b, newKeys(t))

	r := handshake(t, srv, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true, NextProtos: []string{ALPNACME}})
	if r.cerr != nil || r.client.NegotiatedProtocol != ALPNACME || !r.client.PeerCertificates[0].Equal(chal.Leaf) {
		t.Fatalf("acme-tls/1 for a pending challenge: err %v, proto %q", r.cerr, r.client.NegotiatedProtocol)
	}
	r = handshake(t, srv, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if r.cerr == nil || r.serr == nil || !strings.Contains(r.serr.Error(), "not issued") {
		t.Fatalf("an ordinary handshake before issuance: client %v, server %v", r.cerr, r.serr)
	}
	r = handshake(t, srv, &tls.Config{ServerName: "other.example", InsecureSkipVerify: true, NextProtos: []string{ALPNACME}})
	if r.cerr == nil {
		t.Fatalf("acme-tls/1 negotiated for a name without a challenge (%q)", r.client.NegotiatedProtocol)
	}
}

// TestACMEIssuedCertificateServedBesideChallenges: once issued (here: an
// uploaded certificate beside the managed one), ordinary handshakes get
// it and acme-tls/1 still gets the challenge certificate.
func TestACMEIssuedCertificateServedBesideChallenges(t *testing.T) {
	e := newEnv(t)
	chal := testutil.SelfSigned(t, "example.com").TLS()
	e.certs.SetChallenges(fakeChallenges{"example.com": &chal})
	e.managed("site")
	site := testutil.SelfSigned(t, "example.com")
	e.add(t, "up", site)
	srv := e.server(t, bind("site", "up"), newKeys(t))
	r := handshake(t, srv, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}})
	if r.cerr != nil || !r.client.PeerCertificates[0].Equal(site.X509) {
		t.Fatalf("ordinary handshake: %v", r.cerr)
	}
	r = handshake(t, srv, &tls.Config{ServerName: "example.com", InsecureSkipVerify: true, NextProtos: []string{ALPNACME}})
	if r.cerr != nil || !r.client.PeerCertificates[0].Equal(chal.Leaf) {
		t.Fatalf("acme-tls/1: %v", r.cerr)
	}
}
