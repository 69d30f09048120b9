package main

import (
	"context"
	"log/slog"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

type nodesCluster struct {
	core.Cluster
	list []core.NodeStatus
}

func (c *nodesCluster) Nodes(context.Context) ([]core.NodeStatus, error) { return c.list, nil }

type liveCore struct {
	*coretest.Nop
	n atomic.Int64
}

func (c *liveCore) SetLiveNodes(n int) { c.n.Store(int64(n)) }

// The live nodes a cluster node tells its limits are those listed and not
// unreachable.
func TestWatchLiveNodesCountsReachableNodes(t *testing.T) {
	cl := &nodesCluster{list: []core.NodeStatus{
		{NodeIdentity: core.NodeIdentity{Name: "a"}, State: core.NodeInSync},
		{NodeIdentity: core.NodeIdentity{Name: "b"}, State: core.NodeApplying},
		{NodeIdentity: core.NodeIdentity{Name: "c"}, State: core.NodeUnreachable},
	}}
	ctl := &liveCore{Nop: &coretest.Nop{}}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { watchLiveNodes(ctx, cl, ctl, slog.New(slog.DiscardHandler)); close(done) }()
	testutil.Eventually(t, 5*time.Second, func() bool { return ctl.n.Load() == 2 }, "two live nodes set")
	cancel()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the watch did not end with its context")
	}
}
