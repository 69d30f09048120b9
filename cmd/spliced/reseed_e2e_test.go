package main

import (
	"context"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// etcd goes back under two running nodes: restored to an older generation,
// every write is 409 store-behind, whose detail names the way out; POST
// /api/v1/cluster/reseed on one node makes its generation the store's
// again and writes work on both. Then, both stopped and etcd wiped: a node
// restarted serves its cached generation (its certificate included) and
// seeds the store with it, where the other node finds it.
func TestClusterRecoversWhenEtcdGoesBack(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	a.MustDo(201, "POST", "/api/v1/backends?wait_ms=10000", map[string]any{"name": "web", "mode": "tcp", "servers": []any{}})
	cert := testutil.SelfSigned(t, "reseed.example")
	a.MustDo(201, "POST", "/api/v1/certificates?wait_ms=10000", map[string]string{"name": "site", "cert_pem": cert.ChainPEM, "key_pem": cert.KeyPEM})
	c.waitRunning(2, 10*time.Second, a, b)

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).Then(
		clientv3.OpPut(clusterPrefix+"/current", `{"generation":1}`),
		clientv3.OpDelete(clusterPrefix+"/revisions/00000000000000000002"),
	).Commit(); err != nil {
		t.Fatal(err)
	}
	r := a.MustDo(409, "POST", "/api/v1/backends", map[string]any{"name": "api", "mode": "tcp", "servers": []any{}})
	if !strings.Contains(string(r.Body), "store-behind") || !strings.Contains(string(r.Body), "POST /api/v1/cluster/reseed") {
		t.Fatalf("write on a store that went back: %s", r.Body)
	}
	b.MustDo(200, "POST", "/api/v1/cluster/reseed?dry_run=true", nil)
	r = b.MustDo(200, "POST", "/api/v1/cluster/reseed?wait_ms=10000", nil)
	if g := generationOf(t, r); g != 3 || strings.Join(nodesHeader(r, "Applied"), ",") != "a,b" {
		t.Fatalf("reseed: generation %d, applied by %v: %s", g, nodesHeader(r, "Applied"), r.Body)
	}
	r = a.MustDo(201, "POST", "/api/v1/backends?wait_ms=10000", map[string]any{"name": "api", "mode": "tcp", "servers": []any{}})
	if g := generationOf(t, r); g != 4 || len(nodesHeader(r, "Applied")) != 2 {
		t.Fatalf("write after the reseed: generation %d, applied by %v", g, nodesHeader(r, "Applied"))
	}
	a.MustDo(409, "POST", "/api/v1/cluster/reseed", nil)

	for _, n := range []*clusterNode{a, b} {
		if err := n.Stop(10 * time.Second); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := cli.Delete(ctx, clusterPrefix+"/", clientv3.WithPrefix()); err != nil {
		t.Fatal(err)
	}
	a = c.restart("a")
	c.waitRunning(5, 10*time.Second, a)
	if in, _ := a.info(); in.Generation != 5 || in.RunningGeneration != 5 {
		t.Fatalf("the node restarted on a wiped store: %+v", in)
	}
	b = c.restart("b")
	c.waitRunning(5, 10*time.Second, b)
	for _, n := range []*clusterNode{a, b} {
		var bs []struct{ Name string }
		n.MustDo(200, "GET", "/api/v1/backends", nil).JSON(t, &bs)
		var cs []struct{ Name string }
		n.MustDo(200, "GET", "/api/v1/certificates", nil).JSON(t, &cs)
		if len(bs) != 2 || bs[0].Name != "api" && bs[1].Name != "api" || len(cs) != 1 || cs[0].Name != "site" {
			t.Fatalf("node %s after the restart: backends %+v, certificates %+v", n.Name, bs, cs)
		}
	}
	r = b.MustDo(201, "POST", "/api/v1/backends?wait_ms=10000", map[string]any{"name": "more", "mode": "tcp", "servers": []any{}})
	if g := generationOf(t, r); g != 6 || len(nodesHeader(r, "Applied")) != 2 {
		t.Fatalf("write after the seeding: generation %d, applied by %v", g, nodesHeader(r, "Applied"))
	}
}
