// Package storetest is the contract every config.Storage passes: the state
// directory (config.DirStorage, run by core/config's tests) and etcd
// (core/cluster's EtcdStorage). Run it from a test of the implementation:
//
//	func TestMyStorageContract(t *testing.T) {
//		storetest.Run(t, func(t *testing.T) config.Storage { return newEmptyStorage(t) })
//	}
//
// open must return a new, empty storage on each call (its own directory,
// its own etcd prefix) and release it with t.Cleanup. The suite writes small
// documents only and finishes in about a second on an idle machine.
package storetest

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// Run runs the contract against storages made by open: the Storage methods
// themselves, then a config.Store over them (Update, rollback, restore, two
// Stores as two nodes, the retry of a write that lost a race).
func Run(t *testing.T, open func(t *testing.T) config.Storage) {
	tests := []struct {
		name string
		run  func(t *testing.T, st config.Storage)
	}{
		{"EmptyLoad", testEmptyLoad},
		{"CommitOnNone", testCommitOnNone},
		{"StaleCommitRaces", testStaleCommitRaces},
		{"ConcurrentCommitsOneWins", testConcurrentCommitsOneWins},
		{"RevisionsKeptAndPruned", testRevisionsKeptAndPruned},
		{"Revert", testRevert},
		{"CertificateBundles", testCertificateBundles},
		{"StoreUpdateHeaders", testStoreUpdateHeaders},
		{"StoreFailedApplyReverts", testStoreFailedApplyReverts},
		{"StoreRestore", testStoreRestore},
		{"TwoStoresRefresh", testTwoStoresRefresh},
		{"StaleStoreRetries", testStaleStoreRetries},
		{"StoreGivesUpAfterMaxAttempts", testStoreGivesUpAfterMaxAttempts},
		{"BootstrapOnce", testBootstrapOnce},
		{"BootstrapLosesRace", testBootstrapLosesRace},
		{"ReseedJumps", testReseedJumps},
		{"StoreReseedsAStoreThatWentBack", testStoreReseedsAStoreThatWentBack},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := open(t)
			if st == nil {
				t.Fatal("open returned no storage")
			}
			tc.run(t, st)
		})
	}
}

var bg = context.Background()

// configWith is a normalized, valid config of generation gen holding
// backends of these names (one server each).
func configWith(t *testing.T, gen int64, backends ...string) *config.Config {
	t.Helper()
	c := &config.Config{}
	for _, b := range backends {
		c.Backends = append(c.Backends, config.Backend{Name: b, Servers: []*config.Server{{Name: "s1", Address: "127.0.0.1", Port: 8081}}})
	}
	c.Normalize()
	if err := config.Validate(c, config.Env{}); err != nil {
		t.Fatalf("test config: %v", err)
	}
	c.Generation = gen
	return c
}

func encode(t *testing.T, c *config.Config) []byte {
	t.Helper()
	b, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// commit commits a config of generation prev+1 with these backends.
func commit(t *testing.T, st config.Storage, prev int64, backends ...string) error {
	t.Helper()
	c := configWith(t, prev+1, backends...)
	return st.Commit(bg, prev, config.RevisionInfo{Generation: prev + 1, Time: time.Now(), Summary: fmt.Sprintf("gen %d", prev+1)}, encode(t, c), nil)
}

func mustCommit(t *testing.T, st config.Storage, prev int64, backends ...string) {
	t.Helper()
	if err := commit(t, st, prev, backends...); err != nil {
		t.Fatalf("Commit of generation %d on %d: %v", prev+1, prev, err)
	}
}

func load(t *testing.T, st config.Storage) (*config.Config, config.RevisionInfo) {
	t.Helper()
	c, info, err := st.Load(bg)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	return c, info
}

func backendNames(c *config.Config) string {
	var n []string
	for _, b := range c.Backends {
		n = append(n, b.Name)
	}
	return strings.Join(n, ",")
}

func revisionGens(t *testing.T, revs []config.RevisionInfo, err error) []int64 {
	t.Helper()
	if err != nil {
		t.Fatalf("Revisions: %v", err)
	}
	var g []int64
	for _, r := range revs {
		g = append(g, r.Generation)
	}
	return g
}

func storageGens(t *testing.T, st config.Storage) []int64 {
	t.Helper()
	revs, err := st.Revisions(bg)
	return revisionGens(t, revs, err)
}

func storeGens(t *testing.T, s *config.Store) []int64 {
	t.Helper()
	revs, err := s.Revisions()
	return revisionGens(t, revs, err)
}

func testEmptyLoad(t *testing.T, st config.Storage) {
	c, info, err := st.Load(bg)
	if err != nil || c != nil || info != (config.RevisionInfo{}) {
		t.Fatalf("Load of an empty storage = %v, %+v, %v; want nothing", c, info, err)
	}
	if g := storageGens(t, st); len(g) != 0 {
		t.Fatalf("revisions of an empty storage: %v", g)
	}
	if _, err := st.Revision(bg, 1); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Revision(1) of an empty storage: %v, want ErrNotFound", err)
	}
	if err := st.Health(); err != nil {
		t.Fatalf("Health of a new storage: %v", err)
	}
	if k := st.Kind(); k == "" {
		t.Fatal("Kind is empty")
	}
}

func testCommitOnNone(t *testing.T, st config.Storage) {
	now := time.Now().UTC()
	info := config.RevisionInfo{Generation: 1, Time: now, Summary: "create backend/web", Actor: "alice", Node: "edge-1", RestoreOf: 0}
	if err := st.Commit(bg, 0, info, encode(t, configWith(t, 1, "web")), nil); err != nil {
		t.Fatalf("Commit on 0: %v", err)
	}
	c, got := load(t, st)
	if c == nil || c.Generation != 1 || backendNames(c) != "web" {
		t.Fatalf("Load after the first commit: %+v", c)
	}
	if got.Generation != 1 || !got.Time.Equal(now) || got.Summary != info.Summary || got.Actor != "alice" || got.Node != "edge-1" {
		t.Fatalf("Load's header %+v, want %+v", got, info)
	}
	revs, err := st.Revisions(bg)
	if g := revisionGens(t, revs, err); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v, want [1]", g)
	}
	if r := revs[0]; !r.Time.Equal(now) || r.Summary != info.Summary || r.Actor != "alice" || r.Node != "edge-1" {
		t.Fatalf("revision header %+v, want %+v", r, info)
	}
	r, err := st.Revision(bg, 1)
	if err != nil || r.Generation != 1 || backendNames(r) != "web" {
		t.Fatalf("Revision(1) = %+v, %v", r, err)
	}
}

func testStaleCommitRaces(t *testing.T, st config.Storage) {
	mustCommit(t, st, 0, "web")
	mustCommit(t, st, 1, "web", "api")
	for _, prev := range []int64{0, 1, 3} {
		if err := commit(t, st, prev, "stale"); !errors.Is(err, config.ErrRace) {
			t.Fatalf("Commit on %d while 2 is current: %v, want ErrRace", prev, err)
		}
	}
	// Nor does it write its certificate bundles.
	meta, bundle := testCert(t, "stale")
	c := configWith(t, 2, "web")
	c.Certificates = []config.Certificate{meta}
	err := st.Commit(bg, 1, config.RevisionInfo{Generation: 2, Time: time.Now(), Summary: "stale"}, encode(t, c), map[string][]byte{meta.ChainSHA256: bundle})
	if !errors.Is(err, config.ErrRace) {
		t.Fatalf("Commit with a certificate on 1 while 2 is current: %v, want ErrRace", err)
	}
	if _, err := st.CertificateBundle(bg, meta.ChainSHA256); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("the bundle of a commit that lost: %v, want ErrNotFound", err)
	}
	c, _ = load(t, st)
	if c.Generation != 2 || backendNames(c) != "web,api" {
		t.Fatalf("a commit that lost changed the current: gen %d %s", c.Generation, backendNames(c))
	}
	if g := storageGens(t, st); !slices.Equal(g, []int64{2, 1}) {
		t.Fatalf("revisions %v, want [2 1]: a commit that lost wrote one", g)
	}
	if _, err := st.Revision(bg, 4); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Revision(4) of a lost commit: %v", err)
	}
}

func testConcurrentCommitsOneWins(t *testing.T, st config.Storage) {
	mustCommit(t, st, 0, "base")
	const n = 8
	errs := make([]error, n)
	docs := make([][]byte, n)
	for i := range docs {
		docs[i] = encode(t, configWith(t, 2, "base", fmt.Sprintf("w%d", i)))
	}
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			errs[i] = st.Commit(bg, 1, config.RevisionInfo{Generation: 2, Time: time.Now(), Summary: fmt.Sprint("writer ", i)}, docs[i], nil)
		}()
	}
	close(start)
	wg.Wait()
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil && winner >= 0:
			t.Fatalf("writers %d and %d both committed generation 2 on 1", winner, i)
		case err == nil:
			winner = i
		case !errors.Is(err, config.ErrRace):
			t.Fatalf("writer %d: %v, want nil or ErrRace", i, err)
		}
	}
	if winner < 0 {
		t.Fatal("no writer committed")
	}
	c, info := load(t, st)
	if c.Generation != 2 || backendNames(c) != fmt.Sprintf("base,w%d", winner) || info.Summary != fmt.Sprint("writer ", winner) {
		t.Fatalf("current is gen %d %s (%q), want writer %d's", c.Generation, backendNames(c), info.Summary, winner)
	}
	if g := storageGens(t, st); !slices.Equal(g, []int64{2, 1}) {
		t.Fatalf("revisions %v, want [2 1]", g)
	}
}

func testRevisionsKeptAndPruned(t *testing.T, st config.Storage) {
	const extra = 3
	last := int64(config.MaxRevisions + extra)
	for prev := int64(0); prev < last; prev++ {
		mustCommit(t, st, prev, fmt.Sprintf("b%d", prev%3))
	}
	g := storageGens(t, st)
	if len(g) != config.MaxRevisions || g[0] != last || g[len(g)-1] != extra+1 {
		t.Fatalf("%d revisions from %d to %d, want %d from %d down to %d", len(g), g[0], g[len(g)-1], config.MaxRevisions, last, extra+1)
	}
	if !slices.IsSortedFunc(g, func(a, b int64) int { return int(b - a) }) {
		t.Fatalf("revisions not newest first: %v", g)
	}
	for gen := int64(1); gen <= extra; gen++ {
		if _, err := st.Revision(bg, gen); !errors.Is(err, config.ErrNotFound) {
			t.Fatalf("Revision(%d), pruned: %v, want ErrNotFound", gen, err)
		}
	}
	r, err := st.Revision(bg, extra+1)
	if err != nil || r.Generation != extra+1 || backendNames(r) != fmt.Sprintf("b%d", extra%3) {
		t.Fatalf("Revision(%d), the oldest kept: %+v, %v", extra+1, r, err)
	}
}

func testRevert(t *testing.T, st config.Storage) {
	mustCommit(t, st, 0, "web")
	prev, _ := load(t, st)
	mustCommit(t, st, 1, "web", "api")
	if err := st.Revert(bg, prev, 2); err != nil {
		t.Fatalf("Revert of 2: %v", err)
	}
	c, info := load(t, st)
	if c.Generation != 1 || backendNames(c) != "web" || info.Generation != 1 {
		t.Fatalf("after Revert: gen %d %s (header %d), want 1 web", c.Generation, backendNames(c), info.Generation)
	}
	if g := storageGens(t, st); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions after Revert %v, want [1]", g)
	}
	if _, err := st.Revision(bg, 2); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Revision(2) after its Revert: %v", err)
	}
	if err := st.Revert(bg, prev, 2); !errors.Is(err, config.ErrRace) {
		t.Fatalf("Revert of 2 while 1 is current: %v, want ErrRace", err)
	}
	// The generation a reverted commit took is taken again.
	mustCommit(t, st, 1, "web", "other")
	if c, _ := load(t, st); c.Generation != 2 || backendNames(c) != "web,other" {
		t.Fatalf("after a commit following a Revert: gen %d %s", c.Generation, backendNames(c))
	}
}

// testCert is a self-signed certificate named name, its metadata and
// bundle as ParseCertificate makes them.
func testCert(t *testing.T, name string) (config.Certificate, []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: name + ".example"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour), DNSNames: []string{name + ".example"}}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	k8, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	meta, bundle, err := config.ParseCertificate(name,
		string(pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})),
		string(pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: k8})), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return meta, bundle
}

func testCertificateBundles(t *testing.T, st config.Storage) {
	meta, bundle := testCert(t, "site")
	c := configWith(t, 1, "web")
	c.Certificates = []config.Certificate{meta}
	err := st.Commit(bg, 0, config.RevisionInfo{Generation: 1, Time: time.Now(), Summary: "create certificate/site"},
		encode(t, c), map[string][]byte{meta.ChainSHA256: bundle})
	if err != nil {
		t.Fatalf("Commit with a certificate: %v", err)
	}
	got, err := st.CertificateBundle(bg, meta.ChainSHA256)
	if err != nil || !bytes.Equal(got, bundle) {
		t.Fatalf("CertificateBundle: %v, same bytes %v", err, bytes.Equal(got, bundle))
	}
	if _, err := st.CertificateBundle(bg, strings.Repeat("ab", 32)); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("CertificateBundle of an absent chain: %v, want ErrNotFound", err)
	}
	// Through a Store: an update adding a certificate commits its bundle,
	// and one naming a chain the storage does not hold is refused.
	s := openStore(t, st)
	meta2, bundle2 := testCert(t, "other")
	if _, err := s.Update(bg, func(c *config.Config) error {
		c.Certificates = append(c.Certificates, meta2)
		return nil
	}, config.UpdateOptions{Certificates: map[string][]byte{meta2.ChainSHA256: bundle2}}); err != nil {
		t.Fatalf("Update adding a certificate: %v", err)
	}
	if got, err := s.CertificateBundle(meta2); err != nil || !bytes.Equal(got, bundle2) {
		t.Fatalf("Store.CertificateBundle of the added certificate: %v", err)
	}
	meta3, _ := testCert(t, "missing")
	_, err = s.Update(bg, func(c *config.Config) error {
		c.Certificates = append(c.Certificates, meta3)
		return nil
	}, config.UpdateOptions{})
	var ve *config.ValidationError
	if !errors.As(err, &ve) || ve.Errors[0].Code != config.CodeUnknownReference {
		t.Fatalf("Update naming a chain the storage does not hold: %v, want unknown_reference", err)
	}
}

func openStore(t *testing.T, st config.Storage) *config.Store {
	t.Helper()
	s, err := config.OpenStore(st, "", nil, config.StoreOptions{})
	if err != nil {
		t.Fatalf("OpenStore: %v", err)
	}
	return s
}

func addBackend(name string) func(c *config.Config) error {
	return func(c *config.Config) error {
		c.Backends = append(c.Backends, config.Backend{Name: name, Servers: []*config.Server{{Name: "s1", Address: "127.0.0.1", Port: 8081}}})
		return nil
	}
}

func update(t *testing.T, s *config.Store, mutate func(c *config.Config) error, o config.UpdateOptions) *config.Result {
	t.Helper()
	r, err := s.Update(bg, mutate, o)
	if err != nil {
		t.Fatalf("Update: %v", err)
	}
	return r
}

func testStoreUpdateHeaders(t *testing.T, st config.Storage) {
	s := openStore(t, st)
	if c := s.Current(); c == nil || c.Generation != 0 {
		t.Fatalf("Current of a Store over an empty storage: %+v", c)
	}
	if s.Storage() != st {
		t.Fatal("Storage() is not the storage the Store was opened on")
	}
	r := update(t, s, addBackend("web"), config.UpdateOptions{Actor: "alice", Node: "edge-1"})
	if r.Generation != 1 || s.Current() != r.Config || r.Plan.Summary() != "create backend/web" {
		t.Fatalf("first Update: gen %d, plan %s", r.Generation, r.Plan.Summary())
	}
	update(t, s, addBackend("api"), config.UpdateOptions{Actor: "bob", Node: "edge-2"})
	// A dry run and an empty plan write nothing.
	if r := update(t, s, addBackend("dry"), config.UpdateOptions{DryRun: true}); r.Generation != 2 {
		t.Fatalf("dry run: generation %d", r.Generation)
	}
	if r := update(t, s, func(*config.Config) error { return nil }, config.UpdateOptions{}); r.Generation != 2 || !r.Plan.Empty() {
		t.Fatalf("empty plan: generation %d, plan %s", r.Generation, r.Plan.Summary())
	}
	revs, err := s.Revisions()
	if g := revisionGens(t, revs, err); !slices.Equal(g, []int64{2, 1}) {
		t.Fatalf("revisions %v, want [2 1]", g)
	}
	if revs[0].Actor != "bob" || revs[0].Node != "edge-2" || revs[1].Actor != "alice" || revs[1].Node != "edge-1" ||
		revs[0].Summary != "create backend/api" || revs[0].Time.IsZero() {
		t.Fatalf("revision headers %+v", revs)
	}
	c, info := load(t, st)
	if c.Generation != 2 || backendNames(c) != "web,api" || info.Actor != "bob" || info.Node != "edge-2" {
		t.Fatalf("storage holds gen %d %s (%+v)", c.Generation, backendNames(c), info)
	}
}

func testStoreFailedApplyReverts(t *testing.T, st config.Storage) {
	s := openStore(t, st)
	update(t, s, addBackend("web"), config.UpdateOptions{})
	cur := s.Current()
	applyErr := errors.New("address in use")
	var sawGen int64
	_, err := s.Update(bg, addBackend("api"), config.UpdateOptions{Apply: func(_ context.Context, c *config.Config) error {
		sawGen = c.Generation
		// While Apply runs, the new generation is committed.
		if c, _, err := st.Load(bg); err != nil || c.Generation != 2 {
			t.Errorf("generation 2 not committed before Apply: %v", err)
		}
		return applyErr
	}})
	if !errors.Is(err, applyErr) || sawGen != 2 {
		t.Fatalf("Update with a failing Apply: %v (Apply saw %d), want the Apply error", err, sawGen)
	}
	if s.Current() != cur {
		t.Fatal("Current changed after a failed Apply")
	}
	if c, _ := load(t, st); c.Generation != 1 || backendNames(c) != "web" {
		t.Fatalf("the storage holds gen %d %s after a failed Apply, want 1 web", c.Generation, backendNames(c))
	}
	if g := storeGens(t, s); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v after a failed Apply, want [1]", g)
	}
	applied := 0
	r := update(t, s, addBackend("api"), config.UpdateOptions{Apply: func(context.Context, *config.Config) error { applied++; return nil }})
	if r.Generation != 2 || applied != 1 || s.Current().Generation != 2 {
		t.Fatalf("next Update: gen %d, applied %d times", r.Generation, applied)
	}
}

func testStoreRestore(t *testing.T, st config.Storage) {
	s := openStore(t, st)
	update(t, s, addBackend("web"), config.UpdateOptions{})
	update(t, s, addBackend("api"), config.UpdateOptions{})
	old, err := s.Revision(1)
	if err != nil {
		t.Fatal(err)
	}
	r := update(t, s, func(c *config.Config) error {
		*c = *old.Clone()
		return nil
	}, config.UpdateOptions{Actor: "alice", RestoreOf: 1})
	if r.Generation != 3 || backendNames(r.Config) != "web" || r.Plan.Summary() != "delete backend/api" {
		t.Fatalf("restore of 1: gen %d %s, plan %s", r.Generation, backendNames(r.Config), r.Plan.Summary())
	}
	revs, err := s.Revisions()
	if g := revisionGens(t, revs, err); !slices.Equal(g, []int64{3, 2, 1}) || revs[0].RestoreOf != 1 || revs[0].Actor != "alice" {
		t.Fatalf("revisions after a restore %+v", revs)
	}
	if c, _ := load(t, st); c.Generation != 3 || backendNames(c) != "web" {
		t.Fatalf("the storage holds gen %d %s after the restore", c.Generation, backendNames(c))
	}
}

func testTwoStoresRefresh(t *testing.T, st config.Storage) {
	a, b := openStore(t, st), openStore(t, st)
	update(t, a, addBackend("web"), config.UpdateOptions{Node: "a"})
	if b.Current().Generation != 0 {
		t.Fatal("b's Current moved before Refresh")
	}
	changed, err := b.Refresh(bg)
	if err != nil || !changed || b.Current().Generation != 1 || backendNames(b.Current()) != "web" {
		t.Fatalf("b.Refresh after a's write: changed %v, %v, gen %d", changed, err, b.Current().Generation)
	}
	if changed, err := b.Refresh(bg); err != nil || changed {
		t.Fatalf("a second Refresh: changed %v, %v; want nothing new", changed, err)
	}
	// b writes on what it refreshed; a sees it.
	update(t, b, addBackend("api"), config.UpdateOptions{Node: "b"})
	if changed, err := a.Refresh(bg); err != nil || !changed || backendNames(a.Current()) != "web,api" {
		t.Fatalf("a.Refresh after b's write: changed %v, %v, %s", changed, err, backendNames(a.Current()))
	}
	// Refresh never goes back: a Store ahead of what it loads keeps its own.
	prev := a.Current()
	update(t, a, addBackend("third"), config.UpdateOptions{})
	if err := st.Revert(bg, prev, 3); err != nil {
		t.Fatal(err)
	}
	if changed, err := a.Refresh(bg); err != nil || changed || a.Current().Generation != 3 {
		t.Fatalf("Refresh of an older document: changed %v, %v, gen %d; want 3 kept", changed, err, a.Current().Generation)
	}
}

func testStaleStoreRetries(t *testing.T, st config.Storage) {
	a, b := openStore(t, st), openStore(t, st)
	update(t, a, addBackend("web"), config.UpdateOptions{})
	if _, err := b.Refresh(bg); err != nil {
		t.Fatal(err)
	}
	update(t, a, addBackend("api"), config.UpdateOptions{}) // b is stale now
	calls := 0
	r := update(t, b, func(c *config.Config) error {
		calls++
		return addBackend("late")(c)
	}, config.UpdateOptions{Node: "b"})
	if calls != 2 {
		t.Fatalf("mutate ran %d times, want 2 (built on 1, lost, built on 2)", calls)
	}
	if r.Generation != 3 || backendNames(r.Config) != "web,api,late" || b.Current() != r.Config {
		t.Fatalf("retried write: gen %d %s", r.Generation, backendNames(r.Config))
	}
	if c, _ := load(t, st); c.Generation != 3 || backendNames(c) != "web,api,late" {
		t.Fatalf("the storage holds gen %d %s", c.Generation, backendNames(c))
	}
}

func testStoreGivesUpAfterMaxAttempts(t *testing.T, st config.Storage) {
	a, b := openStore(t, st), openStore(t, st)
	calls := 0
	_, err := b.Update(bg, func(c *config.Config) error {
		calls++
		// Another node commits between this build and its commit, every time.
		update(t, a, addBackend(fmt.Sprintf("a%d", calls)), config.UpdateOptions{})
		return addBackend("b")(c)
	}, config.UpdateOptions{})
	if !errors.Is(err, config.ErrRace) || calls != config.MaxUpdateAttempts {
		t.Fatalf("Update that always loses: %v after %d attempts, want ErrRace after %d", err, calls, config.MaxUpdateAttempts)
	}
	c, _ := load(t, st)
	if c.Generation != config.MaxUpdateAttempts || c.FindBackend("b") >= 0 {
		t.Fatalf("the storage holds gen %d %s, want only a's writes", c.Generation, backendNames(c))
	}
}

func writeBootstrap(t *testing.T, backends ...string) string {
	t.Helper()
	c := configWith(t, 0, backends...)
	p := filepath.Join(t.TempDir(), "bootstrap.json")
	if err := os.WriteFile(p, encode(t, c), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func testBootstrapOnce(t *testing.T, st config.Storage) {
	s, err := config.OpenStore(st, writeBootstrap(t, "boot"), nil, config.StoreOptions{Node: "edge-1"})
	if err != nil {
		t.Fatalf("OpenStore with a bootstrap: %v", err)
	}
	if c := s.Current(); c.Generation != 1 || backendNames(c) != "boot" {
		t.Fatalf("bootstrapped Current: gen %d %s", c.Generation, backendNames(c))
	}
	revs, err := st.Revisions(bg)
	if g := revisionGens(t, revs, err); !slices.Equal(g, []int64{1}) || revs[0].Node != "edge-1" || !strings.Contains(revs[0].Summary, "bootstrap") {
		t.Fatalf("revisions after a bootstrap %+v", revs)
	}
	// A second node (or a restart) with another bootstrap uses what is stored.
	s2, err := config.OpenStore(st, writeBootstrap(t, "other"), nil, config.StoreOptions{Node: "edge-2"})
	if err != nil || s2.Current().Generation != 1 || backendNames(s2.Current()) != "boot" {
		t.Fatalf("OpenStore of a seeded storage: %v", err)
	}
}

// blindLoad hides the storage's document from the first Load: the
// bootstrap of OpenStore then races a node that seeded first.
type blindLoad struct {
	config.Storage
	mu    sync.Mutex
	loads int
}

func (b *blindLoad) Load(ctx context.Context) (*config.Config, config.RevisionInfo, error) {
	b.mu.Lock()
	b.loads++
	first := b.loads == 1
	b.mu.Unlock()
	if first {
		return nil, config.RevisionInfo{}, nil
	}
	return b.Storage.Load(ctx)
}

func testBootstrapLosesRace(t *testing.T, st config.Storage) {
	mustCommit(t, st, 0, "winner")
	s, err := config.OpenStore(&blindLoad{Storage: st}, writeBootstrap(t, "loser"), nil, config.StoreOptions{})
	if err != nil {
		t.Fatalf("OpenStore whose bootstrap lost: %v", err)
	}
	if c := s.Current(); c.Generation != 1 || backendNames(c) != "winner" {
		t.Fatalf("Current after losing the bootstrap: gen %d %s, want the winner's", c.Generation, backendNames(c))
	}
	if g := storageGens(t, st); !slices.Equal(g, []int64{1}) {
		t.Fatalf("revisions %v", g)
	}
}

// testReseedJumps: Reseed is Commit of any generation above prev, with
// Commit's condition on prev; Commit keeps its rule of prev+1.
func testReseedJumps(t *testing.T, st config.Storage) {
	reseed := func(prev, gen int64, backends ...string) error {
		return st.Reseed(bg, prev, config.RevisionInfo{Generation: gen, Time: time.Now(), Summary: fmt.Sprintf("reseed %d", gen)},
			encode(t, configWith(t, gen, backends...)), nil)
	}
	if err := reseed(0, 7, "a"); err != nil {
		t.Fatalf("Reseed of generation 7 on none: %v", err)
	}
	if c, info := load(t, st); c == nil || c.Generation != 7 || info.Generation != 7 || backendNames(c) != "a" {
		t.Fatalf("Load after a reseed as 7: %+v %+v", c, info)
	}
	if err := reseed(0, 9, "b"); !errors.Is(err, config.ErrRace) {
		t.Fatalf("Reseed on none while 7 is current: %v, want ErrRace", err)
	}
	if err := reseed(3, 12, "b"); !errors.Is(err, config.ErrRace) {
		t.Fatalf("Reseed on 3 while 7 is current: %v, want ErrRace", err)
	}
	if err := reseed(7, 7, "b"); err == nil {
		t.Fatal("Reseed of generation 7 on 7 accepted")
	}
	if c, _ := load(t, st); c.Generation != 7 || backendNames(c) != "a" {
		t.Fatalf("a refused reseed changed the storage: generation %d, %s", c.Generation, backendNames(c))
	}
	if err := reseed(7, 12, "b"); err != nil {
		t.Fatalf("Reseed of generation 12 on 7: %v", err)
	}
	if c, _ := load(t, st); c.Generation != 12 || backendNames(c) != "b" {
		t.Fatalf("Load after a reseed as 12: generation %d, %s", c.Generation, backendNames(c))
	}
	if g := storageGens(t, st); !slices.Equal(g, []int64{12, 7}) {
		t.Fatalf("revisions %v, want [12 7]", g)
	}
	if err := st.Commit(bg, 12, config.RevisionInfo{Generation: 20, Time: time.Now()}, encode(t, configWith(t, 20, "c")), nil); err == nil {
		t.Fatal("Commit of generation 20 on 12 accepted: Commit's rule is prev+1")
	}
	mustCommit(t, st, 12, "c")
	if c, _ := load(t, st); c.Generation != 13 || backendNames(c) != "c" {
		t.Fatalf("Load after a commit on the reseed: generation %d, %s", c.Generation, backendNames(c))
	}
}

// testStoreReseedsAStoreThatWentBack: a storage behind the Store (here by
// a Revert the Store did not make: etcd restored from an older snapshot
// does the same) refuses the Store's writes with ErrStoreBehind; Reseed
// commits the Store's document as the next generation, after which writes
// work again, on this Store and on another that adopts it. A storage not
// behind is refused with ErrNotBehind.
func testStoreReseedsAStoreThatWentBack(t *testing.T, st config.Storage) {
	s := openStore(t, st)
	if _, err := s.Reseed(bg, config.UpdateOptions{}); !errors.Is(err, config.ErrNotBehind) {
		t.Fatalf("Reseed of an empty storage by an empty Store: %v, want ErrNotBehind", err)
	}
	update(t, s, addBackend("a"), config.UpdateOptions{})
	other := openStore(t, st)
	update(t, s, addBackend("b"), config.UpdateOptions{})
	if _, err := s.Reseed(bg, config.UpdateOptions{}); !errors.Is(err, config.ErrNotBehind) {
		t.Fatalf("Reseed of a storage in sync: %v, want ErrNotBehind", err)
	}
	gen1, err := st.Revision(bg, 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := st.Revert(bg, gen1, 2); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	if _, err := s.Update(bg, addBackend("c"), config.UpdateOptions{}); !errors.Is(err, config.ErrStoreBehind) {
		t.Fatalf("Update on a storage that went back: %v, want ErrStoreBehind", err)
	}
	dry, err := s.Reseed(bg, config.UpdateOptions{DryRun: true, Node: "edge-1"})
	if err != nil || dry.Generation != 3 || dry.StoreGeneration != 1 || dry.NodeGeneration != 2 {
		t.Fatalf("dry-run Reseed = %+v, %v; want generation 3 from 2 over 1", dry, err)
	}
	if c, _ := load(t, st); c.Generation != 1 {
		t.Fatalf("a dry-run reseed wrote generation %d", c.Generation)
	}
	res, err := s.Reseed(bg, config.UpdateOptions{Node: "edge-1", Actor: "alice"})
	if err != nil {
		t.Fatalf("Reseed: %v", err)
	}
	const want = "reseeded by node edge-1 from its generation 2 (the store held generation 1)"
	if res.Generation != 3 || res.Summary != want || s.Current().Generation != 3 || backendNames(s.Current()) != "a,b" {
		t.Fatalf("Reseed = %+v, Current generation %d (%s)", res, s.Current().Generation, backendNames(s.Current()))
	}
	c, info := load(t, st)
	if c.Generation != 3 || backendNames(c) != "a,b" || info.Summary != want || info.Actor != "alice" || info.Node != "edge-1" {
		t.Fatalf("the storage after the reseed: generation %d (%s), header %+v", c.Generation, backendNames(c), info)
	}
	if changed, err := other.Refresh(bg); err != nil || !changed || other.Current().Generation != 3 {
		t.Fatalf("another Store's Refresh: %v, %v, generation %d", changed, err, other.Current().Generation)
	}
	if r := update(t, other, addBackend("c"), config.UpdateOptions{}); r.Generation != 4 {
		t.Fatalf("a write after the reseed: generation %d, want 4", r.Generation)
	}
	if _, err := s.Reseed(bg, config.UpdateOptions{}); !errors.Is(err, config.ErrNotBehind) {
		t.Fatalf("Reseed of a storage ahead of the Store: %v, want ErrNotBehind", err)
	}
	if r := update(t, s, addBackend("d"), config.UpdateOptions{}); r.Generation != 5 || backendNames(r.Config) != "a,b,c,d" {
		t.Fatalf("a write on the reseeding Store: generation %d (%s)", r.Generation, backendNames(r.Config))
	}
}
