package cluster

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	"google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/spliced-proxy/spliced/core/config"
)

// Timeouts of the calls to etcd. A write (Commit, Revert, EditKey) gets
// WriteTimeout in all, the time the API promises a 503 within; a read
// gets ReadTimeout; the probe of Health ProbeTimeout, at most once every
// ProbeEvery.
const (
	WriteTimeout = 4500 * time.Millisecond // the API answers within 5 s
	ReadTimeout  = 5 * time.Second
	ProbeTimeout = 2 * time.Second
	ProbeEvery   = time.Second
	// DefaultDialTimeout is Options.DialTimeout when zero.
	DefaultDialTimeout = 5 * time.Second
	// cachedReachTimeout bounds Reach when the node has a copy of the
	// generation it last applied: it starts from it at once (and catches
	// up when etcd answers) rather than waiting the whole DialTimeout.
	cachedReachTimeout = time.Second
	// maxRevisionBytes bounds a revision's JSON once uncompressed (a
	// damaged or hostile value must not exhaust memory): a document of
	// 10 000 servers is about 2 MB.
	maxRevisionBytes = 256 << 20
	// txnAttemptTimeout bounds one attempt of a conditional write
	// (swapCurrent): two fit in WriteTimeout.
	txnAttemptTimeout = 2 * time.Second
	// txnBundles is how many certificate bundles a commit's Txn carries
	// at most, under etcd's default --max-txn-ops of 128 with the
	// revision, P/current and the pruning of old revisions.
	txnBundles = 100
	// editAttempts bounds EditKey's retries of a key that changed under it.
	editAttempts = 5
	// downReadTimeout bounds a read of the revision history while etcd
	// is known unreachable (readBudget).
	downReadTimeout = time.Second
	// reconnectMaxDelay bounds the wait between two connection attempts
	// to an etcd member that does not answer.
	reconnectMaxDelay = time.Second
)

// Keys under the prefix (see doc.go).
const (
	keyCurrent   = "/current"
	keyRevisions = "/revisions/"
	keyCerts     = "/certs/"
	keyNodes     = "/nodes/"
	// TokensKey is the name (Key, EditKey, GetKey) of the tokens document.
	TokensKey = "tokens"
)

// Options of OpenEtcd.
type Options struct {
	// Endpoints and Prefix are what ParseStoreURL returns.
	Endpoints []string
	Prefix    string
	// TLS is the client's TLS configuration (ClientTLS); nil: plain.
	TLS *tls.Config
	// DialTimeout bounds the first connection and Reach, the first
	// contact of a start (DefaultDialTimeout when 0).
	DialTimeout time.Duration
	// CacheDir is the node's state directory, where RememberApplied keeps
	// the last applied generation for a start while etcd is unreachable;
	// "" keeps no cache.
	CacheDir string
	// Log receives the storage's messages (nil: discarded).
	Log *slog.Logger
}

// EtcdStorage is the config.Storage of a cluster: the documents live
// under a key prefix of an etcd cluster (layout in doc.go). Safe from any
// goroutine.
type EtcdStorage struct {
	cli       *clientv3.Client
	prefix    string
	endpoints []string
	cacheDir  string
	log       *slog.Logger

	// known is the generation P/current held at its mod revision when
	// this storage last read or wrote it: a Commit on that generation
	// compares that mod revision without reading P/current first.
	knownMu sync.Mutex
	known   currentKey
	// doc is the generation and the mod revision of P/current of the
	// document the Store was last given (Load, a commit, AdvanceByDelta):
	// a change in P/current applies to it only when its base is doc
	// (delta.go). Zero: unknown.
	doc currentKey

	// cacheWriteMu orders the writes of the node's cache
	// (RememberApplied); cacheState is what its files hold, lastChange
	// the last change adopted or committed (noteChange).
	cacheWriteMu sync.Mutex
	cacheState   cacheState
	lastChange   deltaNote

	// bundles caches certificate bundles (immutable: the key is the
	// chain's hash). headers caches revision headers by generation, valid
	// while the key's mod revision is the same (a Revert lets a
	// generation number be committed again).
	cacheMu sync.Mutex
	bundles map[string][]byte
	headers map[int64]cachedHeader
	// refs caches the chains each kept revision refers to (pruning);
	// pruneMu makes one pruning at a time, lastPrune (unix nanos) spaces
	// them.
	refs      map[int64]cachedRefs
	enc       revisionEncoder
	docs      docEncoder // the documents CommitDelta writes
	pruneMu   sync.Mutex
	lastPrune atomic.Int64

	// fault is why the last call to etcd failed (nil: it succeeded).
	// lastProbe (unix nanos) spaces Health's probes; probing is set while
	// one runs.
	fault     atomic.Pointer[error]
	lastProbe atomic.Int64
	probing   atomic.Bool
	// fromCache is set while Load answers from the node's cache: said
	// once in the log, not at each Load.
	fromCache atomic.Bool
	closed    atomic.Bool

	// readTimeout is ReadTimeout (tests of a stopped etcd shorten it).
	readTimeout time.Duration
	// dialTimeout is Options.DialTimeout.
	dialTimeout time.Duration
}

type currentKey struct {
	gen, mod int64 // mod 0: unknown
}

type cachedHeader struct {
	mod  int64
	info config.RevisionInfo
}

var _ config.Storage = (*EtcdStorage)(nil)

// OpenEtcd connects to the etcd cluster o names. It does not need etcd to
// answer: a node restarted while etcd is down starts from its cache (Load)
// and catches up when etcd comes back; Health says whether it answers.
func OpenEtcd(ctx context.Context, o Options) (*EtcdStorage, error) {
	if len(o.Endpoints) == 0 {
		return nil, errors.New("cluster store: no etcd endpoint")
	}
	if o.Prefix == "" || o.Prefix == "/" || !strings.HasPrefix(o.Prefix, "/") || strings.HasSuffix(o.Prefix, "/") {
		return nil, fmt.Errorf("cluster store: key prefix %q: want a path such as /spliced", o.Prefix)
	}
	if o.DialTimeout <= 0 {
		o.DialTimeout = DefaultDialTimeout
	}
	if o.Log == nil {
		o.Log = slog.New(slog.DiscardHandler)
	}
	cli, err := clientv3.New(clientv3.Config{
		Endpoints:   o.Endpoints,
		TLS:         o.TLS,
		DialTimeout: o.DialTimeout,
		// A dead connection (a member gone without a FIN) is noticed
		// within 15 s and the client moves to another endpoint. etcd
		// refuses pings more often than every 5 s (GRPCKeepAliveMinTime).
		DialKeepAliveTime:    10 * time.Second,
		DialKeepAliveTimeout: 5 * time.Second,
		PermitWithoutStream:  true,
		// The client's own retries log at warn level through zap; this
		// storage reports what matters through Log.
		Logger: zap.NewNop(),
		// gRPC spaces its reconnections to an unreachable member by a
		// backoff growing to 2 minutes: etcd back after an outage of a
		// few minutes would stay unreachable for this node (writes 503)
		// up to that long. At most reconnectMaxDelay instead: one
		// connection attempt per member every second or so is nothing.
		DialOptions: []grpc.DialOption{grpc.WithConnectParams(grpc.ConnectParams{
			Backoff:           backoff.Config{BaseDelay: 250 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: reconnectMaxDelay},
			MinConnectTimeout: 5 * time.Second,
		})},
	})
	if err != nil {
		return nil, fmt.Errorf("cluster store: etcd client for %s: %w", strings.Join(o.Endpoints, ","), err)
	}
	s := &EtcdStorage{
		cli:       cli,
		prefix:    o.Prefix,
		endpoints: append([]string(nil), o.Endpoints...),
		cacheDir:  o.CacheDir,
		log:       o.Log.With("store", "etcd", "prefix", o.Prefix),
		bundles:   map[string][]byte{},
		headers:   map[int64]cachedHeader{},
		refs:      map[int64]cachedRefs{},

		readTimeout: ReadTimeout,
		dialTimeout: o.DialTimeout,
	}
	return s, nil
}

// Client is the etcd client (for the node's lease, watches and key).
func (s *EtcdStorage) Client() *clientv3.Client { return s.cli }

// Prefix is the key prefix ("/spliced").
func (s *EtcdStorage) Prefix() string { return s.prefix }

// Endpoints are the etcd endpoints the client was given.
func (s *EtcdStorage) Endpoints() []string { return append([]string(nil), s.endpoints...) }

// Key is the full key of name under the prefix: Key("tokens") = "/spliced/tokens".
func (s *EtcdStorage) Key(name string) string { return s.prefix + "/" + name }

// CurrentKey is the key the nodes watch for new generations.
func (s *EtcdStorage) CurrentKey() string { return s.prefix + keyCurrent }

// NodesPrefix is where the nodes publish their status ("P/nodes/").
func (s *EtcdStorage) NodesPrefix() string { return s.prefix + keyNodes }

// Kind is "etcd".
func (s *EtcdStorage) Kind() string { return "etcd" }

// Close closes the client. Health starts no probe afterwards.
func (s *EtcdStorage) Close() error {
	s.closed.Store(true)
	return s.cli.Close()
}

func (s *EtcdStorage) revisionKey(gen int64) string {
	return fmt.Sprintf("%s%s%020d", s.prefix, keyRevisions, gen)
}

func (s *EtcdStorage) certKey(sum string) string { return s.prefix + keyCerts + sum }

// current is the value of P/current.
type current struct {
	Generation int64 `json:"generation"`
	// Base, BaseRev and Delta: the change (config.Delta) that makes this
	// generation from generation Base, current at mod revision BaseRev
	// (delta.go); absent when the write was not put as a change.
	Base    int64           `json:"base,omitempty"`
	BaseRev int64           `json:"base_rev,omitempty"`
	Delta   json.RawMessage `json:"delta,omitempty"`
}

// failed turns the error of a call to etcd into the storage's: the
// caller's own cancellation and a damaged value (ErrCorrupt: etcd
// answered) as they are, a request over etcd's size limit as a
// error wrapping config.ErrTooLarge, anything else (no answer within the timeout, no
// leader, connection refused, a permission) as an error wrapping
// config.ErrUnavailable that names the endpoints, recorded for Health.
func (s *EtcdStorage) failed(parent context.Context, op string, err error) error {
	if perr := parent.Err(); perr != nil {
		return perr
	}
	if errors.Is(err, config.ErrCorrupt) {
		return err
	}
	if tooLarge(err) {
		return fmt.Errorf("cluster store: %s: the request is larger than etcd accepts (its --max-request-bytes, 1.5 MiB by default): %w: %w", op, config.ErrTooLarge, err)
	}
	if errors.Is(err, context.DeadlineExceeded) {
		err = errors.New("no answer in time (is etcd running, with a quorum of its members, and do --etcd-cacert, --etcd-cert and --etcd-key match its TLS setup?)")
	}
	err = fmt.Errorf("%w: etcd at %s: %s: %v", config.ErrUnavailable, strings.Join(s.endpoints, ","), op, err)
	if s.fault.Swap(&err) == nil {
		s.log.Error("etcd unreachable: changes cannot be committed until it answers", "err", err)
	}
	return err
}

// ok records a call that etcd answered.
func (s *EtcdStorage) ok() {
	s.fromCache.Store(false)
	if s.fault.Swap(nil) != nil {
		s.log.Info("etcd answers again")
	}
}

// Health is nil while etcd answered the last call, else an error wrapping
// config.ErrUnavailable. It never blocks: it starts a probe (a read of
// P/current, which needs a quorum) at most once every ProbeEvery, whose
// outcome the following calls report.
func (s *EtcdStorage) Health() error {
	now := time.Now().UnixNano()
	last := s.lastProbe.Load()
	if now-last >= int64(ProbeEvery) && !s.closed.Load() && s.lastProbe.CompareAndSwap(last, now) && s.probing.CompareAndSwap(false, true) {
		go func() {
			defer s.probing.Store(false)
			ctx, cancel := context.WithTimeout(context.Background(), ProbeTimeout)
			defer cancel()
			if _, err := s.cli.Get(ctx, s.CurrentKey()); err != nil {
				if s.closed.Load() {
					return
				}
				s.failed(context.Background(), "probe", err)
				return
			}
			s.ok()
		}()
	}
	if f := s.fault.Load(); f != nil {
		return *f
	}
	return nil
}

// Reach is the first contact of a node's start: one read of P/current,
// bounded by DialTimeout, or by cachedReachTimeout when the node has a copy
// of the generation it last applied (it can start from it). It returns nil
// when etcd answered; else an error wrapping config.ErrUnavailable,
// recorded for Health: the start then does without etcd (Load answers from
// the node's copy within downReadTimeout) instead of waiting for it once
// per read.
func (s *EtcdStorage) Reach(ctx context.Context) error {
	budget := s.dialTimeout
	if s.cacheDir != "" && budget > cachedReachTimeout {
		if _, _, err := s.readCache(); err == nil {
			budget = cachedReachTimeout
		}
	}
	rctx, cancel := context.WithTimeout(ctx, budget)
	defer cancel()
	if _, err := s.cli.Get(rctx, s.CurrentKey(), clientv3.WithCountOnly()); err != nil {
		return s.failed(ctx, "first contact", err)
	}
	s.ok()
	return nil
}

// readBudget is the time a read of what only etcd holds (the revision
// history) gets: ReadTimeout, or downReadTimeout while the last call or
// probe found etcd unreachable (the UI's history then fails at once, not
// after 5 s each time; a reachable etcd answers well within it, and the
// probe clears the fault).
func (s *EtcdStorage) readBudget() time.Duration {
	if s.fault.Load() != nil && s.readTimeout > downReadTimeout {
		return downReadTimeout
	}
	return s.readTimeout
}

// readCurrent reads P/current: its generation and mod revision (0, 0:
// absent).
func (s *EtcdStorage) readCurrent(ctx context.Context) (currentKey, error) {
	r, err := s.cli.Get(ctx, s.CurrentKey())
	if err != nil {
		return currentKey{}, err
	}
	return s.parseCurrent(r.Kvs)
}

func (s *EtcdStorage) parseCurrent(kvs []*mvccpb.KeyValue) (currentKey, error) {
	if len(kvs) == 0 {
		s.wentBack(currentKey{})
		return currentKey{}, nil
	}
	var c current
	if err := json.Unmarshal(kvs[0].Value, &c); err != nil || c.Generation <= 0 {
		return currentKey{}, fmt.Errorf("%w: %s holds %.100q, not {\"generation\":N}", config.ErrCorrupt, s.CurrentKey(), kvs[0].Value)
	}
	k := currentKey{gen: c.Generation, mod: kvs[0].ModRevision}
	s.wentBack(k)
	s.knownMu.Lock()
	if k.mod > s.known.mod {
		s.known = k
	}
	s.knownMu.Unlock()
	return k, nil
}

// Load reads P/current and the revision it names. etcd unreachable: the
// node's cache (RememberApplied) when there is one for this prefix, so a
// node restarted while etcd is down runs what it ran. While etcd is known
// unreachable (Reach or another call failed), P/current gets readBudget.
func (s *EtcdStorage) Load(ctx context.Context) (*config.Config, config.RevisionInfo, error) {
	budget := s.readBudget()
	rctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	// A Revert may remove the revision P/current named between the two
	// reads: read again (bounded).
	for attempt := 0; ; attempt++ {
		cctx, ccancel := context.WithTimeout(rctx, budget)
		cur, err := s.readCurrent(cctx)
		ccancel()
		if err != nil {
			ferr := s.failed(ctx, "load "+s.CurrentKey(), err)
			if !errors.Is(ferr, config.ErrUnavailable) {
				return nil, config.RevisionInfo{}, ferr
			}
			return s.loadCache(ferr)
		}
		s.ok()
		if cur.gen == 0 {
			return nil, config.RevisionInfo{}, nil
		}
		r, err := s.cli.Get(rctx, s.revisionKey(cur.gen))
		if err != nil {
			return nil, config.RevisionInfo{}, s.failed(ctx, "load revision "+strconv.FormatInt(cur.gen, 10), err)
		}
		if len(r.Kvs) == 0 {
			if attempt < 2 {
				continue
			}
			return nil, config.RevisionInfo{}, fmt.Errorf("%w: %s names generation %d but %s is absent", config.ErrCorrupt, s.CurrentKey(), cur.gen, s.revisionKey(cur.gen))
		}
		info, c, err := decodeRevision(r.Kvs[0].Value, true)
		if err == nil && (info.Generation != cur.gen || c.Generation != cur.gen) {
			err = fmt.Errorf("holds generation %d, config generation %d", info.Generation, c.Generation)
		}
		if err != nil {
			return nil, config.RevisionInfo{}, fmt.Errorf("%w: %s: %w", config.ErrCorrupt, s.revisionKey(cur.gen), err)
		}
		s.loaded(cur)
		return c, info, nil
	}
}

// revisionEncoder encodes revisions with one gzip writer, reused: a new
// one allocates about 1 MB of compressor state, most of what a commit
// allocated. One encoding at a time.
type revisionEncoder struct {
	mu sync.Mutex
	zw *gzip.Writer
}

// encode is a revision as the state directory writes it (the header
// members, then "config"), gzip-compressed: a document of 10 000 servers
// is a megabyte or more of JSON, near etcd's request limit of 1.5 MiB, and
// compresses about tenfold.
func (e *revisionEncoder) encode(info config.RevisionInfo, doc []byte) ([]byte, error) {
	info.Time = info.Time.UTC()
	hdr, err := json.Marshal(info)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	buf.Grow(len(doc)/8 + 1024)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.zw == nil {
		if e.zw, err = gzip.NewWriterLevel(&buf, gzip.BestSpeed); err != nil {
			return nil, err
		}
	} else {
		e.zw.Reset(&buf)
	}
	zw := e.zw
	zw.Write(hdr[:len(hdr)-1]) // without the closing brace
	zw.Write([]byte(`,"config":`))
	zw.Write(doc)
	zw.Write([]byte("}\n"))
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// revisionReader reads a stored revision: gzip, or plain JSON (written by
// hand or by another tool).
func revisionReader(v []byte) (io.Reader, error) {
	if len(v) >= 2 && v[0] == 0x1f && v[1] == 0x8b {
		return gzip.NewReader(bytes.NewReader(v))
	}
	return bytes.NewReader(v), nil
}

// decodeRevision decodes a stored revision: its header, and its config
// decoded strictly (config.DecodeBytes) and normalized, validated with an
// empty Env when validate is set (the current document; a kept revision
// is validated when it is restored).
func decodeRevision(v []byte, validate bool) (config.RevisionInfo, *config.Config, error) {
	var info config.RevisionInfo
	r, err := revisionReader(v)
	if err != nil {
		return info, nil, err
	}
	data, err := io.ReadAll(io.LimitReader(r, maxRevisionBytes+1))
	if err != nil {
		return info, nil, err
	}
	if len(data) > maxRevisionBytes {
		return info, nil, fmt.Errorf("larger than %d bytes uncompressed", maxRevisionBytes)
	}
	var parts struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(data, &parts); err != nil {
		return info, nil, fmt.Errorf("damaged revision: %w", err)
	}
	if err := json.Unmarshal(data, &info); err != nil {
		return info, nil, fmt.Errorf("damaged revision header: %w", err)
	}
	if len(parts.Config) == 0 || string(parts.Config) == "null" {
		return info, nil, errors.New("no config member")
	}
	var c config.Config
	if err := config.DecodeBytes(parts.Config, &c); err != nil {
		// %v: a DecodeError is about a request body; this is the store's.
		return info, nil, fmt.Errorf("damaged revision: %v", err)
	}
	if err := c.Migrate(); err != nil {
		return info, nil, err
	}
	c.Normalize()
	if validate {
		if err := config.Validate(&c, config.Env{}); err != nil {
			return info, nil, err
		}
	}
	return info, &c, nil
}

// decodeHeader reads the header members of a stored revision, which
// precede "config", without decoding the config.
func decodeHeader(v []byte) (config.RevisionInfo, error) {
	var info config.RevisionInfo
	r, err := revisionReader(v)
	if err != nil {
		return info, err
	}
	dec := json.NewDecoder(r)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return info, errors.New("not a revision object")
	}
	hdr := map[string]json.RawMessage{}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return info, err
		}
		key, _ := t.(string)
		if key == "config" {
			break // written last: the header is complete
		}
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return info, fmt.Errorf("%s: %w", key, err)
		}
		hdr[key] = raw
	}
	b, err := json.Marshal(hdr)
	if err == nil {
		err = json.Unmarshal(b, &info)
	}
	return info, err
}

// Commit writes the revision, the bundles and P/current in one Txn that
// compares P/current's mod revision with the one of generation prev
// (prev 0: P/current must not exist) and deletes the revisions older than
// the MaxRevisions kept. The whole write gets WriteTimeout.
func (s *EtcdStorage) Commit(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error {
	if info.Generation != prev+1 {
		return fmt.Errorf("cluster store: commit of generation %d on %d", info.Generation, prev)
	}
	return s.commit(ctx, prev, info, doc, certs, nil)
}

// Reseed is Commit of any generation above prev (config.Storage.Reseed):
// the same Txn, conditional on P/current's mod revision as read for prev
// (on its absence when prev is 0).
func (s *EtcdStorage) Reseed(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error {
	if info.Generation <= prev {
		return fmt.Errorf("cluster store: reseed of generation %d on %d", info.Generation, prev)
	}
	return s.commit(ctx, prev, info, doc, certs, nil)
}

// commit is Commit; delta (nil: none) is the change from prev (a
// config.Delta's JSON), put in P/current beside the generation when the
// document this storage holds for prev is the one the Txn compares
// (currentValue).
func (s *EtcdStorage) commit(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte, delta []byte) error {
	val, err := s.enc.encode(info, doc)
	if err != nil {
		return fmt.Errorf("cluster store: encode revision %d: %w", info.Generation, err)
	}
	cur, _ := json.Marshal(current{Generation: info.Generation})
	ops := []clientv3.Op{
		clientv3.OpPut(s.revisionKey(info.Generation), string(val)),
		clientv3.OpPut(s.CurrentKey(), string(cur)),
	}
	if first := info.Generation - config.MaxRevisions + 1; first > 0 {
		ops = append(ops, clientv3.OpDelete(s.revisionKey(0), clientv3.WithRange(s.revisionKey(first))))
	}
	var bundles []clientv3.Op
	for _, sum := range sortedKeys(certs) {
		if !isHexSHA256(sum) {
			return fmt.Errorf("cluster store: certificate bundle %.80q: not a chain_sha256", sum)
		}
		bundles = append(bundles, clientv3.OpPut(s.certKey(sum), string(certs[sum])))
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	if len(bundles) <= txnBundles {
		ops = append(ops, bundles...)
	} else {
		// More than a Txn takes (etcd's --max-txn-ops, 128): the bundles
		// go first, in Txns of their own. Named by their hash, they are
		// the same bytes whoever writes them; if the commit then fails
		// they are left unreferenced, as the state directory leaves
		// them, until the key prefix is cleaned up.
		for b := range slices.Chunk(bundles, txnBundles) {
			if _, err := s.cli.Txn(wctx).Then(b...).Commit(); err != nil {
				return s.failed(ctx, "write certificate bundles", err)
			}
		}
	}
	w := swap{op: "commit generation " + strconv.FormatInt(info.Generation, 10), prev: prev, next: info.Generation, ops: ops,
		proof: s.revisionKey(info.Generation), proofVal: val, commit: true}
	if delta != nil {
		w.current = func(baseMod int64) clientv3.Op {
			return clientv3.OpPut(s.CurrentKey(), s.currentValue(info.Generation, prev, baseMod, delta))
		}
	}
	if err := s.swapCurrent(ctx, wctx, w); err != nil {
		return err
	}
	s.cacheMu.Lock()
	maps.Copy(s.bundles, certs)
	s.cacheMu.Unlock()
	if info.Generation > config.MaxRevisions {
		s.maybePruneCertificates() // the oldest revision went
	}
	return nil
}

// swap is a conditional change of P/current: ops run in a Txn if
// P/current still holds generation prev (absent when prev is 0), after
// which it holds next (absent when 0). proof is a key whose value is
// proofVal (nil: absent) once ops applied: it tells whether an attempt
// whose answer was lost took effect.
type swap struct {
	op         string
	prev, next int64
	ops        []clientv3.Op
	proof      string
	proofVal   []byte
	// current, when set, makes the put of P/current (ops[1]) of each
	// attempt from the mod revision compared (the delta's base).
	current func(baseMod int64) clientv3.Op
	// commit: the Txn makes a new document current (Commit, Reseed; not
	// Revert), the one this storage then holds (doc).
	commit bool
}

// swapCurrent runs w (an error wrapping ErrRace when prev is no longer
// current), within ctx (parent is the caller's). The mod revision
// compared is the one this storage last saw for prev; when it is stale
// (another node reverted and committed prev again) the Txn's Else reads
// the current one, and the Txn is tried once more.
//
// Each attempt gets txnAttemptTimeout: a proposal a follower forwarded to
// a leader that just crashed is lost, and etcd answers it only after its
// own request timeout (7 s), past the write's budget; the next attempt,
// once a new leader is elected (about a second), goes through. An attempt
// without an answer may still have applied: the next one reads proof and
// P/current in its Else to tell.
func (s *EtcdStorage) swapCurrent(parent, ctx context.Context, w swap) error {
	s.knownMu.Lock()
	k := s.known
	s.knownMu.Unlock()
	// Also when prev is 0: what this storage saw may be gone (etcd
	// wiped), and only a read tells.
	if k.gen != w.prev {
		var err error
		if k, err = s.readCurrent(ctx); err != nil {
			return s.failed(parent, w.op, err)
		}
	}
	raced := func(k currentKey) error {
		return fmt.Errorf("cluster store: %s: generation %d is current, not %d: %w", w.op, k.gen, w.prev, config.ErrRace)
	}
	uncertain := false
	stale := false
	for {
		if k.gen != w.prev && !uncertain {
			s.ok()
			return raced(k)
		}
		cmp := clientv3.Compare(clientv3.CreateRevision(s.CurrentKey()), "=", 0)
		if w.prev > 0 {
			cmp = clientv3.Compare(clientv3.ModRevision(s.CurrentKey()), "=", k.mod)
		}
		els := []clientv3.Op{clientv3.OpGet(s.CurrentKey())}
		if uncertain {
			els = append(els, clientv3.OpGet(w.proof))
		}
		if w.current != nil {
			w.ops[1] = w.current(k.mod)
		}
		actx, cancel := context.WithTimeout(ctx, txnAttemptTimeout)
		r, err := s.cli.Txn(actx).If(cmp).Then(w.ops...).Else(els...).Commit()
		cancel()
		if err != nil {
			if dl, ok := ctx.Deadline(); parent.Err() != nil || ctx.Err() != nil || (ok && time.Until(dl) < 100*time.Millisecond) || !retryable(err) {
				return s.failed(parent, w.op, err)
			}
			s.log.Warn("etcd did not answer a write, trying again", "op", w.op, "err", err)
			uncertain = true
			continue
		}
		s.ok()
		if !r.Succeeded {
			if k, err = s.parseCurrent(r.Responses[0].GetResponseRange().Kvs); err != nil {
				return err
			}
			if !uncertain || !s.applied(w, k, r.Responses[1].GetResponseRange().Kvs) {
				if stale || k.gen != w.prev {
					return raced(k)
				}
				stale = true // prev at another mod revision: once more
				continue
			}
			// An earlier attempt applied: done.
		}
		switch {
		case !r.Succeeded:
			// Applied by an earlier attempt: k is P/current as read
			// (this write's generation, or a later one's), never this
			// generation paired with a later one's mod revision.
		case w.next > 0:
			k = currentKey{gen: w.next, mod: r.Header.Revision}
		default:
			k = currentKey{}
		}
		s.knownMu.Lock()
		s.known = k
		// The document the Store holds from now on (a commit's) is
		// P/current's at this mod revision; after a revert, or a
		// commit applied by an earlier attempt (k may be a later
		// write's), this storage does not know which: unknown.
		s.doc = currentKey{}
		if w.commit && r.Succeeded {
			s.doc = k
		}
		s.knownMu.Unlock()
		return nil
	}
}

// applied reports whether w took effect: proof holds proofVal, the bytes
// only this write puts (P/current may name a later generation: another
// node committed on this one since); without proofVal, P/current holds
// w.next (is absent when 0) and proof is absent.
func (s *EtcdStorage) applied(w swap, cur currentKey, proof []*mvccpb.KeyValue) bool {
	if w.proofVal == nil {
		return cur.gen == w.next && len(proof) == 0
	}
	return len(proof) == 1 && bytes.Equal(proof[0].Value, w.proofVal)
}

// tooLarge is a request over a size limit: etcd's (--max-request-bytes),
// or gRPC's on either side (the client's 2 MiB send limit, the server's
// receive limit), which say "larger than max" with ResourceExhausted
// (etcd's NOSPACE and too-many-requests use that code too).
func tooLarge(err error) bool {
	if errors.Is(err, rpctypes.ErrRequestTooLarge) || errors.Is(err, rpctypes.ErrGRPCRequestTooLarge) {
		return true
	}
	st, ok := status.FromError(err)
	return ok && st.Code() == codes.ResourceExhausted && strings.Contains(st.Message(), "larger than max")
}

// retryable is an error after which another attempt of a write may
// succeed: no answer in time, no leader, a lost connection. Not a request
// too large, a permission or an invalid request.
func retryable(err error) bool {
	switch {
	case tooLarge(err),
		errors.Is(err, rpctypes.ErrPermissionDenied), errors.Is(err, rpctypes.ErrGRPCPermissionDenied),
		errors.Is(err, rpctypes.ErrNoSpace), errors.Is(err, rpctypes.ErrGRPCNoSpace),
		errors.Is(err, context.Canceled):
		return false
	}
	return true
}

// Revert makes prev current again and removes revision gen, if gen is
// still current.
func (s *EtcdStorage) Revert(ctx context.Context, prev *config.Config, gen int64) error {
	if prev == nil || prev.Generation != gen-1 {
		return fmt.Errorf("cluster store: revert of generation %d to a document of another generation", gen)
	}
	ops := []clientv3.Op{clientv3.OpDelete(s.revisionKey(gen))}
	if prev.Generation == 0 {
		ops = append(ops, clientv3.OpDelete(s.CurrentKey()))
	} else {
		cur, _ := json.Marshal(current{Generation: prev.Generation})
		ops = append(ops, clientv3.OpPut(s.CurrentKey(), string(cur)))
	}
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	err := s.swapCurrent(ctx, wctx, swap{op: "revert generation " + strconv.FormatInt(gen, 10), prev: gen, next: prev.Generation, ops: ops,
		proof: s.revisionKey(gen)})
	if err == nil {
		s.maybePruneCertificates() // the bundles only gen used
	}
	return err
}

// revisionsPage is how many revisions one read of Revisions brings (a
// value is a whole document, gzipped: 16 of 10 000 servers are a few
// MiB). A node's first listing of the MaxRevisions kept costs 7 round
// trips, not 100: one read per revision, one after another, overran
// ReadTimeout on a loaded machine ("read revision 35: no answer in
// time"), which also marked etcd unreachable.
const revisionsPage = 16

// Revisions lists the kept revisions, newest first: the keys alone, then
// the headers of the revisions this storage has not read yet (or that
// were written again since), revisionsPage a read.
func (s *EtcdStorage) Revisions(ctx context.Context) ([]config.RevisionInfo, error) {
	rctx, cancel := context.WithTimeout(ctx, s.readBudget())
	defer cancel()
	from := s.prefix + keyRevisions
	r, err := s.cli.Get(rctx, from, clientv3.WithPrefix(), clientv3.WithKeysOnly(), clientv3.WithSort(clientv3.SortByKey, clientv3.SortDescend))
	if err != nil {
		return nil, s.failed(ctx, "list revisions", err)
	}
	s.ok()
	gens := make([]int64, 0, len(r.Kvs))
	var lo, hi int64 // the generations to read, from lo to hi (0: none)
	s.cacheMu.Lock()
	for _, kv := range r.Kvs {
		gen, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), from), 10, 64)
		if err != nil {
			continue
		}
		gens = append(gens, gen)
		if h, ok := s.headers[gen]; !ok || h.mod != kv.ModRevision {
			if hi == 0 {
				hi = gen // newest first: the highest
			}
			lo = gen
		}
	}
	s.cacheMu.Unlock()
	if hi != 0 {
		if err := s.readHeaders(rctx, ctx, lo, hi); err != nil {
			return nil, err
		}
	}
	out := make([]config.RevisionInfo, 0, len(gens))
	seen := make(map[int64]bool, len(gens))
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	for _, gen := range gens {
		// Not cached: reverted since the listing, or unreadable.
		if h, ok := s.headers[gen]; ok {
			seen[gen] = true
			out = append(out, h.info)
		}
	}
	for g := range s.headers {
		if !seen[g] {
			delete(s.headers, g)
		}
	}
	return out, nil
}

// readHeaders reads the revisions of generations lo to hi, revisionsPage
// a read, and caches their headers; a generation of the range no longer
// stored (reverted) or unreadable leaves the cache. parent is the
// caller's context, ctx its read budget.
func (s *EtcdStorage) readHeaders(ctx, parent context.Context, lo, hi int64) error {
	from := s.prefix + keyRevisions
	key, end := s.revisionKey(lo), s.revisionKey(hi)+"\x00"
	read := make(map[int64]cachedHeader, hi-lo+1)
	for {
		g, err := s.cli.Get(ctx, key, clientv3.WithRange(end), clientv3.WithLimit(revisionsPage))
		if err != nil {
			return s.failed(parent, "read revisions "+strconv.FormatInt(lo, 10)+" to "+strconv.FormatInt(hi, 10), err)
		}
		for _, kv := range g.Kvs {
			gen, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), from), 10, 64)
			if err != nil {
				continue
			}
			info, err := decodeHeader(kv.Value)
			if err == nil && info.Generation != gen {
				err = fmt.Errorf("holds generation %d", info.Generation)
			}
			if err != nil {
				s.log.Warn("unreadable revision skipped", "key", string(kv.Key), "err", err)
				continue
			}
			read[gen] = cachedHeader{mod: kv.ModRevision, info: info}
		}
		if !g.More || len(g.Kvs) == 0 {
			break
		}
		key = string(g.Kvs[len(g.Kvs)-1].Key) + "\x00"
	}
	s.cacheMu.Lock()
	defer s.cacheMu.Unlock()
	for gen := range s.headers {
		if gen >= lo && gen <= hi {
			delete(s.headers, gen)
		}
	}
	for gen, h := range read {
		s.headers[gen] = h
	}
	return nil
}

// Revision returns the config of a kept revision.
func (s *EtcdStorage) Revision(ctx context.Context, gen int64) (*config.Config, error) {
	if gen <= 0 {
		return nil, fmt.Errorf("revision %d: %w", gen, config.ErrNotFound)
	}
	rctx, cancel := context.WithTimeout(ctx, s.readBudget())
	defer cancel()
	r, err := s.cli.Get(rctx, s.revisionKey(gen))
	if err != nil {
		return nil, s.failed(ctx, "read revision "+strconv.FormatInt(gen, 10), err)
	}
	s.ok()
	if len(r.Kvs) == 0 {
		return nil, fmt.Errorf("revision %d: %w", gen, config.ErrNotFound)
	}
	info, c, err := decodeRevision(r.Kvs[0].Value, false)
	if err == nil && (info.Generation != gen || c.Generation != gen) {
		err = fmt.Errorf("holds generation %d, config generation %d", info.Generation, c.Generation)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster store: %s: %w", s.revisionKey(gen), err)
	}
	return c, nil
}

// CertificateBundle returns the bundle of chainSHA256: from memory (a
// bundle never changes), else etcd, else (etcd unreachable) the node's
// cache of the bundles its applied generation uses.
func (s *EtcdStorage) CertificateBundle(ctx context.Context, chainSHA256 string) ([]byte, error) {
	if !isHexSHA256(chainSHA256) {
		return nil, fmt.Errorf("certificate bundle %.80q: not a chain_sha256: %w", chainSHA256, config.ErrNotFound)
	}
	s.cacheMu.Lock()
	b, ok := s.bundles[chainSHA256]
	s.cacheMu.Unlock()
	if ok {
		return b, nil
	}
	// The node's cache holds the same bytes (the name is the chain's
	// hash, the key determined by the leaf): no wait on an etcd that is
	// down for each certificate of a node starting from its cache.
	if b, err := s.cachedBundle(chainSHA256); err == nil {
		s.rememberBundle(chainSHA256, b)
		return b, nil
	}
	rctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	r, err := s.cli.Get(rctx, s.certKey(chainSHA256))
	if err != nil {
		return nil, s.failed(ctx, "read certificate "+chainSHA256, err)
	}
	s.ok()
	if len(r.Kvs) == 0 {
		return nil, fmt.Errorf("certificate bundle %s: %w", chainSHA256, config.ErrNotFound)
	}
	b = r.Kvs[0].Value
	s.rememberBundle(chainSHA256, b)
	return b, nil
}

func (s *EtcdStorage) rememberBundle(sum string, b []byte) {
	s.cacheMu.Lock()
	s.bundles[sum] = b
	s.cacheMu.Unlock()
}

// GetKey reads the key name under the prefix (Key(name)): its value and
// mod revision (nil, 0 when absent).
func (s *EtcdStorage) GetKey(ctx context.Context, name string) ([]byte, int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	defer cancel()
	r, err := s.cli.Get(rctx, s.Key(name))
	if err != nil {
		return nil, 0, s.failed(ctx, "read "+s.Key(name), err)
	}
	s.ok()
	if len(r.Kvs) == 0 {
		return nil, 0, nil
	}
	return r.Kvs[0].Value, r.Kvs[0].ModRevision, nil
}

// EditKey replaces the value of the key name under the prefix with what
// edit makes of the current one (nil when absent; edit returning nil
// deletes the key), conditional on the key's mod revision: a key another
// writer changed meanwhile is read and edited again, up to 5 times (then
// an error wrapping config.ErrRace). edit may run more than once. An
// error of edit is returned as is, nothing written. WriteTimeout in all.
func (s *EtcdStorage) EditKey(ctx context.Context, name string, edit func(old []byte) ([]byte, error)) error {
	key := s.Key(name)
	wctx, cancel := context.WithTimeout(ctx, WriteTimeout)
	defer cancel()
	r, err := s.cli.Get(wctx, key)
	if err != nil {
		return s.failed(ctx, "read "+key, err)
	}
	kvs := r.Kvs
	for attempt := 1; ; attempt++ {
		var old []byte
		var mod int64
		if len(kvs) > 0 {
			old, mod = kvs[0].Value, kvs[0].ModRevision
		}
		val, err := edit(old)
		if err != nil {
			s.ok()
			return err
		}
		op := clientv3.OpDelete(key)
		if val != nil {
			op = clientv3.OpPut(key, string(val))
		}
		t, err := s.cli.Txn(wctx).If(clientv3.Compare(clientv3.ModRevision(key), "=", mod)).Then(op).Else(clientv3.OpGet(key)).Commit()
		if err != nil {
			return s.failed(ctx, "write "+key, err)
		}
		s.ok()
		if t.Succeeded {
			return nil
		}
		if attempt == editAttempts {
			return fmt.Errorf("cluster store: %s changed under %d edits in a row: %w", key, editAttempts, config.ErrRace)
		}
		kvs = t.Responses[0].GetResponseRange().Kvs
	}
}

func isHexSHA256(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	return keys
}
