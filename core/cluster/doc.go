// Package cluster is the etcd side of spliced: the config.Storage that
// keeps the configuration under a key prefix of an etcd cluster, and the
// node that watches it, applies each new generation and reports what it
// runs under a key bound to its lease. See ../../README.md, "Cluster".
package cluster

import clientv3 "go.etcd.io/etcd/client/v3"

// Client is the etcd client every part of the package shares.
type Client = clientv3.Client
