package main

import (
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestLimitsScopeClusterEndToEnd: two nodes share a limit with scope
// cluster: each enforces half of it (each counts its own clients), and
// its entries say by how many nodes it divides.
func TestLimitsScopeClusterEndToEnd(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	origin, port := clusterOrigin(t), testutil.FreePort(t)
	testutil.Eventually(t, 10*time.Second, func() bool { return len(a.cluster(t).Nodes) == 2 }, "two nodes in /api/v1/cluster")
	configureWeb(t, c, a, origin, port)
	a.MustDo(200, "PATCH", "/api/v1/frontends/public?"+clusterWait, map[string]any{"limits": []map[string]any{
		{"name": "shared", "scope": "cluster", "req_rate": map[string]any{"count": 4, "period_ms": 60000}},
	}}, "Content-Type: application/merge-patch+json")
	var tab limitTable
	var nodes struct {
		Nodes int `json:"nodes"`
	}
	for _, n := range []*clusterNode{a, b} {
		testutil.Eventually(t, 20*time.Second, func() bool {
			r := n.Do("GET", "/api/v1/frontends/public/limits/shared/entries", nil)
			if r.Status != 200 {
				return false
			}
			r.JSON(t, &nodes)
			return nodes.Nodes == 2
		}, "node "+n.Name+" divides by 2 live nodes")
	}
	for _, n := range []*clusterNode{a, b} {
		for i := 0; i < 2; i++ {
			if st, _ := getThrough(n.Address, port, "/x"); st != 200 {
				t.Fatalf("node %s request %d: %d", n.Name, i, st)
			}
		}
		if st, _ := getThrough(n.Address, port, "/x"); st != 429 {
			t.Fatalf("node %s: third request %d, want 429 (4 / 2 nodes)", n.Name, st)
		}
		n.MustDo(200, "GET", "/api/v1/frontends/public/limits/shared/entries", nil).JSON(t, &tab)
		if tab.Entries != 1 || tab.Top[0].ReqRate != 3 {
			t.Fatalf("node %s entries: %+v (each node counts its own clients)", n.Name, tab)
		}
	}
}
