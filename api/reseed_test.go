package api

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// A store that went back (etcd restored from an older snapshot: here a
// Revert the node did not make) refuses every write with 409 store-behind,
// whose detail names the way out; POST /api/v1/cluster/reseed makes this
// node's document the store's again as the next generation (dry run:
// says so, changes nothing), applied and waited for like a write, audited;
// writes then work again. A store that is not behind is 409
// store-not-behind.
func TestReseedAStoreThatWentBack(t *testing.T) {
	f, fc, hs := newHookedClusterFixture(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends", backendWeb)
	f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web", `{"balance":"leastconn"}`, hdr{"Content-Type": "application/merge-patch+json"})
	w := f.must(t, http.StatusConflict, "POST", "/api/v1/cluster/reseed", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-not-behind" || !strings.Contains(p.Detail, "generation 2") {
		t.Fatalf("reseed of a store in sync: %+v", p)
	}
	gen1, err := hs.Revision(context.Background(), 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := hs.Revert(context.Background(), gen1, 2); err != nil {
		t.Fatal(err)
	}
	w = f.must(t, http.StatusConflict, "PATCH", "/api/v1/backends/web", `{"balance":"roundrobin"}`, hdr{"Content-Type": "application/merge-patch+json"})
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-behind" || !strings.Contains(p.Detail, "POST /api/v1/cluster/reseed") {
		t.Fatalf("write on a store that went back: %+v", p)
	}
	syncs := fc.syncs
	w = f.must(t, http.StatusOK, "POST", "/api/v1/cluster/reseed?dry_run=true", "")
	dry := decodeJSON[ReseedAnswer](t, w)
	if !dry.DryRun || dry.Generation != 3 || dry.StoreGeneration != 1 || dry.NodeGeneration != 2 || dry.Nodes != nil || fc.syncs != syncs {
		t.Fatalf("dry run: %s", w.Body.String())
	}
	if c, _, _ := hs.Load(context.Background()); c.Generation != 1 {
		t.Fatalf("a dry run wrote generation %d", c.Generation)
	}
	w = f.must(t, http.StatusOK, "POST", "/api/v1/cluster/reseed?wait_ms=100", "")
	a := decodeJSON[ReseedAnswer](t, w)
	const summary = "reseeded by node edge-1 from its generation 2 (the store held generation 1)"
	if a.DryRun || a.Generation != 3 || a.Summary != summary || a.Nodes == nil || w.Header().Get("X-Spliced-Generation") != "3" ||
		w.Header().Get(hdrNodesApplied) != "edge-1" {
		t.Fatalf("reseed: %s %v", w.Body.String(), w.Header())
	}
	if fc.syncs != syncs+1 || f.core.Runtime().Generation != 3 {
		t.Fatalf("after the reseed: %d syncs, the core runs generation %d", fc.syncs-syncs, f.core.Runtime().Generation)
	}
	c, info, err := hs.Load(context.Background())
	if err != nil || c.Generation != 3 || info.Summary != summary || c.Backends[0].Balance != "leastconn" {
		t.Fatalf("the store after the reseed: %+v %+v %v", c, info, err)
	}
	f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web", `{"balance":"roundrobin"}`, hdr{"Content-Type": "application/merge-patch+json"})
	if g := f.store.Current().Generation; g != 4 {
		t.Fatalf("a write after the reseed made generation %d, want 4", g)
	}
	// The store unreachable (Load then answers the node's copy): 503.
	hs.set(nil, func() error { return fmt.Errorf("etcd: %w", config.ErrUnavailable) })
	w = f.must(t, http.StatusServiceUnavailable, "POST", "/api/v1/cluster/reseed?dry_run=true", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-unavailable" {
		t.Fatalf("reseed with the store unreachable: %+v", p)
	}
	hs.set(nil, nil)
	entries, _ := f.audit(t, "")
	found := false
	for _, e := range entries {
		if strings.HasPrefix(e.Path, "/api/v1/cluster/reseed?wait") && e.Status == http.StatusOK && !e.DryRun && e.Generation == 3 {
			found = true
		}
	}
	if !found {
		t.Fatalf("no audit entry of the reseed among %d", len(entries))
	}
}
