package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// downRevisions is a cluster storage (over a state directory) whose
// revisions cannot be listed while down: etcd not answering at start.
type downRevisions struct {
	config.Storage
	down atomic.Bool
}

func (d *downRevisions) Kind() string { return "etcd" }

func (d *downRevisions) Revisions(ctx context.Context) ([]config.RevisionInfo, error) {
	if d.down.Load() {
		return nil, fmt.Errorf("etcd at 127.0.0.1:2379: list revisions: %w", config.ErrUnavailable)
	}
	return d.Storage.Revisions(ctx)
}

func openDownRevisions(t *testing.T) (*config.Store, *downRevisions) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	ds, err := config.NewDirStorage(t.TempDir(), log)
	if err != nil {
		t.Fatal(err)
	}
	d := &downRevisions{Storage: ds}
	st, err := config.OpenStore(d, "", log, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return st, d
}

// commitAs commits a generation taken by node.
func commitAs(t *testing.T, st *config.Store, node, backend string) int64 {
	t.Helper()
	res, err := st.Update(t.Context(), func(c *config.Config) error {
		c.Backends = append(c.Backends, config.Backend{Name: backend, Mode: "tcp"})
		return nil
	}, config.UpdateOptions{Node: node})
	if err != nil {
		t.Fatal(err)
	}
	return res.Generation
}

func auditLines(t *testing.T, dir, file string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, file))
	if errors.Is(err, os.ErrNotExist) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(strings.Fields(string(b)))
}

// A cluster node restarted while etcd is down cannot tell whose write
// committed the generation its interrupted write aimed at: the record
// waits in audit.pending, and is decided once the store answers.
func TestAuditRecoveryWaitsForTheStore(t *testing.T) {
	st, d := openDownRevisions(t)
	gen := commitAs(t, st, "edge-2", "other") // another node's write
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	run1 := newAuditLog(dir, log)
	run1.node = "edge-1"
	r := httptest.NewRequest("POST", "/api/v1/backends", nil)
	r = r.WithContext(context.WithValue(r.Context(), auditCtxKey{}, &auditRec{actor: "ops"}))
	if err := run1.begin(r, gen); err != nil {
		t.Fatal(err)
	}

	// The next run starts with etcd down.
	d.down.Store(true)
	defer func(d time.Duration) { auditRetryEvery = d }(auditRetryEvery)
	auditRetryEvery = 5 * time.Millisecond
	l := newAuditLog(dir, log)
	l.node = "edge-1"
	if err := l.recoverPending(st); err != nil {
		t.Fatal(err)
	}
	if n := auditLines(t, dir, auditFile); n != 0 {
		t.Fatalf("%d entries decided without the store's revisions", n)
	}
	if n := auditLines(t, dir, pendingFile); n != 1 {
		t.Fatalf("audit.pending: %d lines, want the waiting record", n)
	}
	r2 := httptest.NewRequest("POST", "/api/v1/backends", nil)
	r2 = r2.WithContext(context.WithValue(r2.Context(), auditCtxKey{}, &auditRec{actor: "ops"}))
	if err := l.begin(r2, gen+1); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("a write while the records wait for the store: %v, want ErrUnavailable", err)
	}

	d.down.Store(false) // etcd answers: the retry decides
	testutil.Eventually(t, 10*time.Second, func() bool {
		return auditLines(t, dir, pendingFile) == 0
	}, "the waiting record to be decided")
	if es := readAuditLog(t, dir); len(es) != 1 || es[0].Recovered != "not-applied" || es[0].Node != "edge-1" {
		t.Fatalf("entries %+v", es)
	}
}

// Through the API: a write on a node whose recovery waits for the store is
// refused 503 (not a state-directory fault) while the store does not
// answer; once it does, the write decides the old records first, gets an
// id of its own, and audit.pending is empty when it ends.
func TestAuditRecoveryWaitingThenAWrite(t *testing.T) {
	st, d := openDownRevisions(t)
	gen := commitAs(t, st, "edge-1", "mine") // the interrupted write committed
	dir := t.TempDir()
	old := AuditEntry{Node: "edge-1", Time: time.Now().UTC(), Actor: "ops", RequestID: "r-old",
		Method: "POST", Path: "/api/v1/backends", Generation: gen}
	b, _ := json.Marshal(pendingLine{ID: 1, Entry: &old})
	if err := os.WriteFile(filepath.Join(dir, pendingFile), append(b, '\n'), 0o600); err != nil {
		t.Fatal(err)
	}
	d.down.Store(true)
	defer func(d time.Duration) { auditRetryEvery = d }(auditRetryEvery)
	auditRetryEvery = time.Hour // the write settles, not the timer
	log := slog.New(slog.DiscardHandler)
	nop := &coretest.Nop{}
	fc := &fakeCluster{self: core.NodeIdentity{Name: "edge-1"}, store: st, core: nop,
		state: core.StoreState{Kind: "etcd", Connected: true}}
	h := New(Options{Store: st, Core: nop, Version: "test", StateDir: dir, AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}, Cluster: fc})
	f := &fixture{h: h, store: st, core: nop}

	w := f.must(t, http.StatusServiceUnavailable, "POST", "/api/v1/backends", backendWeb)
	if !strings.Contains(w.Body.String(), "store-unavailable") {
		t.Fatalf("answer %s", w.Body.String())
	}
	if err := st.StorageHealth(); err != nil {
		t.Fatalf("storage health after the refusal: %v", err)
	}
	d.down.Store(false)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends", backendWeb)
	es := readAuditLog(t, dir)
	var recovered, created bool
	for _, e := range es {
		recovered = recovered || (e.RequestID == "r-old" && e.Recovered == "applied" && e.Generation == gen)
		created = created || (e.Status == http.StatusCreated && e.Generation == gen+1)
	}
	if !recovered || !created {
		t.Fatalf("entries %+v", es)
	}
	if n := auditLines(t, dir, pendingFile); n != 0 {
		t.Fatalf("audit.pending: %d lines after the write", n)
	}
}

// On a single node a write's audit record is committed with its change:
// in the journal line (one fdatasync for both) and the revision file, not
// in audit.pending (a write and an fsync more per change, then a
// truncation). Before, the revision held no record.
func TestAuditRecordIsCommittedWithTheChange(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7}`, hdr{"X-Request-Id": "with-its-change"})
	gen := f.store.Current().Generation
	dir := f.store.Dir()
	b, err := os.ReadFile(filepath.Join(dir, "revisions", fmt.Sprintf("%020d.json", gen)))
	if err != nil {
		t.Fatal(err)
	}
	var rev struct {
		Audit *AuditEntry `json:"audit"`
	}
	if err := json.Unmarshal(b, &rev); err != nil {
		t.Fatal(err)
	}
	if rev.Audit == nil || rev.Audit.RequestID != "with-its-change" || rev.Audit.Method != "PATCH" || rev.Audit.Generation != gen {
		t.Fatalf("revision %d's audit record: %+v", gen, rev.Audit)
	}
	journal, _ := filepath.Glob(filepath.Join(dir, "journal.*"))
	found := false
	for _, p := range journal {
		j, _ := os.ReadFile(p)
		found = found || strings.Contains(string(j), `"request_id":"with-its-change"`)
	}
	if !found {
		t.Fatalf("no journal line holds the record (%v)", journal)
	}
	if n := auditLines(t, dir, pendingFile); n != 0 {
		t.Fatalf("audit.pending holds %d lines", n)
	}
	// the entry itself is in audit.log once, not recovered again at a restart
	g := newFixtureIn(t, dir)
	es, _ := g.audit(t, "?limit=1000")
	n := 0
	for _, e := range es {
		if e.RequestID == "with-its-change" {
			n++
		}
	}
	if n != 1 {
		t.Fatalf("%d entries of the write after a restart, want 1", n)
	}
}
