package main

// Several nodes, one configuration: the flags that name this
// node and its store, and what a state directory remembers of the cluster
// it belongs to.

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/cluster"
	"github.com/spliced-proxy/spliced/core/config"
)

// clusterFlags are the node's name and address.
type clusterFlags struct {
	nodeName, nodeAddress string
}

// addNodeFlags adds --node-name and --node-address to fs.
func (cf *clusterFlags) addNodeFlags(fs *flag.FlagSet) {
	fs.StringVar(&cf.nodeName, "node-name", "", "this node's name, unique in a cluster (default: the host name, lower-cased, up to its first dot; a-z, 0-9, '-' and '_')")
	fs.StringVar(&cf.nodeAddress, "node-address", "", `this node's IP address: what a bind address "${NODE_ADDRESS}" becomes on it`)
}

// nodeIdentity is this node's name and address from the flags. Without
// --node-name the host name names the node; one that is not a valid name
// is an error in a cluster, and "local" on a single node.
func (cf *clusterFlags) nodeIdentity(clustered bool) (core.NodeIdentity, error) {
	var id core.NodeIdentity
	name := cf.nodeName
	if name == "" {
		h, err := os.Hostname()
		if err != nil && clustered {
			return id, fmt.Errorf("--node-name: the host name is unknown (%v): give --node-name", err)
		}
		name, _, _ = strings.Cut(strings.ToLower(h), ".")
		if !config.ValidName(name) {
			if clustered {
				return id, fmt.Errorf("--node-name: the host name %q is not a valid node name (1 to %d of a-z, 0-9, '-' and '_', "+
					"starting and ending with a letter or digit): give --node-name", h, config.MaxNameLen)
			}
			name = "local"
		}
	} else if !config.ValidName(name) {
		return id, fmt.Errorf("--node-name %q: 1 to %d characters of a-z, 0-9, '-' and '_', starting and ending with a letter or digit",
			name, config.MaxNameLen)
	}
	id.Name = name
	if cf.nodeAddress != "" {
		a, err := netip.ParseAddr(cf.nodeAddress)
		if err != nil || a.Zone() != "" {
			return id, fmt.Errorf("--node-address %q: an IP address (such as 192.0.2.10 or 2001:db8::10), without a port or a zone", cf.nodeAddress)
		}
		if a.IsUnspecified() {
			return id, fmt.Errorf("--node-address %q: this node's own address, not the unspecified one (a bind on all addresses needs no placeholder)", cf.nodeAddress)
		}
		id.Address = a.String()
	}
	return id, nil
}

// applyEffective applies the node's effective config: its section of
// "nodes" and its address for "${NODE_ADDRESS}" (ForNode), validated with
// this machine's Env (CPUs, fd limit) when it differs from the document
// or when check is set (a cluster node: the writer validated the document
// for any machine, not for this one). The servers the last config that
// passed are not checked against the field rules again
// (config.ValidateChange): one server changed among 10 000, not 10 000.
func applyEffective(ctl core.Control, env config.Env, node core.NodeIdentity, check bool) func(ctx context.Context, c *config.Config) error {
	var mu sync.Mutex
	var valid *config.Config // the last effective config that passed, with env
	return func(ctx context.Context, c *config.Config) error {
		eff, err := c.ForNode(node.Name, node.Address)
		if err != nil {
			return err
		}
		if check || eff != c {
			mu.Lock()
			prev := valid
			mu.Unlock()
			if err := config.ValidateChange(eff, env, prev); err != nil {
				return err
			}
			mu.Lock()
			valid = eff
			mu.Unlock()
		}
		return ctl.Apply(ctx, eff)
	}
}

// clusterFile, in a state directory, records the cluster store of the node
// that runs on it: a single-node start, or `spliced token` without
// --store, on that directory is refused (its tokens.json mirrors the
// store's; its config is the store's).
const clusterFile = "cluster.json"

type clusterMark struct {
	Store string `json:"store"`
	Node  string `json:"node"`
}

// readClusterMark reads dir's cluster.json (nil when absent).
func readClusterMark(dir string) (*clusterMark, error) {
	b, err := os.ReadFile(filepath.Join(dir, clusterFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var m clusterMark
	if err := json.Unmarshal(b, &m); err != nil || m.Store == "" {
		return nil, fmt.Errorf("%s: not a cluster record (remove it if this directory is not a cluster node's)", filepath.Join(dir, clusterFile))
	}
	return &m, nil
}

// writeClusterMark records in dir that it is the state directory of node
// in the cluster store store.
func writeClusterMark(dir, store, node string) error {
	b, _ := json.MarshalIndent(clusterMark{Store: store, Node: node}, "", "  ")
	return config.WriteFileAtomic(dir, clusterFile, append(b, '\n'), nil)
}

// refuseClusterDir is the error of using a cluster node's state directory
// as a single node's (what says to use --store instead).
func refuseClusterDir(dir string, m *clusterMark, what string) error {
	return fmt.Errorf("state directory %s is that of cluster node %q (store %s): %s with --store %s; "+
		"or, to make it a single node's again, remove %s", dir, m.Node, m.Store, what, m.Store, filepath.Join(dir, clusterFile))
}

// checkClusterMark refuses to start on a state directory marked m with
// the flags sf: without --store (a single node), or with the --store of
// another key prefix (a typo would start an empty cluster of its own,
// serving nothing). Other endpoints for the same prefix are the same
// cluster (a member added or moved).
func checkClusterMark(dir string, m *clusterMark, sf *storeFlags) error {
	switch {
	case m == nil:
		return nil
	case !sf.clustered():
		return refuseClusterDir(dir, m, "start it")
	}
	if _, prefix, err := cluster.ParseStoreURL(m.Store); err == nil && prefix == sf.prefix {
		return nil
	}
	return fmt.Errorf("state directory %s is that of cluster node %q of store %s, not of %s: start it with --store %s; "+
		"or, to make it a node of %s, remove %s", dir, m.Node, m.Store, sf.url, m.Store, sf.url, filepath.Join(dir, clusterFile))
}

// storeFlags are --store and the etcd client's flags, of the server and of
// `spliced token`.
type storeFlags struct {
	url              string
	etcdCA, etcdCert string
	etcdKey          string
	dialTimeout      time.Duration
	endpoints        []string // parsed from url by check
	prefix           string
	tls              *tls.Config
}

func (sf *storeFlags) add(fs *flag.FlagSet) {
	fs.StringVar(&sf.url, "store", "", "configuration store shared by the nodes of a cluster: etcd://host:2379[,host:2379…]/prefix (default: the state directory, one node)")
	fs.StringVar(&sf.etcdCA, "etcd-cacert", "", "PEM CA file that verifies the etcd servers (https endpoints); default: the system's CAs when --etcd-cert is given")
	fs.StringVar(&sf.etcdCert, "etcd-cert", "", "PEM client certificate file for etcd (with --etcd-key)")
	fs.StringVar(&sf.etcdKey, "etcd-key", "", "PEM private key file of --etcd-cert")
	fs.DurationVar(&sf.dialTimeout, "etcd-dial-timeout", cluster.DefaultDialTimeout, "bound of the first wait for etcd at a start (a second when this node has a copy of its last applied generation)")
}

// clustered says whether --store names a cluster store.
func (sf *storeFlags) clustered() bool { return sf.url != "" }

// check parses --store and loads the etcd TLS files, before anything is
// opened; the etcd flags without --store are an error.
func (sf *storeFlags) check() error {
	if !sf.clustered() {
		if sf.etcdCA != "" || sf.etcdCert != "" || sf.etcdKey != "" {
			return errors.New("--etcd-cacert, --etcd-cert and --etcd-key go with --store etcd://…")
		}
		return nil
	}
	var err error
	if sf.endpoints, sf.prefix, err = cluster.ParseStoreURL(sf.url); err != nil {
		return err
	}
	if sf.dialTimeout <= 0 {
		return errors.New("--etcd-dial-timeout must be positive")
	}
	sf.tls, err = cluster.ClientTLS(sf.etcdCA, sf.etcdCert, sf.etcdKey)
	return err
}

// open connects to the cluster store (it does not wait for etcd to answer).
func (sf *storeFlags) open(ctx context.Context, cacheDir string, log *slog.Logger) (*cluster.EtcdStorage, error) {
	return cluster.OpenEtcd(ctx, cluster.Options{Endpoints: sf.endpoints, Prefix: sf.prefix, TLS: sf.tls,
		DialTimeout: sf.dialTimeout, CacheDir: cacheDir, Log: log})
}

// seedConfig makes the document of a single node's state directory the
// first generation of a cluster store that holds none yet, with its
// certificates' bundles: adding --store to a running single node must not
// start it (and the cluster) empty while its config.json is ignored. A
// store that holds a document (another node seeded it) is left as it is:
// the node joins what runs.
func seedConfig(ctx context.Context, es *cluster.EtcdStorage, stateDir, node string, log *slog.Logger) error {
	if _, err := os.Stat(filepath.Join(stateDir, config.ConfigFile)); err != nil {
		return nil // not a single node's state directory
	}
	if cur, _, err := es.Load(ctx); err != nil || cur != nil {
		return err // unreachable: the start fails on it anyway
	}
	d, err := config.NewDirStorage(stateDir, log)
	if err != nil {
		return err
	}
	c, _, err := d.Load(ctx)
	if err != nil || c == nil || c.Generation == 0 {
		return err
	}
	certs := make(map[string][]byte, len(c.Certificates))
	for _, cert := range c.Certificates {
		for _, sum := range cert.Files() {
			b, err := d.CertificateBundle(ctx, sum)
			if err != nil {
				return fmt.Errorf("seed the store with the state directory's document: certificate %q: %w", cert.Name, err)
			}
			certs[sum] = b
		}
	}
	was := c.Generation
	c.Generation = 1
	doc, err := json.Marshal(c)
	if err != nil {
		return err
	}
	info := config.RevisionInfo{Generation: 1, Time: time.Now(), Node: node,
		Summary: fmt.Sprintf("seeded from single node %s's generation %d: %s", node, was, config.Diff(nil, c).Summary())}
	switch err := es.Commit(ctx, 0, info, doc, certs); {
	case errors.Is(err, config.ErrRace): // another node seeded it first
		return nil
	case err != nil:
		return fmt.Errorf("seed the store with the state directory's document: %w", err)
	}
	log.Info("the store had no configuration: seeded with the state directory's", "generation", was, "store_generation", 1)
	return nil
}

// errTokensPresent stops the seeding of P/tokens when the key exists.
var errTokensPresent = errors.New("the store holds tokens already")

// seedTokens copies the state directory's tokens into P/tokens when the
// store has none yet (a conditional create): a single node that joins a
// new cluster keeps its tokens, and a P/tokens deleted by hand is
// restored rather than leaving every node without tokens. Until it
// succeeds the node keeps using its local tokens.json.
func seedTokens(ctx context.Context, es *cluster.EtcdStorage, stateDir string, log *slog.Logger) error {
	local, err := tokens.List(stateDir)
	if err != nil || len(local) == 0 {
		return nil
	}
	err = es.EditKey(ctx, cluster.TokensKey, func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, errTokensPresent
		}
		return tokens.Marshal(local), nil
	})
	switch {
	case errors.Is(err, errTokensPresent):
	case err != nil:
		return err
	default:
		log.Info("the store had no tokens: seeded with the state directory's", "tokens", len(local), "key", es.Key(cluster.TokensKey))
	}
	return nil
}

// seedTokensUntilDone runs seedTokens until it succeeds (etcd may be
// unreachable at start) or ctx ends.
func seedTokensUntilDone(ctx context.Context, es *cluster.EtcdStorage, stateDir string, log *slog.Logger) {
	for warned := false; ; warned = true {
		err := seedTokens(ctx, es, stateDir, log)
		if err == nil || ctx.Err() != nil {
			return
		}
		if !warned {
			log.Warn("the store's tokens could not be seeded from the state directory's; trying again every 5 s", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(5 * time.Second):
		}
	}
}

// mirrorStoreTokens writes the store's tokens (P/tokens) into a state
// directory that has none (a new node) at start, before the admin listener
// needs them; the node's watch keeps them current afterwards. A state
// directory with tokens (the mirror of the last run, or tokens to seed the
// store with) is left as it is, and so is one when the store has no tokens
// or does not answer: a restart while etcd is down waits no longer.
func mirrorStoreTokens(ctx context.Context, es *cluster.EtcdStorage, stateDir string, log *slog.Logger) {
	if local, err := tokens.List(stateDir); err != nil || len(local) > 0 {
		return
	}
	doc, _, err := es.GetKey(ctx, cluster.TokensKey)
	if err != nil || doc == nil {
		return
	}
	if err := tokens.WriteMirror(stateDir, doc); err != nil {
		log.Error("the store's tokens could not be mirrored into the state directory", "err", err)
	}
}

// mirrorTokens is the node's OnTokens: P/tokens written to the state
// directory's tokens.json (0600, atomically), which tokens.Checker reads.
func mirrorTokens(es *cluster.EtcdStorage, stateDir string, log *slog.Logger) func(doc []byte) {
	return func(doc []byte) {
		if doc == nil {
			if err := seedTokens(context.Background(), es, stateDir, log); err != nil {
				log.Warn("the store's tokens were deleted and could not be seeded again from the state directory's", "err", err)
			}
			return
		}
		if err := tokens.WriteMirror(stateDir, doc); err != nil {
			log.Error("the store's tokens could not be mirrored into the state directory: the previous tokens stay in force", "err", err)
			return
		}
		log.Info("tokens updated from the store")
	}
}
