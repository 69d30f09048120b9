package config

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// Store is the desired state as the API and cmd/spliced see it: the current
// config (Current, lock-free) and the writes (Update), over a Storage that
// keeps the documents (DirStorage: the state directory; core/cluster's
// EtcdStorage: etcd). Writes through one Store are serialised by Update;
// writes of several Stores over one storage (several nodes) are ordered by
// the storage's conditional Commit, and Update retries one that lost.
type Store struct {
	st  Storage
	dir string // the DirStorage's directory, "" for another storage
	log *slog.Logger

	mu  sync.Mutex             // serialises Update and Refresh
	cur atomic.Pointer[Config] // immutable snapshot
}

// StoreOptions tune OpenStore.
type StoreOptions struct {
	// Node names this node in the revision of a bootstrap it commits
	// (RevisionInfo.Node); "" on a single node.
	Node string
}

// MaxUpdateAttempts bounds how often Update builds and commits a write that
// keeps losing to other writers (ErrRace) before giving up. Each lost
// attempt is another writer's commit (the cluster progresses), and the
// write's context bounds the time; the count must cover a burst: the loser
// refreshes before it tries again while a winner, up to date, commits its
// next queued write at once, so a node loses about as many times in a row
// as the other nodes have writes queued (13 for 150 writes sent at once to
// three nodes; with 5 allowed, a few percent answered 409).
const MaxUpdateAttempts = 100

// UpdateOptions control one Update.
type UpdateOptions struct {
	// DryRun computes and returns the plan; nothing is persisted or applied.
	DryRun bool
	// Env is the machine the config is validated for.
	Env Env
	// Apply hands the new config to the data plane after it was committed;
	// an error reverts the commit (Storage.Revert). nil = nothing to apply:
	// the committed generation becomes Current (cluster mode: each node
	// applies what it reads from the storage, and a committed write is
	// never reverted since other nodes may run it already).
	Apply func(ctx context.Context, c *Config) error
	// Certificates are the bundles (ParseCertificate) of certificates the
	// update adds, by chain_sha256: taken as stored by the check of the
	// certificates' files, and committed with the revision that refers to
	// them (only those the new config refers to); a dry run writes nothing.
	Certificates map[string][]byte
	// Actor names who made the change (the API's token name); kept in the
	// revision's header (RevisionInfo.Actor).
	Actor string
	// Node names the node that took the write (cluster mode); kept as
	// RevisionInfo.Node.
	Node string
	// RestoreOf is the generation a restore brings back (0: not a
	// restore); kept as RevisionInfo.RestoreOf.
	RestoreOf int64
	// ShareServers gives mutate a copy of Current whose backends' lists
	// of servers are Current's own (Current stays immutable): mutate
	// must not write into such a list, and replaces it first
	// (Config.OwnServers) to change, add or remove a server, nor into a
	// server of it: a changed server is a changed copy put in its place
	// (Config.OwnServer). Then a write copies only the pointers of the
	// list it changes and the server it changes, not every server of the
	// document, and what is compared after (validation, plan, delta,
	// the data plane) skips the lists and servers it did not change at
	// once.
	ShareServers bool
	// AuditRecord, when set, is called once the write is about to be
	// committed and returns the write's audit record (JSON; nil: none),
	// which a storage that can keeps with its revision: the state
	// directory, in the journal line that commits it (one fdatasync for
	// both) and the revision file, as the member "audit". The API's audit
	// trail reads it back at start for a write a crash stopped between
	// its commit and its entry in audit.log (DirStorage.RevisionAudits).
	AuditRecord func() []byte
}

// Result of an Update.
type Result struct {
	// Generation is the generation now current: the new one after an
	// accepted change, the unchanged one after a dry run or an empty plan.
	Generation int64 `json:"generation"`
	Plan       Plan  `json:"plan"`
	// Config is the config the update produced (for a dry run, the one it
	// would produce). Immutable, like Current.
	Config *Config    `json:"-"`
	spans  []listSpan // of Config against the one it was built on (ChangeSpans)
}

// RevisionInfo describes one persisted revision. Actor, Node and RestoreOf
// are absent from revisions written before they existed (and from the ones
// the store writes itself: bootstrap, a missing revision of the current
// config).
type RevisionInfo struct {
	Generation int64     `json:"generation"`
	Time       time.Time `json:"time"`
	Summary    string    `json:"summary"`
	// Actor is who made the change (UpdateOptions.Actor).
	Actor string `json:"actor,omitempty"`
	// Node is the node that took the write (UpdateOptions.Node); absent on
	// a single node.
	Node string `json:"node,omitempty"`
	// RestoreOf is the generation this one restored (UpdateOptions.RestoreOf).
	RestoreOf int64 `json:"restore_of,omitempty"`
}

// Open is OpenStore over NewDirStorage(dir): the state directory, created
// (mode 0700) if needed and checked as NewDirStorage says (a config.json
// that does not decode or validate refuses the start with ErrCorrupt,
// naming the newest revision that parses). Without config.json, the
// bootstrap document (decoded strictly, normalized, validated) becomes
// generation 1, or, without one, an empty config of generation 0 is
// persisted so the directory is initialised.
func Open(dir, bootstrap string, log *slog.Logger) (*Store, error) {
	d, err := NewDirStorage(dir, log)
	if err != nil {
		return nil, err
	}
	return OpenStore(d, bootstrap, log, StoreOptions{})
}

// OpenStore makes a Store over st, whose current document becomes Current:
//
//   - st holds a document: it is Current (bootstrap is ignored);
//   - st holds none, bootstrap != "": the bootstrap document (decoded
//     strictly, normalized, validated with an empty Env) is committed as
//     generation 1 on 0; if another node seeded the storage first
//     (ErrRace), what it wrote is loaded instead;
//   - st holds none, no bootstrap: an empty config of generation 0
//     (persisted as config.json by a DirStorage; nothing is written to
//     another storage: the first Update commits generation 1).
//
// A Load that fails (an error wrapping ErrUnavailable, ErrCorrupt...) fails
// OpenStore with that error.
func OpenStore(st Storage, bootstrap string, log *slog.Logger, o StoreOptions) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Store{st: st, log: log.With("store", st.Kind())}
	if d, ok := st.(*DirStorage); ok {
		s.dir = d.Dir()
		s.log = log.With("state_dir", s.dir)
	}
	ctx := context.Background()
	c, _, err := st.Load(ctx)
	if err != nil {
		return nil, err
	}
	if c != nil {
		s.cur.Store(c)
		s.log.Info("config resumed", "generation", c.Generation, "frontends", len(c.Frontends), "backends", len(c.Backends))
		return s, nil
	}
	if bootstrap == "" {
		c = &Config{}
		c.Normalize()
		if d, ok := st.(*DirStorage); ok {
			if err := d.initEmpty(c); err != nil {
				return nil, err
			}
		}
		s.cur.Store(c)
		s.log.Info("config initialised", "generation", c.Generation)
		return s, nil
	}
	if c, err = s.bootstrap(ctx, bootstrap, o.Node); err != nil {
		return nil, err
	}
	s.cur.Store(c)
	s.log.Info("config initialised", "generation", c.Generation, "bootstrap", bootstrap)
	return s, nil
}

// bootstrap commits the document of the file path as generation 1, or
// loads what another node committed first.
func (s *Store) bootstrap(ctx context.Context, path, node string) (*Config, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("config store: bootstrap: %w", err)
	}
	c, err := loadConfig(b, false)
	if err != nil {
		return nil, fmt.Errorf("config store: bootstrap %s: %w", path, err)
	}
	c.Generation = 1
	doc, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("config store: encode bootstrap %s: %w", path, err)
	}
	info := RevisionInfo{Generation: 1, Time: time.Now(), Summary: "bootstrap from " + path + ": " + Diff(nil, c).Summary(), Node: node}
	err = s.st.Commit(ctx, 0, info, doc, nil)
	if !errors.Is(err, ErrRace) {
		return c, err
	}
	won, _, lerr := s.st.Load(ctx)
	if lerr != nil {
		return nil, lerr
	}
	if won == nil {
		return nil, fmt.Errorf("config store: bootstrap lost a race but the storage holds no document: %w", err)
	}
	s.log.Info("another node seeded the store first: its document is used, not the bootstrap", "generation", won.Generation)
	return won, nil
}

// loadConfig decodes, normalizes and validates a document: a stored one
// (config.json) is migrated first (Migrate), a bootstrap file, written by
// an operator for this version, is not. Env is empty: CPU ids of another
// machine are the pin code's concern.
func loadConfig(data []byte, stored bool) (*Config, error) {
	var c Config
	if err := DecodeBytes(data, &c); err != nil {
		return nil, err
	}
	if stored {
		if err := c.Migrate(); err != nil {
			return nil, err
		}
	}
	c.Normalize()
	if err := Validate(&c, Env{}); err != nil {
		return nil, err
	}
	return &c, nil
}

// Dir is the absolute path of the state directory when the storage is a
// DirStorage, "" otherwise (etcd: the node's state directory is the
// caller's --state-dir, which the Store does not know).
func (s *Store) Dir() string { return s.dir }

// Storage is the storage the store writes to.
func (s *Store) Storage() Storage { return s.st }

// Current is the current config. It is shared: never modify it; Clone first.
func (s *Store) Current() *Config { return s.cur.Load() }

// Refresh loads the storage's current document and makes it Current if its
// generation is newer than Current's (never older: changed is false then).
// Cluster nodes call it when the storage says another node committed; on a
// single node nothing else writes. It waits for an Update in progress.
func (s *Store) Refresh(ctx context.Context) (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	changed, _, err = s.refreshLocked(ctx)
	return changed, err
}

// RefreshIfBehind is Refresh unless Current is already generation gen or
// newer, checked under the write lock: a cluster node told by its watch
// that the store holds gen does not load (decode, validate) the whole
// document again when gen is its own write, whose Update was still
// running when the watch event came (at 10 000 servers that load was half
// of the node's CPU per write).
func (s *Store) RefreshIfBehind(ctx context.Context, gen int64) (changed bool, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c := s.cur.Load(); c != nil && c.Generation >= gen {
		return false, nil
	}
	changed, _, err = s.refreshLocked(ctx)
	return changed, err
}

// refreshLocked adopts the storage's current when it is newer; stored is
// its generation (0: the storage holds none).
func (s *Store) refreshLocked(ctx context.Context) (changed bool, stored int64, err error) {
	c, _, err := s.st.Load(ctx)
	if err != nil || c == nil {
		return false, 0, err
	}
	if c.Generation <= s.cur.Load().Generation {
		return false, c.Generation, nil
	}
	s.cur.Store(c)
	s.log.Info("config refreshed from the store", "generation", c.Generation)
	return true, c.Generation, nil
}

// Update changes the config, under the store's write lock. One attempt:
//
//  1. clone the current config and call mutate on the clone (its error is
//     returned unchanged; a *StorageError among it is also recorded as the
//     state directory's fault, see StorageHealth);
//  2. Normalize, Validate (a *ValidationError), check the certificates'
//     bundles, Diff against the current;
//  3. DryRun: return the plan, nothing persisted;
//  4. an empty plan creates no generation: the current generation and the
//     empty plan are returned, nothing is written or applied;
//  5. otherwise commit generation+1 on the current one (Storage.Commit).
//
// A commit that lost to another writer (ErrRace) refreshes Current and
// runs the attempt again, mutate included, at most MaxUpdateAttempts times
// (then an error wrapping ErrRace): mutate must be repeatable, deriving
// the change from the config it is given, not from a previous call.
//
// After the commit, o.Apply (when set) gets the new config; if it fails,
// the commit is reverted (Storage.Revert) and Apply's error returned:
// storage, memory and the data plane all still hold the previous
// generation. Without o.Apply, the committed generation is Current.
func (s *Store) Update(ctx context.Context, mutate func(c *Config) error, o UpdateOptions) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for attempt := 1; ; attempt++ {
		res, cur, raced, err := s.attempt(ctx, mutate, o)
		switch {
		case err == nil && cur == nil: // dry run or empty plan
			return res, nil
		case err == nil:
			return s.finish(ctx, cur, res, o)
		case !raced:
			return nil, err
		case attempt >= MaxUpdateAttempts:
			return nil, fmt.Errorf("config store: the write lost to other writers %d times, retry it: %w", attempt, err)
		}
		s.log.Info("the write lost to another writer, building it again on the newer generation", "attempt", attempt)
		_, stored, rerr := s.refreshLocked(ctx)
		if rerr != nil {
			return nil, rerr
		}
		if own := s.cur.Load().Generation; stored < own {
			if herr := s.st.Health(); herr != nil {
				// Unreachable since the race: what Load answered
				// is the node's cache, not the store's current.
				return nil, herr
			}
			// No other writer: the storage went back (etcd restored
			// from an older snapshot, its keys deleted). Built on
			// what it holds, the write would undo what the nodes run.
			return nil, fmt.Errorf("%w: it holds generation %d, this node generation %d (was etcd restored from an older snapshot, "+
				"or the keys under its prefix deleted?); nothing was committed and the nodes keep running what they run: %w",
				ErrStoreBehind, stored, own, err)
		}
	}
}

// deltaCommitter is a Storage that can store a generation as the change
// from the one before (DirStorage.CommitDelta).
type deltaCommitter interface {
	CommitDelta(ctx context.Context, cur, next *Config, info RevisionInfo, certs map[string][]byte) error
}

// attempt builds the write on Current and commits it. cur is the config it
// was built on when a generation was committed, nil otherwise; raced says
// that err is the Commit's ErrRace (not an error of mutate's that wraps
// it).
func (s *Store) attempt(ctx context.Context, mutate func(c *Config) error, o UpdateOptions) (res *Result, cur *Config, raced bool, err error) {
	cur = s.cur.Load()
	var next *Config
	if o.ShareServers {
		next = cur.cloneSharingServers()
	} else {
		next = cur.Clone()
	}
	if err := mutate(next); err != nil {
		// mutate may write in the state directory first (api's audit
		// record): a refusal there is the directory's fault like ours.
		var se *StorageError
		if d, ok := s.st.(*DirStorage); ok && errors.As(err, &se) {
			d.noteFault(se)
		}
		return nil, nil, false, err
	}
	next.Normalize()
	next.Generation = cur.Generation // clients do not choose generations
	// cur passed Validate when it became current: its unchanged servers
	// need not pass the field rules again.
	// Where the servers of each backend changed, compared once for
	// validation, the plan and the delta.
	spans := serverSpans(cur, next)
	if err := validate(next, o.Env, cur, spans); err != nil {
		return nil, nil, false, err
	}
	if err := s.checkCertificateFiles(cur, next, o.Certificates); err != nil {
		return nil, nil, false, err
	}
	plan := diff(cur, next, true, spans) // both validated: names are unique
	if o.DryRun {
		return &Result{Generation: cur.Generation, Plan: plan, Config: next}, nil, false, nil
	}
	if plan.Empty() {
		return &Result{Generation: cur.Generation, Plan: plan, Config: cur}, nil, false, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, nil, false, err
	}
	next.Generation = cur.Generation + 1
	var certs map[string][]byte
	for i := range next.Certificates {
		for _, sum := range next.Certificates[i].Files() {
			if b, ok := o.Certificates[sum]; ok {
				if certs == nil {
					certs = map[string][]byte{}
				}
				certs[sum] = b
			}
		}
	}
	info := RevisionInfo{Generation: next.Generation, Time: time.Now(), Summary: plan.Summary(), Actor: o.Actor, Node: o.Node, RestoreOf: o.RestoreOf}
	if d, ok := s.st.(*DirStorage); ok {
		// the state directory: most writes as the change alone
		var rec []byte
		if o.AuditRecord != nil {
			rec = o.AuditRecord()
		}
		err = d.commitDelta(ctx, cur, next, info, certs, spans, rec)
	} else if ds, ok := s.st.(deltaCommitter); ok {
		err = ds.CommitDelta(ctx, cur, next, info, certs)
	} else {
		var doc []byte
		if doc, err = json.Marshal(next); err != nil {
			return nil, nil, false, fmt.Errorf("config store: encode generation %d: %w", next.Generation, err)
		}
		err = s.st.Commit(ctx, cur.Generation, info, doc, certs)
	}
	if err != nil {
		return nil, nil, errors.Is(err, ErrRace), err
	}
	return &Result{Generation: next.Generation, Plan: plan, Config: next, spans: spans}, cur, false, nil
}

// finish applies a committed generation (reverting it when Apply fails)
// and makes it Current.
func (s *Store) finish(ctx context.Context, cur *Config, res *Result, o UpdateOptions) (*Result, error) {
	next := res.Config
	log := s.log.With("generation", next.Generation)
	if o.Apply != nil {
		if err := o.Apply(withSpans(ctx, cur, next, res.spans), next); err != nil {
			log.Warn("apply failed, rolling back", "err", err, "plan", res.Plan.Summary())
			if rerr := s.st.Revert(context.WithoutCancel(ctx), cur, next.Generation); rerr != nil {
				log.Error("rollback of the committed config failed: the store may disagree with the running config",
					"err", rerr, "running_generation", cur.Generation)
				return nil, errors.Join(err, rerr)
			}
			return nil, err
		}
	}
	s.cur.Store(next)
	if d, ok := s.st.(*DirStorage); ok && certificatesDropped(res.Plan) {
		d.pruneCertificates(next)
	}
	log.Info("config updated", "plan", res.Plan.Summary())
	return res, nil
}

// StorageHealth is nil while the storage takes writes, else why not: the
// Storage's Health. For the state directory, after a refused write, that
// *StorageError until a write succeeds again (an Update, or the probe
// DirStorage.Health makes at most once a second); for etcd, an error
// wrapping ErrUnavailable while it cannot be reached. Any goroutine.
func (s *Store) StorageHealth() error { return s.st.Health() }

// Revisions lists the kept revisions, newest first. Entries that cannot be
// read are skipped (and logged).
func (s *Store) Revisions() ([]RevisionInfo, error) {
	return s.st.Revisions(context.Background())
}

// Revision returns the config of generation gen, or an error wrapping
// ErrNotFound when that revision is not kept.
func (s *Store) Revision(gen int64) (*Config, error) {
	return s.st.Revision(context.Background(), gen)
}
