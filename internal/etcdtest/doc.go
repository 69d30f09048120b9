// Package etcdtest starts etcd servers in-process (go.etcd.io/etcd/server/v3/embed)
// on free 127.0.0.1 ports in temporary directories, for the tests of the
// cluster store and the end-to-end tests of several nodes:
//
//	c := etcdtest.Start(t, 3)   // a 3-member cluster, ready, stopped by t.Cleanup
//	cli := ... c.Endpoints() ...
//	c.Stop(0)                   // member 0 down (the others keep quorum)
//	c.Restart(0)                // back, same ports, same data
//
// Launch is the same without a testing.TB, for the etcd-dev command (a
// development server for the README's cluster walk-through and the bench).
//
// The servers log nothing below error level, and tests run them without
// fsync (UnsafeNoFsync: a test's data need not survive a power cut; fsync
// on the shared test machine's disk costs tens of milliseconds a write).
// Any goroutine may call a Cluster's methods.
package etcdtest

import "go.etcd.io/etcd/server/v3/embed"

// Config is the embedded server's configuration type.
type Config = embed.Config
