package cluster

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Another cluster whose prefix lies under this one's P/nodes/ (or keys put
// there by hand) writes keys that are not node keys: its P/current,
// P/tokens, its revisions, its own nodes one level down. They are not
// nodes of this cluster: not listed, not waited for. Nor is a node's key
// put by hand on no lease.
func TestKeysUnderNodesThatAreNotNodesAreNotNodes(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	ctx := context.Background()
	nested := map[string]string{
		testPrefix + "/nodes/current":                        `{"generation":3}`,
		testPrefix + "/nodes/tokens":                         `{"version":1,"tokens":[]}`,
		testPrefix + "/nodes/revisions/00000000000000000003": "\x1f\x8b not json",
		testPrefix + "/nodes/nodes/x":                        `{"name":"x","running_generation":0,"state":"in_sync","instance":"0123"}`,
	}
	for k, v := range nested {
		if _, err := a.cli.Put(ctx, k, v); err != nil {
			t.Fatal(err)
		}
	}
	if got := nodeNames(t, a); !slices.Equal(got, []string{"a"}) {
		t.Errorf("nodes: %v, want [a]", got)
	}
	commit(t, a.cli, 1)
	start := time.Now()
	w := a.Wait(ctx, 1, 5*time.Second)
	if !slices.Equal(w.Applied, []string{"a"}) || len(w.Pending) != 0 || len(w.Refused) != 0 {
		t.Errorf("wait: %+v, want a applied, nobody pending", w)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("the wait took %v: it waited for keys that are not nodes", d)
	}
	// The same after the list, through Wait's watch.
	if _, err := a.cli.Put(ctx, testPrefix+"/nodes/current", `{"generation":4}`); err != nil {
		t.Fatal(err)
	}
	commit(t, a.cli, 2)
	if w := a.Wait(ctx, 2, 5*time.Second); len(w.Pending) != 0 {
		t.Errorf("wait 2: %+v", w)
	}
}

// A node key that is on no lease was not written by a node (every node
// puts its key on its lease): put by hand, it does not hold the name
// forever; the node named by it takes it over.
func TestNodeKeyWithoutLeaseDoesNotHoldTheName(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	cli := newClient(t, etcd.Endpoints())
	forged := `{"name":"a","running_generation":999,"state":"in_sync","instance":"forged"}`
	if _, err := cli.Put(context.Background(), testPrefix+"/nodes/a", forged); err != nil {
		t.Fatal(err)
	}
	a, err := startNode(t, etcd.Endpoints(), "a", "", nil)
	if err != nil {
		t.Fatalf("start: %v (a key on no lease refused the name)", err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := a.Nodes(context.Background())
		return err == nil && len(list) == 1 && list[0].RunningGeneration == 0
	}, "a's own key listed")

	// Forged again while a runs: a takes it back at its next publish.
	if _, err := cli.Put(context.Background(), testPrefix+"/nodes/a", forged); err != nil {
		t.Fatal(err)
	}
	commit(t, cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := a.Nodes(context.Background())
		return err == nil && len(list) == 1 && list[0].RunningGeneration == 1
	}, "a's own key listed again, running 1")
}

// A --store prefix ending in /nodes lies among the node keys of the
// cluster one level up: refused. "/nodes" alone and "/nodes/x" are not.
func TestStoreURLPrefixAmongNodeKeys(t *testing.T) {
	for _, in := range []string{"etcd://127.0.0.1:2379/spliced/nodes", "etcd://127.0.0.1:2379/spliced/nodes/", "etcd://127.0.0.1:2379/a/b/nodes"} {
		if _, _, err := ParseStoreURL(in); err == nil || !strings.Contains(err.Error(), "ends in /nodes") {
			t.Errorf("ParseStoreURL(%q): %v, want an error saying it ends in /nodes", in, err)
		}
	}
	for _, in := range []string{"etcd://127.0.0.1:2379/nodes", "etcd://127.0.0.1:2379/spliced/nodes/x", "etcd://127.0.0.1:2379/spliced/nodes2"} {
		if _, _, err := ParseStoreURL(in); err != nil {
			t.Errorf("ParseStoreURL(%q): %v", in, err)
		}
	}
}

// TestStorageReconnectsSoonAfterALongOutage: etcd down for 30 s, then
// back: the storage answers again within seconds, not after gRPC's
// reconnection backoff grown meanwhile (up to 2 minutes by default),
// during which the node's writes would answer 503 with etcd up.
func TestStorageReconnectsSoonAfterALongOutage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("a 30 s outage")
	}
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
	e.Stop(0)
	// The client keeps trying meanwhile (as the node's probe does).
	for end := time.Now().Add(30 * time.Second); time.Now().Before(end); {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		s.GetKey(ctx, TokensKey)
		cancel()
	}
	e.Restart(0)
	back := time.Now()
	testutil.Eventually(t, 20*time.Second, func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
		defer cancel()
		_, _, err := s.GetKey(ctx, TokensKey)
		return err == nil
	}, "etcd answering again")
	took := time.Since(back)
	t.Logf("answered %v after etcd came back", took.Round(10*time.Millisecond))
	if took > 4*time.Second {
		t.Errorf("the storage answered %v after etcd came back, want within 4 s", took.Round(10*time.Millisecond))
	}
}

// TestCommitLargerThanEtcdTakesIsErrTooLarge: a revision that stays over
// etcd's request limit once compressed is refused as such (the API's
// 413), at its first attempt (not tried again: the storage says each
// attempt it makes again), nothing committed, not an etcd failure. (It
// counted the time instead, under a second: gzip of 2 MiB under -race on
// a loaded machine took up to 2.3 s without a second attempt.)
func TestCommitLargerThanEtcdTakesIsErrTooLarge(t *testing.T) {
	e := etcdtest.Start(t, 1)
	var again atomic.Int64
	s, err := OpenEtcd(bg, Options{Endpoints: e.Endpoints(), Prefix: "/toolarge", DialTimeout: 2 * time.Second,
		Log: slog.New(countHandler{slog.NewTextHandler(t.Output(), nil), "trying again", &again})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
	// Over etcd's limit (1.5 MiB), then over the client's (gRPC, 2 MiB).
	for _, size := range []int{1700 << 10, 2 << 20} {
		doc := make([]byte, size) // random: gzip does not shrink it
		rand.Read(doc)
		start := time.Now()
		err := s.Commit(bg, 1, config.RevisionInfo{Generation: 2, Time: time.Now()}, doc, nil)
		if !errors.Is(err, config.ErrTooLarge) || errors.Is(err, config.ErrUnavailable) {
			t.Fatalf("Commit of a %d-byte revision: %v, want ErrTooLarge, not ErrUnavailable", size, err)
		}
		if n := again.Load(); n != 0 {
			t.Errorf("Commit of a %d-byte revision refused after %v and %d more attempts, want at the first", size, time.Since(start), n)
		}
	}
	if err := s.Health(); err != nil {
		t.Errorf("Health after a refused large write: %v", err)
	}
	if c, _, err := s.Load(bg); err != nil || c.Generation != 1 {
		t.Errorf("Load: %v, %v; want generation 1", c, err)
	}
}

// Two processes with one instance id (a state directory copied with a
// machine's image, and the same host name): the second takes the key over
// at its start (it cannot tell itself from a restart), but the first,
// having registered already, does not take it back: before, each took the
// key from the other at each publish, the list showing either.
func TestNodeDoesNotFightACopyOfItself(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	first := mustStartNode(t, etcd.Endpoints(), "a")
	copyDir := t.TempDir()
	inst, err := os.ReadFile(filepath.Join(first.dir, InstanceFile))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(copyDir, InstanceFile), inst, 0o600); err != nil {
		t.Fatal(err)
	}
	clone, err := startNode(t, etcd.Endpoints(), "a", copyDir, nil)
	if err != nil {
		t.Fatal(err)
	}
	keyLease := func() int64 {
		r, err := first.cli.Get(context.Background(), testPrefix+"/nodes/a")
		if err != nil || len(r.Kvs) == 0 {
			return 0
		}
		return r.Kvs[0].Lease
	}
	for gen := int64(1); gen <= 3; gen++ {
		commit(t, first.cli, gen)
		testutil.Eventually(t, 10*time.Second, func() bool {
			return first.plane.running.Load() == gen && clone.plane.running.Load() == gen && first.leaseID() == 0
		}, "both apply, the first one unregistered")
		// A few probes of the first: each would register it again.
		p := first.probes.Load()
		testutil.Eventually(t, 10*time.Second, func() bool { return first.probes.Load() >= p+3 }, "three probes")
		if l := keyLease(); first.leaseID() != 0 || l != int64(clone.leaseID()) {
			t.Fatalf("generation %d: the key is on lease %x, the copy's is %x, the first's %x: the first took it back",
				gen, l, clone.leaseID(), first.leaseID())
		}
	}
}

// TestWriteOnAStoreThatWentBack: etcd restored from an older snapshot (or
// its keys deleted) holds an older generation than the nodes run. A write
// cannot commit (it is built on the node's newer generation, and the
// Store never goes back): it says so at once, ErrStoreBehind, instead of
// losing five times in a row to "other writers" that do not exist.
func TestWriteOnAStoreThatWentBack(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	store, err := config.OpenStore(s, "", nil, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	calls := 0
	add := func(name string) func(c *config.Config) error {
		return func(c *config.Config) error {
			calls++
			c.Backends = append(c.Backends, config.Backend{Name: name, Mode: "tcp"})
			return nil
		}
	}
	for _, name := range []string{"a", "b"} {
		if _, err := store.Update(bg, add(name), config.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		reset func()
	}{
		{"restored to generation 1", func() {
			if _, err := s.Client().Put(bg, s.CurrentKey(), `{"generation":1}`); err != nil {
				t.Fatal(err)
			}
		}},
		{"cleared", func() {
			if _, err := s.Client().Delete(bg, s.Prefix()+"/", clientv3.WithPrefix()); err != nil {
				t.Fatal(err)
			}
		}},
	} {
		tc.reset()
		calls = 0
		_, err := store.Update(bg, add("c"), config.UpdateOptions{})
		if !errors.Is(err, config.ErrStoreBehind) || calls != 1 || !strings.Contains(err.Error(), "generation 2") {
			t.Errorf("%s: Update: %v after %d attempts, want ErrStoreBehind naming generation 2 after 1", tc.name, err, calls)
		}
		if store.Current().Generation != 2 {
			t.Errorf("%s: Current is generation %d, want 2 kept", tc.name, store.Current().Generation)
		}
	}
}

// TestConcurrentWritesOnThreeNodesAllLand: writes without If-Match sent at
// once to three nodes all commit, none lost, none refused: a node that
// lost a race must refresh before it tries again while the winner, up to
// date, commits its next write at once; under a burst the loser needed up
// to 13 attempts (5 were allowed: 409 write-race for a few percent).
func TestConcurrentWritesOnThreeNodesAllLand(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	prefix := "/burst"
	var stores []*config.Store
	for range 3 {
		st, err := config.OpenStore(openStorage(t, e, prefix, ""), "", nil, config.StoreOptions{})
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, st)
	}
	const perNode = 40
	errs := make(chan error, 3*perNode)
	var wg sync.WaitGroup
	for i, st := range stores {
		for j := range perNode {
			name := fmt.Sprintf("n%d-w%d", i, j)
			wg.Go(func() {
				_, err := st.Update(bg, func(c *config.Config) error {
					c.Backends = append(c.Backends, config.Backend{Name: name, Mode: "tcp"})
					return nil
				}, config.UpdateOptions{})
				if err != nil {
					err = fmt.Errorf("%s: %w", name, err)
				}
				errs <- err
			})
		}
	}
	wg.Wait()
	close(errs)
	failed := 0
	for err := range errs {
		if err != nil {
			failed++
			t.Log(err)
		}
	}
	if failed > 0 {
		t.Errorf("%d of %d writes failed", failed, 3*perNode)
	}
	c, _, err := openStorage(t, e, prefix, "").Load(bg)
	if err != nil || len(c.Backends) != 3*perNode-failed {
		t.Fatalf("the store holds %d backends (%v), want %d", len(c.Backends), err, 3*perNode-failed)
	}
}

// countHandler counts the log records whose message holds msg.
type countHandler struct {
	slog.Handler
	msg string
	n   *atomic.Int64
}

func (h countHandler) Handle(ctx context.Context, r slog.Record) error {
	if strings.Contains(r.Message, h.msg) {
		h.n.Add(1)
	}
	return h.Handler.Handle(ctx, r)
}

func (h countHandler) WithAttrs(a []slog.Attr) slog.Handler {
	return countHandler{h.Handler.WithAttrs(a), h.msg, h.n}
}

// A damaged P/current is said once, not at each probe (every second).
func TestUnreadableCurrentLoggedOnce(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	var logged atomic.Int64
	n, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) {
		o.Log = slog.New(countHandler{slog.NewTextHandler(t.Output(), nil), "unreadable current", &logged})
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.cli.Put(bg, testPrefix+"/current", "garbage"); err != nil {
		t.Fatal(err)
	}
	p := n.probes.Load()
	testutil.Eventually(t, 10*time.Second, func() bool { return n.probes.Load() >= p+3 }, "three probes")
	if got := logged.Load(); got != 1 {
		t.Errorf("the damaged current was logged %d times, want once", got)
	}
	// Readable again, then damaged again: said again.
	commit(t, n.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return n.plane.running.Load() == 1 }, "1 applied")
	if _, err := n.cli.Put(bg, testPrefix+"/current", "garbage"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return logged.Load() == 2 }, "the second damage logged")
}

// TestReadsFailFastWhileEtcdIsKnownDown: the revision history, which only
// etcd holds, answers 503 within a second or so once the storage knows
// etcd is unreachable, not after the full ReadTimeout (5 s) at each page
// of the UI's history.
func TestReadsFailFastWhileEtcdIsKnownDown(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
	e.Stop(0)
	testutil.Eventually(t, 10*time.Second, func() bool { return errors.Is(s.Health(), config.ErrUnavailable) }, "Health to see etcd down")
	for _, read := range []func() error{
		func() error { _, err := s.Revisions(bg); return err },
		func() error { _, err := s.Revision(bg, 1); return err },
	} {
		start := time.Now()
		err := read()
		if d := time.Since(start); !errors.Is(err, config.ErrUnavailable) || d > 2*time.Second {
			t.Errorf("read with etcd known down: %v after %v, want ErrUnavailable within 2 s", err, d.Round(10*time.Millisecond))
		}
	}
	e.Restart(0)
	testutil.Eventually(t, 10*time.Second, func() bool { _, err := s.Revisions(bg); return err == nil }, "the history once etcd is back")
}

// A node key deleted by hand while the node runs comes back within a few
// probes, not at the node's next status change (the next write).
func TestNodeKeyDeletedByHandComesBack(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	testutil.Eventually(t, 10*time.Second, func() bool { return slices.Equal(nodeNames(t, a), []string{"a"}) }, "a listed")
	if _, err := a.cli.Delete(bg, testPrefix+"/nodes/a"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return slices.Equal(nodeNames(t, a), []string{"a"}) }, "a listed again")
}

// pickyStore is fakeStore refusing to load generation bad, as
// config.Store refuses a P/current whose revision is absent.
type pickyStore struct {
	*fakeStore
	bad int64
}

func (s *pickyStore) RefreshIfBehind(ctx context.Context, gen int64) (bool, error) {
	if s.cur.Load().Generation >= gen {
		return false, nil
	}
	return s.Refresh(ctx)
}

func (s *pickyStore) Refresh(ctx context.Context) (bool, error) {
	resp, err := s.cli.Get(ctx, testPrefix+"/current")
	if err == nil && len(resp.Kvs) > 0 && string(resp.Kvs[0].Value) == fmt.Sprintf(`{"generation":%d}`, s.bad) {
		return false, fmt.Errorf("%w: revision %d absent", config.ErrCorrupt, s.bad)
	}
	return s.fakeStore.Refresh(ctx)
}

// A P/current put by hand with a generation that does not load (a typo,
// {"generation":99999}), then corrected: the node follows the cluster
// again. Before, the newest generation it had seen stayed 99999, refused:
// it never loaded another one (every later write refused by it) until
// restarted.
func TestNodeFollowsAgainAfterABadCurrentIsCorrected(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) {
		o.Store = &pickyStore{fakeStore: o.Store.(*fakeStore), bad: 99999}
	})
	if err != nil {
		t.Fatal(err)
	}
	commit(t, a.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 1 }, "1 applied")
	commit(t, a.cli, 99999)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.status().State == core.NodeRefused }, "99999 refused")
	commit(t, a.cli, 1) // corrected by hand
	commit(t, a.cli, 2) // the next write
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 2 }, "2 applied")
	testutil.Eventually(t, 10*time.Second, func() bool {
		st := a.status()
		return st.State == core.NodeInSync && st.RefusedGeneration == 0 && a.StoreState().Generation == 2
	}, "in sync, no refusal, the store at 2")
}
