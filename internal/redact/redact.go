// Package redact removes credentials from the URLs and request lines
// that are logged: the admin API's request log and audit trail (api) and
// the data plane's access log (core/accesslog). Any goroutine; no state.
package redact

import (
	"net/url"
	"regexp"
	"strings"
)

// Redacted replaces a credential.
const Redacted = "REDACTED"

// URI is u's path and query as logged: the values of the query
// parameters access_token and token, every value starting with the token
// prefix spliced_, and any path segment as long as a secret that starts
// with it, replaced by REDACTED.
func URI(u *url.URL) string {
	path := Path(u.EscapedPath())
	if u.RawQuery == "" && !u.ForceQuery {
		return path
	}
	return path + "?" + Query(u.RawQuery)
}

// Path is the escaped path p with any segment that is a secret replaced.
func Path(p string) string {
	u, err := url.PathUnescape(p) // %73pliced_ is spliced_ too
	if err != nil {
		u = p
	}
	if !strings.Contains(strings.ToLower(u), "spliced") {
		return p
	}
	segs := strings.Split(p, "/")
	for i, s := range segs {
		if len(s) >= len(tokenPrefix)+32 && isSecretValue(s) { // a name may start with spliced_; a secret is long
			segs[i] = Redacted
		}
	}
	return strings.Join(segs, "/")
}

// Query is the raw query q with the values of access_token and token,
// and any secret, replaced.
func Query(q string) string {
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' })
	changed := false
	for i, kv := range parts {
		k, v, hasV := strings.Cut(kv, "=")
		name, err := url.QueryUnescape(k)
		if err != nil {
			name = k
		}
		name = strings.ToLower(name)
		if SecretLike.MatchString(name) { // ?<secret> or ?<secret>=x
			k = Redacted
			parts[i] = k
			if hasV {
				parts[i] = k + "=" + v
			}
			changed = true
		}
		if name == "access_token" || name == "token" || isSecretValue(v) {
			parts[i] = k + "=" + Redacted
			changed = true
		}
	}
	if !changed {
		return q
	}
	return strings.Join(parts, "&")
}

// isSecretValue: v (escaped) starts with the token prefix, whatever its
// case or escaping, or holds a secret further on ("Bearer spliced_...").
func isSecretValue(v string) bool {
	u, err := url.QueryUnescape(v)
	if err != nil {
		u = v
	}
	return strings.HasPrefix(strings.ToLower(strings.TrimSpace(u)), tokenPrefix) || SecretLike.MatchString(u)
}

const tokenPrefix = "spliced_"

// SecretLike matches a secret quoted in a text (an error detail naming the path
// segment it came from): the prefix and at least 32 characters of base64url.
var SecretLike = regexp.MustCompile(`(?i)spliced_[A-Za-z0-9_-]{32,}`)

// Target is an HTTP request target as logged: in absolute form
// ("http://user:pass@host/p"), the userinfo replaced; the path and the
// query redacted as Path and Query do.
func Target(t string) string {
	prefix := ""
	if i := strings.Index(t, "://"); i > 0 && !strings.ContainsAny(t[:i], "/?") {
		rest := t[i+3:]
		end := strings.IndexAny(rest, "/?")
		if end < 0 {
			end = len(rest)
		}
		auth := rest[:end]
		if at := strings.LastIndexByte(auth, '@'); at >= 0 {
			auth = Redacted + auth[at:]
		}
		prefix, t = t[:i+3]+auth, rest[end:]
	}
	path, query, hasQuery := strings.Cut(t, "?")
	path = Path(path)
	if !hasQuery {
		return prefix + path
	}
	return prefix + path + "?" + Query(query)
}

// RequestLine is an HTTP request line ("GET /p?q HTTP/1.1") with its
// target redacted as Target does.
func RequestLine(l string) string {
	method, rest, ok := strings.Cut(l, " ")
	if !ok {
		return l
	}
	target, version, ok := strings.Cut(rest, " ")
	if !ok {
		return method + " " + Target(rest)
	}
	return method + " " + Target(target) + " " + version
}

// CutRequestLine is RequestLine for a line cut short (the access log
// keeps 256 bytes): its last piece — after the last space, '/', '?', '&',
// ';' or '=' — may be the beginning of a secret, too short to be matched
// whole, and is replaced when it holds the token prefix, whatever its
// case or escaping.
func CutRequestLine(l string) string {
	r := RequestLine(l)
	i := strings.LastIndexAny(r, " /?&;=")
	tail := r[i+1:]
	if j := strings.LastIndexByte(tail, '%'); j >= 0 && j >= len(tail)-2 {
		tail = tail[:j] // an escape cut in two
	}
	if u, err := url.QueryUnescape(tail); err == nil {
		tail = u
	} else if u, err := url.PathUnescape(tail); err == nil {
		tail = u
	}
	if strings.Contains(strings.ToLower(tail), tokenPrefix) {
		return r[:i+1] + Redacted
	}
	return r
}
