// Package cluster is the etcd side of spliced: the config.Storage that
// keeps the configuration under a key prefix of an etcd cluster, and the
// node that watches it, applies each new generation and reports what it
// runs under a key bound to its lease. See ../../README.md, "Cluster".
//
// # The node
//
// Node (StartNode) is this process as a member of the cluster; it
// implements core.Cluster for the admin API.
//
//   - Registration: P/nodes/<name> holds the node's core.NodeStatus and
//     its instance id (InstanceFile in the state directory), bound to a
//     lease of 10 s kept alive. A key of the same name held by another
//     instance refuses the start (ErrNodeNameTaken); an earlier run of the
//     same node (same instance) is taken over at once. Close revokes the
//     lease (the key goes at once); a killed node goes after the TTL; a
//     lease lost while etcd was away is granted again when it is back.
//   - Watch and apply: the node watches P/current and P/tokens, and probes
//     P/current every second (one linearizable read: it is what
//     StoreState.Connected means; it also catches up what a watch missed,
//     etcd back or history compacted, by re-reading, never replaying). A
//     generation newer than the store's → Store.Refresh; newer than the
//     data plane runs → Apply, one at a time (watch, probe and Sync share
//     one step), the newest only: generations in between are skipped.
//     Success → RememberApplied; failure → the node keeps its last good
//     generation, and the refused generation is not tried again (a newer
//     write is).
//   - Publish: after each step the status is put in the node key (skipped
//     when unchanged, conditional on the key still being on the node's
//     lease). States: starting (first step not done), applying, in_sync,
//     refused (refused_generation and its error, one line).
//   - Wait(gen, d) lists P/nodes/ and watches it until every live node
//     runs gen or newer (applied) or refused gen or newer (refused); the
//     others are pending when d passes. A node whose key goes is no longer
//     waited for. Nodes lists P/nodes/, or the last list seen while etcd
//     is unreachable.
package cluster

import clientv3 "go.etcd.io/etcd/client/v3"

// Client is the etcd client every part of the package shares.
type Client = clientv3.Client
