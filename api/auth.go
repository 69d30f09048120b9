package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"net/url"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core/config"
)

// The admin plane's gate, one middleware right after the
// recoverer, before any body is read:
//
//  1. Host must name this admin server (DNS rebinding: a browser tricked
//     into sending requests for evil.example to 127.0.0.1 still says
//     Host: evil.example), skipped on a unix socket;
//  2. a request with an Origin must come from this admin server's own
//     origin (cross-site POSTs from a browser), even when no token exists;
//  3. unless the route is public, the caller's role is established: open
//     (role admin, actor "local") while no token exists and the listener
//     is loopback or a unix socket; else Authorization: Bearer, checked
//     against the token file; bad tokens are rate-limited per remote
//     address and per token prefix (tokenKey), a valid token never is;
//  4. the role must reach the route's; an operator's server writes are
//     further limited to admin_state and weight inside the store's lock
//     (checkRole, called by write).

// actorAnonymous is the actor of requests not (yet) admitted: refused
// ones and public routes.
const actorAnonymous = "anonymous"

// Role names, as in the token file; rolePublic marks routes without auth.
const rolePublic tokens.Role = "public"

// Failed authentication: a remote address, and a token prefix, may fail
// authFailBurst times in a row, then once per authFailRefill (429 with
// Retry-After meanwhile, to bad tokens only: a valid one always passes).
// Secrets are 256-bit, so this is not what stops guessing; it keeps a
// scanner from filling the log and the CPU.
const (
	authFailBurst   = 10
	authFailRefill  = 6 * time.Second
	authFailEntries = 4096 // remote addresses and token prefixes tracked at most
)

// adminWriteTimeout bounds writing one answer (a write may spend
// applyTimeout in the store first). /api/v1/events streams and has none.
const adminWriteTimeout = applyTimeout + 30*time.Second

// guard holds what the security middleware needs; built once in New.
type guard struct {
	tokens   *tokens.Checker // nil: no authentication at all (embedding, tests)
	open     bool            // no token + this listener = open
	hostless bool            // unix socket or unknown address: no Host check
	tls      bool
	port     string          // listen port ("0": any)
	anyIP    bool            // wildcard bind: any IP literal is this server
	hosts    map[string]bool // "host:port" accepted in Host
	named    map[string]bool // --admin-host entries ("host:port"): trusted origins too
	mux      *chi.Mux
	fails    *failLimiter
	log      *slog.Logger
}

func newGuard(o Options, mux *chi.Mux, log *slog.Logger) *guard {
	g := &guard{
		tokens: o.Tokens, open: o.Open || o.Tokens == nil, tls: o.AdminTLS,
		hosts: map[string]bool{}, named: map[string]bool{}, mux: mux, log: log,
		fails: newFailLimiter(authFailBurst, authFailRefill, authFailEntries),
	}
	addr := o.AdminAddr
	switch {
	case addr == "" || strings.HasPrefix(addr, "unix:"):
		g.hostless = true
	default:
		h, p, err := net.SplitHostPort(addr)
		if err != nil {
			g.hostless = true // main refuses such addresses before we get here
			break
		}
		g.port = p
		g.addHost(h, p)
	}
	for _, n := range o.AdminHosts {
		n = strings.TrimSpace(n)
		if n == "" {
			continue
		}
		h, p, err := net.SplitHostPort(n)
		if err != nil {
			h, p = n, g.port
		}
		k := hostKey(h, p)
		g.hosts[k], g.named[k] = true, true
	}
	return g
}

// addHost accepts host (the admin address's) on port, with the names that
// reach the same socket.
func (g *guard) addHost(h, p string) {
	h = normHost(h)
	if h == "localhost" {
		g.addLoopback(p)
		return
	}
	a, err := netip.ParseAddr(h)
	switch {
	case err != nil:
		g.hosts[hostKey(h, p)] = true // a name the operator chose
	case a.IsUnspecified():
		g.anyIP = true
		g.hosts[hostKey("localhost", p)] = true
	case a.IsLoopback():
		g.hosts[hostKey(a.String(), p)] = true
		g.addLoopback(p)
	default:
		g.hosts[hostKey(a.String(), p)] = true
	}
}

func (g *guard) addLoopback(p string) {
	for _, h := range []string{"localhost", "127.0.0.1", "::1"} {
		g.hosts[hostKey(h, p)] = true
	}
}

func normHost(h string) string {
	h = strings.ToLower(strings.TrimSuffix(strings.Trim(h, "[]"), "."))
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Unmap().String()
	}
	return h
}

func hostKey(h, p string) string { return net.JoinHostPort(normHost(h), p) }

// splitHost splits a Host header (or an origin's host) into its normalised
// host and port, the scheme's default port when absent.
func splitHost(hostport string, tls bool) (string, string, bool) {
	h, p, _, ok := splitHostPort(hostport, tls)
	return h, p, ok
}

// splitHostPort is splitHost also saying whether the port was explicit.
func splitHostPort(hostport string, tls bool) (h, p string, explicit, ok bool) {
	if hostport == "" || strings.ContainsAny(hostport, " \t\r\n/\\@") {
		return "", "", false, false
	}
	h, p, err := net.SplitHostPort(hostport)
	explicit = err == nil
	if err != nil {
		h, p = hostport, "80"
		if tls {
			p = "443"
		}
		if strings.Count(h, ":") > 0 && !strings.HasPrefix(h, "[") {
			return "", "", false, false // a bare IPv6 address must be bracketed
		}
	}
	if _, err := strconv.ParseUint(p, 10, 16); err != nil {
		return "", "", false, false
	}
	return normHost(h), p, explicit, true
}

// hostOK reports whether a Host header names this admin server.
func (g *guard) hostOK(host string) bool {
	h, p, explicit, ok := splitHostPort(host, g.tls)
	if !ok {
		return false
	}
	if g.hosts[hostKey(h, p)] {
		return true
	}
	if !explicit { // a proxy in front forwarding Host: name (its own port)
		for k := range g.named {
			if kh, _, _ := net.SplitHostPort(k); kh == h {
				return true
			}
		}
	}
	if g.port == "0" { // listening address not known (tests): any port
		for k := range g.hosts {
			if kh, _, _ := net.SplitHostPort(k); kh == h {
				return true
			}
		}
	}
	if g.anyIP && p == g.port {
		_, err := netip.ParseAddr(h)
		return err == nil // an IP literal cannot be a rebinding name
	}
	return false
}

// originOK reports whether an Origin header is this admin server's own
// origin: the scheme we serve and the host the request names (the browser
// loaded the page from where it now sends to), or a configured --admin-host
// (a TLS-terminating proxy in front).
func (g *guard) originOK(origin, host string) bool {
	u, err := url.Parse(origin)
	if err != nil || u.Host == "" || u.User != nil || (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return false
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return false
	}
	oh, op, ok := splitHost(u.Host, u.Scheme == "https")
	if !ok {
		return false
	}
	if g.named[hostKey(oh, op)] {
		return true
	}
	if (u.Scheme == "https") != g.tls {
		return false
	}
	rh, rp, ok := splitHost(host, g.tls)
	return ok && rh == oh && rp == op
}

// requiredRole is the role a method on a route pattern needs: the single
// rule the OpenAPI document's x-spliced-role states per operation.
func requiredRole(method, pattern string) tokens.Role {
	if method == http.MethodHead {
		method = http.MethodGet
	}
	if method == http.MethodGet {
		switch pattern {
		case "/", "/healthz", "/readyz", "/openapi.json", "/docs", "/docs/*", "/ui", "/ui/*":
			return rolePublic
		case base + "/audit", base + "/logs", base + "/tls/ticket-keys":
			return tokens.Admin
		}
		if pattern == base+"/tokens" || strings.HasPrefix(pattern, base+"/tokens/") {
			return tokens.Admin
		}
		return tokens.Viewer
	}
	if (method == http.MethodPut || method == http.MethodPatch) && pattern == base+"/backends/{name}/servers/{server}" {
		return tokens.Operator // admin_state and weight only: see checkRole
	}
	if method == http.MethodDelete && pattern == base+"/frontends/{name}/limits/{limit}/entries/{key}" {
		return tokens.Operator // runtime state (a client's counters), not configuration
	}
	return tokens.Admin
}

// routeRole finds the route of r and its role. Unknown routes need viewer
// (the router then answers 404 or 405).
func (g *guard) routeRole(r *http.Request) tokens.Role {
	path := r.URL.RawPath
	if path == "" {
		path = r.URL.Path
	}
	m := r.Method
	if m == http.MethodHead {
		m = http.MethodGet
	}
	pattern := g.mux.Find(chi.NewRouteContext(), m, path)
	if pattern == "" {
		return tokens.Viewer
	}
	return requiredRole(m, pattern)
}

type authCtxKey struct{}

type authInfo struct {
	role   tokens.Role
	tokens bool // tokens exist: Authorization is required
	// valid reports whether what admitted the request still holds: the
	// token is still in the token file (not revoked), or, on an open
	// API, still no token exists. nil: nothing to recheck (no token
	// file). Long requests (/api/v1/events) call it every
	// tokenRecheckEvery.
	valid func() bool
	// restricted: an operator on an operator route; the write may change
	// servers' admin_state and weight only (checkRole).
	restricted bool
}

// RoleFrom is the role the request was admitted with: "viewer", "operator"
// or "admin" ("admin" while the API is open), "" on public routes.
func RoleFrom(ctx context.Context) string {
	a, _ := ctx.Value(authCtxKey{}).(*authInfo)
	if a == nil {
		return ""
	}
	return string(a.role)
}

// ActorFrom is who made the request: the token's name, "local" while the
// API is open (no token exists), "anonymous" when refused or on a public
// route.
func ActorFrom(ctx context.Context) string { return actor(ctx) }

// deny answers a refusal and closes the connection after it: a refused
// client must not keep an admin connection slot.
func (g *guard) deny(w http.ResponseWriter, r *http.Request, status int, code, detail string) {
	w.Header().Set("Connection", "close")
	writeError(w, r, g.log, &apiError{Status: status, Code: code, Detail: detail})
}

// handler is the middleware.
func (g *guard) handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		// Until admitted, nobody: a refused request is audited as
		// "anonymous", never as "local" (the open loopback admin).
		r = withActor(r, actorAnonymous)
		// The connection's hook (WithAdmitHook) hears when an admitted
		// request is over: the handler returned. What the server still
		// does on the connection after it (drain an unread body) is not
		// serving an admitted request.
		var served func()
		defer func() {
			if served != nil {
				served()
			}
		}()
		if !g.hostless && !g.hostOK(r.Host) {
			g.deny(w, r, http.StatusForbidden, "forbidden-host",
				fmt.Sprintf("Host %q is not this admin server's address; add it with --admin-host if it is a name for it", truncate(r.Host, 80)))
			return
		}
		if vs, has := r.Header["Origin"]; has {
			if len(vs) != 1 || !g.originOK(vs[0], r.Host) {
				g.deny(w, r, http.StatusForbidden, "forbidden-origin",
					"cross-origin requests to the admin API are refused: Origin is not this admin server's own")
				return
			}
		} else if unsafeMethod(r.Method) {
			if s := r.Header.Get("Sec-Fetch-Site"); s == "cross-site" || s == "same-site" {
				g.deny(w, r, http.StatusForbidden, "forbidden-origin",
					"cross-site requests to the admin API are refused")
				return
			}
		}
		if r.URL.Path != base+"/events" {
			_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(adminWriteTimeout))
		}
		need := g.routeRole(r)
		if need == rolePublic {
			next.ServeHTTP(w, r)
			return
		}
		empty := true
		if g.tokens != nil {
			var err error
			if empty, err = g.tokens.Empty(); err != nil {
				g.unavailable(w, r, err)
				return
			}
		}
		if empty {
			if !g.open {
				g.deny(w, r, http.StatusUnauthorized, "unauthorized",
					"no admin token exists and this admin address is reachable by others (not loopback, or --admin-host); create one with: spliced token add --role admin --name NAME --state-dir DIR (the state directory of this spliced)")
				return
			}
			r = g.admit(r, &served, "local", tokens.Admin, false, false)
			if g.tokens != nil {
				setValid(r, func() bool { empty, err := g.tokens.Empty(); return err == nil && empty })
			}
			next.ServeHTTP(w, r)
			return
		}
		secret, present, wellFormed := bearer(r)
		if !present {
			w.Header().Set("WWW-Authenticate", `Bearer realm="spliced"`)
			g.deny(w, r, http.StatusUnauthorized, "unauthorized",
				"this admin API needs a token: Authorization: Bearer <token> (create one with spliced token add)")
			return
		}
		var (
			e     tokens.Entry
			found bool
		)
		if wellFormed {
			var err error
			if e, found, err = g.tokens.Lookup(secret); err != nil {
				g.unavailable(w, r, err)
				return
			}
		}
		if !found {
			// The limiter only ever refuses bad tokens: a valid one is
			// never locked out by someone else's failures from the same
			// address (every local user shares 127.0.0.1, every client
			// of a TLS proxy in front shares its address).
			now := time.Now()
			addrKey, tokKey := remoteKey(r.RemoteAddr), tokenKey(secret, wellFormed)
			if wait := max(g.fails.wait(addrKey, now), g.fails.wait(tokKey, now)); wait > 0 {
				w.Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
				g.deny(w, r, http.StatusTooManyRequests, "too-many-failures",
					"too many failed authentications from this address or with this token; retry later")
				return
			}
			g.fails.fail(addrKey, now)
			g.fails.fail(tokKey, now)
			g.log.LogAttrs(r.Context(), slog.LevelWarn, "admin authentication failed",
				slog.String("remote", r.RemoteAddr), slog.String("method", r.Method),
				slog.String("path", r.URL.Path), slog.String("request_id", requestID(r.Context())))
			w.Header().Set("WWW-Authenticate", `Bearer realm="spliced", error="invalid_token"`)
			g.deny(w, r, http.StatusUnauthorized, "unauthorized", "the bearer token is not valid (unknown or revoked)")
			return
		}
		r = g.admit(r, &served, e.Name, e.Role, true, e.Role == tokens.Operator && need == tokens.Operator)
		setValid(r, func() bool {
			now, ok, err := g.tokens.Lookup(secret)
			return err == nil && ok && now.Name == e.Name && now.Role.Allows(need)
		})
		if !e.Role.Allows(need) {
			g.deny(w, r, http.StatusForbidden, "forbidden",
				fmt.Sprintf("token %q has role %s; %s %s needs %s", e.Name, e.Role, r.Method, truncate(r.URL.Path, 200), need))
			return
		}
		next.ServeHTTP(w, r)
	})
}

func (g *guard) admit(r *http.Request, served *func(), name string, role tokens.Role, withTokens, restricted bool) *http.Request {
	if f, ok := r.Context().Value(admitHookKey{}).(func() func()); ok {
		*served = f()
	}
	r = withActor(r, name)
	return r.WithContext(context.WithValue(r.Context(), authCtxKey{},
		&authInfo{role: role, tokens: withTokens, restricted: restricted}))
}

// setValid sets the recheck of an admitted request (see authInfo.valid).
func setValid(r *http.Request, valid func() bool) {
	if a, ok := r.Context().Value(authCtxKey{}).(*authInfo); ok {
		a.valid = valid
	}
}

// stillValid is the recheck of the request's admission; nil: none.
func stillValid(ctx context.Context) func() bool {
	a, _ := ctx.Value(authCtxKey{}).(*authInfo)
	if a == nil {
		return nil
	}
	return a.valid
}

type admitHookKey struct{}

// WithAdmitHook returns ctx (a connection's, from http.Server.ConnContext)
// carrying admitted, which the API calls each time it admits a request on
// that connection: a valid token, or an open API; the API calls the
// function admitted returns when that request's handler has returned.
// The admin listener (cmd/spliced) uses it to keep the connections of
// known callers out of the eviction and short idle timeout of anonymous
// ones, and the connections serving an admitted request out of eviction.
func WithAdmitHook(ctx context.Context, admitted func() (served func())) context.Context {
	return context.WithValue(ctx, admitHookKey{}, admitted)
}

// authRequired reports whether the request was admitted with a token.
func authRequired(ctx context.Context) bool {
	a, _ := ctx.Value(authCtxKey{}).(*authInfo)
	return a != nil && a.tokens
}

// unavailable answers when the token file cannot be read: closed, never
// open, and the reason only in the server's log.
func (g *guard) unavailable(w http.ResponseWriter, r *http.Request, err error) {
	g.log.LogAttrs(r.Context(), slog.LevelError, "admin token file unusable; refusing authenticated requests",
		slog.String("file", g.tokens.Path()), slog.Any("err", err))
	g.deny(w, r, http.StatusServiceUnavailable, "auth-unavailable",
		"the admin token file cannot be read; see the server log")
}

func unsafeMethod(m string) bool {
	return m != http.MethodGet && m != http.MethodHead && m != http.MethodOptions
}

// bearer extracts the token of "Authorization: Bearer <token>" (scheme
// case-insensitive, RFC 9110 11.1). present: an Authorization header was
// sent; wellFormed: exactly one, with the Bearer scheme and a token68.
func bearer(r *http.Request) (secret string, present, wellFormed bool) {
	vs := r.Header.Values("Authorization")
	if len(vs) == 0 {
		return "", false, false
	}
	if len(vs) != 1 {
		return "", true, false
	}
	scheme, tok, ok := strings.Cut(strings.TrimSpace(vs[0]), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", true, false
	}
	tok = strings.TrimSpace(tok)
	if tok == "" || strings.ContainsAny(tok, " \t") {
		return "", true, false
	}
	return tok, true, true
}

// tokenKey is the second key failures are counted per: the presented
// token's first tokenKeyLen bytes ("spliced_" and 4 characters, 24 of its
// 256 random bits: nothing a guesser can use, and never logged), so that
// one stale client with a revoked token, or a guesser spread over many
// addresses, runs out of tries on its own. Malformed credentials share one
// key: they can never succeed.
func tokenKey(secret string, wellFormed bool) string {
	if !wellFormed {
		return "token:malformed"
	}
	if len(secret) > tokenKeyLen {
		secret = secret[:tokenKeyLen]
	}
	return "token:" + secret
}

const tokenKeyLen = len("spliced_") + 4

// remoteKey is what failures are counted per: the IPv4 address, the /64 of
// an IPv6 one (one host usually owns a whole /64), "unix" for a socket.
func remoteKey(remote string) string {
	ap, err := netip.ParseAddrPort(remote)
	if err != nil {
		if a, err := netip.ParseAddr(remote); err == nil {
			ap = netip.AddrPortFrom(a, 0)
		} else {
			return "unix"
		}
	}
	a := ap.Addr().Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// checkRole is called by write inside the store's lock with the config the
// write starts from and the one it produced. For an operator it refuses
// any change but servers' admin_state and weight, and names what else
// changed: the check sees the document as it is, not the body as sent, so
// a PUT repeating stale fields is refused rather than silently reverting
// someone's change.
func checkRole(ctx context.Context, before, after *config.Config) error {
	a, _ := ctx.Value(authCtxKey{}).(*authInfo)
	if a == nil || !a.restricted {
		return nil
	}
	fields := serverStateOnly(before, after)
	if len(fields) == 0 {
		return nil
	}
	errs := make([]config.FieldError, 0, len(fields))
	for _, f := range fields {
		errs = append(errs, config.FieldError{Field: f, Code: "forbidden_field",
			Message: "an operator token may change only admin_state and weight"})
	}
	return &apiError{Status: http.StatusForbidden, Code: "forbidden", Errors: errs,
		Detail: "an operator token may change only a server's admin_state and weight; this change also touches " + fields[0]}
}

// serverStateOnly returns JSON pointers (into the whole document) of what
// differs between before and after other than servers' admin_state and
// weight; nil when nothing else changed.
func serverStateOnly(before, after *config.Config) []string {
	if onlyServerState(before, after) {
		return nil
	}
	return documentDiff(before, after)
}

// documentDiff is serverStateOnly comparing the whole documents.
func documentDiff(before, after *config.Config) []string {
	b := before.Clone()
	b.Normalize()
	x := after.Clone()
	x.Normalize()
	if len(x.Backends) == len(b.Backends) {
		for i := range x.Backends {
			xs, bs := x.Backends[i].Servers, b.Backends[i].Servers
			if x.Backends[i].Name != b.Backends[i].Name || len(xs) != len(bs) {
				continue
			}
			for j := range xs {
				if xs[j].Name == bs[j].Name {
					xs[j].Weight, xs[j].AdminState = bs[j].Weight, bs[j].AdminState
				}
			}
		}
	}
	bj, err1 := json.Marshal(b)
	xj, err2 := json.Marshal(x)
	if err1 != nil || err2 != nil {
		return []string{""}
	}
	if bytes.Equal(bj, xj) {
		return nil
	}
	var bv, xv any
	_ = json.Unmarshal(bj, &bv)
	_ = json.Unmarshal(xj, &xv)
	var out []string
	jsonDiff(bv, xv, "", &out, 8)
	if len(out) == 0 {
		out = []string{""}
	}
	return out
}

// onlyServerState is serverStateOnly's answer nil for the common write of
// an operator, a server's weight or state among 10 000, without encoding
// the document twice: the same backends with as many servers each, equal
// but for the weight and admin_state of those between the equal head and
// tail of each list (config.ServerSpan, which the write's shared lists
// make free for the backends it did not change), and the rest of the
// document equal. false means "not shown": serverStateOnly compares the
// whole documents and names what differs.
func onlyServerState(before, after *config.Config) bool {
	if len(before.Backends) != len(after.Backends) {
		return false
	}
	for i := range after.Backends {
		bs, xs := before.Backends[i].Servers, after.Backends[i].Servers
		if before.Backends[i].Name != after.Backends[i].Name || len(bs) != len(xs) {
			return false
		}
		h, t := config.ServerSpan(bs, xs)
		for j := h; j < len(xs)-t; j++ {
			b, x := normalServer(*bs[j]), normalServer(*xs[j])
			x.Weight, x.AdminState = b.Weight, b.AdminState
			if !reflect.DeepEqual(b, x) {
				return false
			}
		}
	}
	bj, err1 := json.Marshal(withoutServers(before))
	xj, err2 := json.Marshal(withoutServers(after))
	return err1 == nil && err2 == nil && bytes.Equal(bj, xj)
}

// normalServer is s normalized, sharing nothing Normalize writes to.
func normalServer(s config.Server) config.Server {
	if s.TLS != nil {
		t := *s.TLS
		s.TLS = &t
	}
	s.Normalize()
	return s
}

// withoutServers is a normalized deep copy of c whose backends have no
// servers.
func withoutServers(c *config.Config) *config.Config {
	s := *c
	s.Backends = make([]config.Backend, len(c.Backends))
	for i := range c.Backends {
		s.Backends[i] = c.Backends[i]
		s.Backends[i].Servers = nil
	}
	out := s.Clone()
	out.Normalize()
	return out
}

// jsonDiff appends the pointers where a and b differ, at most max.
func jsonDiff(a, b any, ptr string, out *[]string, max int) {
	if len(*out) >= max {
		return
	}
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			*out = append(*out, ptr)
			return
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, ok := av[k]; !ok {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			jsonDiff(av[k], bv[k], ptr+"/"+escapePointer(k), out, max)
		}
	case []any:
		bv, ok := b.([]any)
		if !ok || len(av) != len(bv) {
			*out = append(*out, ptr)
			return
		}
		for i := range av {
			jsonDiff(av[i], bv[i], ptr+"/"+strconv.Itoa(i), out, max)
		}
	default:
		if a != b {
			*out = append(*out, ptr)
		}
	}
}

// failLimiter counts failed authentications per remote key: a token bucket
// of burst failures refilled one per every. Any goroutine.
type failLimiter struct {
	mu    sync.Mutex
	burst float64
	every time.Duration
	max   int
	m     map[string]*failBucket
}

type failBucket struct {
	left float64 // failures still allowed
	at   time.Time
}

func newFailLimiter(burst int, every time.Duration, max int) *failLimiter {
	return &failLimiter{burst: float64(burst), every: every, max: max, m: make(map[string]*failBucket)}
}

func (l *failLimiter) refill(b *failBucket, now time.Time) {
	if d := now.Sub(b.at); d > 0 {
		b.left = min(l.burst, b.left+float64(d)/float64(l.every))
		b.at = now
	}
}

// wait is how long key must wait before its next attempt (0: go ahead).
func (l *failLimiter) wait(key string, now time.Time) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		return 0
	}
	l.refill(b, now)
	if b.left >= 1 {
		return 0
	}
	return time.Duration((1 - b.left) * float64(l.every))
}

// fail records one failure of key.
func (l *failLimiter) fail(key string, now time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	b := l.m[key]
	if b == nil {
		if len(l.m) >= l.max {
			l.evict(now)
		}
		b = &failBucket{left: l.burst, at: now}
		l.m[key] = b
	}
	l.refill(b, now)
	b.left = max(0, b.left-1)
}

// evict forgets the keys whose bucket is full again, and if none is, one
// arbitrary key: the table stays bounded whatever a scanner does.
func (l *failLimiter) evict(now time.Time) {
	for k, b := range l.m {
		l.refill(b, now)
		if b.left >= l.burst {
			delete(l.m, k)
		}
	}
	for k := range l.m {
		if len(l.m) < l.max {
			break
		}
		delete(l.m, k)
	}
}
