package main

// End-to-end tests of a cluster (issue 17): three real spliced processes
// (nodes a, b, c on 127.0.0.2, .3, .4) sharing one configuration through an
// embedded etcd, configured only through the REST API, with real traffic
// through each node's own address ("${NODE_ADDRESS}" binds).

import (
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// clusterWait is the wait_ms of the writes that expect every node's answer.
const clusterWait = "wait_ms=10000"

// configureWeb creates, on node n, an http backend "web" whose server s1 is
// the origin and a frontend "public" bound on "${NODE_ADDRESS}":port, and
// checks that every node of c applied both. It returns the generation.
func configureWeb(t *testing.T, c *testCluster, n *clusterNode, origin, port int) int64 {
	t.Helper()
	n.MustDo(201, "POST", "/api/v1/backends?"+clusterWait, fmt.Sprintf(
		`{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, origin))
	r := n.MustDo(201, "POST", "/api/v1/frontends?"+clusterWait, fmt.Sprintf(
		`{"name":"public","mode":"http","default_backend":"web","binds":[{"name":"b1","address":"${NODE_ADDRESS}","port":%d}]}`, port))
	var w writeAnswer
	r.JSON(t, &w)
	want := names(c.all())
	if got := slices.Sorted(slices.Values(w.Nodes.Applied)); !slices.Equal(got, want) || len(w.Nodes.Refused) != 0 || len(w.Nodes.Pending) != 0 {
		t.Fatalf("frontend written on %s: nodes %+v, want applied by %v", n.Name, w.Nodes, want)
	}
	if got := nodesHeader(r, "Applied"); !slices.Equal(got, want) {
		t.Fatalf("X-Spliced-Nodes-Applied = %v, want %v", got, want)
	}
	return w.Generation
}

func names(ns []*clusterNode) []string {
	var out []string
	for _, n := range ns {
		out = append(out, n.Name)
	}
	return out
}

// setWeight PATCHes the weight of web/s1 on n and returns the answer.
func setWeight(n *clusterNode, weight int, query string, hdr ...string) apiResponse {
	n.t.Helper()
	return n.Do("PATCH", "/api/v1/backends/web/servers/s1?"+query, fmt.Sprintf(`{"weight":%d}`, weight),
		append([]string{"Content-Type: application/merge-patch+json"}, hdr...)...)
}

// expectServed checks, once, that a GET through each node's address on port
// reaches the origin.
func expectServed(t *testing.T, port int, nodes ...*clusterNode) {
	t.Helper()
	for _, n := range nodes {
		if st, body := getThrough(n.Address, port, "/x"); st != 200 || body != "origin /x" {
			t.Errorf("GET through node %s (%s:%d): %d %q, want the origin's 200", n.Name, n.Address, port, st, body)
		}
	}
}

// TestClusterThreeNodes: a write on node a is served by b and c within the
// wait, its answer lists a, b and c; conditional writes racing on two nodes
// have exactly one winner; a bind that fails on one node only is refused
// there (reported in the answer and /api/v1/cluster) and applied elsewhere;
// a node killed and restarted rejoins at the current generation.
func TestClusterThreeNodes(t *testing.T) {
	t.Parallel()
	c := newTestCluster(t, 1, "a", "b", "c")
	a, b, cn := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	origin, port := clusterOrigin(t), testutil.FreePort(t)

	testutil.Eventually(t, 10*time.Second, func() bool { return len(a.cluster(t).Nodes) == 3 }, "three nodes in /api/v1/cluster")
	gen := configureWeb(t, c, a, origin, port)
	// Applied by all within the wait: b and c serve it when the answer comes.
	expectServed(t, port, a, b, cn)
	for _, n := range []*clusterNode{b, cn} {
		if in, _ := n.info(); in.RunningGeneration != gen || in.Node.Name != n.Name {
			t.Errorf("node %s info: %+v, want running generation %d", n.Name, in, gen)
		}
	}

	t.Run("write on a runs on b and c", func(t *testing.T) {
		r := setWeight(a, 7, clusterWait)
		if r.Status != 200 {
			t.Fatalf("PATCH on a: %d %s", r.Status, r.Body)
		}
		g := generationOf(t, r)
		if got := nodesHeader(r, "Applied"); !slices.Equal(got, []string{"a", "b", "c"}) {
			t.Errorf("X-Spliced-Nodes-Applied = %v, want a,b,c", got)
		}
		for _, n := range []*clusterNode{b, cn} {
			var s struct{ Weight int }
			rr := n.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil)
			rr.JSON(t, &s)
			if s.Weight != 7 || generationOf(t, rr) != g {
				t.Errorf("node %s: weight %d at generation %d, want 7 at %d", n.Name, s.Weight, generationOf(t, rr), g)
			}
			if in, _ := n.info(); in.RunningGeneration != g {
				t.Errorf("node %s runs generation %d, want %d", n.Name, in.RunningGeneration, g)
			}
		}
		v := cn.cluster(t)
		for _, name := range []string{"a", "b", "c"} {
			if row, ok := v.row(name); !ok || row.State != "in_sync" || row.RunningGeneration != g {
				t.Errorf("/api/v1/cluster on c: node %s = %+v, want in_sync at %d", name, row, g)
			}
		}
	})

	t.Run("conditional writes on two nodes: one wins", func(t *testing.T) {
		for round := range 5 {
			tag := a.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).Header.Get("ETag")
			c.waitRunning(generationOf(t, a.MustDo(200, "GET", "/api/v1/info", nil)), 10*time.Second, b)
			if got := b.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).Header.Get("ETag"); got != tag {
				t.Fatalf("round %d: ETag on b %s, on a %s", round, got, tag)
			}
			var wg sync.WaitGroup
			status := make([]int, 2)
			errs := make([]error, 2)
			for i, n := range []*clusterNode{a, b} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := sendRequest(n.Admin, "PATCH", "/api/v1/backends/web/servers/s1?wait_ms=0",
						strings.NewReader(fmt.Sprintf(`{"weight":%d}`, 20+2*round+i)), "Content-Type: application/merge-patch+json", "If-Match: "+tag)
					status[i], errs[i] = r.Status, err
				}()
			}
			wg.Wait()
			if errs[0] != nil || errs[1] != nil {
				t.Fatalf("round %d: %v %v", round, errs[0], errs[1])
			}
			s := slices.Sorted(slices.Values(status))
			if s[0] != 200 || s[1] != 412 {
				t.Fatalf("round %d: statuses on a and b %v, want one 200 and one 412", round, status)
			}
		}
	})

	t.Run("writes on three nodes at once all land", func(t *testing.T) {
		for round := range 3 {
			var wg sync.WaitGroup
			status := make([]int, 3)
			errs := make([]error, 3)
			for i, n := range []*clusterNode{a, b, cn} {
				wg.Add(1)
				go func() {
					defer wg.Done()
					r, err := sendRequest(n.Admin, "POST", "/api/v1/backends/web/servers?wait_ms=0", strings.NewReader(fmt.Sprintf(
						`{"name":"r%d%s","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, round, n.Name, 9000+i)))
					status[i], errs[i] = r.Status, err
				}()
			}
			wg.Wait()
			if !slices.Equal(status, []int{201, 201, 201}) || errors.Join(errs...) != nil {
				t.Fatalf("round %d: statuses on a, b, c %v (%v), want three 201", round, status, errors.Join(errs...))
			}
		}
		g := generationOf(t, a.MustDo(200, "GET", "/api/v1/info", nil))
		c.waitRunning(g, 10*time.Second, a, b, cn)
		for _, n := range c.all() {
			var servers []struct{ Name string }
			n.MustDo(200, "GET", "/api/v1/backends/web/servers", nil).JSON(t, &servers)
			if len(servers) != 10 {
				t.Errorf("node %s has %d servers, want s1 and the 9 written: %+v", n.Name, len(servers), servers)
			}
		}
	})

	t.Run("a bind refused on b only", func(t *testing.T) {
		port2 := testutil.FreePort(t)
		busy, err := net.Listen("tcp", fmt.Sprintf("%s:%d", b.Address, port2))
		if err != nil {
			t.Fatal(err)
		}
		defer busy.Close()
		r := a.MustDo(201, "POST", "/api/v1/frontends?"+clusterWait, fmt.Sprintf(
			`{"name":"second","mode":"http","default_backend":"web","binds":[{"name":"b1","address":"${NODE_ADDRESS}","port":%d}]}`, port2))
		var w writeAnswer
		r.JSON(t, &w)
		if got := slices.Sorted(slices.Values(w.Nodes.Applied)); !slices.Equal(got, []string{"a", "c"}) {
			t.Errorf("applied %v, want a and c: %s", got, r.Body)
		}
		if len(w.Nodes.Refused) != 1 || w.Nodes.Refused[0].Name != "b" || w.Nodes.Refused[0].Error == "" {
			t.Errorf("refused %+v, want b with its error", w.Nodes.Refused)
		} else {
			t.Logf("b refused generation %d: %s", w.Generation, w.Nodes.Refused[0].Error)
		}
		if got := nodesHeader(r, "Refused"); !slices.Equal(got, []string{"b"}) {
			t.Errorf("X-Spliced-Nodes-Refused = %v, want b", got)
		}
		row, ok := a.cluster(t).row("b")
		if !ok || row.State != "refused" || row.Error == "" || row.RefusedGeneration != w.Generation || row.RunningGeneration != w.Generation-1 {
			t.Errorf("/api/v1/cluster: b = %+v, want refused %d with its error, running %d", row, w.Generation, w.Generation-1)
		}
		expectServed(t, port2, a, cn)
		expectServed(t, port, a, b, cn) // b keeps serving its last good generation
		// b runs an older generation than the store: not ready, and says why.
		if r := b.Do("GET", "/readyz", nil); r.Status != 503 {
			t.Errorf("/readyz of b, which refused generation %d: %d %s, want 503", w.Generation, r.Status, r.Body)
		} else {
			t.Logf("/readyz of b: %s", r.Body)
		}
		a.MustDo(200, "GET", "/readyz", nil)

		// The port freed, the next generation applies on b too.
		busy.Close()
		r = setWeight(a, 9, clusterWait)
		if r.Status != 200 || !slices.Equal(nodesHeader(r, "Applied"), []string{"a", "b", "c"}) {
			t.Fatalf("write after freeing the port: %d applied %v refused %v: %s", r.Status,
				nodesHeader(r, "Applied"), nodesHeader(r, "Refused"), r.Body)
		}
		expectServed(t, port2, a, b, cn)
		b.MustDo(200, "GET", "/readyz", nil)
		if row, _ := a.cluster(t).row("b"); row.State != "in_sync" || row.Error != "" {
			t.Errorf("b after applying: %+v, want in_sync without error", row)
		}
	})

	t.Run("a node killed and restarted rejoins", func(t *testing.T) {
		cn.ExpectDeath("killed to prove it rejoins at the current generation")
		cn.Kill()
		r := setWeight(a, 11, "wait_ms=500")
		if r.Status != 200 {
			t.Fatalf("write with c down: %d %s", r.Status, r.Body)
		}
		g := generationOf(t, r)
		if applied := nodesHeader(r, "Applied"); !slices.Equal(applied, []string{"a", "b"}) {
			t.Errorf("with c killed, applied = %v, want a,b (pending %v)", applied, nodesHeader(r, "Pending"))
		}
		cn = c.restart("c")
		c.waitRunning(g, 15*time.Second, cn)
		expectServed(t, port, cn)
		testutil.Eventually(t, 10*time.Second, func() bool {
			row, ok := a.cluster(t).row("c")
			return ok && row.State == "in_sync" && row.RunningGeneration >= g
		}, "c in_sync in /api/v1/cluster after its restart")
		// And it takes the next write like the others.
		if r := setWeight(b, 12, clusterWait); r.Status != 200 || !slices.Equal(nodesHeader(r, "Applied"), []string{"a", "b", "c"}) {
			t.Errorf("write after c's restart: %d applied %v: %s", r.Status, nodesHeader(r, "Applied"), r.Body)
		}
	})
}

// TestClusterEtcdDown: with etcd stopped traffic continues, writes answer
// 503 within 5 s, reads are served marked stale, a node restarted meanwhile
// starts from its cache; with etcd back, a write reaches every node.
func TestClusterEtcdDown(t *testing.T) {
	c := newTestCluster(t, 1, "a", "b", "c")
	a, b, cn := c.nodes["a"], c.nodes["b"], c.nodes["c"]
	origin, port := clusterOrigin(t), testutil.FreePort(t)
	testutil.Eventually(t, 10*time.Second, func() bool { return len(a.cluster(t).Nodes) == 3 }, "three nodes in /api/v1/cluster")
	gen := configureWeb(t, c, a, origin, port)

	c.etcd.Stop(0)
	expectServed(t, port, a, b, cn)

	start := time.Now()
	r := setWeight(b, 5, clusterWait)
	took := time.Since(start)
	var p struct{ Type string }
	r.JSON(t, &p)
	if r.Status != 503 || !strings.HasSuffix(p.Type, "store-unavailable") {
		t.Errorf("write with etcd down: %d %s, want 503 store-unavailable", r.Status, r.Body)
	}
	if took > 5*time.Second {
		t.Errorf("write with etcd down answered after %v, want within 5 s", took)
	}
	t.Logf("write with etcd down: %d after %v", r.Status, took.Round(time.Millisecond))

	testutil.Eventually(t, 10*time.Second, func() bool {
		r := a.Do("GET", "/api/v1/backends/web", nil)
		return r.Status == 200 && r.Header.Get("X-Spliced-Stale") == "true"
	}, "a read marked X-Spliced-Stale: true")
	if in, ok := a.info(); !ok || in.Store.Connected || in.RunningGeneration != gen {
		t.Errorf("info with etcd down: %+v, want store not connected, running %d", in, gen)
	}
	a.MustDo(200, "GET", "/readyz", nil)

	// A node restarted while etcd is down runs what it ran, without
	// waiting for etcd once per read at its start: one bounded wait
	// (Reach: a second, as it has a copy), then its copy. It serves
	// traffic before its admin API (the cluster node starts last), whose
	// answer restart waits for: about 3 s; 16 s when each read of the
	// start waited 5 s for etcd.
	cn.ExpectDeath("killed to restart while etcd is down")
	cn.Kill()
	restarted := time.Now()
	cn = c.restart("c")
	took = time.Since(restarted)
	t.Logf("c restarted with etcd down: serving its admin API after %v", took.Round(time.Millisecond))
	if took > 7*time.Second {
		t.Errorf("c restarted with etcd down served its admin API after %v, want within 7 s", took)
	}
	if in, ok := cn.info(); !ok || in.RunningGeneration != gen {
		t.Errorf("c restarted with etcd down: %+v, want running %d from its cache", in, gen)
	}
	expectServed(t, port, cn)
	expectServed(t, port, a, b)

	c.etcd.Restart(0)
	back := time.Now()
	var w writeAnswer
	var last apiResponse
	attempts := 0
	testutil.Eventually(t, 20*time.Second, func() bool {
		attempts++
		last = setWeight(a, 6, clusterWait)
		return last.Status == 200
	}, func() string { return fmt.Sprintf("a write once etcd is back: last %d %s", last.Status, last.Body) })
	t.Logf("etcd back: a write answered 200 after %v (%d attempts)", time.Since(back).Round(time.Millisecond), attempts)
	last.JSON(t, &w)
	c.waitRunning(w.Generation, 15*time.Second, a, b, cn)
	for _, n := range c.all() {
		var s struct{ Weight int }
		rr := n.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil)
		rr.JSON(t, &s)
		if s.Weight != 6 {
			t.Errorf("node %s after etcd came back: weight %d", n.Name, s.Weight)
		}
		// Reads are marked stale until the node's own probe (once a
		// second) finds etcd again: a node that applied the write (even
		// the one that committed it) may not have probed yet.
		stale := ""
		testutil.Eventually(t, 5*time.Second, func() bool {
			stale = n.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).Header.Get("X-Spliced-Stale")
			return stale == ""
		}, func() string {
			return fmt.Sprintf("node %s's reads unmarked after etcd came back (X-Spliced-Stale %q)", n.Name, stale)
		})
	}
	expectServed(t, port, a, b, cn)
}

// TestClusterEtcdMemberDown: with one member of a three-member etcd stopped
// (the leader: the harder case, a new one is elected), writes still work
// and reach every node.
func TestClusterEtcdMemberDown(t *testing.T) {
	c := newTestCluster(t, 3, "a", "b", "c")
	a := c.nodes["a"]
	origin, port := clusterOrigin(t), testutil.FreePort(t)
	testutil.Eventually(t, 10*time.Second, func() bool { return len(a.cluster(t).Nodes) == 3 }, "three nodes in /api/v1/cluster")
	configureWeb(t, c, a, origin, port)

	leader := c.etcdLeader()
	c.etcd.Stop(leader)
	t.Logf("stopped etcd member %d, the leader", leader)
	// The first write waits for the election of a new leader (about 2 s
	// here), well within the 5 s a write may take: it is not refused.
	start := time.Now()
	if r := setWeight(a, 3, clusterWait); r.Status != 200 {
		t.Fatalf("write with the leader stopped: %d %s", r.Status, r.Body)
	}
	t.Logf("first write with the leader stopped answered 200 after %v", time.Since(start).Round(time.Millisecond))
	for i, n := range c.all() {
		r := setWeight(n, 30+i, clusterWait)
		if r.Status != 200 || !slices.Equal(nodesHeader(r, "Applied"), []string{"a", "b", "c"}) {
			t.Errorf("write on %s with a member down: %d applied %v: %s", n.Name, r.Status, nodesHeader(r, "Applied"), r.Body)
		}
	}
	expectServed(t, port, c.all()...)
}

// readmeClusterBlocks returns the README's ```sh blocks whose first line
// starts with "# cluster:" (TestReadmeEveryShellBlock skips them), in order.
func readmeClusterBlocks(t *testing.T) []string {
	t.Helper()
	var blocks []string
	for _, block := range readmeAllShellBlocks(t) {
		if strings.HasPrefix(block, "# cluster:") {
			blocks = append(blocks, block)
		}
	}
	return blocks
}
