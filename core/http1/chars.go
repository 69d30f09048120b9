package http1

import (
	"bytes"
	"encoding/binary"
)

// Character classes of RFC 9110 §5.6.2 (token), §5.5 (field-value) and
// RFC 3986 (request-target, authority), as 256-entry lookup tables built at
// compile time by the functions below (the tables are never written after
// package initialisation).

const (
	cToken  = 1 << iota // tchar
	cValue              // field-vchar / SP / HTAB (obs-text included)
	cTarget             // visible ASCII allowed in a request-target (no '#': no CTL, SP, DEL, non-ASCII or fragment, as HAProxy without its accept-unsafe option)
	cHost               // reg-name / IP-literal / port characters of an authority
	cHex                // HEXDIG
	cReason             // reason-phrase: HTAB / SP / VCHAR / obs-text
)

var charClass = buildClasses()

func buildClasses() [256]uint8 {
	var t [256]uint8
	for c := 0; c < 256; c++ {
		b := byte(c)
		var k uint8
		if isAlnum(b) {
			k |= cToken
		}
		switch b {
		case '!', '#', '$', '%', '&', '\'', '*', '+', '-', '.', '^', '_', '`', '|', '~':
			k |= cToken
		}
		if b == '\t' || (b >= 0x20 && b != 0x7f) {
			k |= cValue | cReason
		}
		if b > 0x20 && b < 0x7f && b != '#' {
			k |= cTarget
		}
		if isAlnum(b) {
			k |= cHost
		}
		switch b {
		case '-', '.', '_', '~', '!', '$', '&', '\'', '(', ')', '*', '+', ',', ';', '=', '%', ':', '[', ']':
			k |= cHost
		}
		if (b >= '0' && b <= '9') || (b >= 'a' && b <= 'f') || (b >= 'A' && b <= 'F') {
			k |= cHex
		}
		t[c] = k
	}
	return t
}

func isAlnum(b byte) bool {
	return (b >= '0' && b <= '9') || (b >= 'a' && b <= 'z') || (b >= 'A' && b <= 'Z')
}

func isToken(b byte) bool { return charClass[b]&cToken != 0 }

// IsToken reports whether s is a non-empty RFC 9110 token.
func IsToken(s []byte) bool {
	if len(s) == 0 {
		return false
	}
	for _, c := range s {
		if charClass[c]&cToken == 0 {
			return false
		}
	}
	return true
}

func allClass(s []byte, class uint8) bool {
	for _, c := range s {
		if charClass[c]&class == 0 {
			return false
		}
	}
	return true
}

func lower(b byte) byte {
	if b >= 'A' && b <= 'Z' {
		return b + ('a' - 'A')
	}
	return b
}

// EqualFold reports whether a equals the ASCII string s, ignoring ASCII case.
// s is expected in lower case only when comparing against a constant; both
// sides are folded, so either case works. It does not allocate.
func EqualFold(a []byte, s string) bool {
	if len(a) != len(s) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(s[i]) {
			return false
		}
	}
	return true
}

// equalFieldName is EqualFold with '_' in a standing for '-' in s: the
// spelling CGI-style servers read as the same field.
func equalFieldName(a []byte, s string) bool {
	if len(a) != len(s) {
		return false
	}
	for i := 0; i < len(a); i++ {
		c := a[i]
		if c == '_' {
			c = '-'
		}
		if lower(c) != lower(s[i]) {
			return false
		}
	}
	return true
}

// EqualFoldBytes is EqualFold for two byte slices.
func EqualFoldBytes(a, b []byte) bool {
	if len(a) != len(b) {
		return false
	}
	for i := 0; i < len(a); i++ {
		if lower(a[i]) != lower(b[i]) {
			return false
		}
	}
	return true
}

func isOWS(b byte) bool { return b == ' ' || b == '\t' }

// trimOWS removes leading and trailing SP/HTAB.
func trimOWS(s []byte) []byte {
	for len(s) > 0 && isOWS(s[0]) {
		s = s[1:]
	}
	for len(s) > 0 && isOWS(s[len(s)-1]) {
		s = s[:len(s)-1]
	}
	return s
}

// list walks a comma-separated list (RFC 9110 §5.6.1): each element is
// returned OWS-trimmed; empty elements are returned as empty slices, so "a,"
// yields "a" then "". An empty value yields one empty element.
type list struct {
	s    []byte
	done bool
}

func (l *list) next() ([]byte, bool) {
	if l.done {
		return nil, false
	}
	i := bytes.IndexByte(l.s, ',')
	if i < 0 {
		l.done = true
		return trimOWS(l.s), true
	}
	e := trimOWS(l.s[:i])
	l.s = l.s[i+1:]
	return e, true
}

// HasToken reports whether the comma-separated list value contains token
// (ASCII case-insensitive), e.g. HasToken("keep-alive, Upgrade", "upgrade").
func HasToken(value []byte, token string) bool {
	l := list{s: value}
	for e, ok := l.next(); ok; e, ok = l.next() {
		if EqualFold(e, token) {
			return true
		}
	}
	return false
}

func hasTokenBytes(value, token []byte) bool {
	l := list{s: value}
	for e, ok := l.next(); ok; e, ok = l.next() {
		if EqualFoldBytes(e, token) {
			return true
		}
	}
	return false
}

// validAuthority checks host [":" port] (RFC 3986 §3.2.2-3.2.3): host is an
// IP-literal in brackets (hex digits, ':' and '.'; an IPv6 zone or IPvFuture
// is refused) or a reg-name of unreserved, sub-delims and well-formed
// pct-encoded bytes; port is digits, and must be non-empty when needPort.
// An empty authority is valid only without needPort (an empty Host field).
func validAuthority(a []byte, needPort bool) bool {
	if len(a) == 0 {
		return !needPort
	}
	host, port := a, []byte(nil)
	if a[0] == '[' {
		end := bytes.IndexByte(a, ']')
		if end < 2 {
			return false
		}
		if !validIPv6(a[1:end]) {
			return false
		}
		rest := a[end+1:]
		if len(rest) > 0 {
			if rest[0] != ':' {
				return false
			}
			port = rest[1:]
		}
		host = nil
	} else if i := lastIndexByte(a, ':'); i >= 0 {
		host, port = a[:i], a[i+1:]
	}
	for _, c := range port {
		if !isDigit(c) {
			return false
		}
	}
	if needPort && len(port) == 0 {
		return false
	}
	for i := 0; i < len(host); i++ {
		c := host[i]
		switch {
		case c == '%':
			if i+2 >= len(host) || charClass[host[i+1]]&cHex == 0 || charClass[host[i+2]]&cHex == 0 {
				return false
			}
			i += 2
		case c == ':' || c == '[' || c == ']' || charClass[c]&cHost == 0:
			return false
		}
	}
	return a[0] == '[' || len(host) > 0
}

// validIPv6 reports whether b is an IPv6address of RFC 3986 §3.2.2: eight
// groups of 1-4 hex digits separated by ':', at most one "::" standing for
// one or more zero groups, the last two groups optionally written as a
// dotted IPv4 address. It does the work of netip.ParseAddr without the
// string conversion (the parser must not allocate) and without zones,
// which a URI cannot carry unescaped.
func validIPv6(b []byte) bool {
	groups, ellipsis, afterGroup := 0, false, false
	for i := 0; i < len(b); {
		if b[i] == ':' {
			if i+1 < len(b) && b[i+1] == ':' {
				if ellipsis {
					return false
				}
				ellipsis, afterGroup = true, false
				i += 2
				continue
			}
			// A single ':' separates two groups: one before, one after.
			if !afterGroup || i == len(b)-1 {
				return false
			}
			i++
		}
		j := i
		for j < len(b) && j-i < 5 && charClass[b[j]]&cHex != 0 {
			j++
		}
		if j < len(b) && b[j] == '.' {
			// The rest is a dotted IPv4 address: two groups.
			if !validIPv4(b[i:]) {
				return false
			}
			groups += 2
			break
		}
		if j == i || j-i > 4 || (j < len(b) && b[j] != ':') {
			return false
		}
		groups++
		afterGroup = true
		i = j
	}
	if ellipsis {
		return groups <= 7
	}
	return groups == 8
}

// validIPv4 reports whether b is four decimal octets 0-255 separated by
// '.', without leading zeros (as netip.ParseAddr requires).
func validIPv4(b []byte) bool {
	parts := 0
	for i := 0; i <= len(b); {
		j, v := i, 0
		for j < len(b) && isDigit(b[j]) {
			v = v*10 + int(b[j]-'0')
			j++
			if j-i > 3 {
				return false
			}
		}
		if j == i || v > 255 || (j-i > 1 && b[i] == '0') {
			return false
		}
		parts++
		if j == len(b) {
			break
		}
		if b[j] != '.' {
			return false
		}
		i = j + 1
	}
	return parts == 4
}

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// validValue reports whether every byte of v may appear in a field value
// (HTAB, SP, VCHAR, obs-text). Eight bytes at a time: a word with no byte
// below 0x20 and none equal to DEL is valid as a whole; only a word that
// may hold one (HTAB included) is checked byte by byte.
func validValue(v []byte) bool {
	for len(v) >= 8 {
		w := binary.LittleEndian.Uint64(v)
		del := w ^ (ones * 0x7f)
		if ((w-ones*0x20)&^w|(del-ones)&^del)&highs != 0 {
			for _, c := range v[:8] {
				if charClass[c]&cValue == 0 {
					return false
				}
			}
		}
		v = v[8:]
	}
	for _, c := range v {
		if charClass[c]&cValue == 0 {
			return false
		}
	}
	return true
}
