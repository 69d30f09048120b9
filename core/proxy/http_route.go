package proxy

import (
	"strings"
	"time"

	"github.com/spliced-proxy/spliced/core/http1"
)

// Generations: a connection keeps the frontend it was accepted by for its
// OnClose (the engine's maxconn accounting); each request is resolved
// against the bind's current frontend (StartHTTP's cur, an atomic pointer
// the engine swaps on Apply), loaded when the request head is complete
// and when the exchange ends (for the keep-alive and request timeouts).
// A request in flight (queued, connecting, exchanging) keeps the
// frontend and backend it started with.
//
// Routing compares byte spans (no allocation): routes in order (method
// exact; host exact or "*.suffix", case-insensitive, port and a trailing
// dot stripped; path prefix of the origin-form target or of the path of
// an absolute-form one, normalised first: unreserved %XX decoded, dot
// segments removed, RFC 3986 §6.2.2 and §5.2.4 — into the loop's scratch
// buffer when the path is not already normal, see normPath), then
// default_backend, else 503. The request is forwarded as received.

// HTTPFront is the http-mode part of a Frontend (nil in tcp mode). It is
// immutable once published, like the Frontend that holds it.
type HTTPFront struct {
	Routes  []Route  // tried in order, first match wins
	Default *Backend // when no route matches; nil: 503

	XForwardedFor   bool
	XForwardedProto bool
	Via             bool
	MaxBody         int64 // request body bound in bytes, 413 beyond; 0 = unlimited

	RequestTimeout   time.Duration // a request head must be complete within (408)
	KeepAliveTimeout time.Duration // idle client connection between requests
	ClientTimeout    time.Duration // client inactivity during an exchange

	// Versions are the HTTP versions the frontend's binds speak
	// (HTTPVersion1 | HTTPVersion2; 0 means HTTP/1.1 only): HTTP/2 by
	// ALPN "h2" on TLS binds and by prior knowledge on clear ones.
	Versions uint8
	// H2 are the SETTINGS of the frontend's HTTP/2 connections (zero
	// fields: core/h2's defaults).
	H2 H2Settings
}

// HTTP versions of HTTPFront.Versions.
const (
	HTTPVersion1 uint8 = 1 << iota
	HTTPVersion2
)

// H2Settings are the HTTP/2 settings a frontend advertises
// (http.h2 in the configuration).
type H2Settings struct {
	MaxConcurrentStreams uint32
	InitialWindowSize    uint32
	MaxFrameSize         uint32
	MaxHeaderListSize    uint32
}

// Route sends matching requests to Backend. Empty fields match anything.
type Route struct {
	host    []byte // lower case; for "*.suffix" the ".suffix" part
	suffix  bool
	prefix  []byte
	method  []byte
	Backend *Backend // nil: a matching request gets 503
}

// NewRoute compiles a configured route (control path). host is an exact
// host name or "*.suffix"; it is compared case-insensitively with the
// request's Host without its port.
func NewRoute(host, pathPrefix, method string, be *Backend) Route {
	r := Route{Backend: be}
	if host != "" {
		h := strings.ToLower(host)
		if strings.HasPrefix(h, "*.") {
			r.suffix = true
			h = h[1:]
		}
		r.host = []byte(h)
	}
	if pathPrefix != "" {
		// The prefix is normalised like request paths, so that both sides
		// compare in one spelling ("/%61pi/" routes like "/api/").
		var scratch []byte
		r.prefix = append([]byte(nil), normPath([]byte(pathPrefix), &scratch)...)
	}
	if method != "" {
		r.method = []byte(method)
	}
	return r
}

// match reports whether the route takes a request with these parts. It
// compares byte spans of the parsed head: no allocation.
func (r *Route) match(host, path, method []byte) bool {
	if len(r.method) > 0 && string(r.method) != string(method) {
		return false
	}
	if len(r.host) > 0 {
		if r.suffix {
			// "*.example.com" matches "a.example.com", not "example.com".
			if len(host) <= len(r.host) || !http1.EqualFoldBytes(host[len(host)-len(r.host):], r.host) {
				return false
			}
		} else if !http1.EqualFoldBytes(host, r.host) {
			return false
		}
	}
	if len(r.prefix) > 0 && (len(path) < len(r.prefix) || string(path[:len(r.prefix)]) != string(r.prefix)) {
		return false
	}
	return true
}

// route chooses the backend of a parsed request; buf is the buffer the
// head was parsed from. path_prefix is matched against the normalised path
// (normPath), built in *scratch (the loop's) when the raw path is not
// already normal; the request forwarded is not changed. The second result
// is false when nothing matched and there is no default backend.
func (h *HTTPFront) route(buf []byte, r *http1.Request, scratch *[]byte) (*Backend, bool) {
	if len(h.Routes) == 0 {
		return h.Default, h.Default != nil
	}
	var host []byte
	if r.HasHost {
		host = hostNoPort(r.Host.Bytes(buf))
	}
	path := normPath(requestPath(buf, r), scratch)
	method := r.Method.Bytes(buf)
	for i := range h.Routes {
		if h.Routes[i].match(host, path, method) {
			return h.Routes[i].Backend, true
		}
	}
	return h.Default, h.Default != nil
}

// hostNoPort strips ":port" from a Host value; an IPv6 literal keeps its
// brackets ("[::1]:80" -> "[::1]"). A trailing dot is dropped too, so that
// "example.com." routes like "example.com".
func hostNoPort(h []byte) []byte {
	if len(h) > 0 && h[0] == '[' {
		for i := range h {
			if h[i] == ']' {
				return h[:i+1]
			}
		}
		return h
	}
	for i := len(h) - 1; i >= 0; i-- {
		c := h[i]
		if c == ':' {
			h = h[:i]
			break
		}
		if c < '0' || c > '9' {
			break
		}
	}
	if n := len(h); n > 1 && h[n-1] == '.' {
		h = h[:n-1]
	}
	return h
}

// requestPath is the path (and query) of the request-target: the target of
// an origin-form request, what follows the authority of an absolute-form
// one ("/" when nothing does), empty for the authority and asterisk forms.
func requestPath(buf []byte, r *http1.Request) []byte {
	t := r.Target.Bytes(buf)
	switch r.Form {
	case http1.FormOrigin:
		return t
	case http1.FormAbsolute:
		end := int(r.Authority.Off+r.Authority.Len) - int(r.Target.Off)
		if end >= len(t) {
			return slash
		}
		return t[end:]
	}
	return nil
}

var slash = []byte{'/'}

// normPath is the form of a request path that routes compare against:
//
//   - percent-encoded unreserved characters are decoded and the other
//     escapes get upper-case hex (RFC 3986 §6.2.2.1, §6.2.2.2), so "%2e"
//     and "%2E" are a dot and "/%61pi" is "/api";
//   - then dot segments are removed (RFC 3986 §5.2.4): "/api/../admin" is
//     "/admin", "/a/./b" is "/a/b", "/.." is "/";
//   - the query, from the first '?', is kept as it is.
//
// Nothing else changes: empty segments ("//") stay, "%2F" is not a slash.
// A path that does not start with '/' (asterisk or authority form) is
// returned unchanged. When p is already normal (no '%', no "/." in its
// path part: almost every request) p itself is returned; otherwise the
// result is built in *scratch, which is grown when too small (once per
// loop in practice: the request line is bounded) and is valid until the
// next call.
func normPath(p []byte, scratch *[]byte) []byte {
	if len(p) == 0 || p[0] != '/' {
		return p
	}
	end := len(p)
	clean := true
	for i, c := range p {
		if c == '?' {
			end = i
			break
		}
		if c == '%' || c == '.' && p[i-1] == '/' {
			clean = false
		}
	}
	if clean {
		return p
	}
	if cap(*scratch) < len(p)+1 {
		*scratch = make([]byte, 0, max(len(p)+1, 1024))
	}
	out := (*scratch)[:0]
	for i := 0; i < end; {
		// p[i] == '/': copy one segment, decoding as we go.
		seg := len(out)
		out = append(out, '/')
		for i++; i < end && p[i] != '/'; i++ {
			c := p[i]
			if c == '%' && i+2 < end {
				hi, lo := unhex(p[i+1]), unhex(p[i+2])
				if hi >= 0 && lo >= 0 {
					if d := byte(hi<<4 | lo); unreserved(d) {
						out = append(out, d)
					} else {
						out = append(out, '%', upperHex[hi], upperHex[lo])
					}
					i += 2
					continue
				}
			}
			out = append(out, c)
		}
		last := i >= end
		switch name := out[seg+1:]; {
		case len(name) == 1 && name[0] == '.':
			out = out[:seg]
		case len(name) == 2 && name[0] == '.' && name[1] == '.':
			out = out[:seg]
			j := len(out) - 1
			for j >= 0 && out[j] != '/' {
				j--
			}
			out = out[:max(j, 0)]
		default:
			continue
		}
		if last {
			out = append(out, '/') // "/a/." and "/a/b/.." end with a slash
		}
	}
	if len(out) == 0 {
		out = append(out, '/')
	}
	out = append(out, p[end:]...)
	*scratch = out
	return out
}

func unhex(c byte) int {
	switch {
	case c >= '0' && c <= '9':
		return int(c - '0')
	case c >= 'a' && c <= 'f':
		return int(c-'a') + 10
	case c >= 'A' && c <= 'F':
		return int(c-'A') + 10
	}
	return -1
}

const upperHex = "0123456789ABCDEF"

// unreserved: ALPHA / DIGIT / "-" / "." / "_" / "~" (RFC 3986 §2.3).
func unreserved(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' ||
		c == '-' || c == '.' || c == '_' || c == '~'
}
