package main

// Several nodes, one configuration (issue 17): the flags that name this
// node and its store, and what a state directory remembers of the cluster
// it belongs to.

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net/netip"
	"os"
	"path/filepath"
	"strings"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// clusterFlags are the node's name and address.
type clusterFlags struct {
	nodeName, nodeAddress string
}

// addNodeFlags adds --node-name and --node-address to fs.
func (cf *clusterFlags) addNodeFlags(fs *flag.FlagSet) {
	fs.StringVar(&cf.nodeName, "node-name", "", "this node's name, unique in a cluster (default: the host name, lower-cased, up to its first dot; a-z, 0-9, '-' and '_')")
	fs.StringVar(&cf.nodeAddress, "node-address", "", `this node's IP address: what a bind address "${NODE_ADDRESS}" becomes on it`)
}

// nodeIdentity is this node's name and address from the flags. Without
// --node-name the host name names the node; one that is not a valid name
// is an error in a cluster, and "local" on a single node.
func (cf *clusterFlags) nodeIdentity(clustered bool) (core.NodeIdentity, error) {
	var id core.NodeIdentity
	name := cf.nodeName
	if name == "" {
		h, err := os.Hostname()
		if err != nil && clustered {
			return id, fmt.Errorf("--node-name: the host name is unknown (%v): give --node-name", err)
		}
		name, _, _ = strings.Cut(strings.ToLower(h), ".")
		if !config.ValidName(name) {
			if clustered {
				return id, fmt.Errorf("--node-name: the host name %q is not a valid node name (1 to %d of a-z, 0-9, '-' and '_', "+
					"starting and ending with a letter or digit): give --node-name", h, config.MaxNameLen)
			}
			name = "local"
		}
	} else if !config.ValidName(name) {
		return id, fmt.Errorf("--node-name %q: 1 to %d characters of a-z, 0-9, '-' and '_', starting and ending with a letter or digit",
			name, config.MaxNameLen)
	}
	id.Name = name
	if cf.nodeAddress != "" {
		a, err := netip.ParseAddr(cf.nodeAddress)
		if err != nil || a.Zone() != "" {
			return id, fmt.Errorf("--node-address %q: an IP address (such as 192.0.2.10 or 2001:db8::10), without a port or a zone", cf.nodeAddress)
		}
		if a.IsUnspecified() {
			return id, fmt.Errorf("--node-address %q: this node's own address, not the unspecified one (a bind on all addresses needs no placeholder)", cf.nodeAddress)
		}
		id.Address = a.String()
	}
	return id, nil
}

// applyEffective applies the node's effective config: its section of
// "nodes" and its address for "${NODE_ADDRESS}" (ForNode), validated with
// this machine's Env (CPUs, fd limit) when it differs from the document
// or when check is set (a cluster node: the writer validated the document
// for any machine, not for this one).
func applyEffective(ctl core.Control, env config.Env, node core.NodeIdentity, check bool) func(ctx context.Context, c *config.Config) error {
	return func(ctx context.Context, c *config.Config) error {
		eff, err := c.ForNode(node.Name, node.Address)
		if err != nil {
			return err
		}
		if check || eff != c {
			if err := config.Validate(eff, env); err != nil {
				return err
			}
		}
		return ctl.Apply(ctx, eff)
	}
}

// clusterFile, in a state directory, records the cluster store of the node
// that runs on it: a single-node start, or `spliced token` without
// --store, on that directory is refused (its tokens.json mirrors the
// store's; its config is the store's).
const clusterFile = "cluster.json"

type clusterMark struct {
	Store string `json:"store"`
	Node  string `json:"node"`
}

// readClusterMark reads dir's cluster.json (nil when absent).
func readClusterMark(dir string) (*clusterMark, error) {
	b, err := os.ReadFile(filepath.Join(dir, clusterFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m clusterMark
	if err := json.Unmarshal(b, &m); err != nil || m.Store == "" {
		return nil, fmt.Errorf("%s: not a cluster record (remove it if this directory is not a cluster node's)", filepath.Join(dir, clusterFile))
	}
	return &m, nil
}

// writeClusterMark records in dir that it is the state directory of node
// in the cluster store store.
func writeClusterMark(dir, store, node string) error {
	b, _ := json.MarshalIndent(clusterMark{Store: store, Node: node}, "", "  ")
	return config.WriteFileAtomic(dir, clusterFile, append(b, '\n'), nil)
}

// refuseClusterDir is the error of using a cluster node's state directory
// as a single node's (what says to use --store instead).
func refuseClusterDir(dir string, m *clusterMark, what string) error {
	return fmt.Errorf("state directory %s is that of cluster node %q (store %s): %s with --store %s; "+
		"or, to make it a single node's again, remove %s", dir, m.Node, m.Store, what, m.Store, filepath.Join(dir, clusterFile))
}
