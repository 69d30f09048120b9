package tlsconf

import (
	"crypto/tls"
	"errors"
	"slices"
)

// ALPNACME is the ALPN protocol of the tls-alpn-01 challenge (RFC 8737).
const ALPNACME = "acme-tls/1"

// errNotIssued fails the handshakes of a bind whose certificates are all
// managed and not issued yet (the client gets an alert): such a bind
// answers acme-tls/1 only.
var errNotIssued = errors.New("tls: the bind's managed certificates are not issued yet")

// Challenges gives the certificate that answers a tls-alpn-01 challenge
// for a name (core/acme's Manager). Called on handshake goroutines: safe
// for concurrent use.
type Challenges interface {
	ChallengeCertificate(serverName string) (*tls.Certificate, bool)
}

// SetChallenges makes every configuration Server builds from now on
// answer tls-alpn-01 challenges with ch's certificates (call it before
// the first Apply).
func (cs *Certs) SetChallenges(ch Challenges) { cs.acme = ch }

// wireACME answers a ClientHello that offers acme-tls/1 (RFC 8737 §3:
// the validator offers only it) for a name with a pending challenge with
// a configuration of its own: that challenge's certificate and acme-tls/1
// as the only protocol. Any other hello goes on with tc, whose NextProtos
// (the bind's alpn, set or derived) never lists acme-tls/1: a client
// asking for it without a pending challenge fails the handshake.
func (cs *Certs) wireACME(tc *tls.Config) {
	ch := cs.acme
	if ch == nil {
		return
	}
	tc.GetConfigForClient = func(hello *tls.ClientHelloInfo) (*tls.Config, error) {
		if !slices.Contains(hello.SupportedProtos, ALPNACME) {
			return nil, nil
		}
		cert, ok := ch.ChallengeCertificate(hello.ServerName)
		if !ok {
			return nil, nil
		}
		return &tls.Config{
			MinVersion:   tls.VersionTLS12,
			Certificates: []tls.Certificate{*cert},
			NextProtos:   []string{ALPNACME},
		}, nil
	}
}
