package cluster

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// Timing of a node. Each says what it buys.
const (
	// DefaultLeaseTTL is how long a node's key outlives the node (killed,
	// or cut from etcd): short enough that Wait stops waiting for a dead
	// node within seconds, long enough that an etcd leader election (about
	// one second) does not drop every node.
	DefaultLeaseTTL = 10 * time.Second
	// probeEvery spaces the reads of P/current that tell whether etcd is
	// reachable and catch up what a watch missed (etcd back, compaction).
	probeEvery = time.Second
	// renewEvery is how often a node rewrites its key when nothing else
	// did (every other probe; the key's "updated"): the nodes that list
	// it tell a node that stopped renewing (SIGSTOPped, killed, cut from
	// etcd) from a live one within seconds, not at its lease's expiry.
	renewEvery = 2 * probeEvery
	// renewWithin, published in the key as renew_ms, is the longest a
	// running node goes without renewing its key: renewEvery, and two
	// probes of slack (one waiting out an etcd election, one for the
	// lister's view); past it the node is listed as unreachable. Well
	// under the lease's TTL, so that the state is seen before the key goes.
	renewWithin = 4 * time.Second
	// probeTimeout bounds one probe: the client waits for a connection
	// (WaitForReady) rather than failing, so an unreachable etcd would
	// otherwise hold the probe forever.
	probeTimeout = 900 * time.Millisecond
	// opTimeout bounds the other requests of the node (registration,
	// publishing its status, listing the nodes).
	opTimeout = 2 * time.Second
	// registerTimeout bounds the first registration in StartNode (once a
	// quick read found etcd answering): past it the node starts
	// unregistered and registers when etcd answers.
	registerTimeout = 5 * time.Second
	// applyingAfter is how long an Apply runs before the node publishes
	// that it is applying.
	applyingAfter = 100 * time.Millisecond
	// maxErrorLen bounds the error a node publishes for a refusal.
	maxErrorLen = 500
)

// InstanceFile is the file in the node's state directory that holds its
// instance id: a node restarted on the same state directory takes its
// own key over at once, another node claiming the same name is refused.
const InstanceFile = "node-instance"

// ErrNodeNameTaken is a node name held by another live node.
var ErrNodeNameTaken = errors.New("node name held by another live node")

// ConfigStore is what a Node needs of the configuration store
// (*config.Store): its current document, and adopting the storage's newer
// one when it does not hold generation gen yet (RefreshIfBehind).
type ConfigStore interface {
	Current() *config.Config
	RefreshIfBehind(ctx context.Context, gen int64) (bool, error)
}

// AppliedCache keeps the last generation this node applied, so that a node
// restarted while etcd is down runs it (EtcdStorage.RememberApplied), and
// seeds a store found without a document (EtcdStorage.SeedEmpty).
type AppliedCache interface {
	RememberApplied(ctx context.Context, c *config.Config) error
	SeedEmpty(ctx context.Context, node string, c *config.Config) (int64, error)
}

var _ ConfigStore = (*config.Store)(nil)

// NodeOptions configure StartNode.
type NodeOptions struct {
	Client *clientv3.Client // shared with the EtcdStorage; not closed by the node
	Prefix string           // the store's key prefix P (no trailing slash)
	Store  ConfigStore
	// Storage remembers each applied generation (nil: not remembered).
	Storage AppliedCache
	Self    core.NodeIdentity
	// AdminAddress and Version are published for the UI.
	AdminAddress, Version string
	// StateDir keeps the instance id (InstanceFile); "" → a new id each
	// start (tests).
	StateDir string
	// Apply validates and applies the node's effective config (the store's
	// document for this node: its section, its address); an error keeps
	// the running generation and is published as the refusal.
	Apply func(ctx context.Context, c *config.Config) error
	// Running is the generation the data plane runs.
	Running func() int64
	// OnTokens receives P/tokens at start and on each change (nil: the key
	// was deleted), to mirror it into the node's tokens.json. Called from
	// the node's goroutine, one call at a time.
	OnTokens func(doc []byte)
	Log      *slog.Logger
	// LeaseTTL of the node key (0: DefaultLeaseTTL; etcd rounds it up to
	// its minimum, about 2 s).
	LeaseTTL time.Duration
}

// Node is this process as a member of a cluster sharing one configuration
// through etcd: it keeps its key P/nodes/<name> alive on a lease, watches
// P/current and applies each newer generation, publishes what it runs, and
// implements core.Cluster for the admin API. Safe from any goroutine.
type Node struct {
	o        NodeOptions
	cli      *clientv3.Client
	log      *slog.Logger
	key      string // P/nodes/<name>
	current  string // P/current
	tokens   string // P/tokens
	nodesPfx string // P/nodes/
	instance string
	started  time.Time

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
	closed sync.Once

	// sem holds the apply step: one at a time (watch, probe or Sync).
	sem  chan struct{}
	kick chan struct{} // wakes the worker: a newer generation may be there
	lost chan clientv3.LeaseID

	seen atomic.Int64 // generation P/current held when last read (noteCurrent)
	// empty is set by a probe that found no P/current while this node
	// runs a generation: the worker seeds the store from its cache.
	empty   atomic.Bool
	seedErr string       // the last seeding failure logged (worker)
	probes  atomic.Int64 // probes made (tests wait on it)
	// How the generations this node did not write came to its Store
	// (StoreState.Adoptions): from the change in P/current (deltas), by
	// loading the document (documents), and changes that could not be
	// used (refusedDeltas: the document was loaded instead).
	deltas, documents, refusedDeltas atomic.Int64

	mu         sync.Mutex
	lease      clientv3.LeaseID // 0: not registered
	staleLease clientv3.LeaseID // the lease lost: revoked once registered again
	registered bool             // registered once: the key on another lease with this instance is a copy's
	badCurrent string           // the damaged value of P/current last logged ("": none)
	seenMod    int64            // mod revision of the P/current value seen is from
	change     *deltaNote       // the change P/current carried at seenMod (nil: none)
	leaseStop  context.CancelFunc
	starting   bool  // no apply step done yet
	applying   bool  // an Apply is running
	refusedGen int64 // newest generation refused (or that failed to load)
	refusedErr string
	connected  bool
	since      time.Time
	nodes      []core.NodeStatus // last list seen, states worked out (keep)
	keptRev    int64             // revision nodes was read at
	renewals   map[string]renewal

	pubMu   sync.Mutex // orders the puts of the node key
	lastPub core.NodeStatus
	pubAt   time.Time   // when the key was last put (renewed)
	dirty   atomic.Bool // the last publish failed: the probe retries it

	// Owned by the loop goroutine.
	tokensRev int64  // mod revision of P/tokens last handed to OnTokens
	tokensAt  int64  // revision that document was read at (watch events up to it are in it)
	regErr    string // the last registration failure logged
}

// renewal is when the node that lists a key saw it renewed: its mod
// revision, and the time this node first read that revision (its own
// clock: another node's "updated" is not compared with it, but for a key
// seen for the first time).
type renewal struct {
	mod int64
	at  time.Time
}

// nodeRecord is the value of P/nodes/<name>.
type nodeRecord struct {
	core.NodeStatus
	Instance string `json:"instance"`
}

// ValidNodeName says why s cannot name a node (nil when it can): the rules
// of object names, as it becomes the key P/nodes/<name> and the key of the
// config's "nodes" section.
func ValidNodeName(s string) error {
	if !config.ValidName(s) {
		return fmt.Errorf("node name %q: 1 to %d characters of a-z, 0-9, '-' and '_', starting and ending with a letter or digit", s, config.MaxNameLen)
	}
	return nil
}

// StartNode registers this node and starts watching and applying
// (Register, then Start). It fails when the name is invalid or held by
// another live node (ErrNodeNameTaken); etcd unreachable is not a
// failure: the node runs what it runs and registers when etcd is back.
func StartNode(ctx context.Context, o NodeOptions) (*Node, error) {
	if o.Store == nil || o.Apply == nil || o.Running == nil {
		return nil, errors.New("cluster node: Store, Apply and Running are required")
	}
	n, err := Register(ctx, o)
	if err != nil {
		return nil, err
	}
	n.Start(o.Store, o.Apply, o.Running)
	return n, nil
}

// Register takes this node's name in the cluster (its key, on its lease,
// in state starting) and nothing else: a process calls it before it opens
// anything (its admin address, its binds), so that a name another live
// node holds (ErrNodeNameTaken) refuses the start before a listener is
// opened, and a second process with the same name started meanwhile is
// refused in its turn. Store, Apply and Running may be nil: Start gives
// them, and the node watches and applies from then on. etcd unreachable
// is not a failure: the node registers when etcd is back (once started).
// Close releases the name of a node that is never started.
func Register(ctx context.Context, o NodeOptions) (*Node, error) {
	switch {
	case o.Client == nil:
		return nil, errors.New("cluster node: Client is required")
	case strings.HasSuffix(o.Prefix, "/"):
		return nil, fmt.Errorf("cluster node: prefix %q ends with '/'", o.Prefix)
	}
	if err := ValidNodeName(o.Self.Name); err != nil {
		return nil, err
	}
	if o.LeaseTTL <= 0 {
		o.LeaseTTL = DefaultLeaseTTL
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	instance, err := loadInstance(o.StateDir)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	n := &Node{
		o:        o,
		cli:      o.Client,
		log:      o.Log.With("node", o.Self.Name),
		key:      o.Prefix + "/nodes/" + o.Self.Name,
		current:  o.Prefix + "/current",
		tokens:   o.Prefix + "/tokens",
		nodesPfx: o.Prefix + "/nodes/",
		instance: instance,
		started:  now,
		sem:      make(chan struct{}, 1),
		kick:     make(chan struct{}, 1),
		lost:     make(chan clientv3.LeaseID, 4),
		starting: true,
		since:    now,
	}
	n.ctx, n.cancel = context.WithCancel(context.Background())

	// One quick read first: a node started while etcd is down (from its
	// cache) must not wait registerTimeout for a Grant that cannot come.
	qctx, cancel := context.WithTimeout(ctx, probeTimeout)
	_, err = n.cli.Get(qctx, n.current, clientv3.WithCountOnly())
	cancel()
	if err == nil {
		rctx, cancel := context.WithTimeout(ctx, registerTimeout)
		err = n.register(rctx)
		cancel()
	}
	switch {
	case errors.Is(err, ErrNodeNameTaken):
		n.cancel()
		return nil, err
	case err != nil:
		n.log.Warn("cluster node: not registered yet, etcd unreachable; running the local generation", "err", err)
	default:
		n.setConnected(true, nil)
	}
	return n, nil
}

// Start makes a registered node (Register) watch the store and apply its
// generations: store is the configuration store, apply applies a
// generation to the data plane, running is the generation it runs (the
// NodeOptions of the same names). Called once, before any other method
// but Close.
func (n *Node) Start(store ConfigStore, apply func(ctx context.Context, c *config.Config) error, running func() int64) {
	n.o.Store, n.o.Apply, n.o.Running = store, apply, running
	n.wake() // the first step: starting → in_sync (or applying)
	n.wg.Add(2)
	go n.loop()
	go n.worker()
}

// loadInstance reads the instance id kept in dir, creating it if absent.
func loadInstance(dir string) (string, error) {
	var b [16]byte
	_, _ = rand.Read(b[:]) // never fails (crypto/rand)
	id := hex.EncodeToString(b[:])
	if dir == "" {
		return id, nil
	}
	path := filepath.Join(dir, InstanceFile)
	data, err := os.ReadFile(path)
	switch {
	case err == nil && len(strings.TrimSpace(string(data))) > 0:
		return strings.TrimSpace(string(data)), nil
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		return "", fmt.Errorf("cluster node: %w", err)
	}
	if err := config.WriteFileAtomic(dir, InstanceFile, []byte(id+"\n"), nil); err != nil {
		return "", fmt.Errorf("cluster node: keep the instance id: %w", err)
	}
	return id, nil
}

// Close stops watching and applying and revokes the lease: the node's key
// goes at once (a node that dies instead leaves after the lease's TTL).
// The client is not closed.
func (n *Node) Close() error {
	var err error
	n.closed.Do(func() {
		n.cancel()
		n.wg.Wait()
		// A Sync applying now ends before the lease goes; a later one
		// applies nothing (it finds the node closed).
		n.sem <- struct{}{}
		n.release()
		n.mu.Lock()
		lease := n.lease
		n.lease = 0
		n.mu.Unlock()
		if lease == 0 {
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		if _, rerr := n.cli.Revoke(ctx, lease); rerr != nil {
			err = fmt.Errorf("cluster node: revoke the lease (the key goes after its TTL): %w", rerr)
		}
	})
	return err
}

// register grants a lease and takes the node key with it: the key is
// absent, or held by an earlier run of this node (same instance: taken
// over at once). Another instance holding it → ErrNodeNameTaken.
func (n *Node) register(ctx context.Context) error {
	g, err := n.cli.Grant(ctx, int64((n.o.LeaseTTL+time.Second-1)/time.Second))
	if err != nil {
		return fmt.Errorf("%w: grant a lease: %v", config.ErrUnavailable, err)
	}
	revoke := func() {
		rctx, cancel := context.WithTimeout(context.Background(), opTimeout)
		defer cancel()
		_, _ = n.cli.Revoke(rctx, g.ID) // best effort: it expires anyway
	}
	st := n.status()
	rec := nodeRecord{NodeStatus: st, Instance: n.instance}
	rec.Updated = time.Now().UTC()
	val, err := json.Marshal(rec)
	if err != nil {
		revoke()
		return err
	}
	put := clientv3.OpPut(n.key, string(val), clientv3.WithLease(g.ID))
	took := false
	for attempt := 0; attempt < 5 && !took; attempt++ {
		resp, err := n.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.CreateRevision(n.key), "=", 0)).
			Then(put).Else(clientv3.OpGet(n.key)).Commit()
		if err != nil {
			revoke()
			return fmt.Errorf("%w: register %s: %v", config.ErrUnavailable, n.key, err)
		}
		if resp.Succeeded {
			took = true
			break
		}
		kvs := resp.Responses[0].GetResponseRange().Kvs
		if len(kvs) == 0 {
			continue // gone meanwhile
		}
		var rec nodeRecord
		err = json.Unmarshal(kvs[0].Value, &rec)
		switch {
		case kvs[0].Lease == 0:
			// On no lease: not a node's key (put by hand). It does
			// not hold the name.
			n.log.Warn("cluster node: taking over a node key that is on no lease (not written by a node)", "key", n.key)
		case err != nil || rec.Instance != n.instance:
			revoke()
			return fmt.Errorf("%w: %q is registered by instance %s (address %s, admin %s, since %s); give this node another --node-name, or stop that one",
				ErrNodeNameTaken, n.o.Self.Name, rec.Instance, rec.Address, rec.AdminAddress, rec.Started.UTC().Format(time.RFC3339))
		case n.isClone(clientv3.LeaseID(kvs[0].Lease)):
			revoke()
			return fmt.Errorf("%w: %q is registered by another process with this node's instance id (address %s, admin %s, since %s): "+
				"a copy of this node's state directory (remove its %s there) or another node with the same --node-name",
				ErrNodeNameTaken, n.o.Self.Name, rec.Address, rec.AdminAddress, rec.Started.UTC().Format(time.RFC3339), InstanceFile)
		}
		// An earlier run of this node, or a key on no lease: take it
		// over (the earlier run's lease expires unused).
		resp, err = n.cli.Txn(ctx).
			If(clientv3.Compare(clientv3.ModRevision(n.key), "=", kvs[0].ModRevision)).
			Then(put).Commit()
		if err != nil {
			revoke()
			return fmt.Errorf("%w: register %s: %v", config.ErrUnavailable, n.key, err)
		}
		took = resp.Succeeded
	}
	if !took {
		revoke()
		return fmt.Errorf("%w: register %s: the key keeps changing", config.ErrUnavailable, n.key)
	}

	kctx, kcancel := context.WithCancel(n.ctx)
	ch, err := n.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		kcancel()
		revoke()
		return fmt.Errorf("%w: keep the lease alive: %v", config.ErrUnavailable, err)
	}
	n.mu.Lock()
	old, oldStop := n.lease, n.leaseStop
	if old == 0 {
		old = n.staleLease
	}
	n.lease, n.leaseStop, n.staleLease, n.registered = g.ID, kcancel, 0, true
	n.mu.Unlock()
	if oldStop != nil {
		oldStop()
	}
	if old != 0 {
		// The old lease may still be alive (etcd extends leases across
		// a restart): it holds nothing now.
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		_, _ = n.cli.Revoke(rctx, old)
		cancel()
	}
	n.wg.Add(1)
	go func() {
		defer n.wg.Done()
		for range ch { // drained until the lease is lost or the node stops
		}
		if n.ctx.Err() == nil {
			select {
			case n.lost <- g.ID:
			default:
			}
		}
	}()
	n.pubMu.Lock()
	n.lastPub, n.pubAt = st, time.Now()
	n.dirty.Store(false)
	n.pubMu.Unlock()
	n.log.Info("cluster node: registered", "key", n.key, "lease", fmt.Sprintf("%x", g.ID))
	n.publish() // what changed since st was taken
	return nil
}

// isClone says whether this node's key, found with this node's instance
// on lease, is another process's: this one registered already, and lease
// is not the one it lost. (At the first registration it is an earlier run
// of this node, killed: taken over.)
func (n *Node) isClone(lease clientv3.LeaseID) bool {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.registered && lease != n.staleLease && lease != n.lease
}

// leaseID is the lease of the node key (0: not registered).
func (n *Node) leaseID() clientv3.LeaseID {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.lease
}

// loop watches P/current and P/tokens and probes etcd every probeEvery:
// the probe says whether etcd is reachable, catches up what the watch
// missed (etcd back, compaction: a re-read, never a replay), restarts a
// broken watch from the revision it read, retries a failed publish and
// re-registers a lost lease.
func (n *Node) loop() {
	defer n.wg.Done()
	tick := time.NewTicker(probeEvery)
	defer tick.Stop()
	var (
		curCh, tokCh clientv3.WatchChan
		// watchReady brings the channels of a watch being created:
		// Watch blocks until etcd answers, and the loop must not.
		watchReady chan [2]clientv3.WatchChan
		stopWatch  = func() {}
		needProbe  = true
	)
	defer func() { stopWatch() }()
	for {
		if needProbe {
			needProbe = false
			if rev, ok := n.probe(); ok && curCh == nil && watchReady == nil {
				stopWatch()
				wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(n.ctx))
				stopWatch = cancel
				ready := make(chan [2]clientv3.WatchChan, 1)
				watchReady = ready
				n.wg.Add(1)
				go func() {
					defer n.wg.Done()
					ready <- [2]clientv3.WatchChan{
						n.cli.Watch(wctx, n.current, clientv3.WithRev(rev+1)),
						n.cli.Watch(wctx, n.tokens, clientv3.WithRev(rev+1)),
					}
				}()
			}
		}
		select {
		case <-n.ctx.Done():
			return
		case <-tick.C:
			needProbe = true
		case chans := <-watchReady:
			curCh, tokCh, watchReady = chans[0], chans[1], nil
		case id := <-n.lost:
			if id == n.leaseID() {
				n.log.Warn("cluster node: lease lost (etcd unreachable longer than its TTL, or revoked); registering again")
				n.mu.Lock()
				n.lease, n.staleLease = 0, id
				n.mu.Unlock()
				needProbe = true
			}
		case wr, ok := <-curCh:
			if !ok || n.watchBroken(wr) {
				stopWatch()
				curCh, tokCh, needProbe = nil, nil, true
				continue
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypePut {
					n.noteCurrent(ev.Kv.Value, ev.Kv.ModRevision, false)
				}
			}
		case wr, ok := <-tokCh:
			if !ok || n.watchBroken(wr) {
				stopWatch()
				curCh, tokCh, needProbe = nil, nil, true
				continue
			}
			for _, ev := range wr.Events {
				n.tokensEvent(ev)
			}
		}
	}
}

// watchBroken reports whether wr ends its watch (compacted, canceled, no
// leader): the probe then re-reads and restarts it.
func (n *Node) watchBroken(wr clientv3.WatchResponse) bool {
	if err := wr.Err(); err != nil {
		if n.ctx.Err() == nil {
			n.log.Info("cluster node: watch ended; re-reading the store", "err", err)
		}
		return true
	}
	return false
}

// tokensEvent hands a change of P/tokens from the watch to OnTokens.
// Events older than what a read handed already are skipped: the probe may
// read a newer document while the watch still holds older events.
func (n *Node) tokensEvent(ev *clientv3.Event) {
	if ev.Kv.ModRevision <= n.tokensAt {
		return
	}
	n.tokensRev, n.tokensAt = ev.Kv.ModRevision, ev.Kv.ModRevision
	if ev.Type == clientv3.EventTypeDelete {
		n.onTokens(nil)
	} else {
		n.onTokens(ev.Kv.Value)
	}
}

// tokensRead hands P/tokens as a read at revision at found it (doc nil:
// absent; mod its mod revision) to OnTokens.
func (n *Node) tokensRead(doc []byte, mod, at int64) {
	n.tokensRev, n.tokensAt = mod, at
	n.onTokens(doc)
}

func (n *Node) onTokens(doc []byte) {
	if n.o.OnTokens != nil {
		n.o.OnTokens(doc)
	}
}

// noteCurrent takes the value of P/current at mod revision mod, read now
// (fresh: a linearizable read, the probe's or Sync's) or from the watch
// (taken only when newer than the last read). The store's generation is
// the last value read, not the highest ever read: a value put by hand and
// then corrected, or etcd restored, goes back (its revisions too: a fresh
// read resets the order). A refusal of a generation above it is dropped:
// that generation is no longer the store's. A newer generation than the
// data plane runs wakes the worker.
func (n *Node) noteCurrent(v []byte, mod int64, fresh bool) {
	var cur current
	err := json.Unmarshal(v, &cur)
	gen := cur.Generation
	n.mu.Lock()
	if !fresh && mod <= n.seenMod { // older than what was read already
		n.mu.Unlock()
		return
	}
	n.seenMod = mod
	n.change = nil
	if es, ok := n.o.Storage.(*EtcdStorage); ok && err == nil && gen > 0 {
		es.wentBack(currentKey{gen: gen, mod: mod})
	}
	if err == nil && cur.Delta != nil {
		n.change = &deltaNote{gen: gen, mod: mod, base: cur.Base, baseRev: cur.BaseRev, delta: cur.Delta}
	}
	said := err != nil && n.badCurrent == string(v)
	n.badCurrent = ""
	if err != nil {
		n.badCurrent = string(v)
	} else {
		n.seen.Store(gen)
		if gen < n.refusedGen {
			n.refusedGen, n.refusedErr = 0, ""
		}
	}
	n.mu.Unlock()
	if err != nil {
		if !said { // once per damaged value, not at each probe
			n.log.Warn("cluster node: unreadable current", "key", n.current, "err", err)
		}
		return
	}
	if gen > n.o.Running() {
		n.wake()
	}
}

func (n *Node) wake() {
	select {
	case n.kick <- struct{}{}:
	default:
	}
}

// probe reads P/current (and the mod revision of P/tokens, and the node
// key) in one linearizable request: its success is what "connected"
// means. It returns the revision read.
func (n *Node) probe() (int64, bool) {
	defer n.probes.Add(1)
	ctx, cancel := context.WithTimeout(n.ctx, probeTimeout)
	defer cancel()
	resp, err := n.cli.Txn(ctx).Then(
		clientv3.OpGet(n.current),
		clientv3.OpGet(n.tokens, clientv3.WithKeysOnly()),
		clientv3.OpGet(n.key),
		clientv3.OpGet(n.nodesPfx, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		if n.ctx.Err() == nil {
			n.setConnected(false, err)
		}
		return 0, false
	}
	n.setConnected(true, nil)
	if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
		n.noteCurrent(kvs[0].Value, kvs[0].ModRevision, true)
	} else if n.o.Storage != nil && n.o.Running() > 0 {
		n.empty.Store(true) // etcd wiped, or restored from a snapshot older than the cluster
		n.wake()
	}
	if store := n.o.Store.Current(); store != nil && store.Generation > n.o.Running() {
		n.wake()
	}
	// P/tokens changed since the last document handed to OnTokens:
	// the watch missed it.
	switch kvs := resp.Responses[1].GetResponseRange().Kvs; {
	case len(kvs) == 0 && n.tokensRev != 0:
		n.tokensRead(nil, 0, resp.Header.Revision)
	case len(kvs) > 0 && kvs[0].ModRevision != n.tokensRev:
		gctx, cancel := context.WithTimeout(n.ctx, opTimeout)
		r, err := n.cli.Get(gctx, n.tokens)
		cancel()
		if err == nil && len(r.Kvs) > 0 { // else the next probe retries
			n.tokensRead(r.Kvs[0].Value, r.Kvs[0].ModRevision, r.Header.Revision)
		}
	default: // what OnTokens got is what P/tokens holds at this revision
		n.tokensAt = resp.Header.Revision
	}
	// The node key gone, or not on this node's lease (deleted or put by
	// hand): publishing finds it (and registers again) at once, not at
	// the node's next status change.
	if lease := n.leaseID(); lease != 0 {
		if kvs := resp.Responses[2].GetResponseRange().Kvs; len(kvs) == 0 || clientv3.LeaseID(kvs[0].Lease) != lease {
			n.dirty.Store(true)
		}
	}
	if n.leaseID() == 0 {
		rctx, cancel := context.WithTimeout(n.ctx, opTimeout)
		err := n.register(rctx)
		cancel()
		switch msg := fmt.Sprint(err); {
		case err == nil || n.ctx.Err() != nil:
			n.regErr = ""
		case msg == n.regErr: // said already: once, not every second
		case errors.Is(err, ErrNodeNameTaken):
			n.regErr = msg
			n.log.Error("cluster node: cannot register: this node is not listed and writes do not wait for it", "err", err)
		default:
			n.regErr = msg
			n.log.Warn("cluster node: cannot register yet", "err", err)
		}
	}
	// The list Nodes answers with while etcd is unreachable: the nodes
	// as they were at most a probe before it went, not as the last
	// GET /api/v1/cluster or write happened to list them.
	n.keep(resp.Responses[3].GetResponseRange().Kvs, resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision)
	n.publish() // a failed publish again, or the key's renewal when due
	return resp.Header.Revision, true
}

// setConnected records whether etcd answers, and since when.
func (n *Node) setConnected(ok bool, err error) {
	n.mu.Lock()
	changed := n.connected != ok
	if changed {
		n.connected, n.since = ok, time.Now()
	}
	n.mu.Unlock()
	switch {
	case changed && ok:
		n.log.Info("cluster node: etcd reachable")
	case changed:
		n.log.Warn("cluster node: etcd unreachable; running the last applied generation", "err", err)
	}
}

// worker runs the apply step each time the loop finds a newer generation.
func (n *Node) worker() {
	defer n.wg.Done()
	for {
		select {
		case <-n.ctx.Done():
			return
		case <-n.kick:
			if n.acquire(n.ctx) {
				if n.empty.Swap(false) {
					n.seed()
				}
				n.step()
				n.release()
			}
		}
	}
}

// acquire takes the apply step's semaphore, false when ctx ends first or
// the node is closed (a select takes any ready case: the semaphore may be
// taken after the node's cancel).
func (n *Node) acquire(ctx context.Context) bool {
	select {
	case n.sem <- struct{}{}:
		if n.ctx.Err() != nil {
			n.release()
			return false
		}
		return true
	case <-ctx.Done():
		return false
	}
}

func (n *Node) release() { <-n.sem }

// step is the apply step (sem held): adopt the store's newer document,
// apply it if this node runs an older one and has not refused it, publish
// the outcome. Generations in between are skipped: the newest is applied.
func (n *Node) step() {
	defer n.publish()
	defer func() {
		n.mu.Lock()
		n.starting = false
		n.mu.Unlock()
	}()
	cur := n.o.Store.Current()
	if seen := n.seen.Load(); cur == nil || seen > cur.Generation {
		n.mu.Lock()
		refused := n.refusedGen
		n.mu.Unlock()
		if seen != refused && !n.adoptChange(seen) {
			changed, err := n.o.Store.RefreshIfBehind(n.ctx, seen)
			if changed {
				n.documents.Add(1)
			}
			if err != nil {
				if errors.Is(err, config.ErrUnavailable) || n.ctx.Err() != nil {
					n.log.Info("cluster node: cannot load the newer generation yet", "generation", seen, "err", err)
					return
				}
				// A document this node cannot load (another
				// version wrote it): a refusal, not retried.
				n.refuse(seen, fmt.Errorf("load generation %d: %w", seen, err))
				return
			}
		}
		cur = n.o.Store.Current()
	}
	if cur == nil || cur.Generation <= n.o.Running() {
		return
	}
	n.mu.Lock()
	if cur.Generation == n.refusedGen {
		n.mu.Unlock()
		return // refused already: a newer write is needed
	}
	n.applying = true
	n.mu.Unlock()
	// An apply that takes a while is published as one (a 10 000-server
	// config takes hundreds of ms); a quick one costs one put, not two.
	slow := time.AfterFunc(applyingAfter, n.publish)
	err := n.o.Apply(n.ctx, cur)
	slow.Stop()
	n.mu.Lock()
	n.applying = false
	n.mu.Unlock()
	if err != nil {
		n.refuse(cur.Generation, err)
		return
	}
	n.log.Info("cluster node: applied", "generation", cur.Generation)
	// Published before it is cached: the write waiting for this node
	// need not wait for the cache's encoding and fsync too.
	n.publish()
	if n.o.Storage != nil {
		if err := n.o.Storage.RememberApplied(n.ctx, cur); err != nil {
			n.log.Warn("cluster node: cannot cache the applied generation", "generation", cur.Generation, "err", err)
		}
	}
}

// adoptChange makes generation seen, the store's, the Store's current from
// the change P/current carried (delta.go), when the Store holds that
// change's base; false when it did not (no change, the node behind, a
// change it refused: the caller loads the document).
func (n *Node) adoptChange(seen int64) bool {
	n.mu.Lock()
	d := n.change
	n.mu.Unlock()
	es, ok := n.o.Storage.(*EtcdStorage)
	st, ok2 := n.o.Store.(advancer)
	if d == nil || d.gen != seen || !ok || !ok2 {
		return false
	}
	done, err := es.adoptDelta(st, *d)
	switch {
	case err != nil:
		n.refusedDeltas.Add(1)
		n.log.Warn("cluster node: the change carried with the generation does not apply; loading the document", "generation", seen, "err", oneLine(err.Error()))
		return false
	case done:
		n.deltas.Add(1)
	}
	return done
}

// seed makes the Store's current document (the newest this node knows,
// even one it refused) the store's again, as the next generation, when the
// store holds no document (SeedEmpty: never over one; a node that seeded
// it first wins). The watch then brings the new generation, which every
// node adopts.
func (n *Node) seed() {
	_, err := n.o.Storage.SeedEmpty(n.ctx, n.o.Self.Name, n.o.Store.Current())
	if err == nil || n.ctx.Err() != nil {
		n.seedErr = ""
		return
	}
	if msg := err.Error(); msg != n.seedErr { // once, not every second
		n.seedErr = msg
		n.log.Warn("cluster node: the store holds no configuration, and this node's copy could not seed it", "err", err)
	}
}

// refuse records that this node does not run generation gen, and why.
func (n *Node) refuse(gen int64, err error) {
	msg := oneLine(err.Error())
	n.mu.Lock()
	n.refusedGen, n.refusedErr = gen, msg
	n.mu.Unlock()
	n.log.Warn("cluster node: refused a generation; running the last good one", "generation", gen, "running_generation", n.o.Running(), "err", msg)
}

// oneLine is msg on one line, at most maxErrorLen bytes.
func oneLine(msg string) string {
	msg = strings.Join(strings.Fields(msg), " ")
	if len(msg) > maxErrorLen {
		cut := maxErrorLen
		for cut > 0 && msg[cut]&0xC0 == 0x80 { // not inside a rune
			cut--
		}
		msg = msg[:cut] + "…"
	}
	return msg
}

// status is this node's status now.
func (n *Node) status() core.NodeStatus {
	var run, renew int64 // registered, not started: runs nothing, renews nothing yet
	newest := n.seen.Load()
	if n.o.Running != nil {
		run, renew = n.o.Running(), renewWithin.Milliseconds()
		if c := n.o.Store.Current(); c != nil && c.Generation > newest {
			newest = c.Generation
		}
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	st := core.NodeStatus{
		NodeIdentity:      n.o.Self,
		AdminAddress:      n.o.AdminAddress,
		RunningGeneration: run,
		RenewMs:           renew,
		Version:           n.o.Version,
		Started:           n.started.UTC(),
	}
	if n.refusedGen > run {
		st.RefusedGeneration, st.Error = n.refusedGen, n.refusedErr
	}
	switch {
	case n.starting:
		st.State = core.NodeStarting
	case n.applying:
		st.State = core.NodeApplying
	case n.refusedGen > run && n.refusedGen >= newest:
		st.State = core.NodeRefused
	case run >= newest:
		st.State = core.NodeInSync
	default:
		st.State = core.NodeApplying
	}
	return st
}

// publish puts this node's status in its key when it changed since the
// last put, or when the key is due for its renewal (renewEvery: the
// probe calls publish each second), on the condition that the key is
// still bound to this node's lease (gone or taken: register again).
func (n *Node) publish() {
	n.pubMu.Lock()
	defer n.pubMu.Unlock()
	st := n.status()
	// Half a probe early: the probe that comes renewEvery after the last
	// put renews it, not the one after.
	if st == n.lastPub && !n.dirty.Load() && time.Since(n.pubAt) < renewEvery-probeEvery/2 {
		return
	}
	lease := n.leaseID()
	if lease == 0 {
		n.dirty.Store(true)
		return
	}
	rec := nodeRecord{NodeStatus: st, Instance: n.instance}
	rec.Updated = time.Now().UTC()
	val, err := json.Marshal(rec)
	if err != nil {
		n.log.Error("cluster node: encode the status", "err", err)
		return
	}
	ctx, cancel := context.WithTimeout(n.ctx, opTimeout)
	defer cancel()
	resp, err := n.cli.Txn(ctx).
		If(clientv3.Compare(clientv3.LeaseValue(n.key), "=", lease)).
		Then(clientv3.OpPut(n.key, string(val), clientv3.WithLease(lease))).Commit()
	if err != nil {
		n.dirty.Store(true)
		return
	}
	if !resp.Succeeded {
		// The key went with the lease (or another took the name while
		// this node was cut off): register again.
		n.dirty.Store(true)
		select {
		case n.lost <- lease:
		default:
		}
		return
	}
	n.lastPub, n.pubAt = st, time.Now()
	n.dirty.Store(false)
}

// Self implements core.Cluster.
func (n *Node) Self() core.NodeIdentity { return n.o.Self }

// Sync implements core.Cluster: the apply step, now, after reading the
// store's current generation. A closed node applies nothing: it left the
// cluster (its key is gone, no write waits for it), and a write it takes
// while the process stops is run by the other nodes.
func (n *Node) Sync(ctx context.Context) core.NodeStatus {
	if n.ctx.Err() != nil {
		return n.status()
	}
	gctx, cancel := context.WithTimeout(ctx, opTimeout)
	if resp, err := n.cli.Get(gctx, n.current); err == nil && len(resp.Kvs) > 0 {
		n.noteCurrent(resp.Kvs[0].Value, resp.Kvs[0].ModRevision, true)
	}
	cancel()
	if n.acquire(ctx) { // false once closed (Close takes sem after its cancel)
		n.step()
		n.release()
	}
	return n.status()
}

// Nodes implements core.Cluster: the nodes listed now, each one's state
// worked out by this node (keep, stateOf). While the probe finds etcd
// unreachable it answers at once, with the last list seen (each probe, a
// second apart, reads it: the other nodes as they were just before etcd
// went, their states as of then) and this node's own entry as it is now.
func (n *Node) Nodes(ctx context.Context) ([]core.NodeStatus, error) {
	if n.StoreState().Connected {
		ctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		if list, _, err := n.list(ctx); err == nil {
			return list, nil
		}
	}
	self := n.status()
	self.Updated = time.Now().UTC() // this node's status, as of now
	n.mu.Lock()
	last := slices.Clone(n.nodes)
	n.mu.Unlock()
	i := slices.IndexFunc(last, func(st core.NodeStatus) bool { return st.Name == self.Name })
	if i < 0 { // never listed, or not registered yet
		last = append(last, self)
		slices.SortFunc(last, func(a, b core.NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	} else {
		last[i] = self
	}
	return last, nil
}

// list reads P/nodes/ (the live nodes, sorted by name, their states
// worked out: keep) and P/current at one revision, and returns the list
// and that revision; the list is kept for when etcd is unreachable.
func (n *Node) list(ctx context.Context) ([]core.NodeStatus, int64, error) {
	resp, err := n.cli.Txn(ctx).Then(
		clientv3.OpGet(n.current),
		clientv3.OpGet(n.nodesPfx, clientv3.WithPrefix()),
	).Commit()
	if err != nil {
		return nil, 0, err
	}
	list, rev := n.keep(resp.Responses[1].GetResponseRange().Kvs, resp.Responses[0].GetResponseRange().Kvs, resp.Header.Revision)
	return list, rev, nil
}

// keep decodes the keys under P/nodes/ read at revision rev with P/current
// (cur: empty when absent), works out each node's state (stateOf: each
// node publishes its own, and a stopped node's last one stays), keeps the
// list for when etcd is unreachable and returns a copy, sorted by name,
// and the revision it was read at. A read older than the list kept (two
// reads answered out of order) returns the kept one: its renewals are the
// newer.
func (n *Node) keep(kvs, cur []*mvccpb.KeyValue, rev int64) ([]core.NodeStatus, int64) {
	var storeGen int64 // 0: no document, or an unreadable one
	if len(cur) > 0 {
		storeGen, _ = generationOf(cur[0].Value)
	}
	list := make([]core.NodeStatus, 0, len(kvs))
	mods := make(map[string]int64, len(kvs))
	for _, kv := range kvs {
		if st, ok := n.decode(kv); ok {
			list = append(list, st)
			mods[st.Name] = kv.ModRevision
		}
	}
	slices.SortFunc(list, func(a, b core.NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	now := time.Now()
	n.mu.Lock()
	defer n.mu.Unlock()
	if rev < n.keptRev {
		return slices.Clone(n.nodes), n.keptRev
	}
	renewals := make(map[string]renewal, len(list))
	for i := range list {
		st := &list[i]
		r, seen := n.renewals[st.Name]
		switch mod := mods[st.Name]; {
		case seen && r.mod == mod: // not renewed since it was first read
		case seen:
			r = renewal{mod, now}
		default: // first read: its own date, if not in this node's future
			r = renewal{mod, now}
			if st.Updated.Before(now) {
				r.at = st.Updated
			}
		}
		renewals[st.Name] = r
		st.State = stateOf(*st, storeGen, now.Sub(r.at), st.Name == n.o.Self.Name)
	}
	n.nodes, n.keptRev, n.renewals = list, rev, renewals
	return slices.Clone(list), rev
}

// stateOf is the state of node st as the node that lists it works it out:
// unreachable when st has not renewed its key for longer than it said it
// would (unrenewed > renew_ms; never the node that lists, self, which
// answers); else, against the store's generation storeGen read with the
// list: starting as long as st says so (its first apply not done), in_sync
// when it runs storeGen or newer, refused when it refused storeGen or a
// newer one, applying when it is behind. A node SIGSTOPped or killed
// keeps the in_sync it published last: what it published is not its
// state. storeGen 0 (the store holds no document): the state st published.
func stateOf(st core.NodeStatus, storeGen int64, unrenewed time.Duration, self bool) string {
	switch {
	case !self && st.RenewMs > 0 && unrenewed > time.Duration(st.RenewMs)*time.Millisecond:
		return core.NodeUnreachable
	case st.State == core.NodeStarting || storeGen <= 0:
		return st.State
	case st.RunningGeneration >= storeGen:
		return core.NodeInSync
	case st.RefusedGeneration >= storeGen:
		return core.NodeRefused
	default:
		return core.NodeApplying
	}
}

// generationOf reads the generation of a value of P/current.
func generationOf(v []byte) (int64, error) {
	var cur struct {
		Generation int64 `json:"generation"`
	}
	err := json.Unmarshal(v, &cur)
	return cur.Generation, err
}

// decode reads one node key; an unreadable one is skipped (logged). A key
// under P/nodes/ that no node wrote is skipped too: one whose name is not
// a node name, or whose value has no instance (the keys of another
// cluster whose prefix is P/nodes or below it: its P/current, P/tokens,
// revisions and nodes), or one on no lease (every node's key is on its
// lease: that one was put by hand and is no live node).
func (n *Node) decode(kv *mvccpb.KeyValue) (core.NodeStatus, bool) {
	name := strings.TrimPrefix(string(kv.Key), n.nodesPfx)
	if !config.ValidName(name) || kv.Lease == 0 {
		return core.NodeStatus{}, false
	}
	var rec nodeRecord
	if err := json.Unmarshal(kv.Value, &rec); err != nil {
		n.log.Warn("cluster node: unreadable node key", "key", string(kv.Key), "err", err)
		return core.NodeStatus{}, false
	}
	if rec.Instance == "" {
		return core.NodeStatus{}, false
	}
	rec.Name = name // the key names it
	return rec.NodeStatus, true
}

// Wait implements core.Cluster: it watches P/nodes/, lists it, and applies
// the watch's newer events to the list until every live node runs gen or
// newer or refused gen or newer, or d passes. A node whose key goes
// (closed, lease expired) is no longer waited for. The watch is created
// before the list (and only its events newer than the list are taken): a
// watch created on a past revision is served by etcd's catch-up loop,
// every 100 ms.
func (n *Node) Wait(ctx context.Context, gen int64, d time.Duration) core.WaitResult {
	start := time.Now()
	var nodes map[string]core.NodeStatus // nil: not listed yet
	result := func() core.WaitResult {
		if nodes == nil { // etcd unreachable: the last list seen
			n.mu.Lock()
			nodes = make(map[string]core.NodeStatus, len(n.nodes))
			for _, st := range n.nodes {
				nodes[st.Name] = st
			}
			n.mu.Unlock()
		}
		r := classify(gen, nodes)
		r.WaitedMs = time.Since(start).Milliseconds()
		return r
	}
	if d <= 0 {
		lctx, cancel := context.WithTimeout(ctx, opTimeout)
		defer cancel()
		if list, _, err := n.list(lctx); err == nil {
			nodes = byName(list)
		}
		return result()
	}
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for !n.waitOnce(ctx, gen, &nodes) && ctx.Err() == nil {
		select { // etcd unreachable, or the watch broke: again, shortly
		case <-ctx.Done():
		case <-time.After(100 * time.Millisecond):
		}
	}
	return result()
}

// waitOnce is one watch of Wait: true when no node is pending any more,
// false when ctx is done or etcd failed it.
func (n *Node) waitOnce(ctx context.Context, gen int64, nodes *map[string]core.NodeStatus) bool {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := n.cli.Watch(wctx, n.nodesPfx, clientv3.WithPrefix(), clientv3.WithCreatedNotify())
	if wr, ok := <-wch; !ok || wr.Err() != nil || !wr.Created {
		return false
	}
	list, rev, err := n.list(ctx)
	if err != nil {
		return false
	}
	m := byName(list)
	*nodes = m
	for {
		if len(classify(gen, m).Pending) == 0 {
			return true
		}
		wr, ok := <-wch
		if !ok || wr.Err() != nil {
			return false
		}
		for _, ev := range wr.Events {
			if ev.Kv.ModRevision <= rev {
				continue // in the list already
			}
			name := strings.TrimPrefix(string(ev.Kv.Key), n.nodesPfx)
			if ev.Type == clientv3.EventTypeDelete {
				delete(m, name)
			} else if st, ok := n.decode(ev.Kv); ok {
				m[name] = st
			} else {
				delete(m, name) // no longer a node's key
			}
		}
	}
}

func byName(list []core.NodeStatus) map[string]core.NodeStatus {
	m := make(map[string]core.NodeStatus, len(list))
	for _, st := range list {
		m[st.Name] = st
	}
	return m
}

// classify sorts the nodes into applied (run gen or newer), refused
// (refused gen or newer, run older) and pending, each sorted by name.
func classify(gen int64, nodes map[string]core.NodeStatus) core.WaitResult {
	r := core.WaitResult{Generation: gen, Applied: []string{}, Refused: []core.NodeStatus{}, Pending: []string{}}
	for name, st := range nodes {
		switch {
		case st.RunningGeneration >= gen:
			r.Applied = append(r.Applied, name)
		case st.RefusedGeneration >= gen:
			r.Refused = append(r.Refused, st)
		default:
			r.Pending = append(r.Pending, name)
		}
	}
	slices.Sort(r.Applied)
	slices.Sort(r.Pending)
	slices.SortFunc(r.Refused, func(a, b core.NodeStatus) int { return strings.Compare(a.Name, b.Name) })
	return r
}

// StoreState implements core.Cluster.
func (n *Node) StoreState() core.StoreState {
	seen := n.seen.Load()
	gen := seen
	if c := n.o.Store.Current(); c != nil && c.Generation > gen {
		gen = c.Generation
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return core.StoreState{
		Kind:       "etcd",
		Endpoints:  n.cli.Endpoints(),
		Prefix:     n.o.Prefix,
		Connected:  n.connected,
		Since:      n.since.UTC(),
		Generation: gen,
		// The store read holds an older generation than the node's
		// (this node's own write makes that true for the moment
		// before its watch brings it).
		Behind: n.connected && seen > 0 && gen > seen,
		Adoptions: &core.Adoptions{
			Deltas:        n.deltas.Load(),
			Documents:     n.documents.Load(),
			RefusedDeltas: n.refusedDeltas.Load(),
		},
	}
}

var _ core.Cluster = (*Node)(nil)
