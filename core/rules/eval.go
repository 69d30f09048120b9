package rules

import (
	"net/netip"

	"github.com/spliced-proxy/spliced/core/http1"
)

// Env is what the conditions of one phase see: the caller fills it (on
// its stack) for each evaluation, its slices pointing into the message's
// buffer. Members a phase does not have are left zero.
type Env struct {
	Buf  []byte      // the buffer Head was parsed from
	Head *http1.Head // the message of the phase, for header conditions
	// The request: Host without its port and trailing dot, the path
	// normalised (http1.NormPath) without its query, the raw query (what
	// follows '?'), the method.
	Host, Path, Query, Method []byte
	Status                    int // the response's (response phase)
	Src                       netip.Addr
	TLS                       bool
	SNI                       []byte // read only
	// Pre are the bits Precompute set from the request, for the request
	// members of response rules (response phase).
	Pre []uint64

	pre bool // leaves with a pre index read Pre
}

// Result is what Eval found. The caller owns it and its Hits.
type Result struct {
	// Stop is the deny or redirect rule that ended the phase, -1 if none.
	Stop int
	// Backend is the first use_backend rule that matched, -1 if none.
	Backend int
	// Hits has a bit set for each matched header, path or limit rule; the
	// caller gives it at least Set.Words() words.
	Hits []uint64
	// Rewrites: a header or path rule matched; Limits: a limit rule did.
	Rewrites, Limits bool
}

// Eval runs the rules of s in order against e (loop thread; loop is the
// loop's index, for the hit counters). It allocates nothing.
func (s *Set) Eval(e *Env, res *Result, loop int) {
	res.Stop, res.Backend, res.Rewrites, res.Limits = -1, -1, false, false
	hits := res.Hits[:s.words]
	clear(hits)
	e.pre = len(e.Pre) > 0
	e.Src = e.Src.Unmap() // once, not per src condition
	for i := range s.rules {
		r := &s.rules[i]
		if r.when != nil && !r.when.match(e) {
			continue
		}
		switch r.act {
		case Deny, Redirect:
			s.count(loop, i)
			res.Stop = i
			return
		case UseBackend:
			if res.Backend < 0 {
				s.count(loop, i)
				res.Backend = i
			}
			continue
		case Limit:
			res.Limits = true
		default:
			res.Rewrites = true
		}
		s.count(loop, i)
		hits[i>>6] |= 1 << (i & 63)
	}
}

// Precompute evaluates, against the request in e, the request members
// (host, path, path_prefix, method, query) of the response rules of s,
// into pre (at least Words() words): Eval of the response reads them
// there, when the request's buffer is gone.
func (s *Set) Precompute(e *Env, pre []uint64) {
	clear(pre[:(s.npre+63)/64])
	e.pre = false
	e.Src = e.Src.Unmap()
	for i := range s.rules {
		if c := s.rules[i].when; c != nil {
			c.precompute(e, pre)
		}
	}
}

func (c *cond) precompute(e *Env, pre []uint64) {
	for i := range c.leaves {
		if l := &c.leaves[i]; l.pre >= 0 && l.match(e) {
			pre[l.pre>>6] |= 1 << (l.pre & 63)
		}
	}
	for _, n := range c.nots {
		n.precompute(e, pre)
	}
}

func (c *cond) match(e *Env) bool {
	for i := range c.leaves {
		if !c.leaves[i].match(e) {
			return false
		}
	}
	for _, n := range c.nots {
		if n.match(e) {
			return false
		}
	}
	return true
}

func (l *leaf) match(e *Env) bool {
	if l.pre >= 0 && e.pre {
		return e.Pre[l.pre>>6]&(1<<(l.pre&63)) != 0
	}
	switch l.kind {
	case lHost:
		return hostMatch(e.Host, l.val, l.suffix)
	case lPath:
		return string(e.Path) == string(l.val)
	case lPathPrefix:
		return len(e.Path) >= len(l.val) && string(e.Path[:len(l.val)]) == string(l.val)
	case lMethod:
		return string(e.Method) == string(l.val)
	case lHeader:
		return l.header(e)
	case lQuery:
		return l.query(e.Query)
	case lSrc:
		for _, p := range l.prefixes {
			if p.Contains(e.Src) { // unmapped by Eval and Precompute
				return true
			}
		}
		return false
	case lTLS:
		return e.TLS == l.tls
	case lSNI:
		return hostMatch(e.SNI, l.val, l.suffix)
	case lStatus:
		return e.Status == l.status
	}
	return false
}

// hostMatch compares a host (or server name) case-insensitively with an
// exact name, or, with suffix, with ".suffix" (a subdomain, not the name
// itself).
func hostMatch(host, val []byte, suffix bool) bool {
	if n := len(host); n > 1 && host[n-1] == '.' {
		host = host[:n-1]
	}
	if suffix {
		return len(host) > len(val) && http1.EqualFoldBytes(host[len(host)-len(val):], val)
	}
	return http1.EqualFoldBytes(host, val)
}

func (l *leaf) header(e *Env) bool {
	h := e.Head
	if h == nil {
		return false
	}
	for i := 0; i < h.N; i++ {
		f := &h.Headers[i]
		if !http1.EqualFoldBytes(f.Name.Bytes(e.Buf), l.name) {
			continue
		}
		v := f.Value.Bytes(e.Buf)
		switch l.mode {
		case mPresent:
			return true
		case mEquals:
			if string(v) == string(l.val) {
				return true
			}
		case mPrefix:
			if len(v) >= len(l.val) && string(v[:len(l.val)]) == string(l.val) {
				return true
			}
		}
	}
	return false
}

// query looks for the parameter in a raw query string ("a=1&b&c=2").
func (l *leaf) query(q []byte) bool {
	for len(q) > 0 {
		p := q
		q = nil
		for i, c := range p {
			if c == '&' {
				p, q = p[:i], p[i+1:]
				break
			}
		}
		k, v := p, []byte(nil)
		for i, c := range p {
			if c == '=' {
				k, v = p[:i], p[i+1:]
				break
			}
		}
		if string(k) != string(l.name) {
			continue
		}
		if l.mode == mPresent || string(v) == string(l.val) {
			return true
		}
	}
	return false
}
