package main

// The cluster harness: an embedded etcd (internal/etcdtest) in the test
// process and spliced processes (internal/e2e nodes, like every instance
// of the package's harness) started with --store etcd://…, each with
// its own --node-name, --node-address (127.0.0.2, .3, .4), state directory
// and admin port, configured only through the REST API. The helpers wait by
// polling a condition with a deadline, never by sleeping.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// clusterPrefix is the etcd prefix every test cluster uses (each test has
// its own etcd).
const clusterPrefix = "/spliced"

// nodeAddrs are the --node-address of the nodes a, b and c.
var nodeAddrs = map[string]string{"a": "127.0.0.2", "b": "127.0.0.3", "c": "127.0.0.4"}

// testCluster is one etcd (one or three members) and the spliced nodes
// sharing its prefix.
type testCluster struct {
	t     *testing.T
	etcd  *etcdtest.Cluster
	nodes map[string]*clusterNode
}

// clusterNode is one spliced process of the cluster and what it takes to
// start it again (same state directory, admin address and flags).
type clusterNode struct {
	*instance
	Name, Address string
	args          []string
}

// newTestCluster starts an etcd of members members and the nodes named
// (each on its address of nodeAddrs).
func newTestCluster(t *testing.T, members int, names ...string) *testCluster {
	t.Helper()
	c := &testCluster{t: t, etcd: etcdtest.Start(t, members), nodes: map[string]*clusterNode{}}
	for _, n := range names {
		c.nodes[n] = c.startNode(n, t.TempDir(), fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)))
	}
	return c
}

// storeURL is the --store of the nodes: every member's endpoint.
func (c *testCluster) storeURL() string { return c.etcd.StoreURL(clusterPrefix) }

// startNode starts node name with its state directory and admin address.
func (c *testCluster) startNode(name, stateDir, admin string) *clusterNode {
	c.t.Helper()
	return c.startNodeArgs(name, nodeAddrs[name], stateDir, admin,
		[]string{"--store", c.storeURL(), "--node-name", name, "--node-address", nodeAddrs[name], "--log-format", "text"})
}

// startNodeArgs starts a node with these flags besides --admin-addr and
// --state-dir.
func (c *testCluster) startNodeArgs(name, address, stateDir, admin string, args []string) *clusterNode {
	c.t.Helper()
	n := &clusterNode{Name: name, Address: address, args: args}
	n.instance = startNode(c.t, e2e.Options{Name: "node " + name, StateDir: stateDir, AdminAddr: admin, Args: args})
	return n
}

// restart starts node name again with the same flags, state directory and
// admin address (after a Kill or Stop).
func (c *testCluster) restart(name string) *clusterNode {
	c.t.Helper()
	old := c.nodes[name]
	n := c.startNodeArgs(name, old.Address, old.StateDir, old.Admin, old.args)
	c.nodes[name] = n
	return n
}

// all returns the nodes sorted by name.
func (c *testCluster) all() []*clusterNode {
	var ns []*clusterNode
	for _, n := range c.nodes {
		ns = append(ns, n)
	}
	slices.SortFunc(ns, func(x, y *clusterNode) int { return strings.Compare(x.Name, y.Name) })
	return ns
}

// nodeInfo is what the tests read of /api/v1/info.
type nodeInfo struct {
	Generation        int64 `json:"generation"`
	RunningGeneration int64 `json:"running_generation"`
	Node              struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"node"`
	Store struct {
		Kind      string `json:"kind"`
		Connected bool   `json:"connected"`
	} `json:"store"`
}

// info reads the node's /api/v1/info (ok false when it did not answer 200).
func (n *clusterNode) info() (nodeInfo, bool) {
	var in nodeInfo
	resp, err := http.Get("http://" + n.Admin + "/api/v1/info")
	if err != nil {
		return in, false
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return in, resp.StatusCode == 200 && json.Unmarshal(b, &in) == nil
}

// waitRunning waits until every node given runs generation gen or a newer
// one.
func (c *testCluster) waitRunning(gen int64, d time.Duration, nodes ...*clusterNode) {
	c.t.Helper()
	for _, n := range nodes {
		testutil.Eventually(c.t, d, func() bool {
			in, ok := n.info()
			return ok && in.RunningGeneration >= gen
		}, fmt.Sprintf("node %s running generation %d", n.Name, gen))
	}
}

// clusterView is GET /api/v1/cluster.
type clusterView struct {
	Store struct {
		Kind      string `json:"kind"`
		Connected bool   `json:"connected"`
	} `json:"store"`
	Self struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"self"`
	Generation int64            `json:"generation"`
	Nodes      []clusterNodeRow `json:"nodes"`
}

type clusterNodeRow struct {
	Name              string `json:"name"`
	Address           string `json:"address"`
	RunningGeneration int64  `json:"running_generation"`
	State             string `json:"state"`
	RefusedGeneration int64  `json:"refused_generation"`
	Error             string `json:"error"`
}

// cluster reads the node's /api/v1/cluster.
func (n *clusterNode) cluster(t *testing.T) clusterView {
	t.Helper()
	var v clusterView
	n.MustDo(200, "GET", "/api/v1/cluster", nil).JSON(t, &v)
	return v
}

// row is the node named in v (ok false when absent).
func (v clusterView) row(name string) (clusterNodeRow, bool) {
	for _, r := range v.Nodes {
		if r.Name == name {
			return r, true
		}
	}
	return clusterNodeRow{}, false
}

// waitResult is the "nodes" member of a write's answer in cluster mode.
type waitResult struct {
	Generation int64            `json:"generation"`
	WaitedMs   int64            `json:"waited_ms"`
	Applied    []string         `json:"applied"`
	Refused    []clusterNodeRow `json:"refused"`
	Pending    []string         `json:"pending"`
}

// writeAnswer is a write's answer in cluster mode.
type writeAnswer struct {
	Generation int64      `json:"generation"`
	Nodes      waitResult `json:"nodes"`
}

// nodesHeader returns the names of an X-Spliced-Nodes-* header, sorted.
func nodesHeader(r apiResponse, which string) []string {
	var names []string
	for _, s := range strings.Split(r.Header.Get("X-Spliced-Nodes-"+which), ",") {
		if s = strings.TrimSpace(s); s != "" {
			names = append(names, s)
		}
	}
	slices.Sort(names)
	return names
}

// generationOf is the X-Spliced-Generation of an answer.
func generationOf(t *testing.T, r apiResponse) int64 {
	t.Helper()
	g, err := strconv.ParseInt(r.Header.Get("X-Spliced-Generation"), 10, 64)
	if err != nil {
		t.Fatalf("answer without X-Spliced-Generation: %v %s", r.Header, r.Body)
	}
	return g
}

// clusterOrigin is an http origin answering "origin" and the Host it saw.
func clusterOrigin(t *testing.T) int {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.WriteString(w, "origin "+r.URL.Path)
	}))
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr).Port
}

// getThrough sends one GET to http://addr:port/path on a new connection and
// returns the status and body ("" and 0 when it could not).
func getThrough(addr string, port int, path string) (int, string) {
	client := &http.Client{Timeout: 3 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	resp, err := client.Get(fmt.Sprintf("http://%s:%d%s", addr, port, path))
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// etcdLeader is the index of the etcd member that leads the raft group.
func (c *testCluster) etcdLeader() int {
	c.t.Helper()
	eps := c.etcd.Endpoints()
	cli, err := clientv3.New(clientv3.Config{Endpoints: eps, DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		c.t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	for i, ep := range eps {
		st, err := cli.Status(ctx, ep)
		if err != nil {
			c.t.Fatalf("etcd member %d status: %v", i, err)
		}
		if st.Header.MemberId == st.Leader {
			return i
		}
	}
	c.t.Fatal("no etcd member leads")
	return -1
}
