package api

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestHealthzIsAlwaysOK(t *testing.T) {
	f := newFixture(t)
	w := f.must(t, 200, "GET", "/healthz", "")
	if got := decodeJSON[Health](t, w); got.Status != "ok" {
		t.Fatalf("healthz %+v", got)
	}
}

func TestReadyzFollowsTheRunningGeneration(t *testing.T) {
	f := newFixture(t)
	f.must(t, 200, "GET", "/readyz", "")
	f.seed(t)
	f.must(t, 200, "GET", "/readyz", "")
	// The core falls behind (as if a snapshot never reached it): not ready.
	stale := f.store.Current().Clone()
	stale.Generation--
	if err := f.core.Apply(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	w := f.must(t, 503, "GET", "/readyz", "")
	if p := problemOf(t, w); !strings.Contains(p.Detail, "generation") {
		t.Fatalf("detail %q", p.Detail)
	}
}

func TestInfoReportsVersionGenerationAndStateDir(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	info := decodeJSON[Info](t, f.must(t, 200, "GET", "/api/v1/info", ""))
	cur := f.store.Current().Generation
	if info.Version != "test" || info.Generation != cur || info.RunningGeneration != cur ||
		info.StateDir != f.store.Dir() || info.AdminAddr != "127.0.0.1:0" || info.UptimeS < 0 {
		t.Fatalf("info %+v (store generation %d)", info, cur)
	}
}

func TestCollectionsCreateGetReplacePatchDelete(t *testing.T) {
	type step struct {
		method, path, body string
		status             int
		check              func(t *testing.T, body string)
	}
	has := func(sub string) func(*testing.T, string) {
		return func(t *testing.T, body string) {
			t.Helper()
			if !strings.Contains(body, sub) {
				t.Fatalf("body %s lacks %s", body, sub)
			}
		}
	}
	lacks := func(sub string) func(*testing.T, string) {
		return func(t *testing.T, body string) {
			t.Helper()
			if strings.Contains(body, sub) {
				t.Fatalf("body %s still has %s", body, sub)
			}
		}
	}
	steps := []step{
		{"GET", "/api/v1/backends", "", 200, func(t *testing.T, b string) {
			if strings.TrimSpace(b) != "[]" {
				t.Fatalf("empty list is %s", b)
			}
		}},
		{"POST", "/api/v1/backends", backendWeb, 201, has(`"weight":100`)},
		{"GET", "/api/v1/backends/web", "", 200, has(`"balance":"roundrobin"`)},
		{"POST", "/api/v1/backends/web/servers", `{"name":"s2","address":"127.0.0.1","port":8082}`, 201, has(`"admin_state":"ready"`)},
		{"GET", "/api/v1/backends/web/servers", "", 200, has(`"s2"`)},
		{"GET", "/api/v1/backends/web/servers/s2", "", 200, has(`"port":8082`)},
		{"PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"drain"}`, 200, has(`"admin_state":"drain"`)},
		{"PUT", "/api/v1/backends/web/servers/s2", `{"address":"127.0.0.2","port":9000,"weight":7}`, 200, has(`"weight":7`)},
		{"GET", "/api/v1/backends/web/servers/s2", "", 200, has(`"address":"127.0.0.2"`)},
		{"PATCH", "/api/v1/backends/web", `{"health_check":{"type":"tcp"},"timeouts":{"connect_ms":1234}}`, 200, has(`"connect_ms":1234`)},
		{"PUT", "/api/v1/backends/web", `{"mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":8081}]}`, 200, lacks(`"s2"`)},
		{"POST", "/api/v1/frontends", frontendPublic, 201, has(`"default_backend":"web"`)},
		{"GET", "/api/v1/frontends", "", 200, has(`"public"`)},
		{"GET", "/api/v1/frontends/public", "", 200, has(`"b1"`)},
		{"PATCH", "/api/v1/frontends/public", `{"splice":"on","maxconn":20000}`, 200, has(`"maxconn":20000`)},
		{"POST", "/api/v1/frontends/public/binds", `{"name":"b2","address":"127.0.0.1","port":8443}`, 201, has(`"port":8443`)},
		{"GET", "/api/v1/frontends/public/binds", "", 200, has(`"b2"`)},
		{"GET", "/api/v1/frontends/public/binds/b2", "", 200, has(`"port":8443`)},
		{"PUT", "/api/v1/frontends/public/binds/b2", `{"name":"b2","address":"127.0.0.1","port":8444,"backlog":100}`, 200, has(`"backlog":100`)},
		{"DELETE", "/api/v1/frontends/public/binds/b2", "", 204, nil},
		{"GET", "/api/v1/frontends/public/binds/b2", "", 404, nil},
		{"PUT", "/api/v1/frontends/public", `{"mode":"http","default_backend":"web","splice":"off","binds":[{"name":"b1","address":"127.0.0.1","port":8080}]}`, 200, has(`"splice":"off"`)},
		{"DELETE", "/api/v1/backends/web/servers/s1", "", 204, nil},
		{"DELETE", "/api/v1/frontends/public", "", 204, nil},
		{"DELETE", "/api/v1/backends/web", "", 204, nil},
		{"GET", "/api/v1/backends/web", "", 404, nil},
		{"GET", "/api/v1/frontends", "", 200, func(t *testing.T, b string) {
			if strings.TrimSpace(b) != "[]" {
				t.Fatalf("list after deletes is %s", b)
			}
		}},
	}
	f := newFixture(t)
	for i, s := range steps {
		w := f.do(s.method, s.path, s.body)
		if w.Code != s.status {
			t.Fatalf("step %d %s %s: status %d, want %d: %s", i, s.method, s.path, w.Code, s.status, w.Body.String())
		}
		if s.check != nil {
			s.check(t, w.Body.String())
		}
		if s.method == "POST" {
			loc := w.Header().Get("Location")
			var a writeAnswer
			_ = json.Unmarshal(w.Body.Bytes(), &a)
			var obj struct{ Name string }
			_ = json.Unmarshal(a.Result, &obj)
			if loc != s.path+"/"+obj.Name || obj.Name == "" {
				t.Fatalf("step %d: Location %q for %s", i, loc, a.Result)
			}
			f.must(t, 200, "GET", loc, "")
		}
	}
	// Every accepted write made one generation: config at the start is
	// generation 0, and 15 writes above changed something.
	if g := f.store.Current().Generation; g != 15 {
		t.Fatalf("generation %d after the walk, want 15", g)
	}
}

func TestEveryWriteAnswerCarriesTheNewGeneration(t *testing.T) {
	f := newFixture(t)
	writes := []struct{ method, path, body string }{
		{"POST", "/api/v1/backends", backendWeb},
		{"POST", "/api/v1/frontends", frontendPublic},
		{"POST", "/api/v1/backends/web/servers", `{"name":"s2","address":"127.0.0.1","port":8082}`},
		{"PATCH", "/api/v1/backends/web/servers/s2", `{"weight":5}`},
		{"PUT", "/api/v1/backends/web/servers/s2", `{"address":"127.0.0.1","port":8083}`},
		{"POST", "/api/v1/frontends/public/binds", `{"name":"b2","address":"127.0.0.1","port":8443}`},
		{"PUT", "/api/v1/frontends/public/binds/b2", `{"address":"127.0.0.1","port":8444}`},
		{"PATCH", "/api/v1/frontends/public", `{"maxconn":10}`},
		{"PATCH", "/api/v1/backends/web", `{"retries":1}`},
		{"PUT", "/api/v1/tuning", `{"runqueue_depth":100}`},
		{"PATCH", "/api/v1/tuning", `{"maxaccept":8}`},
		{"DELETE", "/api/v1/frontends/public/binds/b2", ""},
		{"DELETE", "/api/v1/backends/web/servers/s2", ""},
		{"POST", "/api/v1/config/revisions/1/restore", ""},
		{"PUT", "/api/v1/config", `{"frontends":[],"backends":[]}`},
	}
	for i, wr := range writes {
		before := f.store.Current().Generation
		w := f.do(wr.method, wr.path, wr.body)
		if w.Code >= 300 {
			t.Fatalf("%s %s: %d %s", wr.method, wr.path, w.Code, w.Body.String())
		}
		want := before + 1
		if got := w.Header().Get("X-Spliced-Generation"); got != strconv.FormatInt(want, 10) {
			t.Fatalf("write %d %s %s: X-Spliced-Generation %q, want %d", i, wr.method, wr.path, got, want)
		}
		if w.Code != http.StatusNoContent {
			if a := decodeJSON[writeAnswer](t, w); a.Generation != want || a.DryRun {
				t.Fatalf("write %d: answer generation %d dry %v, want %d", i, a.Generation, a.DryRun, want)
			}
		}
		if f.core.Runtime().Generation != want {
			t.Fatalf("write %d answered before the core ran generation %d (runs %d)", i, want, f.core.Runtime().Generation)
		}
	}
}

func TestDryRunAnswersThePlanAndChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	writes := []struct{ method, path, body string }{
		{"POST", "/api/v1/backends", `{"name":"api","servers":[{"name":"a1","address":"127.0.0.1","port":9001}]}`},
		{"POST", "/api/v1/frontends/public/binds", `{"name":"b2","address":"127.0.0.1","port":8443}`},
		{"PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"maint"}`},
		{"PUT", "/api/v1/tuning", `{"runqueue_depth":50}`},
		{"PATCH", "/api/v1/frontends/public", `{"maxconn":5}`},
		{"DELETE", "/api/v1/frontends/public", ""},
		{"PUT", "/api/v1/config", `{}`},
		{"POST", "/api/v1/config/revisions/1/restore", ""},
	}
	before := f.snapshot(t)
	gen := f.store.Current().Generation
	revs := f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String()
	for _, wr := range writes {
		w := f.must(t, 200, wr.method, wr.path+"?dry_run=true", wr.body)
		a := decodeJSON[writeAnswer](t, w)
		if !a.DryRun || a.Generation != gen || len(a.Plan.Items) == 0 {
			t.Fatalf("%s %s dry run: %s", wr.method, wr.path, w.Body.String())
		}
	}
	if after := f.snapshot(t); after != before {
		t.Fatalf("dry runs changed the config:\n%s\n%s", before, after)
	}
	if after := f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String(); after != revs {
		t.Fatalf("dry runs changed the revisions")
	}
	if f.core.Runtime().Generation != gen {
		t.Fatalf("a dry run reached the core")
	}
	f.must(t, 400, "DELETE", "/api/v1/frontends/public?dry_run=maybe", "")
}

func TestETagChangesAfterAWriteAndIfMatchGuardsWrites(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	get := func(path string) string {
		t.Helper()
		tag := f.must(t, 200, "GET", path, "").Header().Get("ETag")
		if len(tag) < 3 || tag[0] != '"' || tag[len(tag)-1] != '"' {
			t.Fatalf("%s: ETag %q is not a strong quoted tag", path, tag)
		}
		return tag
	}
	for _, p := range []string{"/api/v1/config", "/api/v1/config/revisions", "/api/v1/config/revisions/1",
		"/api/v1/frontends", "/api/v1/frontends/public", "/api/v1/frontends/public/binds",
		"/api/v1/frontends/public/binds/b1", "/api/v1/backends", "/api/v1/backends/web",
		"/api/v1/backends/web/servers", "/api/v1/backends/web/servers/s1", "/api/v1/tuning"} {
		if a, b := get(p), get(p); a != b {
			t.Fatalf("%s: ETag not stable: %s %s", p, a, b)
		}
	}
	s1 := get("/api/v1/backends/web/servers/s1")
	fe := get("/api/v1/frontends/public")
	cfg := get("/api/v1/config")

	// If-None-Match with the current tag: 304.
	f.must(t, 304, "GET", "/api/v1/backends/web/servers/s1", "", hdr{"If-None-Match": s1})

	// A matching If-Match wins; the answer's ETag is the new one.
	w := f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":10}`, hdr{"If-Match": s1})
	s1b := get("/api/v1/backends/web/servers/s1")
	if s1b == s1 || w.Header().Get("ETag") != s1b {
		t.Fatalf("ETag after write: old %s new %s answer %s", s1, s1b, w.Header().Get("ETag"))
	}
	// The old tag is stale now: 412 and nothing changed.
	before := f.snapshot(t)
	w = f.must(t, 412, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":20}`, hdr{"If-Match": s1})
	problemOf(t, w)
	if f.snapshot(t) != before {
		t.Fatal("a 412 changed the config")
	}
	// An unrelated object keeps its tag; the whole document does not.
	if get("/api/v1/frontends/public") != fe {
		t.Fatal("the frontend's ETag changed with a server write")
	}
	if get("/api/v1/config") == cfg {
		t.Fatal("the config ETag did not change")
	}
	// "*" matches any existing object; a list of tags matches any of them.
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":30}`, hdr{"If-Match": "*"})
	cur := get("/api/v1/backends/web/servers/s1")
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":31}`, hdr{"If-Match": `"x", ` + cur})
	// POST compares with the list's tag; DELETE and restore too.
	list := get("/api/v1/backends/web/servers")
	f.must(t, 412, "POST", "/api/v1/backends/web/servers", `{"name":"s9","address":"127.0.0.1","port":9}`, hdr{"If-Match": `"nope"`})
	f.must(t, 201, "POST", "/api/v1/backends/web/servers", `{"name":"s9","address":"127.0.0.1","port":9}`, hdr{"If-Match": list})
	f.must(t, 412, "DELETE", "/api/v1/backends/web/servers/s9", "", hdr{"If-Match": list})
	f.must(t, 412, "POST", "/api/v1/config/revisions/1/restore", "", hdr{"If-Match": cfg})
	f.must(t, 412, "PUT", "/api/v1/tuning", `{}`, hdr{"If-Match": `"0"`})
}

func TestMergePatchSemantics(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, 200, "PATCH", "/api/v1/backends/web",
		`{"health_check":{"type":"http","path":"/healthz","interval_ms":2000},"retries":5}`,
		hdr{"Content-Type": "application/merge-patch+json"})
	b := decodeJSON[config.Backend](t, f.must(t, 200, "GET", "/api/v1/backends/web", ""))
	if b.HealthCheck == nil || b.HealthCheck.Path != "/healthz" || *b.Retries != 5 {
		t.Fatalf("after patch: %+v", b)
	}
	// Nested objects merge member by member.
	f.must(t, 200, "PATCH", "/api/v1/backends/web", `{"health_check":{"rise":4}}`)
	b = decodeJSON[config.Backend](t, f.must(t, 200, "GET", "/api/v1/backends/web", ""))
	if b.HealthCheck.Path != "/healthz" || b.HealthCheck.Rise != 4 {
		t.Fatalf("nested merge lost a member: %+v", b.HealthCheck)
	}
	// null removes: the check goes, retries and weight return to defaults.
	f.must(t, 200, "PATCH", "/api/v1/backends/web", `{"health_check":null,"retries":null}`)
	b = decodeJSON[config.Backend](t, f.must(t, 200, "GET", "/api/v1/backends/web", ""))
	if b.HealthCheck != nil || *b.Retries != config.DefaultRetries {
		t.Fatalf("null did not remove: %+v", b)
	}
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":3}`)
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":null}`)
	s := decodeJSON[config.Server](t, f.must(t, 200, "GET", "/api/v1/backends/web/servers/s1", ""))
	if *s.Weight != config.DefaultWeight {
		t.Fatalf("weight after null: %d", *s.Weight)
	}
	// Arrays are replaced whole.
	f.must(t, 200, "PATCH", "/api/v1/backends/web", `{"servers":[{"name":"z","address":"127.0.0.1","port":1}]}`)
	b = decodeJSON[config.Backend](t, f.must(t, 200, "GET", "/api/v1/backends/web", ""))
	if len(b.Servers) != 1 || b.Servers[0].Name != "z" {
		t.Fatalf("array not replaced: %+v", b.Servers)
	}
	// Tuning: nested sched shares.
	f.must(t, 200, "PATCH", "/api/v1/tuning", `{"sched":{"urgent":40,"normal":40,"bulk":20}}`)
	tu := decodeJSON[config.Tuning](t, f.must(t, 200, "GET", "/api/v1/tuning", ""))
	if tu.Sched.Urgent != 40 || tu.RunqueueDepth != config.DefaultRunqueueDepth {
		t.Fatalf("tuning %+v", tu)
	}
	// A patch that renames is refused, as is a non-object patch.
	w := f.must(t, 422, "PATCH", "/api/v1/backends/web", `{"name":"other"}`)
	if p := problemOf(t, w); p.Errors[0].Field != "/name" {
		t.Fatalf("rename problem %+v", p)
	}
	f.must(t, 422, "PATCH", "/api/v1/backends/web", `[1,2]`)
}

func TestConfigPutReplacesTheDocument(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	doc := `{"generation":999,"backends":[{"name":"only","servers":[]}],"frontends":[],"tuning":{"maxaccept":4}}`
	w := f.must(t, 200, "PUT", "/api/v1/config", doc)
	a := decodeJSON[writeAnswer](t, w)
	if a.Generation != 3 {
		t.Fatalf("generation %d, a client-supplied generation must be ignored", a.Generation)
	}
	c := decodeJSON[config.Config](t, f.must(t, 200, "GET", "/api/v1/config", ""))
	if len(c.Backends) != 1 || c.Backends[0].Name != "only" || len(c.Frontends) != 0 || c.Tuning.Maxaccept != 4 || c.Generation != 3 {
		t.Fatalf("config after PUT: %+v", c)
	}
	// Validation errors point into the document.
	w = f.must(t, 422, "PUT", "/api/v1/config", `{"backends":[{"name":"x","servers":[{"name":"s","address":"127.0.0.1","port":0}]}]}`)
	if p := problemOf(t, w); p.Errors[0].Field != "/backends/0/servers/0/port" {
		t.Fatalf("pointer %+v", p.Errors)
	}
}

func TestRevisionsListShowDiffAndRestore(t *testing.T) {
	f := newFixture(t)
	f.seed(t)                                                                             // generations 1 and 2
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"drain"}`) // 3
	revs := decodeJSON[[]config.RevisionInfo](t, f.must(t, 200, "GET", "/api/v1/config/revisions", ""))
	if len(revs) != 3 || revs[0].Generation != 3 || revs[2].Generation != 1 {
		t.Fatalf("revisions %+v", revs)
	}
	d := decodeJSON[RevisionDetail](t, f.must(t, 200, "GET", "/api/v1/config/revisions/3", ""))
	if d.Generation != 3 || d.Against == nil || *d.Against != 2 || d.Plan == nil || len(d.Plan.Items) != 1 ||
		d.Plan.Items[0].Object != "backend/web/server/s1" || d.Config == nil {
		t.Fatalf("revision 3: %+v plan %+v", d, d.Plan)
	}
	d = decodeJSON[RevisionDetail](t, f.must(t, 200, "GET", "/api/v1/config/revisions/3?against=0", ""))
	if *d.Against != 0 || len(d.Plan.Items) != 2 {
		t.Fatalf("against 0: %+v", d.Plan)
	}
	d = decodeJSON[RevisionDetail](t, f.must(t, 200, "GET", "/api/v1/config/revisions/1", ""))
	if *d.Against != 0 || d.Plan == nil || d.Plan.Items[0].Op != "create" {
		t.Fatalf("revision 1: %+v", d)
	}
	f.must(t, 404, "GET", "/api/v1/config/revisions/42", "")
	f.must(t, 404, "GET", "/api/v1/config/revisions/3?against=41", "")
	f.must(t, 400, "GET", "/api/v1/config/revisions/abc", "")
	f.must(t, 400, "GET", "/api/v1/config/revisions/3?against=-1", "")

	// Restore generation 1 (backend only) as generation 4.
	w := f.must(t, 200, "POST", "/api/v1/config/revisions/1/restore", "")
	if a := decodeJSON[writeAnswer](t, w); a.Generation != 4 {
		t.Fatalf("restore answered generation %d", a.Generation)
	}
	c := f.store.Current()
	if c.Generation != 4 || len(c.Frontends) != 0 || len(c.Backends) != 1 {
		t.Fatalf("after restore: %+v", c)
	}
	f.must(t, 404, "POST", "/api/v1/config/revisions/99/restore", "")
}

func TestApplyFailureIs409AndChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	before := f.snapshot(t)
	revs := f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String()
	f.core.Fail = func(c *config.Config) error {
		return &config.ApplyError{Field: "/frontends/0/binds/1", Object: "frontend public bind b2", Err: syscall.EADDRINUSE}
	}
	w := f.must(t, 409, "POST", "/api/v1/frontends/public/binds", `{"name":"b2","address":"127.0.0.1","port":8443}`)
	p := problemOf(t, w)
	if !strings.Contains(p.Detail, "address already in use") || p.Errors[0].Code != "apply_failed" || p.Errors[0].Field != "" {
		t.Fatalf("problem %+v", p)
	}
	f.core.Fail = nil
	if f.snapshot(t) != before {
		t.Fatal("a refused apply changed the config")
	}
	if f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String() != revs {
		t.Fatal("a refused apply left a revision")
	}
	if f.core.Runtime().Generation != f.store.Current().Generation {
		t.Fatal("core and store disagree after rollback")
	}
	f.must(t, 200, "GET", "/readyz", "")
}

func TestErrorStatuses(t *testing.T) {
	t.Parallel()
	deep := strings.Repeat(`{"a":`, 40) + "1" + strings.Repeat("}", 40)
	cases := []struct {
		name               string
		method, path, body string
		h                  hdr
		status             int
		field, code        string // first error, when set
	}{
		{"bad JSON", "POST", "/api/v1/backends", `{"name":`, nil, 400, "", config.DecodeSyntax},
		{"empty body", "POST", "/api/v1/backends", ` `, nil, 400, "", config.DecodeEmpty},
		{"trailing data", "POST", "/api/v1/backends", `{"name":"x"} {}`, nil, 400, "", config.DecodeTrailing},
		{"unknown field", "POST", "/api/v1/backends", `{"name":"x","servers":[{"name":"s","address":"a","port":1,"wieght":1}]}`, nil, 400, "/servers/0/wieght", config.DecodeUnknownField},
		{"unknown field by case", "POST", "/api/v1/backends", `{"Name":"x"}`, nil, 400, "/Name", config.DecodeUnknownField},
		{"unknown field in patch", "PATCH", "/api/v1/backends/web/servers/s1", `{"colour":"red"}`, nil, 400, "/colour", config.DecodeUnknownField},
		{"duplicate key", "POST", "/api/v1/backends/web/servers", `{"name":"s7","address":"a","port":1,"port":2}`, nil, 400, "/port", CodeDuplicateField},
		{"duplicate nested key", "PUT", "/api/v1/config", `{"backends":[{"name":"a"},{"name":"b","servers":[{"name":"x","name":"y"}]}]}`, nil, 400, "/backends/1/servers/0/name", CodeDuplicateField},
		{"duplicate key in patch", "PATCH", "/api/v1/tuning", `{"sched":{"a/b":1,"a/b":2}}`, nil, 400, "/sched/a~1b", CodeDuplicateField},
		{"invalid UTF-8", "POST", "/api/v1/backends", "{\"name\":\"\xff\xfe\"}", nil, 400, "", config.DecodeUTF8},
		{"deep nesting", "POST", "/api/v1/backends", deep, nil, 400, "", config.DecodeDepth},
		{"deep nesting patch", "PATCH", "/api/v1/tuning", deep, nil, 400, "", config.DecodeDepth},
		{"top-level null", "PUT", "/api/v1/tuning", `null`, nil, 422, "", config.DecodeType},
		{"top-level array", "POST", "/api/v1/backends", `[]`, nil, 422, "", config.DecodeType},
		{"wrong type", "POST", "/api/v1/backends/web/servers", `{"name":"s5","address":"a","port":"80"}`, nil, 422, "/port", config.DecodeType},
		// servers are pointers (config.Backend.Servers): a null one is a
		// wrong type, never a nil server further on
		{"null server", "POST", "/api/v1/backends", `{"name":"x","servers":[null]}`, nil, 422, "/servers/0", config.DecodeType},
		{"null server in the document", "PUT", "/api/v1/config", `{"backends":[{"name":"x","servers":[{"name":"a","address":"::1","port":1},null]}]}`, nil, 422, "/backends/0/servers/1", config.DecodeType},
		{"null server in a backend's patch", "PATCH", "/api/v1/backends/web", `{"servers":[null]}`, nil, 422, "/servers/0", config.DecodeType},
		{"null server in a backend's put", "PUT", "/api/v1/backends/web", `{"servers":[null]}`, nil, 422, "/servers/0", config.DecodeType},
		{"null server body", "POST", "/api/v1/backends/web/servers", `null`, nil, 422, "", config.DecodeType},
		{"null server put", "PUT", "/api/v1/backends/web/servers/s1", ` null `, nil, 422, "", config.DecodeType},
		{"number too big", "PATCH", "/api/v1/tuning", `{"maxconn":1e99}`, nil, 422, "/maxconn", config.DecodeType},
		{"unknown frontend", "GET", "/api/v1/frontends/nope", "", nil, 404, "", ""},
		{"unknown server", "PATCH", "/api/v1/backends/web/servers/nope", `{"weight":1}`, nil, 404, "", ""},
		{"unknown parent", "POST", "/api/v1/backends/nope/servers", `{"name":"s","address":"a","port":1}`, nil, 404, "", ""},
		{"unknown route", "GET", "/api/v1/nothing", "", nil, 404, "", ""},
		{"unknown root route", "GET", "/nothing", "", nil, 404, "", ""},
		{"PUT unknown", "PUT", "/api/v1/backends/nope", `{"servers":[]}`, nil, 404, "", ""},
		{"DELETE unknown", "DELETE", "/api/v1/frontends/nope", "", nil, 404, "", ""},
		{"wrong method", "PATCH", "/api/v1/frontends/public/binds/b1", `{}`, nil, 405, "", ""},
		{"wrong method on list", "DELETE", "/api/v1/backends", "", nil, 405, "", ""},
		{"name taken", "POST", "/api/v1/backends", backendWeb, nil, 409, "/name", config.CodeDuplicate},
		{"server name taken", "POST", "/api/v1/backends/web/servers", `{"name":"s1","address":"a","port":1}`, nil, 409, "/name", config.CodeDuplicate},
		{"still referenced", "DELETE", "/api/v1/backends/web", "", nil, 409, "/frontends/0/default_backend", "in_use"},
		{"stale If-Match", "PUT", "/api/v1/tuning", `{}`, hdr{"If-Match": `"stale"`}, 412, "", ""},
		{"body too large", "POST", "/api/v1/backends", `{"name":"` + strings.Repeat("x", MaxBodyBytes) + `"}`, nil, 413, "", ""},
		{"no Content-Type", "POST", "/api/v1/backends", backendWeb, hdr{"Content-Type": ""}, 415, "", ""},
		{"text/plain", "PUT", "/api/v1/tuning", `{}`, hdr{"Content-Type": "text/plain"}, 415, "", ""},
		{"merge-patch on PUT", "PUT", "/api/v1/tuning", `{}`, hdr{"Content-Type": "application/merge-patch+json"}, 415, "", ""},
		{"latin1 charset", "PATCH", "/api/v1/tuning", `{}`, hdr{"Content-Type": "application/json; charset=latin1"}, 415, "", ""},
		{"validation pointer", "POST", "/api/v1/backends/web/servers", `{"name":"s5","address":"127.0.0.1","port":0}`, nil, 422, "/port", ""},
		{"validation pointer in bind", "POST", "/api/v1/frontends/public/binds", `{"name":"b5","address":"127.0.0.1","port":70000}`, nil, 422, "/port", ""},
		{"dangling reference", "PATCH", "/api/v1/frontends/public", `{"default_backend":"ghost"}`, nil, 422, "/default_backend", ""},
		{"name mismatch", "PUT", "/api/v1/backends/web", `{"name":"other"}`, nil, 422, "/name", "name_mismatch"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			f := newFixture(t)
			f.seed(t)
			before := f.snapshot(t)
			var h []hdr
			if tc.h != nil {
				h = append(h, tc.h)
			}
			w := f.must(t, tc.status, tc.method, tc.path, tc.body, h...)
			p := problemOf(t, w)
			if tc.code != "" || tc.field != "" {
				if len(p.Errors) == 0 {
					t.Fatalf("no errors in %+v", p)
				}
				if tc.field != "" && p.Errors[0].Field != tc.field || tc.code != "" && p.Errors[0].Code != tc.code {
					t.Fatalf("first error %+v, want field %q code %q", p.Errors[0], tc.field, tc.code)
				}
			}
			if tc.status == 405 && w.Header().Get("Allow") == "" {
				t.Fatal("405 without Allow")
			}
			if f.snapshot(t) != before {
				t.Fatal("a refused request changed the config")
			}
		})
	}
}

func TestMethodNotAllowedListsTheAllowedMethods(t *testing.T) {
	f := newFixture(t)
	for path, want := range map[string]string{
		"/api/v1/backends/web":              "GET, HEAD, PUT, PATCH, DELETE",
		"/api/v1/frontends/public/binds/b1": "GET, HEAD, PUT, DELETE",
		"/api/v1/tuning":                    "GET, HEAD, PUT, PATCH",
		"/api/v1/config/revisions":          "GET, HEAD",
	} {
		w := f.must(t, 405, "POST", path, "")
		if got := w.Header().Get("Allow"); got != want {
			t.Errorf("%s: Allow %q, want %q", path, got, want)
		}
	}
}

func TestBodyOverTheLimitWithoutContentLengthIs413(t *testing.T) {
	f := newFixture(t)
	before := f.snapshot(t)
	req := httptest.NewRequest("PUT", "/api/v1/config", strings.NewReader(`{"backends":[`+strings.Repeat(`{"name":"x"},`, MaxBodyBytes/12)+`]}`))
	req.ContentLength = -1 // chunked: only reading finds out
	req.Header.Set("Content-Type", "application/json")
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	if w.Code != 413 {
		t.Fatalf("status %d: %.200s", w.Code, w.Body.String())
	}
	problemOf(t, w)
	if f.snapshot(t) != before {
		t.Fatal("config changed")
	}
}

func TestHeadAnswersLikeGetWithoutBody(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	get := f.must(t, 200, "GET", "/api/v1/backends/web", "")
	resp, err := http.Head(srv.URL + "/api/v1/backends/web")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("ETag") != get.Header().Get("ETag") || len(body) != 0 {
		t.Fatalf("HEAD: %d ETag %q body %d bytes", resp.StatusCode, resp.Header.Get("ETag"), len(body))
	}
}

func TestStaticPagesAndDocument(t *testing.T) {
	f := newFixture(t)
	if w := f.must(t, 302, "GET", "/", ""); w.Header().Get("Location") != "/ui/" {
		t.Fatalf("/ redirects to %q", w.Header().Get("Location"))
	}
	if w := f.must(t, 200, "GET", "/ui/", ""); !strings.Contains(w.Body.String(), "<title>spliced</title>") {
		t.Fatal("/ui/ is not the spliced page")
	}
	w := f.must(t, 200, "GET", "/docs/", "")
	if b := w.Body.String(); !strings.Contains(b, "swagger-ui-bundle.js") || strings.Contains(b, "http") {
		t.Fatalf("/docs/ must load local assets only: %s", b)
	}
	for _, p := range []string{"/docs/swagger-ui-bundle.js", "/docs/swagger-ui.css", "/docs/init.js"} {
		f.must(t, 200, "GET", p, "")
	}
	f.must(t, 301, "GET", "/docs", "")
	w = f.must(t, 200, "GET", "/openapi.json", "")
	var doc struct {
		Swagger string         `json:"swagger"`
		Paths   map[string]any `json:"paths"`
	}
	if err := json.Unmarshal(w.Body.Bytes(), &doc); err != nil || doc.Swagger != "2.0" {
		t.Fatalf("openapi.json: %v %q", err, doc.Swagger)
	}
}

func TestRequestIDIsEchoedOrGenerated(t *testing.T) {
	f := newFixture(t)
	if got := f.must(t, 200, "GET", "/healthz", "", hdr{"X-Request-Id": "abc-123"}).Header().Get("X-Request-Id"); got != "abc-123" {
		t.Fatalf("echoed id %q", got)
	}
	for _, bad := range []string{"", "has space", strings.Repeat("a", 65), "x\"y"} {
		got := f.must(t, 200, "GET", "/healthz", "", hdr{"X-Request-Id": bad}).Header().Get("X-Request-Id")
		if got == bad || len(got) != 24 {
			t.Fatalf("for %q got id %q", bad, got)
		}
	}
	w := f.must(t, 404, "GET", "/api/v1/frontends/x", "", hdr{"X-Request-Id": "req-1"})
	if p := problemOf(t, w); p.RequestID != "req-1" || p.Instance != "/api/v1/frontends/x" {
		t.Fatalf("problem %+v", p)
	}
}

func TestPanicBecomesALogged500Problem(t *testing.T) {
	var logged strings.Builder
	log := newTextLogger(&logged)
	h := requestIDs(accessLog(log)(recoverer(log)(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {
		panic("boom")
	}))))
	f := &fixture{h: h}
	w := f.must(t, 500, "GET", "/x", "")
	p := problemOf(t, w)
	if strings.Contains(p.Detail, "boom") {
		t.Fatalf("the panic value leaked to the client: %q", p.Detail)
	}
	if s := logged.String(); !strings.Contains(s, "boom") || !strings.Contains(s, "status=500") {
		t.Fatalf("log: %s", s)
	}
}

func TestAccessLogNamesMethodPathStatusAndID(t *testing.T) {
	var logged strings.Builder
	f := newFixture(t)
	f.h = New(Options{Store: f.store, Core: f.core, Logger: newTextLogger(&logged)})
	f.must(t, 404, "GET", "/api/v1/backends/zz", "", hdr{"X-Request-Id": "rid-7"})
	s := logged.String()
	for _, want := range []string{"method=GET", "path=/api/v1/backends/zz", "status=404", "request_id=rid-7", "duration="} {
		if !strings.Contains(s, want) {
			t.Fatalf("log line %q lacks %q", s, want)
		}
	}
}

func TestValidationErrorsOutsideTheBodyPointIntoTheDocument(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	// Two frontends on the same address: the conflict is with another
	// object, whose pointer stays a whole-document pointer.
	w := f.do("POST", "/api/v1/frontends", `{"name":"second","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":8080}]}`)
	if w.Code != 409 && w.Code != 422 {
		t.Fatalf("status %d: %s", w.Code, w.Body.String())
	}
	p := problemOf(t, w)
	found := false
	for _, e := range p.Errors {
		if strings.HasPrefix(e.Field, "/binds/0") || strings.HasPrefix(e.Field, "/frontends/0") {
			found = true
		}
	}
	if !found {
		t.Fatalf("errors %+v", p.Errors)
	}
}

func TestIfMatchLetsExactlyOneConcurrentWriterWin(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	tag := f.must(t, 200, "GET", "/api/v1/backends/web/servers/s1", "").Header().Get("ETag")
	const n = 20
	codes := make(chan int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w := f.do("PATCH", "/api/v1/backends/web/servers/s1", fmt.Sprintf(`{"weight":%d}`, i+1), hdr{"If-Match": tag})
			codes <- w.Code
		}()
	}
	wg.Wait()
	close(codes)
	won := 0
	for c := range codes {
		switch c {
		case 200:
			won++
		case 412:
		default:
			t.Fatalf("status %d", c)
		}
	}
	if won != 1 || f.store.Current().Generation != 3 {
		t.Fatalf("%d writers won, generation %d; want exactly one, generation 3", won, f.store.Current().Generation)
	}
}

// TestStoppingCoreIsNotReadyAndRefusesWrites: once the core's Close began,
// /readyz answers 503 "stopping" and a write 503 "stopping", nothing
// changed.
func TestStoppingCoreIsNotReadyAndRefusesWrites(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	gen := f.store.Current().Generation
	if err := f.core.Close(t.Context()); err != nil {
		t.Fatal(err)
	}
	if p := problemOf(t, f.must(t, 503, "GET", "/readyz", "")); p.Type != "urn:spliced:problem:stopping" {
		t.Fatalf("readyz: %+v", p)
	}
	if p := problemOf(t, f.must(t, 503, "PATCH", "/api/v1/tuning", `{"grace_ms": 1234}`)); p.Type != "urn:spliced:problem:stopping" {
		t.Fatalf("write: %+v", p)
	}
	if g := f.store.Current().Generation; g != gen || f.store.Current().Tuning.GraceMs == 1234 {
		t.Fatalf("generation %d (was %d), grace_ms %d after a refused write", g, gen, f.store.Current().Tuning.GraceMs)
	}
}
