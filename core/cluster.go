package core

import (
	"context"
	"time"
)

// Cluster is what the admin API sees of the nodes sharing one
// configuration through a cluster store (--store etcd://…, core/cluster).
// On a single node (the state directory) the API has no Cluster (nil).
// Safe from any goroutine.
type Cluster interface {
	// Self is this node: its name (--node-name) and address
	// (--node-address, what "${NODE_ADDRESS}" in a bind becomes).
	Self() NodeIdentity

	// Sync applies on this node, now, the newest generation the store
	// holds if this node does not run it yet, and publishes the outcome
	// (running generation, or the refusal and its error) in its node key.
	// The API calls it after each committed write, so that the receiving
	// node does not wait for its own watch. It returns this node's status.
	Sync(ctx context.Context) NodeStatus

	// Wait waits until every live node runs generation gen (or a newer
	// one) or refused it, at most d, and says which did what: the write's
	// ACK/NACK answer (?wait_ms=).
	Wait(ctx context.Context, gen int64, d time.Duration) WaitResult

	// Nodes lists the live nodes (those whose lease is alive), sorted by
	// name, for /api/v1/cluster, each one's State worked out by this node
	// (from its running generation and the store's, unreachable when its
	// entry was not renewed within its RenewMs). While the store is
	// unreachable it returns the last list seen and StoreState().Connected
	// is false.
	Nodes(ctx context.Context) ([]NodeStatus, error)

	// StoreState says whether the store is reachable and, when it is not,
	// since when: reads are then served from this node's copy (stale).
	StoreState() StoreState
}

// NodeIdentity names a node.
type NodeIdentity struct {
	Name    string `json:"name" example:"edge-1"`
	Address string `json:"address,omitempty" example:"192.0.2.10"`
}

// Node states in NodeStatus.State.
const (
	NodeInSync   = "in_sync"  // runs the store's current generation
	NodeApplying = "applying" // behind, applying or about to
	NodeRefused  = "refused"  // refused a generation; runs its last good one
	NodeStarting = "starting" // registered, first apply not done
	// NodeUnreachable: the node has not renewed its entry for longer than
	// it said it would (RenewMs): stopped, killed or cut from the store,
	// until its lease expires and it leaves the list. Worked out by the
	// node that lists it, never published by a node of itself.
	NodeUnreachable = "unreachable"
)

// NodeStatus is one node as published under its lease key.
type NodeStatus struct {
	NodeIdentity
	// AdminAddress is where the node's admin API listens (as given by
	// --admin-addr; informative, used by the UI for links).
	AdminAddress string `json:"admin_address,omitempty"`
	// RunningGeneration is the generation the node's data plane runs.
	RunningGeneration int64 `json:"running_generation" example:"42"`
	// State, as the node that answers works it out: from the node's
	// running generation against the store's (in_sync, applying when
	// behind, refused when it refused the store's generation, starting
	// while its first apply is not done), unreachable when the node has
	// not renewed its entry for longer than RenewMs.
	State string `json:"state" enums:"in_sync,applying,refused,starting,unreachable" example:"in_sync"`
	// RenewMs is the longest the node goes without renewing its entry
	// (Updated) while it runs: past it, it is unreachable.
	RenewMs int64 `json:"renew_ms,omitempty" example:"4000"`
	// RefusedGeneration and Error: the newest generation the node could
	// not apply and why (absent when it applied everything).
	RefusedGeneration int64     `json:"refused_generation,omitempty" example:"43"`
	Error             string    `json:"error,omitempty"`
	Version           string    `json:"version,omitempty"`
	Started           time.Time `json:"started"`
	Updated           time.Time `json:"updated"`
}

// WaitResult is which live nodes applied a generation within the wait,
// which refused it (with their errors) and which had not answered yet.
type WaitResult struct {
	Generation int64        `json:"generation" example:"43"`
	WaitedMs   int64        `json:"waited_ms" example:"12"`
	Applied    []string     `json:"applied"`
	Refused    []NodeStatus `json:"refused"`
	Pending    []string     `json:"pending"`
}

// StoreState is the reachability of the cluster store as this node sees it.
type StoreState struct {
	Kind      string   `json:"kind" example:"etcd"`
	Endpoints []string `json:"endpoints,omitempty"`
	Prefix    string   `json:"prefix,omitempty" example:"/spliced"`
	Connected bool     `json:"connected"`
	// Since is when Connected last changed.
	Since time.Time `json:"since"`
	// Generation is the newest generation this node has seen in the store.
	Generation int64 `json:"generation"`
	// Behind is set while the store holds an older generation than this
	// node (etcd restored from an older snapshot): writes answer 409
	// store-behind until POST /api/v1/cluster/reseed.
	Behind bool `json:"behind,omitempty"`
	// Adoptions counts how the generations other nodes wrote came to this
	// node since it started (absent on a single node).
	Adoptions *Adoptions `json:"adoptions,omitempty"`
}

// Adoptions counts how a cluster node adopted the generations other nodes
// wrote: each write carries its change beside the whole document; a node
// that holds the document the change was made on applies the change
// (Deltas), any other (behind, restarted) loads the document (Documents),
// as does a node that could not use the change (RefusedDeltas: damaged, or
// not valid once applied; counted in Documents too when loaded).
type Adoptions struct {
	Deltas        int64 `json:"deltas" example:"41"`
	Documents     int64 `json:"documents" example:"2"`
	RefusedDeltas int64 `json:"refused_deltas" example:"0"`
}
