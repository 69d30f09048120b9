package etcdtest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"go.etcd.io/etcd/client/pkg/v3/transport"
	"go.etcd.io/etcd/server/v3/embed"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// ReadyTimeout bounds the wait for a member to be ready (joined its
// cluster, a leader elected): generous, for a loaded machine under -race.
const ReadyTimeout = 30 * time.Second

// Options of Launch.
type Options struct {
	// Members is the number of members (1 when 0).
	Members int
	// Dir holds one data directory per member (Dir/m0, Dir/m1, …).
	Dir string
	// ClientAddrs are the members' client addresses (host:port), one per
	// member; empty: free ports on 127.0.0.1. PeerAddrs likewise for the
	// peer (raft) traffic.
	ClientAddrs, PeerAddrs []string
	// Fsync keeps etcd's fsync (a development server); tests go without.
	Fsync bool
	// Logger receives the servers' logs; nil: errors only, on stderr.
	Logger *zap.Logger
	// ClientTLS, when set, serves the clients with TLS (CertFile,
	// KeyFile) and, with TrustedCAFile, requires client certificates
	// signed by that CA (etcd's --client-cert-auth).
	ClientTLS *TLSFiles
}

// TLSFiles are PEM files of a TLS server (Options.ClientTLS).
type TLSFiles struct {
	CertFile, KeyFile, TrustedCAFile string
}

// Cluster is a running set of embedded etcd members.
type Cluster struct {
	t       testing.TB // nil when started by Launch
	opts    Options
	members []*member
}

type member struct {
	mu     sync.Mutex
	cfg    *embed.Config // kept for Restart: same name, ports, directory
	etcd   *embed.Etcd   // nil while stopped
	client string        // host:port
}

// Start starts a cluster of members (1 or 3, typically) on free ports of
// 127.0.0.1 with their data in t.TempDir(), waits until every member is
// ready (at most ReadyTimeout) and stops them at t.Cleanup. It fails t
// when the cluster does not start.
func Start(t testing.TB, members int) *Cluster {
	t.Helper()
	return StartOptions(t, Options{Members: members})
}

// StartOptions is Start with more options (o.Dir, o.ClientAddrs and
// o.PeerAddrs are the test's: a temporary directory, free ports).
func StartOptions(t testing.TB, o Options) *Cluster {
	t.Helper()
	var c *Cluster
	var err error
	dir := t.TempDir()
	// A free port found by listening then closing may be taken by another
	// process before etcd binds it: try again with other ports.
	for attempt := 0; attempt < 3; attempt++ {
		o.Dir, o.ClientAddrs, o.PeerAddrs = filepath.Join(dir, "try"+strconv.Itoa(attempt)), nil, nil
		c, err = Launch(o)
		if err == nil || !errors.Is(err, syscall.EADDRINUSE) {
			break
		}
	}
	if err != nil {
		t.Fatalf("etcdtest: %v", err)
	}
	c.t = t
	t.Cleanup(c.Close)
	return c
}

// quietLogger logs errors only, on stderr, without stack traces: a
// stopped member makes the others log warnings a test does not need to
// see. The errors every Close logs (its listeners closing) are dropped.
func quietLogger() *zap.Logger {
	enc := zap.NewDevelopmentEncoderConfig()
	core := zapcore.NewCore(zapcore.NewConsoleEncoder(enc), zapcore.Lock(os.Stderr), zapcore.ErrorLevel)
	return zap.New(closeNoiseFilter{core})
}

// closeNoiseFilter drops the errors embed.Etcd.Close logs about its own
// listeners and servers closing.
type closeNoiseFilter struct{ zapcore.Core }

func (f closeNoiseFilter) With(fields []zapcore.Field) zapcore.Core {
	return closeNoiseFilter{f.Core.With(fields)}
}

func (f closeNoiseFilter) Check(e zapcore.Entry, ce *zapcore.CheckedEntry) *zapcore.CheckedEntry {
	if e.Message == "setting up serving from embedded etcd failed." {
		return ce
	}
	if f.Enabled(e.Level) {
		return ce.AddCore(e, f)
	}
	return ce
}

// Launch starts a cluster as o says and waits until it is ready (at most
// ReadyTimeout). Close stops it.
func Launch(o Options) (*Cluster, error) {
	if o.Members <= 0 {
		o.Members = 1
	}
	if o.Logger == nil {
		o.Logger = quietLogger()
	}
	if o.Dir == "" {
		return nil, errors.New("etcdtest: no data directory")
	}
	if (len(o.ClientAddrs) != 0 && len(o.ClientAddrs) != o.Members) || (len(o.PeerAddrs) != 0 && len(o.PeerAddrs) != o.Members) {
		return nil, fmt.Errorf("etcdtest: %d members need %d client and peer addresses", o.Members, o.Members)
	}
	clients, peers := o.ClientAddrs, o.PeerAddrs
	var err error
	if len(clients) == 0 {
		if clients, err = freeAddrs(o.Members); err != nil {
			return nil, err
		}
	}
	if len(peers) == 0 {
		if peers, err = freeAddrs(o.Members); err != nil {
			return nil, err
		}
	}
	var initial []string
	for i := range o.Members {
		initial = append(initial, memberName(i)+"=http://"+peers[i])
	}
	c := &Cluster{opts: o}
	for i := range o.Members {
		cfg := embed.NewConfig()
		cfg.Name = memberName(i)
		cfg.Dir = filepath.Join(o.Dir, cfg.Name)
		cu := url.URL{Scheme: "http", Host: clients[i]}
		if f := o.ClientTLS; f != nil {
			cu.Scheme = "https"
			cfg.ClientTLSInfo = transport.TLSInfo{CertFile: f.CertFile, KeyFile: f.KeyFile, TrustedCAFile: f.TrustedCAFile, ClientCertAuth: f.TrustedCAFile != ""}
		}
		pu := url.URL{Scheme: "http", Host: peers[i]}
		cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{cu}, []url.URL{cu}
		cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{pu}, []url.URL{pu}
		cfg.InitialCluster = strings.Join(initial, ",")
		cfg.InitialClusterToken = "etcdtest"
		cfg.EnableGRPCGateway = false
		// Each commit of spliced keeps a revision of the whole document in
		// etcd's history: compacted after an hour, as the README advises
		// for a real etcd, or the history would grow to the space quota.
		cfg.AutoCompactionMode, cfg.AutoCompactionRetention = embed.CompactorModePeriodic, "1h"
		cfg.UnsafeNoFsync = !o.Fsync
		cfg.ZapLoggerBuilder = embed.NewZapLoggerBuilder(o.Logger)
		cfg.LogLevel = "error"
		c.members = append(c.members, &member{cfg: cfg, client: clients[i]})
	}
	// All members start before any is awaited: a member of a cluster is
	// ready only once a quorum of its peers answers.
	for i, m := range c.members {
		if err := m.start(); err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdtest: start member %d: %w", i, err)
		}
	}
	for i, m := range c.members {
		if err := m.waitReady(); err != nil {
			c.Close()
			return nil, fmt.Errorf("etcdtest: member %d: %w", i, err)
		}
	}
	return c, nil
}

func memberName(i int) string { return "m" + strconv.Itoa(i) }

// freeAddrs returns n addresses 127.0.0.1:port that nothing listens on
// now, below the kernel's ephemeral range (net.ipv4.ip_local_port_range,
// 32768 and up by default): Restart binds a member's ports again after it
// stopped, and a port of the ephemeral range can be taken meanwhile as the
// local port of any outgoing connection on the machine ("bind: address
// already in use" on restart, seen once in a full make test whose lanes
// run side by side).
func freeAddrs(n int) ([]string, error) {
	var out []string
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	for tries := 0; len(out) < n; tries++ {
		if tries == 1000 {
			return nil, fmt.Errorf("etcdtest: no free port below 32000 after %d tries", tries)
		}
		l, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(20000+rand.IntN(12000)))
		if err != nil {
			continue // taken: another
		}
		ls = append(ls, l) // held until all are chosen: n distinct ports
		out = append(out, l.Addr().String())
	}
	return out, nil
}

func (m *member) start() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.etcd != nil {
		return nil
	}
	e, err := embed.StartEtcd(m.cfg)
	if err != nil {
		return err
	}
	m.etcd = e
	return nil
}

func (m *member) waitReady() error {
	m.mu.Lock()
	e := m.etcd
	m.mu.Unlock()
	if e == nil {
		return errors.New("stopped")
	}
	select {
	case <-e.Server.ReadyNotify():
		return nil
	case err := <-e.Err():
		return err
	case <-time.After(ReadyTimeout):
		return fmt.Errorf("not ready after %v", ReadyTimeout)
	}
}

// stop closes the member. hard skips the leader's hand-over to a peer,
// as a crash would (closing the whole cluster, a leader would also wait
// seconds for peers that are closing too).
func (m *member) stop(hard bool) {
	m.mu.Lock()
	e := m.etcd
	m.etcd = nil
	m.mu.Unlock()
	if e == nil {
		return
	}
	if hard {
		e.Server.HardStop()
	}
	e.Close()
}

// Endpoints are the members' client addresses (host:port), stopped
// members included, in member order.
func (c *Cluster) Endpoints() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = m.client
	}
	return out
}

// StoreURL is the --store URL of the cluster with prefix (e.g. "/spliced").
func (c *Cluster) StoreURL(prefix string) string {
	return "etcd://" + strings.Join(c.Endpoints(), ",") + prefix
}

// Stop stops member i as a crash would (no hand-over of leadership: the
// others elect a leader if it led, within an election timeout of 1 s);
// its client and peer ports close, its data stays. Stopping a stopped
// member does nothing.
func (c *Cluster) Stop(i int) {
	c.members[i].stop(true)
}

// Restart starts member i again on the same ports with the same data and
// waits until it is ready (which needs a quorum of the members running).
// It fails the test (or panics under Launch) when the member does not
// come back.
func (c *Cluster) Restart(i int) {
	m := c.members[i]
	err := m.start()
	if err == nil {
		err = m.waitReady()
	}
	if err != nil {
		err = fmt.Errorf("etcdtest: restart member %d: %w", i, err)
		if c.t != nil {
			c.t.Helper()
			c.t.Fatal(err)
		}
		panic(err)
	}
}

// Close stops every member.
func (c *Cluster) Close() {
	var wg sync.WaitGroup
	for _, m := range c.members {
		wg.Go(func() { m.stop(true) })
	}
	wg.Wait()
}

// DataDir is member i's data directory.
func (c *Cluster) DataDir(i int) string { return c.members[i].cfg.Dir }

// Leader is the index of the member that leads the cluster now, as the
// running members see it (-1 while none does: an election is under way).
func (c *Cluster) Leader() int {
	for i, m := range c.members {
		m.mu.Lock()
		e := m.etcd
		m.mu.Unlock()
		if e != nil && e.Server.Lead() == uint64(e.Server.MemberID()) {
			return i
		}
	}
	return -1
}
