package cluster

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// storeNode is a node over the real stack: config.Store over EtcdStorage.
type storeNode struct {
	*Node
	store *config.Store
	plane *fakePlane
	dir   string
	es    *EtcdStorage
}

func startStoreNode(t *testing.T, etcd *etcdtest.Cluster, prefix, name string) *storeNode {
	t.Helper()
	return startStoreNodeIn(t, etcd, prefix, name, t.TempDir())
}

// startStoreNodeIn starts the node on the state directory dir as
// cmd/spliced does: a store without a document is seeded from the node's
// cache first.
func startStoreNodeIn(t *testing.T, etcd *etcdtest.Cluster, prefix, name, dir string) *storeNode {
	t.Helper()
	es := openStorage(t, etcd, prefix, dir)
	if _, err := es.SeedFromCache(context.Background(), name); err != nil {
		t.Fatal(err)
	}
	store, err := config.OpenStore(es, "", nil, config.StoreOptions{Node: name})
	if err != nil {
		t.Fatal(err)
	}
	sn := &storeNode{store: store, plane: &fakePlane{}, dir: dir, es: es}
	n, err := StartNode(context.Background(), NodeOptions{
		Client: es.Client(), Prefix: es.Prefix(), Store: store, Storage: es,
		Self: core.NodeIdentity{Name: name}, StateDir: dir,
		Apply: sn.plane.Apply, Running: sn.plane.running.Load,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { n.Close() })
	sn.Node = n
	return sn
}

// A write through one node's Store (no Apply: cluster mode) is applied,
// document and all, by every node: the writer through Sync, the others
// through their watch and Store.Refresh; each caches what it applied.
func TestNodesApplyAStoreUpdateOverEtcdStorage(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	prefix := "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	nodes := []*storeNode{
		startStoreNode(t, etcd, prefix, "a"),
		startStoreNode(t, etcd, prefix, "b"),
		startStoreNode(t, etcd, prefix, "c"),
	}
	const servers, writes = 500, 6
	var lat, syncWait []time.Duration
	for i := range writes {
		backend := "be" + strconv.Itoa(i)
		start := time.Now()
		res, err := nodes[i%3].store.Update(context.Background(), func(c *config.Config) error {
			c.Backends = append(c.Backends, testConfig(t, 0, servers, backend).Backends...)
			return nil
		}, config.UpdateOptions{Actor: "test"})
		if err != nil {
			t.Fatal(err)
		}
		tu := time.Since(start)
		if st := nodes[i%3].Sync(context.Background()); st.RunningGeneration != res.Generation || st.State != core.NodeInSync {
			t.Fatalf("the writer after Sync: %+v", st)
		}
		w := nodes[i%3].Wait(context.Background(), res.Generation, 20*time.Second)
		lat = append(lat, time.Since(start))
		syncWait = append(syncWait, time.Since(start)-tu)
		if !slices.Equal(w.Applied, []string{"a", "b", "c"}) {
			t.Fatalf("generation %d: %+v", res.Generation, w)
		}
		for _, n := range nodes {
			c := n.plane.last.Load()
			if c.Generation != res.Generation || len(c.Backends) != i+1 || c.Backends[i].Name != backend || len(c.Backends[i].Servers) != servers {
				t.Fatalf("node %s applied generation %d with %d backends", n.Self().Name, c.Generation, len(c.Backends))
			}
		}
	}
	slices.Sort(lat)
	slices.Sort(syncWait)
	t.Logf("%d writes of %d servers more each (%d at the end): Update → Sync → Wait saw 3 nodes applied: p50 %v, max %v; of which Sync → Wait: p50 %v, max %v",
		writes, servers, writes*servers, lat[len(lat)/2], lat[len(lat)-1], syncWait[len(lat)/2], syncWait[len(lat)-1])
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool {
			_, err := os.Stat(filepath.Join(n.dir, CacheFile))
			return err == nil
		}, "the applied generation cached")
	}
}
