package tlsconf

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"strings"
	"sync"

	"github.com/spliced-proxy/spliced/core/config"
)

// Certs parses and caches certificate bundles by chain_sha256 (safe for
// concurrent use). A bundle's file never changes content (it is named by
// the hash of its chain), so an entry never goes stale; Retain drops the
// entries a config no longer names.
type Certs struct {
	load func(config.Certificate) ([]byte, error)
	// acme answers tls-alpn-01 challenges (acme.go); nil: none.
	acme Challenges

	mu    sync.Mutex
	cache map[string]*tls.Certificate // by chain_sha256
}

// NewCerts returns a cache that reads bundles with load: (*config.Store).
// CertificateBundle, the PEM chain followed by the key.
func NewCerts(load func(config.Certificate) ([]byte, error)) *Certs {
	return &Certs{load: load, cache: map[string]*tls.Certificate{}}
}

// certificate returns the parsed bundle of meta, reading it once.
func (cs *Certs) certificate(meta config.Certificate) (*tls.Certificate, error) {
	cs.mu.Lock()
	defer cs.mu.Unlock()
	if c, ok := cs.cache[meta.ChainSHA256]; ok {
		return c, nil
	}
	bundle, err := cs.load(meta)
	if err != nil {
		return nil, fmt.Errorf("certificate %q: %w", meta.Name, err)
	}
	// The bundle holds the CERTIFICATE blocks and the key's block: each
	// half of X509KeyPair skips the blocks of the other.
	c, err := tls.X509KeyPair(bundle, bundle)
	if err != nil {
		return nil, fmt.Errorf("certificate %q (%s.pem): %w", meta.Name, meta.ChainSHA256, err)
	}
	if c.Leaf == nil {
		if c.Leaf, err = x509.ParseCertificate(c.Certificate[0]); err != nil {
			return nil, fmt.Errorf("certificate %q: %w", meta.Name, err)
		}
	}
	cs.cache[meta.ChainSHA256] = &c
	return &c, nil
}

// Retain drops the cached bundles that c's certificates do not name (call
// it after building the configurations of a new config).
func (cs *Certs) Retain(c *config.Config) {
	keep := make(map[string]bool, len(c.Certificates))
	for i := range c.Certificates {
		keep[c.Certificates[i].ChainSHA256] = true
	}
	cs.mu.Lock()
	defer cs.mu.Unlock()
	for h := range cs.cache {
		if !keep[h] {
			delete(cs.cache, h)
		}
	}
}

// Server builds the server-side *tls.Config of one bind (b, its tls
// member) of the normalized, validated c, with session tickets encrypted
// by keys (see the package doc; not nil: one TicketKeys per process). It also sets the rotation period of keys
// to c's tuning.tls.ticket_rotation_ms, so that a change of it applies
// with the config. Errors: a certificate c does not list, or whose bundle
// cannot be read or parsed; a bad cipher, version or client_ca (which
// Validate refuses).
func (cs *Certs) Server(c *config.Config, b *config.BindTLS, keys *TicketKeys) (*tls.Config, error) {
	if len(b.Certificates) == 0 {
		return nil, fmt.Errorf("tls: no certificate: %w", config.ErrInvalid)
	}
	ctx := sha256.New()
	certs := make([]*tls.Certificate, 0, len(b.Certificates))
	for _, name := range b.Certificates {
		i := c.FindCertificate(name)
		if i < 0 {
			return nil, fmt.Errorf("tls: certificate %q: %w", name, config.ErrNotFound)
		}
		if !c.Certificates[i].Issued() {
			continue // managed, not issued yet: acme-tls/1 only (acme.go)
		}
		cert, err := cs.certificate(c.Certificates[i])
		if err != nil {
			return nil, err
		}
		certs = append(certs, cert)
		ctx.Write([]byte(c.Certificates[i].ChainSHA256))
	}
	minVersion, ok := config.TLSVersion(b.MinVersion)
	if !ok {
		return nil, fmt.Errorf("tls: min_version %q: %w", b.MinVersion, config.ErrInvalid)
	}
	suites := make([]uint16, 0, len(b.Ciphers))
	for _, name := range b.Ciphers {
		id, ok := config.CipherSuiteID(name)
		if !ok {
			return nil, fmt.Errorf("tls: cipher %q: %w", name, config.ErrInvalid)
		}
		suites = append(suites, id)
	}
	tc := &tls.Config{
		MinVersion:     minVersion,
		CipherSuites:   suites,
		NextProtos:     append([]string(nil), b.ALPN...),
		GetCertificate: newChooser(certs).choose,
	}
	fmt.Fprintf(ctx, "\x00%s\x00%s", b.ClientAuth, b.ClientCA)
	if b.ClientCA != "" {
		cas, msg := config.ParseClientCA(b.ClientCA)
		if msg != "" {
			return nil, fmt.Errorf("tls: client_ca: %s: %w", msg, config.ErrInvalid)
		}
		tc.ClientCAs = x509.NewCertPool()
		for _, ca := range cas {
			tc.ClientCAs.AddCert(ca)
		}
		tc.ClientAuth = tls.RequireAndVerifyClientCert
		if b.ClientAuth == config.ClientAuthOptional {
			tc.ClientAuth = tls.VerifyClientCertIfGiven
		}
	}
	keys.SetRotation(c.Tuning.TLS.TicketRotationMs)
	keys.wire(tc, ctx.Sum(nil))
	cs.wireACME(tc)
	return tc, nil
}

// chooser picks a bind's certificate for a ClientHello (package doc). Its
// maps are built once and only read afterwards.
type chooser struct {
	exact    map[string][]*tls.Certificate // lower-case DNS SAN
	wildcard map[string][]*tls.Certificate // "example.com" for SAN "*.example.com"
	all      []*tls.Certificate
}

func newChooser(certs []*tls.Certificate) *chooser {
	ch := &chooser{exact: map[string][]*tls.Certificate{}, wildcard: map[string][]*tls.Certificate{}, all: certs}
	for _, c := range certs {
		for _, san := range c.Leaf.DNSNames {
			san = strings.TrimSuffix(strings.ToLower(san), ".")
			if suffix, ok := strings.CutPrefix(san, "*."); ok {
				ch.wildcard[suffix] = appendOnce(ch.wildcard[suffix], c)
			} else {
				ch.exact[san] = appendOnce(ch.exact[san], c)
			}
		}
	}
	return ch
}

// appendOnce keeps one entry per certificate (a SAN listed twice).
func appendOnce(list []*tls.Certificate, c *tls.Certificate) []*tls.Certificate {
	for _, e := range list {
		if e == c {
			return list
		}
	}
	return append(list, c)
}

func (ch *chooser) choose(hello *tls.ClientHelloInfo) (*tls.Certificate, error) {
	if len(ch.all) == 0 {
		return nil, errNotIssued
	}
	name := strings.TrimSuffix(hello.ServerName, ".")
	if hasUpper(name) {
		name = strings.ToLower(name) // rare: clients send SNI in lower case
	}
	if name != "" {
		if list := ch.exact[name]; len(list) > 0 {
			return supported(hello, list), nil
		}
		if _, parent, ok := strings.Cut(name, "."); ok {
			if list := ch.wildcard[parent]; len(list) > 0 {
				return supported(hello, list), nil
			}
		}
	}
	return supportedAnyName(hello, ch.all), nil
}

// supported returns the first certificate of list the client supports, or
// the first of list.
func supported(hello *tls.ClientHelloInfo, list []*tls.Certificate) *tls.Certificate {
	if len(list) > 1 {
		for _, c := range list {
			if hello.SupportsCertificate(c) == nil {
				return c
			}
		}
	}
	return list[0]
}

// supportedAnyName is supported for the bind's fallback list, whose
// certificates do not hold the client's name: SupportsCertificate would
// refuse them all for it, so the name is left out of the check (a copy
// of the hello, the one allocation of a handshake choosing among several
// certificates for a name none of them holds).
func supportedAnyName(hello *tls.ClientHelloInfo, list []*tls.Certificate) *tls.Certificate {
	if len(list) > 1 && hello.ServerName != "" {
		h := *hello
		h.ServerName = ""
		hello = &h
	}
	return supported(hello, list)
}

func hasUpper(s string) bool {
	for i := 0; i < len(s); i++ {
		if 'A' <= s[i] && s[i] <= 'Z' {
			return true
		}
	}
	return false
}
