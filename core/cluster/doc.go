// Package cluster is the etcd side of spliced: the config.Storage that
// keeps the configuration under a key prefix of an etcd cluster, and the
// node that watches it, applies each new generation and reports what it
// runs under a key bound to its lease. See ../../README.md, "Cluster".
//
// # The storage
//
// EtcdStorage (OpenEtcd; the URL by ParseStoreURL, TLS by ClientTLS) is
// the config.Storage of a cluster. Under the prefix P (--store
// etcd://host:2379[,host:2379…]/P):
//
//   - P/current: {"generation":N}. Its mod revision is the commit point.
//     A write made as a change (CommitDelta, config.Store's writes) also
//     carries the change from the generation before, "base", "base_rev"
//     (the mod revision the Txn compared) and "delta" (config.Delta, at
//     most 128 KiB): a node whose document is exactly that base builds
//     the generation from it (delta.go); any other loads the revision.
//   - P/revisions/%020d: revision N, the state directory's revision file
//     (the header members, then "config"), gzip-compressed: 10 000
//     servers are about 1 MB of JSON, under 100 KB gzipped, well under
//     etcd's request limit (1.5 MiB). Plain JSON is read too. A writer
//     encodes the document reusing the JSON of the servers it did not
//     change (docEncoder: json.Marshal's bytes).
//   - P/certs/<chain_sha256>: a certificate's bundle, chain and private
//     key (PEM).
//   - P/tokens: the API tokens document (hashes only): GetKey, EditKey.
//   - P/tls/ticket-keys: the TLS session ticket keys every node uses
//     (ShareTicketKeys; the JSON of the state directory's
//     tls-ticket-keys.json, keys included; seeded again by the running
//     nodes when it goes, as P/current and P/tokens are).
//   - P/nodes/<name>: the nodes (below).
//
// Commit is one Txn: if P/current's mod revision is the one of
// generation prev (prev 0: P/current does not exist), put the revision,
// the new bundles and P/current, and delete the revisions older than the
// config.MaxRevisions kept; else an error wrapping config.ErrRace. The
// mod revision compared is the last this storage saw (no read before the
// Txn); a stale one costs one more Txn. Revert is the same Txn the other
// way. Bundles beyond what one Txn takes (etcd's --max-txn-ops, 128) are
// written first, in Txns of their own (named by their hash, they are the
// same bytes whoever writes them). A commit that removed the oldest kept
// revision, or a revert, starts (at most once a minute, in the
// background) the pruning of the bundles no kept revision refers to: the
// private keys of replaced or deleted certificates do not outlive the
// history that can restore them, as in the state directory. Its deletes
// are conditional on P/current unchanged since it read the references,
// and on each bundle's mod revision (one uploaded again is kept).
//
// Every call is bounded: a write gets WriteTimeout (4.5 s, so the API
// answers 503 within 5 s) in attempts of 2 s, because a proposal in
// flight when the leader crashed is lost and etcd answers it only after
// 7 s; an attempt whose answer was lost is told apart by reading back
// P/current and the revision in the next attempt's Else. A read gets
// ReadTimeout (5 s; 1 s for the revision history and Load's P/current
// while etcd is known unreachable). A start waits once: Reach, the first
// contact, gets DialTimeout, or 1 s when the node has a cache (below); when
// etcd does not answer it, the node starts from that cache at once. A failed call makes Health an error wrapping
// config.ErrUnavailable (naming the endpoints) until a call or a probe
// (one read of P/current, at most once a second, started by Health, never
// waited for) succeeds. Revisions reads the keys alone, then the header
// of each revision it has not read yet (cached by generation and mod
// revision). Bundles read are kept in memory (they never change).
// The client tries a member that does not answer again at least every
// second (gRPC's own backoff grows to 2 minutes: etcd back after a long
// outage would stay unreachable that long).
//
// The node's cache: after each successful apply the node calls
// RememberApplied, which writes its state directory's CacheFile (prefix,
// generation, config; 0600, atomically) — or, for a generation that is a
// change from the one the cache holds, only the changes since
// CacheFile's generation (CacheChangesFile, bounded) — and the bundles of the
// certificates that generation uses in CacheCertsDir (0600 files in a
// 0700 directory; the others are removed). Load while etcd is
// unreachable returns that generation (a cache of another prefix is
// refused); CertificateBundle reads the cached bundles before asking
// etcd. No cache and no etcd: Load fails, saying so. A store found
// without a document (P/current absent: etcd wiped, or restored from a
// snapshot older than the cluster) is seeded as generation G+1 by a node
// starting that reached etcd, from that cache (cmd/spliced: SeedFromCache), or running, from
// its Store's current document of generation G (the probe: SeedEmpty; the
// newest it knows, even refused) — a conditional create through Reseed,
// the first node wins — never a store that holds one. A store that went back to an older
// generation is the operator's call: config.Store.Reseed, through POST
// /api/v1/cluster/reseed.
//
// Security: P/certs holds private keys, P/tls/ticket-keys the keys that
// decrypt session tickets, and anyone who can write under P changes
// what every node serves. Run etcd with TLS and client
// certificates (--client-cert-auth; spliced's --etcd-cacert, --etcd-cert,
// --etcd-key) and enable its RBAC with a role granting read and write on
// P (and nothing to other users); the embedded development server
// (internal/etcdtest/etcd-dev) has neither and is for trials only.
//
// # The node
//
// Node (StartNode) is this process as a member of the cluster; it
// implements core.Cluster for the admin API.
//
//   - Registration: P/nodes/<name> holds the node's core.NodeStatus and
//     its instance id (InstanceFile in the state directory), bound to a
//     lease of 10 s kept alive. A key of the same name held by another
//     instance refuses the start (ErrNodeNameTaken: Register, which a
//     process calls before it opens any listener; Start then watches and
//     applies); an earlier run of the
//     same node (same instance), or a key on no lease (put by hand: every
//     node's key is on its lease), is taken over at once. Close revokes the
//     lease (the key goes at once); a killed node goes after the TTL. A
//     lease lost while etcd was away (no keep-alive answered for its TTL)
//     is granted again when etcd is back and the lost one revoked; a name
//     another instance took meanwhile is not taken back (an error, logged
//     once; the node keeps trying), nor one another process with the same
//     instance id holds on another lease once this one registered (a copy
//     of its state directory: without this, the two took the key from
//     each other at each publish).
//   - Watch and apply: the node watches P/current and P/tokens, and probes
//     P/current every second (one linearizable read: it is what
//     StoreState.Connected means; it also catches up what a watch missed,
//     etcd back or history compacted, by re-reading, never replaying). The
//     store's generation is the last value read of P/current, not the
//     highest (one put by hand, then corrected, goes back). A
//     generation newer than the store's → built from the change P/current
//     carries when the Store holds its base (Store.Advance), else
//     Store.Refresh (counted: StoreState.Adoptions); newer than the
//     data plane runs → Apply, one at a time (watch, probe and Sync share
//     one step), the newest only: generations in between are skipped.
//     Success → RememberApplied; failure → the node keeps its last good
//     generation, and the refused generation is not tried again (a newer
//     write is).
//   - Publish: after each step the status is put in the node key (skipped
//     when unchanged, but renewed every 2 s by the probe: its "updated";
//     conditional on the key still being on the node's lease; the probe
//     also finds a key deleted or replaced by hand and publishes, so
//     registering again, at once). States: starting (first step not
//     done), applying (published when an Apply lasts over 100 ms, or the
//     node is behind), in_sync, refused (refused_generation and its
//     error, one line). The key says renew_ms (4 s): the longest the node
//     goes without renewing it.
//   - States as listed: what a node published is not its state (a node
//     SIGSTOPped or killed keeps its last in_sync until its lease
//     expires). The node that lists the keys works each one's out
//     (stateOf), with P/current read in the same request: in_sync,
//     applying when behind, refused when it refused the store's
//     generation, starting as published, and unreachable when the key
//     was not renewed for longer than its renew_ms (the time the lister
//     first read each mod revision, by its own clock; the key's
//     "updated" only for a key it reads for the first time).
//   - Wait(gen, d) watches P/nodes/, lists it, and follows the watch until
//     every live node runs gen or newer (applied) or refused gen or newer
//     (refused); the others are pending when d passes. A node whose key
//     goes is no longer waited for. The watch is created before the list:
//     one created on a past revision is served by etcd's catch-up loop,
//     every 100 ms. Nodes lists P/nodes/; while the probe finds etcd
//     unreachable it answers at once with the last list seen. Keys under
//     P/nodes/ no node wrote are not nodes: a name that is not a node
//     name, a value without an instance (the keys of a cluster whose
//     prefix would be P/nodes or below; ParseStoreURL refuses a prefix
//     ending in /nodes), a key on no lease.
package cluster

import clientv3 "go.etcd.io/etcd/client/v3"

// Client is the etcd client every part of the package shares.
type Client = clientv3.Client
