package tlsconf

import (
	"crypto/tls"
	"errors"

	"github.com/spliced-proxy/spliced/core/config"
)

// sessionCacheSize is the size of a server's client session cache. Every
// connection to one server uses the same cache key (the server name), so
// the cache holds one session per server; a few slots spare it nothing.
const sessionCacheSize = 4

// Client builds the *tls.Config the proxy uses as a TLS client of server
// s (s.TLS set, as config.Normalize and Validate left it). The engine
// builds it once per server object, not per connection: it is immutable
// once returned and shared by every loop and handshake goroutine, and its
// session cache (tls.NewLRUClientSessionCache) lets every reconnect to the
// server resume the last session (a TLS 1.3 PSK or a TLS 1.2 ticket)
// instead of a full handshake.
//
//   - verify "required": the chain must lead to a certificate of ca_pem,
//     or to the system roots when ca_pem is empty (RootCAs nil: crypto/tls
//     loads x509.SystemCertPool), and the certificate must be issued to
//     ServerName: sni when set, else the server's address — a host name,
//     or an IP address that must then be among the certificate's IP SANs.
//     crypto/tls never sends an IP address as SNI, so a server given by IP
//     without sni receives no server name.
//   - verify "none": InsecureSkipVerify, the only place it is set.
//
// TLS 1.2 is the minimum; renegotiation stays refused (crypto/tls's
// default).
//
// A server with proto h2 is offered "h2" alone by ALPN (RFC 9113 §3.2: h2
// over TLS is chosen by ALPN only), and the handshake fails with
// ErrServerNotH2 unless the server selected it: a server that ignores
// ALPN would otherwise get HTTP/2 frames it cannot read, a failure seen
// only at the first request. A server that knows ALPN but not h2 fails
// the handshake itself (its no_application_protocol alert). The check
// runs on resumed sessions too (VerifyConnection is called for them).
// Other servers get no ALPN, as before: HTTP/1.1 is what a TLS server
// assumes without one.
func Client(s *config.Server) (*tls.Config, error) {
	t := s.TLS
	if t == nil {
		return nil, errors.New("tlsconf: server " + s.Name + " has no tls")
	}
	c := &tls.Config{
		MinVersion:         tls.VersionTLS12,
		ClientSessionCache: tls.NewLRUClientSessionCache(sessionCacheSize),
		ServerName:         t.SNI,
	}
	if c.ServerName == "" {
		c.ServerName = s.Address
	}
	switch t.Verify {
	case config.VerifyNone:
		c.InsecureSkipVerify = true
	case config.VerifyRequired:
		if t.CAPEM != "" {
			pool, err := config.ParseCAPEM(t.CAPEM)
			if err != nil {
				return nil, errors.New("tlsconf: server " + s.Name + ": " + err.Error())
			}
			c.RootCAs = pool
		}
	default:
		return nil, errors.New("tlsconf: server " + s.Name + ": verify " + t.Verify + " (config.Normalize sets it)")
	}
	if s.Proto == config.ProtoH2 {
		c.NextProtos = []string{"h2"}
		c.VerifyConnection = requireH2
	}
	return c, nil
}

// ErrServerNotH2 fails the TLS handshake with a server of proto h2 that
// did not select "h2" by ALPN.
var ErrServerNotH2 = errors.New("tlsconf: server did not select h2 by ALPN (proto h2 needs it)")

// requireH2 is the VerifyConnection of a proto h2 server's tls.Config.
func requireH2(cs tls.ConnectionState) error {
	if cs.NegotiatedProtocol != "h2" {
		return ErrServerNotH2
	}
	return nil
}
