package cluster

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestACMELockOneHolderReplacedAfterItsLease: one node holds a
// certificate's order lock; the others are told who; a release frees it at
// once; a node that dies holding it (its client gone, the lease no longer
// kept alive) is replaced once the lease expires.
func TestACMELockOneHolderReplacedAfterItsLease(t *testing.T) {
	e := etcdtest.Start(t, 1)
	sa := openStorage(t, e, "", t.TempDir())
	a := NewACMECoordinator(sa, "a")
	b := NewACMECoordinator(openStorage(t, e, sa.Prefix(), t.TempDir()), "b")
	ctx := context.Background()

	rel, _, ok, err := a.Lock(ctx, "site")
	if err != nil || !ok {
		t.Fatalf("a: ok %v err %v", ok, err)
	}
	if _, holder, ok, err := b.Lock(ctx, "site"); err != nil || ok || holder != "a" {
		t.Fatalf("b while a holds it: ok %v holder %q err %v", ok, holder, err)
	}
	if _, _, ok, _ := b.Lock(ctx, "other"); !ok {
		t.Fatal("the lock of another certificate is taken")
	}
	rel()
	relB, _, ok, err := b.Lock(ctx, "site")
	if err != nil || !ok {
		t.Fatalf("b after a released: ok %v err %v", ok, err)
	}
	relB()

	// A node that dies holding the lock: its own client, closed.
	sd := openStorage(t, e, sa.Prefix(), t.TempDir())
	dead := NewACMECoordinator(sd, "dead")
	dead.ttl = 2 * time.Second
	if _, _, ok, err := dead.Lock(ctx, "site"); !ok || err != nil {
		t.Fatalf("dead: ok %v err %v", ok, err)
	}
	sd.Close()
	if _, holder, ok, _ := b.Lock(ctx, "site"); ok || holder != "dead" {
		t.Fatalf("b right after the holder died: ok %v holder %q", ok, holder)
	}
	testutil.Eventually(t, 15*time.Second, func() bool {
		rel, _, ok, _ := b.Lock(ctx, "site")
		if ok {
			rel()
		}
		return ok
	}, "b takes the lock once the dead node's lease expired")
}

// TestACMEChallengesReachEveryNode: a challenge one node publishes is seen
// by the others' watch, and is gone from it once withdrawn.
func TestACMEChallengesReachEveryNode(t *testing.T) {
	e := etcdtest.Start(t, 1)
	sa := openStorage(t, e, "", t.TempDir())
	a := NewACMECoordinator(sa, "a")
	b := NewACMECoordinator(openStorage(t, e, sa.Prefix(), t.TempDir()), "b")
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var seen map[string]map[string]string
	done := make(chan struct{})
	go func() {
		defer close(done)
		b.Watch(ctx, func(s map[string]map[string]string) { mu.Lock(); seen = s; mu.Unlock() })
	}()
	t.Cleanup(func() { cancel(); <-done })
	get := func(kind, key string) string {
		mu.Lock()
		defer mu.Unlock()
		return seen[kind][key]
	}
	if err := a.Publish(ctx, "http-01", "tok", "tok.thumb"); err != nil {
		t.Fatal(err)
	}
	if err := a.Publish(ctx, "tls-alpn-01", "example.com", "ka"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return get("http-01", "tok") == "tok.thumb" && get("tls-alpn-01", "example.com") == "ka" },
		"b sees a's challenges")
	if err := a.Withdraw(ctx, "http-01", "tok"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return get("http-01", "tok") == "" && get("tls-alpn-01", "example.com") == "ka" },
		"b no longer sees the withdrawn one")
}
