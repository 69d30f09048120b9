package api

import (
	"bufio"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/redact"
)

// pendingLine is one line of audit.pending: a write about to be persisted
// (ID and Entry), or the end of one (Done).
type pendingLine struct {
	ID    int64       `json:"id,omitempty"`
	Done  int64       `json:"done,omitempty"`
	Entry *AuditEntry `json:"entry,omitempty"`
}

// testFault, set only by tests, is called at the named points of a write
// ("pending": the pending record is durable, nothing persisted yet;
// "persisted": the generation is committed, its entry not yet written).
// Production code never sets it: no flag, environment variable or input
// reaches it.
var testFault func(point string)

func fault(point string) {
	if testFault != nil {
		testFault(point)
	}
}

func (l *auditLog) pendingPath() string { return filepath.Join(l.dir, pendingFile) }

// begin makes the write r durable in the trail before the store persists
// generation gen: a pending record appended and fsynced to audit.pending.
// It runs under the store's lock, so records are in the order the store
// ran the writes. An error refuses the write.
//
// The store runs a write's mutate again after a commit that lost a race
// (another node committed first): begin then ends the request's earlier
// record, which was never committed, and writes one for the generation the
// write now aims at. The request still makes one entry in audit.log.
//
// Records of a previous run still waiting for the store are decided first
// (settle); while the store cannot say, the write is refused.
//
// On a single node (the state directory), the record is not written here:
// begin keeps it in the request (recordOf), and the store writes it in the
// journal line that commits the generation, so that one fdatasync makes
// both durable; recoverPending reads it back from the revisions.
func (l *auditLog) begin(r *http.Request, gen int64) error {
	a := auditOf(r.Context())
	if a == nil || l.dir == "" {
		return nil
	}
	if err := l.settle(); err != nil {
		return err
	}
	e := l.entryOf(r, a)
	e.Generation = gen
	if l.inRevision.Load() {
		b, err := json.Marshal(&e)
		if err != nil {
			return fmt.Errorf("encode audit record: %w", err)
		}
		a.record = b
		return nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if a.pending != 0 {
		if err := l.endLocked(a.pending); err != nil {
			return fmt.Errorf("audit trail: %w", err)
		}
		a.pending = 0
	}
	id := l.pending + 1
	b, err := json.Marshal(pendingLine{ID: id, Entry: &e})
	if err != nil {
		return fmt.Errorf("encode audit pending record: %w", err)
	}
	if err := appendSync(l.pendingPath(), append(b, '\n'), true); err != nil {
		return fmt.Errorf("audit trail: %w", err)
	}
	l.pending = id
	l.open++
	a.pending = id
	return nil
}

// end drops the pending record id once its entry is in audit.log: the
// file is emptied when no write is under way, else a done line is added
// (not fsynced: a lost one is matched against audit.log at start-up).
func (l *auditLog) end(id int64) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.endLocked(id)
}

func (l *auditLog) endLocked(id int64) error {
	l.open--
	if l.open <= 0 {
		l.open = 0
		f, err := openNoFollow(l.pendingPath(), os.O_WRONLY|os.O_TRUNC)
		if err != nil {
			return err
		}
		return f.Close()
	}
	b, _ := json.Marshal(pendingLine{Done: id})
	return appendSync(l.pendingPath(), append(b, '\n'), false)
}

func appendSync(path string, b []byte, sync bool) error {
	f, err := openNoFollow(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE)
	if err != nil {
		return err
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return err
	}
	if sync {
		if err := f.Sync(); err != nil {
			f.Close()
			return err
		}
	}
	return f.Close()
}

// pendingRec is a record a previous run left: a write that may or may not
// have committed its generation.
type pendingRec struct {
	id    int64
	entry AuditEntry
	// superseded: a later record names the same generation (see
	// recoverPending).
	superseded bool
}

// recoverPending turns the pending records a crash left into entries:
// "applied" when the store committed the record's generation, with the
// plan rebuilt from the revisions, else "not-applied". A record whose
// entry reached audit.log (its done line was lost) is skipped. Writes go
// through the store one at a time, with the generation current+1 they
// would create: a later record naming the same generation proves the
// earlier one did not commit it.
//
// In a cluster the revisions say which node committed each generation,
// and the node's current may be its cache of the last applied one: when
// the store cannot list them (etcd down at start), nothing is decided.
// The records stay in audit.pending (held open, their ids not reused) and
// are decided by settle once the store answers: on a timer, and before
// the node's next write begins, which refuses the write while the store
// still does not answer (it could not commit anyway).
func (l *auditLog) recoverPending(st *config.Store) error {
	if l.dir == "" || st == nil {
		return nil
	}
	recs, last, err := l.readPending()
	if err != nil {
		return err
	}
	if len(recs) > 0 {
		revs, err := st.Revisions()
		if err != nil && st.Storage().Kind() != "dir" {
			l.mu.Lock()
			l.waiting, l.waitStore = recs, st
			l.pending = max(l.pending, last)
			l.open += len(recs) // each ended once decided
			l.mu.Unlock()
			l.log.Warn("audit trail: writes under way at the last stop are recovered once the configuration store answers",
				"records", len(recs), "err", err)
			time.AfterFunc(l.retryEvery, l.retryRecovery)
			return nil
		}
		l.mu.Lock()
		err = l.decideLocked(st, recs, revs)
		l.mu.Unlock()
		if err != nil {
			return fmt.Errorf("audit trail: %w", err)
		}
	}
	if err := os.Truncate(l.pendingPath(), 0); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("audit trail: %w", err)
	}
	if d, ok := st.Storage().(*config.DirStorage); ok {
		if err := l.recoverFromRevisions(st, d); err != nil {
			return fmt.Errorf("audit trail: %w", err)
		}
		l.inRevision.Store(true)
	}
	return nil
}

// auditRecoverRevisions is how many of the newest revisions recovery
// reads the audit records of: a write's entry is in audit.log (fsynced)
// before its answer, so only the writes under way at a crash, between
// their commit and their entry, can lack one.
const auditRecoverRevisions = 16

// recoverFromRevisions writes the entries of the writes whose revision
// holds their audit record (begin, on a single node) but audit.log not
// their entry: a crash stopped them between their commit and their entry
// (recovered "applied").
func (l *auditLog) recoverFromRevisions(st *config.Store, d *config.DirStorage) error {
	ras, err := d.RevisionAudits(auditRecoverRevisions)
	if err != nil || len(ras) == 0 {
		return err
	}
	var recs []pendingRec
	for _, ra := range slices.Backward(ras) { // oldest first
		var e AuditEntry
		if json.Unmarshal(ra.Record, &e) != nil {
			continue
		}
		e.Generation = ra.Generation
		recs = append(recs, pendingRec{entry: e})
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.decideLocked(st, recs, nil)
}

// recordOf is the audit record begin kept for the write r
// (UpdateOptions.AuditRecord): nil when it wrote it to audit.pending
// itself, or did not run (a dry run).
func (l *auditLog) recordOf(r *http.Request) func() []byte {
	return func() []byte {
		if a := auditOf(r.Context()); a != nil {
			return a.record
		}
		return nil
	}
}

// readPending returns the records of audit.pending not marked done, and
// the highest id in the file.
func (l *auditLog) readPending() (recs []pendingRec, last int64, err error) {
	f, err := openNoFollow(l.pendingPath(), os.O_RDONLY)
	if errors.Is(err, os.ErrNotExist) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("audit trail: %w", err)
	}
	var all []pendingLine
	done := map[int64]bool{}
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		var p pendingLine
		if json.Unmarshal(sc.Bytes(), &p) != nil {
			continue // a torn last line: its write never reached the store
		}
		last = max(last, p.ID, p.Done)
		if p.Done != 0 {
			done[p.Done] = true
		} else if p.Entry != nil {
			all = append(all, p)
		}
	}
	err = sc.Err()
	f.Close()
	if err != nil {
		return nil, 0, fmt.Errorf("audit trail: read %s: %w", l.pendingPath(), err)
	}
	for i, p := range all {
		if done[p.ID] {
			continue
		}
		r := pendingRec{id: p.ID, entry: *p.Entry}
		for _, q := range all[i+1:] {
			r.superseded = r.superseded || q.Entry.Generation == r.entry.Generation
		}
		recs = append(recs, r)
	}
	return recs, last, nil
}

// decideLocked writes the entry of each record, given the store's kept
// revisions.
func (l *auditLog) decideLocked(st *config.Store, recs []pendingRec, revs []config.RevisionInfo) error {
	committed := st.Current().Generation
	// In a cluster, other nodes commit generations too: a record's
	// generation committed by another node was not this write's. A
	// committed generation is never reverted there, and the node's
	// current may lag the store's.
	cluster := st.Storage().Kind() != "dir"
	nodeOf := map[int64]string{}
	for _, r := range revs {
		nodeOf[r.Generation] = r.Node
		if cluster {
			committed = max(committed, r.Generation)
		}
	}
	for _, p := range recs {
		if l.hasEntryLocked(&p.entry) {
			continue
		}
		e := p.entry
		superseded := p.superseded
		if n := nodeOf[e.Generation]; n != "" && n != e.Node {
			superseded = true
		}
		if !superseded && e.Generation <= committed {
			e.Recovered = "applied"
			if after, err := st.Revision(e.Generation); err == nil {
				before, _ := st.Revision(e.Generation - 1)
				plan := config.Diff(before, after)
				e.Plan = &plan
				if len(plan.Items) <= auditDiffItems {
					e.Changes = changesOf(&plan, before, after)
				}
			}
		} else {
			e.Recovered, e.Generation = "not-applied", 0
			e.Error = "spliced stopped before this write was committed; it was not applied"
		}
		l.log.Warn("audit entry recovered from a write under way when spliced stopped",
			"request_id", e.RequestID, "method", e.Method, "path", e.Path, "recovered", e.Recovered, "generation", e.Generation)
		if err := l.writeLocked(&e); err != nil {
			return err
		}
	}
	return nil
}

// settle decides the records waiting for the store, if any; an error
// means they still wait. No write of this run commits before they are
// decided (begin settles first), so the store's revisions, whenever read,
// tell what the previous run committed.
func (l *auditLog) settle() error {
	l.mu.Lock()
	st := l.waitStore
	l.mu.Unlock()
	if st == nil {
		return nil
	}
	revs, err := st.Revisions()
	if err != nil {
		return fmt.Errorf("audit trail: writes under way at the last stop not yet recovered: %w", err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.waitStore == nil {
		return nil // decided meanwhile
	}
	if err := l.decideLocked(st, l.waiting, revs); err != nil {
		return fmt.Errorf("audit trail: %w", err)
	}
	recs := l.waiting
	l.waiting, l.waitStore = nil, nil
	l.log.Info("audit trail: writes under way at the last stop recovered", "records", len(recs))
	for _, p := range recs {
		if err := l.endLocked(p.id); err != nil {
			// Their entries are in audit.log: the next start skips them.
			l.log.Error("audit pending record not cleared", "path", l.pendingPath(), "err", err)
		}
	}
	return nil
}

// retryRecovery settles the waiting records, again later until it can.
func (l *auditLog) retryRecovery() {
	if l.settle() != nil {
		time.AfterFunc(l.retryEvery, l.retryRecovery)
	}
}

// hasEntryLocked: audit.log already holds the entry of pending record p
// (the same request, written after p).
func (l *auditLog) hasEntryLocked(p *AuditEntry) bool {
	found, n := false, 0
	_ = l.scan(func(e *AuditEntry) bool {
		n++
		if e.RequestID == p.RequestID && e.Method == p.Method && e.Path == p.Path && !e.Time.Before(p.Time) {
			found = true
		}
		return !found && n < 1000 && !e.Time.Before(p.Time)
	})
	return found
}

// refusals counts the requests refused before authentication and samples
// them into the server log.
type refusals struct {
	count *prometheus.CounterVec
	log   *slog.Logger

	mu      sync.Mutex
	sec     int64 // the second the budget is for
	logged  int   // lines logged in that second
	dropped int64 // refusals not logged since the last line
}

func newRefusals(log *slog.Logger) *refusals {
	return &refusals{log: log, count: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "spliced_admin_refused_total",
		Help: "Admin API requests refused before authentication (no or bad token, bad Host or Origin, too many failures), by status code. Not in the audit trail.",
	}, []string{"code"})}
}

func (f *refusals) note(r *http.Request, status int) {
	f.count.WithLabelValues(strconv.Itoa(status)).Inc()
	now := time.Now().Unix()
	f.mu.Lock()
	if now != f.sec {
		f.sec, f.logged = now, 0
	}
	if f.logged >= refusedLogPerSec {
		f.dropped++
		f.mu.Unlock()
		return
	}
	f.logged++
	dropped := f.dropped
	f.dropped = 0
	f.mu.Unlock()
	f.log.LogAttrs(r.Context(), slog.LevelWarn, "admin request refused before authentication",
		slog.Int("status", status), slog.String("method", r.Method),
		slog.String("path", truncate(redactURI(r.URL), 200)), slog.String("remote", r.RemoteAddr),
		slog.String("request_id", requestID(r.Context())), slog.Int64("not_logged_before", dropped))
}

const redacted = redact.Redacted

// redactURI is u's path and query as logged (redact.URI): credentials
// replaced by REDACTED.
func redactURI(u *url.URL) string { return redact.URI(u) }

func redactPath(p string) string { return redact.Path(p) }

// secretLike is a secret quoted in a text (redact.SecretLike).
var secretLike = redact.SecretLike
