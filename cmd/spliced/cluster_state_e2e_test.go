package main

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestClusterStateOfAStoppedNode: node b SIGSTOPped keeps its key (its
// lease runs 10 s) and the in_sync it published last. A write on a
// answers b pending, and a's /api/v1/cluster says b is applying (behind
// the store), not in sync; once b has not renewed its key for its
// renew_ms, unreachable, until its key goes; c, alive, stays in sync.
// SIGCONT: b applies the write and is in sync again.
func TestClusterStateOfAStoppedNode(t *testing.T) {
	c := newTestCluster(t, 1, "a", "b", "c")
	a, b, cn := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	gen := generationOf(t, a.MustDo(201, "POST", "/api/v1/backends?"+clusterWait,
		`{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`))
	c.waitRunning(gen, 15*time.Second, a, b, cn)
	testutil.Eventually(t, 10*time.Second, func() bool {
		v := a.cluster(t)
		for _, r := range v.Nodes {
			if r.State != "in_sync" {
				return false
			}
		}
		return len(v.Nodes) == 3
	}, "a, b and c in sync")

	if err := b.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	cont := func() { _ = b.cmd.Process.Signal(syscall.SIGCONT) }
	t.Cleanup(cont)
	var w writeAnswer
	setWeight(a, 5, "wait_ms=300").JSON(t, &w)
	if w.Generation <= gen || len(w.Nodes.Pending) != 1 || w.Nodes.Pending[0] != "b" {
		t.Fatalf("a write with b stopped: %+v, want b pending", w)
	}
	gen = w.Generation
	if r, ok := a.cluster(t).row("b"); !ok || r.RunningGeneration >= gen || (r.State != "applying" && r.State != "unreachable") {
		t.Fatalf("b stopped, the store at %d: %+v, want applying (behind), not in_sync", gen, r)
	}
	testutil.Eventually(t, 12*time.Second, func() bool {
		v := a.cluster(t)
		r, ok := v.row("b")
		if !ok {
			t.Fatalf("b's key went (%v after SIGSTOP) before a listed it as unreachable: %+v", time.Since(stopped), v.Nodes)
		}
		if rc, _ := v.row("c"); rc.State != "in_sync" {
			t.Fatalf("c, alive: %+v, want in_sync", rc)
		}
		return r.State == "unreachable"
	}, "b unreachable")
	t.Logf("b unreachable %v after SIGSTOP", time.Since(stopped).Round(10*time.Millisecond))
	// c sees it too, within a probe (each lister dates a renewal from
	// when it first read it, by its own clock).
	testutil.Eventually(t, 3*time.Second, func() bool {
		r, ok := cn.cluster(t).row("b")
		return ok && r.State == "unreachable"
	}, "c listing b as unreachable")

	cont()
	testutil.Eventually(t, 30*time.Second, func() bool {
		r, ok := a.cluster(t).row("b")
		return ok && r.State == "in_sync" && r.RunningGeneration == gen
	}, fmt.Sprintf("b in sync at %d once continued", gen))
}
