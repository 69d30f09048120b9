package cluster

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// A closed node has left the cluster (its key is gone, writes no longer
// wait for it): a write it takes between its Close and the data plane's
// (the shutdown order of cmd/spliced) is committed, but Sync must not
// apply it on a node that no longer reports what it runs.
func TestClosedNodeSyncAppliesNothing(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	testutil.Eventually(t, 10*time.Second, func() bool { return a.StoreState().Connected }, "a connected")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	// The write this node took: committed, and the Store's Current (as
	// config.Store.Update leaves it).
	commit(t, a.cli, 1)
	a.store.cur.Store(&config.Config{Generation: 1})
	applies := a.plane.applies.Load()
	a.Sync(context.Background())
	if got := a.plane.applies.Load(); got != applies {
		t.Errorf("Sync after Close applied %d time(s); running generation %d", got-applies, a.plane.running.Load())
	}
}

// The worker woken as the node closes (a kick and the cancel at once)
// applies nothing either: its select may take the kick and the semaphore
// after the cancel.
func TestClosingWorkerAppliesNothing(t *testing.T) {
	for i := 0; i < 64; i++ {
		plane := &fakePlane{}
		store := &fakeStore{}
		store.cur.Store(&config.Config{Generation: 1})
		n := &Node{
			o:    NodeOptions{Store: store, Apply: plane.Apply, Running: plane.running.Load},
			log:  slog.New(slog.DiscardHandler),
			sem:  make(chan struct{}, 1),
			kick: make(chan struct{}, 1),
		}
		n.ctx, n.cancel = context.WithCancel(context.Background())
		n.wake()
		n.cancel()
		n.wg.Add(1)
		n.worker()
		if got := plane.applies.Load(); got != 0 {
			t.Fatalf("round %d: the worker applied %d time(s) after the node's cancel", i, got)
		}
	}
}
