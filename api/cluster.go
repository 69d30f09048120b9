package api

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// Several nodes, one configuration. With a cluster store
// (Options.Cluster) a write commits to the store without applying; the
// node that took it applies it at once (Cluster.Sync), the others through
// their watch, and the answer waits up to ?wait_ms= for them (Cluster.Wait)
// and says which applied, refused or had not answered: the X-Spliced-Nodes-*
// headers and the "nodes" member of the body. A committed write is 200,
// 201 or 204 even when nodes refused it: they keep running their last good
// generation and say why in GET /api/v1/cluster.
//
// While the store is unreachable, reads are served from this node's copy
// and marked X-Spliced-Stale: true, writes are 503 store-unavailable
// within storeTimeout, and /readyz stays ready (with a warning).

// storeTimeout bounds the store's part of a write in cluster mode (a
// variable for the tests).
var storeTimeout = 5 * time.Second

const (
	// waitDefault and waitMax bound ?wait_ms=.
	waitDefault = 2000
	waitMax     = 30000
	// nodesTimeout bounds Cluster.Nodes for /api/v1/cluster and /metrics.
	nodesTimeout = time.Second
)

// Headers of a write's answer in cluster mode: comma-separated node names.
const (
	hdrNodesApplied = "X-Spliced-Nodes-Applied"
	hdrNodesRefused = "X-Spliced-Nodes-Refused"
	hdrNodesPending = "X-Spliced-Nodes-Pending"
	hdrStale        = "X-Spliced-Stale"
)

// waitOf reads ?wait_ms= (0..30000, default 2000).
func waitOf(r *http.Request) (time.Duration, error) {
	ms, err := intQuery(r.URL.Query().Get("wait_ms"), waitDefault, 0, waitMax, "wait_ms")
	return time.Duration(ms) * time.Millisecond, err
}

// syncAndWait applies generation gen on this node now, then waits up to
// wait for every live node to run it (or refuse it).
func (s *server) syncAndWait(r *http.Request, gen int64, wait time.Duration) *core.WaitResult {
	// Sync runs to its end even when the client goes away (an apply is
	// never cut short); the wait is the client's and ends with it.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), applyTimeout)
	defer cancel()
	s.cluster.Sync(ctx)
	res := s.cluster.Wait(r.Context(), gen, wait)
	if res.Applied == nil {
		res.Applied = []string{}
	}
	if res.Refused == nil {
		res.Refused = []core.NodeStatus{}
	}
	if res.Pending == nil {
		res.Pending = []string{}
	}
	return &res
}

func setNodeHeaders(h http.Header, res *core.WaitResult) {
	refused := make([]string, len(res.Refused))
	for i := range res.Refused {
		refused[i] = res.Refused[i].Name
	}
	h.Set(hdrNodesApplied, strings.Join(res.Applied, ","))
	h.Set(hdrNodesRefused, strings.Join(refused, ","))
	h.Set(hdrNodesPending, strings.Join(res.Pending, ","))
}

// ClusterInfo is the answer of GET /api/v1/cluster.
type ClusterInfo struct {
	// Store is the configuration store as this node sees it ("dir" on a
	// single node: always connected).
	Store core.StoreState `json:"store"`
	// Self is the node that answers.
	Self core.NodeIdentity `json:"self"`
	// Generation is the store's current generation as this node knows it.
	Generation int64 `json:"generation" example:"42"`
	// Nodes are the live nodes, sorted by name (on a single node, itself).
	Nodes []core.NodeStatus `json:"nodes"`
}

// getCluster godoc
//
//	@Summary		The nodes sharing this configuration
//	@Description	The configuration store (kind dir on a single node, etcd in a cluster; connected, since when, the newest generation seen), the node that answers, and every live node: its running generation and its state as the answering node works it out (in_sync: runs the store's generation; applying: behind it; refused: refused it, with the generation it refused and why; starting: its first apply not done; unreachable: it has not renewed its entry for longer than its renew_ms, stopped, killed or cut from the store, until its lease expires and it leaves the list). On a single node the list holds this node only. While the store is unreachable, the list is the last one seen and the answer carries X-Spliced-Stale: true.
//	@Tags			cluster
//	@Produce		json
//	@Success		200	{object}	ClusterInfo
//	@Failure		503	{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/cluster [get]
func (s *server) getCluster(w http.ResponseWriter, r *http.Request) error {
	cur := s.store.Current()
	out := ClusterInfo{Store: s.storeState(), Self: s.node, Generation: cur.Generation}
	if s.cluster == nil {
		out.Nodes = []core.NodeStatus{s.localNode()}
	} else {
		ctx, cancel := context.WithTimeout(r.Context(), nodesTimeout)
		nodes, err := s.cluster.Nodes(ctx)
		cancel()
		if err != nil && len(nodes) == 0 {
			return err
		}
		out.Nodes = nodes
		if out.Nodes == nil {
			out.Nodes = []core.NodeStatus{}
		}
	}
	w.Header().Set("X-Spliced-Generation", strconv.FormatInt(cur.Generation, 10))
	return writeValue(w, http.StatusOK, out)
}

// storeState is the configuration store as this node sees it.
func (s *server) storeState() core.StoreState {
	if s.cluster != nil {
		return s.cluster.StoreState()
	}
	st := core.StoreState{Kind: "dir", Connected: true, Since: s.started}
	if c := s.store.Current(); c != nil {
		st.Generation = c.Generation
	}
	return st
}

// localNode is this node's status on a single node: the store's current
// generation becomes current only once the data plane runs it, so the two
// differ only when the data plane could not run the stored config at start.
func (s *server) localNode() core.NodeStatus {
	rt := s.core.Runtime()
	ns := core.NodeStatus{NodeIdentity: s.node, AdminAddress: s.addr, RunningGeneration: rt.Generation,
		State: core.NodeInSync, Version: s.version, Started: s.started, Updated: time.Now()}
	if cur := s.store.Current().Generation; rt.Generation != cur {
		ns.State, ns.RefusedGeneration = core.NodeRefused, cur
		ns.Error = "the data plane does not run generation " + strconv.FormatInt(cur, 10) + " (see the server log)"
	}
	return ns
}

// staleReads marks the answers of /api/v1 reads served while the cluster
// store is unreachable: this node's copy, maybe older than the store's.
func (s *server) staleReads(next http.Handler) http.Handler {
	if s.cluster == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if (r.Method == http.MethodGet || r.Method == http.MethodHead) && strings.HasPrefix(r.URL.Path, base+"/") &&
			!s.cluster.StoreState().Connected {
			w.Header().Set(hdrStale, "true")
		}
		next.ServeHTTP(w, r)
	})
}

// clusterCollector exposes the store's reachability and the nodes'
// running generations (from Cluster.Nodes, the list the node keeps).
type clusterCollector struct {
	s                               *server
	connected, nodes, rg, adoptions *prometheus.Desc
}

func newClusterCollector(s *server) *clusterCollector {
	return &clusterCollector{s: s,
		connected: prometheus.NewDesc("spliced_store_connected",
			"1 while the configuration store is reachable (always on a single node), else 0.", nil, nil),
		nodes: prometheus.NewDesc("spliced_cluster_nodes",
			"Live nodes sharing the configuration (1 on a single node).", nil, nil),
		rg: prometheus.NewDesc("spliced_cluster_node_running_generation",
			"Generation each live node's data plane runs.", []string{"node"}, nil),
		adoptions: prometheus.NewDesc("spliced_cluster_adoptions_total",
			"Generations other nodes wrote that this node adopted, by how: from the change carried with the write (delta), "+
				"by loading the whole document (document), and changes it could not use (delta_refused: the document was loaded instead).",
			[]string{"how"}, nil),
	}
}

func (cc *clusterCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- cc.connected
	ch <- cc.nodes
	ch <- cc.rg
	ch <- cc.adoptions
}

func (cc *clusterCollector) Collect(ch chan<- prometheus.Metric) {
	s := cc.s
	if s.store == nil || s.store.Current() == nil {
		return
	}
	st := s.storeState()
	ch <- prometheus.MustNewConstMetric(cc.connected, prometheus.GaugeValue, boolf(st.Connected))
	if a := st.Adoptions; a != nil {
		ch <- prometheus.MustNewConstMetric(cc.adoptions, prometheus.CounterValue, float64(a.Deltas), "delta")
		ch <- prometheus.MustNewConstMetric(cc.adoptions, prometheus.CounterValue, float64(a.Documents), "document")
		ch <- prometheus.MustNewConstMetric(cc.adoptions, prometheus.CounterValue, float64(a.RefusedDeltas), "delta_refused")
	}
	var nodes []core.NodeStatus
	if s.cluster == nil {
		nodes = []core.NodeStatus{s.localNode()}
	} else {
		ctx, cancel := context.WithTimeout(context.Background(), nodesTimeout)
		nodes, _ = s.cluster.Nodes(ctx) // the last list seen when the store is unreachable
		cancel()
	}
	ch <- prometheus.MustNewConstMetric(cc.nodes, prometheus.GaugeValue, float64(len(nodes)))
	for i := range nodes {
		ch <- prometheus.MustNewConstMetric(cc.rg, prometheus.GaugeValue, float64(nodes[i].RunningGeneration), nodes[i].Name)
	}
}

// adoptions finds the generations a cluster node adopted from the store
// (other nodes' writes), for the config events of its streams: the stats
// tick compares the store's current with the last config told about. Its
// own writes tell theirs (told), with their actor. Nil-safe: a single
// node has none.
type adoptions struct {
	store *config.Store

	mu   sync.Mutex
	seen *config.Config // the newest config told about (or the start)
}

// reset starts from the store's current config (a first subscriber: what
// was adopted before it came is in what it reads).
func (a *adoptions) reset() {
	if a == nil {
		return
	}
	a.mu.Lock()
	a.seen = a.store.Current()
	a.mu.Unlock()
}

// told records a config this node's write made.
func (a *adoptions) told(c *config.Config) {
	if a == nil || c == nil {
		return
	}
	a.mu.Lock()
	if a.seen == nil || c.Generation > a.seen.Generation {
		a.seen = c
	}
	a.mu.Unlock()
}

// next is the event of a generation adopted since the last call, if any:
// its plan from the config told about before (one Diff per adopted
// change, not per tick).
func (a *adoptions) next() (ConfigEvent, bool) {
	if a == nil {
		return ConfigEvent{}, false
	}
	cur := a.store.Current()
	a.mu.Lock()
	prev := a.seen
	if prev != nil && cur.Generation <= prev.Generation {
		a.mu.Unlock()
		return ConfigEvent{}, false
	}
	a.seen = cur
	a.mu.Unlock()
	if prev == nil {
		return ConfigEvent{}, false
	}
	plan := config.Diff(prev, cur)
	if plan.Items == nil {
		plan.Items = []config.PlanItem{}
	}
	return ConfigEvent{Generation: cur.Generation, Plan: plan}, true
}
