package config

import (
	"net/netip"
	"strconv"
	"strings"
)

// Rules are a frontend's request and response rules (HAProxy's
// http-request and http-response, Caddy's header_up, header_down and
// redir), each list run in order. An http frontend's request rules run
// once a request head is complete, before routes; its response rules once
// a server's final response head is parsed. A tcp frontend has request
// rules only, with src and sni conditions and deny (the connection is
// closed). core/rules compiles them once per generation; it documents
// what each condition compares.
type Rules struct {
	Request  []Rule `json:"request,omitempty"`
	Response []Rule `json:"response,omitempty"`
}

// Rule is one rule: when every condition of When holds (absent: always),
// the action of Do is taken.
type Rule struct {
	When *RuleCond  `json:"when,omitempty"`
	Do   RuleAction `json:"do"`
}

// RuleCond is a rule's condition: every member given must hold.
type RuleCond struct {
	// Host is the request's Host without its port, compared
	// case-insensitively; "*.example.com" matches its subdomains.
	Host string `json:"host,omitempty" example:"www.example.com"`
	// Path is the request path (normalised as routes normalise it, the
	// query left out), compared exactly.
	Path string `json:"path,omitempty" example:"/login"`
	// PathPrefix matches a path that starts with it (normalised, as
	// route path_prefix does).
	PathPrefix string `json:"path_prefix,omitempty" example:"/api/"`
	// Method is the request method, compared exactly.
	Method string `json:"method,omitempty" example:"POST"`
	// Header tests a field of the message of the phase: the request's in
	// request rules, the response's in response rules.
	Header *HeaderCond `json:"header,omitempty"`
	// Query tests a parameter of the request's query string, compared as
	// sent (no percent-decoding).
	Query *QueryCond `json:"query,omitempty"`
	// Src lists CIDR prefixes (or addresses); the client's address (the
	// one a PROXY header gave, when a bind accepts one) must be in one.
	Src []string `json:"src,omitempty" example:"10.0.0.0/8"`
	// TLS: whether the client connection is TLS.
	TLS *bool `json:"tls,omitempty"`
	// SNI is the server name the client's TLS ClientHello asked for
	// (lower case; "*.suffix" matches its subdomains).
	SNI string `json:"sni,omitempty" example:"api.example.com"`
	// Status is the response's status code (response rules only).
	Status int `json:"status,omitempty" example:"404"`
	// Not holds when its own conditions do not all hold.
	Not *RuleCond `json:"not,omitempty"`
}

// HeaderCond tests the fields named Name (case-insensitively): one of
// them equals Equals, or starts with Prefix (both case-sensitive), or,
// with Present, one exists. Exactly one of the three is given.
type HeaderCond struct {
	Name    string  `json:"name" example:"X-Api-Key"`
	Equals  *string `json:"equals,omitempty"`
	Prefix  *string `json:"prefix,omitempty"`
	Present bool    `json:"present,omitempty"`
}

// QueryCond tests a query parameter: one named Name exists and, when
// Equals is given, has that value.
type QueryCond struct {
	Name   string  `json:"name" example:"debug"`
	Equals *string `json:"equals,omitempty"`
}

// RuleAction is what a rule does; exactly one member is given.
type RuleAction struct {
	// Deny answers the request (or replaces the response) with Status and
	// Body, and closes the connection; the access log says PR.
	Deny *DenyAction `json:"deny,omitempty"`
	// Redirect answers with a redirection (request rules).
	Redirect *RedirectAction `json:"redirect,omitempty"`
	// SetHeader replaces every field of that name with one; AddHeader
	// appends one; DelHeader removes every field of that name. They act
	// on the request (request rules) or the response (response rules).
	SetHeader *HeaderAction `json:"set_header,omitempty"`
	AddHeader *HeaderAction `json:"add_header,omitempty"`
	DelHeader string        `json:"del_header,omitempty" example:"Server"`
	// SetPath replaces the path of the request forwarded (its query is
	// kept); StripPrefix removes a leading prefix from it (request rules).
	SetPath     string `json:"set_path,omitempty" example:"/index.html"`
	StripPrefix string `json:"strip_prefix,omitempty" example:"/api"`
	// UseBackend sends the request to this backend; the first matching
	// use_backend wins over the routes (request rules).
	UseBackend string `json:"use_backend,omitempty" example:"web"`
	// Limit sends the request to a limit of the frontend (its limits
	// with track "rules"; request rules).
	Limit string `json:"limit,omitempty" example:"per_ip"`
}

// DenyAction is the answer of a deny rule: Status (default 403, 400-599)
// and an optional text body.
type DenyAction struct {
	Status int    `json:"status" example:"403"`
	Body   string `json:"body,omitempty" example:"forbidden"`
}

// RedirectAction answers with a redirection: to the same host, path and
// query with another Scheme (and Port, 0 = the scheme's default), or to
// Location as given. Code is 301, 302 (default), 307 or 308.
type RedirectAction struct {
	Scheme   string `json:"scheme,omitempty" example:"https"`
	Port     int    `json:"port,omitempty" example:"8443"`
	Location string `json:"location,omitempty"`
	Code     int    `json:"code" example:"302"`
}

// HeaderAction is a field of set_header and add_header.
type HeaderAction struct {
	Name  string `json:"name" example:"X-Frame-Options"`
	Value string `json:"value" example:"DENY"`
}

// Bounds of rules: enough for any hand-written list, small enough that a
// request evaluates them in microseconds and one rewritten head fits a
// buffer.
const (
	MaxRulesPerPhase = 1000
	MaxRuleNotDepth  = 4    // not inside not inside ...
	MaxRuleSrc       = 256  // prefixes of one src condition
	MaxRuleValue     = 1024 // a header value, a match string, a path, a location
	MaxRuleBody      = 1024 // a deny body
	MaxRuleName      = 128  // a header or parameter name
)

// Rule phases.
const (
	PhaseRequest  = "request"
	PhaseResponse = "response"
)

// Actions' names, as their JSON members.
const (
	ActionDeny        = "deny"
	ActionRedirect    = "redirect"
	ActionSetHeader   = "set_header"
	ActionAddHeader   = "add_header"
	ActionDelHeader   = "del_header"
	ActionSetPath     = "set_path"
	ActionStripPrefix = "strip_prefix"
	ActionUseBackend  = "use_backend"
	ActionLimit       = "limit"
)

// Kind is the name of the one action a is (its JSON member), "" when a
// gives none; the second result counts the members given.
func (a *RuleAction) Kind() (string, int) {
	kind, n := "", 0
	set := func(on bool, k string) {
		if on {
			if n == 0 {
				kind = k
			}
			n++
		}
	}
	set(a.Deny != nil, ActionDeny)
	set(a.Redirect != nil, ActionRedirect)
	set(a.SetHeader != nil, ActionSetHeader)
	set(a.AddHeader != nil, ActionAddHeader)
	set(a.DelHeader != "", ActionDelHeader)
	set(a.SetPath != "", ActionSetPath)
	set(a.StripPrefix != "", ActionStripPrefix)
	set(a.UseBackend != "", ActionUseBackend)
	set(a.Limit != "", ActionLimit)
	return kind, n
}

// normalize fills the defaults a stored document always says: deny
// status 403, redirect code 302.
func (r *Rules) normalize() {
	for _, l := range [][]Rule{r.Request, r.Response} {
		for i := range l {
			if d := l[i].Do.Deny; d != nil && d.Status == 0 {
				d.Status = 403
			}
			if d := l[i].Do.Redirect; d != nil && d.Code == 0 {
				d.Code = 302
			}
		}
	}
}

func (r *Rules) clone() *Rules {
	out := &Rules{}
	cl := func(l []Rule) []Rule {
		if l == nil {
			return nil
		}
		o := make([]Rule, len(l))
		for i := range l {
			o[i] = l[i].clone()
		}
		return o
	}
	out.Request, out.Response = cl(r.Request), cl(r.Response)
	return out
}

func (r *Rule) clone() Rule {
	out := Rule{When: r.When.clone()}
	a := r.Do
	if a.Deny != nil {
		d := *a.Deny
		a.Deny = &d
	}
	if a.Redirect != nil {
		d := *a.Redirect
		a.Redirect = &d
	}
	if a.SetHeader != nil {
		d := *a.SetHeader
		a.SetHeader = &d
	}
	if a.AddHeader != nil {
		d := *a.AddHeader
		a.AddHeader = &d
	}
	out.Do = a
	return out
}

func (c *RuleCond) clone() *RuleCond {
	if c == nil {
		return nil
	}
	out := *c
	cs := func(p *string) *string {
		if p == nil {
			return nil
		}
		v := *p
		return &v
	}
	if c.Header != nil {
		h := *c.Header
		h.Equals, h.Prefix = cs(h.Equals), cs(h.Prefix)
		out.Header = &h
	}
	if c.Query != nil {
		q := *c.Query
		q.Equals = cs(q.Equals)
		out.Query = &q
	}
	out.Src = cloneStrings(c.Src)
	if c.TLS != nil {
		v := *c.TLS
		out.TLS = &v
	}
	out.Not = c.Not.clone()
	return &out
}

// ParseRuleSrc parses an entry of a src condition: a CIDR prefix (host
// bits set are refused) or an address. IPv4-mapped forms are read as
// IPv4, as the data plane compares unmapped client addresses.
func ParseRuleSrc(s string) (netip.Prefix, error) { return ParseTrusted(s) }

// Fields a header action must not touch: the framing of the message
// (Content-Length, Transfer-Encoding), the connection's own fields
// (Connection and the hop-by-hop fields it may name, Upgrade, Keep-Alive,
// TE, Trailer, Proxy-Connection) and Host, which the server routes on and
// which must stay the one the request was checked with. A rule that sets
// any of them would let a configuration smuggle requests or break the
// exchange.
var framingFields = [...]string{
	"content-length", "transfer-encoding", "connection", "upgrade", "host",
	"te", "trailer", "keep-alive", "proxy-connection",
}

// refusedHeaderName says why a header action must not name n ("" = it may).
func refusedHeaderName(n string) string {
	if n == "" {
		return "a header name is required"
	}
	if len(n) > MaxRuleName {
		return "a header name is at most " + strconv.Itoa(MaxRuleName) + " bytes"
	}
	if !ValidMethod(n) { // a token: the same characters as a method
		return "a header name is an HTTP token (letters, digits and !#$%&'*+-.^_`|~; no space, colon, CR, LF or NUL)"
	}
	l := strings.ToLower(n)
	for _, f := range framingFields {
		if l == f {
			return "rules may not change " + n + ": it frames the message or belongs to the connection"
		}
	}
	if strings.HasPrefix(l, ":") {
		return "pseudo-header fields are not headers"
	}
	return ""
}

// validFieldValue: visible ASCII, space and tab, and obs-text, no leading
// or trailing whitespace (RFC 9110 §5.5); no CR, LF, NUL or other control.
func validFieldValue(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < ' ' && c != '\t' || c == 0x7f {
			return false
		}
	}
	return len(s) == 0 || (s[0] != ' ' && s[0] != '\t' && s[len(s)-1] != ' ' && s[len(s)-1] != '\t')
}

// rules checks a frontend's rules; fp is the frontend's pointer.
func (v *validation) rules(fp string, f *Frontend) {
	r := f.Rules
	if r == nil {
		return
	}
	rp := fp + "/rules"
	for _, ph := range [...]struct {
		name string
		list []Rule
	}{{PhaseRequest, r.Request}, {PhaseResponse, r.Response}} {
		pp := rp + "/" + ph.name
		if len(ph.list) > MaxRulesPerPhase {
			v.p.addf(pp, CodeOutOfRange, "at most %d %s rules", MaxRulesPerPhase, ph.name)
			continue
		}
		if f.Mode == ModeTCP && ph.name == PhaseResponse && len(ph.list) > 0 {
			v.p.add(pp, CodeModeMismatch, "a tcp frontend has request rules only")
			continue
		}
		for i := range ph.list {
			v.rule(pp+"/"+strconv.Itoa(i), f, ph.name, &ph.list[i])
		}
	}
}

func (v *validation) rule(p string, f *Frontend, phase string, r *Rule) {
	tcp := f.Mode == ModeTCP
	if r.When != nil {
		v.ruleCond(p+"/when", tcp, phase, r.When, 0)
	}
	a := &r.Do
	dp := p + "/do"
	kind, n := a.Kind()
	switch {
	case n == 0:
		v.p.add(dp, CodeRequired, "a rule needs one action: deny, redirect, set_header, add_header, del_header, set_path, strip_prefix, use_backend or limit")
		return
	case n > 1:
		v.p.add(dp, CodeInvalid, "a rule has exactly one action; write one rule per action")
		return
	}
	ap := dp + "/" + kind
	if tcp && kind != ActionDeny {
		v.p.addf(ap, CodeModeMismatch, "%s needs mode http; a tcp frontend's rules deny (close) only", kind)
		return
	}
	if phase == PhaseResponse {
		switch kind {
		case ActionDeny, ActionSetHeader, ActionAddHeader, ActionDelHeader:
		default:
			v.p.addf(ap, CodeInvalid, "%s is a request rule's action; response rules deny or change headers", kind)
			return
		}
	}
	switch kind {
	case ActionDeny:
		d := a.Deny
		if tcp {
			if d.Status != 403 && d.Status != 0 || d.Body != "" {
				v.p.add(ap, CodeInvalid, "a tcp frontend's deny closes the connection: no status, no body")
			}
			return
		}
		if d.Status < 400 || d.Status > 599 {
			v.p.addf(ap+"/status", CodeOutOfRange, "deny status %d must be 400-599", d.Status)
		}
		if len(d.Body) > MaxRuleBody {
			v.p.addf(ap+"/body", CodeOutOfRange, "a deny body is at most %d bytes", MaxRuleBody)
		}
	case ActionRedirect:
		d := a.Redirect
		switch d.Code {
		case 301, 302, 307, 308:
		default:
			v.p.addf(ap+"/code", CodeOneOf, "redirect code %d must be 301, 302, 307 or 308", d.Code)
		}
		switch {
		case d.Location != "" && (d.Scheme != "" || d.Port != 0):
			v.p.add(ap, CodeInvalid, "a redirect gives a location, or a scheme (and port), not both")
		case d.Location != "":
			if len(d.Location) > MaxRuleValue || !validRequestTarget(d.Location) {
				v.p.addf(ap+"/location", CodeFormat, "location must be a URI of at most %d bytes, without spaces or control characters", MaxRuleValue)
			}
		case d.Scheme != "":
			if d.Scheme != "http" && d.Scheme != "https" {
				v.p.addf(ap+"/scheme", CodeOneOf, "redirect scheme %q must be \"http\" or \"https\"", truncateString(d.Scheme, 80))
			}
			if d.Port < 0 || d.Port > 65535 {
				v.p.addf(ap+"/port", CodeOutOfRange, "port %d must be 1-65535 (0: the scheme's)", d.Port)
			}
		default:
			v.p.add(ap, CodeRequired, "a redirect needs a scheme or a location")
		}
	case ActionSetHeader, ActionAddHeader:
		h := a.SetHeader
		if h == nil {
			h = a.AddHeader
		}
		if why := refusedHeaderName(h.Name); why != "" {
			v.p.add(ap+"/name", CodeFormat, why)
		}
		if len(h.Value) > MaxRuleValue || !validFieldValue(h.Value) {
			v.p.addf(ap+"/value", CodeFormat, "a header value is at most %d bytes of visible characters, spaces and tabs inside (no CR, LF, NUL or other control)", MaxRuleValue)
		}
	case ActionDelHeader:
		if why := refusedHeaderName(a.DelHeader); why != "" {
			v.p.add(ap, CodeFormat, why)
		}
	case ActionSetPath, ActionStripPrefix:
		s := a.SetPath
		if kind == ActionStripPrefix {
			s = a.StripPrefix
		}
		if !strings.HasPrefix(s, "/") || len(s) > MaxRuleValue || !validRequestTarget(s) || strings.ContainsAny(s, "?") {
			v.p.addf(ap, CodeFormat, "%s must be a path starting with \"/\", at most %d bytes, without query, spaces or control characters", kind, MaxRuleValue)
		}
	case ActionUseBackend:
		v.backendRef(ap, f.Mode, a.UseBackend)
	case ActionLimit:
		v.ruleLimit(ap, f, a.Limit)
	}
}

func (v *validation) ruleCond(p string, tcp bool, phase string, c *RuleCond, depth int) {
	if tcp {
		for _, m := range [...]struct {
			name string
			on   bool
		}{{"host", c.Host != ""}, {"path", c.Path != ""}, {"path_prefix", c.PathPrefix != ""}, {"method", c.Method != ""},
			{"header", c.Header != nil}, {"query", c.Query != nil}, {"tls", c.TLS != nil}, {"status", c.Status != 0}} {
			if m.on {
				v.p.addf(p+"/"+m.name, CodeModeMismatch, "%s needs mode http; a tcp frontend's rules test src and sni", m.name)
			}
		}
	}
	if c.Host != "" && !validRouteHost(c.Host) {
		v.p.addf(p+"/host", CodeFormat, "host %q must be a host name, an IP literal or \"*.suffix\"", truncateString(c.Host, 80))
	}
	for _, m := range [...]struct{ name, val string }{{"path", c.Path}, {"path_prefix", c.PathPrefix}} {
		if m.val != "" && (!strings.HasPrefix(m.val, "/") || len(m.val) > MaxRuleValue || !validRequestTarget(m.val)) {
			v.p.addf(p+"/"+m.name, CodeFormat, "%s must start with \"/\", at most %d bytes, without spaces or control characters", m.name, MaxRuleValue)
		}
	}
	if c.Method != "" && (!ValidMethod(c.Method) || len(c.Method) > MaxRuleName) {
		v.p.addf(p+"/method", CodeFormat, "method %q is not an HTTP token", truncateString(c.Method, 80))
	}
	if h := c.Header; h != nil {
		hp := p + "/header"
		if h.Name == "" || len(h.Name) > MaxRuleName || !ValidMethod(h.Name) {
			v.p.add(hp+"/name", CodeFormat, "a header name is an HTTP token of at most "+strconv.Itoa(MaxRuleName)+" bytes")
		}
		n := 0
		for _, s := range [...]*string{h.Equals, h.Prefix} {
			if s != nil {
				n++
				if len(*s) > MaxRuleValue {
					v.p.addf(hp, CodeOutOfRange, "a value to compare is at most %d bytes", MaxRuleValue)
				}
			}
		}
		if h.Present {
			n++
		}
		if n != 1 {
			v.p.add(hp, CodeInvalid, "a header condition gives exactly one of equals, prefix, present")
		}
	}
	if q := c.Query; q != nil {
		qp := p + "/query"
		if q.Name == "" || len(q.Name) > MaxRuleName || !validRequestTarget(q.Name) || strings.ContainsAny(q.Name, "&=") {
			v.p.add(qp+"/name", CodeFormat, "a query parameter name is 1-"+strconv.Itoa(MaxRuleName)+" bytes without &, =, spaces or control characters")
		}
		if q.Equals != nil && (len(*q.Equals) > MaxRuleValue || !validRequestTarget(*q.Equals) || strings.Contains(*q.Equals, "&")) {
			v.p.add(qp+"/equals", CodeFormat, "a query value is compared as sent: no &, spaces or control characters")
		}
	}
	if len(c.Src) > MaxRuleSrc {
		v.p.addf(p+"/src", CodeOutOfRange, "at most %d prefixes", MaxRuleSrc)
	} else {
		for i, s := range c.Src {
			if _, err := ParseRuleSrc(s); err != nil {
				v.p.addf(p+"/src/"+strconv.Itoa(i), CodeFormat, "src %q must be a CIDR prefix (10.0.0.0/8, fd00::/8) or an IP address", truncateString(s, 80))
			}
		}
	}
	if c.SNI != "" && !ValidSNI(c.SNI) {
		v.p.addf(p+"/sni", CodeFormat, "sni %q must be a lower-case host name or \"*.\" followed by one", truncateString(c.SNI, 80))
	}
	if c.Status != 0 {
		if phase != PhaseResponse {
			v.p.add(p+"/status", CodeInvalid, "status is a response rule's condition")
		} else if c.Status < 100 || c.Status > 599 {
			v.p.addf(p+"/status", CodeOutOfRange, "status %d must be 100-599", c.Status)
		}
	}
	if c.Not != nil {
		if depth+1 > MaxRuleNotDepth {
			v.p.addf(p+"/not", CodeOutOfRange, "not is nested at most %d deep", MaxRuleNotDepth)
			return
		}
		v.ruleCond(p+"/not", tcp, phase, c.Not, depth+1)
	}
}

// ruleLimit checks a rule's limit action: it names a limit of the
// frontend whose track is "rules" (one with track "always" counts every
// request already: a rule would count them twice).
func (v *validation) ruleLimit(ap string, f *Frontend, name string) {
	for i := range f.Limits {
		if l := &f.Limits[i]; l.Name == name {
			if l.Track != LimitTrackRules {
				v.p.addf(ap, CodeInvalid, "limit %q counts every request (track %q): a rule's limit action needs a limit with track \"rules\"", truncateString(name, 80), l.Track)
			}
			return
		}
	}
	v.p.addf(ap, CodeUnknownReference, "limit %q is not a limit of this frontend", truncateString(name, 80))
}

// Clone returns a deep copy of r.
func (r *Rules) Clone() *Rules { return r.clone() }
