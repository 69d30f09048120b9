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
	ConfigFile   = "config.json"
	RevisionsDir = "revisions"
	MaxRevisions = 100
	// SnapshotEvery: config.json (the whole document) is written again,
	// after the commit (journal.go), once at least this many generations
	// were committed as deltas since the last snapshot and their journal
	// lines weigh a quarter of the document (snapshotDocShare), or
	// MaxSnapshotEvery generations were; every commit in between writes
	// only its revision, the change from the generation before (Delta).
	// A small document is written every 32 changes; one of 10 000 servers
	// (1.1 MB, about 25 ms of CPU to encode, indent and write) every few
	// hundred changes: amortised to a few hundredths of a millisecond per
	// change, where every 32 it was most of a millisecond. What an open
	// replays and what reading an old revision applies stays below the
	// cost of decoding the document itself.
	SnapshotEvery    = 32
	MaxSnapshotEvery = 1024
	snapshotDocShare = 4
	tmpMarker        = ".tmp-"
	revisionSuffix   = ".json"
	revisionDigits   = 20 // %020d: every int64 ≥ 0, so lexical order = generation order
)

// DirStorage is the Storage of one node: the state directory, holding
// config.json (the current config, the commit point), revisions/ (the last
// MaxRevisions accepted configs) and certs/ (the certificates' chains and
// keys). One process owns the directory (LockDir), so the committed
// generation is kept in memory and Commit compares prev with it. See the
// package documentation (# Store) for the files and their guarantees.
type DirStorage struct {
	dir string
	log *slog.Logger

	mu sync.Mutex // serialises Commit, Revert and Load's read
	// gen is config.json's generation (0: absent or generation 0), has
	// whether it exists; loaded is its decoded content when known (nil:
	// Load reads the file).
	gen    int64
	has    bool
	loaded *Config
	// snap is the generation config.json holds (the last snapshot):
	// the revisions after it, up to gen, are deltas (SnapshotEvery).
	// snapSchema is its schema: deltas are written only on a snapshot of
	// the current schema, so that one document's deltas share its format.
	snap       int64
	snapSchema int

	// The journal (journal.go): its files, oldest first, the newest one
	// taking the appends (jname, jsize: the length of its complete lines);
	// lastLine is the generation of the newest delta line (0: none since
	// the journal was reset, or it was taken back); whole makes the next
	// commits whole (an append failed and could not be cut back).
	segs     []journalSeg
	jname    string
	jsize    int64
	lastLine int64
	whole    bool
	// journalWrite is writeAndSync; tests swap it to inject OS errors.
	journalWrite func(fd int, b []byte) error

	// The snapshot goroutine (snapshotLoop): snapMu serialises the
	// writers of config.json (it, a whole commit, Revert; taken before
	// mu); snapReq is the document it is asked to write next (nil: none)
	// with its revision's header; snapAsk the generation last asked for
	// (or config.json's).
	snapMu    sync.Mutex
	snapReq   *Config
	snapInfo  RevisionInfo
	snapAudit []byte
	snapAsk   int64
	// jbytes is the length of the journal lines since snapAsk's, snapBytes
	// that of the last snapshot's document (requestSnapshot).
	jbytes      int64
	snapBytes   int64
	snapRunning bool
	snapWG      sync.WaitGroup

	// fault is the last write the OS refused while no write has succeeded
	// since (nil: the directory takes writes). lastProbe (unix nanos)
	// spaces the probes Health makes while a fault lasts.
	fault     atomic.Pointer[StorageError]
	lastProbe atomic.Int64
	// writeFile is WriteFileAtomic; tests swap it to inject OS errors.
	writeFile func(dir, name string, data []byte, prepare func(*os.File)) error
	// spares are pruned revisions' files for the next copies (recycle.go).
	spares spares
}

var _ Storage = (*DirStorage)(nil)

// NewDirStorage opens the state directory dir, creating it (mode 0700) if
// needed, and checks it as a start must:
//
//   - leftovers of an interrupted write are removed: temporary files, and
//     revision files newer than config.json (config.json is the commit
//     point; a revision newer than it was never committed); the revision of
//     the current generation is written if a crash lost it;
//   - config.json present: decoded strictly, normalized and validated with
//     an empty Env; any failure refuses the start with an error wrapping
//     ErrCorrupt that names the file and the newest revision that parses.
//     Absent while revisions/ holds revisions: refused the same way (it
//     was removed; starting empty would silently reset the appliance);
//   - revisions/ and certs/ must be real directories, certs/ reachable by
//     this user only (checkCertsAccess); certificate files nothing refers
//     to are removed.
func NewDirStorage(dir string, log *slog.Logger) (*DirStorage, error) {
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
	d := &DirStorage{dir: abs, log: log.With("state_dir", abs), writeFile: WriteFileAtomic, journalWrite: writeAndSync}
	if err := os.MkdirAll(d.revDir(), 0o700); err != nil {
		return nil, fmt.Errorf("config store: create %s: %w", d.revDir(), err)
	}
	// Writes go into revisions/ by name: a symlink planted there would
	// send them wherever it points.
	if fi, err := os.Lstat(d.revDir()); err != nil || !fi.IsDir() {
		return nil, fmt.Errorf("config store: %s must be a directory, not a symbolic link or a file (remove it)", d.revDir())
	}
	d.removeTemps(d.dir, "."+ConfigFile+tmpMarker)
	d.removeTemps(d.revDir(), ".")
	d.openSpares()
	if err := d.checkCertsAccess(); err != nil {
		return nil, err
	}

	path := d.configPath()
	data, err := readFileNoFollow(path)
	switch {
	case err == nil:
		c, lerr := d.loadCurrent(data, true)
		if lerr != nil {
			return nil, d.corrupt(path, lerr)
		}
		d.gen, d.has, d.loaded = c.Generation, true, c
		d.removeUncommitted(c.Generation)
		if c.Generation == d.snap {
			if err := d.ensureRevision(c); err != nil {
				return nil, err
			}
		}
		d.pruneCertificates(c)
		return d, nil
	case !errors.Is(err, fs.ErrNotExist):
		return nil, fmt.Errorf("config store: read %s: %w", path, err)
	}
	if names, _ := d.revisionNames(); len(names) > 0 {
		// History without a current config: someone removed config.json.
		// Starting empty would silently reset the appliance.
		return nil, d.corrupt(path, fmt.Errorf("%w (but %s holds %d revisions)", fs.ErrNotExist, d.revDir(), len(names)))
	}
	return d, nil
}

// Dir is the absolute path of the state directory.
func (d *DirStorage) Dir() string { return d.dir }

// Kind is "dir".
func (d *DirStorage) Kind() string { return "dir" }

// Close waits for a snapshot being written.
func (d *DirStorage) Close() error {
	d.snapWG.Wait()
	return nil
}

// Load returns config.json's document and the header of its revision (only
// the generation when config.json holds generation 0, which has none).
// A config.json that no longer decodes or validates is an error wrapping
// ErrCorrupt.
func (d *DirStorage) Load(context.Context) (*Config, RevisionInfo, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	c := d.loaded
	if c == nil {
		data, err := readFileNoFollow(d.configPath())
		if errors.Is(err, fs.ErrNotExist) {
			return nil, RevisionInfo{}, nil
		}
		if err != nil {
			return nil, RevisionInfo{}, fmt.Errorf("config store: read %s: %w", d.configPath(), err)
		}
		if c, err = d.loadCurrent(data, false); err != nil {
			return nil, RevisionInfo{}, d.corrupt(d.configPath(), err)
		}
		d.loaded = c
	}
	info := RevisionInfo{Generation: c.Generation}
	if c.Generation > 0 {
		if h, err := readRevisionHeader(d.revisionPath(c.Generation)); err == nil {
			info = h
		}
	}
	return c, info, nil
}

// initEmpty persists c, the empty config of generation 0, as config.json so
// that the directory is initialised (Open without a bootstrap document).
func (d *DirStorage) initEmpty(c *Config) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	if err := d.writeConfig(c); err != nil {
		return err
	}
	d.gen, d.has, d.loaded = c.Generation, true, c
	d.snap, d.snapSchema, d.snapAsk = c.Generation, c.Schema, c.Generation
	return nil
}

// Commit writes the certificate bundles, the revision, then config.json
// (the commit point), each atomically. A refused write is a *StorageError
// and leaves config.json as it was (a revision written before the refusal
// is removed); a commit not built on the current generation is ErrRace.
//
// The first commit of a directory without config.json (a bootstrap)
// writes config.json first: a revision without config.json is refused at
// open as a removed config.json, whereas a config.json without the
// revision of its generation is completed (ensureRevision).
func (d *DirStorage) Commit(_ context.Context, prev int64, info RevisionInfo, doc []byte, certs map[string][]byte) error {
	if info.Generation != prev+1 {
		return fmt.Errorf("config store: commit of generation %d on %d", info.Generation, prev)
	}
	return d.commit(prev, info, doc, certs, nil)
}

// CommitDelta commits next, built on cur (the current generation), as
// Commit does, but as the change from cur when it can (Delta): one line
// appended to the journal and fdatasynced is then the commit point
// (journal.go), its revision file a copy written without fsync, and
// config.json is left at the last snapshot; every SnapshotEvery
// generations a goroutine writes next as config.json after the commit
// returned. When the change is not a Delta (an object moved), when
// config.json is not of the current schema, or when the snapshots are
// maxSnapshotLag generations behind, it writes the whole document
// (json.Marshal(next)) as Commit does.
func (d *DirStorage) CommitDelta(ctx context.Context, cur, next *Config, info RevisionInfo, certs map[string][]byte) error {
	return d.commitDelta(ctx, cur, next, info, certs, nil, nil)
}

// maxSnapshotLag: a delta commit while config.json is this many
// generations behind (snapshots failing, or slower than the changes) is
// written whole instead, which bounds the journal an open replays.
const maxSnapshotLag = 2 * MaxSnapshotEvery

// commitDelta is CommitDelta; spans, when not nil, are serverSpans(cur,
// next) (makeDelta); audit, when not nil, is the write's audit record
// (UpdateOptions.AuditRecord), kept in its revision (and journal line).
func (d *DirStorage) commitDelta(_ context.Context, cur, next *Config, info RevisionInfo, certs map[string][]byte, spans []listSpan, audit []byte) error {
	if info.Generation != cur.Generation+1 || next.Generation != info.Generation {
		return fmt.Errorf("config store: commit of generation %d on %d", info.Generation, cur.Generation)
	}
	d.mu.Lock()
	if cur.Generation != d.gen {
		d.mu.Unlock()
		return fmt.Errorf("config store: generation %d was built on %d but %d is current: %w", info.Generation, cur.Generation, d.gen, ErrRace)
	}
	if d.has && !d.whole && info.Generation-d.snap < maxSnapshotLag && d.snapSchema == SchemaVersion && cur.Generation > 0 {
		delta, ok, err := makeDelta(cur, next, spans)
		if err != nil {
			d.mu.Unlock()
			return fmt.Errorf("config store: encode generation %d: %w", info.Generation, err)
		}
		if ok {
			defer d.mu.Unlock()
			line, err := encodeDeltaRevision(info, cur.Generation, delta, audit)
			if err != nil {
				return err
			}
			if err := d.saveCertificates(certs); err != nil {
				return err
			}
			// The journal file first: a copy above its base is never
			// replayed from revisions/ (replayJournal).
			if err := d.ensureJournal(); err != nil {
				return d.storageFailed(err)
			}
			if err := d.writeRevisionCopy(info.Generation, line); err != nil {
				return d.storageFailed(fmt.Errorf("config store: write %s: %w", d.revisionPath(info.Generation), err))
			}
			faultPoint("commit-copy")
			if err := d.appendJournal(line, info.Generation); err != nil {
				_ = os.Remove(d.revisionPath(info.Generation))
				return d.storageFailed(fmt.Errorf("config store: %w", err))
			}
			faultPoint("commit-journal")
			d.storageOK()
			d.gen, d.loaded, d.lastLine = info.Generation, next, info.Generation
			d.requestSnapshot(next, info, audit, len(line))
			return nil
		}
	}
	d.mu.Unlock()
	doc, err := json.Marshal(next)
	if err != nil {
		return fmt.Errorf("config store: encode generation %d: %w", info.Generation, err)
	}
	if err := d.commit(cur.Generation, info, doc, certs, audit); err != nil {
		return err
	}
	d.mu.Lock()
	if d.gen == info.Generation {
		d.loaded = next
	}
	d.mu.Unlock()
	return nil
}

// encodeDeltaRevision is the content of a delta revision (and its journal
// line): the header members, "audit" when not nil, and, instead of
// "config", "base" and "delta", on one line.
func encodeDeltaRevision(info RevisionInfo, base int64, delta *Delta, audit []byte) ([]byte, error) {
	gen := info.Generation
	info.Time = info.Time.UTC()
	hdr, err := json.Marshal(info)
	if err != nil {
		return nil, fmt.Errorf("config store: encode revision %d: %w", gen, err)
	}
	body, err := json.Marshal(delta)
	if err != nil {
		return nil, fmt.Errorf("config store: encode revision %d: %w", gen, err)
	}
	var buf bytes.Buffer
	buf.Grow(len(hdr) + len(audit) + len(body) + 64)
	buf.Write(hdr[:len(hdr)-1])
	writeAudit(&buf, audit)
	buf.WriteString(`,"base":`)
	buf.WriteString(strconv.FormatInt(base, 10))
	buf.WriteString(`,"delta":`)
	buf.Write(body)
	buf.WriteString("}\n")
	return buf.Bytes(), nil
}

// loadCurrent reads the current document: config.json (the last
// snapshot, data) and the changes committed after it (replayJournal);
// then migrated, normalized and validated as loadConfig does. A revision
// newer than config.json that holds a whole document is a snapshot whose
// commit (config.json's rename) did not happen: it ends the replay, and
// removeUncommitted removes it and what follows. open: at NewDirStorage,
// which also sets up the journal for appends and rewrites the revision
// copies a crash lost.
func (d *DirStorage) loadCurrent(data []byte, open bool) (*Config, error) {
	var c Config
	if err := DecodeBytes(data, &c); err != nil {
		return nil, err
	}
	if open {
		d.snap, d.snapSchema, d.snapAsk, d.snapBytes = c.Generation, c.Schema, c.Generation, int64(len(data))
	}
	if err := d.replayJournal(&c, open); err != nil {
		return nil, err
	}
	if err := c.Migrate(); err != nil {
		return nil, err
	}
	c.Normalize()
	if err := Validate(&c, Env{}); err != nil {
		return nil, err
	}
	return &c, nil
}

// Reseed is Commit of any generation above prev (Storage.Reseed).
func (d *DirStorage) Reseed(_ context.Context, prev int64, info RevisionInfo, doc []byte, certs map[string][]byte) error {
	if info.Generation <= prev {
		return fmt.Errorf("config store: reseed of generation %d on %d", info.Generation, prev)
	}
	return d.commit(prev, info, doc, certs, nil)
}

func (d *DirStorage) commit(prev int64, info RevisionInfo, doc []byte, certs map[string][]byte, audit []byte) error {
	d.snapMu.Lock() // after a snapshot being written: config.json never goes back
	defer d.snapMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if prev != d.gen {
		return fmt.Errorf("config store: generation %d was built on %d but %d is current: %w", info.Generation, prev, d.gen, ErrRace)
	}
	if err := d.saveCertificates(certs); err != nil {
		return err
	}
	if d.has {
		if err := d.writeRevisionDoc(info, doc, audit); err != nil {
			return d.storageFailed(err)
		}
		if err := d.writeConfigDoc(doc); err != nil {
			_ = d.removeRevision(info.Generation)
			return d.storageFailed(err)
		}
	} else {
		if err := d.writeConfigDoc(doc); err != nil {
			return d.storageFailed(err)
		}
		if err := d.writeRevisionDoc(info, doc, audit); err != nil {
			if rerr := os.Remove(d.configPath()); rerr == nil || errors.Is(rerr, fs.ErrNotExist) {
				_ = syncDir(d.dir)
			} else {
				d.has = true // committed after all: the revision is written at the next open
				d.gen, d.loaded = info.Generation, nil
			}
			return d.storageFailed(err)
		}
	}
	d.storageOK()
	d.gen, d.has, d.loaded = info.Generation, true, nil
	d.snap, d.snapSchema, d.snapAsk, d.snapReq = info.Generation, SchemaVersion, info.Generation, nil
	d.jbytes, d.snapBytes = 0, int64(len(doc))
	// config.json holds it all: the journal's lines are behind it
	d.resetJournal()
	d.lastLine = 0
	d.pruneRevisions()
	return nil
}

// Revert makes prev current again and removes the revision of gen: a
// delta is taken back by a revert line in the journal, a whole commit (or
// a delta a snapshot already wrote) by config.json rewritten. A failure is
// recorded as the directory's fault (Health) and returned; gen may then
// still be committed.
func (d *DirStorage) Revert(_ context.Context, prev *Config, gen int64) error {
	d.snapMu.Lock() // a snapshot of gen being written finishes first
	defer d.snapMu.Unlock()
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen != d.gen {
		return fmt.Errorf("config store: revert of generation %d but %d is current: %w", gen, d.gen, ErrRace)
	}
	if d.snapReq != nil && d.snapReq.Generation >= gen {
		d.snapReq = nil
	}
	if d.lastLine == gen {
		// before config.json may go back: its line must not be
		// replayed over prev
		if err := d.appendJournal([]byte(`{"revert":`+strconv.FormatInt(gen, 10)+"}\n"), 0); err != nil {
			err = fmt.Errorf("config store: revert generation %d: %w", gen, err)
			d.storageFailed(err)
			return err
		}
		d.lastLine = 0
	}
	if gen > d.snap {
		// a delta: its journal line was the commit, config.json is older
		d.gen, d.loaded = prev.Generation, prev
		if d.snapAsk >= gen {
			d.snapAsk = d.snap
		}
		if err := d.removeRevision(gen); err != nil {
			d.log.Warn("removing the revision of a reverted generation failed", "generation", gen, "err", err)
		}
		return nil
	}
	d.loaded = nil
	if err := d.writeConfig(prev); err != nil {
		err = fmt.Errorf("restore %s: %w", d.configPath(), err)
		d.storageFailed(err)
		return err
	}
	d.gen, d.loaded = prev.Generation, prev
	d.snap, d.snapSchema, d.snapAsk = prev.Generation, prev.Schema, prev.Generation
	if err := d.removeRevision(gen); err != nil {
		d.storageFailed(err)
		return err
	}
	return nil
}

// Revisions lists the revision files, newest first. Files that cannot be
// read are skipped (and logged).
func (d *DirStorage) Revisions(context.Context) ([]RevisionInfo, error) {
	names, err := d.revisionNames()
	if err != nil {
		return nil, err
	}
	out := make([]RevisionInfo, 0, len(names))
	for _, n := range slices.Backward(names) {
		p := filepath.Join(d.revDir(), n)
		info, err := readRevisionHeader(p)
		if err != nil {
			d.log.Warn("unreadable revision skipped", "file", p, "err", err)
			continue
		}
		out = append(out, info)
	}
	return out, nil
}

// Revision returns the config of generation gen, or an error wrapping
// ErrNotFound when that revision is not kept.
func (d *DirStorage) Revision(_ context.Context, gen int64) (*Config, error) {
	if gen < 0 {
		return nil, fmt.Errorf("revision %d: %w", gen, ErrNotFound)
	}
	c, err := d.revisionConfig(gen)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("revision %d: %w", gen, ErrNotFound)
	}
	if err != nil {
		return nil, err
	}
	if err := c.Migrate(); err != nil {
		return nil, fmt.Errorf("revision %d: %w", gen, err)
	}
	c.Normalize()
	return c, nil
}

// revisionConfig reads the document of revision gen as stored (not
// migrated): a whole one, or a delta applied to the document of gen-1,
// read the same way, down to the last whole one.
func (d *DirStorage) revisionConfig(gen int64) (*Config, error) {
	var chain []*revisionFile
	for g := gen; ; g-- {
		r, err := readRevisionFile(d.revisionPath(g))
		if err != nil {
			if len(chain) > 0 && errors.Is(err, fs.ErrNotExist) {
				return nil, fmt.Errorf("revision %d: the revisions it is a delta from are gone (%w)", gen, err)
			}
			return nil, err
		}
		chain = append(chain, r)
		if r.Config != nil {
			break
		}
		if r.Base != g-1 {
			return nil, fmt.Errorf("revision %d: a delta from %d", g, r.Base)
		}
	}
	c := chain[len(chain)-1].Config
	for i := len(chain) - 2; i >= 0; i-- {
		if err := chain[i].Delta.Apply(c); err != nil {
			return nil, fmt.Errorf("revision %d: %w", chain[i].Generation, err)
		}
		c.Generation = chain[i].Generation
	}
	return c, nil
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

// revisionFile is the content of dir/revisions/NNNN.json. The small
// members come first so Revisions can read them without decoding config.
type revisionFile struct {
	Generation int64     `json:"generation"`
	Time       time.Time `json:"time"`
	Summary    string    `json:"summary"`
	Actor      string    `json:"actor,omitempty"`
	Node       string    `json:"node,omitempty"`
	RestoreOf  int64     `json:"restore_of,omitempty"`
	// Audit is the write's audit record (UpdateOptions.AuditRecord), when
	// it had one: who asked, from where, which request.
	Audit json.RawMessage `json:"audit,omitempty"`
	// Config is the whole document, or (between snapshots) Delta the
	// change from generation Base (the one before).
	Config *Config `json:"config,omitempty"`
	Base   int64   `json:"base,omitempty"`
	Delta  *Delta  `json:"delta,omitempty"`
}

// corrupt builds the refusal to start for a bad config.json.
func (d *DirStorage) corrupt(path string, cause error) error {
	last := "no readable revision"
	if gen, rpath, ok := d.lastGoodRevision(); ok {
		last = fmt.Sprintf("generation %d at %s", gen, rpath)
	}
	return fmt.Errorf("%w: %s: %w; last good revision: %s "+
		"(copy its \"config\" member to %s to resume from it)", ErrCorrupt, path, cause, last, path)
}

// lastGoodRevision finds the newest revision file that decodes.
func (d *DirStorage) lastGoodRevision() (int64, string, bool) {
	names, err := d.revisionNames()
	if err != nil {
		return 0, "", false
	}
	for _, n := range slices.Backward(names) {
		p := filepath.Join(d.revDir(), n)
		g, _ := parseRevisionName(n)
		if r, err := readRevision(p); err == nil {
			return r.Generation, p, true
		} else if _, err := d.revisionConfig(g); err == nil {
			return g, p + " (a delta: restore it with POST /api/v1/config/revisions/N/restore once running, or copy \"config\" of the whole revision before it and start)", true
		}
	}
	return 0, "", false
}

// Dir is the absolute path of the state directory.

// storageFailed records err, a refused write, as the state directory's
// fault and returns it as a *StorageError.
func (d *DirStorage) storageFailed(err error) error {
	se := &StorageError{Err: err}
	d.noteFault(se)
	return se
}

func (d *DirStorage) noteFault(se *StorageError) {
	d.lastProbe.Store(time.Now().UnixNano()) // the first probe a second later
	if d.fault.Swap(se) == nil {
		d.log.Error("the state directory refuses writes: no change can be saved until it is fixed", "err", se.Err)
	}
}

func (d *DirStorage) storageOK() {
	if d.fault.Swap(nil) != nil {
		d.log.Info("the state directory takes writes again")
	}
}

// Health is nil while the state directory takes writes; after a refused
// write it is that *StorageError until a write succeeds again: a Commit,
// or a probe (a small temporary file created, written, fsynced and removed
// in the directory and in revisions/) that Health itself makes at most
// once a second. Any goroutine.
func (d *DirStorage) Health() error {
	f := d.fault.Load()
	if f == nil {
		return nil
	}
	now := time.Now().UnixNano()
	last := d.lastProbe.Load()
	if now-last < int64(storageProbeEvery) || !d.lastProbe.CompareAndSwap(last, now) {
		return f
	}
	if err := d.probe(); err != nil {
		// Keep the fault of the refused write; the probe says the same.
		return f
	}
	if d.fault.CompareAndSwap(f, nil) {
		d.log.Info("the state directory takes writes again")
	}
	if f := d.fault.Load(); f != nil { // a write failed again meanwhile
		return f
	}
	return nil
}

// probe writes and removes a temporary file where Update writes. Its name
// is that of config.json's temporary files, so Open removes one left by a
// crash.
func (d *DirStorage) probe() error {
	for _, dir := range []string{d.dir, d.revDir()} {
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

func (d *DirStorage) configPath() string { return filepath.Join(d.dir, ConfigFile) }
func (d *DirStorage) revDir() string     { return filepath.Join(d.dir, RevisionsDir) }

func (d *DirStorage) revisionPath(gen int64) string {
	return filepath.Join(d.revDir(), revisionName(gen))
}

func revisionName(gen int64) string {
	return fmt.Sprintf("%0*d%s", revisionDigits, gen, revisionSuffix)
}

// parseRevisionName returns the generation of a revision file name.
func parseRevisionName(name string) (int64, bool) {
	digits, ok := strings.CutSuffix(name, revisionSuffix)
	if !ok {
		return 0, false
	}
	return parseGeneration(digits)
}

// parseGeneration reads the revisionDigits decimal digits of a revision's
// or a journal's file name.
func parseGeneration(digits string) (int64, bool) {
	if len(digits) != revisionDigits {
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
func (d *DirStorage) revisionNames() ([]string, error) {
	ents, err := os.ReadDir(d.revDir())
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

func (d *DirStorage) writeConfig(c *Config) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("config store: encode generation %d: %w", c.Generation, err)
	}
	return d.writeConfigDoc(doc)
}

// writeConfigDoc commits doc (compact JSON of a Config) as config.json.
func (d *DirStorage) writeConfigDoc(doc []byte) error {
	if err := d.writeFile(d.dir, ConfigFile, indentDoc(doc), nil); err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	return nil
}

func (d *DirStorage) writeRevision(c *Config, t time.Time, summary string) error {
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("config store: encode revision %d: %w", c.Generation, err)
	}
	return d.writeRevisionDoc(RevisionInfo{Generation: c.Generation, Time: t, Summary: summary}, doc, nil)
}

// writeRevisionDoc writes revisions/NNN.json as one line of compact JSON:
// the header members first (so the listing reads them without decoding the
// config), then the config, reusing doc so a write encodes the config once.
func (d *DirStorage) writeRevisionDoc(info RevisionInfo, doc, audit []byte) error {
	gen := info.Generation
	info.Time = info.Time.UTC()
	hdr, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("config store: encode revision %d: %w", gen, err)
	}
	var buf bytes.Buffer
	buf.Grow(len(hdr) + len(audit) + len(doc) + 32)
	buf.Write(hdr[:len(hdr)-1]) // without the closing brace
	writeAudit(&buf, audit)
	buf.WriteString(`,"config":`)
	buf.Write(doc)
	buf.WriteString("}\n")
	if err := d.writeFile(d.revDir(), revisionName(gen), buf.Bytes(), nil); err != nil {
		return fmt.Errorf("config store: %w", err)
	}
	return nil
}

func (d *DirStorage) removeRevision(gen int64) error {
	if err := os.Remove(d.revisionPath(gen)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("config store: remove revision %d: %w", gen, err)
	}
	return syncDir(d.revDir())
}

// ensureRevision writes the revision of the current config if it is missing
// (a crash between the commit of config.json and the revision, at bootstrap).
func (d *DirStorage) ensureRevision(c *Config) error {
	if c.Generation <= 0 {
		return nil
	}
	if _, err := os.Stat(d.revisionPath(c.Generation)); err == nil || !errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	d.log.Warn("revision of the current generation missing, writing it", "generation", c.Generation)
	return d.writeRevision(c, time.Now(), "recovered from "+ConfigFile)
}

// removeUncommitted removes revisions newer than the committed generation:
// they were written by an Update that crashed before config.json was
// renamed, and were never applied.
func (d *DirStorage) removeUncommitted(committed int64) {
	names, err := d.revisionNames()
	if err != nil {
		return
	}
	for _, n := range names {
		if g, _ := parseRevisionName(n); g > committed {
			d.log.Warn("removing uncommitted revision", "file", n, "committed_generation", committed)
			_ = os.Remove(filepath.Join(d.revDir(), n))
		}
	}
}

// pruneRevisions keeps the newest MaxRevisions revision files and those
// the oldest of them is built on (a delta needs its chain back to a whole
// revision). It runs at each snapshot (a whole commit), so between two the
// directory holds up to SnapshotEvery more.
func (d *DirStorage) pruneRevisions() {
	names, err := d.revisionNames()
	if err != nil || len(names) <= MaxRevisions {
		return
	}
	cut := len(names) - MaxRevisions
	// the oldest kept revision must read: while it is a delta, keep the
	// one it is made on too
	for cut > 0 {
		r, err := readRevisionHeaderKind(filepath.Join(d.revDir(), names[cut]))
		if err != nil || r {
			break
		}
		cut--
	}
	for _, n := range names[:cut] {
		if d.recycle(filepath.Join(d.revDir(), n)) {
			continue
		}
		if err := os.Remove(filepath.Join(d.revDir(), n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("pruning revision failed", "file", n, "err", err)
		}
	}
}

// removeTemps deletes temporary files left by a write that crashed before
// its rename; their content was never committed. Only names starting with
// prefix: the state directory also holds api/tokens' files, whose temporary
// files (same WriteFileAtomic naming) may belong to a write in progress.
func (d *DirStorage) removeTemps(dir, prefix string) {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		if strings.HasPrefix(e.Name(), prefix) && strings.Contains(e.Name(), tmpMarker) && e.Type().IsRegular() {
			d.log.Warn("removing leftover temporary file", "file", filepath.Join(dir, e.Name()))
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

// readRevisionFile reads a revision file as stored: a whole document
// (Config, not migrated) or a Delta from Base.
func readRevisionFile(path string) (*revisionFile, error) {
	data, err := readFileNoFollow(path)
	if err != nil {
		return nil, err
	}
	var r revisionFile
	if err := DecodeBytes(data, &r); err != nil {
		// %v: a DecodeError is about a request body (400 or 422); a
		// damaged file is this server'd.
		return nil, fmt.Errorf("%s: damaged revision file: %v", path, err)
	}
	if g, _ := parseRevisionName(filepath.Base(path)); g != r.Generation {
		return nil, fmt.Errorf("%s: holds generation %d", path, r.Generation)
	}
	switch {
	case r.Config != nil && r.Delta == nil:
		if r.Config.Generation != r.Generation {
			return nil, fmt.Errorf("%s: holds generation %d, config generation %d", path, r.Generation, r.Config.Generation)
		}
	case r.Config == nil && r.Delta != nil:
	default:
		return nil, fmt.Errorf("%s: no config member", path)
	}
	return &r, nil
}

// readRevisionHeaderKind reports whether a revision file holds a whole
// document (true) or a delta, from its members after the header.
func readRevisionHeaderKind(path string) (whole bool, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return false, noFollowError(err)
	}
	defer f.Close()
	// the header is small: what follows it is in the first 64 KiB but
	// for a summary longer than that
	data, err := io.ReadAll(io.LimitReader(f, 64<<10))
	if err != nil {
		return false, err
	}
	i := bytes.Index(data, []byte(`,"config":`))
	j := bytes.Index(data, []byte(`,"base":`))
	switch {
	case i >= 0 && (j < 0 || i < j):
		return true, nil
	case j >= 0:
		return false, nil
	}
	return false, fmt.Errorf("%s: neither config nor delta", path)
}

// readRevision reads a revision file that holds a whole document,
// migrated and normalized.
func readRevision(path string) (*revisionFile, error) {
	data, err := readFileNoFollow(path)
	if err != nil {
		return nil, err
	}
	var r revisionFile
	if err := DecodeBytes(data, &r); err != nil {
		// %v: a DecodeError is about a request body (400 or 422); a
		// damaged file is this server'd.
		return nil, fmt.Errorf("%s: damaged revision file: %v", path, err)
	}
	if r.Config == nil {
		return nil, fmt.Errorf("%s: no config member", path)
	}
	if g, _ := parseRevisionName(filepath.Base(path)); g != r.Generation || r.Config.Generation != r.Generation {
		return nil, fmt.Errorf("%s: holds generation %d, config generation %d", path, r.Generation, r.Config.Generation)
	}
	if err := r.Config.Migrate(); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	r.Config.Normalize()
	return &r, nil
}

// readRevisionHeader reads the header members (RevisionInfo), which precede
// the config in the file, without decoding the config.
func readRevisionHeader(path string) (RevisionInfo, error) {
	info, _, err := readRevisionHead(path)
	return info, err
}

// readRevisionHead is readRevisionHeader and the member "audit", which
// also precedes the config.
func readRevisionHead(path string) (info RevisionInfo, audit json.RawMessage, err error) {
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return RevisionInfo{}, nil, noFollowError(err)
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	if t, err := dec.Token(); err != nil || t != json.Delim('{') {
		return info, nil, fmt.Errorf("%s: not a revision object", path)
	}
	for dec.More() {
		t, err := dec.Token()
		if err != nil {
			return info, nil, fmt.Errorf("%s: %w", path, err)
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
		case "node":
			dst = &info.Node
		case "restore_of":
			dst = &info.RestoreOf
		case "audit":
			dst = &audit
		case "config", "base", "delta":
			// written last (writeRevisionDoc): the header is complete
		default:
			var skip json.RawMessage
			dst = &skip
		}
		if dst == nil {
			break
		}
		if err := dec.Decode(dst); err != nil {
			return info, nil, fmt.Errorf("%s: %s: %w", path, key, err)
		}
	}
	if g, _ := parseRevisionName(filepath.Base(path)); g != info.Generation {
		return info, nil, fmt.Errorf("%s: holds generation %d", path, info.Generation)
	}
	return info, audit, nil
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
