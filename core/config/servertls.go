package config

import (
	"bytes"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
)

// Values of ServerTLS.Verify.
const (
	VerifyRequired = "required" // the default
	VerifyNone     = "none"
)

// MaxCAPEM bounds a server's ca_pem: a few private roots and
// intermediates, not a system bundle (verify with no ca_pem uses the
// system roots).
const MaxCAPEM = 64 << 10

// ServerTLS makes the proxy a TLS client of its server (an https origin),
// in tcp and http mode alike; the bytes between client and proxy are not
// affected.
//
//   - Verify "required" (the default) checks the server's certificate
//     chain against CAPEM, or against the system roots
//     (x509.SystemCertPool) when CAPEM is empty, and the name it is
//     issued to: SNI when set, else the server's address when it is a host
//     name; with an IP address and no SNI, the certificate must hold that
//     IP address in its subject alternative names.
//   - Verify "none" checks nothing: the traffic is encrypted, the server is
//     not authenticated (a self-signed origin on a trusted network).
//
// SNI is the server name sent in the ClientHello; when empty, the address
// is sent if it is a host name, and none for an IP address. A handshake
// that fails (refused certificate, no common version or cipher) counts as
// a failed connect: the request goes to another server as for a refused
// connection. A change of a server's tls makes it a new server, as an
// address change does (its pooled connections are closed, its counters
// start again).
type ServerTLS struct {
	Verify string `json:"verify" validate:"omitempty,oneof=required none"`
	// CAPEM is one or more PEM CERTIFICATE blocks (roots or intermediates
	// the server's chain must lead to), at most MaxCAPEM bytes; verify
	// "required" only.
	CAPEM string `json:"ca_pem,omitempty"`
	// SNI is a host name (RFC 1123).
	SNI string `json:"sni,omitempty"`
}

// serverTLS checks a server's tls beyond its field rules; ptr points at it.
func (p *problems) serverTLS(ptr string, t *ServerTLS) {
	if t.SNI != "" && !ValidHostName(t.SNI) {
		p.addf(ptr+"/sni", CodeFormat, "sni %q must be an RFC 1123 host name", truncateString(t.SNI, 80))
	}
	if t.CAPEM == "" {
		return
	}
	if t.Verify == VerifyNone {
		p.add(ptr+"/ca_pem", CodeModeMismatch, "ca_pem is only used with verify \"required\"")
		return
	}
	if _, err := ParseCAPEM(t.CAPEM); err != nil {
		code := CodeBadPEM
		if len(t.CAPEM) > MaxCAPEM {
			code = CodeOutOfRange
		}
		p.add(ptr+"/ca_pem", code, err.Error())
	}
}

// ParseCAPEM parses a ca_pem: at most MaxCAPEM bytes of one or more PEM
// CERTIFICATE blocks, each an X.509 certificate, and nothing else (text
// before a block is skipped, as pem.Decode does). The pool holds them all.
func ParseCAPEM(s string) (*x509.CertPool, error) {
	if len(s) > MaxCAPEM {
		return nil, fmt.Errorf("ca_pem is %d bytes; at most %d are accepted", len(s), MaxCAPEM)
	}
	pool := x509.NewCertPool()
	rest := bytes.TrimSpace([]byte(s))
	n := 0
	for len(rest) > 0 {
		var b *pem.Block
		b, rest = pem.Decode(rest)
		if b == nil {
			return nil, errors.New("ca_pem holds data that is not a PEM block")
		}
		rest = bytes.TrimSpace(rest)
		if b.Type != "CERTIFICATE" {
			return nil, fmt.Errorf("ca_pem holds a %q block; only CERTIFICATE blocks are accepted", truncateString(b.Type, 40))
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			return nil, fmt.Errorf("ca_pem certificate %d does not parse: %v", n, err)
		}
		pool.AddCert(c)
		n++
	}
	if n == 0 {
		return nil, errors.New("ca_pem must hold at least one PEM CERTIFICATE block")
	}
	return pool, nil
}
