package main

import (
	"crypto/tls"
	"encoding/base64"
	"net"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestClusterTicketKeysEndToEnd: the nodes of a cluster use the same
// session ticket keys (P/tls/ticket-keys), so a session of node a resumes
// on node b; keys set through the API of one node are used by both.
func TestClusterTicketKeysEndToEnd(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	type view struct {
		Keys []struct{ ID, Source string } `json:"keys"`
	}
	keys := func(n *clusterNode) view {
		var v view
		n.MustDo(200, "GET", "/api/v1/tls/ticket-keys", nil).JSON(t, &v)
		return v
	}
	same := func() bool {
		ka, kb := keys(a), keys(b)
		return len(ka.Keys) > 0 && slices.Equal(ka.Keys, kb.Keys)
	}
	testutil.Eventually(t, 10*time.Second, same, "the nodes do not use the same ticket keys")

	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"k.example.com"}})
	uploadCert(a.instance, "k", cert, false)
	a.MustDo(201, "POST", "/api/v1/backends?"+clusterWait, map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	port := testutil.FreePort(t)
	a.MustDo(201, "POST", "/api/v1/frontends?"+clusterWait, map[string]any{
		"name": "https", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "${NODE_ADDRESS}", "port": port, "tls": map[string]any{"certificates": []string{"k"}}}},
	})
	addr := func(n *clusterNode) string { return net.JoinHostPort(n.Address, strconv.Itoa(port)) }
	crossResume := func(first, second *clusterNode, why string) {
		t.Helper()
		cfg := &tls.Config{ServerName: "k.example.com", RootCAs: cert.Pool(), ClientSessionCache: tls.NewLRUClientSessionCache(4)}
		if _, st := tlsGet(t, addr(first), cfg); st.DidResume {
			t.Fatal("the first connection resumed")
		}
		if _, st := tlsGet(t, addr(second), cfg); !st.DidResume {
			t.Fatalf("a session of node %s does not resume on node %s %s", first.Name, second.Name, why)
		}
	}
	crossResume(a, b, "with the shared keys")
	if s := tlsStats(t, b.instance, "https"); s["handshakes_resumed"] != 1 {
		t.Errorf("node b's stats %v: want 1 resumed handshake", s)
	}

	k := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("k", 32)))
	b.MustDo(200, "PUT", "/api/v1/tls/ticket-keys", `{"keys":["`+k+`"]}`)
	testutil.Eventually(t, 10*time.Second, func() bool {
		ka := keys(a)
		return same() && len(ka.Keys) == 1 && ka.Keys[0].Source == "api"
	}, "keys set on node b are not used by node a")
	crossResume(b, a, "after keys set on node b")

	// etcd down: a PUT changes nothing and says so (503 within 5 s); the
	// keys stay in use.
	c.etcd.Stop(0)
	start := time.Now()
	k2 := base64.StdEncoding.EncodeToString([]byte(strings.Repeat("z", 32)))
	if r := a.Do("PUT", "/api/v1/tls/ticket-keys", `{"keys":["`+k2+`"]}`); r.Status != 503 || !strings.Contains(string(r.Body), "store-unavailable") {
		t.Fatalf("PUT with etcd down: %d %s", r.Status, r.Body)
	}
	if d := time.Since(start); d > 6*time.Second {
		t.Errorf("PUT with etcd down answered after %v", d)
	}
	if !same() || keys(a).Keys[0].Source != "api" {
		t.Fatal("a PUT refused with etcd down changed the keys")
	}
	crossResume(a, b, "with etcd down")
}
