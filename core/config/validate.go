package config

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/go-playground/validator/v10"
)

// Codes of FieldError. They are stable: scripts and the UI match on them.
const (
	CodeRequired         = "required"
	CodeOneOf            = "one_of"
	CodeOutOfRange       = "out_of_range"
	CodeFormat           = "format"
	CodeDuplicate        = "duplicate"
	CodeUnknownReference = "unknown_reference"
	CodeModeMismatch     = "mode_mismatch"
	CodeSum              = "sum"
	CodeCPUUnknown       = "cpu_unknown"
	CodeAddressConflict  = "address_conflict"
	CodeFdLimit          = "fd_limit" // more connections than the fd limit allows
	CodeInvalid          = "invalid"  // a field rule without a more precise code
)

// Limits enforced by the semantic rules.
const (
	MinBufsize  = 1024
	MinPipesize = 4096
	MaxNameLen  = 63
)

// fieldValidator is built once: validator.Validate caches the parsed struct
// tags per type and is safe for concurrent use, so this is a lazily built,
// effectively immutable value, not mutable package state.
var fieldValidator = sync.OnceValue(func() *validator.Validate {
	v := validator.New(validator.WithRequiredStructEnabled())
	v.RegisterTagNameFunc(func(f reflect.StructField) string {
		name, _, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			return ""
		}
		return name
	})
	return v
})

// Validate checks a Normalize()d config against the field rules (struct
// tags, go-playground/validator) and the semantic rules of the package doc.
// It returns nil or a *ValidationError listing every problem, each with a
// JSON pointer into the whole document, sorted in document order.
//
// env describes the machine; an empty Env skips the checks that need it
// (CPU ids exist, thread ids below the machine's CPU count when nbthread is
// 0).
func Validate(c *Config, env Env) error {
	return validate(c, env, nil, nil)
}

// validate is Validate; prev (may be nil) is a config known to be valid,
// whose unchanged servers need not pass the field rules again. spans are
// serverSpans(prev, c), computed here when nil.
func validate(c *Config, env Env, prev *Config, spans []listSpan) error {
	var p problems
	if c == nil {
		p.add("", CodeRequired, "a config document is required")
		return p.err()
	}
	if prev != nil && spans == nil {
		spans = serverSpans(prev, c)
	}
	p.fieldRules(c, spans)
	vc := validation{c: c, env: env, p: &p, spans: spans}
	if s, ok := c.Nodes[env.NodeName]; ok && env.NodeName != "" {
		vc.self = &s
	}
	vc.frontends()
	vc.backends()
	vc.tuning()
	vc.cpuMap()
	vc.irq()
	vc.certificates()
	vc.nodes()
	return p.err()
}

// ValidName reports whether s is a valid object name: 1 to 63 characters of
// [a-z0-9_-], starting and ending with a letter or digit.
func ValidName(s string) bool {
	if len(s) == 0 || len(s) > MaxNameLen {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		alnum := c >= 'a' && c <= 'z' || c >= '0' && c <= '9'
		if !alnum && c != '-' && c != '_' {
			return false
		}
		if !alnum && (i == 0 || i == len(s)-1) {
			return false
		}
	}
	return true
}

type problems struct {
	list []FieldError
}

func (p *problems) add(field, code, msg string) {
	p.list = append(p.list, FieldError{Field: field, Code: code, Message: msg})
}

func (p *problems) addf(field, code, format string, args ...any) {
	p.add(field, code, fmt.Sprintf(format, args...))
}

// err sorts the problems in document order, drops exact repeats, and
// decides the kind: a document whose only problems are clashes between
// names or addresses conflicts with the current state (409); anything else
// is invalid (422).
func (p *problems) err() error {
	if len(p.list) == 0 {
		return nil
	}
	slices.SortStableFunc(p.list, func(a, b FieldError) int {
		if c := comparePointers(a.Field, b.Field); c != 0 {
			return c
		}
		return cmp.Compare(a.Code, b.Code)
	})
	p.list = slices.CompactFunc(p.list, func(a, b FieldError) bool {
		return a.Field == b.Field && a.Code == b.Code
	})
	conflict := true
	for _, fe := range p.list {
		if fe.Code != CodeDuplicate && fe.Code != CodeAddressConflict {
			conflict = false
			break
		}
	}
	return &ValidationError{Errors: p.list, Conflict: conflict}
}

// topLevelRank orders the members of a Config as they appear in the
// document.
var topLevelRank = map[string]int{"generation": 0, "frontends": 1, "backends": 2, "tuning": 3, "cpu_map": 4, "irq": 5, "certificates": 6, "nodes": 7}

// comparePointers orders JSON pointers segment by segment: the top-level
// members in document order, numeric segments numerically (so
// "/backends/2" sorts before "/backends/10"), other members by name.
func comparePointers(a, b string) int {
	for depth := 0; a != "" || b != ""; depth++ {
		var sa, sb string
		sa, a = nextSegment(a)
		sb, b = nextSegment(b)
		if sa == sb {
			continue
		}
		if depth == 0 {
			ra, oka := topLevelRank[sa]
			rb, okb := topLevelRank[sb]
			if oka && okb {
				return cmp.Compare(ra, rb)
			}
		}
		na, ea := strconv.Atoi(sa)
		nb, eb := strconv.Atoi(sb)
		if ea == nil && eb == nil {
			return cmp.Compare(na, nb)
		}
		return cmp.Compare(sa, sb)
	}
	return 0
}

func nextSegment(p string) (seg, rest string) {
	p = strings.TrimPrefix(p, "/")
	if i := strings.IndexByte(p, '/'); i >= 0 {
		return p[:i], p[i:]
	}
	return p, ""
}

// fieldRules runs the struct-tag rules object by object and turns each
// failure into a FieldError with a JSON pointer and one of our codes.
//
// spans, when not nil, compare c's servers with those of a config that
// already passed Validate (serverSpans): a server equal to the server of
// the same name in the backend of the same name there is not checked
// again (the field rules of a server depend on nothing else). This keeps a
// one-server change in a config of 10 000 servers from re-running the
// reflective validator, or even comparing, 10 000 times.
func (p *problems) fieldRules(c *Config, spans []listSpan) {
	for i := range c.Frontends {
		p.structRules("/frontends/"+strconv.Itoa(i), &c.Frontends[i])
	}
	for i := range c.Backends {
		b := &c.Backends[i]
		bp := "/backends/" + strconv.Itoa(i)
		shallow := *b
		shallow.Servers = nil
		p.structRules(bp, &shallow)
		servers, first := b.Servers, 0
		var pb []*Server
		if spans != nil && spans[i].had {
			// outside the span, the servers are prev's
			pb, servers = spans[i].window(b.Servers)
			first = spans[i].head
		}
		pm := prevServers{list: pb}
		for w := range servers {
			j := first + w
			s := b.Servers[j]
			if s == nil {
				p.add(bp+"/servers/"+strconv.Itoa(j), CodeRequired, "a server must be an object, not null")
				continue
			}
			if o := pm.find(w, s.Name); o != nil && sameServer(s, o) {
				continue
			}
			p.structRules(bp+"/servers/"+strconv.Itoa(j), s)
			if s.TLS != nil {
				p.serverTLS(bp+"/servers/"+strconv.Itoa(j)+"/tls", s.TLS)
			}
		}
	}
	p.structRules("/tuning", &c.Tuning)
	p.structRules("/cpu_map", &c.CPUMap)
	p.structRules("/irq", &c.IRQ)
	for _, name := range c.NodeNames() {
		s := c.Nodes[name]
		p.structRules("/nodes/"+escapePointer(name), &s)
	}
}

// prevServers finds the servers of the previous generation by name. A write
// changes one server among many: the server at position j of the new list
// is nearly always at j, j+1 or j-1 of the old one (shifted by the one
// created or deleted before it), so the name index is built only when none
// of those match.
type prevServers struct {
	list  []*Server
	shift int
	index map[string]int
}

func (p *prevServers) find(j int, name string) *Server {
	for _, d := range [3]int{0, 1, -1} {
		if k := j + p.shift + d; k >= 0 && k < len(p.list) && p.list[k].Name == name {
			p.shift += d
			return p.list[k]
		}
	}
	if len(p.list) == 0 {
		return nil
	}
	if p.index == nil {
		p.index = make(map[string]int, len(p.list))
		for k := range p.list {
			if _, dup := p.index[p.list[k].Name]; !dup {
				p.index[p.list[k].Name] = k
			}
		}
	}
	k, ok := p.index[name]
	if !ok {
		return nil
	}
	p.shift = k - j
	return p.list[k]
}

// structRules validates one struct (a pointer) whose JSON pointer is prefix.
func (p *problems) structRules(prefix string, v any) {
	err := fieldValidator().Struct(v)
	if err == nil {
		return
	}
	var verrs validator.ValidationErrors
	if !errors.As(err, &verrs) {
		p.add(prefix, CodeInvalid, err.Error())
		return
	}
	for _, fe := range verrs {
		ptr := prefix + namespaceToPointer(fe.Namespace())
		switch fe.Tag() {
		case "required":
			p.add(ptr, CodeRequired, "is required")
		case "oneof":
			p.addf(ptr, CodeOneOf, "must be one of: %s", strings.ReplaceAll(fe.Param(), " ", ", "))
		case "gte", "min":
			if fe.Kind() == reflect.Slice && fe.Param() == "1" {
				p.add(ptr, CodeRequired, "must not be empty")
			} else {
				p.addf(ptr, CodeOutOfRange, "must be at least %s", fe.Param())
			}
		case "lte", "max":
			p.addf(ptr, CodeOutOfRange, "must be at most %s", fe.Param())
		default:
			p.addf(ptr, CodeInvalid, "fails rule %q", fe.Tag())
		}
	}
}

// namespaceToPointer turns validator's "Config.frontends[0].binds[1].port"
// (json tag names registered above) into "/frontends/0/binds/1/port".
func namespaceToPointer(ns string) string {
	_, rest, ok := strings.Cut(ns, ".")
	if !ok {
		return ""
	}
	var b strings.Builder
	for seg := range strings.SplitSeq(rest, ".") {
		name, idx, _ := strings.Cut(seg, "[")
		b.WriteByte('/')
		b.WriteString(escapePointer(name))
		for idx != "" {
			var i string
			i, idx, _ = strings.Cut(idx, "]")
			b.WriteByte('/')
			b.WriteString(escapePointer(i))
			idx = strings.TrimPrefix(idx, "[")
		}
	}
	return b.String()
}

// validation holds the state of one run of the semantic rules.
type validation struct {
	c   *Config
	env Env
	p   *problems
	// self is the section of Nodes of the node env describes
	// (Env.NodeName), nil without one: what it replaces is checked in it
	// against the machine, not in the document's values (nodes.go).
	self *NodeSettings
	// spans, when not nil, compare the servers with those of a config
	// that passed Validate (serverSpans): servers it holds unchanged,
	// under a backend of the same mode, need no check again (backends).
	spans []listSpan
}

// nbthread is the number of loop threads the document's tuning.nbthread
// gives, or 0 when it depends on a machine that env does not describe (or
// that runs its own nbthread).
func (v *validation) nbthread() int {
	if v.c.Tuning.Nbthread > 0 {
		return v.c.Tuning.Nbthread
	}
	if v.self != nil && v.self.Nbthread != nil {
		return 0
	}
	return len(v.env.CPUs)
}

// localNbthread is the number of loop threads the machine env describes
// runs with (0: unknown).
func (v *validation) localNbthread() int {
	if v.self != nil && v.self.Nbthread != nil {
		if *v.self.Nbthread > 0 {
			return *v.self.Nbthread
		}
		return len(v.env.CPUs)
	}
	return v.nbthread()
}

func (v *validation) name(ptr, kind, name string) {
	if name != "" && !ValidName(name) {
		v.p.addf(ptr, CodeFormat, "%s name %q must be 1-%d characters of a-z, 0-9, '-' and '_', "+
			"starting and ending with a letter or digit", kind, name, MaxNameLen)
	}
}

// uniqueNames reports the second and later uses of a name in one collection.
type uniqueNames map[string]string

func (u uniqueNames) check(p *problems, ptr, kind, name string) {
	if name == "" {
		return
	}
	if first, dup := u[name]; dup {
		p.addf(ptr, CodeDuplicate, "%s name %q is already used by %s", kind, name, first)
		return
	}
	u[name] = strings.TrimSuffix(ptr, "/name")
}

type bindRef struct {
	ptr  string
	addr netip.Addr
	port int
	node bool // the address is NodeAddress: each node's own, any address
}

// overlaps reports whether two binds cannot listen together. NodeAddress
// may become any address: it collides with itself and with the
// unspecified address of either family on the same port, but not with
// another literal (ForNode's result is validated on each node, where the
// address is known).
func (b bindRef) overlaps(o bindRef) bool {
	switch {
	case b.port != o.port:
		return false
	case b.node && o.node:
		return true
	case b.node:
		return o.addr.IsUnspecified()
	case o.node:
		return b.addr.IsUnspecified()
	}
	return addrsOverlap(b.addr, o.addr)
}

func (b bindRef) String() string {
	if b.node {
		return NodeAddress + ":" + strconv.Itoa(b.port)
	}
	return netip.AddrPortFrom(b.addr, uint16(b.port)).String()
}

func (v *validation) frontends() {
	names := uniqueNames{}
	var binds []bindRef
	nb := v.nbthread()
	for i := range v.c.Frontends {
		f := &v.c.Frontends[i]
		fp := "/frontends/" + strconv.Itoa(i)
		v.name(fp+"/name", "frontend", f.Name)
		names.check(v.p, fp+"/name", "frontend", f.Name)

		if f.DefaultBackend != "" {
			v.backendRef(fp+"/default_backend", f.Mode, f.DefaultBackend)
		}
		if f.HTTP != nil {
			v.httpOpts(fp, f.HTTP)
		}
		v.limits(fp, f)
		snis := map[string]string{}
		for j := range f.Routes {
			rp := fp + "/routes/" + strconv.Itoa(j)
			if f.Mode == ModeTCP {
				v.sniRoute(rp, &f.Routes[j], snis)
				continue
			}
			v.route(rp, f.Mode, &f.Routes[j])
		}
		v.rules(fp, f)

		bnames := uniqueNames{}
		for j := range f.Binds {
			b := &f.Binds[j]
			bp := fp + "/binds/" + strconv.Itoa(j)
			v.name(bp+"/name", "bind", b.Name)
			bnames.check(v.p, bp+"/name", "bind", b.Name)
			v.threadList(bp+"/threads", b.Threads, nb)
			if b.TLS != nil {
				v.bindTLS(bp, f, b.TLS)
			}
			if b.AcceptProxy != nil {
				v.acceptProxy(bp+"/accept_proxy", b.AcceptProxy)
			}
			if b.Address == "" {
				continue // required, reported by the field rules
			}
			addr, ok := ParseBindAddress(b.Address)
			node := b.Address == NodeAddress
			if !ok && !node {
				v.p.addf(bp+"/address", CodeFormat, "bind address %q must be an IPv4 or IPv6 literal, \"*\" or %q", b.Address, NodeAddress)
				continue
			}
			if b.Port < 1 || b.Port > 65535 {
				continue // reported by the field rules
			}
			// An IPv4-mapped IPv6 address binds the IPv4 address.
			me := bindRef{ptr: bp, addr: addr.Unmap(), port: b.Port, node: node}
			for _, o := range binds {
				if me.overlaps(o) {
					v.p.addf(bp, CodeAddressConflict, "%s overlaps %s (%s)", me, o.ptr, o)
					break
				}
			}
			binds = append(binds, me)
		}
	}
}

// acceptProxy checks the trusted peers of a bind with accept_proxy: each
// a CIDR prefix with no host bits set, or an IP address, without zone.
func (v *validation) acceptProxy(ptr string, ap *AcceptProxy) {
	for i, t := range ap.Trusted {
		if _, err := ParseTrusted(t); err != nil {
			v.p.addf(ptr+"/trusted/"+strconv.Itoa(i), CodeFormat, "%v", err)
		}
	}
}

// ParseTrusted parses an entry of accept_proxy.trusted: a CIDR prefix
// ("10.0.0.0/8", no host bits set) or an IP address (a prefix of its full
// length). An IPv4-mapped IPv6 form is read as IPv4: the data plane
// compares unmapped peer addresses.
func ParseTrusted(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(s)
		if err != nil || p.Addr().Zone() != "" {
			return netip.Prefix{}, fmt.Errorf("trusted peer %q must be a CIDR prefix (10.0.0.0/8, fd00::/8) or an IP address", s)
		}
		if p != p.Masked() {
			return netip.Prefix{}, fmt.Errorf("trusted prefix %q has host bits set: %s is meant", s, p.Masked())
		}
		if p.Addr().Is4In6() && p.Bits() >= 96 {
			p = netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
		}
		return p, nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil || a.Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("trusted peer %q must be a CIDR prefix (10.0.0.0/8, fd00::/8) or an IP address", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// ParseBindAddress parses a bind address: an IP literal, or "*" meaning all
// IPv4 addresses (0.0.0.0).
func ParseBindAddress(s string) (netip.Addr, bool) {
	if s == "*" {
		return netip.IPv4Unspecified(), true
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Addr{}, false
	}
	return a, true
}

// addrsOverlap reports whether two listening addresses on the same port
// collide: equal, or one is the unspecified address of the other's family.
// [::] and 0.0.0.0 do not collide with each other: the listener opens IPv6
// sockets with IPV6_V6ONLY semantics left to the kernel default, and if the
// kernel refuses, the apply fails with EADDRINUSE and is rolled back.
func addrsOverlap(a, b netip.Addr) bool {
	if a == b {
		return true
	}
	if a.Is4() != b.Is4() {
		return false
	}
	return a.IsUnspecified() || b.IsUnspecified()
}

func (v *validation) backendRef(ptr, mode, name string) {
	i := v.c.FindBackend(name)
	if i < 0 {
		v.p.addf(ptr, CodeUnknownReference, "backend %q does not exist", name)
		return
	}
	// A mode that is not tcp or http is reported by the field rules.
	if bm := v.c.Backends[i].Mode; bm != mode && validMode(bm) && validMode(mode) {
		v.p.addf(ptr, CodeModeMismatch, "backend %q has mode %q; this frontend has mode %q", name, bm, mode)
	}
}

func validMode(m string) bool { return m == ModeTCP || m == ModeHTTP }

// sniRoute checks a tcp frontend's route: sni only (an exact lower-case
// host name or "*." + one), once per frontend, to a tcp backend.
func (v *validation) sniRoute(rp string, r *Route, seen map[string]string) {
	for _, f := range [...]struct{ name, val string }{{"host", r.Host}, {"path_prefix", r.PathPrefix}, {"method", r.Method}} {
		if f.val != "" {
			v.p.addf(rp+"/"+f.name, CodeModeMismatch, "%s needs mode http; a tcp frontend routes on sni", f.name)
		}
	}
	switch {
	case r.SNI == "":
		v.p.add(rp+"/sni", CodeRequired, "a tcp frontend's route needs sni")
	case !ValidSNI(r.SNI):
		v.p.addf(rp+"/sni", CodeFormat, "sni %q must be a lower-case host name or \"*.\" followed by one", r.SNI)
	default:
		if prev, dup := seen[r.SNI]; dup {
			v.p.addf(rp+"/sni", CodeDuplicate, "sni %q is already routed by %s", r.SNI, prev)
		} else {
			seen[r.SNI] = rp
		}
	}
	if r.Backend != "" {
		v.backendRef(rp+"/backend", ModeTCP, r.Backend)
	}
}

// ValidSNI reports whether s is an SNI route: a lower-case host name or
// "*." followed by one.
func ValidSNI(s string) bool {
	s = strings.TrimPrefix(s, "*.")
	return ValidHostName(s) && strings.ToLower(s) == s
}

func (v *validation) route(rp, mode string, r *Route) {
	if r.SNI != "" {
		v.p.add(rp+"/sni", CodeModeMismatch, "sni routes need mode tcp; an http frontend routes on host")
	}
	if r.Host != "" && !validRouteHost(r.Host) {
		v.p.addf(rp+"/host", CodeFormat, "route host %q must be a host name, an IP literal or \"*.suffix\"", r.Host)
	}
	if r.PathPrefix != "" {
		if !strings.HasPrefix(r.PathPrefix, "/") {
			v.p.addf(rp+"/path_prefix", CodeFormat, "path_prefix %q must start with \"/\"", r.PathPrefix)
		} else if !validRequestTarget(r.PathPrefix) {
			v.p.addf(rp+"/path_prefix", CodeFormat, "path_prefix %q contains characters not allowed in a request target", r.PathPrefix)
		}
	}
	if r.Method != "" && !ValidMethod(r.Method) {
		v.p.addf(rp+"/method", CodeFormat, "method %q is not an HTTP token", r.Method)
	}
	if r.Backend != "" {
		v.backendRef(rp+"/backend", mode, r.Backend)
	}
}

func (v *validation) threadList(ptr string, threads []int, nb int) {
	seen := map[int]int{}
	for k, t := range threads {
		tp := ptr + "/" + strconv.Itoa(k)
		if first, dup := seen[t]; dup {
			v.p.addf(tp, CodeDuplicate, "thread %d is already listed at %s/%d", t, ptr, first)
			continue
		}
		seen[t] = k
		if nb > 0 && t >= nb {
			v.p.addf(tp, CodeOutOfRange, "thread %d does not exist: nbthread is %d", t, nb)
		}
	}
}

func (v *validation) backends() {
	names := uniqueNames{}
	for i := range v.c.Backends {
		b := &v.c.Backends[i]
		bp := "/backends/" + strconv.Itoa(i)
		v.name(bp+"/name", "backend", b.Name)
		names.check(v.p, bp+"/name", "backend", b.Name)
		// Thousands of servers: pointers are built only for problems.
		sp := func(j int) string { return bp + "/servers/" + strconv.Itoa(j) }
		// servers (from index first of b.Servers) are those to check, pb
		// the previous ones they are matched with by name. With the same
		// mode, only the span where the lists differ: outside it the
		// servers are the previous ones, valid and of unique names.
		servers, first := b.Servers, 0
		var pb []*Server
		sameMode := false
		if v.spans != nil && v.spans[i].had {
			pb, sameMode = v.spans[i].old, v.spans[i].oldMode == b.Mode
		}
		var kept []*Server
		windowed := false
		if sameMode {
			wo, wn := v.spans[i].window(b.Servers)
			wk := keptServers(wn, wo)
			if wk == nil && len(wo) == 0 && len(wn) <= maxAppendedScan {
				wk = make([]*Server, len(wn)) // all appended
			}
			if wk != nil {
				servers, first, kept, windowed = wn, v.spans[i].head, wk, true
			}
		}
		if !windowed {
			kept = keptServers(servers, pb)
		}
		end := first + len(servers) // of the servers checked, in b.Servers
		var snames map[string]int
		if kept == nil {
			snames = make(map[string]int, len(b.Servers))
		}
		for w := range servers {
			j := first + w
			s := b.Servers[j]
			if s == nil {
				continue // fieldRules says so
			}
			if kept != nil && kept[w] != nil && sameMode && sameServer(s, kept[w]) {
				continue // as valid as it was in prev
			}
			if s.Name != "" && !ValidName(s.Name) {
				v.name(sp(j)+"/name", "server", s.Name)
			}
			if s.Name != "" && snames != nil {
				if first, dup := snames[s.Name]; dup {
					v.p.addf(sp(j)+"/name", CodeDuplicate, "%s name %q is already used by %s", "server", s.Name, sp(first))
				} else {
					snames[s.Name] = j
				}
			} else if s.Name != "" && kept[w] == nil {
				// appended (every server after it in the span is too):
				// unique if none before it, nor after the span, has its
				// name
				for k := 0; k < len(b.Servers); k++ {
					if k == j {
						k = end - 1
						continue
					}
					if b.Servers[k] == nil || b.Servers[k].Name != s.Name {
						continue
					}
					if k < j {
						v.p.addf(sp(j)+"/name", CodeDuplicate, "%s name %q is already used by %s", "server", s.Name, sp(k))
					} else { // the second use is the one after the span, as a whole check says
						v.p.addf(sp(k)+"/name", CodeDuplicate, "%s name %q is already used by %s", "server", s.Name, sp(j))
					}
					break
				}
			}
			if s.Address != "" && !ValidServerAddress(s.Address) {
				v.p.addf(sp(j)+"/address", CodeFormat, "server address %q must be an IP literal or an RFC 1123 host name", s.Address)
			}
			if s.Proto == ProtoH2 && b.Mode != ModeHTTP {
				v.p.addf(sp(j)+"/proto", CodeModeMismatch, "proto %q needs a backend of mode http; backend %q has mode %q", s.Proto, b.Name, b.Mode)
			}
		}
		if hc := b.HealthCheck; hc != nil {
			hp := bp + "/health_check"
			if hc.TimeoutMs > hc.IntervalMs {
				v.p.addf(hp+"/timeout_ms", CodeOutOfRange, "timeout_ms (%d) must not exceed interval_ms (%d)", hc.TimeoutMs, hc.IntervalMs)
			}
			if hc.StatusMin != 0 && hc.StatusMax != 0 && hc.StatusMin > hc.StatusMax {
				v.p.addf(hp+"/status_max", CodeOutOfRange, "status_max (%d) must not be below status_min (%d)", hc.StatusMax, hc.StatusMin)
			}
			if hc.Type == CheckHTTP {
				if !strings.HasPrefix(hc.Path, "/") {
					v.p.addf(hp+"/path", CodeFormat, "an http check path must start with \"/\", not %q", hc.Path)
				} else if !validRequestTarget(hc.Path) {
					v.p.addf(hp+"/path", CodeFormat, "path %q contains characters not allowed in a request target", hc.Path)
				}
				if !ValidMethod(hc.Method) {
					v.p.addf(hp+"/method", CodeFormat, "method %q is not an HTTP token", hc.Method)
				}
			}
			if hc.Host != "" && !ValidHostPort(hc.Host) {
				v.p.addf(hp+"/host", CodeFormat, "host %q must be host[:port]: an IP literal (IPv6 in brackets) or an RFC 1123 host name, and a port 1-65535", hc.Host)
			}
		}
	}
}

// maxAppendedScan bounds the servers keptServers lets a write append:
// each is compared with every other name (a one-server POST), more build
// the name index instead.
const maxAppendedScan = 8

// keptServers matches servers with prev's (a valid list, names unique)
// when their names are, in order, a subsequence of prev's followed by at
// most maxAppendedScan new ones: kept[j] is the server of prev with the
// name of servers[j], nil for an appended one. nil when the names are not
// like that (then the caller indexes them): a write that changes, deletes
// or adds servers keeps the others where they were, and the names need no
// index to be known unique.
func keptServers(servers, prev []*Server) []*Server {
	if len(prev) == 0 {
		return nil
	}
	kept := make([]*Server, len(servers))
	k := 0
	j := 0
	for ; j < len(servers); j++ {
		if servers[j] == nil {
			return nil // the caller indexes, fieldRules refuses it
		}
		name := servers[j].Name
		for k < len(prev) && prev[k].Name != name {
			k++
		}
		if k == len(prev) {
			break
		}
		kept[j] = prev[k]
		k++
	}
	if len(servers)-j > maxAppendedScan {
		return nil
	}
	return kept
}

func (v *validation) tuning() {
	t := &v.c.Tuning
	if s := t.Sched; s.Urgent+s.Normal+s.Bulk != 100 {
		v.p.addf("/tuning/sched", CodeSum, "urgent + normal + bulk must be 100, not %d", s.Urgent+s.Normal+s.Bulk)
	}
	if t.Sched.Urgent == 0 {
		// loop.Split would offer urgent tasklets (I/O readiness) no budget:
		// connections would stall until the shares change.
		v.p.add("/tuning/sched/urgent", CodeOutOfRange, "urgent must be at least 1: with 0, tasklets woken by I/O would never run")
	}
	if t.Bufsize != 0 && t.Bufsize < MinBufsize {
		v.p.addf("/tuning/bufsize", CodeOutOfRange, "bufsize must be at least %d bytes", MinBufsize)
	}
	if t.Pipesize != 0 && t.Pipesize < MinPipesize {
		v.p.addf("/tuning/pipesize", CodeOutOfRange, "pipesize must be 0 (automatic) or at least %d bytes", MinPipesize)
	}
	// As HAProxy refuses to start with a maxconn the fd limit cannot hold:
	// past it the process runs out of fds, and the admin API with it.
	if lim := v.env.FdLimit; lim > 0 && t.Maxconn > 0 {
		if b := NewFdBudget(v.c, v.localNbthread()); b.Fds(t.Maxconn) > lim {
			v.p.add("/tuning/maxconn", CodeFdLimit, b.Message(t.Maxconn, lim))
		}
	}
}

// cpus checks that CPU ids are online, when check is set and env knows.
func (v *validation) cpus(ptr string, ids []int, check bool) {
	if !check || len(v.env.CPUs) == 0 {
		return
	}
	for k, id := range ids {
		if !slices.Contains(v.env.CPUs, id) {
			v.p.addf(ptr+"/"+strconv.Itoa(k), CodeCPUUnknown, "CPU %d is not online on this machine (online: %s)", id, FormatCPUList(v.env.CPUs))
		}
	}
}

// cpuMap checks the document's cpu_map; its CPUs against the machine
// unless this node's section replaces it.
func (v *validation) cpuMap() {
	v.cpuMapRules("/cpu_map", &v.c.CPUMap, v.nbthread(), v.self == nil || v.self.CPUMap == nil)
}

// cpuMapRules checks the cpu_map m at ptr for a node running nb loop
// threads (0: unknown); checkCPUs: its CPUs are this machine's.
func (v *validation) cpuMapRules(ptr string, m *CPUMap, nb int, checkCPUs bool) {
	switch {
	case m.Mode == CPUMapManual && len(m.Threads) == 0:
		v.p.add(ptr+"/threads", CodeRequired, "mode manual needs the thread → CPU list")
	case m.Mode != CPUMapManual && len(m.Threads) > 0:
		v.p.addf(ptr+"/threads", CodeModeMismatch, "threads are only used with mode manual, not %q", m.Mode)
	}
	seen := map[int]int{}
	for i := range m.Threads {
		tp := ptr + "/threads/" + strconv.Itoa(i)
		t := m.Threads[i].Thread
		if first, dup := seen[t]; dup {
			v.p.addf(tp+"/thread", CodeDuplicate, "thread %d is already mapped at %s/threads/%d", t, ptr, first)
		} else {
			seen[t] = i
			if nb > 0 && t >= nb {
				v.p.addf(tp+"/thread", CodeOutOfRange, "thread %d does not exist: nbthread is %d", t, nb)
			}
		}
		v.cpus(tp+"/cpus", m.Threads[i].CPUs, checkCPUs)
	}
}

// irq checks the document's irq; its CPUs against the machine unless this
// node's section replaces it.
func (v *validation) irq() {
	v.irqRules("/irq", &v.c.IRQ, v.c.CPUMap.Mode, v.self == nil || v.self.IRQ == nil)
}

// irqRules checks the irq q at ptr for a node whose cpu_map has mode
// mapMode; checkCPUs: its CPUs are this machine's.
func (v *validation) irqRules(ptr string, q *IRQ, mapMode string, checkCPUs bool) {
	if q.Policy == IRQPolicySeparate && !pinnedMode(mapMode) {
		// The policy places IRQs next to the loop CPUs: unpinned loops have none.
		v.p.addf(ptr+"/policy", CodeModeMismatch, "policy separate needs pinned loops: cpu_map mode auto or manual, not %q", mapMode)
	}
	for i, nic := range q.NICs {
		if !ValidInterfaceName(nic) {
			v.p.addf(ptr+"/nics/"+strconv.Itoa(i), CodeFormat, "%q is not a network interface name", nic)
		}
	}
	seen := map[int]int{}
	for i := range q.Pins {
		pp := ptr + "/pins/" + strconv.Itoa(i)
		if first, dup := seen[q.Pins[i].IRQ]; dup {
			v.p.addf(pp+"/irq", CodeDuplicate, "IRQ %d is already pinned at %s/pins/%d", q.Pins[i].IRQ, ptr, first)
		} else {
			seen[q.Pins[i].IRQ] = i
		}
		v.cpus(pp+"/cpus", q.Pins[i].CPUs, checkCPUs)
	}
}

// ValidInterfaceName reports whether s can name a Linux network interface:
// 1-15 bytes (IFNAMSIZ-1), printable ASCII without white space, '/' or ':',
// and not "." or "..".
func ValidInterfaceName(s string) bool {
	if len(s) == 0 || len(s) > 15 || s == "." || s == ".." {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c <= ' ' || c >= 0x7f || c == '/' || c == ':' {
			return false
		}
	}
	return true
}

// ValidServerAddress reports whether s is an IP literal or an RFC 1123 host
// name.
func ValidServerAddress(s string) bool {
	if _, err := netip.ParseAddr(s); err == nil {
		return true
	}
	return ValidHostName(s)
}

// ValidHostPort reports whether s is a Host header value the proxy may
// send: host[:port], host an RFC 1123 name or an IPv4 literal, or an
// IPv6 literal in brackets; port 1-65535 without leading zero.
func ValidHostPort(s string) bool {
	host, port := s, ""
	if strings.HasPrefix(s, "[") {
		end := strings.IndexByte(s, ']')
		if end < 0 {
			return false
		}
		a, err := netip.ParseAddr(s[1:end])
		if err != nil || !a.Is6() || a.Zone() != "" {
			return false
		}
		host, port = "", s[end+1:]
		if port != "" && port[0] != ':' {
			return false
		}
	} else if i := strings.LastIndexByte(s, ':'); i >= 0 {
		host, port = s[:i], s[i:]
	}
	if port != "" {
		p := port[1:]
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 || p[0] == '0' || p[0] == '+' || p[0] == '-' {
			return false
		}
	}
	if host == "" {
		return strings.HasPrefix(s, "[")
	}
	if a, err := netip.ParseAddr(host); err == nil {
		return a.Is4()
	}
	return ValidHostName(host)
}

// ValidHostName reports whether s is an RFC 1123 host name: dot-separated
// labels of 1-63 letters, digits and '-', not starting or ending with '-',
// at most 253 characters, and a last label that is not all digits (so that
// "10.0.0.300" is refused instead of looked up).
func ValidHostName(s string) bool {
	if len(s) == 0 || len(s) > 253 {
		return false
	}
	allDigits := false
	for label := range strings.SplitSeq(s, ".") {
		if len(label) == 0 || len(label) > 63 || label[0] == '-' || label[len(label)-1] == '-' {
			return false
		}
		allDigits = true
		for i := 0; i < len(label); i++ {
			c := label[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c == '-':
				allDigits = false
			default:
				return false
			}
		}
	}
	return !allDigits
}

// ValidMethod reports whether s is an HTTP method: a token (RFC 9110 5.6.2).
func ValidMethod(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if !isTchar(s[i]) {
			return false
		}
	}
	return true
}

func isTchar(c byte) bool {
	switch {
	case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9':
		return true
	}
	return strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0
}

// validRequestTarget reports whether a path has only characters allowed in
// an origin-form request target (visible ASCII, no '#').
func validRequestTarget(p string) bool {
	for i := 0; i < len(p); i++ {
		if p[i] <= ' ' || p[i] >= 0x7f || p[i] == '#' {
			return false
		}
	}
	return true
}

// validRouteHost reports whether a route host is an exact host name, an IP
// literal (IPv6 in brackets, as in a Host header), or "*.suffix".
func validRouteHost(h string) bool {
	if suffix, ok := strings.CutPrefix(h, "*."); ok {
		return ValidHostName(suffix)
	}
	if inner, ok := strings.CutPrefix(h, "["); ok {
		inner, ok = strings.CutSuffix(inner, "]")
		a, err := netip.ParseAddr(inner)
		return ok && err == nil && a.Is6()
	}
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Is4()
	}
	return ValidHostName(h)
}
