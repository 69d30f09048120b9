package config

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// deltaSteps are changes of every kind a Delta carries, each applied to
// the result of the one before.
var deltaSteps = []struct {
	name   string
	mutate func(c *Config) error
	whole  bool // not expressible as a delta: stored whole
}{
	{"add a backend", addBackend("web"), false},
	{"add servers", func(c *Config) error {
		b := &c.Backends[c.FindBackend("web")]
		for i := range 50 {
			b.Servers = append(b.Servers, &Server{Name: fmt.Sprintf("s%03d", i+2), Address: "127.0.0.1", Port: 9000 + i})
		}
		return nil
	}, false},
	{"server weight", func(c *Config) error {
		w := 7
		c.Backends[0].Servers[10].Weight = &w
		return nil
	}, false},
	{"server admin_state", func(c *Config) error { c.Backends[0].Servers[3].AdminState = AdminDrain; return nil }, false},
	{"delete a server", func(c *Config) error {
		s := c.Backends[0].Servers
		c.Backends[0].Servers = append(s[:5:5], s[6:]...)
		return nil
	}, false},
	{"backend field", func(c *Config) error { c.Backends[0].Balance = BalanceLeastConn; return nil }, false},
	{"backend field and a server", func(c *Config) error {
		c.Backends[0].Balance = BalanceRoundRobin
		c.Backends[0].Servers[0].Port = 8181
		return nil
	}, false},
	{"add a frontend", func(c *Config) error {
		c.Frontends = append(c.Frontends, Frontend{Name: "pub", Mode: ModeTCP, DefaultBackend: "web",
			Binds: []Bind{{Name: "b1", Address: "127.0.0.1", Port: 18080}}})
		return nil
	}, false},
	{"frontend field", func(c *Config) error { c.Frontends[0].Maxconn = 1234; return nil }, false},
	{"tuning", func(c *Config) error { c.Tuning.Maxaccept = 77; return nil }, false},
	{"second backend", addBackend("api"), false},
	{"servers of two backends", func(c *Config) error {
		c.Backends[0].Servers[1].Maxconn = 5
		c.Backends[1].Servers[0].Maxconn = 6
		return nil
	}, false},
	{"reorder servers", func(c *Config) error {
		s := c.Backends[0].Servers
		s[0], s[1] = s[1], s[0]
		return nil
	}, true},
	{"delete a backend", func(c *Config) error {
		c.Backends = c.Backends[:1]
		return nil
	}, false},
}

// TestDeltaAppliesToTheDocument: applying MakeDelta(cur, next) to cur
// gives next, byte for byte as stored, for each kind of change; a moved
// object is no delta.
func TestDeltaAppliesToTheDocument(t *testing.T) {
	cur := &Config{}
	cur.Normalize()
	for _, st := range deltaSteps {
		next := cur.Clone()
		if err := st.mutate(next); err != nil {
			t.Fatal(err)
		}
		next.Normalize()
		if err := Validate(next, Env{}); err != nil {
			t.Fatalf("%s: %v", st.name, err)
		}
		d, ok, err := MakeDelta(cur, next)
		if err != nil {
			t.Fatal(err)
		}
		if ok == st.whole {
			t.Fatalf("%s: delta %v, want %v", st.name, ok, !st.whole)
		}
		if ok {
			// as stored: the delta through JSON, applied to cur as decoded
			raw, _ := json.Marshal(d)
			var back Delta
			if err := DecodeBytes(raw, &back); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			doc, _ := json.Marshal(cur)
			var got Config
			if err := DecodeBytes(doc, &got); err != nil {
				t.Fatal(err)
			}
			if err := back.Apply(&got); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			got.Generation = next.Generation
			a, _ := json.Marshal(&got)
			b, _ := json.Marshal(next)
			if !bytes.Equal(a, b) {
				t.Fatalf("%s: applied delta gives\n%s\nwant\n%s\n(delta %s)", st.name, a, b, raw)
			}
			if st.name == "server weight" && len(raw) > 400 {
				t.Fatalf("a weight change is a %d-byte delta: %s", len(raw), raw)
			}
		}
		cur = next
	}
}

// TestStoreDeltaRevisionsReplayAtOpen: between snapshots a write stores
// only its delta (config.json stays at the snapshot); a reopen replays
// them to the same document, and every revision reads.
func TestStoreDeltaRevisionsReplayAtOpen(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	for _, st := range deltaSteps {
		mustUpdate(t, s, st.mutate)
	}
	want, _ := json.Marshal(s.Current())
	settled(s)
	var onDisk Config
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ConfigFile))), &onDisk); err != nil {
		t.Fatal(err)
	}
	if onDisk.Generation >= s.Current().Generation {
		t.Fatalf("config.json at generation %d: every write rewrote it", onDisk.Generation)
	}
	last := readFile(t, dirOf(s).revisionPath(s.Current().Generation))
	if !strings.Contains(last, `"delta":`) || strings.Contains(last, `"config":`) {
		t.Fatalf("the last revision is not a delta: %.300s", last)
	}
	again := openStore(t, dir, "")
	if got, _ := json.Marshal(again.Current()); !bytes.Equal(got, want) {
		t.Fatalf("after reopen\n%s\nwant\n%s", got, want)
	}
	for _, g := range revisionGens(t, again) {
		c, err := again.Revision(g)
		if err != nil || c.Generation != g {
			t.Fatalf("Revision(%d): %v %v", g, c, err)
		}
	}
	// and a write on the reopened store goes on from there
	mustUpdate(t, again, func(c *Config) error { c.Tuning.Maxaccept = 99; return nil })
	third := openStore(t, dir, "")
	if third.Current().Tuning.Maxaccept != 99 {
		t.Fatal("the write after the reopen is lost")
	}
}

// TestStoreSnapshotEverySnapshotEveryGenerations: config.json is written
// whole once SnapshotEvery generations were deltas.
func TestStoreSnapshotEverySnapshotEveryGenerations(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	for i := range 2 * SnapshotEvery {
		mustUpdate(t, s, func(c *Config) error { c.Tuning.Maxaccept = i + 1; return nil })
	}
	settled(s)
	var onDisk Config
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ConfigFile))), &onDisk); err != nil {
		t.Fatal(err)
	}
	if lag := s.Current().Generation - onDisk.Generation; lag >= SnapshotEvery {
		t.Fatalf("config.json %d generations behind", lag)
	}
}

// TestStoreUncommittedSnapshotAfterDeltas: a whole revision newer than
// the deltas (a snapshot whose config.json rename a crash prevented) was
// never acknowledged: it goes, the deltas before it stay.
func TestStoreUncommittedSnapshotAfterDeltas(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	mustUpdate(t, s, addBackend("api"))
	cur := s.Current()
	leftover := cur.Clone()
	leftover.Generation++
	leftover.Tuning.Maxaccept = 3
	doc, _ := json.Marshal(leftover)
	if err := dirOf(s).writeRevisionDoc(RevisionInfo{Generation: leftover.Generation}, doc, nil); err != nil {
		t.Fatal(err)
	}
	again := openStore(t, dir, "")
	if again.Current().Generation != cur.Generation || again.Current().FindBackend("api") < 0 {
		t.Fatalf("generation %d, want %d with api", again.Current().Generation, cur.Generation)
	}
	if _, err := os.Stat(dirOf(s).revisionPath(leftover.Generation)); !os.IsNotExist(err) {
		t.Fatalf("the uncommitted snapshot revision is still there: %v", err)
	}
}

// TestStoreFailedApplyRevertsADelta: a delta whose apply fails is
// removed: a reopen does not replay it.
func TestStoreFailedApplyRevertsADelta(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	_, err := s.Update(context.Background(), addBackend("api"), UpdateOptions{Apply: func(context.Context, *Config) error {
		return fmt.Errorf("bind refused")
	}})
	if err == nil {
		t.Fatal("Update succeeded")
	}
	again := openStore(t, dir, "")
	if again.Current().FindBackend("api") >= 0 || again.Current().Generation != s.Current().Generation {
		t.Fatalf("the reverted delta came back: generation %d", again.Current().Generation)
	}
}

// TestValidateWithPrevStillFindsDuplicates: the checks validate skips for
// servers kept from a valid prev do not hide a duplicate name a write
// brings, appended or not, nor a bad address.
func TestValidateWithPrevStillFindsDuplicates(t *testing.T) {
	prev := &Config{Backends: []Backend{{Name: "web"}}}
	for i := range 20 {
		prev.Backends[0].Servers = append(prev.Backends[0].Servers, &Server{Name: fmt.Sprintf("s%02d", i), Address: "127.0.0.1", Port: 1000 + i})
	}
	prev.Normalize()
	if err := Validate(prev, Env{}); err != nil {
		t.Fatal(err)
	}
	for name, mutate := range map[string]func(c *Config){
		"appended duplicate": func(c *Config) {
			c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: "s05", Address: "127.0.0.1", Port: 2000})
		},
		"two appended alike": func(c *Config) {
			c.Backends[0].Servers = append(c.Backends[0].Servers,
				&Server{Name: "n1", Address: "127.0.0.1", Port: 2000}, &Server{Name: "n1", Address: "127.0.0.1", Port: 2001})
		},
		"renamed onto another": func(c *Config) { c.Backends[0].Servers[3].Name = "s07" },
		"many appended, one duplicate": func(c *Config) {
			for i := range 20 {
				c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: fmt.Sprintf("m%02d", i), Address: "127.0.0.1", Port: 3000 + i})
			}
			c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: "s00", Address: "127.0.0.1", Port: 2000})
		},
	} {
		next := prev.Clone()
		mutate(next)
		next.Normalize()
		err := validate(next, Env{}, prev, nil)
		if err == nil || !strings.Contains(err.Error(), "already used") {
			t.Errorf("%s: %v, want a duplicate", name, err)
		}
	}
	next := prev.Clone()
	next.Backends[0].Servers[4].Address = "not an address!"
	if err := validate(next, Env{}, prev, nil); err == nil {
		t.Error("a bad address of a changed server passed")
	}
}

// TestDeltaRandomServerChanges: random sequences of server changes
// (values, removals, additions at the end and in the middle, moves), each
// either a delta that gives the next document back byte for byte or, for
// a move or an insertion before kept servers, no delta.
func TestDeltaRandomServerChanges(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	cur := &Config{Backends: []Backend{{Name: "web"}}}
	for i := range 30 {
		cur.Backends[0].Servers = append(cur.Backends[0].Servers, &Server{Name: fmt.Sprintf("s%03d", i), Address: "127.0.0.1", Port: 1000 + i})
	}
	cur.Normalize()
	next := 100
	deltas := 0
	for step := range 500 {
		n := cur.Clone()
		sv := &n.Backends[0].Servers
		switch op := rng.IntN(8); {
		case op == 6 && len(*sv) > 10: // several deleted (by scan or by index: applyList)
			for range 2 + rng.IntN(6) {
				i := rng.IntN(len(*sv))
				*sv = slices.Delete(*sv, i, i+1)
			}
		case op == 7: // many changed
			for range 5 + rng.IntN(8) {
				i := rng.IntN(len(*sv))
				w := rng.IntN(256)
				(*sv)[i].Weight = &w
			}
		case op == 0 && len(*sv) > 2:
			i := rng.IntN(len(*sv))
			*sv = slices.Delete(*sv, i, i+1)
		case op == 1:
			*sv = append(*sv, &Server{Name: fmt.Sprintf("n%03d", next), Address: "127.0.0.1", Port: 2000 + next})
			next++
		case op == 2:
			i := rng.IntN(len(*sv) + 1)
			*sv = slices.Insert(*sv, i, &Server{Name: fmt.Sprintf("n%03d", next), Address: "127.0.0.1", Port: 2000 + next})
			next++
		case op == 3 && len(*sv) > 1:
			i, j := rng.IntN(len(*sv)), rng.IntN(len(*sv))
			(*sv)[i], (*sv)[j] = (*sv)[j], (*sv)[i]
		default:
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(*sv))
				w := rng.IntN(256)
				(*sv)[i].Weight = &w
				(*sv)[i].AdminState = []string{AdminReady, AdminDrain, AdminMaint}[rng.IntN(3)]
			}
		}
		n.Normalize()
		d, ok, err := MakeDelta(cur, n)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			deltas++
			raw, _ := json.Marshal(d)
			var back Delta
			if err := DecodeBytes(raw, &back); err != nil {
				t.Fatal(err)
			}
			doc, _ := json.Marshal(cur)
			var got Config
			if err := DecodeBytes(doc, &got); err != nil {
				t.Fatal(err)
			}
			if err := back.Apply(&got); err != nil {
				t.Fatalf("step %d: %v (delta %s)", step, err, raw)
			}
			a, _ := json.Marshal(&got)
			b, _ := json.Marshal(n)
			if !bytes.Equal(a, b) {
				t.Fatalf("step %d: applied delta gives\n%s\nwant\n%s\n(delta %s)", step, a, b, raw)
			}
		}
		cur = n
	}
	if deltas < 250 {
		t.Fatalf("only %d of 500 changes were deltas", deltas)
	}
}

// BenchmarkDeltaApplyOneServer10k: what a cluster node's Delta.Apply costs
// for one server's weight among 10 000 (the list is copied; the server is
// found by a scan, not by a name index of the 10 000).
func BenchmarkDeltaApplyOneServer10k(b *testing.B) {
	cur := &Config{Backends: []Backend{{Name: "big", Servers: spanServers(10000)}}}
	cur.Normalize()
	next := cur.CloneSharingServers()
	w := 99
	next.OwnServer(0, 5000).Weight = &w
	d, ok, err := MakeDelta(cur, next)
	if err != nil || !ok || d.Servers["big"] == nil {
		b.Fatal(ok, err)
	}
	b.ReportAllocs()
	for b.Loop() {
		c := cur.CloneSharingServers()
		if err := d.Apply(c); err != nil {
			b.Fatal(err)
		}
	}
}
