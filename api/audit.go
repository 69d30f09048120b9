package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// The audit trail: every write through the API (POST, PUT, PATCH, DELETE)
// by an admitted client, accepted or refused, dry runs included, is one JSON
// line appended to audit.log in the state directory. The file is rotated
// past auditMaxBytes to audit.log.1 .. audit.log.N (AuditKeep files kept).
//
// Requests refused before authentication (no or bad token, bad Host or
// Origin, too many failures) are not written there: anyone who can reach
// the port could otherwise push the real entries out. They are counted
// (spliced_admin_refused_total{code}) and sampled into the server log, at
// most refusedLogPerSec lines a second.
//
// A change is durable in the trail no later than in the store: a record
// of the write is committed with it. On a single node (the state
// directory) the record is the "audit" member of the change's revision,
// in the journal line that commits it (UpdateOptions.AuditRecord: one
// fdatasync for both); at start-up (recoverFromRevisions) the newest
// revisions' records whose entry audit.log lacks become entries marked
// recovered "applied". On a cluster node, before the store commits a
// generation, a pending record of the write is appended and fsynced to
// audit.pending; once the answer is out, the full entry goes to audit.log
// and the pending record is dropped. At start-up (recoverPending) a
// pending record left by a crash becomes an entry marked recovered
// "applied" (its generation was committed) or "not-applied".
// On a cluster node started while the store does not answer, the records
// wait (kept in audit.pending) until it does: retried every retryEvery,
// and before the node's next write begins.

const (
	auditFile     = "audit.log"
	pendingFile   = "audit.pending"
	auditMaxBytes = 16 << 20
	// AuditKeepDefault is how many rotated audit files are kept.
	AuditKeepDefault = 10
	// refusedLogPerSec bounds the sampled log of pre-auth refusals.
	refusedLogPerSec = 5
	// auditDiffItems: a change of at most this many plan items carries the
	// before/after of each changed object; a bigger one only its plan.
	auditDiffItems = 8
	// auditDiffBytes bounds the before/after of one entry.
	auditDiffBytes = 64 << 10
	auditMaxLimit  = 1000
)

// auditRetryEvery paces the recovery of pending records that wait for the
// cluster store (a variable for the tests).
var auditRetryEvery = 5 * time.Second

// AuditChange is the before and after of one changed object (absent on
// create and delete respectively).
type AuditChange struct {
	Object string          `json:"object" example:"backend/web/server/s1"`
	Before json.RawMessage `json:"before,omitempty" swaggertype:"object"`
	After  json.RawMessage `json:"after,omitempty" swaggertype:"object"`
}

// AuditEntry is one write through the API.
type AuditEntry struct {
	// Seq orders entries; it is the cursor of GET /api/v1/audit?before=.
	Seq  int64     `json:"seq" example:"42"`
	Time time.Time `json:"time"`
	// Actor is the token name that authenticated the request, "local"
	// while the API has no tokens.
	Actor     string `json:"actor" example:"local"`
	Remote    string `json:"remote" example:"127.0.0.1:51234"`
	RequestID string `json:"request_id" example:"5f2c0e7a9b1d4c3e8f6a2b1c"`
	Method    string `json:"method" example:"PATCH"`
	Path      string `json:"path" example:"/api/v1/backends/web/servers/s1"`
	DryRun    bool   `json:"dry_run,omitempty"`
	// Status is the HTTP status answered; Generation the generation the
	// write created (or, for a dry run or an empty change, the current one).
	Status     int    `json:"status" example:"200"`
	Generation int64  `json:"generation,omitempty" example:"8"`
	Error      string `json:"error,omitempty" example:"urn:spliced:problem:validation: /port: must be between 1 and 65535"`
	// Plan is what the change does (accepted and dry-run writes).
	Plan *config.Plan `json:"plan,omitempty"`
	// Changes holds the before/after of each changed object when the plan
	// has at most 8 items.
	Changes []AuditChange `json:"changes,omitempty"`
	// Node is the node that took the write (--node-name; absent on
	// entries written before nodes had names).
	Node string `json:"node,omitempty" example:"edge-1"`
	// Recovered is set on an entry written at start-up for a write that
	// was under way when spliced stopped (killed, crashed, power lost):
	// "applied" (its generation was committed; Status is then 0, as no
	// answer was sent) or "not-applied".
	Recovered string `json:"recovered,omitempty" example:"applied"`
}

// auditRec is what a request contributes to its audit entry while it runs;
// one per write request, in its context. Only the request's goroutine uses it.
type auditRec struct {
	actor  string
	dry    bool
	gen    int64
	hasGen bool
	errTxt string
	plan   *config.Plan
	before *config.Config
	after  *config.Config
	// pending is the id of this write's record in audit.pending (0: none).
	pending int64
	// record is this write's audit record for its revision (begin, on a
	// single node: recordOf).
	record []byte
}

type auditCtxKey struct{}

func auditOf(ctx context.Context) *auditRec {
	a, _ := ctx.Value(auditCtxKey{}).(*auditRec)
	return a
}

type actorCtxKey struct{}

// withActor records who makes the request: the audit entry's actor and a
// context value handlers can read (actor). The auth middleware of the
// security issue calls it with the token name.
func withActor(r *http.Request, name string) *http.Request {
	if a := auditOf(r.Context()); a != nil {
		a.actor = name
	}
	return r.WithContext(context.WithValue(r.Context(), actorCtxKey{}, name))
}

// actor is the name withActor recorded, "local" when none.
func actor(ctx context.Context) string {
	if n, ok := ctx.Value(actorCtxKey{}).(string); ok && n != "" {
		return n
	}
	return "local"
}

// auditBefore records the configuration a write starts from (called inside
// the store's lock, where Current is the config being changed).
func auditBefore(r *http.Request, cur *config.Config) {
	if a := auditOf(r.Context()); a != nil {
		a.before = cur
	}
}

// auditResult records a write's outcome from store.Update.
func auditResult(r *http.Request, dry bool, res *config.Result) {
	a := auditOf(r.Context())
	if a == nil || res == nil {
		return
	}
	a.dry, a.gen, a.hasGen = dry, res.Generation, true
	p := res.Plan
	a.plan = &p
	a.after = res.Config
}

// auditProblem records the problem a request was answered with.
func auditProblem(r *http.Request, p *Problem) {
	if a := auditOf(r.Context()); a != nil {
		a.errTxt = truncate(secretLike.ReplaceAllString(p.Type+": "+p.Detail, redacted), 512)
	}
}

func isWrite(method string) bool {
	switch method {
	case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
		return true
	}
	return false
}

// auditLog appends entries to dir/audit.log and reads them back.
type auditLog struct {
	dir      string
	log      *slog.Logger
	maxBytes int64 // rotate past this size
	keep     int   // rotated files kept: audit.log.1 .. audit.log.keep
	// sys, when set, gets a copy of every entry (local syslog/journald).
	sys     io.Writer
	node    string // this node's name, in every entry
	refused *refusals

	mu      sync.Mutex
	seq     int64 // last sequence number written
	init    bool
	pending int64 // last pending id given
	open    int   // pending records not yet completed
	// waiting holds the records of a previous run that recovery could not
	// decide yet (the cluster store did not answer at start); waitStore is
	// nil once they are decided. retryEvery paces the retries.
	waiting    []pendingRec
	waitStore  *config.Store
	retryEvery time.Duration
	// inRevision: the store keeps each write's audit record in its
	// revision (the state directory; set by recoverPending), so begin
	// writes no audit.pending record.
	inRevision atomic.Bool
}

func newAuditLog(dir string, log *slog.Logger) *auditLog {
	return &auditLog{dir: dir, log: log, maxBytes: auditMaxBytes, keep: AuditKeepDefault, refused: newRefusals(log),
		retryEvery: auditRetryEvery}
}

func (l *auditLog) path(n int) string {
	p := filepath.Join(l.dir, auditFile)
	if n > 0 {
		p += "." + strconv.Itoa(n)
	}
	return p
}

// middleware writes one entry per write request once it is answered, and
// counts the requests refused before authentication instead.
func (l *auditLog) middleware(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := &auditRec{}
		sw := &statusWriter{ResponseWriter: w}
		defer func() {
			st := sw.status
			if st == 0 {
				st = http.StatusOK
			}
			v := recover()
			if v != nil {
				// The recoverer is inside; a panic here is one that
				// aborts the connection. Record it, then let it go on.
				st = http.StatusInternalServerError
			}
			switch {
			case preAuthRefusal(rec, r.Method, st):
				l.refused.note(r, st)
			case isWrite(r.Method) && l.dir != "":
				l.append(r, rec, st)
			}
			if v != nil {
				panic(v)
			}
		}()
		next.ServeHTTP(sw, r.WithContext(context.WithValue(r.Context(), auditCtxKey{}, rec)))
	})
}

// preAuthRefusal: the request was refused before it was admitted (the
// guard named it anonymous and never admitted it). Public routes are
// anonymous too, but never answer 401, 403 or 429, and take no writes.
func preAuthRefusal(a *auditRec, method string, status int) bool {
	if a.actor != actorAnonymous || status < 400 {
		return false
	}
	switch status {
	case http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests:
		return true
	}
	return isWrite(method)
}

// entryOf is the entry of a request, without its outcome.
func (l *auditLog) entryOf(r *http.Request, a *auditRec) AuditEntry {
	e := AuditEntry{Node: l.node,
		Time: time.Now().UTC(), Actor: a.actor, Remote: r.RemoteAddr,
		RequestID: requestID(r.Context()), Method: r.Method, Path: truncate(redactURI(r.URL), 1024),
		DryRun: a.dry,
	}
	if e.Actor == "" {
		e.Actor = "local"
	}
	return e
}

// append writes the entry of a finished request. Failing to write the
// audit trail is logged; it does not undo the answered write (whose
// pending record then stays, and becomes an entry at the next start).
func (l *auditLog) append(r *http.Request, a *auditRec, status int) {
	e := l.entryOf(r, a)
	e.Status = status
	if a.hasGen && status < 400 {
		e.Generation = a.gen
		e.Plan = a.plan
		if a.plan != nil && len(a.plan.Items) <= auditDiffItems {
			e.Changes = changesOf(a.plan, a.before, a.after)
		}
	}
	if status >= 400 {
		e.Error = a.errTxt
		if e.Error == "" {
			e.Error = http.StatusText(status)
		}
	}
	if err := l.write(&e); err != nil {
		l.log.Error("audit log write failed", "path", l.path(0), "request_id", e.RequestID, "err", err)
		return
	}
	if a.pending != 0 {
		if err := l.end(a.pending); err != nil {
			l.log.Error("audit pending record not cleared", "path", filepath.Join(l.dir, pendingFile), "err", err)
		}
	}
}

func (l *auditLog) write(e *AuditEntry) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.writeLocked(e)
}

func (l *auditLog) writeLocked(e *AuditEntry) error {
	if !l.init {
		l.seq = l.lastSeq()
		l.init = true
	}
	e.Seq = l.seq + 1
	b, err := json.Marshal(e)
	if err != nil {
		return fmt.Errorf("encode audit entry: %w", err)
	}
	b = append(b, '\n')
	if fi, err := os.Lstat(l.path(0)); err == nil && fi.Mode().IsRegular() && fi.Size()+int64(len(b)) > l.maxBytes {
		if err := l.rotate(); err != nil {
			return err
		}
	}
	if err := appendSyncRaw(l.path(0), b); err != nil {
		return err
	}
	l.seq++
	if l.sys != nil {
		if _, err := l.sys.Write(b[:len(b)-1]); err != nil {
			l.log.Warn("audit copy to syslog failed", "seq", e.Seq, "err", err)
		}
	}
	return nil
}

// appendSyncRaw appends b to path (created 0600, a symbolic link refused)
// and fsyncs it, through a raw descriptor: an os.File would try to add the
// file to the poller first (four fcntl and an epoll_ctl that fails).
func appendSyncRaw(path string, b []byte) error {
	fd, err := syscall.Open(path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	for err == syscall.EINTR {
		fd, err = syscall.Open(path, syscall.O_WRONLY|syscall.O_APPEND|syscall.O_CREAT|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	}
	if errors.Is(err, syscall.ELOOP) {
		return fmt.Errorf("open audit log: %s is a symbolic link; refusing to follow it (remove it): %w", path, err)
	}
	if err != nil {
		return fmt.Errorf("open audit log: %w", &os.PathError{Op: "open", Path: path, Err: err})
	}
	for rest := b; len(rest) > 0 && err == nil; {
		var n int
		n, err = syscall.Write(fd, rest)
		switch {
		case err == syscall.EINTR:
			err = nil
		case err == nil && n == 0:
			err = io.ErrShortWrite
		case err == nil:
			rest = rest[n:]
		}
	}
	if err != nil {
		syscall.Close(fd)
		return fmt.Errorf("append audit log: %w", &os.PathError{Op: "write", Path: path, Err: err})
	}
	for err = syscall.Fsync(fd); err == syscall.EINTR; err = syscall.Fsync(fd) {
	}
	if err != nil {
		syscall.Close(fd)
		return fmt.Errorf("sync audit log: %w", &os.PathError{Op: "fsync", Path: path, Err: err})
	}
	if err := syscall.Close(fd); err != nil {
		return fmt.Errorf("close audit log: %w", &os.PathError{Op: "close", Path: path, Err: err})
	}
	return nil
}

// rotate shifts audit.log.N-1 to .N, ..., audit.log to .1; the oldest kept
// file is replaced.
func (l *auditLog) rotate() error {
	for n := max(l.keep, 1); n >= 1; n-- {
		if err := os.Rename(l.path(n-1), l.path(n)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("rotate audit log: %w", err)
		}
	}
	return nil
}

// openNoFollow opens path for appending or reading, refusing a symbolic
// link (one planted in the state directory would make spliced write, as
// its user, to the file it points to).
func openNoFollow(path string, flag int) (*os.File, error) {
	f, err := os.OpenFile(path, flag|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if errors.Is(err, syscall.ELOOP) {
		return nil, fmt.Errorf("%s is a symbolic link; refusing to follow it (remove it): %w", path, err)
	}
	return f, err
}

// lastSeq is the sequence number of the newest entry on disk (0 if none),
// so numbering goes on across restarts.
func (l *auditLog) lastSeq() int64 {
	var last int64
	_ = l.scan(func(e *AuditEntry) bool { last = e.Seq; return false })
	return last
}

// scan calls fn with entries newest first until fn returns false.
func (l *auditLog) scan(fn func(e *AuditEntry) bool) error {
	for n := 0; n <= max(l.keep, 1); n++ {
		more, err := scanFileBackwards(l.path(n), fn)
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			return err
		}
		if !more {
			return nil
		}
	}
	return nil
}

// scanFileBackwards reads path from its end in blocks and calls fn for each
// line decoded as an entry, last line first. Lines that do not decode (a
// torn last write) are skipped. It returns false when fn asked to stop.
func scanFileBackwards(path string, fn func(e *AuditEntry) bool) (bool, error) {
	f, err := openNoFollow(path, os.O_RDONLY)
	if err != nil {
		return true, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return true, err
	}
	const block = 64 << 10
	end := fi.Size()
	var tail []byte // bytes after the last newline seen, belonging to the line before
	for end > 0 {
		start := max(end-block, 0)
		buf := make([]byte, end-start, int(end-start)+len(tail))
		if _, err := f.ReadAt(buf, start); err != nil && err != io.EOF {
			return true, err
		}
		buf = append(buf, tail...)
		// Every complete line is after a newline in buf (or starts the file).
		for {
			i := bytes.LastIndexByte(buf[:max(len(buf)-1, 0)], '\n')
			if i < 0 {
				break
			}
			if !decodeLine(buf[i+1:], fn) {
				return false, nil
			}
			buf = buf[:i+1]
		}
		tail = buf
		end = start
	}
	if len(tail) > 0 && !decodeLine(tail, fn) {
		return false, nil
	}
	return true, nil
}

func decodeLine(line []byte, fn func(e *AuditEntry) bool) bool {
	line = bytes.TrimSpace(line)
	if len(line) == 0 {
		return true
	}
	var e AuditEntry
	if json.Unmarshal(line, &e) != nil {
		return true
	}
	return fn(&e)
}

// changesOf is the before/after of the objects a small plan touches.
func changesOf(p *config.Plan, before, after *config.Config) []AuditChange {
	var out []AuditChange
	size := 0
	for _, it := range p.Items {
		c := AuditChange{Object: it.Object}
		if before != nil && it.Op != "create" {
			c.Before = objectJSON(before, it.Object)
		}
		if after != nil && it.Op != "delete" {
			c.After = objectJSON(after, it.Object)
		}
		size += len(c.Before) + len(c.After)
		if size > auditDiffBytes {
			return out
		}
		out = append(out, c)
	}
	return out
}

// objectJSON is the JSON of the object a plan item names ("frontend/f",
// "frontend/f/bind/b", "backend/b", "backend/b/server/s", "tuning",
// "cpu_map", "irq", "certificate/c", "node/n"), nil when absent.
func objectJSON(c *config.Config, obj string) json.RawMessage {
	var v any
	parts := strings.Split(obj, "/")
	switch {
	case obj == "tuning":
		v = c.Tuning
	case obj == "cpu_map":
		v = c.CPUMap
	case obj == "irq":
		v = c.IRQ
	case parts[0] == "node" && len(parts) == 2:
		if s, ok := c.Nodes[parts[1]]; ok {
			v = s
		}
	case parts[0] == "certificate" && len(parts) == 2:
		if i := c.FindCertificate(parts[1]); i >= 0 {
			v = c.Certificates[i] // metadata and fingerprints: the document holds no key
		}
	case parts[0] == "frontend" && len(parts) >= 2:
		for i := range c.Frontends {
			f := &c.Frontends[i]
			if f.Name != parts[1] {
				continue
			}
			if len(parts) == 2 {
				v = f
			} else if len(parts) == 4 && parts[2] == "bind" {
				for j := range f.Binds {
					if f.Binds[j].Name == parts[3] {
						v = f.Binds[j]
					}
				}
			}
		}
	case parts[0] == "backend" && len(parts) >= 2:
		if i := c.FindBackend(parts[1]); i >= 0 {
			b := &c.Backends[i]
			if len(parts) == 2 {
				v = b
			} else if len(parts) == 4 && parts[2] == "server" {
				if j := config.FindServer(b.Servers, parts[3]); j >= 0 {
					v = b.Servers[j]
				}
			}
		}
	}
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	return b
}

// read returns up to limit entries older than before (0 = newest), newest
// first.
func (l *auditLog) read(limit int, before int64, keep auditFilter) ([]AuditEntry, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := []AuditEntry{}
	err := l.scan(func(e *AuditEntry) bool {
		if (before > 0 && e.Seq >= before) || !keep.match(e) {
			return true
		}
		out = append(out, *e)
		return len(out) < limit
	})
	return out, err
}

// auditFilter selects entries of GET /api/v1/audit (the zero value: all).
type auditFilter struct {
	actor  string // exact token name
	object string // lower case; in the path or a changed or planned object
	result string // "ok" (answered 1xx-3xx, or recovered applied) or "refused"
	dry    string // "true": dry runs only, "false": none
}

func (f auditFilter) match(e *AuditEntry) bool {
	if f.actor != "" && e.Actor != f.actor {
		return false
	}
	if f.dry != "" && e.DryRun != (f.dry == "true") {
		return false
	}
	if f.result != "" && auditOK(e) != (f.result == "ok") {
		return false
	}
	if f.object == "" {
		return true
	}
	if p := strings.ToLower(e.Path); strings.Contains(p, f.object) || strings.Contains(objectPath.Replace(p), f.object) {
		return true
	}
	for _, c := range e.Changes {
		if strings.Contains(strings.ToLower(c.Object), f.object) {
			return true
		}
	}
	if e.Plan != nil {
		for _, it := range e.Plan.Items {
			if strings.Contains(strings.ToLower(it.Object), f.object) {
				return true
			}
		}
	}
	return false
}

// objectPath names the objects of a request path as plans do:
// /api/v1/backends/web/servers/s1 holds backend/web/server/s1.
var objectPath = strings.NewReplacer("backends/", "backend/", "servers/", "server/", "frontends/", "frontend/",
	"binds/", "bind/", "certificates/", "certificate/", "irqs/", "irq/")

// auditOK says whether the write was accepted: answered below 400, or
// recovered as applied (no answer was sent).
func auditOK(e *AuditEntry) bool {
	return (e.Status > 0 && e.Status < 400) || (e.Status == 0 && e.Recovered == "applied")
}

// auditFilterOf reads the filters of GET /api/v1/audit and returns them
// with their query string ("&actor=..." in a fixed order, for the Link).
func auditFilterOf(q url.Values) (auditFilter, string, error) {
	f := auditFilter{actor: q.Get("actor"), object: strings.ToLower(q.Get("object")), result: q.Get("result"), dry: q.Get("dry_run")}
	if f.result != "" && f.result != "ok" && f.result != "refused" {
		return f, "", &apiError{Status: http.StatusBadRequest, Code: "bad-query", Detail: fmt.Sprintf("result must be ok or refused, not %q", truncate(f.result, 40))}
	}
	if f.dry != "" && f.dry != "true" && f.dry != "false" {
		return f, "", &apiError{Status: http.StatusBadRequest, Code: "bad-query", Detail: fmt.Sprintf("dry_run must be true or false, not %q", truncate(f.dry, 40))}
	}
	var b strings.Builder
	for _, kv := range [][2]string{{"actor", f.actor}, {"object", q.Get("object")}, {"result", f.result}, {"dry_run", f.dry}} {
		if kv[1] != "" {
			b.WriteString("&" + kv[0] + "=" + url.QueryEscape(kv[1]))
		}
	}
	return f, b.String(), nil
}

// audit godoc
//
//	@Summary		Audit trail of writes, newest first
//	@Description	Every write through the API (POST, PUT, PATCH, DELETE), accepted or refused, dry runs included: who (actor), from where, which request, the plan and, for changes of at most 8 plan items, the before/after of each changed object, and the result. Kept in audit.log in the state directory (rotated past 16 MiB; --audit-keep rotated files kept). Requests refused before authentication are not entries (see spliced_admin_refused_total). An entry with recovered set was written at start-up for a write under way when spliced stopped. Page with ?before= set to the seq of the last entry received; the Link header (rel="next") gives the next page. actor, object, result and dry_run select entries (all of them on every page).
//	@Tags			observability
//	@Produce		json
//	@Param			limit	query		integer	false	"entries per page (1..1000, default 100)"
//	@Param			before	query		integer	false	"only entries with a seq below this"
//	@Param			actor	query		string	false	"only the entries of this actor (token name)"
//	@Param			object	query		string	false	"only entries whose path, changed or planned objects contain this (case-insensitive), e.g. backend/web"
//	@Param			result	query		string	false	"ok: accepted writes (status below 400, or recovered applied); refused: the others"	Enums(ok, refused)
//	@Param			dry_run	query		bool	false	"true: dry runs only; false: no dry run; absent: both"
//	@Success		200		{array}		AuditEntry
//	@Failure		400		{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/audit [get]
func (s *server) audit(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, err := intQuery(q.Get("limit"), 100, 1, auditMaxLimit, "limit")
	if err != nil {
		return err
	}
	before, err := intQuery(q.Get("before"), 0, 1, 1<<62, "before")
	if err != nil {
		return err
	}
	keep, filters, err := auditFilterOf(q)
	if err != nil {
		return err
	}
	entries, err := s.obs.audit.read(limit, int64(before), keep)
	if err != nil {
		return fmt.Errorf("read audit log: %w", err)
	}
	if n := len(entries); n == limit && entries[n-1].Seq > 1 {
		w.Header().Set("Link", fmt.Sprintf(`<%s/audit?limit=%d&before=%d%s>; rel="next"`, base, limit, entries[n-1].Seq, filters))
	}
	return writeValue(w, http.StatusOK, entries)
}

func intQuery(v string, def, lo, hi int, name string) (int, error) {
	if v == "" {
		return def, nil
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < lo || n > hi {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "bad-query",
			Detail: fmt.Sprintf("%s must be an integer between %d and %d, not %q", name, lo, hi, truncate(v, 40))}
	}
	return n, nil
}
