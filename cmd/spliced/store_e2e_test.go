package main

import (
	"bytes"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tokenCmd runs `spliced token args...` in-process and returns its stdout,
// failing the test unless it exits with want.
func tokenCmd(t *testing.T, want int, args ...string) string {
	t.Helper()
	var stdout, stderr bytes.Buffer
	if rc := run(append([]string{"token"}, args...), &stdout, &stderr); rc != want {
		t.Fatalf("spliced token %v: exit %d, want %d; stderr %q", args, rc, want, stderr.String())
	}
	return strings.TrimSpace(stdout.String())
}

// Two nodes on one etcd: the first one's tokens seed the store, the
// second mirrors them; spliced token --store adds and revokes on both; a
// write answers which nodes applied it; a node's state directory refuses
// token edits without --store.
func TestNodesShareTokensThroughTheStore(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	url := etcd.StoreURL("/wire")
	dirA, dirB := t.TempDir(), t.TempDir()
	secretA := tokenCmd(t, 0, "add", "--role", "admin", "--name", "seed", "--state-dir", dirA)
	a := startSpliced(t, dirA, "--store", url, "--node-name", "a")
	b := startSpliced(t, dirB, "--store", url, "--node-name", "b")
	auth := "Authorization: Bearer " + secretA
	testutil.Eventually(t, 10*time.Second, func() bool {
		return b.Do("GET", "/api/v1/info", nil).Status == http.StatusUnauthorized &&
			b.Do("GET", "/api/v1/info", nil, auth).Status == http.StatusOK
	}, "node b mirrors the tokens node a seeded")
	if fi, err := os.Stat(filepath.Join(dirB, "tokens.json")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("node b's mirror: %v %v", fi, err)
	}

	// Both nodes are in the cluster; a write on a is applied by both.
	testutil.Eventually(t, 10*time.Second, func() bool {
		var ci struct {
			Nodes []struct{ Name string } `json:"nodes"`
		}
		a.MustDo(200, "GET", "/api/v1/cluster", nil, auth).JSON(t, &ci)
		return len(ci.Nodes) == 2
	}, "two nodes listed")
	r := a.MustDo(201, "POST", "/api/v1/backends?wait_ms=5000",
		`{"name":"web","mode":"tcp","servers":[{"name":"s1","address":"127.0.0.1","port":9}]}`, auth)
	if got := r.Header.Get("X-Spliced-Nodes-Applied"); got != "a,b" {
		t.Fatalf("applied %q, headers %v, body %s", got, r.Header, r.Body)
	}
	b.MustDo(200, "GET", "/api/v1/backends/web", nil, auth)

	// spliced token --store: on every node at once.
	secret2 := tokenCmd(t, 0, "add", "--role", "viewer", "--name", "ops2", "--store", url)
	if list := tokenCmd(t, 0, "list", "--store", url); !strings.Contains(list, "seed") || !strings.Contains(list, "ops2") {
		t.Fatalf("token list --store: %q", list)
	}
	for _, n := range []*instance{a, b} {
		testutil.Eventually(t, 10*time.Second, func() bool {
			return n.Do("GET", "/api/v1/info", nil, "Authorization: Bearer "+secret2).Status == http.StatusOK
		}, "the new token works on "+n.Admin)
	}
	tokenCmd(t, 0, "revoke", "ops2", "--store", url)
	testutil.Eventually(t, 10*time.Second, func() bool {
		return b.Do("GET", "/api/v1/info", nil, "Authorization: Bearer "+secret2).Status == http.StatusUnauthorized
	}, "the revoked token refused on b")

	// A node's state directory: edits need --store.
	var stderr bytes.Buffer
	if rc := run([]string{"token", "add", "--role", "admin", "--name", "x", "--state-dir", dirB}, io.Discard, &stderr); rc != 2 ||
		!strings.Contains(stderr.String(), "--store "+url) {
		t.Fatalf("token add on a node's state dir: exit %d, %q", rc, stderr.String())
	}
}

// A new node joining a cluster whose store holds tokens, with an admin
// address that needs one (here --admin-host; a non-loopback address is
// refused the same way), starts: the store's tokens are mirrored into its
// fresh state directory before the admin listener looks for one.
func TestNewNodeNeedingATokenStartsWithTheStoresTokens(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	url := etcd.StoreURL("/wire")
	secret := tokenCmd(t, 0, "add", "--role", "admin", "--name", "ops", "--store", url)
	n := startSpliced(t, t.TempDir(), "--store", url, "--node-name", "n", "--admin-host", "proxy.example.com")
	n.MustDo(http.StatusUnauthorized, "GET", "/api/v1/info", nil)
	n.MustDo(http.StatusOK, "GET", "/api/v1/info", nil, "Authorization: Bearer "+secret)
}

// A cluster node that needs a token while the cluster has none says to add
// it to the store (`spliced token add --state-dir` is refused on a node's
// state directory once it joined).
func TestNodeNeedingATokenSaysToAddItToTheStore(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	url := etcd.StoreURL("/wire")
	var stderr strings.Builder
	rc := run([]string{"--store", url, "--node-name", "n", "--admin-host", "proxy.example.com",
		"--admin-addr", "127.0.0.1:" + strconv.Itoa(testutil.FreePort(t)), "--state-dir", t.TempDir(), "--log-format", "text"}, io.Discard, &stderr)
	if rc == 0 || !strings.Contains(stderr.String(), "spliced token add --role admin --name NAME --store "+url) {
		t.Fatalf("exit %d, stderr %q", rc, stderr.String())
	}
}
