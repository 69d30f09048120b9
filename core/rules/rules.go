package rules

import (
	"errors"
	"fmt"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
)

// Action is what a compiled rule does.
type Action uint8

const (
	Deny Action = iota + 1
	Redirect
	SetHeader
	AddHeader
	DelHeader
	SetPath
	StripPrefix
	UseBackend
	Limit
)

var actionNames = [...]string{
	Deny: config.ActionDeny, Redirect: config.ActionRedirect, SetHeader: config.ActionSetHeader,
	AddHeader: config.ActionAddHeader, DelHeader: config.ActionDelHeader, SetPath: config.ActionSetPath,
	StripPrefix: config.ActionStripPrefix, UseBackend: config.ActionUseBackend, Limit: config.ActionLimit,
}

// String is the action's name in the configuration ("deny", "set_header"...).
func (a Action) String() string {
	if int(a) < len(actionNames) {
		return actionNames[a]
	}
	return "?"
}

// Leaf kinds: one member of a condition.
const (
	lHost uint8 = iota + 1
	lPath
	lPathPrefix
	lMethod
	lHeader
	lQuery
	lSrc
	lTLS
	lSNI
	lStatus
)

// Header and query comparison modes.
const (
	mPresent uint8 = iota
	mEquals
	mPrefix
)

type leaf struct {
	kind   uint8
	mode   uint8
	suffix bool // host, sni: "*.suffix" (val holds ".suffix")
	tls    bool
	status int
	// pre >= 0: a request member of a response rule, evaluated by
	// Precompute into bit pre.
	pre      int32
	name     []byte
	val      []byte
	prefixes []netip.Prefix
}

type cond struct {
	leaves []leaf
	nots   []*cond
}

type rule struct {
	when *cond // nil: always
	act  Action
	// status: deny's status, redirect's code.
	status int
	// name, val: a header action's field (name as configured), a path
	// action's path; line: "Name: value\r\n" of set_header/add_header.
	name, val, line []byte
	// answer: deny's whole response; redirect: the status line and
	// "Location: " (then the target, then answerEnd).
	answer []byte
	// Redirect by scheme: the scheme's "scheme://" and ":port" (empty:
	// the scheme's default), or a fixed location (in answer already).
	scheme, port []byte
	fixed        bool
	target       string // use_backend's backend, limit's limit
}

// Set is the compiled rules of one phase of one frontend.
type Set struct {
	phase  string
	rules  []rule
	words  int // of a hit bit set: one bit per rule
	npre   int // request members of response rules (Precompute's bits)
	fields []int32
	paths  bool // a set_path or strip_prefix
	sni    bool // a condition tests sni
	hasLim bool
	// Hit counters: loop i counts rule j in cnt[i*stride+j]; stride keeps
	// every loop's counters on cache lines of their own.
	loops  int
	stride int
	cnt    []atomic.Int64
}

// cacheLineInts is the number of counters on one cache line.
const cacheLineInts = 8

// Compile compiles the rules of one phase (config.PhaseRequest or
// PhaseResponse) of a frontend that passed validation, for loops loops.
// An empty list gives nil: no rules, nothing to evaluate.
func Compile(phase string, list []config.Rule, loops int) (*Set, error) {
	if len(list) == 0 {
		return nil, nil
	}
	if len(list) > config.MaxRulesPerPhase {
		return nil, fmt.Errorf("%d %s rules: at most %d", len(list), phase, config.MaxRulesPerPhase)
	}
	loops = max(loops, 1)
	s := &Set{phase: phase, rules: make([]rule, len(list)), words: (len(list) + 63) / 64, loops: loops}
	s.stride = (len(list)+cacheLineInts-1)/cacheLineInts*cacheLineInts + cacheLineInts
	s.cnt = make([]atomic.Int64, loops*s.stride)
	for i := range list {
		r, err := s.compile(&list[i])
		if err != nil {
			return nil, fmt.Errorf("%s rule %d: %w", phase, i, err)
		}
		s.rules[i] = r
		switch r.act {
		case SetHeader, AddHeader, DelHeader:
			s.fields = append(s.fields, int32(i))
		case SetPath, StripPrefix:
			s.paths = true
		case Limit:
			s.hasLim = true
		}
	}
	return s, nil
}

func (s *Set) compile(c *config.Rule) (rule, error) {
	var r rule
	if c.When != nil {
		w, err := s.cond(c.When, 0)
		if err != nil {
			return r, err
		}
		r.when = w
	}
	a := &c.Do
	kind, n := a.Kind()
	if n != 1 {
		return r, errors.New("a rule has exactly one action")
	}
	switch kind {
	case config.ActionDeny:
		r.act = Deny
		r.status = a.Deny.Status
		if r.status == 0 {
			r.status = 403
		}
		r.answer = denyAnswer(r.status, a.Deny.Body)
	case config.ActionRedirect:
		d := a.Redirect
		r.act = Redirect
		r.status = d.Code
		if r.status == 0 {
			r.status = 302
		}
		r.answer = http1.AppendStatusLine(nil, r.status, nil)
		r.answer = append(r.answer, "Location: "...)
		if d.Location != "" {
			r.fixed = true
			r.answer = append(r.answer, d.Location...)
		} else {
			r.scheme = []byte(d.Scheme + "://")
			if d.Port != 0 {
				r.port = []byte(":" + strconv.Itoa(d.Port))
			}
		}
	case config.ActionSetHeader, config.ActionAddHeader:
		h := a.SetHeader
		r.act = SetHeader
		if h == nil {
			h = a.AddHeader
			r.act = AddHeader
		}
		if err := checkField(h.Name, h.Value); err != nil {
			return r, err
		}
		r.name = []byte(h.Name)
		r.line = []byte(h.Name + ": " + h.Value + "\r\n")
	case config.ActionDelHeader:
		if err := checkField(a.DelHeader, ""); err != nil {
			return r, err
		}
		r.act = DelHeader
		r.name = []byte(a.DelHeader)
	case config.ActionSetPath:
		r.act = SetPath
		r.val = []byte(a.SetPath)
	case config.ActionStripPrefix:
		r.act = StripPrefix
		r.val = []byte(strings.TrimSuffix(a.StripPrefix, "/"))
	case config.ActionUseBackend:
		r.act = UseBackend
		r.target = a.UseBackend
	case config.ActionLimit:
		r.act = Limit
		r.target = a.Limit
	}
	if s.phase == config.PhaseResponse {
		switch r.act {
		case Deny, SetHeader, AddHeader, DelHeader:
		default:
			return r, fmt.Errorf("%s is not a response rule's action", r.act)
		}
	}
	return r, nil
}

// checkField refuses what validation refuses: a field name that is not a
// token, a value with CR, LF, NUL or another control character. The data
// plane writes both verbatim into a head; this is the last guard.
func checkField(name, value string) error {
	if name == "" || !config.ValidMethod(name) {
		return fmt.Errorf("header name %q is not a token", name)
	}
	for i := 0; i < len(value); i++ {
		if c := value[i]; c < ' ' && c != '\t' || c == 0x7f {
			return fmt.Errorf("header value of %s has a control character", name)
		}
	}
	return nil
}

func (s *Set) cond(c *config.RuleCond, depth int) (*cond, error) {
	if depth > config.MaxRuleNotDepth {
		return nil, errors.New("not nested too deep")
	}
	out := &cond{}
	add := func(l leaf) {
		l.pre = -1
		if s.phase == config.PhaseResponse {
			switch l.kind {
			case lHost, lPath, lPathPrefix, lMethod, lQuery:
				l.pre = int32(s.npre)
				s.npre++
			}
		}
		out.leaves = append(out.leaves, l)
	}
	if c.Host != "" {
		l := leaf{kind: lHost}
		h := strings.ToLower(c.Host)
		if strings.HasPrefix(h, "*.") {
			l.suffix, h = true, h[1:]
		}
		l.val = []byte(h)
		add(l)
	}
	if c.Path != "" {
		add(leaf{kind: lPath, val: normalise(c.Path)})
	}
	if c.PathPrefix != "" {
		add(leaf{kind: lPathPrefix, val: normalise(c.PathPrefix)})
	}
	if c.Method != "" {
		add(leaf{kind: lMethod, val: []byte(c.Method)})
	}
	if h := c.Header; h != nil {
		l := leaf{kind: lHeader, name: []byte(h.Name), mode: mPresent}
		switch {
		case h.Equals != nil:
			l.mode, l.val = mEquals, []byte(*h.Equals)
		case h.Prefix != nil:
			l.mode, l.val = mPrefix, []byte(*h.Prefix)
		}
		add(l)
	}
	if q := c.Query; q != nil {
		l := leaf{kind: lQuery, name: []byte(q.Name), mode: mPresent}
		if q.Equals != nil {
			l.mode, l.val = mEquals, []byte(*q.Equals)
		}
		add(l)
	}
	if len(c.Src) > 0 {
		l := leaf{kind: lSrc}
		for _, p := range c.Src {
			pf, err := config.ParseRuleSrc(p)
			if err != nil {
				return nil, err
			}
			l.prefixes = append(l.prefixes, pf)
		}
		add(l)
	}
	if c.TLS != nil {
		add(leaf{kind: lTLS, tls: *c.TLS})
	}
	if c.SNI != "" {
		s.sni = true
		l := leaf{kind: lSNI}
		h := strings.ToLower(c.SNI)
		if strings.HasPrefix(h, "*.") {
			l.suffix, h = true, h[1:]
		}
		l.val = []byte(h)
		add(l)
	}
	if c.Status != 0 {
		if s.phase != config.PhaseResponse {
			return nil, errors.New("status is a response rule's condition")
		}
		add(leaf{kind: lStatus, status: c.Status})
	}
	if c.Not != nil {
		n, err := s.cond(c.Not, depth+1)
		if err != nil {
			return nil, err
		}
		out.nots = append(out.nots, n)
	}
	return out, nil
}

// normalise is a configured path in the form request paths are compared
// in (NormPath).
func normalise(p string) []byte {
	var scratch []byte
	return append([]byte(nil), http1.NormPath([]byte(p), &scratch)...)
}

// denyAnswer is the whole response of a deny rule: a text body (the
// configured one, else "<status> <reason>"), no-cache, and the connection
// closed after it, as the proxy's own error answers.
func denyAnswer(status int, body string) []byte {
	if body == "" {
		body = strconv.Itoa(status) + " " + http1.StatusText(status)
		body = strings.TrimSuffix(body, " ") + "\n"
	}
	d := http1.AppendStatusLine(nil, status, nil)
	d = append(d, "Content-Type: text/plain\r\n"...)
	d = http1.AppendContentLength(d, int64(len(body)))
	d = append(d, "Cache-Control: no-cache\r\nConnection: close\r\n\r\n"...)
	return append(d, body...)
}

// Len is the number of rules; Words the length of the hit bit set a
// Result needs for the set (0 for a nil set).
func (s *Set) Len() int {
	if s == nil {
		return 0
	}
	return len(s.rules)
}

// Words is the length of the bit sets Eval and Precompute fill.
func (s *Set) Words() int {
	if s == nil {
		return 0
	}
	return max(s.words, (s.npre+63)/64)
}

// Precomputes reports whether response rules test the request (Precompute
// has work).
func (s *Set) Precomputes() bool { return s != nil && s.npre > 0 }

// Rewrites: the set has header or path actions.
func (s *Set) Rewrites() bool { return s != nil && (len(s.fields) > 0 || s.paths) }

// TestsSNI: a condition tests the server name the client asked for.
func (s *Set) TestsSNI() bool { return s != nil && s.sni }

// Paths: the set has set_path or strip_prefix actions.
func (s *Set) Paths() bool { return s != nil && s.paths }

// Action returns the action of rule i and its target (use_backend's
// backend, limit's limit name).
func (s *Set) Action(i int) (Action, string) { return s.rules[i].act, s.rules[i].target }

// Status is the status of deny rule i, the code of redirect rule i.
func (s *Set) Status(i int) int { return s.rules[i].status }

// Hits returns each rule's matches since the set was compiled, summed
// over the loops (any goroutine).
func (s *Set) Hits() []int64 {
	if s == nil {
		return nil
	}
	out := make([]int64, len(s.rules))
	for l := 0; l < s.loops; l++ {
		base := l * s.stride
		for j := range out {
			out[j] += s.cnt[base+j].Load()
		}
	}
	return out
}

// count adds a match of rule i on loop.
func (s *Set) count(loop, i int) {
	if uint(loop) < uint(s.loops) {
		s.cnt[loop*s.stride+i].Add(1)
	}
}
