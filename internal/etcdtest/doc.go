// Package etcdtest starts etcd servers in-process (go.etcd.io/etcd/server/v3/embed)
// on free 127.0.0.1 ports in temporary directories, for the tests of the
// cluster store and the end-to-end tests of several nodes.
package etcdtest

import "go.etcd.io/etcd/server/v3/embed"

// Config is the embedded server's configuration type.
type Config = embed.Config
