package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
)

// gets counts the reads of a client (its KV replaced by one).
type gets struct {
	clientv3.KV
	n atomic.Int64
}

func (g *gets) Get(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	g.n.Add(1)
	return g.KV.Get(ctx, key, opts...)
}

// TestRevisionsReadByPage: a storage that has not read the history yet
// (a node just started, the UI's first look at the revisions) lists them
// in a few reads, not one per revision. One read per revision, one after
// another, overran ReadTimeout on a loaded machine
// (TestEtcdStorageContract/RevisionsKeptAndPruned: "read revision 35: no
// answer in time"). Then only what changed is read again.
func TestRevisionsReadByPage(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	w := openStorage(t, e, "", "")
	const n = 2*revisionsPage + 3
	for gen := int64(1); gen <= n; gen++ {
		mustCommit(t, w, testConfig(t, gen, 1, fmt.Sprint("b", gen)), nil)
	}
	r := openStorage(t, e, w.Prefix(), "")
	g := &gets{KV: r.cli.KV} // before r's first call: nothing reads the field yet
	r.cli.KV = g

	list := func(want int, reads int64) {
		t.Helper()
		g.n.Store(0)
		infos, err := r.Revisions(bg)
		if err != nil {
			t.Fatal(err)
		}
		if len(infos) != want {
			t.Fatalf("%d revisions, want %d", len(infos), want)
		}
		for i, info := range infos {
			if gen := int64(want - i); info.Generation != gen || info.Summary != fmt.Sprint("gen ", gen) {
				t.Fatalf("revisions[%d] is generation %d (%q), want %d, newest first", i, info.Generation, info.Summary, gen)
			}
		}
		if got := g.n.Load(); got != reads {
			t.Fatalf("listing %d revisions read etcd %d times, want %d", want, got, reads)
		}
	}
	list(n, 1+(n+revisionsPage-1)/revisionsPage) // the keys, then 3 pages
	list(n, 1)                                   // the keys: every header cached
	mustCommit(t, w, testConfig(t, n+1, 1, "new"), nil)
	list(n+1, 2) // the keys, the new revision
	if err := w.Revert(bg, testConfig(t, n, 1, fmt.Sprint("b", n)), n+1); err != nil {
		t.Fatal(err)
	}
	list(n, 1)
}
