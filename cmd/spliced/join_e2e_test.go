package main

import (
	"os"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// A single node restarted with --store on an empty store (the way to turn
// a running node into the first node of a cluster) seeds the store with
// its document and its certificates, as it does with its tokens: before,
// it started empty (generation 0, no frontends, /readyz ready), its
// config.json ignored.
func TestSingleNodeJoiningAnEmptyStoreKeepsItsConfig(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	single := startSpliced(t, dir)
	single.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "tcp", "servers": []any{}})
	cert := testutil.SelfSigned(t, "join.example")
	single.MustDo(201, "POST", "/api/v1/certificates", map[string]string{"name": "site", "cert_pem": cert.ChainPEM, "key_pem": cert.KeyPEM})
	if err := single.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}

	store := etcd.StoreURL("/join")
	first := startSpliced(t, dir, "--store", store, "--node-name", "edge-1", "--node-address", "127.0.0.2")
	second := startSpliced(t, "", "--store", store, "--node-name", "edge-2", "--node-address", "127.0.0.3")
	for _, n := range []*instance{first, second} {
		var bs []struct{ Name string }
		n.MustDo(200, "GET", "/api/v1/backends", nil).JSON(t, &bs)
		var cs []struct{ Name string }
		n.MustDo(200, "GET", "/api/v1/certificates", nil).JSON(t, &cs)
		if len(bs) != 1 || bs[0].Name != "web" || len(cs) != 1 || cs[0].Name != "site" {
			t.Fatalf("node %s: backends %+v, certificates %+v; want the single node's web and site", n.Admin, bs, cs)
		}
	}
	// The bundle is in the store: the second node serves the certificate.
	r := second.MustDo(201, "POST", "/api/v1/frontends?wait_ms=10000", map[string]any{"name": "tls", "mode": "tcp", "default_backend": "web",
		"binds": []any{map[string]any{"name": "b", "address": "${NODE_ADDRESS}", "port": testutil.FreePort(t), "tls": map[string]any{"certificates": []string{"site"}}}}})
	if applied := nodesHeader(r, "Applied"); len(applied) != 2 {
		t.Fatalf("a TLS frontend with the single node's certificate: applied by %v, refused by %v", applied, nodesHeader(r, "Refused"))
	}
}
