package config

import (
	"slices"
	"strconv"
)

// ALPN protocol ids (RFC 7301 registry) an http frontend speaks.
const (
	ALPNH2     = "h2"       // HTTP/2 over TLS (RFC 9113 §3.2)
	ALPNHTTP11 = "http/1.1" // HTTP/1.1
	ALPNHTTP10 = "http/1.0" // HTTP/1.0, answered by the HTTP/1.1 side
)

// SpeaksHTTP reports whether the http options list version v ("1.1" or
// "2"); nil options speak the defaults.
func (o *FrontendHTTPOpts) SpeaksHTTP(v string) bool {
	if o == nil {
		return slices.Contains(DefaultHTTPVersions(), v)
	}
	return slices.Contains(o.Versions, v)
}

// OfferedALPN is the ALPN list a TLS bind t of the normalized, valid
// frontend f offers, in preference order. h2 says whether the data plane
// speaks HTTP/2 (core/proxy.HTTP2Supported: the engine passes it, tests
// pass both values).
//
//   - A tcp frontend offers its bind's alpn as set (none: any protocol the
//     client asks for, as without ALPN).
//   - An http frontend offers its bind's alpn when it is set, else the
//     list derived from http.versions: "h2" for "2" first (a client that
//     speaks both gets HTTP/2), then "http/1.1" for "1.1".
//   - Without h2, "h2" is never offered, set or derived: a client would
//     negotiate it and then receive HTTP/1.1. A list left empty by that
//     offers "http/1.1", what the data plane then speaks, so that a client
//     that asks for h2 only fails the handshake (no_application_protocol)
//     instead of speaking a protocol it did not choose.
//
// The result is a new slice (crypto/tls keeps it in its Config).
func OfferedALPN(f *Frontend, t *BindTLS, h2 bool) []string {
	if f.Mode != ModeHTTP {
		return cloneStrings(t.ALPN)
	}
	var out []string
	if len(t.ALPN) > 0 {
		out = make([]string, 0, len(t.ALPN))
		for _, p := range t.ALPN {
			if p != ALPNH2 || h2 {
				out = append(out, p)
			}
		}
	} else {
		if h2 && f.HTTP.SpeaksHTTP(HTTPVersion2) {
			out = append(out, ALPNH2)
		}
		if f.HTTP.SpeaksHTTP(HTTPVersion11) {
			out = append(out, ALPNHTTP11)
		}
	}
	if len(out) == 0 {
		out = append(out, ALPNHTTP11)
	}
	return out
}

// httpOpts checks the http member of frontend f (pointer fp): versions
// lists "1.1" and "2", each once, at least one. The h2 settings' ranges
// are field rules (FrontendH2's tags).
func (v *validation) httpOpts(fp string, o *FrontendHTTPOpts) {
	vp := fp + "/http/versions"
	if len(o.Versions) == 0 {
		v.p.add(vp, CodeRequired, `versions lists the HTTP versions the frontend speaks, at least one of "1.1" and "2"`)
		return
	}
	seen := map[string]int{}
	for k, ver := range o.Versions {
		ep := vp + "/" + strconv.Itoa(k)
		if ver != HTTPVersion11 && ver != HTTPVersion2 {
			v.p.addf(ep, CodeOneOf, `%q is not an HTTP version spliced speaks: "1.1" or "2"`, truncateString(ver, 80))
			continue
		}
		if first, dup := seen[ver]; dup {
			v.p.addf(ep, CodeDuplicate, "version %q is already listed at %s/%d", ver, vp, first)
			continue
		}
		seen[ver] = k
	}
}
