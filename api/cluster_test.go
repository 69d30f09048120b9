package api

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
)

// fakeCluster is a core.Cluster for the API's tests: Sync applies the
// store's current config to the core, Wait answers what wait returns.
type fakeCluster struct {
	self  core.NodeIdentity
	store *config.Store
	core  *coretest.Nop

	mu        sync.Mutex
	state     core.StoreState
	nodes     []core.NodeStatus
	nodesErr  error
	syncs     int
	waits     []fakeWait
	wait      func(gen int64) core.WaitResult
	syncedGen int64
}

type fakeWait struct {
	gen int64
	d   time.Duration
}

func (c *fakeCluster) Self() core.NodeIdentity { return c.self }

func (c *fakeCluster) Sync(ctx context.Context) core.NodeStatus {
	cur := c.store.Current()
	err := c.core.Apply(ctx, cur)
	c.mu.Lock()
	defer c.mu.Unlock()
	c.syncs++
	c.syncedGen = cur.Generation
	st := core.NodeStatus{NodeIdentity: c.self, RunningGeneration: c.core.Runtime().Generation, State: core.NodeInSync}
	if err != nil {
		st.State, st.Error = core.NodeRefused, err.Error()
	}
	return st
}

func (c *fakeCluster) Wait(ctx context.Context, gen int64, d time.Duration) core.WaitResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.waits = append(c.waits, fakeWait{gen, d})
	if c.wait != nil {
		return c.wait(gen)
	}
	return core.WaitResult{Generation: gen, Applied: []string{c.self.Name}}
}

func (c *fakeCluster) Nodes(ctx context.Context) ([]core.NodeStatus, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.nodes, c.nodesErr
}

func (c *fakeCluster) StoreState() core.StoreState {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.state
}

func (c *fakeCluster) setConnected(ok bool) {
	c.mu.Lock()
	c.state.Connected = ok
	c.mu.Unlock()
}

// hookStorage is a Storage whose Commit and Health the test may replace.
type hookStorage struct {
	config.Storage
	mu     sync.Mutex
	commit func(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error
	health func() error
}

func (h *hookStorage) Commit(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error {
	h.mu.Lock()
	fn := h.commit
	h.mu.Unlock()
	if fn != nil {
		return fn(ctx, prev, info, doc, certs)
	}
	return h.Storage.Commit(ctx, prev, info, doc, certs)
}

func (h *hookStorage) Health() error {
	h.mu.Lock()
	fn := h.health
	h.mu.Unlock()
	if fn != nil {
		return fn()
	}
	return h.Storage.Health()
}

func (h *hookStorage) set(commit func(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error, health func() error) {
	h.mu.Lock()
	h.commit, h.health = commit, health
	h.mu.Unlock()
}

// newClusterFixture is newFixture with a fake cluster of three nodes, over
// a state directory whose Commit and Health the test may replace.
func newClusterFixture(t testing.TB) (*fixture, *fakeCluster) {
	f, fc, _ := newHookedClusterFixture(t)
	return f, fc
}

func newHookedClusterFixture(t testing.TB) (*fixture, *fakeCluster, *hookStorage) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	dir := t.TempDir()
	ds, err := config.NewDirStorage(dir, log)
	if err != nil {
		t.Fatal(err)
	}
	hs := &hookStorage{Storage: ds}
	st, err := config.OpenStore(hs, "", log, config.StoreOptions{})
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	nop := &coretest.Nop{}
	if err := nop.Apply(t.Context(), st.Current()); err != nil {
		t.Fatal(err)
	}
	fc := &fakeCluster{self: core.NodeIdentity{Name: "edge-1", Address: "192.0.2.1"}, store: st, core: nop,
		state: core.StoreState{Kind: "etcd", Endpoints: []string{"127.0.0.1:2379"}, Prefix: "/spliced", Connected: true}}
	for i, n := range []string{"edge-1", "edge-2", "edge-3"} {
		fc.nodes = append(fc.nodes, core.NodeStatus{NodeIdentity: core.NodeIdentity{Name: n, Address: fmt.Sprintf("192.0.2.%d", i+1)},
			State: core.NodeInSync})
	}
	h := New(Options{Store: st, Core: nop, Version: "test", StateDir: dir, AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}, Cluster: fc, Node: core.NodeIdentity{Name: "ignored"}})
	return &fixture{h: h, store: st, core: nop}, fc, hs
}

// clusterAnswer is a write's answer with its nodes member.
type clusterAnswer struct {
	Generation int64            `json:"generation"`
	Nodes      *core.WaitResult `json:"nodes"`
}

func TestClusterWriteCommitsThenSyncsAndWaits(t *testing.T) {
	f, fc := newClusterFixture(t)
	var applies []int64
	f.core.Fail = func(c *config.Config) error { applies = append(applies, c.Generation); return nil }
	fc.wait = func(gen int64) core.WaitResult {
		return core.WaitResult{Generation: gen, WaitedMs: 3, Applied: []string{"edge-1", "edge-2"},
			Refused: []core.NodeStatus{{NodeIdentity: core.NodeIdentity{Name: "edge-3"}, State: core.NodeRefused,
				RefusedGeneration: gen, Error: "listen 127.0.0.1:8080: address already in use"}}}
	}
	w := f.must(t, http.StatusCreated, "POST", "/api/v1/backends?wait_ms=500", backendWeb)
	a := decodeJSON[clusterAnswer](t, w)
	if a.Nodes == nil || a.Nodes.Generation != a.Generation || len(a.Nodes.Refused) != 1 ||
		a.Nodes.Refused[0].Error == "" || a.Nodes.Pending == nil {
		t.Fatalf("answer %s", w.Body.String())
	}
	for k, want := range map[string]string{hdrNodesApplied: "edge-1,edge-2", hdrNodesRefused: "edge-3", hdrNodesPending: ""} {
		if got, ok := w.Header()[k]; !ok || got[0] != want {
			t.Fatalf("%s = %q, want %q", k, got, want)
		}
	}
	// The store committed without applying: the core ran the generation
	// once, through Sync, after the commit.
	if len(applies) != 1 || applies[0] != a.Generation || fc.syncs != 1 {
		t.Fatalf("applies %v, syncs %d (generation %d)", applies, fc.syncs, a.Generation)
	}
	if len(fc.waits) != 1 || fc.waits[0] != (fakeWait{a.Generation, 500 * time.Millisecond}) {
		t.Fatalf("waits %+v", fc.waits)
	}

	// A node refusing does not fail the write, even the receiving one: it
	// is committed (and not reverted).
	f.core.Fail = func(*config.Config) error { return errors.New("port in use here") }
	w = f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web", `{"balance":"leastconn"}`,
		hdr{"Content-Type": "application/merge-patch+json"})
	if got := decodeJSON[clusterAnswer](t, w).Generation; got != f.store.Current().Generation || got != a.Generation+1 {
		t.Fatalf("generation %d, store at %d", got, f.store.Current().Generation)
	}
	// DELETE answers 204: the headers alone; the default wait is 2 s.
	f.core.Fail = nil
	w = f.must(t, http.StatusNoContent, "DELETE", "/api/v1/backends/web", "")
	if w.Header().Get(hdrNodesApplied) != "edge-1,edge-2" || w.Body.Len() != 0 {
		t.Fatalf("DELETE: headers %v body %q", w.Header(), w.Body.String())
	}
	if last := fc.waits[len(fc.waits)-1]; last.d != 2*time.Second {
		t.Fatalf("default wait %v", last.d)
	}
	// A dry run commits nothing: no sync, no wait, no nodes.
	n := len(fc.waits)
	w = f.must(t, http.StatusOK, "POST", "/api/v1/backends?dry_run=true", backendWeb)
	if len(fc.waits) != n || w.Header().Get(hdrNodesApplied) != "" || strings.Contains(w.Body.String(), `"nodes"`) {
		t.Fatalf("dry run waited: %d waits, %s", len(fc.waits)-n, w.Body.String())
	}
}

func TestWaitMsBounds(t *testing.T) {
	f, fc := newClusterFixture(t)
	for _, v := range []string{"-1", "30001", "x", "1.5"} {
		w := f.must(t, http.StatusBadRequest, "POST", "/api/v1/backends?wait_ms="+v, backendWeb)
		if p := problemOf(t, w); p.Type != "urn:spliced:problem:bad-query" || !strings.Contains(p.Detail, "wait_ms") {
			t.Fatalf("wait_ms=%s: %+v", v, p)
		}
	}
	if len(fc.waits) != 0 || f.store.Current().Generation != 0 {
		t.Fatalf("a refused wait_ms reached the store: %+v, generation %d", fc.waits, f.store.Current().Generation)
	}
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends?wait_ms=0", backendWeb)
	f.must(t, http.StatusNoContent, "DELETE", "/api/v1/backends/web?wait_ms=30000", "")
	if len(fc.waits) != 2 || fc.waits[0].d != 0 || fc.waits[1].d != 30*time.Second {
		t.Fatalf("waits %+v", fc.waits)
	}
	// On a single node wait_ms is checked the same way (and has no effect).
	s := newFixture(t)
	s.must(t, http.StatusBadRequest, "POST", "/api/v1/backends?wait_ms=30001", backendWeb)
	w := s.must(t, http.StatusCreated, "POST", "/api/v1/backends?wait_ms=10", backendWeb)
	if _, ok := w.Header()[hdrNodesApplied]; ok || strings.Contains(w.Body.String(), `"nodes"`) {
		t.Fatalf("single node answered nodes: %v %s", w.Header(), w.Body.String())
	}
}

func TestStoreErrorsBecomeProblems(t *testing.T) {
	for _, c := range []struct {
		err    error
		status int
		typ    string
	}{
		{fmt.Errorf("commit: %w", config.ErrUnavailable), http.StatusServiceUnavailable, "store-unavailable"},
		{fmt.Errorf("5 attempts: %w", config.ErrRace), http.StatusConflict, "write-race"},
		{&inObject{prefix: "/backends/0", err: fmt.Errorf("x: %w", config.ErrUnavailable)}, http.StatusServiceUnavailable, "store-unavailable"},
	} {
		p := problemFor(c.err)
		if p.Status != c.status || p.Type != "urn:spliced:problem:"+c.typ || !strings.Contains(p.Detail, c.err.Error()) {
			t.Fatalf("%v: %+v", c.err, p)
		}
	}
}

func TestStaleHeaderOnReadsWhileTheStoreIsUnreachable(t *testing.T) {
	f, fc := newClusterFixture(t)
	f.seed(t)
	paths := []string{"/api/v1/config", "/api/v1/backends", "/api/v1/info", "/api/v1/cluster"}
	for _, p := range paths {
		if w := f.must(t, 200, "GET", p, ""); w.Header().Get(hdrStale) != "" {
			t.Fatalf("%s stale while connected", p)
		}
	}
	fc.setConnected(false)
	for _, p := range paths {
		if w := f.must(t, 200, "GET", p, ""); w.Header().Get(hdrStale) != "true" {
			t.Fatalf("%s: %s = %q while the store is unreachable", p, hdrStale, w.Header().Get(hdrStale))
		}
	}
	if w := f.must(t, 200, "HEAD", "/api/v1/backends", ""); w.Header().Get(hdrStale) != "true" {
		t.Fatal("HEAD not marked stale")
	}
	for _, p := range []string{"/healthz", "/readyz"} {
		if w := f.must(t, 200, "GET", p, ""); w.Header().Get(hdrStale) != "" {
			t.Fatalf("%s marked stale", p)
		}
	}
	fc.setConnected(true)
	if w := f.must(t, 200, "GET", "/api/v1/backends", ""); w.Header().Get(hdrStale) != "" {
		t.Fatal("still stale after the store came back")
	}
}

func TestClusterResourceSingleNode(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	w := f.must(t, 200, "GET", "/api/v1/cluster", "")
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(w.Body.Bytes(), &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"store", "self", "generation", "nodes"} {
		if _, ok := raw[k]; !ok {
			t.Fatalf("no %q in %s", k, w.Body.String())
		}
	}
	ci := decodeJSON[ClusterInfo](t, w)
	gen := f.store.Current().Generation
	if ci.Store.Kind != "dir" || !ci.Store.Connected || ci.Store.Generation != gen || ci.Generation != gen ||
		len(ci.Nodes) != 1 || ci.Nodes[0].RunningGeneration != gen || ci.Nodes[0].State != core.NodeInSync ||
		ci.Nodes[0].AdminAddress != "127.0.0.1:0" || ci.Nodes[0].Version != "test" {
		t.Fatalf("cluster %s", w.Body.String())
	}
	// The data plane behind the store (the stored config failed to apply
	// at start): the node says it refused the current generation.
	stale := f.store.Current().Clone()
	stale.Generation--
	if err := f.core.Apply(t.Context(), stale); err != nil {
		t.Fatal(err)
	}
	ci = decodeJSON[ClusterInfo](t, f.must(t, 200, "GET", "/api/v1/cluster", ""))
	if n := ci.Nodes[0]; n.State != core.NodeRefused || n.RefusedGeneration != gen || n.RunningGeneration != gen-1 {
		t.Fatalf("node %+v", n)
	}
}

func TestClusterResourceListsTheNodes(t *testing.T) {
	f, fc := newClusterFixture(t)
	ci := decodeJSON[ClusterInfo](t, f.must(t, 200, "GET", "/api/v1/cluster", ""))
	if ci.Store.Kind != "etcd" || ci.Self != fc.self || len(ci.Nodes) != 3 || ci.Nodes[2].Name != "edge-3" {
		t.Fatalf("cluster %+v", ci)
	}
	info := decodeJSON[Info](t, f.must(t, 200, "GET", "/api/v1/info", ""))
	if info.Node != fc.self || info.Store.Kind != "etcd" || info.Store.Prefix != "/spliced" {
		t.Fatalf("info node %+v store %+v", info.Node, info.Store)
	}
	// Unreachable store: the last list seen, if any; else a 503.
	fc.mu.Lock()
	fc.nodesErr = fmt.Errorf("list: %w", config.ErrUnavailable)
	fc.mu.Unlock()
	if ci := decodeJSON[ClusterInfo](t, f.must(t, 200, "GET", "/api/v1/cluster", "")); len(ci.Nodes) != 3 {
		t.Fatalf("nodes %+v", ci.Nodes)
	}
	fc.mu.Lock()
	fc.nodes = nil
	fc.mu.Unlock()
	w := f.must(t, 503, "GET", "/api/v1/cluster", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-unavailable" {
		t.Fatalf("problem %+v", p)
	}
}

func TestInfoNamesTheNodeAndTheStore(t *testing.T) {
	f := newFixture(t)
	info := decodeJSON[Info](t, f.must(t, 200, "GET", "/api/v1/info", ""))
	if info.Store.Kind != "dir" || !info.Store.Connected || info.Store.Generation != f.store.Current().Generation {
		t.Fatalf("store %+v", info.Store)
	}
}

func TestClusterMetrics(t *testing.T) {
	f, fc := newClusterFixture(t)
	fc.mu.Lock()
	fc.nodes[1].RunningGeneration = 7
	fc.state.Adoptions = &core.Adoptions{Deltas: 41, Documents: 2, RefusedDeltas: 1}
	fc.mu.Unlock()
	fams := scrape(t, f.h)
	ad := map[string]float64{}
	for _, m := range fams["spliced_cluster_adoptions_total"].GetMetric() {
		ad[m.GetLabel()[0].GetValue()] = m.GetCounter().GetValue()
	}
	if want := map[string]float64{"delta": 41, "document": 2, "delta_refused": 1}; !maps.Equal(ad, want) {
		t.Fatalf("adoptions %v, want %v", ad, want)
	}
	if v := fams["spliced_store_connected"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Fatalf("store_connected %v", v)
	}
	if v := fams["spliced_cluster_nodes"].GetMetric()[0].GetGauge().GetValue(); v != 3 {
		t.Fatalf("cluster_nodes %v", v)
	}
	rg := fams["spliced_cluster_node_running_generation"].GetMetric()
	if len(rg) != 3 || rg[1].GetLabel()[0].GetValue() != "edge-2" || rg[1].GetGauge().GetValue() != 7 {
		t.Fatalf("running generation %v", rg)
	}
	// A single node: connected, one node, itself.
	s := newFixture(t)
	fams = scrape(t, s.h)
	if v := fams["spliced_cluster_nodes"].GetMetric()[0].GetGauge().GetValue(); v != 1 {
		t.Fatalf("single node: cluster_nodes %v", v)
	}
	if v := fams["spliced_cluster_node_running_generation"].GetMetric()[0].GetGauge().GetValue(); v != float64(s.store.Current().Generation) {
		t.Fatalf("single node: running generation %v", v)
	}
	if _, ok := fams["spliced_cluster_adoptions_total"]; ok {
		t.Fatal("single node: adoptions counted")
	}
}

// A write whose mutate runs twice (the store retried after a lost race)
// leaves one entry in audit.log and no pending record.
func TestAuditBeginIsRepeatableForOneRequest(t *testing.T) {
	for _, crash := range []bool{false, true} {
		dir := t.TempDir()
		l := newAuditLog(dir, slog.New(slog.DiscardHandler))
		l.node = "edge-2"
		rec := &auditRec{actor: "ops"}
		r := httptest.NewRequest("POST", "/api/v1/backends", nil)
		r = r.WithContext(context.WithValue(r.Context(), auditCtxKey{}, rec))
		// The first run aimed at generation 2 and lost the race; the store
		// refreshed to 2 (another node's) and ran mutate again, for 3.
		if err := l.begin(r, 2); err != nil {
			t.Fatal(err)
		}
		if err := l.begin(r, 3); err != nil {
			t.Fatal(err)
		}
		if crash {
			// Killed before the answer: one write, one recovered entry.
			st, err := config.Open(t.TempDir(), "", slog.New(slog.DiscardHandler))
			if err != nil {
				t.Fatal(err)
			}
			if err := l.recoverPending(st); err != nil {
				t.Fatal(err)
			}
		} else {
			l.append(r, rec, http.StatusCreated)
		}
		es := readAuditLog(t, dir)
		if len(es) != 1 || es[0].Node != "edge-2" || es[0].Actor != "ops" {
			t.Fatalf("crash %v: entries %+v", crash, es)
		}
		if b, err := os.ReadFile(filepath.Join(dir, pendingFile)); err != nil || len(b) != 0 {
			t.Fatalf("crash %v: audit.pending %q (%v)", crash, b, err)
		}
	}
}

func readAuditLog(t *testing.T, dir string) []AuditEntry {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, auditFile))
	if err != nil {
		t.Fatal(err)
	}
	var out []AuditEntry
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e AuditEntry
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatalf("audit line %q: %v", line, err)
		}
		out = append(out, e)
	}
	return out
}

// newNodeFixture is newFixture for a single node named node.
func newNodeFixture(t testing.TB, node core.NodeIdentity) *fixture {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := config.Open(t.TempDir(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	nop := &coretest.Nop{}
	if err := nop.Apply(t.Context(), st.Current()); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Core: nop, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}, Node: node, Env: config.Env{NodeName: node.Name, NodeAddress: node.Address}})
	return &fixture{h: h, store: st, core: nop}
}

func TestSingleNodeAppliesItsEffectiveConfig(t *testing.T) {
	fe := `{"name":"public","mode":"tcp","default_backend":"web","binds":[{"name":"b1","address":"${NODE_ADDRESS}","port":8080}]}`
	be := `{"name":"web","mode":"tcp","servers":[{"name":"s1","address":"127.0.0.1","port":8081}]}`
	f := newNodeFixture(t, core.NodeIdentity{Name: "edge-1", Address: "127.0.0.2"})
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends", be)
	f.must(t, http.StatusCreated, "POST", "/api/v1/frontends", fe)
	if got := f.store.Current().Frontends[0].Binds[0].Address; got != config.NodeAddress {
		t.Fatalf("stored address %q", got)
	}
	if got := f.core.Last().Frontends[0].Binds[0].Address; got != "127.0.0.2" {
		t.Fatalf("applied address %q", got)
	}
	if ci := decodeJSON[ClusterInfo](t, f.must(t, 200, "GET", "/api/v1/cluster", "")); ci.Self.Name != "edge-1" || ci.Nodes[0].Address != "127.0.0.2" {
		t.Fatalf("cluster %+v", ci)
	}
	// A node without --node-address cannot run the placeholder: refused,
	// nothing changed.
	g := newNodeFixture(t, core.NodeIdentity{Name: "edge-2"})
	g.must(t, http.StatusCreated, "POST", "/api/v1/backends", be)
	gen := g.store.Current().Generation
	w := g.must(t, http.StatusUnprocessableEntity, "POST", "/api/v1/frontends", fe)
	if p := problemOf(t, w); len(p.Errors) == 0 || g.store.Current().Generation != gen {
		t.Fatalf("problem %+v, generation %d → %d", p, gen, g.store.Current().Generation)
	}
}

// A write that lost the race to another node is built again on the newer
// generation by the store: one answer, one audit entry (for the
// generation it made), no pending record left, the node named.
func TestClusterWriteThatLostARaceIsAuditedOnce(t *testing.T) {
	f, _, hs := newHookedClusterFixture(t)
	f.seed(t)
	raced := false
	hs.set(func(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error {
		if raced {
			return hs.Storage.Commit(ctx, prev, info, doc, certs)
		}
		raced = true
		// Another node commits prev+1 first (a backend of its own).
		c, _, err := hs.Storage.Load(ctx)
		if err != nil {
			return err
		}
		other := c.Clone()
		other.Backends = append(other.Backends, config.Backend{Name: "other", Mode: "tcp"})
		other.Normalize()
		other.Generation = prev + 1
		b, err := json.Marshal(other)
		if err != nil {
			return err
		}
		if err := hs.Storage.Commit(ctx, prev, config.RevisionInfo{Generation: prev + 1, Time: time.Now(), Node: "edge-2"}, b, nil); err != nil {
			return err
		}
		return fmt.Errorf("commit: %w", config.ErrRace)
	}, nil)
	before := f.store.Current().Generation
	w := f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web", `{"balance":"leastconn"}`,
		hdr{"Content-Type": "application/merge-patch+json"})
	gen := decodeJSON[clusterAnswer](t, w).Generation
	if !raced || gen != before+2 || f.store.Current().Backends[0].Balance != "leastconn" || len(f.store.Current().Backends) != 2 {
		t.Fatalf("generation %d (from %d), backends %+v", gen, before, f.store.Current().Backends)
	}
	var patches []AuditEntry
	for _, e := range readAuditLog(t, hs.Storage.(*config.DirStorage).Dir()) {
		if e.Method == "PATCH" {
			patches = append(patches, e)
		}
	}
	if len(patches) != 1 || patches[0].Generation != gen || patches[0].Node != "edge-1" || patches[0].Status != 200 {
		t.Fatalf("audit entries of the PATCH: %+v", patches)
	}
	if b, err := os.ReadFile(filepath.Join(hs.Storage.(*config.DirStorage).Dir(), pendingFile)); err != nil || len(b) != 0 {
		t.Fatalf("audit.pending %q (%v)", b, err)
	}
	revs, err := f.store.Revisions()
	if err != nil || revs[0].Generation != gen || revs[0].Node != "edge-1" || revs[1].Node != "edge-2" {
		t.Fatalf("revisions %+v (%v)", revs, err)
	}

	// Always losing: 409 write-race, nothing of this write committed.
	hs.set(func(context.Context, int64, config.RevisionInfo, []byte, map[string][]byte) error {
		return fmt.Errorf("commit: %w", config.ErrRace)
	}, nil)
	w = f.must(t, http.StatusConflict, "DELETE", "/api/v1/frontends/public", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:write-race" {
		t.Fatalf("problem %+v", p)
	}
}

// etcd unreachable: a write answers 503 store-unavailable within the
// store's bound, even when the storage hangs; /readyz stays ready.
func TestClusterWriteWhileTheStoreIsUnreachable(t *testing.T) {
	f, fc, hs := newHookedClusterFixture(t)
	f.seed(t)
	defer func(d time.Duration) { storeTimeout = d }(storeTimeout)
	storeTimeout = 300 * time.Millisecond
	unreachable := func() error { return fmt.Errorf("etcd: %w", config.ErrUnavailable) }
	hs.set(func(ctx context.Context, _ int64, _ config.RevisionInfo, _ []byte, _ map[string][]byte) error {
		<-ctx.Done() // a client that keeps retrying until the deadline
		return ctx.Err()
	}, unreachable)
	fc.setConnected(false)
	gen, syncs := f.store.Current().Generation, fc.syncs
	start := time.Now()
	w := f.must(t, http.StatusServiceUnavailable, "DELETE", "/api/v1/frontends/public", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-unavailable" || time.Since(start) > 5*time.Second {
		t.Fatalf("problem %+v after %v", p, time.Since(start))
	}
	if f.store.Current().Generation != gen || fc.syncs != syncs {
		t.Fatalf("generation %d → %d, syncs %d → %d", gen, f.store.Current().Generation, syncs, fc.syncs)
	}
	hs.set(func(context.Context, int64, config.RevisionInfo, []byte, map[string][]byte) error {
		return unreachable()
	}, unreachable)
	w = f.must(t, http.StatusServiceUnavailable, "DELETE", "/api/v1/frontends/public", "")
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:store-unavailable" {
		t.Fatalf("problem %+v", p)
	}
	// Reads: served, marked stale; /readyz: ready, with a warning.
	if w := f.must(t, 200, "GET", "/api/v1/frontends/public", ""); w.Header().Get(hdrStale) != "true" {
		t.Fatal("read not marked stale")
	}
	h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", ""))
	if len(h.Warnings) == 0 || !strings.Contains(h.Warnings[0], "store cannot be reached") {
		t.Fatalf("readyz %+v", h)
	}
	// The state directory's own refusal stays a 503, as on a single node.
	hs.set(nil, func() error { return &config.StorageError{Err: syscall.EROFS} })
	f.must(t, 503, "GET", "/readyz", "")
	// So does a node behind the store (it refused the newer generation).
	hs.set(nil, nil)
	f.must(t, 200, "GET", "/readyz", "")
	f.core.Fail = func(*config.Config) error { return errors.New("port in use here") }
	f.must(t, http.StatusNoContent, "DELETE", "/api/v1/frontends/public", "")
	if w := f.must(t, 503, "GET", "/readyz", ""); !strings.Contains(problemOf(t, w).Detail, "generation") {
		t.Fatalf("readyz %s", w.Body.String())
	}
}

// The node's probe finds etcd gone before the storage's own health does
// (its next call or probe): /readyz warns already, as /api/v1/info says
// connected false and reads are marked stale.
func TestClusterReadyzWarnsAsSoonAsTheNodeSeesTheStoreGone(t *testing.T) {
	f, fc, hs := newHookedClusterFixture(t)
	f.seed(t)
	if h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", "")); len(h.Warnings) != 0 {
		t.Fatalf("readyz with the store reachable: %+v", h)
	}
	fc.setConnected(false)
	if w := f.must(t, 200, "GET", "/api/v1/frontends/public", ""); w.Header().Get(hdrStale) != "true" {
		t.Fatal("read not marked stale")
	}
	h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", ""))
	if len(h.Warnings) == 0 || !strings.Contains(h.Warnings[0], "store cannot be reached") {
		t.Fatalf("readyz with the store unreachable: %+v", h)
	}
	// Back: the node's probe found it, the storage still has the fault
	// of its last call (its own probe starts with this request).
	hs.set(nil, func() error { return fmt.Errorf("etcd: %w", config.ErrUnavailable) })
	fc.setConnected(true)
	if h := decodeJSON[Health](t, f.must(t, 200, "GET", "/readyz", "")); len(h.Warnings) != 0 {
		t.Fatalf("readyz with the store back: %+v", h)
	}
}

// A node killed during a write whose generation another node committed
// meanwhile: the recovered entry says not-applied.
func TestAuditRecoveryTellsAnotherNodesGeneration(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	ds, err := config.NewDirStorage(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	st, err := config.OpenStore(ds, "", log, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	gen := st.Current().Generation + 1
	if _, err := st.Update(t.Context(), func(c *config.Config) error {
		c.Backends = append(c.Backends, config.Backend{Name: "other", Mode: "tcp"})
		return nil
	}, config.UpdateOptions{Node: "edge-2"}); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	l := newAuditLog(dir, log)
	l.node = "edge-1"
	rec := &auditRec{actor: "ops"}
	r := httptest.NewRequest("POST", "/api/v1/backends", nil)
	r = r.WithContext(context.WithValue(r.Context(), auditCtxKey{}, rec))
	if err := l.begin(r, gen); err != nil {
		t.Fatal(err)
	}
	if err := l.recoverPending(st); err != nil {
		t.Fatal(err)
	}
	if es := readAuditLog(t, dir); len(es) != 1 || es[0].Recovered != "not-applied" || es[0].Node != "edge-1" {
		t.Fatalf("entries %+v", es)
	}
}

// A generation another node's write created reaches this node's event
// streams as a config event once the node adopts it (its own writes keep
// their actor and node).
func TestAdoptedGenerationIsAConfigEvent(t *testing.T) {
	t.Parallel()
	f, _, hs := newHookedClusterFixture(t)
	f.seed(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	req.Host = "example.com"
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 {
		t.Fatalf("events: %d", resp.StatusCode)
	}
	events := make(chan ConfigEvent, 8)
	go func() {
		sc := bufio.NewScanner(resp.Body)
		sc.Buffer(make([]byte, 1<<16), 1<<20)
		config := false
		for sc.Scan() {
			line := sc.Text()
			if line == "event: config" {
				config = true
			} else if d, ok := strings.CutPrefix(line, "data: "); ok && config {
				var ev ConfigEvent
				if json.Unmarshal([]byte(d), &ev) == nil {
					events <- ev
				}
				config = false
			}
		}
	}()
	// Another node commits a generation; this node adopts it (the
	// node's watch calls Refresh).
	c, _, err := hs.Storage.Load(ctx)
	if err != nil {
		t.Fatal(err)
	}
	other := c.Clone()
	other.Backends = append(other.Backends, config.Backend{Name: "other", Mode: "tcp"})
	other.Normalize()
	other.Generation = c.Generation + 1
	b, _ := json.Marshal(other)
	if err := hs.Storage.Commit(ctx, c.Generation, config.RevisionInfo{Generation: other.Generation, Time: time.Now(), Node: "edge-2"}, b, nil); err != nil {
		t.Fatal(err)
	}
	if ok, err := f.store.Refresh(ctx); !ok || err != nil {
		t.Fatalf("refresh %v %v", ok, err)
	}
	select {
	case ev := <-events:
		if ev.Generation != other.Generation || ev.Actor != "" || len(ev.Plan.Items) != 1 || ev.Plan.Items[0].Object != "backend/other" {
			t.Fatalf("event %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("no config event for the adopted generation")
	}
	// This node's own write: one event, with its node, not repeated.
	f.must(t, http.StatusNoContent, "DELETE", "/api/v1/backends/other", "")
	select {
	case ev := <-events:
		if ev.Generation != other.Generation+1 || ev.Node != "edge-1" || ev.Actor != "local" {
			t.Fatalf("event %+v", ev)
		}
	case <-ctx.Done():
		t.Fatal("no config event for the write")
	}
	select {
	case ev := <-events:
		t.Fatalf("a second event %+v", ev)
	case <-time.After(1500 * time.Millisecond): // more than a stats tick
	}
}
