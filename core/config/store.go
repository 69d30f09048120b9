package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// Names inside the state directory.
const (
	ConfigFile     = "config.json"
	RevisionsDir   = "revisions"
	MaxRevisions   = 100
	tmpMarker      = ".tmp-"
	revisionSuffix = ".json"
	revisionDigits = 20 // %020d: every int64 ≥ 0, so lexical order = generation order
)

// Store is the persisted desired state: dir/config.json (the current
// config, the commit point) and dir/revisions/ (the last MaxRevisions
// accepted configs). Current is lock-free; writes are serialised by Update.
type Store struct {
	dir string
	log *slog.Logger

	mu  sync.Mutex             // serialises Update: one writer at a time
	cur atomic.Pointer[Config] // immutable snapshot

	// fault is the last write the OS refused while no write has succeeded
	// since (nil: the directory takes writes). lastProbe (unix nanos)
	// spaces the probes StorageHealth makes while a fault lasts.
	fault     atomic.Pointer[StorageError]
	lastProbe atomic.Int64
	// writeFile is WriteFileAtomic; tests swap it to inject OS errors.
	writeFile func(dir, name string, data []byte, prepare func(*os.File)) error
}

// StorageError is a write to the state directory that the OS refused: a
// full file system (ENOSPC, EDQUOT), a read-only one (EROFS), a permission
// (EACCES, EPERM) or the device (EIO). The Update that met it changed
// nothing: the running config is still the current one.
type StorageError struct {
	Err error // the failed operation, wrapping the errno
}

func (e *StorageError) Error() string { return "the state directory refused a write: " + e.Err.Error() }

// Unwrap lets errors.Is match the errno.
func (e *StorageError) Unwrap() error { return e.Err }

// Full reports whether the file system is out of space or quota (507)
// rather than unwritable (503).
func (e *StorageError) Full() bool {
	return errors.Is(e.Err, syscall.ENOSPC) || errors.Is(e.Err, syscall.EDQUOT)
}

// storageProbeEvery spaces the probes of a faulty state directory: one
// small write a second at most, however often /readyz is asked.
const storageProbeEvery = time.Second

// UpdateOptions control one Update.
type UpdateOptions struct {
	// DryRun computes and returns the plan; nothing is persisted or applied.
	DryRun bool
	// Env is the machine the config is validated for.
	Env Env
	// Apply hands the new config to the data plane after it was persisted;
	// an error rolls the store back. nil = nothing to apply.
	Apply func(ctx context.Context, c *Config) error
	// Certificates are the bundles (ParseCertificate) of certificates the
	// update adds, by chain_sha256: taken as stored by the check of the
	// certificates' files, and written to the state directory (CertsDir)
	// before the revision that refers to them; a dry run writes nothing.
	Certificates map[string][]byte
	// Actor names who made the change (the API's token name); kept in the
	// revision's header (RevisionInfo.Actor).
	Actor string
	// RestoreOf is the generation a restore brings back (0: not a
	// restore); kept as RevisionInfo.RestoreOf.
	RestoreOf int64
}

// Result of an Update.
type Result struct {
	// Generation is the generation now current: the new one after an
	// accepted change, the unchanged one after a dry run or an empty plan.
	Generation int64 `json:"generation"`
	Plan       Plan  `json:"plan"`
	// Config is the config the update produced (for a dry run, the one it
	// would produce). Immutable, like Current.
	Config *Config `json:"-"`
}

// RevisionInfo describes one persisted revision. Actor and RestoreOf are
// absent from revisions written before they existed (and from the ones the
// store writes itself: bootstrap, a missing revision of the current config).
type RevisionInfo struct {
	Generation int64     `json:"generation"`
	Time       time.Time `json:"time"`
	Summary    string    `json:"summary"`
	// Actor is who made the change (UpdateOptions.Actor).
	Actor string `json:"actor,omitempty"`
	// RestoreOf is the generation this one restored (UpdateOptions.RestoreOf).
	RestoreOf int64 `json:"restore_of,omitempty"`
}

// revisionFile is the content of dir/revisions/NNNN.json. The small
// members come first so Revisions can read them without decoding config.
type revisionFile struct {
	Generation int64     `json:"generation"`
	Time       time.Time `json:"time"`
	Summary    string    `json:"summary"`
	Actor      string    `json:"actor,omitempty"`
	RestoreOf  int64     `json:"restore_of,omitempty"`
	Config     *Config   `json:"config"`
}

// Open loads the state directory dir, creating it (mode 0700) if needed:
//
//   - dir/config.json present: decode it strictly, Normalize, Validate with
//     an empty Env. Any failure refuses the start with an error wrapping
//     ErrCorrupt that names the file and the newest revision that parses.
//   - absent, bootstrap != "": the bootstrap document (decoded strictly,
//     normalized, validated) becomes generation 1.
//   - absent, no bootstrap: an empty config, generation 0, persisted so the
//     directory is initialised.
//
// Leftovers of an interrupted write are cleaned up: temporary files, and
// revision files newer than config.json (config.json is the commit point;
// a revision newer than it was never committed).
func Open(dir, bootstrap string, log *slog.Logger) (*Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if dir == "" {
		return nil, errors.New("config store: empty state directory")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, fmt.Errorf("config store: %w", err)
	}
	s := &Store{dir: abs, log: log.With("state_dir", abs), writeFile: WriteFileAtomic}
	if err := os.MkdirAll(s.revDir(), 0o700); err != nil {
		return nil, fmt.Errorf("config store: create %s: %w", s.revDir(), err)
	}
	// Writes go into revisions/ by name: a symlink planted there would
	// send them wherever it points.
	if fi, err := os.Lstat(s.revDir()); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("config store: %s must be a directory, not a symbolic link or a file (remove it)", s.revDir())
	}
	s.removeTemps(s.dir, "."+ConfigFile+tmpMarker)
	s.removeTemps(s.revDir(), ".")
	if err := s.checkCertsAccess(); err != nil {
		return nil, err
	}

	path := s.configPath()
	data, err := readFileNoFollow(path)
	switch {
	case err == nil:
		c, lerr := loadConfig(data)
		if lerr != nil {
			return nil, s.corrupt(path, lerr)
		}
		s.cur.Store(c)
		s.removeUncommitted(c.Generation)
		if err := s.ensureRevision(c); err != nil {
			return nil, err
		}
		s.pruneCertificates(c)
		s.log.Info("config resumed", "generation", c.Generation, "frontends", len(c.Frontends), "backends", len(c.Backends))
		return s, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("config store: read %s: %w", path, err)
	}

	if names, _ := s.revisionNames(); len(names) > 0 {
		// History without a current config: someone removed config.json.
		// Starting empty would silently reset the appliance.
		return nil, s.corrupt(path, fmt.Errorf("%w (but %s holds %d revisions)", fs.ErrNotExist, s.revDir(), len(names)))
	}

	c := &Config{}
	summary := ""
	if bootstrap != "" {
		b, err := os.ReadFile(bootstrap)
		if err != nil {
			return nil, fmt.Errorf("config store: bootstrap: %w", err)
		}
		if c, err = loadConfig(b); err != nil {
			return nil, fmt.Errorf("config store: bootstrap %s: %w", bootstrap, err)
		}
		c.Generation = 1
		summary = "bootstrap from " + bootstrap + ": " + Diff(nil, c).Summary()
	} else {
		c.Normalize()
	}
	// config.json first: it is the commit point. The revision of
	// generation 1 follows; ensureRevision recreates it if we crash here.
	if err := s.writeConfig(c); err != nil {
		return nil, err
	}
	if c.Generation > 0 {
		if err := s.writeRevision(c, time.Now(), summary); err != nil {
			return nil, err
		}
	}
	s.cur.Store(c)
	s.log.Info("config initialised", "generation", c.Generation, "bootstrap", bootstrap)
	return s, nil
}

// loadConfig decodes, normalizes and validates a persisted document. Env is
// empty: CPU ids of another machine are the pin code's concern.
func loadConfig(data []byte) (*Config, error) {
	var c Config
	if err := DecodeBytes(data, &c); err != nil {
		return nil, err
	}
	c.Normalize()
	if err := Validate(&c, Env{}); err != nil {
		return nil, err
	}
	return &c, nil
}

// corrupt builds the refusal to start for a bad config.json.
func (s *Store) corrupt(path string, cause error) error {
	last := "no readable revision"
	if gen, rpath, ok := s.lastGoodRevision(); ok {
		last = fmt.Sprintf("generation %d at %s", gen, rpath)
	}
	return fmt.Errorf("%w: %s: %w; last good revision: %s "+
		"(copy its \"config\" member to %s to resume from it)", ErrCorrupt, path, cause, last, path)
}

// lastGoodRevision finds the newest revision file that decodes.
func (s *Store) lastGoodRevision() (int64, string, bool) {
	names, err := s.revisionNames()
	if err != nil {
		return 0, "", false
	}
	for _, n := range slices.Backward(names) {
		p := filepath.Join(s.revDir(), n)
		if r, err := readRevision(p); err == nil {
			return r.Generation, p, true
		}
	}
	return 0, "", false
}

// Dir is the absolute path of the state directory.
func (s *Store) Dir() string { return s.dir }

// Current is the current config. It is shared: never modify it; Clone first.
func (s *Store) Current() *Config { return s.cur.Load() }

// Update changes the config, under the store's write lock:
//
//  1. clone the current config and call mutate on the clone (its error is
//     returned unchanged; a *StorageError among it is also recorded as the
//     state directory's fault, see StorageHealth);
//  2. Normalize, Validate (a *ValidationError), Diff against the current;
//  3. DryRun: return the plan, nothing persisted;
//  4. an empty plan creates no generation: the current generation and the
//     empty plan are returned, nothing is written or applied;
//  5. otherwise generation+1, persist (revision file, then config.json,
//     each atomically), call o.Apply; if Apply fails, restore config.json,
//     remove the revision, and return Apply's error: disk, memory and the
//     data plane all still hold the previous generation.
func (s *Store) Update(ctx context.Context, mutate func(c *Config) error, o UpdateOptions) (*Result, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	cur := s.cur.Load()
	next := cur.Clone()
	if err := mutate(next); err != nil {
		// mutate may write in the state directory first (api's audit
		// record): a refusal there is the directory's fault like ours.
		var se *StorageError
		if errors.As(err, &se) {
			s.noteFault(se)
		}
		return nil, err
	}
	next.Normalize()
	next.Generation = cur.Generation // clients do not choose generations
	// cur passed Validate when it became current: its unchanged servers
	// need not pass the field rules again.
	if err := validate(next, o.Env, cur); err != nil {
		return nil, err
	}
	if err := s.checkCertificateFiles(cur, next, o.Certificates); err != nil {
		return nil, err
	}
	plan := diff(cur, next, true) // both validated: names are unique
	if o.DryRun {
		return &Result{Generation: cur.Generation, Plan: plan, Config: next}, nil
	}
	if plan.Empty() {
		return &Result{Generation: cur.Generation, Plan: plan, Config: cur}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	next.Generation = cur.Generation + 1
	log := s.log.With("generation", next.Generation)

	doc, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("config store: encode generation %d: %w", next.Generation, err)
	}
	if err := s.saveCertificates(next, o.Certificates); err != nil {
		return nil, err
	}
	if err := s.writeRevisionDoc(RevisionInfo{Generation: next.Generation, Time: time.Now(), Summary: plan.Summary(), Actor: o.Actor, RestoreOf: o.RestoreOf}, doc); err != nil {
		return nil, s.storageFailed(err)
	}
	if err := s.writeConfigDoc(doc); err != nil {
		s.removeRevision(next.Generation)
		return nil, s.storageFailed(err)
	}
	s.storageOK()
	if o.Apply != nil {
		if err := o.Apply(ctx, next); err != nil {
			log.Warn("apply failed, rolling back", "err", err, "plan", plan.Summary())
			if rerr := s.rollback(cur, next.Generation); rerr != nil {
				log.Error("rollback of the persisted config failed: disk may disagree with the running config",
					"err", rerr, "running_generation", cur.Generation)
				s.storageFailed(rerr)
				return nil, errors.Join(err, rerr)
			}
			return nil, err
		}
	}
	s.cur.Store(next)
	s.pruneRevisions()
	if certificatesDropped(plan) {
		s.pruneCertificates(next)
	}
	log.Info("config updated", "plan", plan.Summary())
	return &Result{Generation: next.Generation, Plan: plan, Config: next}, nil
}

// storageFailed records err, a refused write, as the state directory's
// fault and returns it as a *StorageError.
func (s *Store) storageFailed(err error) error {
	se := &StorageError{Err: err}
	s.noteFault(se)
	return se
}

func (s *Store) noteFault(se *StorageError) {
	s.lastProbe.Store(time.Now().UnixNano()) // the first probe a second later
	if s.fault.Swap(se) == nil {
		s.log.Error("the state directory refuses writes: no change can be saved until it is fixed", "err", se.Err)
	}
}

func (s *Store) storageOK() {
	if s.fault.Swap(nil) != nil {
		s.log.Info("the state directory takes writes again")
	}
}

// StorageHealth is nil while the state directory takes writes; after a
// refused write it is that *StorageError until a write succeeds again: an
// Update, or a probe (a small temporary file created, written, fsynced and
// removed in the directory and in revisions/) that StorageHealth itself
// makes at most once a second. Any goroutine.
func (s *Store) StorageHealth() error {
	f := s.fault.Load()
	if f == nil {
		return nil
	}
	now := time.Now().UnixNano()
	last := s.lastProbe.Load()
	if now-last < int64(storageProbeEvery) || !s.lastProbe.CompareAndSwap(last, now) {
		return f
	}
	if err := s.probe(); err != nil {
		// Keep the fault of the refused write; the probe says the same.
		return f
	}
	if s.fault.CompareAndSwap(f, nil) {
		s.log.Info("the state directory takes writes again")
	}
	if f := s.fault.Load(); f != nil { // a write failed again meanwhile
		return f
	}
	return nil
}

// probe writes and removes a temporary file where Update writes. Its name
// is that of config.json's temporary files, so Open removes one left by a
// crash.
func (s *Store) probe() error {
	for _, dir := range []string{s.dir, s.revDir()} {
		f, err := os.CreateTemp(dir, "."+ConfigFile+tmpMarker+"probe-*")
		if err != nil {
			return err
		}
		_, err = f.Write([]byte("probe\n"))
		if err == nil {
			err = f.Sync()
		}
		f.Close()
		if rerr := os.Remove(f.Name()); err == nil {
			err = rerr
		}
		if err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) rollback(prev *Config, gen int64) error {
	var errs []error
	if err := s.writeConfig(prev); err != nil {
		errs = append(errs, fmt.Errorf("restore %s: %w", s.configPath(), err))
	}
	if err := s.removeRevision(gen); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// Revisions lists the persisted revisions, newest first. Files that cannot
// be read are skipped (and logged).
func (s *Store) Revisions() ([]RevisionInfo, error) {
	names, err := s.revisionNames()
	if err != nil {
		return nil, err
	}
	out := make([]RevisionInfo, 0, len(names))
	for _, n := range slices.Backward(names) {
		p := filepath.Join(s.revDir(), n)
		info, err := readRevisionHeader(p)
		if err != nil {
			s.log.Warn("unreadable revision skipped", "file", p, "err", err)
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// Revision returns the config of generation gen, or an error wrapping
// ErrNotFound when that revision is not kept.
func (s *Store) Revision(gen int64) (*Config, error) {
	if gen < 0 {
		return nil, fmt.Errorf("revision %d: %w", gen, ErrNotFound)
	}
	r, err := readRevision(s.revisionPath(gen))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("revision %d: %w", gen, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	return r.Config, nil
}

func (s *Store) configPath() string { return filepath.Join(s.dir, ConfigFile) }
func (s *Store) revDir() string     { return filepath.Join(s.dir, RevisionsDir) }

func (s *Store) revisionPath(gen int64) string {
	return filepath.Join(s.revDir(), revisionName(gen))
}

func revisionName(gen int64) string {
	return fmt.Sprintf("%0*d%s", revisionDigits, gen, revisionSuffix)
}

// parseRevisionName returns the generation of a revision file name.
func parseRevisionName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, revisionSuffix)
	if !ok || len(digits) != revisionDigits {
		return 0, false
	}
	for i := 0; i < len(digits); i++ {
		if digits[i] < '0' || digits[i] > '9' {
			return 0, false
		}
	}
	g, err := strconv.ParseInt(digits, 10, 64)
	return g, err == nil
}

// revisionNames lists the revision files, oldest first.
func (s *Store) revisionNames() ([]string, error) {
	ents, err := os.ReadDir(s.revDir())
	if err != nil {
		return nil, fmt.Errorf("config store: list revisions: %w", err)
	}
	var out []string
	for _, e := range ents { // ReadDir sorts by name = by generation
		if _, ok := parseRevisionName(e.Name()); ok && e.Type().IsRegular() {
			out = append(out, e.Name())
		}
	}
	return out, nil
}

func marshalConfig(c *Config) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, err
	}
	return indentDoc(b), nil
}

// indentDoc formats config.json for people: indented by two spaces,
// newline-terminated, byte for byte what json.Indent produces. doc must be
// compact output of json.Marshal (no white space outside strings), which
// lets this skip json.Indent's validating scanner: three times faster on a
// config of 10 000 servers, where the indent was the largest cost of a write.
func indentDoc(doc []byte) []byte {
	out := make([]byte, 0, len(doc)*2)
	depth := 0
	indent := []byte("\n")
	newline := func() {
		for len(indent) < 1+2*depth {
			indent = append(indent, ' ', ' ')
		}
		out = append(out, indent[:1+2*depth]...)
	}
	for i := 0; i < len(doc); {
		c := doc[i]
		switch c {
		case '"':
			// The whole string, escapes included, in one copy.
			j := i + 1
			for j < len(doc) && doc[j] != '"' {
				if doc[j] == '\\' {
					j++
				}
				j++
			}
			j = min(j+1, len(doc))
			out = append(out, doc[i:j]...)
			i = j
			continue
		case '{', '[':
			out = append(out, c)
			if i+1 < len(doc) && (doc[i+1] == '}' || doc[i+1] == ']') {
				out = append(out, doc[i+1]) // empty object or array stays "{}"
				i += 2
				continue
			}
			depth++
			newline()
		case '}', ']':
			depth--
			newline()
			out = append(out, c)
		case ',':
			out = append(out, c)
			newline()
		case ':':
			out = append(out, ':', ' ')
		default:
			// A number or literal: up to the next structural byte.
			j := i + 1
			for j < len(doc) && !jsonStructural(doc[j]) {
				j++
			}
			out = append(out, doc[i:j]...)
			i = j
			continue
		}
		i++
	}
	return append(out, '\n')
}

func jsonStructural(c byte) bool {
	switch c {
	case '"', '{', '[', '}', ']', ',', ':':
		return true
	}
	return false
}

func (s *Store) writeConfig(c *Config) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("config store: encode generation %d: %w", c.Generation, err)
	}
	return s.writeConfigDoc(doc)
}

// writeConfigDoc commits doc (compact JSON of a Config) as config.json.
func (s *Store) writeConfigDoc(doc []byte) error {
	if err := s.writeFile(s.dir, ConfigFile, indentDoc(doc), nil); err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	return nil
}

func (s *Store) writeRevision(c *Config, t time.Time, summary string) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("config store: encode revision %d: %w", c.Generation, err)
	}
	return s.writeRevisionDoc(RevisionInfo{Generation: c.Generation, Time: t, Summary: summary}, doc)
}

// writeRevisionDoc writes revisions/NNN.json as one line of compact JSON:
// the header members first (so the listing reads them without decoding the
// config), then the config, reusing doc so a write encodes the config once.
func (s *Store) writeRevisionDoc(info RevisionInfo, doc []byte) error {
	gen := info.Generation
	info.Time = info.Time.UTC()
	hdr, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("config store: encode revision %d: %w", gen, err)
	}
	var buf bytes.Buffer
	buf.Grow(len(hdr) + len(doc) + 16)
	buf.Write(hdr[:len(hdr)-1]) // without the closing brace
	buf.WriteString(`,"config":`)
	buf.Write(doc)
	buf.WriteString("}\n")
	if err := s.writeFile(s.revDir(), revisionName(gen), buf.Bytes(), nil); err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	return nil
}

func (s *Store) removeRevision(gen int64) error {
	if err := os.Remove(s.revisionPath(gen)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("config store: remove revision %d: %w", gen, err)
	}
	return syncDir(s.revDir())
}

// ensureRevision writes the revision of the current config if it is missing
// (a crash between the commit of config.json and the revision, at bootstrap).
func (s *Store) ensureRevision(c *Config) error {
	if c.Generation <= 0 {
		return nil
	}
	if _, err := os.Stat(s.revisionPath(c.Generation)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	s.log.Warn("revision of the current generation missing, writing it", "generation", c.Generation)
	return s.writeRevision(c, time.Now(), "recovered from "+ConfigFile)
}

// removeUncommitted removes revisions newer than the committed generation:
// they were written by an Update that crashed before config.json was
// renamed, and were never applied.
func (s *Store) removeUncommitted(committed int64) {
	names, err := s.revisionNames()
	if err != nil {
		return
	}
	for _, n := range names {
		if g, _ := parseRevisionName(n); g > committed {
			s.log.Warn("removing uncommitted revision", "file", n, "committed_generation", committed)
			_ = os.Remove(filepath.Join(s.revDir(), n))
		}
	}
}

// pruneRevisions keeps the newest MaxRevisions revision files.
func (s *Store) pruneRevisions() {
	names, err := s.revisionNames()
	if err != nil || len(names) <= MaxRevisions {
		return
	}
	for _, n := range names[:len(names)-MaxRevisions] {
		if err := os.Remove(filepath.Join(s.revDir(), n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			s.log.Warn("pruning revision failed", "file", n, "err", err)
		}
	}
}

// removeTemps deletes temporary files left by a write that crashed before
// its rename; their content was never committed. Only names starting with
// prefix: the state directory also holds api/tokens' files, whose temporary
// files (same WriteFileAtomic naming) may belong to a write in progress.
func (s *Store) removeTemps(dir, prefix string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && strings.Contains(e.Name(), tmpMarker) && e.Type().IsRegular() {
			s.log.Warn("removing leftover temporary file", "file", filepath.Join(dir, e.Name()))
			_ = os.Remove(filepath.Join(dir, e.Name()))
		}
	}
}

// readFileNoFollow is os.ReadFile refusing a symbolic link (ELOOP): the
// state files are ours, and one planted by someone who can write in the
// directory must not make spliced read (or report) another file.
func readFileNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, noFollowError(err)
	}
	defer f.Close()
	return io.ReadAll(f)
}

// noFollowError explains the ELOOP of an O_NOFOLLOW open.
func noFollowError(err error) error {
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("%w (a symbolic link: refused, remove it)", err)
	}
	return err
}

func readRevision(path string) (*revisionFile, error) {
	data, err := readFileNoFollow(path)
	if err != nil {
		return nil, err
	}
	var r revisionFile
	if err := DecodeBytes(data, &r); err != nil {
		// %v: a DecodeError is about a request body (400 or 422); a
		// damaged file is this server's.
		return nil, fmt.Errorf("%s: damaged revision file: %v", path, err)
	}
	if r.Config == nil {
		return nil, fmt.Errorf("%s: no config member", path)
	}
	if g, _ := parseRevisionName(filepath.Base(path)); g != r.Generation || r.Config.Generation != r.Generation {
		return nil, fmt.Errorf("%s: holds generation %d, config generation %d", path, r.Generation, r.Config.Generation)
	}
	r.Config.Normalize()
	return &r, nil
}

// readRevisionHeader reads the header members (RevisionInfo), which precede
// the config in the file, without decoding the config.
func readRevisionHeader(path string) (RevisionInfo, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return RevisionInfo{}, noFollowError(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	var info RevisionInfo
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return info, fmt.Errorf("%s: not a revision object", path)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return info, fmt.Errorf("%s: %w", path, err)
		}
		key, _ := t.(string)
		var dst any
		switch key {
		case "generation":
			dst = &info.Generation
		case "time":
			dst = &info.Time
		case "summary":
			dst = &info.Summary
		case "actor":
			dst = &info.Actor
		case "restore_of":
			dst = &info.RestoreOf
		case "config":
			// written last (writeRevisionDoc): the header is complete
		default:
			var skip json.RawMessage
			dst = &skip
		}
		if dst == nil {
			break
		}
		if err := dec.Decode(dst); err != nil {
			return info, fmt.Errorf("%s: %s: %w", path, key, err)
		}
	}
	if g, _ := parseRevisionName(filepath.Base(path)); g != info.Generation {
		return info, fmt.Errorf("%s: holds generation %d", path, info.Generation)
	}
	return info, nil
}

// WriteFileAtomic replaces dir/name with data so that a crash at any point
// leaves either the old or the new content: write a temporary file
// ".<name>.tmp-<random>" (mode 0600) in the same directory, fsync it, rename
// it over name, fsync the directory. prepare, when not nil, runs on the
// temporary file before the data is written (api/tokens chowns it there).
// It serves the store (config.json, revisions) and api/tokens (tokens.json).
func WriteFileAtomic(dir, name string, data []byte, prepare func(tmp *os.File)) (err error) {
	f, err := os.CreateTemp(dir, "."+name+tmpMarker+"*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	defer func() {
		if err != nil {
			_ = os.Remove(tmp)
		}
	}()
	if prepare != nil {
		prepare(f)
	}
	if _, err = f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("write %s: %w", tmp, err)
	}
	if err = f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("fsync %s: %w", tmp, err)
	}
	if err = f.Close(); err != nil {
		return fmt.Errorf("close %s: %w", tmp, err)
	}
	dst := filepath.Join(dir, name)
	if err = os.Rename(tmp, dst); err != nil {
		return fmt.Errorf("rename %s: %w", dst, err)
	}
	return syncDir(dir)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return fmt.Errorf("fsync %s: %w", dir, err)
	}
	return nil
}
