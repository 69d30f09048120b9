package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestClusterNameTakenRefusedBeforeListening: a second process started with
// the --node-name of a live node (another state directory) exits with the
// name's error before it opens anything: its admin address and the bind
// its node would serve ("${NODE_ADDRESS}") are held by the test, so an
// attempt to open either would fail with "address already in use" instead
// (before the fix it opened both, then exited 8 ms later on the name).
func TestClusterNameTakenRefusedBeforeListening(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, "a")
	a := c.nodes["a"]
	port := testutil.FreePort(t)
	configureWeb(t, c, a, clusterOrigin(t), port)

	const address = "127.0.0.3" // the intruder's --node-address
	hold := func(addr string) {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	hold(admin)
	hold(fmt.Sprintf("%s:%d", address, port))

	out, err := e2e.Run(t, 30*time.Second, "--admin-addr", admin, "--state-dir", t.TempDir(),
		"--store", c.storeURL(), "--node-name", "a", "--node-address", address, "--log-format", "text")
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a second node named a did not exit within 30 s:\n%s", out)
	}
	if err == nil || !strings.Contains(string(out), "node name held by another live node") {
		t.Fatalf("a second node named a: %v, want an exit on the name:\n%s", err, out)
	}
	if strings.Contains(string(out), "in use") {
		t.Fatalf("a second node named a tried to open a listener before it was refused:\n%s", out)
	}
	// The live node a still holds its name and serves.
	if v := a.cluster(t); len(v.Nodes) != 1 || v.Nodes[0].Address != nodeAddrs["a"] {
		t.Fatalf("nodes after the refused start: %+v, want a alone, on %s", v.Nodes, nodeAddrs["a"])
	}
	expectServed(t, port, a)
}
