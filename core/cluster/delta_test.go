package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// setWeight is a write through n's Store (cluster mode: no Apply) that sets
// server i of backend "big" to weight w; it returns the new generation.
func setWeight(t *testing.T, n *storeNode, i, w int) int64 {
	t.Helper()
	res, err := n.store.Update(context.Background(), func(c *config.Config) error {
		c.Backends[c.FindBackend("big")].Servers[i].Weight = &w
		return nil
	}, config.UpdateOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if st := n.Sync(context.Background()); st.RunningGeneration != res.Generation {
		t.Fatalf("the writer after Sync: %+v", st)
	}
	return res.Generation
}

// docOf is the JSON of c, to compare documents.
func docOf(t *testing.T, c *config.Config) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// waitRunning waits until every node's data plane runs gen, and checks
// that each Store holds, byte for byte, the document the storage holds.
func waitIdentical(t *testing.T, es *EtcdStorage, gen int64, nodes ...*storeNode) {
	t.Helper()
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool { return n.plane.running.Load() >= gen },
			"node "+n.Self().Name+" runs generation "+strconv.FormatInt(gen, 10))
	}
	want, _, err := es.Load(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if want.Generation != gen {
		t.Fatalf("the store holds generation %d, want %d", want.Generation, gen)
	}
	w := docOf(t, want)
	for _, n := range nodes {
		if got := docOf(t, n.store.Current()); !bytes.Equal(got, w) {
			t.Fatalf("node %s holds another document than the store's generation %d:\n got %.300s\nwant %.300s", n.Self().Name, gen, got, w)
		}
		if got := docOf(t, n.plane.last.Load()); !bytes.Equal(got, w) {
			t.Fatalf("node %s applied another document than the store's generation %d", n.Self().Name, gen)
		}
	}
}

func adoptions(n *storeNode) core.Adoptions { return *n.StoreState().Adoptions }

// startBig starts nodes a, b, c on one prefix, with a backend "big" of
// servers servers written through a.
func startBig(t *testing.T, etcd *etcdtest.Cluster, servers int) (string, []*storeNode) {
	t.Helper()
	prefix := "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	nodes := []*storeNode{
		startStoreNode(t, etcd, prefix, "a"),
		startStoreNode(t, etcd, prefix, "b"),
		startStoreNode(t, etcd, prefix, "c"),
	}
	res, err := nodes[0].store.Update(context.Background(), func(c *config.Config) error {
		c.Backends = append(c.Backends, testConfig(t, 0, servers, "big").Backends...)
		return nil
	}, config.UpdateOptions{Actor: "test"})
	if err != nil {
		t.Fatal(err)
	}
	nodes[0].Sync(context.Background())
	waitIdentical(t, nodes[0].es, res.Generation, nodes...)
	return prefix, nodes
}

// A node that holds the document a write was made on adopts the write
// from the change carried in P/current, not by loading the document, and
// ends with the same document, byte for byte; the writer counts neither.
func TestNodeInSyncAppliesTheChange(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	_, nodes := startBig(t, etcd, 300)
	a, b, c := nodes[0], nodes[1], nodes[2]
	before := map[string]core.Adoptions{}
	for _, n := range nodes {
		before[n.Self().Name] = adoptions(n)
	}
	const writes = 5
	var gen int64
	for i := range writes {
		gen = setWeight(t, nodes[i%2], i, 10+i) // a and b write in turn
		waitIdentical(t, a.es, gen, a, b, c)
	}
	got := func(n *storeNode) core.Adoptions {
		x, y := adoptions(n), before[n.Self().Name]
		return core.Adoptions{Deltas: x.Deltas - y.Deltas, Documents: x.Documents - y.Documents, RefusedDeltas: x.RefusedDeltas - y.RefusedDeltas}
	}
	// c adopted every write, a and b the other's.
	for _, w := range []struct {
		n    *storeNode
		want core.Adoptions
	}{{a, core.Adoptions{Deltas: 2}}, {b, core.Adoptions{Deltas: 3}}, {c, core.Adoptions{Deltas: writes}}} {
		if g := got(w.n); g != w.want {
			t.Errorf("node %s adopted %+v, want %+v", w.n.Self().Name, g, w.want)
		}
	}
}

// A node behind (closed while writes went by, then started again on the
// same Store, after a compaction of etcd's history) loads the document,
// ends identical, and applies the change again from the next write on.
func TestNodeBehindLoadsTheDocument(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	_, nodes := startBig(t, etcd, 100)
	a, b := nodes[0], nodes[1]
	if err := b.Node.Close(); err != nil {
		t.Fatal(err)
	}
	setWeight(t, a, 1, 21)
	gen := setWeight(t, a, 2, 22)
	resp, err := a.es.Client().Get(context.Background(), a.es.CurrentKey())
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.es.Client().Compact(context.Background(), resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	restart := func() {
		t.Helper()
		n, err := StartNode(context.Background(), NodeOptions{
			Client: b.es.Client(), Prefix: b.es.Prefix(), Store: b.store, Storage: b.es,
			Self: core.NodeIdentity{Name: "b"}, StateDir: b.dir,
			Apply: b.plane.Apply, Running: b.plane.running.Load,
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { n.Close() })
		b.Node = n
	}
	restart()
	waitIdentical(t, a.es, gen, nodes...)
	if g := adoptions(b); g != (core.Adoptions{Documents: 1}) {
		t.Errorf("b behind by two writes adopted %+v, want the document once", g)
	}
	gen = setWeight(t, a, 3, 23)
	waitIdentical(t, a.es, gen, nodes...)
	if g := adoptions(b); g != (core.Adoptions{Deltas: 1, Documents: 1}) {
		t.Errorf("b back in sync adopted %+v, want the next change as a delta", g)
	}
}

// A change that does not apply (damaged, made on another document of its
// base generation, or giving a document that is not valid) is refused and
// the document loaded instead: the node ends identical to the store.
func TestNodeRefusesABadChange(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	_, nodes := startBig(t, etcd, 50)
	a, b := nodes[0], nodes[1]
	es := a.es
	cases := []struct {
		name  string
		value func(gen, base, baseRev int64) string
	}{
		{"damaged", func(gen, base, baseRev int64) string {
			return `{"generation":` + strconv.FormatInt(gen, 10) + `,"base":` + strconv.FormatInt(base, 10) +
				`,"base_rev":` + strconv.FormatInt(baseRev, 10) + `,"delta":{"servers":{"big":{"change":[{"name":"s1","nope":1}]}}}}`
		}},
		{"another base", func(gen, base, baseRev int64) string {
			return `{"generation":` + strconv.FormatInt(gen, 10) + `,"base":` + strconv.FormatInt(base, 10) +
				`,"base_rev":` + strconv.FormatInt(baseRev-1, 10) + `,"delta":{}}`
		}},
		{"not valid", func(gen, base, baseRev int64) string {
			return `{"generation":` + strconv.FormatInt(gen, 10) + `,"base":` + strconv.FormatInt(base, 10) +
				`,"base_rev":` + strconv.FormatInt(baseRev, 10) + `,"delta":{"servers":{"big":{"add":[{"name":"s1","address":"10.0.0.9","port":1}]}}}}`
		}},
	}
	for i, tc := range cases {
		// The document of the next generation, committed as a node
		// would, but with tc's change beside it in P/current.
		cur := a.store.Current()
		next := cur.Clone()
		wt := 40 + i
		next.Backends[0].Servers[5].Weight = &wt
		next.Generation = cur.Generation + 1
		doc := docOf(t, next)
		val, err := es.enc.encode(config.RevisionInfo{Generation: next.Generation, Time: time.Now(), Summary: tc.name}, doc)
		if err != nil {
			t.Fatal(err)
		}
		r, err := es.Client().Get(context.Background(), es.CurrentKey())
		if err != nil {
			t.Fatal(err)
		}
		baseRev := r.Kvs[0].ModRevision
		before := adoptions(b)
		tx, err := es.Client().Txn(context.Background()).
			If(clientv3.Compare(clientv3.ModRevision(es.CurrentKey()), "=", baseRev)).
			Then(clientv3.OpPut(es.revisionKey(next.Generation), string(val)),
				clientv3.OpPut(es.CurrentKey(), tc.value(next.Generation, cur.Generation, baseRev))).Commit()
		if err != nil || !tx.Succeeded {
			t.Fatalf("%s: put: %v %v", tc.name, err, tx)
		}
		waitIdentical(t, es, next.Generation, nodes...)
		g := adoptions(b)
		if g.RefusedDeltas != before.RefusedDeltas+1 || g.Documents != before.Documents+1 || g.Deltas != before.Deltas {
			t.Errorf("%s: b adopted %+v after %+v, want one change refused and the document loaded", tc.name, g, before)
		}
	}
	// And the next write, made by a node on the document it loaded,
	// applies as a change again.
	before := adoptions(b)
	gen := setWeight(t, a, 7, 77)
	waitIdentical(t, es, gen, nodes...)
	if g := adoptions(b); g.Deltas != before.Deltas+1 {
		t.Errorf("after the refusals, b adopted %+v after %+v, want the change", g, before)
	}
}

// A node's cache keeps a generation adopted as a change as that change
// (CacheChangesFile), not the whole document; read back, it is the
// store's document, byte for byte. A changes file made on another
// generation than CacheFile's (a crash between the writes of a whole
// document) is ignored: the document alone is read.
func TestCacheKeepsTheChanges(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	_, nodes := startBig(t, etcd, 100)
	a, b := nodes[0], nodes[1]
	testutil.Eventually(t, 10*time.Second, func() bool {
		c, _, err := b.es.readCache()
		return err == nil && c.Generation == b.store.Current().Generation
	}, "b's cache holds the first generation")
	first := b.store.Current()
	var gen int64
	for i := range 3 {
		gen = setWeight(t, a, i, 30+i)
	}
	waitIdentical(t, a.es, gen, nodes...)
	for _, n := range []*storeNode{a, b} {
		testutil.Eventually(t, 10*time.Second, func() bool {
			c, _, err := n.es.readCache()
			return err == nil && c.Generation == gen
		}, "node "+n.Self().Name+"'s cache holds generation "+strconv.FormatInt(gen, 10))
		c, _, _ := n.es.readCache()
		if !bytes.Equal(docOf(t, c), docOf(t, n.store.Current())) {
			t.Fatalf("node %s: its cache read back is not its document", n.Self().Name)
		}
		var cc cacheChanges
		data, err := os.ReadFile(filepath.Join(n.dir, CacheChangesFile))
		if err != nil || json.Unmarshal(data, &cc) != nil || cc.Base != first.Generation || len(cc.Changes) != 3 {
			t.Fatalf("node %s: changes file %s (%v), want 3 changes on generation %d", n.Self().Name, data, err, first.Generation)
		}
	}
	// A changes file of another base: ignored.
	b.Node.Close()
	path := filepath.Join(b.dir, CacheChangesFile)
	data, _ := os.ReadFile(path)
	var cc cacheChanges
	if err := json.Unmarshal(data, &cc); err != nil {
		t.Fatal(err)
	}
	cc.Base--
	data, _ = json.Marshal(cc)
	if err := os.WriteFile(path, data, 0o600); err != nil {
		t.Fatal(err)
	}
	c, _, err := b.es.readCache()
	if err != nil {
		t.Fatalf("a changes file of another base: %v", err)
	}
	if !bytes.Equal(docOf(t, c), docOf(t, first)) {
		t.Fatalf("a changes file of another base: read generation %d, want %d alone", c.Generation, first.Generation)
	}
}

// weightChange is a config of 10 000 servers and the same with one
// server's weight changed, the next generation.
func weightChange(b *testing.B) (cur, next *config.Config) {
	cur = testConfig(b, 5, 10000, "big")
	next = cur.Clone()
	w := 7
	next.Backends[0].Servers[10].Weight = &w
	next.Generation = 6
	return cur, next
}

// The writer's part of a server change at 10 000 servers: the change to
// carry beside the document.
func BenchmarkEncodeDelta(b *testing.B) {
	cur, next := weightChange(b)
	b.ReportAllocs()
	for b.Loop() {
		if encodeDelta(cur, next) == nil {
			b.Fatal("no change")
		}
	}
}

// A node's part: the next generation built from its document and the
// change (what replaced decoding and validating the whole document).
func BenchmarkApplyDelta(b *testing.B) {
	cur, next := weightChange(b)
	d := deltaNote{gen: 6, base: 5, delta: encodeDelta(cur, next)}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := applyDelta(cur, d); err != nil {
			b.Fatal(err)
		}
	}
}

// A store that went back (P/current put with an older generation after the
// document the Store holds, or deleted) makes that document unknown: the
// next change is not applied on it (its history may repeat mod
// revisions); a read answered late (an older generation at an older mod
// revision) does not.
func TestStoreThatWentBackForgetsTheDocument(t *testing.T) {
	var s EtcdStorage
	for _, tc := range []struct {
		name   string
		read   currentKey
		forget bool
	}{
		{"a read answered late", currentKey{gen: 6, mod: 90}, false},
		{"the same", currentKey{gen: 7, mod: 100}, false},
		{"newer", currentKey{gen: 8, mod: 120}, false},
		{"older, written after", currentKey{gen: 6, mod: 130}, true},
		{"absent", currentKey{}, true},
	} {
		s.doc = currentKey{gen: 7, mod: 100}
		s.wentBack(tc.read)
		if forgot := s.doc == (currentKey{}); forgot != tc.forget {
			t.Errorf("%s: forgot %v, want %v", tc.name, forgot, tc.forget)
		}
	}
}
