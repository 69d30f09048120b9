package api

import (
	"net/http"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

const settingsEdge2 = "/api/v1/cluster/nodes/edge-2/settings"

func TestNodeSettingsRoutes(t *testing.T) {
	f := newFixture(t)
	p := problemOf(t, f.must(t, http.StatusNotFound, "GET", settingsEdge2, ""))
	if !strings.Contains(p.Detail, `"edge-2"`) {
		t.Errorf("404 detail %q", p.Detail)
	}
	f.must(t, http.StatusNotFound, "DELETE", settingsEdge2, "")

	// A dry run changes nothing.
	gen := f.store.Current().Generation
	dry := decodeJSON[writeAnswer](t, f.must(t, http.StatusOK, "PUT", settingsEdge2+"?dry_run=true", `{"nbthread":4}`))
	if !dry.DryRun || f.store.Current().Nodes != nil || f.store.Current().Generation != gen {
		t.Fatalf("dry run changed the store: %+v", f.store.Current().Nodes)
	}

	w := f.must(t, http.StatusOK, "PUT", settingsEdge2, `{"nbthread":4,"cpu_map":{"mode":"auto"}}`)
	a := decodeJSON[writeAnswer](t, w)
	want := []config.PlanItem{{Object: "node/edge-2", Op: config.OpCreate, Apply: config.ApplyRestartLoops}}
	if a.Generation != gen+1 || len(a.Plan.Items) != 1 || a.Plan.Items[0].Object != want[0].Object ||
		a.Plan.Items[0].Op != want[0].Op || a.Plan.Items[0].Apply != want[0].Apply {
		t.Fatalf("answer %s", w.Body.String())
	}
	if string(a.Result) != `{"nbthread":4,"cpu_map":{"mode":"auto"}}` {
		t.Fatalf("result %s", a.Result)
	}
	etag := w.Header().Get("ETag")
	g := f.must(t, http.StatusOK, "GET", settingsEdge2, "")
	if strings.TrimSpace(g.Body.String()) != string(a.Result) || g.Header().Get("ETag") != etag || etag == "" {
		t.Fatalf("GET %s (ETag %q), PUT answered %s (ETag %q)", g.Body.String(), g.Header().Get("ETag"), a.Result, etag)
	}
	doc := decodeJSON[config.Config](t, f.must(t, http.StatusOK, "GET", "/api/v1/config", ""))
	if s := doc.Nodes["edge-2"]; s.Nbthread == nil || *s.Nbthread != 4 || s.CPUMap == nil || s.IRQ != nil {
		t.Fatalf("document nodes %+v", doc.Nodes)
	}

	// If-Match compares with the section.
	f.must(t, http.StatusPreconditionFailed, "PUT", settingsEdge2, `{}`, hdr{"If-Match": `"nope"`})
	w = f.must(t, http.StatusOK, "PUT", settingsEdge2, `{"nbthread":2}`, hdr{"If-Match": etag})
	if a := decodeJSON[writeAnswer](t, w); len(a.Plan.Items) != 1 || strings.Join(a.Plan.Items[0].Fields, ",") != "nbthread,cpu_map" {
		t.Fatalf("update plan %s", w.Body.String())
	}

	// Problems point into the body.
	for _, tc := range []struct {
		path, body string
		status     int
		field      string
	}{
		{settingsEdge2, `{"nbthread":2000}`, http.StatusUnprocessableEntity, "/nbthread"},
		{settingsEdge2, `{"cpu_map":{"mode":"manual"}}`, http.StatusUnprocessableEntity, "/cpu_map/threads"},
		{settingsEdge2, `{"irq":{"nics":["a b"]}}`, http.StatusUnprocessableEntity, "/irq/nics/0"},
		{settingsEdge2, `{"maxconn":1}`, http.StatusBadRequest, "/maxconn"},
		{"/api/v1/cluster/nodes/Edge/settings", `{}`, http.StatusUnprocessableEntity, ""},
	} {
		p := problemOf(t, f.must(t, tc.status, "PUT", tc.path, tc.body))
		if len(p.Errors) == 0 || p.Errors[0].Field != tc.field {
			t.Errorf("PUT %s %s: problems %+v, want field %q", tc.path, tc.body, p.Errors, tc.field)
		}
	}

	revs := f.must(t, http.StatusOK, "GET", "/api/v1/config/revisions", "").Body.String()
	if !strings.Contains(revs, "create node/edge-2") || !strings.Contains(revs, "update node/edge-2") {
		t.Errorf("revisions do not name the section: %s", revs)
	}

	w = f.must(t, http.StatusNoContent, "DELETE", settingsEdge2, "")
	if w.Header().Get("X-Spliced-Generation") == "" {
		t.Error("DELETE without X-Spliced-Generation")
	}
	f.must(t, http.StatusNotFound, "GET", settingsEdge2, "")
	if f.store.Current().Nodes != nil {
		t.Fatalf("nodes after the last DELETE: %+v", f.store.Current().Nodes)
	}
}

// In cluster mode the section goes through the cluster write (commit, Sync,
// Wait) like any other object, and is audited as node/NAME.
func TestNodeSettingsInClusterMode(t *testing.T) {
	f, fc := newClusterFixture(t)
	w := f.must(t, http.StatusOK, "PUT", settingsEdge2, `{"irq":{"pins":[{"irq":30,"cpus":[63]}]}}`)
	if a := decodeJSON[clusterAnswer](t, w); a.Nodes == nil || fc.syncs != 1 {
		t.Fatalf("answer %s, syncs %d", w.Body.String(), fc.syncs)
	}
	entries := decodeJSON[[]AuditEntry](t, f.must(t, http.StatusOK, "GET", "/api/v1/audit", ""))
	found := false
	for _, e := range entries {
		for _, c := range e.Changes {
			found = found || c.Object == "node/edge-2" && strings.Contains(string(c.After), `"cpus":[63]`)
		}
	}
	if !found {
		t.Errorf("no audit change for node/edge-2: %+v", entries)
	}
}

func TestNodeSettingsRoles(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	for _, tc := range []struct {
		method string
		role   tokens.Role
		want   int
	}{
		{"GET", tokens.Viewer, http.StatusNotFound},
		{"PUT", tokens.Operator, http.StatusForbidden},
		{"PUT", tokens.Admin, http.StatusOK},
		{"GET", tokens.Viewer, http.StatusOK},
		{"DELETE", tokens.Operator, http.StatusForbidden},
		{"DELETE", tokens.Admin, http.StatusNoContent},
	} {
		body := ""
		if tc.method == "PUT" {
			body = `{"nbthread":1}`
		}
		if w := f.do(req{method: tc.method, path: settingsEdge2, body: body, token: f.secrets[tc.role]}); w.Code != tc.want {
			t.Fatalf("%s as %s: %d, want %d: %s", tc.method, tc.role, w.Code, tc.want, w.Body.String())
		}
	}
}

// The placement views show what this node runs: its own cpu_map and irq
// when its section has them.
func TestPlacementViewsShowThisNodesSettings(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixtureAs(t, pt, core.NodeIdentity{Name: "edge-1"}, func(c *config.Config) {
		c.IRQ.Pins = []config.IRQPin{{IRQ: 30, CPUs: []int{0}}}
	})
	v := decodeJSON[CPUMapView](t, f.must(t, http.StatusOK, "GET", "/api/v1/cpu-map", ""))
	if v.Mode != config.CPUMapNone || v.Node != "" {
		t.Fatalf("without a section: %+v", v)
	}
	docTag := f.must(t, http.StatusOK, "GET", "/api/v1/cpu-map", "").Header().Get("ETag")

	f.must(t, http.StatusOK, "PUT", "/api/v1/cluster/nodes/edge-1/settings",
		`{"cpu_map":{"mode":"manual","threads":[{"thread":1,"cpus":[1]}]},"irq":{"pins":[{"irq":30,"cpus":[1]}]}}`)
	f.must(t, http.StatusOK, "PUT", "/api/v1/cluster/nodes/edge-2/settings", `{"cpu_map":{"mode":"auto"},"irq":{}}`)
	w := f.must(t, http.StatusOK, "GET", "/api/v1/cpu-map", "")
	v = decodeJSON[CPUMapView](t, w)
	if v.Mode != config.CPUMapManual || v.Node != "edge-1" || len(v.Threads) != 1 || v.Threads[0].Thread != 1 {
		t.Fatalf("with edge-1's section: %+v", v)
	}
	if w.Header().Get("ETag") != docTag {
		t.Error("the ETag is no longer the document's cpu_map's")
	}
	q := decodeJSON[IRQView](t, f.must(t, http.StatusOK, "GET", "/api/v1/irqs/30", ""))
	if len(q.Pinned) != 1 || q.Pinned[0] != 1 {
		t.Fatalf("irq 30 pinned %v, want edge-1's [1]", q.Pinned)
	}
}
