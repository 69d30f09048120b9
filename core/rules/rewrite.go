package rules

import (
	"github.com/spliced-proxy/spliced/core/http1"
)

func hit(hits []uint64, i int32) bool { return hits[i>>6]&(1<<(i&63)) != 0 }

// Hit reports whether rule i matched and acted (hits from Eval).
func Hit(hits []uint64, i int) bool { return hit(hits, int32(i)) }

// Filter drops, from a head being copied (http1.FieldFilter), the fields
// that the matched set_header and del_header rules name. The zero Filter
// drops nothing.
type Filter struct {
	s    *Set
	hits []uint64
}

// Filter returns the filter of the rules that matched (hits from Eval).
func (s *Set) Filter(hits []uint64) Filter { return Filter{s: s, hits: hits} }

// DropField reports whether the field named name is dropped.
func (f *Filter) DropField(name []byte) bool {
	if f.s == nil {
		return false
	}
	for _, i := range f.s.fields {
		r := &f.s.rules[i]
		if (r.act == SetHeader || r.act == DelHeader) && hit(f.hits, i) && http1.EqualFoldBytes(name, r.name) {
			return true
		}
	}
	return false
}

// FieldsLen is at most what AppendFields appends for these hits.
func (s *Set) FieldsLen(hits []uint64) int {
	n := 0
	for _, i := range s.fields {
		if hit(hits, i) {
			n += len(s.rules[i].line)
		}
	}
	return n
}

// AppendFields appends the fields of the matched set_header and
// add_header rules, in rule order; one that a later matched set_header or
// del_header names is left out (the later rule wins).
func (s *Set) AppendFields(dst []byte, hits []uint64) []byte {
	for k, i := range s.fields {
		r := &s.rules[i]
		if r.act == DelHeader || !hit(hits, i) {
			continue
		}
		later := false
		for _, j := range s.fields[k+1:] {
			o := &s.rules[j]
			if (o.act == SetHeader || o.act == DelHeader) && hit(hits, j) && http1.EqualFoldBytes(o.name, r.name) {
				later = true
				break
			}
		}
		if !later {
			dst = append(dst, r.line...)
		}
	}
	return dst
}

// Path returns the path the matched set_path and strip_prefix rules make
// of path (normalised, without query), applied in rule order: set_path
// replaces it; strip_prefix removes its prefix when the path is that
// prefix or continues with '/' after it ("/" when nothing is left). The
// result is path, a part of it, or a rule's own bytes: nothing is copied.
func (s *Set) Path(path []byte, hits []uint64) []byte {
	for i := range s.rules {
		r := &s.rules[i]
		if r.act != SetPath && r.act != StripPrefix || !hit(hits, int32(i)) {
			continue
		}
		if r.act == SetPath {
			path = r.val
			continue
		}
		p := r.val
		if len(p) == 0 || len(path) < len(p) || string(path[:len(p)]) != string(p) {
			continue
		}
		switch rest := path[len(p):]; {
		case len(rest) == 0:
			path = slash
		case rest[0] == '/':
			path = rest
		}
	}
	return path
}

var slash = []byte{'/'}

// redirectEnd ends a redirect answer: no body, and the connection closed
// after it as after the proxy's own answers.
const redirectEnd = "\r\nContent-Length: 0\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n"

// AppendAnswer appends the answer of the deny or redirect rule i: deny's
// response, or the redirect to the rule's location, or to its scheme,
// host (the request's, given without its port) and port, followed by the
// request's target (path and query as received). ok is false, and dst
// unchanged, when the answer does not fit cap(dst).
func (s *Set) AppendAnswer(dst []byte, i int, host, target []byte) ([]byte, bool) {
	r := &s.rules[i]
	n := len(r.answer)
	if r.act == Redirect {
		n += len(redirectEnd)
		if !r.fixed {
			n += len(r.scheme) + len(host) + len(r.port) + len(target)
		}
	}
	if len(dst)+n > cap(dst) {
		return dst, false
	}
	dst = append(dst, r.answer...)
	if r.act == Redirect {
		if !r.fixed {
			dst = append(dst, r.scheme...)
			dst = append(dst, host...)
			dst = append(dst, r.port...)
			dst = append(dst, target...)
		}
		dst = append(dst, redirectEnd...)
	}
	return dst, true
}

// NeedsHost: rule i is a redirect built from the request's host.
func (s *Set) NeedsHost(i int) bool { r := &s.rules[i]; return r.act == Redirect && !r.fixed }
