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
	Routes  []Route     // tried in order, first match wins
	Default *Backend    // when no route matches; nil: 503
	Rules   *FrontRules // request and response rules (http_rules.go); nil: none

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

// normPath is http1.NormPath: the form of a request path that routes and
// rules compare against.
func normPath(p []byte, scratch *[]byte) []byte { return http1.NormPath(p, scratch) }
