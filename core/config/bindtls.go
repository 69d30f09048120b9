package config

import (
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"slices"
	"strconv"
	"strings"
)

// Limits of a bind's tls member.
const (
	MaxClientCABytes       = 64 << 10 // client_ca: a few dozen CA certificates; more is a bundle of public roots, which mTLS does not want
	MaxALPNProtocols       = 16       // alpn entries; real lists have 1 to 3
	MaxClientCertPrefixLen = 64       // client_cert_header_prefix, so <prefix>Verified stays a short header name
	MinClientCertPrefixLen = 4        // client_cert_header_prefix: a shorter one ("X", "Te") starts too many fields clients send
)

// CodeBadPEM is shared with certificate uploads: client_ca that is not PEM
// CERTIFICATE blocks.

// TLSVersion returns crypto/tls's constant for a min_version value.
func TLSVersion(v string) (uint16, bool) {
	switch v {
	case TLSVersion10:
		return tls.VersionTLS10, true
	case TLSVersion11:
		return tls.VersionTLS11, true
	case TLSVersion12:
		return tls.VersionTLS12, true
	case TLSVersion13:
		return tls.VersionTLS13, true
	}
	return 0, false
}

// CipherSuiteID returns the id of a TLS 1.0-1.2 cipher suite named as Go
// names it (tls.CipherSuites and tls.InsecureCipherSuites). TLS 1.3 suites
// are not found: Go does not let them be configured.
func CipherSuiteID(name string) (uint16, bool) {
	for _, list := range [2][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, s := range list {
			if s.Name == name && !tls13Only(s) {
				return s.ID, true
			}
		}
	}
	return 0, false
}

func tls13Only(s *tls.CipherSuite) bool {
	return len(s.SupportedVersions) == 1 && s.SupportedVersions[0] == tls.VersionTLS13
}

// ParseClientCA parses a bind's client_ca: one or more PEM CERTIFICATE
// blocks, text before each block ignored (comments), nothing but white
// space after the last one. The error says what is wrong, for a
// FieldError message.
func ParseClientCA(s string) ([]*x509.Certificate, string) {
	rest := []byte(s)
	var out []*x509.Certificate
	for {
		var blk *pem.Block
		blk, rest = pem.Decode(rest)
		if blk == nil {
			break
		}
		if blk.Type != "CERTIFICATE" {
			return nil, "block " + strconv.Itoa(len(out)) + " is a " + strconv.Quote(truncateString(blk.Type, 40)) + " block; client_ca holds CERTIFICATE blocks only"
		}
		c, err := x509.ParseCertificate(blk.Bytes)
		if err != nil {
			return nil, "certificate " + strconv.Itoa(len(out)) + " does not parse: " + err.Error()
		}
		out = append(out, c)
	}
	switch {
	case len(out) == 0:
		return nil, "client_ca holds no PEM CERTIFICATE block"
	case len(bytes.TrimSpace(rest)) > 0:
		return nil, "text after certificate " + strconv.Itoa(len(out)-1) + " is not a complete PEM CERTIFICATE block (truncated?)"
	}
	return out, ""
}

// bindTLS checks the tls member of bind bp of frontend f.
func (v *validation) bindTLS(bp string, f *Frontend, t *BindTLS) {
	tp := bp + "/tls"
	if f.Mode == ModeTCP && len(f.Routes) > 0 {
		v.p.add(tp, CodeModeMismatch, "this tcp frontend routes on SNI, which forwards TLS without terminating it; a bind with tls cannot be on it")
	}
	v.bindTLSCertificates(tp, t.Certificates)
	v.bindTLSALPN(tp, f, t.ALPN)
	seen := map[string]int{}
	for k, name := range t.Ciphers {
		cp := tp + "/ciphers/" + strconv.Itoa(k)
		if first, dup := seen[name]; dup {
			v.p.addf(cp, CodeDuplicate, "cipher %q is already listed at %s/ciphers/%d", truncateString(name, 80), tp, first)
			continue
		}
		seen[name] = k
		if _, ok := CipherSuiteID(name); !ok {
			v.p.addf(cp, CodeOneOf, "%q is not a TLS 1.0-1.2 cipher suite name as Go names it (TLS 1.3 suites are not configurable); e.g. %s",
				truncateString(name, 80), strings.Join(DefaultCiphers(), ", "))
		}
	}
	v.bindTLSOldVersions(tp, t)
	if t.ClientCA != "" {
		if len(t.ClientCA) > MaxClientCABytes {
			v.p.addf(tp+"/client_ca", CodeOutOfRange, "client_ca must be at most %d bytes, not %d", MaxClientCABytes, len(t.ClientCA))
		} else if _, msg := ParseClientCA(t.ClientCA); msg != "" {
			v.p.add(tp+"/client_ca", CodeBadPEM, msg)
		}
	} else if t.ClientAuth != "" {
		v.p.add(tp+"/client_auth", CodeInvalid, "client_auth needs client_ca (the CA certificates that verify client certificates)")
	}
	if pfx := t.ClientCertHeaderPrefix; pfx != "" {
		switch {
		case f.Mode != ModeHTTP:
			v.p.add(tp+"/client_cert_header_prefix", CodeModeMismatch, "client_cert_header_prefix needs mode http: a tcp frontend adds no header")
		case t.ClientCA == "":
			v.p.add(tp+"/client_cert_header_prefix", CodeInvalid, "client_cert_header_prefix needs client_ca")
		case len(pfx) < MinClientCertPrefixLen || len(pfx) > MaxClientCertPrefixLen || !ValidMethod(pfx):
			v.p.addf(tp+"/client_cert_header_prefix", CodeFormat, "client_cert_header_prefix must be %d-%d HTTP token characters", MinClientCertPrefixLen, MaxClientCertPrefixLen)
		default:
			if f := passedFieldWithPrefix(pfx); f != "" {
				v.p.addf(tp+"/client_cert_header_prefix", CodeInvalid,
					"client_cert_header_prefix %q would remove the client's %s field too (the client's fields with the prefix are dropped)", pfx, f)
			}
		}
	}
}

func (v *validation) bindTLSCertificates(tp string, names []string) {
	if len(names) == 0 {
		v.p.add(tp+"/certificates", CodeRequired, "a bind with tls needs at least one certificate (a name of /certificates)")
		return
	}
	seen := map[string]int{}
	for k, name := range names {
		cp := tp + "/certificates/" + strconv.Itoa(k)
		if first, dup := seen[name]; dup {
			v.p.addf(cp, CodeDuplicate, "certificate %q is already listed at %s/certificates/%d", truncateString(name, 80), tp, first)
			continue
		}
		seen[name] = k
		if v.c.FindCertificate(name) < 0 {
			v.p.addf(cp, CodeUnknownReference, "certificate %q does not exist (upload it with POST /api/v1/certificates)", truncateString(name, 80))
		}
	}
}

// bindTLSALPN checks a bind's alpn: in http mode a protocol of a version
// the frontend speaks (h2 for "2", http/1.1 and http/1.0 for "1.1").
func (v *validation) bindTLSALPN(tp string, f *Frontend, protos []string) {
	mode := f.Mode
	if len(protos) > MaxALPNProtocols {
		v.p.addf(tp+"/alpn", CodeOutOfRange, "alpn lists at most %d protocols", MaxALPNProtocols)
		return
	}
	seen := map[string]int{}
	for k, proto := range protos {
		ap := tp + "/alpn/" + strconv.Itoa(k)
		switch {
		case len(proto) == 0 || len(proto) > 255:
			v.p.add(ap, CodeOutOfRange, "an ALPN protocol name is 1 to 255 bytes (RFC 7301)")
		case mode == ModeHTTP && proto != ALPNH2 && proto != ALPNHTTP11 && proto != ALPNHTTP10:
			v.p.addf(ap, CodeOneOf, "an http frontend speaks h2, http/1.1 or http/1.0, not %q (any protocol may be offered in mode tcp)", truncateString(proto, 80))
		case mode == ModeHTTP && proto == ALPNH2 && !f.HTTP.SpeaksHTTP(HTTPVersion2):
			v.p.add(ap, CodeInvalid, `alpn offers h2 but the frontend's http.versions does not list "2"`)
		case mode == ModeHTTP && proto != ALPNH2 && !f.HTTP.SpeaksHTTP(HTTPVersion11):
			v.p.addf(ap, CodeInvalid, `alpn offers %s but the frontend's http.versions does not list "1.1"`, proto)
		default:
			if first, dup := seen[proto]; dup {
				v.p.addf(ap, CodeDuplicate, "protocol %q is already listed at %s/alpn/%d", truncateString(proto, 80), tp, first)
			} else {
				seen[proto] = k
			}
		}
	}
}

// bindTLSOldVersions refuses a min_version below 1.2 that no listed cipher
// can serve: AEAD suites (the default list) exist from TLS 1.2 on, so
// such a bind would still refuse every TLS 1.0/1.1 client, silently.
func (v *validation) bindTLSOldVersions(tp string, t *BindTLS) {
	minVer, ok := TLSVersion(t.MinVersion)
	if !ok || minVer >= tls.VersionTLS12 || len(t.Ciphers) == 0 {
		return
	}
	for _, list := range [2][]*tls.CipherSuite{tls.CipherSuites(), tls.InsecureCipherSuites()} {
		for _, s := range list {
			if slices.Contains(t.Ciphers, s.Name) && slices.Contains(s.SupportedVersions, minVer) {
				return
			}
		}
	}
	v.p.addf(tp+"/ciphers", CodeInvalid, "min_version %s needs a cipher usable in TLS %s (a CBC suite such as TLS_ECDHE_RSA_WITH_AES_128_CBC_SHA): the ciphers listed need TLS 1.2", t.MinVersion, t.MinVersion)
}

// passedFields are the request fields a client's prefix must not start:
// the client's fields whose name starts with client_cert_header_prefix are
// dropped on every request of the bind, so a prefix that starts one of
// these would strip it from every client. First those the proxy frames,
// routes or upgrades a request with (a dropped Content-Length whose body
// is forwarded makes the server read that body as a next request), then
// the hop-by-hop ones, then the standard and common end-to-end fields a
// proxy passes (a dropped Cookie or Authorization logs every client out, a
// dropped X-Forwarded-For hides the client chain). A family (Content-*,
// Accept*, X-Forwarded-*) is listed by its members: "Content-" starts
// Content-Length and is refused, "Content-Type-Cert-" starts none and is
// not.
var passedFields = []string{
	"Host", "Content-Length", "Transfer-Encoding", "Upgrade", "Expect",
	"Connection", "Keep-Alive", "Proxy-Connection", "TE", "Trailer",
	"Cookie", "Authorization", "Proxy-Authorization",
	"Content-Type", "Content-Encoding", "Content-Language", "Content-Location",
	"Content-Range", "Content-MD5", "Content-Disposition",
	"Forwarded", "X-Forwarded-For", "X-Forwarded-Proto", "X-Forwarded-Host",
	"X-Forwarded-Port", "X-Forwarded-Server", "X-Forwarded-Prefix", "X-Forwarded-Ssl",
	"X-Real-IP", "Via", "Max-Forwards",
	"Accept", "Accept-Encoding", "Accept-Language", "Accept-Charset", "Accept-Ranges",
	"User-Agent", "Referer", "Origin", "From", "Date", "Range",
	"If-Match", "If-None-Match", "If-Modified-Since", "If-Unmodified-Since", "If-Range",
	"Cache-Control", "Pragma", "Priority",
	"Sec-WebSocket-Key", "Sec-WebSocket-Version", "Sec-WebSocket-Protocol", "Sec-WebSocket-Extensions",
	"X-Request-ID", "X-Requested-With", "X-Correlation-ID", "X-CSRF-Token",
}

// passedFieldWithPrefix is the passed field whose name starts with pfx
// (ASCII case-insensitively, '_' and '-' alike, as the proxy strips), or "".
func passedFieldWithPrefix(pfx string) string {
	for _, f := range passedFields {
		if len(f) < len(pfx) {
			continue
		}
		match := true
		for i := 0; i < len(pfx) && match; i++ {
			a := pfx[i]
			if a == '_' {
				a = '-'
			}
			match = a == f[i] || 'A' <= a && a <= 'Z' && a+'a'-'A' == f[i] || 'a' <= a && a <= 'z' && a-('a'-'A') == f[i]
		}
		if match {
			return f
		}
	}
	return ""
}
