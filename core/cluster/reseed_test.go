package cluster

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// writeAll commits a new backend through n and waits for every node to run
// it; it returns the generation.
func writeAll(t *testing.T, n *storeNode, nodes []*storeNode, backend string) int64 {
	t.Helper()
	res, err := n.store.Update(context.Background(), func(c *config.Config) error {
		c.Backends = append(c.Backends, testConfig(t, 0, 1, backend).Backends...)
		return nil
	}, config.UpdateOptions{Node: n.Self().Name})
	if err != nil {
		t.Fatalf("write of %s on %s: %v", backend, n.Self().Name, err)
	}
	n.Sync(context.Background())
	waitRunning(t, nodes, res.Generation)
	return res.Generation
}

// waitRunning waits for every node's data plane to run generation gen.
func waitRunning(t *testing.T, nodes []*storeNode, gen int64) {
	t.Helper()
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool { return n.plane.running.Load() == gen },
			fmt.Sprintf("node %s runs generation %d (runs %d; the store holds %s)", n.Self().Name, gen, n.plane.running.Load(), storeHolds(n)))
	}
}

func storeHolds(n *storeNode) string {
	v, _, err := n.es.GetKey(context.Background(), "current")
	return fmt.Sprintf("%s %v", v, err)
}

func backendsOf(c *config.Config) string {
	var names []string
	for _, b := range c.Backends {
		names = append(names, b.Name)
	}
	return strings.Join(names, ",")
}

// Etcd restored to an older generation (P/current back to 1, the newer
// revisions gone) while three nodes run generation 3: every write is
// ErrStoreBehind. A reseed on one node commits its document as generation
// 4; every node adopts it (same backends) and writes work again on all.
func TestReseedAfterTheStoreWentBack(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	prefix := "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	nodes := []*storeNode{startStoreNode(t, etcd, prefix, "a"), startStoreNode(t, etcd, prefix, "b"), startStoreNode(t, etcd, prefix, "c")}
	writeAll(t, nodes[0], nodes, "be1")
	writeAll(t, nodes[1], nodes, "be2")
	writeAll(t, nodes[2], nodes, "be3")
	es := nodes[0].es
	if _, err := es.Client().Txn(bg).Then(
		clientv3.OpPut(es.CurrentKey(), `{"generation":1}`),
		clientv3.OpDelete(es.revisionKey(2)), clientv3.OpDelete(es.revisionKey(3)),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	for _, n := range nodes {
		_, err := n.store.Update(context.Background(), func(c *config.Config) error {
			c.Backends = c.Backends[:1]
			return nil
		}, config.UpdateOptions{})
		if !errors.Is(err, config.ErrStoreBehind) {
			t.Fatalf("write on %s after the store went back: %v, want ErrStoreBehind", n.Self().Name, err)
		}
	}
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool { return n.StoreState().Behind }, "node "+n.Self().Name+" says the store is behind")
	}
	res, err := nodes[1].store.Reseed(context.Background(), config.UpdateOptions{Node: "b"})
	if err != nil {
		t.Fatalf("Reseed: %v", err)
	}
	if res.Generation != 4 || res.StoreGeneration != 1 || res.Summary != "reseeded by node b from its generation 3 (the store held generation 1)" {
		t.Fatalf("Reseed = %+v", res)
	}
	nodes[1].Sync(context.Background())
	waitRunning(t, nodes, 4)
	for _, n := range nodes {
		if got := backendsOf(n.plane.last.Load()); got != "be1,be2,be3" {
			t.Fatalf("node %s runs %s after the reseed", n.Self().Name, got)
		}
	}
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool { return !n.StoreState().Behind }, "node "+n.Self().Name+" says the store is not behind")
	}
	for i, n := range nodes {
		if g := writeAll(t, n, nodes, "after"+strconv.Itoa(i)); g != int64(5+i) {
			t.Fatalf("write on %s after the reseed: generation %d, want %d", n.Self().Name, g, 5+i)
		}
	}
	if _, err := nodes[0].store.Reseed(context.Background(), config.UpdateOptions{}); !errors.Is(err, config.ErrNotBehind) {
		t.Fatalf("Reseed of a store in sync: %v, want ErrNotBehind", err)
	}
}

// Etcd wiped (every key under the prefix deleted) and a node restarted on
// it: the node runs its cached generation, which the store now holds as
// the next one; another node running meanwhile adopts it (same backends).
// A store that holds a document is never seeded.
func TestNodeRestartedOnAWipedStoreSeedsItFromItsCache(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	prefix := "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	a := startStoreNode(t, etcd, prefix, "a")
	nodes := []*storeNode{a}
	writeAll(t, a, nodes, "be1")
	writeAll(t, a, nodes, "be2")
	testutil.Eventually(t, 10*time.Second, func() bool {
		c, _, err := a.es.readCache()
		return err == nil && c.Generation == 2
	}, "generation 2 cached")
	if g, err := a.es.SeedFromCache(context.Background(), "a"); g != 0 || err != nil {
		t.Fatalf("SeedFromCache of a store holding a document: %d, %v", g, err)
	}
	dir := a.dir
	a.Close()
	if _, err := a.es.Client().Delete(bg, prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	a = startStoreNodeIn(t, etcd, prefix, "a", dir)
	waitRunning(t, []*storeNode{a}, 3)
	if got := backendsOf(a.plane.last.Load()); got != "be1,be2" {
		t.Fatalf("the restarted node runs %q", got)
	}
	c, info, err := a.es.Load(context.Background())
	if err != nil || c.Generation != 3 || backendsOf(c) != "be1,be2" || !strings.Contains(info.Summary, "seeded by node a from its cached generation 2") {
		t.Fatalf("the store after the restart: %v %+v %v", c, info, err)
	}
	b := startStoreNode(t, etcd, prefix, "b")
	nodes = []*storeNode{a, b}
	waitRunning(t, nodes, 3)
	writeAll(t, b, nodes, "be3")
}

// Etcd wiped while node a runs generation 3 and b, which refused it, runs
// 2: a node seeds the store with the newest document it knows as 4 (one of
// them: the create is conditional), b's included (it knows generation 3
// though it refused it: not its older cache), every node adopts it, and
// writes work again.
func TestWipedStoreIsSeededByARunningNode(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	prefix := "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	nodes := []*storeNode{startStoreNode(t, etcd, prefix, "a"), startStoreNode(t, etcd, prefix, "b")}
	writeAll(t, nodes[0], nodes, "be1")
	writeAll(t, nodes[1], nodes, "be2")
	nodes[1].plane.setRefuse(func(gen int64) error {
		if gen >= 3 {
			return errors.New("port in use on b")
		}
		return nil
	})
	writeAll(t, nodes[0], nodes[:1], "be3")
	testutil.Eventually(t, 10*time.Second, func() bool {
		st := nodes[1].Sync(context.Background())
		return st.RefusedGeneration == 3 && nodes[1].store.Current().Generation == 3
	}, "b refused generation 3")
	for _, n := range nodes {
		testutil.Eventually(t, 10*time.Second, func() bool {
			c, _, err := n.es.readCache()
			return err == nil && c.Generation == n.plane.running.Load()
		}, "the running generation cached")
	}
	if _, err := nodes[0].es.Client().Delete(bg, prefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	waitRunning(t, nodes[:1], 4)
	revs, err := nodes[0].store.Revisions()
	if err != nil || len(revs) != 1 || revs[0].Generation != 4 || !strings.Contains(revs[0].Summary, "from its generation 3") {
		t.Fatalf("revisions after the seeding: %+v, %v", revs, err)
	}
	if got := backendsOf(nodes[0].plane.last.Load()); got != "be1,be2,be3" {
		t.Fatalf("node a runs %s", got)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		return nodes[1].store.Current().Generation == 4 && nodes[1].Sync(context.Background()).RefusedGeneration == 4
	}, "b adopted generation 4 (and refused it, as 3)")
	nodes[1].plane.setRefuse(nil)
	if g := writeAll(t, nodes[0], nodes, "be4"); g != 5 {
		t.Fatalf("write after the seeding: generation %d", g)
	}
}
