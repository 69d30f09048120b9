package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-chi/chi/v5"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/openapi"
)

const secAddr = "127.0.0.1:9900"

// secFixture is an API with a token file, on admin address secAddr.
type secFixture struct {
	h       http.Handler
	store   *config.Store
	dir     string
	secrets map[tokens.Role]string
	logs    *bytes.Buffer
	remote  atomic.Int64 // varies RemoteAddr for bad-token requests
}

func newSecFixture(t testing.TB, withTokens bool, o Options) *secFixture {
	t.Helper()
	dir := t.TempDir()
	f := &secFixture{dir: dir, secrets: map[tokens.Role]string{}, logs: &bytes.Buffer{}}
	log := slog.New(slog.NewTextHandler(f.logs, nil))
	st, err := config.Open(dir, "", log)
	if err != nil {
		t.Fatal(err)
	}
	f.store = st
	nop := &coretest.Nop{}
	if err := nop.Apply(t.Context(), st.Current()); err != nil {
		t.Fatal(err)
	}
	if withTokens {
		for _, r := range []tokens.Role{tokens.Viewer, tokens.Operator, tokens.Admin} {
			s, err := tokens.Add(dir, "t-"+string(r), r, time.Now())
			if err != nil {
				t.Fatal(err)
			}
			f.secrets[r] = s
		}
	}
	chk, err := tokens.NewChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	o.Store, o.Core, o.StateDir, o.Logger, o.Tokens = st, nop, dir, log, chk
	if o.AdminAddr == "" {
		o.AdminAddr = secAddr
	}
	f.h = New(o)
	return f
}

type req struct {
	method, path, body string
	token              string // "" none
	hdr                map[string]string
	remote             string
	host               string
}

func (f *secFixture) do(q req) *httptest.ResponseRecorder {
	var body *strings.Reader
	if q.body != "" {
		body = strings.NewReader(q.body)
	}
	var r *http.Request
	if body != nil {
		r = httptest.NewRequest(q.method, q.path, body)
		r.Header.Set("Content-Type", "application/json")
	} else {
		r = httptest.NewRequest(q.method, q.path, nil)
	}
	r.Host = secAddr
	if q.host != "" {
		r.Host = q.host
	}
	if q.remote != "" {
		r.RemoteAddr = q.remote
	}
	if q.token != "" {
		r.Header.Set("Authorization", "Bearer "+q.token)
	}
	for k, v := range q.hdr {
		r.Header.Set(k, v)
	}
	if q.path == "/api/v1/events" {
		ctx, cancel := context.WithTimeout(r.Context(), 200*time.Millisecond)
		defer cancel()
		r = r.WithContext(ctx)
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, r)
	return w
}

func (f *secFixture) seed(t testing.TB) {
	t.Helper()
	for _, b := range []struct{ path, body string }{{"/api/v1/backends", backendWeb}, {"/api/v1/frontends", frontendPublic}} {
		if w := f.do(req{method: "POST", path: b.path, body: b.body, token: f.secrets[tokens.Admin]}); w.Code != 201 {
			t.Fatalf("seed %s: %d %s", b.path, w.Code, w.Body)
		}
	}
}

// TestOpenAPIStatesTheRoleOfEveryOperation: each documented operation's
// x-spliced-role is the role the middleware enforces for it.
func TestOpenAPIStatesTheRoleOfEveryOperation(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	n := 0
	_ = chi.Walk(f.h.(*chi.Mux), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		op, ok := doc.Paths[route][strings.ToLower(method)]
		if !ok {
			return nil // TestEveryRouteIsInTheOpenAPIDocument reports it
		}
		n++
		got, _ := op["x-spliced-role"].(string)
		if want := string(requiredRole(method, route)); got != want {
			t.Errorf("%s %s: x-spliced-role %q, the middleware requires %q", method, route, got, want)
		}
		return nil
	})
	if n < 40 {
		t.Fatalf("checked only %d operations", n)
	}
}

// openAPIRoles maps "method route" to the document's x-spliced-role.
func openAPIRoles(t testing.TB) map[string]string {
	var doc struct {
		Paths map[string]map[string]map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for p, ops := range doc.Paths {
		for m, op := range ops {
			if r, ok := op["x-spliced-role"].(string); ok {
				out[m+" "+p] = r
			}
		}
	}
	return out
}

// TestRoleMatrix: every route, as no token, a bad token, viewer, operator
// and admin: allowed (any answer but 401/403), 401 or 403.
func TestRoleMatrix(t *testing.T) {
	t.Parallel()
	docRoles := openAPIRoles(t)
	f := newSecFixture(t, true, Options{})
	f.seed(t)
	server := f.do(req{method: "GET", path: "/api/v1/backends/web/servers/s1", token: f.secrets[tokens.Admin]}).Body.String()
	fill := strings.NewReplacer("{server}", "s1", "{bind}", "b1", "{rev}", "1", "{irq}", "12", "/*", "/")
	checked := 0
	_ = chi.Walk(f.h.(*chi.Mux), func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		switch route {
		case "/", "/docs", "/docs/*", "/ui", "/ui/*": // static pages, not in the document
			docRoles[strings.ToLower(method)+" "+route] = string(rolePublic)
		}
		path := fill.Replace(route)
		if strings.HasPrefix(route, "/api/v1/frontends/{name}") {
			path = strings.Replace(path, "{name}", "public", 1)
		}
		path = strings.Replace(path, "{name}", "web", 1)
		body := ""
		if method == "POST" || method == "PUT" || method == "PATCH" {
			body = "{}"
			if route == "/api/v1/backends/{name}/servers/{server}" {
				body = server // a PUT of the server as it is, or...
				if method == "PATCH" {
					body = `{"weight":7}` // ...a weight change: both operator business
				}
			}
		}
		if method != "GET" {
			path += "?dry_run=true"
		}
		// The expectation is what the OpenAPI document promises.
		need := tokens.Role(docRoles[strings.ToLower(method)+" "+route])
		if need == "" {
			t.Errorf("%s %s: no x-spliced-role in the OpenAPI document", method, route)
			return nil
		}
		for _, who := range []tokens.Role{"", "bad", tokens.Viewer, tokens.Operator, tokens.Admin} {
			q := req{method: method, path: path, body: body, token: f.secrets[who]}
			if who == "bad" {
				n := f.remote.Add(1) // new address and token prefix: no 429
				q.token = fmt.Sprintf("spliced_%04x-not-a-token", n)
				q.remote = fmt.Sprintf("10.1.%d.%d:1234", n/250, n%250+1)
			}
			w := f.do(q)
			checked++
			var exp int
			switch {
			case need == rolePublic:
				exp = 0
			case who == "" || who == "bad":
				exp = 401
			case !who.Allows(need):
				exp = 403
			}
			got := w.Code
			if exp == 0 && (got == 401 || got == 403 || got == 429) {
				t.Errorf("%s %s as %q: %d, want allowed: %s", method, path, who, got, w.Body)
			}
			if exp != 0 && got != exp {
				t.Errorf("%s %s as %q: %d, want %d: %s", method, path, who, got, exp, w.Body)
			}
			if exp == 401 && w.Header().Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s as %q: 401 without WWW-Authenticate", method, path, who)
			}
			if exp != 0 && got == exp {
				if p := decodeJSON[Problem](t, w); p.Status != exp || !strings.HasPrefix(p.Type, "urn:spliced:problem:") {
					t.Errorf("%s %s as %q: not a problem document: %s", method, path, who, w.Body)
				}
			}
		}
		return nil
	})
	if checked < 200 {
		t.Fatalf("checked only %d combinations", checked)
	}
}

func TestOperatorMayChangeOnlyAdminStateAndWeight(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	f.seed(t)
	op := f.secrets[tokens.Operator]
	cur := f.do(req{method: "GET", path: "/api/v1/backends/web/servers/s1", token: op}).Body.String()
	tests := []struct {
		name, method, body string
		status             int
		field              string
	}{
		{"drain", "PATCH", `{"admin_state":"drain"}`, 200, ""},
		{"weight", "PATCH", `{"weight":50}`, 200, ""},
		{"both, back to ready", "PATCH", `{"admin_state":"ready","weight":60}`, 200, ""},
		{"port", "PATCH", `{"port":9999}`, 403, "/backends/0/servers/0/port"},
		{"address with a weight", "PATCH", `{"weight":5,"address":"127.0.0.2"}`, 403, "/backends/0/servers/0/address"},
		{"maxconn", "PATCH", `{"maxconn":5}`, 403, "/backends/0/servers/0/maxconn"},
		{"put as it is but drained", "PUT", strings.Replace(cur, `"admin_state":"ready"`, `"admin_state":"drain"`, 1), 200, ""},
		{"put with another port", "PUT", strings.Replace(cur, `"port":8081`, `"port":8082`, 1), 403, "/backends/0/servers/0/port"},
		{"invalid weight still 422", "PATCH", `{"weight":-1}`, 422, ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			before := f.store.Current()
			w := f.do(req{method: tc.method, path: "/api/v1/backends/web/servers/s1", body: tc.body, token: op})
			if w.Code != tc.status {
				t.Fatalf("%d, want %d: %s", w.Code, tc.status, w.Body)
			}
			if tc.status == 403 {
				p := decodeJSON[Problem](t, w)
				if len(p.Errors) == 0 || p.Errors[0].Field != tc.field || p.Errors[0].Code != "forbidden_field" {
					t.Fatalf("errors %+v, want field %s", p.Errors, tc.field)
				}
				if f.store.Current() != before {
					t.Fatal("a refused write changed the config")
				}
			}
		})
	}
	// Other writes stay admin's.
	for _, q := range []req{
		{method: "DELETE", path: "/api/v1/backends/web/servers/s1"},
		{method: "POST", path: "/api/v1/backends/web/servers", body: `{"name":"s2","address":"127.0.0.1","port":1}`},
		{method: "PATCH", path: "/api/v1/backends/web", body: `{"retries":1}`},
		{method: "PUT", path: "/api/v1/config", body: `{}`},
		{method: "POST", path: "/api/v1/config/revisions/1/restore"},
	} {
		q.token = op
		if w := f.do(q); w.Code != 403 {
			t.Errorf("%s %s as operator: %d, want 403", q.method, q.path, w.Code)
		}
	}
}

func TestHostAndOriginChecks(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		addr   string
		hosts  []string
		tls    bool
		host   string
		origin string
		method string
		status int
	}{
		{"own address", secAddr, nil, false, "127.0.0.1:9900", "", "GET", 200},
		{"localhost for loopback", secAddr, nil, false, "localhost:9900", "", "GET", 200},
		{"ipv6 loopback", secAddr, nil, false, "[::1]:9900", "", "GET", 200},
		{"upper-case name", secAddr, nil, false, "LOCALHOST:9900", "", "GET", 200},
		{"rebinding name", secAddr, nil, false, "evil.example:9900", "", "GET", 403},
		{"rebinding name, right port omitted", secAddr, nil, false, "evil.example", "", "GET", 403},
		{"wrong port", secAddr, nil, false, "127.0.0.1:9901", "", "GET", 403},
		{"empty host", secAddr, nil, false, "", "", "GET", 403},
		{"configured name", secAddr, []string{"admin.lan"}, false, "admin.lan:9900", "", "GET", 200},
		{"configured name and port", secAddr, []string{"admin.lan:443"}, false, "admin.lan", "https://admin.lan", "POST", 201},
		{"wildcard bind, IP literal", "0.0.0.0:9900", nil, false, "192.0.2.7:9900", "", "GET", 200},
		{"wildcard bind, a name", "0.0.0.0:9900", nil, false, "evil.example:9900", "", "GET", 403},
		{"unix socket: no host check", "unix:/run/x.sock", nil, false, "anything", "", "GET", 200},
		{"same-origin UI write", secAddr, nil, false, "127.0.0.1:9900", "http://127.0.0.1:9900", "POST", 201},
		{"same-origin UI via localhost", secAddr, nil, false, "localhost:9900", "http://localhost:9900", "POST", 201},
		{"cross-site POST", secAddr, nil, false, "127.0.0.1:9900", "http://evil.example", "POST", 403},
		{"cross-site GET with Origin", secAddr, nil, false, "127.0.0.1:9900", "http://evil.example", "GET", 403},
		{"other port same host", secAddr, nil, false, "127.0.0.1:9900", "http://127.0.0.1:8080", "POST", 403},
		{"https origin to http admin", secAddr, nil, false, "127.0.0.1:9900", "https://127.0.0.1:9900", "POST", 403},
		{"null origin", secAddr, nil, false, "127.0.0.1:9900", "null", "POST", 403},
		{"origin with path", secAddr, nil, false, "127.0.0.1:9900", "http://127.0.0.1:9900/x", "POST", 403},
		{"tls admin, https origin", secAddr, nil, true, "127.0.0.1:9900", "https://127.0.0.1:9900", "POST", 201},
		{"no origin (curl)", secAddr, nil, false, "127.0.0.1:9900", "", "POST", 201},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			f := newSecFixture(t, false, Options{AdminAddr: tc.addr, AdminHosts: tc.hosts, AdminTLS: tc.tls, Open: true})
			q := req{method: tc.method, path: "/api/v1/info", host: tc.host}
			if tc.host == "" {
				q.host = " " // httptest would put example.com
			}
			if tc.method == "POST" {
				q.path, q.body = "/api/v1/backends", `{"name":"x"}` // 201 when let through
			}
			if tc.origin != "" {
				q.hdr = map[string]string{"Origin": tc.origin}
			}
			w := f.do(q)
			if w.Code != tc.status {
				t.Fatalf("%d, want %d: %s", w.Code, tc.status, w.Body)
			}
		})
	}
}

func TestCrossSiteFetchWithoutOriginIsRefused(t *testing.T) {
	f := newSecFixture(t, false, Options{Open: true})
	w := f.do(req{method: "DELETE", path: "/api/v1/backends/web", hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}})
	if w.Code != 403 {
		t.Fatalf("%d, want 403", w.Code)
	}
	// A cross-site navigation to the UI (a link from a wiki) still works.
	w = f.do(req{method: "GET", path: "/ui/", hdr: map[string]string{"Sec-Fetch-Site": "cross-site"}})
	if w.Code != 200 {
		t.Fatalf("GET /ui/ cross-site navigation: %d", w.Code)
	}
}

func TestWithoutTokens(t *testing.T) {
	t.Run("open on loopback: admin, actor local", func(t *testing.T) {
		f := newSecFixture(t, false, Options{Open: true})
		w := f.do(req{method: "GET", path: "/api/v1/info"})
		info := decodeJSON[Info](t, w)
		if w.Code != 200 || info.Role != "admin" || info.Auth {
			t.Fatalf("%d %+v", w.Code, info)
		}
	})
	t.Run("closed off loopback: 401 saying how to make a token", func(t *testing.T) {
		f := newSecFixture(t, false, Options{Open: false, AdminAddr: "0.0.0.0:9900"})
		w := f.do(req{method: "GET", path: "/api/v1/config"})
		if w.Code != 401 || !strings.Contains(w.Body.String(), "spliced token add") {
			t.Fatalf("%d %s", w.Code, w.Body)
		}
		if w := f.do(req{method: "GET", path: "/healthz"}); w.Code != 200 {
			t.Fatalf("/healthz: %d", w.Code)
		}
	})
}

func TestInfoReportsTheCallersRole(t *testing.T) {
	f := newSecFixture(t, true, Options{Open: true})
	for _, r := range []tokens.Role{tokens.Viewer, tokens.Operator, tokens.Admin} {
		w := f.do(req{method: "GET", path: "/api/v1/info", token: f.secrets[r]})
		info := decodeJSON[Info](t, w)
		if info.Role != string(r) || !info.Auth || info.TokenName != "t-"+string(r) {
			t.Errorf("as %s: role %q token_name %q auth %v", r, info.Role, info.TokenName, info.Auth)
		}
	}
}

// A revision names who made it and, for a restore, the generation it
// brought back (the web page's history shows both).
func TestRevisionsNameTheActorAndTheRestoredGeneration(t *testing.T) {
	f := newSecFixture(t, true, Options{Open: true})
	f.seed(t) // generations 1 (backend) and 2 (frontend), by t-admin
	admin := f.secrets[tokens.Admin]
	if w := f.do(req{method: "POST", path: "/api/v1/config/revisions/1/restore?dry_run=true", token: admin}); w.Code != 200 {
		t.Fatalf("dry-run restore: %d %s", w.Code, w.Body)
	}
	if w := f.do(req{method: "POST", path: "/api/v1/config/revisions/1/restore", token: admin}); w.Code != 200 {
		t.Fatalf("restore: %d %s", w.Code, w.Body)
	}
	w := f.do(req{method: "GET", path: "/api/v1/config/revisions", token: f.secrets[tokens.Viewer]})
	revs := decodeJSON[[]config.RevisionInfo](t, w)
	if len(revs) != 3 {
		t.Fatalf("%d revisions (a dry run makes none): %s", len(revs), w.Body)
	}
	want := []config.RevisionInfo{{Generation: 3, Actor: "t-admin", RestoreOf: 1}, {Generation: 2, Actor: "t-admin"}, {Generation: 1, Actor: "t-admin"}}
	for i, r := range revs {
		if r.Generation != want[i].Generation || r.Actor != want[i].Actor || r.RestoreOf != want[i].RestoreOf {
			t.Errorf("revision %d: %+v, want actor %q restore_of %d", r.Generation, r, want[i].Actor, want[i].RestoreOf)
		}
	}
	if !strings.Contains(w.Body.String(), `"restore_of":1`) || strings.Count(w.Body.String(), "restore_of") != 1 {
		t.Errorf("restore_of is only on the restore: %s", w.Body)
	}
	// The restored document is still readable whole.
	if w := f.do(req{method: "GET", path: "/api/v1/config/revisions/3", token: admin}); w.Code != 200 {
		t.Fatalf("revision 3: %d %s", w.Code, w.Body)
	}
}

func TestTokenChangesTakeEffectWithoutRestart(t *testing.T) {
	f := newSecFixture(t, false, Options{Open: true})
	if w := f.do(req{method: "GET", path: "/api/v1/config"}); w.Code != 200 {
		t.Fatalf("open: %d", w.Code)
	}
	s, err := tokens.Add(f.dir, "late", tokens.Viewer, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if w := f.do(req{method: "GET", path: "/api/v1/config"}); w.Code != 401 {
		t.Fatalf("after the first token, no token: %d, want 401", w.Code)
	}
	if w := f.do(req{method: "GET", path: "/api/v1/config", token: s}); w.Code != 200 {
		t.Fatalf("new token: %d", w.Code)
	}
	if err := tokens.Revoke(f.dir, "late"); err != nil {
		t.Fatal(err)
	}
	if _, err := tokens.Add(f.dir, "other", tokens.Admin, time.Now()); err != nil {
		t.Fatal(err)
	}
	if w := f.do(req{method: "GET", path: "/api/v1/config", token: s}); w.Code != 401 {
		t.Fatalf("revoked token: %d, want 401", w.Code)
	}
}

func TestCorruptTokenFileClosesTheAPI(t *testing.T) {
	f := newSecFixture(t, true, Options{Open: true})
	if err := os.WriteFile(filepath.Join(f.dir, tokens.FileName), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tok := range []string{"", f.secrets[tokens.Admin]} {
		if w := f.do(req{method: "GET", path: "/api/v1/config", token: tok}); w.Code != 503 {
			t.Fatalf("token %v: %d, want 503", tok != "", w.Code)
		}
	}
}

func TestFailedAuthIsRateLimitedPerAddress(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	bad := req{method: "GET", path: "/api/v1/config", token: "spliced_wrong", remote: "198.51.100.7:4000"}
	for i := range authFailBurst {
		if w := f.do(bad); w.Code != 401 {
			t.Fatalf("attempt %d: %d, want 401", i+1, w.Code)
		}
	}
	w := f.do(bad)
	if w.Code != 429 {
		t.Fatalf("attempt %d: %d, want 429", authFailBurst+1, w.Code)
	}
	ra, err := strconv.Atoi(w.Header().Get("Retry-After"))
	if err != nil || ra < 1 || ra > int(authFailRefill/time.Second) {
		t.Fatalf("Retry-After %q", w.Header().Get("Retry-After"))
	}
	// Issue 13: a valid token is never refused by the failure limiter,
	// however many bad ones its address sent.
	for _, role := range []tokens.Role{tokens.Viewer, tokens.Admin} {
		good := req{method: "GET", path: "/api/v1/config", token: f.secrets[role], remote: "198.51.100.7:4001"}
		if w := f.do(good); w.Code != 200 {
			t.Fatalf("a good %s token from the blocked address: %d, want 200", role, w.Code)
		}
	}
	if w := f.do(bad); w.Code != 429 {
		t.Fatalf("a bad token after a good one: %d, want 429 still", w.Code)
	}
	other := bad
	other.token, other.remote = "spliced_other", "198.51.100.8:4001"
	if w := f.do(other); w.Code != 401 {
		t.Fatalf("another address, another token: %d, want 401", w.Code)
	}
}

func TestFailedAuthIsRateLimitedPerTokenPrefix(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	// One revoked or guessed token from ever-changing addresses.
	bad := req{method: "GET", path: "/api/v1/config", token: "spliced_stale-token"}
	for i := range authFailBurst {
		bad.remote = fmt.Sprintf("203.0.113.%d:4000", i+1)
		if w := f.do(bad); w.Code != 401 {
			t.Fatalf("attempt %d: %d, want 401", i+1, w.Code)
		}
	}
	bad.remote = "203.0.113.200:4000"
	if w := f.do(bad); w.Code != 429 || w.Header().Get("Retry-After") == "" {
		t.Fatalf("same token prefix from a fresh address: %d (Retry-After %q), want 429", w.Code, w.Header().Get("Retry-After"))
	}
	good := req{method: "GET", path: "/api/v1/config", token: f.secrets[tokens.Admin], remote: "203.0.113.200:4001"}
	if w := f.do(good); w.Code != 200 {
		t.Fatalf("a valid token from that address: %d, want 200", w.Code)
	}
}

func TestFailLimiterRefillsAndStaysBounded(t *testing.T) {
	l := newFailLimiter(2, time.Second, 3)
	t0 := time.Unix(1000, 0)
	l.fail("a", t0)
	l.fail("a", t0)
	if w := l.wait("a", t0); w != time.Second {
		t.Fatalf("wait %v after the burst, want 1s", w)
	}
	if w := l.wait("a", t0.Add(500*time.Millisecond)); w != 500*time.Millisecond {
		t.Fatalf("wait %v half a refill later", w)
	}
	if w := l.wait("a", t0.Add(time.Second)); w != 0 {
		t.Fatalf("wait %v after a refill", w)
	}
	for i := range 100 {
		l.fail(fmt.Sprintf("k%d", i), t0)
	}
	if len(l.m) > 3 {
		t.Fatalf("%d keys tracked, max 3", len(l.m))
	}
}

func TestRemoteKey(t *testing.T) {
	for in, want := range map[string]string{
		"192.0.2.1:80":              "192.0.2.1",
		"[2001:db8::1]:80":          "2001:db8::/64",
		"[2001:db8::2]:81":          "2001:db8::/64",
		"[::ffff:192.0.2.1]:80":     "192.0.2.1",
		"@":                         "unix",
		"":                          "unix",
		"[2001:db8:0:1::9]:1":       "2001:db8:0:1::/64",
		"not an address at all :-)": "unix",
	} {
		if got := remoteKey(in); got != want {
			t.Errorf("remoteKey(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestSecretsStayOutOfLogsAuditAndAnswers(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	f.seed(t)
	var answers strings.Builder
	for _, r := range []tokens.Role{tokens.Viewer, tokens.Operator, tokens.Admin} {
		for _, q := range []req{
			{method: "GET", path: "/api/v1/config"},
			{method: "PATCH", path: "/api/v1/backends/web/servers/s1", body: `{"weight":3}`},
			{method: "PUT", path: "/api/v1/tuning", body: `{"nbthread":"x"}`},
			{method: "GET", path: "/api/v1/audit"},
			{method: "GET", path: "/api/v1/info"},
		} {
			q.token = f.secrets[r]
			answers.WriteString(f.do(q).Body.String())
		}
	}
	answers.WriteString(f.do(req{method: "GET", path: "/api/v1/config", token: f.secrets[tokens.Admin] + "x"}).Body.String())
	audit, _ := os.ReadFile(filepath.Join(f.dir, "audit.log"))
	if len(audit) == 0 {
		t.Fatal("no audit trail written")
	}
	if !strings.Contains(string(audit), `"actor":"t-operator"`) {
		t.Errorf("the audit trail does not name the operator token:\n%s", audit)
	}
	// A write refused before authentication is not in the change audit
	// (anyone could flood it): it is counted and sampled into the log.
	f.do(req{method: "DELETE", path: "/api/v1/backends/web", token: "spliced_wrong", remote: "203.0.113.5:1"})
	after, _ := os.ReadFile(filepath.Join(f.dir, "audit.log"))
	if string(after) != string(audit) {
		t.Errorf("a write refused before authentication reached the audit trail:\n%s", after[len(audit):])
	}
	if !strings.Contains(f.logs.String(), "refused before authentication") {
		t.Errorf("the refused write is not in the server log:\n%s", f.logs.String())
	}
	for r, s := range f.secrets {
		secretPart := s[len("spliced_"):]
		for what, text := range map[string]string{"log": f.logs.String(), "audit": string(audit), "answers": answers.String()} {
			if strings.Contains(text, secretPart) {
				t.Errorf("the %s token's secret appears in the %s", r, what)
			}
		}
	}
}

func BenchmarkAuthenticatedGet(b *testing.B) {
	f := newSecFixture(b, true, Options{})
	r := httptest.NewRequest("GET", "/api/v1/tuning", nil)
	r.Host = secAddr
	r.Header.Set("Authorization", "Bearer "+f.secrets[tokens.Viewer])
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, r)
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
