package cluster

import (
	"context"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// What a node published is not its state: the node that lists it works it
// out from its running generation, the store's, and how long ago it
// renewed its key.
func TestStateOf(t *testing.T) {
	const renew = 4000
	node := func(state string, running, refused int64) core.NodeStatus {
		return core.NodeStatus{State: state, RunningGeneration: running, RefusedGeneration: refused, RenewMs: renew}
	}
	for _, c := range []struct {
		name      string
		st        core.NodeStatus
		store     int64
		unrenewed time.Duration
		self      bool
		want      string
	}{
		{"runs the store's generation", node(core.NodeInSync, 7, 0), 7, time.Second, false, core.NodeInSync},
		{"published in_sync, behind the store (stopped before the write)", node(core.NodeInSync, 6, 0), 7, time.Second, false, core.NodeApplying},
		{"applying, as published", node(core.NodeApplying, 6, 0), 7, 0, false, core.NodeApplying},
		{"published applying, the store read before its write", node(core.NodeApplying, 7, 0), 7, 0, false, core.NodeInSync},
		{"refused the store's generation", node(core.NodeRefused, 6, 7), 7, 0, false, core.NodeRefused},
		{"refused an older one, the store moved on", node(core.NodeRefused, 6, 7), 8, 0, false, core.NodeApplying},
		{"starting, as published", node(core.NodeStarting, 0, 0), 7, 0, false, core.NodeStarting},
		{"no document in the store: as published", node(core.NodeInSync, 6, 0), 0, 0, false, core.NodeInSync},
		{"not renewed for renew_ms: not yet", node(core.NodeInSync, 7, 0), 7, renew * time.Millisecond, false, core.NodeInSync},
		{"not renewed for longer than renew_ms", node(core.NodeInSync, 7, 0), 7, renew*time.Millisecond + 1, false, core.NodeUnreachable},
		{"unreachable whatever it published", node(core.NodeRefused, 6, 7), 7, time.Minute, false, core.NodeUnreachable},
		{"the lister itself is never unreachable", node(core.NodeInSync, 7, 0), 7, time.Minute, true, core.NodeInSync},
		{"a key without renew_ms (an older node) is never unreachable", core.NodeStatus{State: core.NodeInSync, RunningGeneration: 7}, 7, time.Hour, false, core.NodeInSync},
	} {
		if got := stateOf(c.st, c.store, c.unrenewed, c.self); got != c.want {
			t.Errorf("%s: %s, want %s", c.name, got, c.want)
		}
	}
}

// TestNodesStateOfAStoppedNode: node b dies without a word (its client
// closed: a kill, or SIGSTOP) while its lease (30 s here) keeps its key
// listed. After a write it is applying, not the in_sync it published
// last; once its key has not been renewed for its renew_ms it is
// unreachable, while c, alive, stays in sync all along (its key renewed).
func TestNodesStateOfAStoppedNode(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	b, err := startNode(t, etcd.Endpoints(), "b", "", func(o *NodeOptions) { o.LeaseTTL = 30 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	mustStartNode(t, etcd.Endpoints(), "c")
	commit(t, a.cli, 1)
	states := func() map[string]core.NodeStatus {
		list, err := a.Nodes(context.Background())
		if err != nil {
			t.Fatal(err)
		}
		return byName(list)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		m := states()
		return len(m) == 3 && m["a"].State == core.NodeInSync && m["b"].State == core.NodeInSync && m["c"].State == core.NodeInSync &&
			m["b"].RunningGeneration == 1 && m["b"].RenewMs == renewWithin.Milliseconds()
	}, "a, b and c in sync at 1")

	b.cli.Close() // b dies: no revoke, no renewal, no apply
	stopped := time.Now()
	commit(t, a.cli, 2)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 2 }, "a runs 2")
	if st := states()["b"]; st.RunningGeneration != 1 || (st.State != core.NodeApplying && st.State != core.NodeUnreachable) {
		t.Fatalf("b stopped at 1, the store at 2: %+v, want applying (or unreachable), not in_sync", st)
	}
	testutil.Eventually(t, 15*time.Second, func() bool {
		m := states()
		if m["c"].State == core.NodeUnreachable {
			t.Fatalf("c, alive, listed as unreachable: %+v", m["c"])
		}
		return m["b"].State == core.NodeUnreachable
	}, "b unreachable")
	t.Logf("b unreachable %v after it stopped (renew_ms %d)", time.Since(stopped).Round(10*time.Millisecond), renewWithin.Milliseconds())
	// c stays in sync, its key renewed, over two more of its renewals.
	p := a.probes.Load()
	testutil.Eventually(t, 15*time.Second, func() bool {
		m := states()
		if st := m["c"]; st.State != core.NodeInSync {
			t.Fatalf("c, alive, at 2: %+v, want in_sync", st)
		}
		if st := m["b"]; st.State != core.NodeUnreachable {
			t.Fatalf("b, stopped: %+v, want unreachable until its key goes", st)
		}
		return a.probes.Load() >= p+int64(2*renewEvery/probeEvery)
	}, "two renewals of c")
	if st := states()["c"]; time.Since(st.Updated) > renewWithin {
		t.Errorf("c's key was last renewed at %v, %v ago; renew_ms %d", st.Updated, time.Since(st.Updated), st.RenewMs)
	}
}
