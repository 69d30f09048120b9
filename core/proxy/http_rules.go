package proxy

import (
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/rules"
)

// Request and response rules (core/rules) on a stream. Request rules run
// when the head is complete, before routes (startRequest: requestRules);
// the first deny or redirect answers through fail, as the proxy's own
// errors do (termination PR); a use_backend wins over the routes; header
// and path actions change the head written for the server
// (appendTarget, ruleDrop, appendRuleFields). Response rules run on the
// final response head before it is rewritten for the client
// (responseRules, respDrop, appendRespFields); a deny there replaces the
// response. Both phases run on the HTTP/1.1 head a stream carries, which
// is what an HTTP/2 stream was converted to: HTTP/2 requests get the same
// rules. Nothing here allocates per request (the bit sets grow once per
// stream object to the largest rule set seen).

// FrontRules are the compiled rules of an http frontend (HTTPFront.Rules),
// immutable once published.
type FrontRules struct {
	Req, Resp *rules.Set
	// Backends[i] is the backend of use_backend rule i of Req (nil: the
	// backend is missing from this generation: 503).
	Backends []*Backend
	// Limits[i] is the index of the limit of limit rule i of Req in the
	// frontend generation's LimitSet (limits.go; -1: none).
	Limits []int
}

// ruleState is a stream's part of the rules, reset for each request:
// allocated once per stream object, the first time it serves a frontend
// with rules (streams are recycled: not per request), so that a stream of
// a frontend without rules stays in its size class.
type ruleState struct {
	res  rules.Result // of the request rules
	rres rules.Result // of the response rules
	hits []uint64     // storage of res.Hits, rres.Hits and pre
	pre  []uint64     // the request members of response rules (Precompute)
	// filter and rfilter drop the fields of the request and of the
	// response that rules remove or replace; set only when one matched.
	filter, rfilter rules.Filter
	rw, rrw         bool // a request (response) header or path rule matched
	// be is the backend a use_backend chose (useBe: one did).
	be    *Backend
	useBe bool
	// extra and rextra bound what rules add to the request (response)
	// head, for the size check before it is written.
	extra, rextra int
	// answer: fail writes the answer of rule stop of set ans (a deny or
	// a redirect) rather than the proxy's error; host and target are the
	// request's, for a redirect (valid while startRequest runs).
	answer       bool
	ans          *rules.Set
	stop         int
	host, target []byte
	scratch      []byte // normalised paths
}

// bits returns three bit sets of n words each, from the stream's storage
// (grown, once, to the largest rule set seen).
func (rs *ruleState) bits(n int) (a, b, c []uint64) {
	if cap(rs.hits) < 3*n {
		rs.hits = make([]uint64, 3*n)
	}
	h := rs.hits[:3*n]
	return h[:n:n], h[n : 2*n : 2*n], h[2*n:]
}

// requestRules runs the request rules of the stream's frontend on its
// complete head (at the front of buf). It returns true when a rule
// answered the request (deny, redirect): the stream is draining the
// answer.
func (c *stream) requestRules(buf []byte) bool {
	fr := c.hf.Rules
	rs := c.rs
	if rs != nil {
		rs.rw, rs.rrw, rs.useBe, rs.be, rs.extra, rs.rextra, rs.answer = false, false, false, nil, 0, 0, false
	}
	if fr == nil {
		return false
	}
	if rs == nil {
		rs = &ruleState{}
		c.rs = rs
	}
	r := c.req
	var e rules.Env
	e.Buf, e.Head, e.Method = buf, &r.Head, r.Method.Bytes(buf)
	if r.HasHost {
		e.Host = hostNoPort(r.Host.Bytes(buf))
	}
	target := requestPath(buf, r)
	p := target
	for i, b := range p {
		if b == '?' {
			p, e.Query = p[:i], p[i+1:]
			break
		}
	}
	e.Path = normPath(p, &rs.scratch)
	e.Src, e.TLS, e.SNI = c.cl.peer, c.cli.xp.secure(), c.w.authority(c.cl.pp, c.cli.xp)
	n := max(fr.Req.Words(), fr.Resp.Words())
	rs.res.Hits, rs.rres.Hits, rs.pre = rs.bits(n)
	if fr.Resp.Precomputes() {
		fr.Resp.Precompute(&e, rs.pre)
	}
	set := fr.Req
	if set == nil {
		return false
	}
	set.Eval(&e, &rs.res, c.w.id)
	res := &rs.res
	if res.Limits && c.ruleLimits(fr) {
		return true // a limit answered (or holds) the request
	}
	if res.Stop >= 0 {
		act, _ := set.Action(res.Stop)
		status := set.Status(res.Stop)
		switch {
		case act == rules.Deny:
			c.fs.Denied.Add(1)
			c.fs.RuleDenied.Add(1)
		case set.NeedsHost(res.Stop) && len(e.Host) == 0:
			status = 400 // an HTTP/1.0 request without Host: nowhere to redirect to
		default:
			c.fs.RuleRedirects.Add(1)
		}
		rs.answer, rs.ans, rs.stop, rs.host, rs.target = status != 400, set, res.Stop, e.Host, target
		c.blame('P', 'R')
		c.fail(status)
		rs.host, rs.target, rs.answer = nil, nil, false
		return true
	}
	if res.Backend >= 0 {
		rs.useBe, rs.be = true, fr.Backends[res.Backend]
	}
	if res.Rewrites {
		c.fs.RuleRewrites.Add(1)
		rs.rw = true
		rs.filter = set.Filter(res.Hits)
		rs.extra = set.FieldsLen(res.Hits)
		if set.Paths() {
			rs.extra += len(set.Path(e.Path, res.Hits))
		}
	}
	return false
}

// ruleLimits sends the request to the limits of the limit rules that
// matched, in rule order (limits.go, TrackLimit). It returns true when a
// limit ended the request (429, tarpit): startRequest returns at once.
func (c *stream) ruleLimits(fr *FrontRules) bool {
	hits := c.rs.res.Hits
	for i, l := range fr.Limits {
		if l >= 0 && rules.Hit(hits, i) && c.TrackLimit(l) {
			return true
		}
	}
	return false
}

// ruleBackend is the backend the request rules chose (ok: one did, be
// may then be nil: 503), else what the routes choose.
func (c *stream) ruleBackend(buf []byte) (*Backend, bool) {
	if c.rs != nil && c.rs.useBe {
		return c.rs.be, true
	}
	return c.hf.route(buf, c.req, &c.w.h.path)
}

// appendTarget appends the request line's method and target to the
// server's head: the path the rules rewrote (and the query as received),
// else the target as received.
func (c *stream) appendTarget(d, buf []byte) []byte {
	r := c.req
	rs := c.rs
	if rs == nil || !rs.rw || !c.hf.Rules.Req.Paths() {
		return append(d, buf[r.Method.Off:r.Target.Off+r.Target.Len]...)
	}
	d = append(d, buf[r.Method.Off:r.Method.Off+r.Method.Len]...)
	d = append(d, ' ')
	p := requestPath(buf, r)
	var q []byte
	for i, b := range p {
		if b == '?' {
			p, q = p[:i], p[i:]
			break
		}
	}
	d = append(d, c.hf.Rules.Req.Path(normPath(p, &rs.scratch), rs.res.Hits)...)
	return append(d, q...)
}

// ruleDrop is the filter of the fields request rules remove or replace
// (nil: none).
func (c *stream) ruleDrop() http1.FieldFilter {
	if c.rs == nil || !c.rs.rw {
		return nil
	}
	return &c.rs.filter
}

// appendRuleFields appends the fields request rules set or add.
func (c *stream) appendRuleFields(d []byte) []byte {
	if c.rs == nil || !c.rs.rw {
		return d
	}
	return c.hf.Rules.Req.AppendFields(d, c.rs.res.Hits)
}

// responseRules runs the response rules on the final response head of n
// bytes at the front of the server buffer. It returns true when a rule
// denied the response: the stream answers with the rule's answer instead
// (fail), and the server connection is closed.
func (c *stream) responseRules(n int) bool {
	rs := c.rs
	if rs == nil {
		return false
	}
	rs.rrw, rs.rextra = false, 0
	fr := c.hf.Rules
	if fr == nil || fr.Resp == nil || len(rs.rres.Hits) < fr.Resp.Words() {
		return false // no rules, or none when the request started
	}
	sc := c.sc
	set := fr.Resp
	var e rules.Env
	e.Buf, e.Head, e.Status = sc.in.Data()[:n], &sc.resp.Head, sc.resp.Status
	e.Src, e.TLS, e.SNI, e.Pre = c.cl.peer, c.cli.xp.secure(), c.w.authority(c.cl.pp, c.cli.xp), rs.pre
	set.Eval(&e, &rs.rres, c.w.id)
	res := &rs.rres
	if res.Stop >= 0 {
		c.fs.Denied.Add(1)
		c.fs.RuleDenied.Add(1)
		rs.answer, rs.ans, rs.stop = true, set, res.Stop
		c.blame('P', 'R')
		c.fail(set.Status(res.Stop))
		rs.answer = false
		return true
	}
	if res.Rewrites {
		c.fs.RuleRewrites.Add(1)
		rs.rrw = true
		rs.rfilter = set.Filter(res.Hits)
		rs.rextra = set.FieldsLen(res.Hits)
	}
	return false
}

// respDrop is the filter of the fields response rules remove or replace
// in the final response head (nil: none).
func (c *stream) respDrop(final bool) http1.FieldFilter {
	if !final || c.rs == nil || !c.rs.rrw {
		return nil
	}
	return &c.rs.rfilter
}

// appendRespFields appends the fields response rules set or add to the
// final response head.
func (c *stream) appendRespFields(d []byte, final bool) []byte {
	if !final || c.rs == nil || !c.rs.rrw {
		return d
	}
	return c.hf.Rules.Resp.AppendFields(d, c.rs.rres.Hits)
}

// appendRuleAnswer appends the answer of the rule that is answering
// (deny, redirect) for fail, through appendAnswer (limits.go); ok is false
// when no rule is answering, or when its answer does not fit the buffer
// (then the proxy's error for its status goes).
func (c *stream) appendRuleAnswer(dst []byte) ([]byte, bool) {
	rs := c.rs
	if rs == nil || !rs.answer {
		return dst, false
	}
	rs.answer = false
	return rs.ans.AppendAnswer(dst, rs.stop, rs.host, rs.target)
}

// ruleExtra and respRuleExtra bound what rules add to the request
// (response) head: the head must fit its buffer with them.
func (c *stream) ruleExtra() int {
	if c.rs == nil {
		return 0
	}
	return c.rs.extra
}

func (c *stream) respRuleExtra() int {
	if c.rs == nil {
		return 0
	}
	return c.rs.rextra
}
