package tlsconf

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// env is a config with uploaded certificates and a Certs reading their
// bundles from memory (as the store would from its directory).
type env struct {
	c     *config.Config
	certs *Certs
	files map[string][]byte
	loads atomic.Int32
}

func newEnv(t *testing.T) *env {
	e := &env{c: &config.Config{}, files: map[string][]byte{}}
	e.c.Normalize()
	e.certs = NewCerts(func(m config.Certificate) ([]byte, error) {
		e.loads.Add(1)
		b, ok := e.files[m.ChainSHA256]
		if !ok {
			return nil, errors.New("no such file")
		}
		return b, nil
	})
	return e
}

// add uploads cert as name, as POST /api/v1/certificates does.
func (e *env) add(t *testing.T, name string, cert *testutil.Cert) {
	t.Helper()
	meta, bundle, err := config.ParseCertificate(name, cert.ChainPEM, cert.KeyPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	e.files[meta.ChainSHA256] = bundle
	e.c.Certificates = append(e.c.Certificates, meta)
}

// bind is a normalized bind tls member of an http frontend.
func bind(names ...string) *config.BindTLS {
	f := config.Frontend{Name: "fe", Mode: config.ModeHTTP, Binds: []config.Bind{{Name: "b", TLS: &config.BindTLS{Certificates: names}}}}
	f.Normalize()
	return f.Binds[0].TLS
}

func (e *env) server(t *testing.T, b *config.BindTLS, keys *TicketKeys) *tls.Config {
	t.Helper()
	tc, err := e.certs.Server(e.c, b, keys)
	if err != nil {
		t.Fatal(err)
	}
	return tc
}

func newKeys(t *testing.T) *TicketKeys {
	t.Helper()
	tk, err := NewTicketKeys(t.TempDir(), time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tk.Close)
	return tk
}

// result of one handshake seen from both ends.
type result struct {
	client, server tls.ConnectionState
	cerr, serr     error
}

// handshake runs one TLS handshake over loopback TCP, then one byte from
// the server to the client (which makes the client read the TLS 1.3
// session tickets sent after the handshake). Not net.Pipe: it has no
// buffer, and a TLS 1.3 server may send its tickets while the client
// sends its Finished.
func handshake(t *testing.T, srv, cli *tls.Config) result {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	cc, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	_ = cc.SetDeadline(deadline)
	_ = sc.SetDeadline(deadline)
	s := tls.Server(sc, srv)
	c := tls.Client(cc, cli)
	done := make(chan error, 1)
	go func() {
		defer sc.Close()
		err := s.Handshake()
		if err == nil {
			_, err = s.Write([]byte{'x'})
		}
		done <- err
	}()
	var r result
	r.cerr = c.Handshake()
	if r.cerr == nil {
		var b [1]byte
		_, r.cerr = c.Read(b[:])
	}
	cc.Close()
	r.serr = <-done
	r.client = c.ConnectionState()
	r.server = s.ConnectionState()
	return r
}

// client trusts roots and asks for name.
func client(name string, roots ...*testutil.Cert) *tls.Config {
	pool := x509.NewCertPool()
	for _, r := range roots {
		pool.AddCert(r.X509)
	}
	return &tls.Config{ServerName: name, RootCAs: pool, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
}

func served(r result) *x509.Certificate {
	if len(r.client.PeerCertificates) == 0 {
		return nil
	}
	return r.client.PeerCertificates[0]
}

func TestServerChoosesCertificateBySNI(t *testing.T) {
	e := newEnv(t)
	other := testutil.SelfSigned(t, "other.test")
	wild := testutil.SelfSigned(t, "*.example.com")
	exact := testutil.SelfSigned(t, "a.example.com", "B.example.com")
	e.add(t, "other", other)
	e.add(t, "wild", wild)
	e.add(t, "exact", exact)
	srv := e.server(t, bind("other", "wild", "exact"), newKeys(t))
	tests := []struct {
		sni  string
		want *testutil.Cert
	}{
		{"a.example.com", exact},
		{"A.Example.COM", exact},   // case-insensitive
		{"a.example.com.", exact},  // trailing dot
		{"b.example.com", exact},   // SAN in upper case
		{"c.example.com", wild},    // wildcard: one label
		{"x.c.example.com", other}, // not two labels: the first
		{"example.com", other},     // nor the suffix itself
		{"unknown.test", other},
		{"", other}, // no SNI
	}
	for _, tt := range tests {
		t.Run(tt.sni, func(t *testing.T) {
			cli := &tls.Config{ServerName: tt.sni, InsecureSkipVerify: true}
			if tt.sni == "" {
				cli.ServerName = ""
			}
			r := handshake(t, srv, cli)
			if r.cerr != nil || r.serr != nil {
				t.Fatalf("handshake: client %v, server %v", r.cerr, r.serr)
			}
			if got := served(r); !got.Equal(tt.want.X509) {
				t.Fatalf("SNI %q served %v, want %v", tt.sni, got.DNSNames, tt.want.X509.DNSNames)
			}
		})
	}
	if n := e.loads.Load(); n != 3 {
		t.Fatalf("bundles read %d times, want 3", n)
	}
	// A second build reads nothing again; Retain forgets what the config
	// no longer lists.
	e.server(t, bind("exact"), newKeys(t))
	e.c.Certificates = e.c.Certificates[2:]
	e.certs.Retain(e.c)
	e.server(t, bind("exact"), newKeys(t))
	if n := e.loads.Load(); n != 3 || len(e.certs.cache) != 1 {
		t.Fatalf("after Retain: %d loads, %d cached", n, len(e.certs.cache))
	}
}

// TestServerChoosesKeyTypeTheClientSupports: an ECDSA and an RSA
// certificate for one name; a client that can only verify RSA gets the RSA
// one, any other the first (ECDSA).
func TestServerChoosesKeyTypeTheClientSupports(t *testing.T) {
	e := newEnv(t)
	ec := testutil.SelfSigned(t, "dual.test")
	rsa := testutil.NewCert(t, testutil.CertSpec{Names: []string{"dual.test"}, RSABits: 2048})
	e.add(t, "ec", ec)
	e.add(t, "rsa", rsa)
	srv := e.server(t, bind("ec", "rsa"), newKeys(t))
	// dual.test matches both SANs; nomatch.test falls back to the bind's
	// list: the choice by key type applies to both.
	for _, sni := range []string{"dual.test", "nomatch.test"} {
		def := client(sni, ec, rsa)
		def.InsecureSkipVerify = sni != "dual.test"
		r := handshake(t, srv, def)
		if r.cerr != nil || !served(r).Equal(ec.X509) {
			t.Fatalf("%s: default client: %v, served %v", sni, r.cerr, served(r))
		}
		rsaOnly := def.Clone()
		rsaOnly.MaxVersion = tls.VersionTLS12
		rsaOnly.CipherSuites = []uint16{tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256}
		r = handshake(t, srv, rsaOnly)
		if r.cerr != nil || !served(r).Equal(rsa.X509) {
			t.Fatalf("%s: RSA-only client: %v, served %v", sni, r.cerr, served(r))
		}
	}
}

func TestServerProtocolSettings(t *testing.T) {
	e := newEnv(t)
	cert := testutil.SelfSigned(t, "site.test")
	e.add(t, "site", cert)
	// alpn set: an unset one is derived by core/engine (config.OfferedALPN).
	bt := bind("site")
	bt.ALPN = []string{"http/1.1"}
	srv := e.server(t, bt, newKeys(t))

	r := handshake(t, srv, client("site.test", cert))
	if r.cerr != nil || r.client.Version != tls.VersionTLS13 || r.client.NegotiatedProtocol != "" {
		t.Fatalf("default client: %v, version %x, alpn %q", r.cerr, r.client.Version, r.client.NegotiatedProtocol)
	}
	alpn := client("site.test", cert)
	alpn.NextProtos = []string{"h2", "http/1.1"}
	if r = handshake(t, srv, alpn); r.cerr != nil || r.client.NegotiatedProtocol != "http/1.1" {
		t.Fatalf("h2+http/1.1 client: %v, alpn %q", r.cerr, r.client.NegotiatedProtocol)
	}
	alpn.NextProtos = []string{"h2"}
	if r = handshake(t, srv, alpn); r.cerr == nil || r.serr == nil {
		t.Fatal("an h2-only client got a connection to an http/1.1 bind")
	}
	old := client("site.test", cert)
	old.MaxVersion = tls.VersionTLS11
	old.MinVersion = tls.VersionTLS10
	if r = handshake(t, srv, old); r.serr == nil {
		t.Fatal("TLS 1.1 accepted with the default min_version")
	}
	cbc := client("site.test", cert)
	cbc.MaxVersion = tls.VersionTLS12
	cbc.CipherSuites = []uint16{tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA}
	if r = handshake(t, srv, cbc); r.serr == nil {
		t.Fatal("a CBC suite negotiated with the default ciphers")
	}
	// Chosen ones apply.
	b := bind("site")
	b.MinVersion = config.TLSVersion13
	if r = handshake(t, e.server(t, b, newKeys(t)), func() *tls.Config {
		c := client("site.test", cert)
		c.MaxVersion = tls.VersionTLS12
		return c
	}()); r.serr == nil {
		t.Fatal("TLS 1.2 accepted with min_version 1.3")
	}
	b = bind("site")
	b.Ciphers = []string{"TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA"}
	if r = handshake(t, e.server(t, b, newKeys(t)), cbc); r.cerr != nil || r.client.CipherSuite != tls.TLS_ECDHE_ECDSA_WITH_AES_128_CBC_SHA {
		t.Fatalf("chosen CBC suite: %v", r.cerr)
	}
}

func TestServerClientCertificates(t *testing.T) {
	e := newEnv(t)
	cert := testutil.SelfSigned(t, "site.test")
	e.add(t, "site", cert)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	otherCA := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"other ca"}})
	good := testutil.NewCert(t, testutil.CertSpec{Client: true, Names: []string{"alice"}, Parent: ca})
	bad := testutil.NewCert(t, testutil.CertSpec{Client: true, Names: []string{"mallory"}, Parent: otherCA})
	with := func(c *testutil.Cert) *tls.Config {
		cli := client("site.test", cert)
		if c != nil {
			// Sent whatever CAs the server names (a Go client given
			// Certificates would send none the server does not name).
			tc := c.TLS()
			cli.GetClientCertificate = func(*tls.CertificateRequestInfo) (*tls.Certificate, error) { return &tc, nil }
		}
		return cli
	}
	for _, auth := range []string{config.ClientAuthRequired, config.ClientAuthOptional} {
		t.Run(auth, func(t *testing.T) {
			b := bind("site")
			b.ClientCA, b.ClientAuth = ca.CertPEM, auth
			srv := e.server(t, b, newKeys(t))
			r := handshake(t, srv, with(good))
			if r.serr != nil || len(r.server.VerifiedChains) != 1 || r.server.PeerCertificates[0].Subject.CommonName != "alice" {
				t.Fatalf("good client certificate: %v, chains %d", r.serr, len(r.server.VerifiedChains))
			}
			if r = handshake(t, srv, with(bad)); r.serr == nil {
				t.Fatal("a certificate of another CA accepted")
			}
			r = handshake(t, srv, with(nil))
			if auth == config.ClientAuthRequired && r.serr == nil {
				t.Fatal("no client certificate accepted with client_auth required")
			}
			if auth == config.ClientAuthOptional && (r.serr != nil || len(r.server.PeerCertificates) != 0) {
				t.Fatalf("no client certificate with client_auth optional: %v", r.serr)
			}
		})
	}
}

func TestServerRefusesWhatValidateRefuses(t *testing.T) {
	e := newEnv(t)
	e.add(t, "site", testutil.SelfSigned(t, "site.test"))
	keys := newKeys(t)
	for name, b := range map[string]*config.BindTLS{
		"no certificate":      bind(),
		"unknown certificate": bind("nope"),
		"bad version":         func() *config.BindTLS { b := bind("site"); b.MinVersion = "2.0"; return b }(),
		"bad cipher":          func() *config.BindTLS { b := bind("site"); b.Ciphers = []string{"RC4"}; return b }(),
		"bad client_ca":       func() *config.BindTLS { b := bind("site"); b.ClientCA = "x"; return b }(),
	} {
		if _, err := e.certs.Server(e.c, b, keys); err == nil {
			t.Errorf("%s: built", name)
		}
	}
	delete(e.files, e.c.Certificates[0].ChainSHA256)
	e.certs.Retain(&config.Config{}) // forget the parsed bundle
	if _, err := e.certs.Server(e.c, bind("site"), keys); err == nil {
		t.Error("built without the certificate's file")
	}
}

// TestChooseDoesNotAllocate: picking a certificate costs map lookups only.
func TestChooseDoesNotAllocate(t *testing.T) {
	e := newEnv(t)
	e.add(t, "wild", testutil.SelfSigned(t, "*.example.com"))
	e.add(t, "exact", testutil.SelfSigned(t, "a.example.com"))
	cert, _ := e.certs.certificate(e.c.Certificates[0])
	cert2, _ := e.certs.certificate(e.c.Certificates[1])
	ch := newChooser([]*tls.Certificate{cert, cert2})
	hello := &tls.ClientHelloInfo{ServerName: "b.example.com"}
	if n := testing.AllocsPerRun(100, func() { _, _ = ch.choose(hello) }); n != 0 {
		t.Fatalf("choose allocates %v times", n)
	}
	hello.ServerName = "a.example.com"
	if c, _ := ch.choose(hello); !bytes.Equal(c.Certificate[0], cert2.Certificate[0]) {
		t.Fatal("exact name not preferred to the wildcard listed first")
	}
}
