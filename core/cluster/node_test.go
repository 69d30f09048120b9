package cluster

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

const testPrefix = "/spliced"

// fakeStore stands for config.Store over EtcdStorage: Refresh adopts the
// generation P/current holds (a document with only its generation).
type fakeStore struct {
	cli       *clientv3.Client
	cur       atomic.Pointer[config.Config]
	refreshes atomic.Int64
}

func (s *fakeStore) Current() *config.Config { return s.cur.Load() }

func (s *fakeStore) RefreshIfBehind(ctx context.Context, gen int64) (bool, error) {
	if s.cur.Load().Generation >= gen {
		return false, nil
	}
	return s.Refresh(ctx)
}

func (s *fakeStore) Refresh(ctx context.Context) (bool, error) {
	s.refreshes.Add(1)
	resp, err := s.cli.Get(ctx, testPrefix+"/current")
	if err != nil {
		return false, fmt.Errorf("%w: %v", config.ErrUnavailable, err)
	}
	if len(resp.Kvs) == 0 {
		return false, nil
	}
	var gen int64
	if _, err := fmt.Sscanf(string(resp.Kvs[0].Value), `{"generation":%d}`, &gen); err != nil {
		return false, err
	}
	if gen <= s.cur.Load().Generation {
		return false, nil
	}
	s.cur.Store(&config.Config{Generation: gen})
	return true, nil
}

// fakePlane is a data plane: Apply runs the generation unless refuse says
// no.
type fakePlane struct {
	running atomic.Int64
	mu      sync.Mutex
	refuse  func(gen int64) error
	applies atomic.Int64
	last    atomic.Pointer[config.Config] // the last config applied
}

func (p *fakePlane) Apply(_ context.Context, c *config.Config) error {
	p.applies.Add(1)
	p.mu.Lock()
	refuse := p.refuse
	p.mu.Unlock()
	if refuse != nil {
		if err := refuse(c.Generation); err != nil {
			return err
		}
	}
	p.last.Store(c)
	p.running.Store(c.Generation)
	return nil
}

func (p *fakePlane) setRefuse(f func(int64) error) {
	p.mu.Lock()
	p.refuse = f
	p.mu.Unlock()
}

type testNode struct {
	*Node
	cli   *clientv3.Client
	plane *fakePlane
	store *fakeStore
	dir   string
}

func newClient(t *testing.T, endpoints []string) *clientv3.Client {
	t.Helper()
	cli, err := clientv3.New(clientv3.Config{Endpoints: endpoints, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cli.Close() })
	return cli
}

// startNode starts node name on its own client (endpoints), with its state
// in dir ("" → a new one).
func startNode(t *testing.T, endpoints []string, name, dir string, edit func(*NodeOptions)) (*testNode, error) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	cli := newClient(t, endpoints)
	tn := &testNode{cli: cli, plane: &fakePlane{}, store: &fakeStore{cli: cli}, dir: dir}
	tn.store.cur.Store(&config.Config{})
	o := NodeOptions{
		Client: cli, Prefix: testPrefix, Store: tn.store,
		Self:     core.NodeIdentity{Name: name, Address: "127.0.0.1"},
		StateDir: dir, Version: "test",
		Apply:   tn.plane.Apply,
		Running: tn.plane.running.Load,
		Log:     slog.New(slog.NewTextHandler(t.Output(), &slog.HandlerOptions{Level: slog.LevelDebug})).With("test_node", name),
	}
	if edit != nil {
		edit(&o)
	}
	n, err := StartNode(context.Background(), o)
	if err != nil {
		return nil, err
	}
	tn.Node = n
	t.Cleanup(func() { n.Close() })
	return tn, nil
}

func mustStartNode(t *testing.T, endpoints []string, name string) *testNode {
	t.Helper()
	tn, err := startNode(t, endpoints, name, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	return tn
}

// commit makes generation gen current, as EtcdStorage.Commit does.
// commit writes generation gen as P/current. A write right after a test
// stopped a member may meet the election that follows ("request timed
// out, possibly due to previous leader failure", returned at once, not
// retried by the client, and slower to clear on a loaded machine): it is
// tried again until 10 s have passed.
func commit(t *testing.T, cli *clientv3.Client, gen int64) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for {
		_, err := cli.Put(ctx, testPrefix+"/current", fmt.Sprintf(`{"generation":%d}`, gen))
		if err == nil {
			return
		}
		if ctx.Err() != nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatal(err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func names(list []core.NodeStatus) []string {
	var out []string
	for _, st := range list {
		out = append(out, st.Name)
	}
	return out
}

func nodeNames(t *testing.T, n *testNode) []string {
	t.Helper()
	list, err := n.Nodes(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return names(list)
}

func TestNodesApplyACommitOnAll(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	nodes := []*testNode{
		mustStartNode(t, etcd.Endpoints(), "a"),
		mustStartNode(t, etcd.Endpoints(), "b"),
		mustStartNode(t, etcd.Endpoints(), "c"),
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := nodes[0].Nodes(context.Background())
		if err != nil || !slices.Equal(names(list), []string{"a", "b", "c"}) {
			return false
		}
		for _, st := range list {
			if st.State != core.NodeInSync {
				return false
			}
		}
		return true
	}, "three nodes listed, in sync")

	var lat []time.Duration
	for gen := int64(1); gen <= 20; gen++ {
		start := time.Now()
		commit(t, nodes[0].cli, gen)
		w := nodes[1].Wait(context.Background(), gen, 10*time.Second)
		if !slices.Equal(w.Applied, []string{"a", "b", "c"}) || len(w.Refused) != 0 || len(w.Pending) != 0 || w.Generation != gen {
			t.Fatalf("generation %d: wait = %+v", gen, w)
		}
		lat = append(lat, time.Since(start))
		for _, n := range nodes {
			if got := n.plane.running.Load(); got != gen {
				t.Fatalf("node %s runs %d after the wait for %d", n.Self().Name, got, gen)
			}
		}
	}
	slices.Sort(lat)
	t.Logf("commit → 3 nodes applied and published (Wait returned), 20 commits: p50 %v, max %v", lat[len(lat)/2], lat[len(lat)-1])

	for _, n := range nodes {
		st := n.Sync(context.Background())
		if st.State != core.NodeInSync || st.RunningGeneration != 20 || st.Error != "" {
			t.Errorf("node %s: %+v", n.Self().Name, st)
		}
		ss := n.StoreState()
		if ss.Kind != "etcd" || !ss.Connected || ss.Prefix != testPrefix || ss.Generation != 20 || len(ss.Endpoints) != 1 {
			t.Errorf("node %s: store state %+v", n.Self().Name, ss)
		}
	}
	list, _ := nodes[2].Nodes(context.Background())
	for _, st := range list {
		if st.State != core.NodeInSync || st.RunningGeneration != 20 || st.Version != "test" || st.Address != "127.0.0.1" || st.Started.IsZero() {
			t.Errorf("listed %+v", st)
		}
	}
}

func TestNodeSkipsToTheNewestGeneration(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	block := make(chan struct{})
	a.plane.setRefuse(func(gen int64) error {
		if gen == 1 {
			<-block
		}
		return nil
	})
	commit(t, a.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.applies.Load() == 1 }, "the apply of 1 started")
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := a.Nodes(context.Background())
		return err == nil && len(list) == 1 && list[0].State == core.NodeApplying && list[0].RunningGeneration == 0
	}, "a slow apply published as applying")
	for gen := int64(2); gen <= 5; gen++ {
		commit(t, a.cli, gen)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return a.seen.Load() == 5 }, "generation 5 seen")
	close(block)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 5 }, "generation 5 applied")
	if got := a.plane.applies.Load(); got != 2 {
		t.Errorf("%d applies for generations 1 then 5, want 2 (1, then the newest)", got)
	}
}

func TestNodeRefusalIsPublished(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	b := mustStartNode(t, etcd.Endpoints(), "b")
	c := mustStartNode(t, etcd.Endpoints(), "c")
	commit(t, a.cli, 1)
	if w := a.Wait(context.Background(), 1, 10*time.Second); len(w.Applied) != 3 {
		t.Fatalf("wait 1: %+v", w)
	}
	b.plane.setRefuse(func(gen int64) error {
		return fmt.Errorf("frontend web: bind 127.0.0.1:80:\naddress already in use")
	})
	commit(t, a.cli, 2)
	st := a.Sync(context.Background())
	if st.RunningGeneration != 2 || st.State != core.NodeInSync {
		t.Errorf("a after Sync: %+v", st)
	}
	w := c.Wait(context.Background(), 2, 10*time.Second)
	if !slices.Equal(w.Applied, []string{"a", "c"}) || len(w.Pending) != 0 || len(w.Refused) != 1 {
		t.Fatalf("wait 2: %+v", w)
	}
	r := w.Refused[0]
	want := "frontend web: bind 127.0.0.1:80: address already in use"
	if r.Name != "b" || r.State != core.NodeRefused || r.RefusedGeneration != 2 || r.RunningGeneration != 1 || r.Error != want {
		t.Errorf("refused: %+v, want b refused 2 running 1 with %q", r, want)
	}
	if got := b.plane.running.Load(); got != 1 {
		t.Errorf("b runs %d, want its last good 1", got)
	}
	// A refused generation is not retried by the probe.
	applies := b.plane.applies.Load()
	if st := b.Sync(context.Background()); st.State != core.NodeRefused || b.plane.applies.Load() != applies {
		t.Errorf("b retried its refusal: %+v, %d applies (was %d)", st, b.plane.applies.Load(), applies)
	}

	// The next generation applies: the refusal is gone.
	b.plane.setRefuse(nil)
	commit(t, a.cli, 3)
	w = a.Wait(context.Background(), 3, 10*time.Second)
	if !slices.Equal(w.Applied, []string{"a", "b", "c"}) {
		t.Fatalf("wait 3: %+v", w)
	}
	list, _ := a.Nodes(context.Background())
	for _, st := range list {
		if st.State != core.NodeInSync || st.Error != "" || st.RefusedGeneration != 0 {
			t.Errorf("after 3: %+v", st)
		}
	}
}

func TestWaitSaysWhoIsPending(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	b := mustStartNode(t, etcd.Endpoints(), "b")
	block := make(chan struct{})
	defer close(block)
	b.plane.setRefuse(func(int64) error { <-block; return nil })
	commit(t, a.cli, 1)
	w := a.Wait(context.Background(), 1, 300*time.Millisecond)
	if !slices.Equal(w.Applied, []string{"a"}) || !slices.Equal(w.Pending, []string{"b"}) || w.WaitedMs < 300 {
		t.Errorf("wait: %+v", w)
	}
	w = a.Wait(context.Background(), 1, 0)
	if !slices.Equal(w.Applied, []string{"a"}) || !slices.Equal(w.Pending, []string{"b"}) {
		t.Errorf("wait 0: %+v", w)
	}
}

func TestNodeTokensMirror(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	cli := newClient(t, etcd.Endpoints())
	if _, err := cli.Put(context.Background(), testPrefix+"/tokens", "v1"); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var got []string
	_, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) {
		o.OnTokens = func(doc []byte) {
			mu.Lock()
			got = append(got, fmt.Sprintf("%q", doc))
			mu.Unlock()
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := func(want ...string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return slices.Equal(got, want)
		}
	}
	testutil.Eventually(t, 10*time.Second, seen(`"v1"`), "the tokens at start")
	if _, err := cli.Put(context.Background(), testPrefix+"/tokens", "v2"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, seen(`"v1"`, `"v2"`), "the changed tokens")
	if _, err := cli.Delete(context.Background(), testPrefix+"/tokens"); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, seen(`"v1"`, `"v2"`, `""`), "the deleted tokens")
}

func TestNodeLeavesWhenClosedOrKilled(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	b := mustStartNode(t, etcd.Endpoints(), "b")
	c, err := startNode(t, etcd.Endpoints(), "c", "", func(o *NodeOptions) { o.LeaseTTL = 2 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		return slices.Equal(nodeNames(t, a), []string{"a", "b", "c"})
	}, "three nodes")
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if got := nodeNames(t, a); !slices.Equal(got, []string{"a", "c"}) {
		t.Errorf("after b closed: %v", got)
	}
	// c dies: its client goes without a word; its key goes with its lease.
	killed := time.Now()
	c.cli.Close()
	testutil.Eventually(t, 15*time.Second, func() bool {
		return slices.Equal(nodeNames(t, a), []string{"a"})
	}, "c gone after its lease's TTL")
	t.Logf("killed node gone after %v (TTL 2 s)", time.Since(killed).Round(10*time.Millisecond))
}

func TestNodeNameHeldByAnotherInstance(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	first, err := startNode(t, etcd.Endpoints(), "edge-1", "", nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = startNode(t, etcd.Endpoints(), "edge-1", "", nil)
	if !errors.Is(err, ErrNodeNameTaken) || !strings.Contains(err.Error(), `"edge-1"`) {
		t.Fatalf("second edge-1 on another state dir: %v, want ErrNodeNameTaken naming it", err)
	}
	if got := nodeNames(t, first); !slices.Equal(got, []string{"edge-1"}) {
		t.Errorf("nodes: %v", got)
	}

	// The same node restarted (killed, started again on its state dir)
	// takes its key over at once, before the old lease expires.
	first.cli.Close()
	again, err := startNode(t, etcd.Endpoints(), "edge-1", first.dir, nil)
	if err != nil {
		t.Fatalf("restart on the same state dir: %v", err)
	}
	list, err := again.Nodes(context.Background())
	if err != nil || len(list) != 1 || !list[0].Started.Equal(again.started.UTC()) {
		t.Errorf("after the restart: %+v, %v (want the new instance's key)", list, err)
	}
	if _, err := startNode(t, etcd.Endpoints(), "Edge 1", "", nil); err == nil {
		t.Error("an invalid name was accepted")
	}
}

// etcd down longer than the node's lease TTL: the node keeps running its
// generation, answers from what it saw, and registers on a new lease when
// etcd is back.
func TestNodeKeepsRunningWhileEtcdIsDown(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	a, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) { o.LeaseTTL = 2 * time.Second })
	if err != nil {
		t.Fatal(err)
	}
	lease := a.leaseID()
	commit(t, a.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 1 }, "1 applied")
	stopped := time.Now()
	etcd.Stop(0)
	testutil.Eventually(t, 10*time.Second, func() bool { return !a.StoreState().Connected }, "disconnected")
	t.Logf("disconnection seen after %v", time.Since(stopped).Round(10*time.Millisecond))
	if got := a.plane.running.Load(); got != 1 {
		t.Errorf("runs %d while etcd is down", got)
	}
	asked := time.Now()
	if list, err := a.Nodes(context.Background()); err != nil || !slices.Equal(names(list), []string{"a"}) || list[0].RunningGeneration != 1 {
		t.Errorf("nodes while etcd is down: %+v, %v (want the last list)", list, err)
	}
	if took := time.Since(asked); took > 500*time.Millisecond {
		t.Errorf("Nodes took %v while etcd is down (want the last list at once)", took)
	}
	ss := a.StoreState()
	if ss.Since.Before(stopped) || ss.Generation != 1 {
		t.Errorf("store state %+v", ss)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return a.leaseID() == 0 }, "the lease lost (no keep-alive answered for its TTL)")
	etcd.Restart(0)
	testutil.Eventually(t, 20*time.Second, func() bool { return a.StoreState().Connected }, "connected again")
	testutil.Eventually(t, 10*time.Second, func() bool { return a.leaseID() != 0 && a.leaseID() != lease }, "a new lease")
	cli := newClient(t, etcd.Endpoints())
	commit(t, cli, 2)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 2 }, "2 applied")
	if w := a.Wait(context.Background(), 2, 10*time.Second); !slices.Equal(w.Applied, []string{"a"}) {
		t.Errorf("after etcd came back: %+v", w)
	}
	// The old lease (etcd extends leases across its restart) was revoked:
	// it cannot take the key away later.
	if ttl, err := cli.TimeToLive(context.Background(), lease); err != nil || ttl.TTL != -1 {
		t.Errorf("the old lease: %+v, %v (want revoked)", ttl, err)
	}
}

// A node cut from etcd longer than a compaction: when its member comes
// back it re-reads P/current instead of replaying history, and applies the
// newest generation.
func TestNodeCatchesUpAfterMissedWritesAndCompaction(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 3)
	eps := etcd.Endpoints()
	a, err := startNode(t, eps[:1], "a", "", nil) // a talks to member 0 only
	if err != nil {
		t.Fatal(err)
	}
	b := mustStartNode(t, eps[1:], "b")
	commit(t, b.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 1 }, "1 applied on a")

	etcd.Stop(0)
	testutil.Eventually(t, 10*time.Second, func() bool { return !a.StoreState().Connected }, "a disconnected")
	for gen := int64(2); gen <= 4; gen++ {
		commit(t, b.cli, gen)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := b.cli.Get(ctx, testPrefix+"/current")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.cli.Compact(ctx, resp.Header.Revision, clientv3.WithCompactPhysical()); err != nil {
		t.Fatal(err)
	}
	var w core.WaitResult
	testutil.Eventually(t, 10*time.Second, func() bool {
		w = b.Wait(ctx, 4, 0)
		return slices.Equal(w.Applied, []string{"b"})
	}, "4 applied on b")
	if !slices.Equal(w.Pending, []string{"a"}) {
		t.Errorf("while a is cut off: %+v (a listed until its lease expires, pending)", w)
	}
	etcd.Restart(0)
	testutil.Eventually(t, 20*time.Second, func() bool { return a.plane.running.Load() == 4 }, "a caught up to 4")
	if got := a.plane.applies.Load(); got != 2 {
		t.Errorf("a applied %d times, want 2 (1, then the newest: 4)", got)
	}
	w = b.Wait(ctx, 4, 10*time.Second)
	if !slices.Equal(w.Applied, []string{"a", "b"}) {
		t.Errorf("after a is back: %+v", w)
	}
}

// A lease that goes behind the node's back (revoked, or expired while
// etcd was away) is granted again and the key published on it.
func TestNodeRegistersAgainWhenItsLeaseGoes(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	a := mustStartNode(t, etcd.Endpoints(), "a")
	commit(t, a.cli, 1)
	testutil.Eventually(t, 10*time.Second, func() bool { return a.plane.running.Load() == 1 }, "1 applied")
	old := a.leaseID()
	if _, err := a.cli.Revoke(context.Background(), old); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		list, err := a.Nodes(context.Background())
		return err == nil && len(list) == 1 && list[0].RunningGeneration == 1 && a.leaseID() != old && a.leaseID() != 0
	}, "a registered again on a new lease")
}

// A node whose key another instance took while it was cut off does not
// take it back: it says so once (not at every probe) and keeps trying.
func TestNodeDoesNotTakeANameBackFromAnotherInstance(t *testing.T) {
	t.Parallel()
	etcd := etcdtest.Start(t, 1)
	var logs testutil.SyncBuffer
	a, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) {
		o.Log = slog.New(slog.NewTextHandler(&logs, nil))
	})
	if err != nil {
		t.Fatal(err)
	}
	// The other instance: its own lease, its own record, a's name.
	other := newClient(t, etcd.Endpoints())
	g, err := other.Grant(context.Background(), 30)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.cli.Revoke(context.Background(), a.leaseID()); err != nil {
		t.Fatal(err)
	}
	if _, err := other.Put(context.Background(), testPrefix+"/nodes/a", `{"name":"a","instance":"other","running_generation":0,"state":"in_sync"}`, clientv3.WithLease(g.ID)); err != nil {
		t.Fatal(err)
	}
	count := func() int { return strings.Count(logs.String(), "cannot register") }
	testutil.Eventually(t, 15*time.Second, func() bool { return count() == 1 }, "the refusal logged")
	// Two more probes (a probe a second) say nothing more and leave the key.
	probes := func() int64 { return a.probes.Load() }
	p := probes()
	testutil.Eventually(t, 10*time.Second, func() bool { return probes() >= p+2 }, "two more probes")
	resp, err := other.Get(context.Background(), testPrefix+"/nodes/a")
	if err != nil || len(resp.Kvs) != 1 || !strings.Contains(string(resp.Kvs[0].Value), `"instance":"other"`) {
		t.Fatalf("the other instance's key: %v, %v", resp, err)
	}
	if got := count(); got != 1 || !strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("%d registration failures logged, want 1 error:\n%s", got, logs.String())
	}
}

// A node started while etcd is down (cmd runs its cached generation) starts
// at once, unregistered, and registers when etcd is back.
func TestNodeStartedWhileEtcdIsDown(t *testing.T) {
	etcd := etcdtest.Start(t, 1)
	commit(t, newClient(t, etcd.Endpoints()), 1)
	etcd.Stop(0)
	start := time.Now()
	a, err := startNode(t, etcd.Endpoints(), "a", "", func(o *NodeOptions) {
		o.Running = func() int64 { return 1 } // its cache, applied by cmd
	})
	if err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > 2*time.Second {
		t.Errorf("StartNode took %v with etcd down", took)
	}
	if a.leaseID() != 0 || a.StoreState().Connected {
		t.Errorf("registered (lease %x) or connected (%+v) with etcd down", a.leaseID(), a.StoreState())
	}
	if list, err := a.Nodes(context.Background()); err != nil || len(list) != 1 || list[0].Name != "a" || list[0].RunningGeneration != 1 {
		t.Errorf("Nodes with etcd down: %+v, %v (want this node)", list, err)
	}
	etcd.Restart(0)
	testutil.Eventually(t, 20*time.Second, func() bool {
		list, err := a.Nodes(context.Background())
		return err == nil && len(list) == 1 && list[0].Name == "a" && list[0].State == core.NodeInSync && a.leaseID() != 0
	}, "a registered, in sync, once etcd is back")
}
