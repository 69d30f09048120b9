package main

import (
	"context"
	"log/slog"
	"time"

	"github.com/spliced-proxy/spliced/core"
)

// liveNodesEvery is how often a cluster node counts the live nodes for the
// limits with scope cluster: a node that joins or leaves changes each
// node's share of a limit within seconds, for one read of the node list
// (one etcd range read) per node every 5 s.
const liveNodesEvery = 5 * time.Second

// liveNodesSetter is the data plane's side (engine.Engine.SetLiveNodes).
type liveNodesSetter interface{ SetLiveNodes(n int) }

// watchLiveNodes tells the data plane how many nodes are live (listed and
// not unreachable; this one counts always), until ctx ends. A list that
// cannot be read leaves the last count.
func watchLiveNodes(ctx context.Context, cl core.Cluster, ctl core.Control, log *slog.Logger) {
	set, ok := ctl.(liveNodesSetter)
	if !ok {
		return
	}
	last := 0
	t := time.NewTicker(liveNodesEvery)
	defer t.Stop()
	for {
		rctx, cancel := context.WithTimeout(ctx, liveNodesEvery)
		list, err := cl.Nodes(rctx)
		cancel()
		if err == nil {
			n := 0
			for _, st := range list {
				if st.State != core.NodeUnreachable {
					n++
				}
			}
			n = max(n, 1)
			set.SetLiveNodes(n)
			if n != last {
				log.Info("live nodes for limits with scope cluster", "nodes", n)
				last = n
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}
