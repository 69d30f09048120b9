package cluster

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// With etcd down, Nodes answers with the nodes as they were just before it
// went (the probe reads them), not as the last write or GET happened to
// list them: b applied generation 2 before etcd stopped, and a says so.
// a's own entry is dated now, not the zero time.
func TestNodesWhileEtcdIsDownAreThoseSeenLast(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	mustStartNode(t, etcd.Endpoints(), "b")
	commit(t, a.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := a.Nodes(context.Background()) // the list kept: both at 1
		return err == nil && len(list) == 2 && list[0].RunningGeneration == 1 && list[1].RunningGeneration == 1
	}, "a and b run 1")
	commit(t, a.cli, 2)
	testutil.Eventually(t, 10*time.Second, func() bool {
		resp, err := a.cli.Get(context.Background(), testPrefix+"/nodes/b")
		return err == nil && len(resp.Kvs) == 1 && strings.Contains(string(resp.Kvs[0].Value), `"running_generation":2`) &&
			a.plane.running.Load() == 2
	}, "b published 2")
	p := a.probes.Load()
	testutil.Eventually(t, 10*time.Second, func() bool { return a.probes.Load() >= p+2 }, "two probes of a")
	etcd.Stop(0)
	testutil.Eventually(t, 15*time.Second, func() bool { return !a.StoreState().Connected }, "a sees etcd down")
	list, err := a.Nodes(context.Background())
	if err != nil || len(list) != 2 {
		t.Fatalf("Nodes with etcd down: %+v, %v", list, err)
	}
	if st := list[1]; st.Name != "b" || st.RunningGeneration != 2 || st.State != core.NodeInSync {
		t.Errorf("b with etcd down: %+v, want running 2 in sync (as published before etcd stopped)", st)
	}
	if st := list[0]; st.Name != "a" || st.RunningGeneration != 2 || time.Since(st.Updated) > time.Minute {
		t.Errorf("a with etcd down: %+v, want running 2, updated now", st)
	}
}
