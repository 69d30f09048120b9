package config

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

func openStore(t *testing.T, dir, bootstrap string) *Store {
	t.Helper()
	s, err := Open(dir, bootstrap, nil)
	if err != nil {
		t.Fatalf("Open(%s): %v", dir, err)
	}
	// before t.TempDir's removal: a snapshot may still be written
	t.Cleanup(func() { _ = s.Storage().Close() })
	return s
}

// settled waits for the snapshots being written (config.json and the
// prune of revisions happen after a commit returns).
func settled(s *Store) *Store {
	dirOf(s).WaitSnapshots()
	return s
}

// dirOf is the DirStorage under a Store of Open (its files, its test hooks).
func dirOf(s *Store) *DirStorage { return s.st.(*DirStorage) }

func addBackend(name string) func(c *Config) error {
	return func(c *Config) error {
		c.Backends = append(c.Backends, Backend{Name: name, Servers: []*Server{{Name: "s1", Address: "127.0.0.1", Port: 8081}}})
		return nil
	}
}

func mustUpdate(t *testing.T, s *Store, mutate func(c *Config) error) *Result {
	t.Helper()
	r, err := s.Update(context.Background(), mutate, UpdateOptions{})
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return r
}

func readFile(t *testing.T, p string) string {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func revisionGens(t *testing.T, s *Store) []int64 {
	t.Helper()
	settled(s)
	revs, err := s.Revisions()
	if err != nil {
		t.Fatal(err)
	}
	var g []int64
	for _, r := range revs {
		g = append(g, r.Generation)
	}
	return g
}

func TestStoreOpenInitialisesEmptyState(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "state")
	s := openStore(t, dir, "")
	if s.Current().Generation != 0 || len(s.Current().Frontends) != 0 || s.Current().Frontends == nil {
		t.Fatalf("Current() = %+v, want empty normalized generation 0", s.Current())
	}
	if s.Current().Tuning.RunqueueDepth != DefaultRunqueueDepth {
		t.Fatal("empty config is not normalized")
	}
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state dir mode = %v, %v; want 0700", fi.Mode().Perm(), err)
	}
	if !strings.Contains(readFile(t, filepath.Join(dir, ConfigFile)), `"generation": 0`) {
		t.Fatal("config.json not written with its generation")
	}
	if g := revisionGens(t, s); len(g) != 0 {
		t.Fatalf("revisions %v, want none for generation 0", g)
	}
	if s.Dir() != dir {
		t.Fatalf("Dir() = %q", s.Dir())
	}
}

func TestStoreResumesAfterReopen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	r := mustUpdate(t, s, addBackend("api"))
	if r.Generation != 2 {
		t.Fatalf("generation %d, want 2", r.Generation)
	}
	s2 := openStore(t, dir, "")
	got := s2.Current()
	if got.Generation != 2 || got.FindBackend("web") != 0 || got.FindBackend("api") != 1 {
		t.Fatalf("reopened config = gen %d, backends %+v", got.Generation, got.Backends)
	}
	if r := mustUpdate(t, s2, addBackend("third")); r.Generation != 3 {
		t.Fatalf("generation after reopen %d, want 3", r.Generation)
	}
	if g := revisionGens(t, s2); !slices.Equal(g, []int64{3, 2, 1}) {
		t.Fatalf("revisions %v, want [3 2 1]", g)
	}
}

func TestStoreUpdateResultAndRevisions(t *testing.T) {
	s := openStore(t, t.TempDir(), "")
	r := mustUpdate(t, s, addBackend("web"))
	if r.Generation != 1 || r.Config != s.Current() || r.Config.Generation != 1 {
		t.Fatalf("result %+v, current %p", r, s.Current())
	}
	if r.Plan.Summary() != "create backend/web" {
		t.Fatalf("plan %v", r.Plan)
	}
	revs, _ := s.Revisions()
	if len(revs) != 1 || revs[0].Summary != "create backend/web" || revs[0].Time.Location().String() != "UTC" || revs[0].Time.IsZero() {
		t.Fatalf("revisions %+v", revs)
	}
	c, err := s.Revision(1)
	if err != nil || c.FindBackend("web") != 0 || c.Generation != 1 {
		t.Fatalf("Revision(1) = %+v, %v", c, err)
	}
	for _, gen := range []int64{0, 2, -1} {
		if _, err := s.Revision(gen); !errors.Is(err, ErrNotFound) {
			t.Fatalf("Revision(%d) = %v, want ErrNotFound", gen, err)
		}
	}
}

func TestStoreClientCannotChooseGeneration(t *testing.T) {
	s := openStore(t, t.TempDir(), "")
	r := mustUpdate(t, s, func(c *Config) error { c.Generation = 42; return addBackend("web")(c) })
	if r.Generation != 1 {
		t.Fatalf("generation %d, want 1", r.Generation)
	}
}

func TestStoreDryRunPersistsNothing(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	before := readFile(t, filepath.Join(dir, ConfigFile))
	cur := s.Current()
	applied := false
	r, err := s.Update(context.Background(), addBackend("api"), UpdateOptions{DryRun: true,
		Apply: func(context.Context, *Config) error { applied = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Generation != 1 || r.Plan.Summary() != "create backend/api" || r.Config.FindBackend("api") < 0 {
		t.Fatalf("dry run result %+v", r)
	}
	if applied || s.Current() != cur || readFile(t, filepath.Join(dir, ConfigFile)) != before {
		t.Fatal("dry run changed something")
	}
	if g := revisionGens(t, s); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v after dry run", g)
	}
	if cur.FindBackend("api") >= 0 {
		t.Fatal("dry run mutated the current snapshot")
	}
}

func TestStoreEmptyPlanCreatesNoGeneration(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	cur := s.Current()
	applied := false
	r, err := s.Update(context.Background(), func(c *Config) error {
		c.Backends[0].Servers[0].Weight = nil // normalizes back to the default
		return nil
	}, UpdateOptions{Apply: func(context.Context, *Config) error { applied = true; return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if r.Generation != 1 || !r.Plan.Empty() || r.Plan.Items == nil || applied || s.Current() != cur {
		t.Fatalf("no-op update: %+v applied=%v", r, applied)
	}
	if g := revisionGens(t, s); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v", g)
	}
}

// A write that only reorders servers is a change: it used to answer an
// empty plan and keep the old order, so that the document read back was
// not the one written (and roundrobin's turns stayed as they were).
func TestStoreServerOrderIsAChange(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, func(c *Config) error {
		c.Backends = append(c.Backends, Backend{Name: "web", Servers: []*Server{
			{Name: "a", Address: "127.0.0.1", Port: 1}, {Name: "b", Address: "127.0.0.1", Port: 2},
			{Name: "c", Address: "127.0.0.1", Port: 3}}})
		return nil
	})
	r := mustUpdate(t, s, func(c *Config) error {
		sv := c.Backends[0].Servers
		sv[0], sv[1], sv[2] = sv[2], sv[0], sv[1]
		return nil
	})
	if r.Generation != 2 || r.Plan.Summary() != "update backend/web (servers)" {
		t.Fatalf("reorder: generation %d, plan %q", r.Generation, r.Plan.Summary())
	}
	names := func(c *Config) string {
		var n []string
		for _, sv := range c.Backends[0].Servers {
			n = append(n, sv.Name)
		}
		return strings.Join(n, ",")
	}
	if got := names(s.Current()); got != "c,a,b" {
		t.Fatalf("running order %s", got)
	}
	settled(s).Storage().Close()
	if got := names(openStore(t, dir, "").Current()); got != "c,a,b" {
		t.Fatalf("order after a restart %s", got)
	}
}

func TestStoreFailedApplyRollsBack(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	before := readFile(t, filepath.Join(dir, ConfigFile))
	cur := s.Current()
	applyErr := &ApplyError{Field: "/frontends/0/binds/0", Object: "frontend f bind b", Err: errors.New("address in use")}
	var sawGen int64
	_, err := s.Update(context.Background(), addBackend("api"), UpdateOptions{
		Apply: func(_ context.Context, c *Config) error {
			sawGen = c.Generation
			// While Apply runs, the new generation is on disk.
			if _, err := os.Stat(dirOf(s).revisionPath(2)); err != nil {
				t.Errorf("revision 2 not persisted before Apply: %v", err)
			}
			return applyErr
		}})
	if !errors.Is(err, ErrConflict) || !errors.Is(err, applyErr) {
		t.Fatalf("Update() = %v, want the Apply error", err)
	}
	if sawGen != 2 {
		t.Fatalf("Apply saw generation %d, want 2", sawGen)
	}
	if s.Current() != cur {
		t.Fatal("Current changed after a failed Apply")
	}
	if got := readFile(t, filepath.Join(dir, ConfigFile)); got != before {
		t.Fatalf("config.json not restored:\n%s", got)
	}
	if g := revisionGens(t, s); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v, want [1]", g)
	}
	// The next accepted write takes the generation the failed one did not.
	if r := mustUpdate(t, s, addBackend("api")); r.Generation != 2 {
		t.Fatalf("next generation %d, want 2", r.Generation)
	}
	if s2 := openStore(t, dir, ""); s2.Current().Generation != 2 {
		t.Fatalf("reopened generation %d", s2.Current().Generation)
	}
}

func TestStoreUpdateReturnsMutateAndValidationErrors(t *testing.T) {
	s := openStore(t, t.TempDir(), "")
	mine := fmt.Errorf("backend x: %w", ErrNotFound)
	if _, err := s.Update(context.Background(), func(*Config) error { return mine }, UpdateOptions{}); err != mine {
		t.Fatalf("mutate error came back as %v", err)
	}
	_, err := s.Update(context.Background(), func(c *Config) error {
		c.Backends = append(c.Backends, Backend{Name: "Bad"})
		return nil
	}, UpdateOptions{})
	var ve *ValidationError
	if !errors.As(err, &ve) || ve.Errors[0].Field != "/backends/0/name" {
		t.Fatalf("invalid update: %v", err)
	}
	// Field rules still run on a changed server of an existing backend
	// (unchanged servers are skipped, having passed before).
	mustUpdate(t, s, addBackend("web"))
	_, err = s.Update(context.Background(), func(c *Config) error {
		c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: "s2", Address: "::1", Port: 2})
		c.Backends[0].Servers[0].Port = 0
		return nil
	}, UpdateOptions{})
	if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != "/backends/0/servers/0/port" {
		t.Fatalf("changed server with port 0: %v", err)
	}
	// Env from the options is used.
	_, err = s.Update(context.Background(), func(c *Config) error {
		c.CPUMap = CPUMap{Mode: CPUMapManual, Threads: []ThreadCPUs{{Thread: 0, CPUs: []int{9}}}}
		return nil
	}, UpdateOptions{Env: fourCPUs})
	if !errors.As(err, &ve) || ve.Errors[0].Code != CodeCPUUnknown {
		t.Fatalf("unknown CPU accepted: %v", err)
	}
	if s.Current().Generation != 1 {
		t.Fatal("a refused update created a generation")
	}
}

func TestStoreCrashBeforeRenameKeepsOldConfig(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	// A crashed Update of generation 2: its temporary files were written
	// and fsynced, but never renamed.
	next := s.Current().Clone()
	next.Generation = 2
	_ = addBackend("api")(next)
	b, _ := marshalConfig(next)
	strays := []string{
		filepath.Join(dir, "."+ConfigFile+tmpMarker+"123456"),
		filepath.Join(dir, RevisionsDir, "."+revisionName(2)+tmpMarker+"99"),
	}
	for _, p := range strays {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	s2 := openStore(t, dir, "")
	if c := s2.Current(); c.Generation != 1 || c.FindBackend("api") >= 0 {
		t.Fatalf("reopened at generation %d with backends %v", c.Generation, c.Backends)
	}
	for _, p := range strays {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("stray %s not cleaned: %v", p, err)
		}
	}
}

func TestStoreCrashAfterRevisionBeforeConfigDropsUncommittedRevision(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	next := s.Current().Clone()
	next.Generation = 2
	if err := dirOf(s).writeRevision(next, time.Now(), "never committed"); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, "")
	if g := revisionGens(t, s2); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v, want the uncommitted 2 removed", g)
	}
	if r := mustUpdate(t, s2, addBackend("api")); r.Generation != 2 {
		t.Fatalf("generation %d", r.Generation)
	}
}

func TestStoreRefusesCorruptConfig(t *testing.T) {
	tests := []struct {
		name     string
		corrupt  func(t *testing.T, dir string, data string)
		wantLast string // "" = generation 3's file
	}{
		{name: "truncated config.json", corrupt: func(t *testing.T, dir, data string) {
			writeTestFile(t, filepath.Join(dir, ConfigFile), data[:len(data)/2])
		}},
		{name: "empty config.json", corrupt: func(t *testing.T, dir, data string) {
			writeTestFile(t, filepath.Join(dir, ConfigFile), "")
		}},
		{name: "unknown member in config.json", corrupt: func(t *testing.T, dir, data string) {
			writeTestFile(t, filepath.Join(dir, ConfigFile), strings.Replace(data, `"frontends"`, `"frontendz"`, 1))
		}},
		{name: "config.json that does not validate", corrupt: func(t *testing.T, dir, data string) {
			writeTestFile(t, filepath.Join(dir, ConfigFile), strings.Replace(data, `"port": 8081`, `"port": 0`, 1))
		}},
		{name: "truncated config.json and newest revision", corrupt: func(t *testing.T, dir, data string) {
			writeTestFile(t, filepath.Join(dir, ConfigFile), data[:len(data)-3])
			rev := filepath.Join(dir, RevisionsDir, revisionName(3))
			writeTestFile(t, rev, readFile(t, rev)[:40])
		}, wantLast: "generation 2 at "},
		{name: "config.json removed while revisions exist", corrupt: func(t *testing.T, dir, data string) {
			if err := os.Remove(filepath.Join(dir, ConfigFile)); err != nil {
				t.Fatal(err)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, "")
			for _, n := range []string{"a", "b", "c"} {
				mustUpdate(t, s, addBackend(n))
			}
			path := filepath.Join(dir, ConfigFile)
			tt.corrupt(t, dir, readFile(t, path))
			_, err := Open(dir, "", nil)
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Open() = %v, want ErrCorrupt", err)
			}
			last := tt.wantLast
			if last == "" {
				last = "generation 3 at "
			}
			for _, want := range []string{path, "last good revision: " + last} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not name %q", err, want)
				}
			}
			if tt.wantLast == "" && !strings.Contains(err.Error(), filepath.Join(dir, RevisionsDir, revisionName(3))) {
				t.Errorf("error %q does not name the revision file", err)
			}
			// Refused, not reset: the file is left as it was for the operator.
			if _, err := Open(dir, "", nil); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("second Open() = %v", err)
			}
		})
	}
}

func TestStoreCorruptConfigWithoutRevisions(t *testing.T) {
	dir := t.TempDir()
	openStore(t, dir, "")
	writeTestFile(t, filepath.Join(dir, ConfigFile), "{")
	_, err := Open(dir, "", nil)
	if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), "no readable revision") {
		t.Fatalf("Open() = %v", err)
	}
}

func writeTestFile(t *testing.T, p, data string) {
	t.Helper()
	if err := os.WriteFile(p, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestStoreBootstrapUsedOnlyWithoutConfig(t *testing.T) {
	tmp := t.TempDir()
	boot := filepath.Join(tmp, "boot.json")
	writeTestFile(t, boot, `{"generation":77,"backends":[{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":8081}]}],
		"frontends":[{"name":"public","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":8080}]}]}`)
	dir := filepath.Join(tmp, "state")
	s := openStore(t, dir, boot)
	c := s.Current()
	if c.Generation != 1 || c.FindBackend("web") != 0 || c.FindFrontend("public") != 0 || c.Backends[0].Balance != BalanceRoundRobin {
		t.Fatalf("bootstrapped config %+v", c)
	}
	revs, _ := s.Revisions()
	if len(revs) != 1 || revs[0].Generation != 1 || revs[0].Summary != "bootstrap from "+boot+": create frontend/public; create backend/web" {
		t.Fatalf("revisions %+v", revs)
	}
	mustUpdate(t, s, addBackend("api"))

	// A state directory with a config ignores the bootstrap file.
	writeTestFile(t, boot, `{"backends":[{"name":"other"}]}`)
	s2 := openStore(t, dir, boot)
	if s2.Current().Generation != 2 || s2.Current().FindBackend("other") >= 0 {
		t.Fatalf("bootstrap applied over existing state: %+v", s2.Current().Backends)
	}
}

func TestStoreBootstrapRefused(t *testing.T) {
	tests := map[string]string{
		"invalid document":  `{"backends":[{"name":"Web"}]}`,
		"unknown member":    `{"backendz":[]}`,
		"truncated":         `{"backends":[`,
		"missing bootstrap": "",
	}
	for name, body := range tests {
		t.Run(name, func(t *testing.T) {
			tmp := t.TempDir()
			boot := filepath.Join(tmp, "boot.json")
			if body != "" {
				writeTestFile(t, boot, body)
			}
			dir := filepath.Join(tmp, "state")
			if _, err := Open(dir, boot, nil); err == nil || !strings.Contains(err.Error(), "bootstrap") {
				t.Fatalf("Open() = %v, want a bootstrap error", err)
			}
			if _, err := os.Stat(filepath.Join(dir, ConfigFile)); !errors.Is(err, os.ErrNotExist) {
				t.Fatal("a refused bootstrap initialised the state directory")
			}
		})
	}
}

// TestStoreBootstrapWritesConfigFirst: the bootstrap commits config.json
// before revision 1, so a crash between the two leaves a config.json whose
// revision the next Open writes (TestStoreRecreatesMissingRevisionOfCurrent),
// never a revision without config.json, which Open refuses as a removed
// config.json. A refused revision write undoes config.json: the next Open
// bootstraps again.
func TestStoreBootstrapWritesConfigFirst(t *testing.T) {
	tmp := t.TempDir()
	boot := filepath.Join(tmp, "boot.json")
	writeTestFile(t, boot, `{"backends":[{"name":"web"}]}`)
	dir := filepath.Join(tmp, "state")
	d, err := NewDirStorage(dir, nil)
	if err != nil {
		t.Fatal(err)
	}
	var order []string
	d.writeFile = func(dir, name string, data []byte, prepare func(*os.File)) error {
		order = append(order, name)
		if name == revisionName(1) {
			return &fs.PathError{Op: "write", Path: name, Err: syscall.ENOSPC}
		}
		return WriteFileAtomic(dir, name, data, prepare)
	}
	var se *StorageError
	if _, err := OpenStore(d, boot, nil, StoreOptions{}); !errors.As(err, &se) {
		t.Fatalf("OpenStore with the revision refused: %v, want a *StorageError", err)
	}
	if !slices.Equal(order, []string{ConfigFile, revisionName(1)}) {
		t.Fatalf("bootstrap wrote %v, want config.json first", order)
	}
	if _, err := os.Stat(filepath.Join(dir, ConfigFile)); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("config.json left after the refused bootstrap: %v", err)
	}
	if s := openStore(t, dir, boot); s.Current().Generation != 1 || !slices.Equal(revisionGens(t, s), []int64{1}) {
		t.Fatalf("reopen after a refused bootstrap: generation %d", s.Current().Generation)
	}
}

func TestStoreRecreatesMissingRevisionOfCurrent(t *testing.T) {
	tmp := t.TempDir()
	boot := filepath.Join(tmp, "boot.json")
	writeTestFile(t, boot, `{"backends":[{"name":"web"}]}`)
	dir := filepath.Join(tmp, "state")
	openStore(t, dir, boot)
	// Crash after config.json was committed, before revision 1 was written.
	if err := os.Remove(filepath.Join(dir, RevisionsDir, revisionName(1))); err != nil {
		t.Fatal(err)
	}
	s := openStore(t, dir, boot)
	if g := revisionGens(t, s); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v", g)
	}
	if c, err := s.Revision(1); err != nil || c.FindBackend("web") != 0 {
		t.Fatalf("Revision(1) = %v, %v", c, err)
	}
}

func TestStoreKeepsLast100Revisions(t *testing.T) {
	// the newest MaxRevisions, the deltas' chain back to a whole revision
	// (at most SnapshotEvery-1 more) and those written since the last
	// prune, at the last snapshot (as many): every kept one reads
	dir := t.TempDir()
	s := openStore(t, dir, "")
	const n = MaxRevisions + 2*SnapshotEvery + 5
	for i := range n {
		mustUpdate(t, s, func(c *Config) error { c.Tuning.Maxaccept = i + 1; return nil })
	}
	g := revisionGens(t, s)
	if len(g) < MaxRevisions || len(g) >= MaxRevisions+2*SnapshotEvery || g[0] != n {
		t.Fatalf("kept %d revisions, newest %d oldest %d", len(g), g[0], g[len(g)-1])
	}
	oldest := g[len(g)-1]
	if _, err := s.Revision(oldest - 1); !errors.Is(err, ErrNotFound) {
		t.Fatalf("Revision(%d) = %v, want ErrNotFound", oldest-1, err)
	}
	for _, gen := range g {
		if c, err := s.Revision(gen); err != nil || c.Tuning.Maxaccept != int(gen) || c.Generation != gen {
			t.Fatalf("Revision(%d) = %v, %v", gen, c, err)
		}
	}
	names, _ := os.ReadDir(filepath.Join(dir, RevisionsDir))
	if len(names) != len(g) {
		t.Fatalf("%d files in revisions/", len(names))
	}
}

func TestStoreConcurrentUpdatesSerialise(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	const n = 16
	var wg sync.WaitGroup
	gens := make([]int64, n)
	errs := make([]error, n)
	for i := range n {
		wg.Go(func() {
			r, err := s.Update(context.Background(), addBackend(fmt.Sprintf("b%d", i)), UpdateOptions{
				Apply: func(_ context.Context, c *Config) error {
					_ = s.Current().Generation // readers run during writes
					return nil
				}})
			errs[i] = err
			if err == nil {
				gens[i] = r.Generation
			}
		})
		wg.Go(func() { _ = len(s.Current().Backends) })
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	slices.Sort(gens)
	for i, g := range gens {
		if g != int64(i+1) {
			t.Fatalf("generations %v, want 1..%d each once", gens, n)
		}
	}
	if c := s.Current(); c.Generation != n || len(c.Backends) != n {
		t.Fatalf("final generation %d with %d backends", c.Generation, len(c.Backends))
	}
	if c := openStore(t, dir, "").Current(); c.Generation != n || len(c.Backends) != n {
		t.Fatalf("reopened generation %d with %d backends", c.Generation, len(c.Backends))
	}
}

func TestStoreRevisionsSkipUnreadableFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("a"))
	mustUpdate(t, s, addBackend("b"))
	writeTestFile(t, dirOf(s).revisionPath(1), "garbage")
	writeTestFile(t, filepath.Join(dir, RevisionsDir, "README"), "not a revision")
	if g := revisionGens(t, s); !slices.Equal(g, []int64{2}) {
		t.Fatalf("revisions %v, want [2]", g)
	}
	if _, err := s.Revision(1); err == nil || errors.Is(err, ErrNotFound) {
		t.Fatalf("Revision(1) of a garbage file = %v, want a decode error", err)
	}
}

// BenchmarkUpdate10kServers measures one server state change in a config of
// 10 000 servers: clone, validate, diff, two atomic writes with fsync.
func BenchmarkUpdate10kServers(b *testing.B) {
	s, err := Open(b.TempDir(), "", nil)
	if err != nil {
		b.Fatal(err)
	}
	_, err = s.Update(context.Background(), func(c *Config) error {
		be := Backend{Name: "big"}
		for i := range 10000 {
			be.Servers = append(be.Servers, &Server{Name: fmt.Sprintf("s%d", i), Address: "10.0.0.1", Port: 1 + i})
		}
		c.Backends = append(c.Backends, be)
		return nil
	}, UpdateOptions{})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		i++
		state := AdminReady
		if i%2 == 1 {
			state = AdminDrain
		}
		if _, err := s.Update(context.Background(), func(c *Config) error {
			c.Backends[0].Servers[5000].AdminState = state
			return nil
		}, UpdateOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

func TestIndentDocMatchesJSONIndent(t *testing.T) {
	c := goodConfig()
	c.Backends[0].Servers[0].Name = `we"ird,{[:]}\`
	c.Frontends = append(c.Frontends, Frontend{Name: "e"})
	for _, v := range []any{c, &Config{}, map[string]any{}, []any{}, "x", 1, []any{map[string]any{}, []any{}, "a\\\"b"}} {
		doc, err := json.Marshal(v)
		if err != nil {
			t.Fatal(err)
		}
		var want bytes.Buffer
		if err := json.Indent(&want, doc, "", "  "); err != nil {
			t.Fatal(err)
		}
		want.WriteByte('\n')
		if got := indentDoc(doc); string(got) != want.String() {
			t.Fatalf("indentDoc(%s) =\n%s\nwant\n%s", doc, got, want.String())
		}
	}
}

func TestWriteFileAtomicReplacesAndLeavesNoTemp(t *testing.T) {
	dir := t.TempDir()
	for _, content := range []string{"first", "second"} {
		if err := WriteFileAtomic(dir, "f.json", []byte(content), nil); err != nil {
			t.Fatal(err)
		}
		if got := readFile(t, filepath.Join(dir, "f.json")); got != content {
			t.Fatalf("content %q, want %q", got, content)
		}
	}
	ents, _ := os.ReadDir(dir)
	if len(ents) != 1 {
		t.Fatalf("directory holds %d entries, want only f.json", len(ents))
	}
	if fi, _ := os.Stat(filepath.Join(dir, "f.json")); fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing"), "f.json", nil, nil); err == nil {
		t.Fatal("write into a missing directory succeeded")
	}
}

// TestStoreRefusesPlantedSymlinks: config.json, a revision file or the
// revisions directory replaced by a symbolic link is refused, never
// followed (someone who may write in the directory must not make spliced
// read or write another file).
func TestStoreRefusesPlantedSymlinks(t *testing.T) {
	t.Run("config.json", func(t *testing.T) {
		src := t.TempDir()
		s := openStore(t, src, "")
		mustUpdate(t, s, addBackend("web"))
		dir := t.TempDir()
		if err := os.Symlink(filepath.Join(src, ConfigFile), filepath.Join(dir, ConfigFile)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, "", nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("Open with config.json a symlink: %v, want a refusal naming the link", err)
		}
	})
	t.Run("revisions", func(t *testing.T) {
		dir := t.TempDir()
		elsewhere := t.TempDir()
		if err := os.Symlink(elsewhere, filepath.Join(dir, RevisionsDir)); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(dir, "", nil); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("Open with revisions/ a symlink: %v, want a refusal", err)
		}
		if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
			t.Fatalf("the link's target was written: %v", ents)
		}
	})
	t.Run("revision file", func(t *testing.T) {
		dir := t.TempDir()
		s := openStore(t, dir, "")
		mustUpdate(t, s, addBackend("web"))
		mustUpdate(t, s, addBackend("web2"))
		p := dirOf(s).revisionPath(1)
		moved := filepath.Join(t.TempDir(), "rev1")
		if err := os.Rename(p, moved); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(moved, p); err != nil {
			t.Fatal(err)
		}
		if _, err := s.Revision(1); err == nil || !strings.Contains(err.Error(), "symbolic link") {
			t.Fatalf("Revision(1) through a symlink: %v, want a refusal", err)
		}
		if _, err := readRevisionHeader(p); err == nil {
			t.Fatal("readRevisionHeader followed a symlink")
		}
	})
}

// TestStoreRefusedWriteIsAStorageErrorAndKeepsTheRunningConfig: a write the
// OS refuses (full, read-only, I/O error), on the revision or on
// config.json, returns a *StorageError carrying the errno, changes nothing
// on disk or in memory, and StorageHealth reports it until a write
// succeeds again (an Update, or the probe).
func TestStoreRefusedWriteIsAStorageErrorAndKeepsTheRunningConfig(t *testing.T) {
	for _, tc := range []struct {
		errno syscall.Errno
		on    string // the file whose write fails
		full  bool
	}{
		{syscall.ENOSPC, "revision", true},
		{syscall.EDQUOT, ConfigFile, true},
		{syscall.EROFS, "revision", false},
		{syscall.EIO, ConfigFile, false},
		{syscall.EACCES, ConfigFile, false},
	} {
		t.Run(tc.errno.Error()+" on "+tc.on, func(t *testing.T) {
			dir := t.TempDir()
			s := openStore(t, dir, "")
			mustUpdate(t, s, addBackend("web"))
			if tc.on == ConfigFile {
				dirOf(s).whole = true // the next commit is whole: config.json is written
			}
			cur, conf, gens := s.Current(), readFile(t, filepath.Join(dir, ConfigFile)), revisionGens(t, s)
			dirOf(s).writeFile = func(d, name string, data []byte, prepare func(*os.File)) error {
				if (tc.on == ConfigFile) == (name == ConfigFile) {
					return fmt.Errorf("write %s: %w", name, &fs.PathError{Op: "write", Path: filepath.Join(d, name), Err: tc.errno})
				}
				return WriteFileAtomic(d, name, data, prepare)
			}
			// a delta's commit: its journal line
			dirOf(s).journalWrite = func(fd int, b []byte) error {
				if tc.on == ConfigFile {
					return writeAndSync(fd, b)
				}
				return tc.errno
			}
			_, err := s.Update(context.Background(), addBackend("api"), UpdateOptions{})
			var se *StorageError
			if !errors.As(err, &se) || !errors.Is(err, tc.errno) || se.Full() != tc.full {
				t.Fatalf("Update: %v; want a StorageError wrapping %v, Full %v", err, tc.errno, tc.full)
			}
			if s.Current() != cur || readFile(t, filepath.Join(dir, ConfigFile)) != conf || !slices.Equal(revisionGens(t, s), gens) {
				t.Fatal("a refused write changed the running config or the files")
			}
			if h := s.StorageHealth(); !errors.Is(h, tc.errno) {
				t.Fatalf("StorageHealth after the refusal: %v", h)
			}
			// Still refused: the probe is not due, nor would it pass here
			// (it writes for real; only the next due probe clears).
			dirOf(s).writeFile, dirOf(s).journalWrite = WriteFileAtomic, writeAndSync
			if h := s.StorageHealth(); h == nil {
				t.Fatal("StorageHealth cleared before any write succeeded")
			}
			dirOf(s).lastProbe.Store(0) // the probe is due
			if h := s.StorageHealth(); h != nil {
				t.Fatalf("StorageHealth after a successful probe: %v", h)
			}
			// A successful Update clears it too.
			dirOf(s).writeFile = func(string, string, []byte, func(*os.File)) error { return syscall.ENOSPC }
			dirOf(s).journalWrite = func(int, []byte) error { return syscall.ENOSPC }
			if _, err := s.Update(context.Background(), addBackend("api"), UpdateOptions{}); err == nil {
				t.Fatal("Update succeeded on a full disk")
			}
			dirOf(s).writeFile, dirOf(s).journalWrite = WriteFileAtomic, writeAndSync
			mustUpdate(t, s, addBackend("api"))
			if h := s.StorageHealth(); h != nil {
				t.Fatalf("StorageHealth after a successful Update: %v", h)
			}
			if ents, _ := os.ReadDir(dir); slices.ContainsFunc(ents, func(e os.DirEntry) bool { return strings.Contains(e.Name(), tmpMarker) }) {
				t.Fatalf("a probe left a temporary file: %v", ents)
			}
		})
	}
}

// TestStoreRecordsAStorageErrorOfMutate: a write mutate makes first (the
// api's audit record) and the directory refuses makes the store unhealthy
// too, and the next successful Update clears it.
func TestStoreRecordsAStorageErrorOfMutate(t *testing.T) {
	s := openStore(t, t.TempDir(), "")
	refused := &StorageError{Err: &fs.PathError{Op: "write", Path: "audit.pending", Err: syscall.ENOSPC}}
	_, err := s.Update(context.Background(), func(*Config) error { return refused }, UpdateOptions{})
	if !errors.Is(err, refused) {
		t.Fatalf("Update: %v, want mutate's error unchanged", err)
	}
	if h := s.StorageHealth(); !errors.Is(h, syscall.ENOSPC) {
		t.Fatalf("StorageHealth after mutate's refused write: %v", h)
	}
	mustUpdate(t, s, addBackend("web"))
	if h := s.StorageHealth(); h != nil {
		t.Fatalf("StorageHealth after a successful Update: %v", h)
	}
}
