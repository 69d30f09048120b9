package main

import (
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// A single node started with --node-address listens on it for a bind
// "${NODE_ADDRESS}", after a write and again after a restart (the start's
// apply goes through the node's effective config too).
func TestSingleNodeBindsItsNodeAddress(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	flags := []string{"--node-name", "edge-2", "--node-address", "127.0.0.2"}
	in := startSpliced(t, dir, flags...)
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","mode":"tcp","servers":[{"name":"s1","address":"127.0.0.1","port":9}]}`)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(
		`{"name":"fe","mode":"tcp","default_backend":"web","binds":[{"name":"b","address":"${NODE_ADDRESS}","port":%d}]}`, port))
	listens := func() {
		t.Helper()
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.2:%d", port), 2*time.Second)
		if err != nil {
			t.Fatalf("nothing listens on the node address: %v", err)
		}
		c.Close()
	}
	listens()
	var info struct {
		Node struct{ Name, Address string } `json:"node"`
	}
	in.MustDo(200, "GET", "/api/v1/info", nil).JSON(t, &info)
	if info.Node.Name != "edge-2" || info.Node.Address != "127.0.0.2" {
		t.Fatalf("info node %+v", info.Node)
	}
	if err := in.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	in = startSpliced(t, dir, flags...)
	in.MustDo(200, "GET", "/readyz", nil)
	listens()
}
