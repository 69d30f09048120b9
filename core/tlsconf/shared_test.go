package tlsconf

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// memStore is a cluster's store of ticket keys in memory: conditional
// edits, and every set written installed on the nodes subscribed (the
// watch of cluster.ShareTicketKeys).
type memStore struct {
	mu     sync.Mutex
	doc    []byte
	rev    int
	down   atomic.Bool
	failed atomic.Int32 // edits refused while down
	nodes  []*TicketKeys
}

func (m *memStore) Edit(ctx context.Context, edit func(old []byte) ([]byte, error)) error {
	if m.down.Load() {
		m.failed.Add(1)
		return errors.New("store unreachable")
	}
	for {
		m.mu.Lock()
		old, rev := m.doc, m.rev
		m.mu.Unlock()
		val, err := edit(old)
		if err != nil {
			return err
		}
		m.mu.Lock()
		if m.rev != rev {
			m.mu.Unlock()
			continue // changed meanwhile: edit again
		}
		m.doc, m.rev = val, m.rev+1
		nodes := m.nodes
		m.mu.Unlock()
		for _, n := range nodes {
			if err := n.Install(val); err != nil {
				panic(err)
			}
		}
		return nil
	}
}

func (m *memStore) Read(ctx context.Context) ([]byte, error) {
	if m.down.Load() {
		return nil, errors.New("store unreachable")
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.doc, nil
}

func (m *memStore) stored(t *testing.T) keyFile {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	var f keyFile
	if err := json.Unmarshal(m.doc, &f); err != nil {
		t.Fatal(err)
	}
	return f
}

// node is a TicketKeys of its own state directory sharing m's keys, as
// cluster.ShareTicketKeys makes it.
func (m *memStore) node(t *testing.T, rotation time.Duration) *TicketKeys {
	t.Helper()
	tk, err := NewTicketKeys(t.TempDir(), rotation, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tk.Close)
	tk.Share(m)
	if err := tk.Seed(context.Background()); err != nil {
		t.Fatal(err)
	}
	m.mu.Lock()
	m.nodes = append(m.nodes, tk)
	doc := m.doc
	m.mu.Unlock()
	if err := tk.Install(doc); err != nil {
		t.Fatal(err)
	}
	return tk
}

func ids(tk *TicketKeys) string {
	var s string
	for _, k := range tk.Info() {
		s += k.ID + k.Source + " "
	}
	return s
}

// TestSharedTicketKeysSeedAndInstall: the first node seeds the store, the
// second installs its keys (not its own), and the keys survive in the
// state directory.
func TestSharedTicketKeysSeedAndInstall(t *testing.T) {
	m := &memStore{}
	a := m.node(t, time.Hour)
	first := ids(a)
	b := m.node(t, time.Hour)
	if ids(b) != first || ids(a) != first {
		t.Fatalf("a %s, b %s: not the seeded set %s", ids(a), ids(b), first)
	}
	keys, _, err := readKeyFile(b.dir + "/" + TicketKeysFile)
	if err != nil || keyID(keys[0].key) != a.Info()[0].ID {
		t.Fatalf("b's state directory does not cache the shared keys (%v)", err)
	}
	if err := b.Install([]byte(`{"source":"generated","keys":[],"serial":9223372036854775807}`)); err == nil || ids(b) != first {
		t.Fatalf("a damaged set was installed (%v)", err)
	}
	// A set of an older serial, handed over late, is not installed.
	old, _ := marshalKeys([]ticketKey{{key: [32]byte{5}, created: time.Now()}}, SourceGenerated, 1)
	if err := b.Install(old); err != nil || ids(b) != first {
		t.Fatalf("a set older than the one installed replaced it (%v)", err)
	}
}

// TestSharedTicketKeysRotateOncePerPeriod: both nodes' timers fire, but
// the stored set gets one new key per period, and both use it.
func TestSharedTicketKeysRotateOncePerPeriod(t *testing.T) {
	const rotation = 40 * time.Millisecond
	m := &memStore{}
	a, b := m.node(t, time.Hour), m.node(t, time.Hour)
	first := a.Info()[0].ID
	a.SetRotation(int(rotation / time.Millisecond))
	b.SetRotation(int(rotation / time.Millisecond))
	testutil.Eventually(t, 5*time.Second, func() bool {
		m.mu.Lock()
		defer m.mu.Unlock()
		return m.rev >= 6
	}, "the stored set was not rotated")
	f := m.stored(t)
	for i := 1; i < len(f.Keys); i++ {
		if gap := f.Keys[i-1].Created.Sub(f.Keys[i].Created); gap < rotation {
			t.Fatalf("keys %d and %d of the stored set made %v apart: rotated twice in a period of %v", i-1, i, gap, rotation)
		}
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return ids(a) == ids(b) && a.Info()[0].ID != first },
		"the nodes do not use the same rotated keys")
}

// TestSharedTicketKeysStoreDown: while the store cannot be reached the
// keys stay as they are (no key of this node only), and the rotation
// resumes when it answers.
func TestSharedTicketKeysStoreDown(t *testing.T) {
	m := &memStore{}
	a := m.node(t, time.Hour)
	before := ids(a)
	m.down.Store(true)
	a.SetRotation(20)
	testutil.Eventually(t, 5*time.Second, func() bool { return m.failed.Load() >= 3 }, "no rotation attempted")
	if ids(a) != before {
		t.Fatalf("rotated locally while the store was down: %s, was %s", ids(a), before)
	}
	m.down.Store(false)
	testutil.Eventually(t, 5*time.Second, func() bool {
		return ids(a) != before && keyID([32]byte(m.stored(t).Keys[0].Key)) == a.Info()[0].ID
	}, "no rotation once the store answers again")
}

// TestSharedTicketKeysSet: Set on one node stores the keys, every node
// installs them and stops rotating; with the store down Set fails and
// changes nothing.
func TestSharedTicketKeysSet(t *testing.T) {
	m := &memStore{}
	a, b := m.node(t, time.Hour), m.node(t, time.Hour)
	k := [32]byte{1, 2, 3}
	if err := a.Set([][32]byte{k}); err != nil {
		t.Fatal(err)
	}
	if got := b.Info(); len(got) != 1 || got[0].ID != keyID(k) || got[0].Source != SourceAPI {
		t.Fatalf("b has %+v after Set on a", got)
	}
	if f := m.stored(t); f.Source != SourceAPI || len(f.Keys) != 1 {
		t.Fatalf("stored %+v", f)
	}
	m.down.Store(true)
	if err := b.Set([][32]byte{{9}}); err == nil {
		t.Fatal("Set succeeded with the store down")
	}
	if ids(a) != ids(b) || b.Info()[0].ID != keyID(k) {
		t.Fatal("a failed Set changed the keys")
	}
}

// TestSharedTicketKeysDueAtStart: a node restarted after more than a
// period, while the store cannot be reached, starts with its copy of the
// shared keys and does not rotate them locally; the rotation is made in
// the store once it answers.
func TestSharedTicketKeysDueAtStart(t *testing.T) {
	dir := t.TempDir()
	old := ticketKey{key: [32]byte{4}, created: time.Now().Add(-2 * time.Hour).UTC()}
	data, err := marshalKeys([]ticketKey{old}, SourceGenerated, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, TicketKeysFile), data, 0o600); err != nil {
		t.Fatal(err)
	}
	m := &memStore{}
	m.down.Store(true)
	tk, err := NewSharedTicketKeys(dir, time.Hour, m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer tk.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return m.failed.Load() > 0 }, "no rotation attempted")
	if got := tk.Info(); len(got) != 1 || got[0].ID != keyID(old.key) {
		t.Fatalf("keys %+v at start while the store is down, want the copy's only", got)
	}
	m.down.Store(false)
	testutil.Eventually(t, 3*sharedRetry, func() bool {
		got := tk.Info()
		return len(got) == 2 && got[1].ID == keyID(old.key) && m.stored(t).Keys != nil
	}, "not rotated in the store once it answers")
}

// restore puts back the store as a snapshot held it: the set doc at
// revision rev, lower than the revisions written since (etcd restored
// from an older snapshot: its revisions go back too).
func (m *memStore) restore(doc []byte, rev int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.doc, m.rev = doc, rev
}

// TestSharedTicketKeysAfterRestore: after the store went back to an older
// set (and older revisions), the next Set and the next rotation are
// installed by every node, and a set from before the restore handed over
// late is still ignored.
func TestSharedTicketKeysAfterRestore(t *testing.T) {
	m := &memStore{}
	a, b := m.node(t, time.Hour), m.node(t, time.Hour)
	m.mu.Lock()
	snapRev := m.rev
	m.mu.Unlock()
	// A generated set due for rotation, as the snapshot holds it.
	due := ticketKey{key: [32]byte{7}, created: time.Now().Add(-2 * time.Hour).UTC()}
	snap, err := marshalKeys([]ticketKey{due}, SourceGenerated, 0)
	if err != nil {
		t.Fatal(err)
	}
	k1, k2 := [32]byte{1}, [32]byte{2}
	for _, k := range [][32]byte{k1, k2} {
		if err := a.Set([][32]byte{k}); err != nil {
			t.Fatal(err)
		}
	}
	late := m.stored(t) // the set stored before the restore
	lateDoc, _ := json.Marshal(late)

	m.restore(snap, snapRev)
	k3 := [32]byte{3}
	if err := b.Set([][32]byte{k3}); err != nil {
		t.Fatal(err)
	}
	for name, n := range map[string]*TicketKeys{"a": a, "b": b} {
		if got := n.Info(); len(got) != 1 || got[0].ID != keyID(k3) {
			t.Fatalf("after the restore, %s has %+v, not the keys set (%s)", name, got, keyID(k3))
		}
	}
	if err := a.Install(lateDoc); err != nil || a.Info()[0].ID != keyID(k3) {
		t.Fatalf("a set from before the restore, handed over late, replaced the newer one (%v)", err)
	}

	m.restore(snap, snapRev)
	a.rotate() // its timer fires: the snapshot's set is due
	for name, n := range map[string]*TicketKeys{"a": a, "b": b} {
		if got := n.Info(); len(got) != 2 || got[1].ID != keyID(due.key) || got[0].Source != SourceGenerated {
			t.Fatalf("after the restore, %s has %+v, not the rotated set", name, got)
		}
	}
}
