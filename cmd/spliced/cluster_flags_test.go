package main

import (
	"bytes"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

// Bad node names and addresses are refused before anything is opened.
func TestNodeFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--node-name", "Edge-1"}, "--node-name"},
		{[]string{"--node-name", "-edge"}, "--node-name"},
		{[]string{"--node-name", "edge.1"}, "--node-name"},
		{[]string{"--node-name", strings.Repeat("a", 200)}, "--node-name"},
		{[]string{"--node-address", "192.0.2.1:80"}, "--node-address"},
		{[]string{"--node-address", "edge-1.example.com"}, "--node-address"},
		{[]string{"--node-address", "fe80::1%eth0"}, "--node-address"},
		{[]string{"--node-address", "0.0.0.0"}, "--node-address"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		var stderr bytes.Buffer
		args := append([]string{"--state-dir", dir, "--admin-addr", "127.0.0.1:0"}, c.args...)
		if rc := run(args, io.Discard, &stderr); rc != 2 || !strings.Contains(stderr.String(), c.want) {
			t.Fatalf("%v: exit %d, stderr %q", c.args, rc, stderr.String())
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%v: the state directory was created", c.args)
		}
	}
}

func TestNodeIdentity(t *testing.T) {
	cf := clusterFlags{nodeName: "edge-1", nodeAddress: "2001:db8::0010"}
	id, err := cf.nodeIdentity(true)
	if err != nil || id.Name != "edge-1" || id.Address != "2001:db8::10" {
		t.Fatalf("%+v %v", id, err)
	}
	// Without --node-name: the host name, up to its first dot.
	h, _ := os.Hostname()
	want, _, _ := strings.Cut(strings.ToLower(h), ".")
	id, err = (&clusterFlags{}).nodeIdentity(false)
	if err != nil || (id.Name != want && id.Name != "local") {
		t.Fatalf("default name %+v %v (host %q)", id, err, h)
	}
}

// A cluster node's state directory is refused to a single-node start and
// to token edits without --store, with a message that says what to do.
func TestClusterStateDirRefusesSingleNodeUse(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeClusterMark(dir, "etcd://127.0.0.1:2379/spliced", "edge-1"); err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	if rc := run([]string{"token", "add", "--role", "admin", "--name", "ops", "--state-dir", dir}, io.Discard, &stderr); rc != 2 ||
		!strings.Contains(stderr.String(), "--store etcd://127.0.0.1:2379/spliced") {
		t.Fatalf("token add: exit %d, stderr %q", rc, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "tokens.json")); err == nil {
		t.Fatal("tokens.json written")
	}
	stderr.Reset()
	if rc := run([]string{"token", "list", "--state-dir", dir}, io.Discard, &stderr); rc != 0 {
		t.Fatalf("token list: exit %d, stderr %q", rc, stderr.String())
	}
	stderr.Reset()
	rc := run([]string{"--state-dir", dir, "--admin-addr", "127.0.0.1:0", "--log-format", "text"}, io.Discard, &stderr)
	if rc != 1 || !strings.Contains(stderr.String(), "--store etcd://127.0.0.1:2379/spliced") {
		t.Fatalf("start: exit %d, stderr %q", rc, stderr.String())
	}
	if _, err := os.Stat(filepath.Join(dir, "config.json")); err == nil {
		t.Fatal("config.json written")
	}
}

// Bad --store URLs and etcd flags are refused before anything is opened,
// by the server and by spliced token.
func TestStoreFlagsAreChecked(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--store", "http://127.0.0.1:2379/spliced"}, "--store"},
		{[]string{"--store", "etcd://127.0.0.1/spliced"}, "--store"},
		{[]string{"--store", "etcd://127.0.0.1:2379"}, "--store"},
		{[]string{"--store", "etcd://127.0.0.1:2379/"}, "--store"},
		{[]string{"--store", "etcd://u:p@127.0.0.1:2379/spliced"}, "--store"},
		{[]string{"--store", "/var/lib/spliced"}, "--store"},
		{[]string{"--etcd-cert", "c.pem", "--etcd-key", "k.pem"}, "--store"},
		{[]string{"--store", "etcd://127.0.0.1:2379/spliced", "--etcd-cert", "c.pem"}, "--etcd-key"},
		{[]string{"--store", "etcd://127.0.0.1:2379/spliced", "--etcd-cacert", "/nonexistent/ca.pem"}, "--etcd-cacert"},
		{[]string{"--store", "etcd://127.0.0.1:2379/spliced", "--etcd-dial-timeout", "0s"}, "--etcd-dial-timeout"},
		{[]string{"--store", "etcd://127.0.0.1:2379/spliced", "--node-name", "Bad Name"}, "--node-name"},
	} {
		dir := filepath.Join(t.TempDir(), "state")
		for _, pre := range [][]string{{"--admin-addr", "127.0.0.1:0", "--state-dir", dir}, {"token", "list"}} {
			args := append(append([]string{}, pre...), c.args...)
			if pre[0] == "token" && slices.Contains(c.args, "--node-name") {
				continue
			}
			var stderr bytes.Buffer
			if rc := run(args, io.Discard, &stderr); rc != 2 || !strings.Contains(stderr.String(), c.want) {
				t.Fatalf("%v: exit %d, stderr %q", args, rc, stderr.String())
			}
		}
		if _, err := os.Stat(dir); err == nil {
			t.Fatalf("%v: the state directory was created", c.args)
		}
	}
	var stderr bytes.Buffer
	if rc := run([]string{"token", "list", "--store", "etcd://127.0.0.1:2379/spliced", "--state-dir", t.TempDir()}, io.Discard, &stderr); rc != 2 ||
		!strings.Contains(stderr.String(), "not both") {
		t.Fatalf("--store with --state-dir: exit %d, stderr %q", rc, stderr.String())
	}
}

// A cluster node's state directory started with the --store of another
// key prefix (a typo at 3 a.m.: /splice for /spliced) is refused: it would
// start an empty cluster of its own, serve nothing and report ready.
func TestClusterStateDirRefusesAnotherPrefix(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := writeClusterMark(dir, "etcd://127.0.0.1:2379/spliced", "edge-1"); err != nil {
		t.Fatal(err)
	}
	type result struct {
		rc     int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		var stderr bytes.Buffer
		rc := run([]string{"--state-dir", dir, "--admin-addr", "127.0.0.1:0", "--log-format", "text", "--node-name", "edge-1",
			"--store", "etcd://127.0.0.1:1/splice", "--etcd-dial-timeout", "100ms"}, io.Discard, &stderr)
		done <- result{rc, stderr.String()}
	}()
	select {
	case r := <-done:
		if r.rc != 1 || !strings.Contains(r.stderr, "--store etcd://127.0.0.1:2379/spliced") || !strings.Contains(r.stderr, "cluster.json") {
			t.Fatalf("start: exit %d, stderr %q", r.rc, r.stderr)
		}
	case <-time.After(15 * time.Second):
		t.Fatal("a cluster node's state directory started as a node of another prefix")
	}
	// Other endpoints for the same prefix (an etcd member added or moved)
	// are the same cluster: not refused by the mark.
	if err := checkClusterMark(dir, &clusterMark{Store: "etcd://127.0.0.1:2379/spliced", Node: "edge-1"},
		&storeFlags{url: "etcd://10.0.0.1:2379,10.0.0.2:2379/spliced/", prefix: "/spliced"}); err != nil {
		t.Errorf("same prefix, other endpoints: %v", err)
	}
}
