package config

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// killServers is the size of the backend the kill test changes.
const killServers = 50

// killBase is generation 1 of the kill test: one backend.
func killBase() func(c *Config) error {
	return func(c *Config) error {
		b := Backend{Name: "web"}
		for i := range killServers {
			b.Servers = append(b.Servers, &Server{Name: fmt.Sprintf("s%02d", i), Address: "127.0.0.1", Port: 9000 + i, AdminState: AdminMaint})
		}
		c.Backends = append(c.Backends, b)
		return nil
	}
}

// killChange is the change that makes generation gen (≥ 2): a weight,
// an admin_state, an added or a removed server, by turns.
func killChange(gen int64) func(c *Config) error {
	return func(c *Config) error {
		sv := c.OwnServers(0)
		i := int(gen) % len(*sv)
		switch gen % 4 {
		case 0: // never the weight it has: each change is a generation
			w := 1
			if p := (*sv)[i].Weight; p != nil {
				w = *p%200 + 1
			}
			w++
			c.OwnServer(0, i).Weight = &w
		case 1:
			s := c.OwnServer(0, i)
			s.AdminState = map[string]string{AdminReady: AdminDrain, AdminDrain: AdminMaint, AdminMaint: AdminReady}[s.AdminState]
		case 2:
			*sv = append(*sv, &Server{Name: fmt.Sprintf("n%04d", gen), Address: "127.0.0.1", Port: 20000 + int(gen), AdminState: AdminMaint})
		case 3:
			*sv = append((*sv)[:i], (*sv)[i+1:]...)
		}
		return nil
	}
}

// killExpected is the document of each generation up to n, built in
// memory the way the child builds them.
func killExpected(t *testing.T, n int64) map[int64][]byte {
	t.Helper()
	c := &Config{}
	c.Normalize()
	out := map[int64][]byte{}
	for g := int64(1); g <= n; g++ {
		next := c.Clone()
		var err error
		if g == 1 {
			err = killBase()(next)
		} else {
			err = killChange(g)(next)
		}
		if err != nil {
			t.Fatal(err)
		}
		next.Normalize()
		next.Generation = g
		b, _ := json.Marshal(next)
		out[g] = b
		c = next
	}
	return out
}

const (
	killDirEnv   = "SPLICED_TEST_STORE_KILL_DIR"
	killPointEnv = "SPLICED_TEST_STORE_KILL_AT"
	killNthEnv   = "SPLICED_TEST_STORE_KILL_NTH"
	killChanges  = 90 // generations the child commits at most (snapshots at 33 and 65)
)

// killChild is the child of TestStoreKill9AtEveryWritePoint: it commits
// changes, printing "acked N" once Update returned for generation N, and
// SIGKILLs itself at the nth time it reaches the point. At a snapshot's
// point the snapshot goroutine stops there and the child first commits 3
// more changes (they must not wait for it), then dies.
func killChild(t *testing.T, dir, point string, nth int32) {
	s, err := Open(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	var hits atomic.Int32
	inFlight := make(chan struct{})
	kill := func() {
		_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
		select {}
	}
	storageFault = func(p string) {
		if p != point || hits.Add(1) != nth {
			return
		}
		if strings.HasPrefix(p, "snapshot") {
			close(inFlight)
			select {} // the snapshot stops here until the kill
		}
		kill()
	}
	more := -1
	for g := int64(1); g <= killChanges; g++ {
		if g == killChanges-5 && more < 0 {
			// the snapshots asked for are written, or one stops
			settledc := make(chan struct{})
			go func() { dirOf(s).WaitSnapshots(); close(settledc) }()
			select {
			case <-settledc:
			case <-inFlight:
			}
		}
		mutate := killChange(g)
		if g == 1 {
			mutate = killBase()
		}
		if res, err := s.Update(context.Background(), mutate, UpdateOptions{ShareServers: true}); err != nil || res.Generation != g {
			t.Fatalf("generation %d: %v", g, err)
		}
		fmt.Fprintf(os.Stdout, "acked %d\n", g)
		if more < 0 {
			select {
			case <-inFlight:
				more = 3
			default:
			}
		}
		if more == 0 {
			kill()
		}
		if more > 0 {
			more--
		}
	}
	t.Fatalf("point %q (%d) not reached", point, nth)
}

// TestStoreKill9AtEveryWritePoint: a kill -9 at every point of a commit
// and of a snapshot (while changes go on: a snapshot in flight does not
// hold them), then a restart: the last acknowledged generation is there
// (or the one being committed), every document and kept revision is the
// one committed, nothing torn, and the store takes writes again.
func TestStoreKill9AtEveryWritePoint(t *testing.T) {
	if dir := os.Getenv(killDirEnv); dir != "" {
		nth, _ := strconv.Atoi(os.Getenv(killNthEnv))
		killChild(t, dir, os.Getenv(killPointEnv), int32(nth))
		return
	}
	want := killExpected(t, killChanges+5)
	points := []string{"commit-copy", "commit-journal", "snapshot-start", "snapshot-segment", "snapshot-revision", "snapshot-config", "snapshot-cut"}
	for _, point := range points {
		for _, nth := range []int{1, 2, 40} {
			if strings.HasPrefix(point, "snapshot") && nth == 40 {
				continue // two snapshots in a run
			}
			t.Run(fmt.Sprintf("%s#%d", point, nth), func(t *testing.T) {
				t.Parallel()
				dir := t.TempDir()
				ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
				defer cancel()
				cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestStoreKill9AtEveryWritePoint$", "-test.count=1")
				cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killPointEnv+"="+point, killNthEnv+"="+strconv.Itoa(nth))
				var stderr bytes.Buffer
				cmd.Stderr = &stderr
				out, err := cmd.Output()
				var ee *exec.ExitError
				if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
					t.Fatalf("child not killed at %s: %v\n%s\n%s", point, err, out, stderr.Bytes())
				}
				var acked int64
				sc := bufio.NewScanner(bytes.NewReader(out))
				for sc.Scan() {
					if g, ok := strings.CutPrefix(sc.Text(), "acked "); ok {
						acked, _ = strconv.ParseInt(g, 10, 64)
					}
				}
				if acked < 1 {
					t.Fatalf("nothing acknowledged: %s", out)
				}
				s := openStore(t, dir, "")
				got := s.Current()
				if got.Generation < acked || got.Generation > acked+1 {
					t.Fatalf("generation %d after the kill, acknowledged %d", got.Generation, acked)
				}
				if b, _ := json.Marshal(got); !bytes.Equal(b, want[got.Generation]) {
					t.Fatalf("generation %d differs from the one committed:\n%s\nwant\n%s", got.Generation, b, want[got.Generation])
				}
				gens := revisionGens(t, s)
				if len(gens) == 0 || gens[0] != got.Generation {
					t.Fatalf("revisions %v, current %d", gens, got.Generation)
				}
				for _, g := range gens {
					c, err := s.Revision(g)
					if err != nil {
						t.Fatalf("revision %d: %v", g, err)
					}
					if b, _ := json.Marshal(c); !bytes.Equal(b, want[g]) {
						t.Fatalf("revision %d differs from the one committed", g)
					}
				}
				// it goes on: two more changes, a restart, still there
				for g := got.Generation + 1; g <= got.Generation+2; g++ {
					if _, err := s.Update(context.Background(), killChange(g), UpdateOptions{ShareServers: true}); err != nil {
						t.Fatal(err)
					}
				}
				if err := s.Storage().Close(); err != nil {
					t.Fatal(err)
				}
				again := openStore(t, dir, "")
				if b, _ := json.Marshal(again.Current()); !bytes.Equal(b, want[got.Generation+2]) {
					t.Fatalf("after two more changes and a restart: generation %d", again.Current().Generation)
				}
			})
		}
	}
}

// TestStoreJournalTornTail: a journal whose last line a crash cut (power
// lost during the write: never acknowledged) opens at the generation
// before it, at every length of the cut, and takes writes after it.
func TestStoreJournalTornTail(t *testing.T) {
	src := t.TempDir()
	s := openStore(t, src, "")
	mustUpdate(t, s, killBase())
	for g := int64(2); g <= 6; g++ {
		mustUpdate(t, s, killChange(g))
	}
	want := killExpected(t, 8)
	_ = s.Storage().Close()
	segs, _ := filepath.Glob(filepath.Join(src, journalPrefix+"*"))
	if len(segs) != 1 {
		t.Fatalf("journal files %v", segs)
	}
	data, _ := os.ReadFile(segs[0])
	lastStart := bytes.LastIndexByte(data[:len(data)-1], '\n') + 1
	for cut := lastStart; cut < len(data); cut += max(1, (len(data)-lastStart)/7) {
		dir := t.TempDir()
		if err := os.CopyFS(dir, os.DirFS(src)); err != nil {
			t.Fatal(err)
		}
		if err := os.Truncate(filepath.Join(dir, filepath.Base(segs[0])), int64(cut)); err != nil {
			t.Fatal(err)
		}
		if cut > lastStart { // a torn copy too
			_ = os.Truncate(filepath.Join(dir, RevisionsDir, revisionName(6)), int64(cut-lastStart))
		}
		r := openStore(t, dir, "")
		if b, _ := json.Marshal(r.Current()); !bytes.Equal(b, want[5]) {
			t.Fatalf("cut at %d: generation %d, want 5", cut, r.Current().Generation)
		}
		if g := revisionGens(t, r); g[0] != 5 {
			t.Fatalf("cut at %d: revisions %v", cut, g)
		}
		mustUpdate(t, r, killChange(6))
		_ = r.Storage().Close()
		if b, _ := json.Marshal(openStore(t, dir, "").Current()); !bytes.Equal(b, want[6]) {
			t.Fatalf("cut at %d: the change after the cut is lost", cut)
		}
	}
}

// TestStoreSnapshotDoesNotHoldTheNextChange: the change that makes a
// snapshot due returns before config.json is written, and the changes
// after it commit while the snapshot is still being written. Before the
// journal, that change wrote the whole document (at 10 000 servers, the
// p95 of a server's delete: 23 ms against 3.6 ms).
func TestStoreSnapshotDoesNotHoldTheNextChange(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, addBackend("web"))
	release := make(chan struct{})
	held := make(chan struct{}, 1)
	dirOf(s).writeFile = func(d, name string, data []byte, prepare func(*os.File)) error {
		if name == ConfigFile {
			select {
			case held <- struct{}{}:
			default:
			}
			<-release
		}
		return WriteFileAtomic(d, name, data, prepare)
	}
	defer close(release)
	done := make(chan error, 1)
	go func() {
		for i := range SnapshotEvery + 5 {
			if _, err := s.Update(context.Background(), func(c *Config) error { c.Tuning.Maxaccept = i + 1; return nil }, UpdateOptions{}); err != nil {
				done <- err
				return
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the changes waited for config.json's write")
	}
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("no snapshot was written")
	}
	if c := s.Current(); c.Tuning.Maxaccept != SnapshotEvery+5 {
		t.Fatalf("maxaccept %d", c.Tuning.Maxaccept)
	}
}

// TestStoreOpensDeltaRevisionsOfAnOlderVersion: a state directory of a
// spliced before the journal (its deltas in revisions/ only, written
// durably) opens at its last delta, and the journal continues from it.
func TestStoreOpensDeltaRevisionsOfAnOlderVersion(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, killBase())
	for g := int64(2); g <= 6; g++ {
		mustUpdate(t, s, killChange(g))
	}
	_ = s.Storage().Close()
	segs, _ := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
	for _, p := range segs {
		if err := os.Remove(p); err != nil {
			t.Fatal(err)
		}
	}
	want := killExpected(t, 8)
	again := openStore(t, dir, "")
	if b, _ := json.Marshal(again.Current()); !bytes.Equal(b, want[6]) {
		t.Fatalf("generation %d, want 6 from the delta revisions", again.Current().Generation)
	}
	mustUpdate(t, again, killChange(7))
	_ = again.Storage().Close()
	if b, _ := json.Marshal(openStore(t, dir, "").Current()); !bytes.Equal(b, want[7]) {
		t.Fatal("the change after the older deltas is lost")
	}
}

// TestStoreSnapshotsOfALargeDocumentAreFurtherApart: with a document
// much larger than its changes, config.json is written again once the
// journal's lines weigh a quarter of it, not every SnapshotEvery changes
// (at 10 000 servers each snapshot cost most of a millisecond per change).
func TestStoreSnapshotsOfALargeDocumentAreFurtherApart(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, func(c *Config) error {
		b := Backend{Name: "big"}
		for i := range 2000 {
			b.Servers = append(b.Servers, &Server{Name: fmt.Sprintf("s%04d", i), Address: "127.0.0.1", Port: 10000 + i, AdminState: AdminMaint})
		}
		c.Backends = append(c.Backends, b)
		return nil
	})
	onDisk := func() int64 {
		settled(s)
		var c struct {
			Generation int64 `json:"generation"`
		}
		if err := json.Unmarshal([]byte(readFile(t, filepath.Join(dir, ConfigFile))), &c); err != nil {
			t.Fatal(err)
		}
		return c.Generation
	}
	weight := func(i int) {
		t.Helper()
		if _, err := s.Update(context.Background(), func(c *Config) error {
			w := i%200 + 2
			c.OwnServer(0, i%2000).Weight = &w
			return nil
		}, UpdateOptions{ShareServers: true}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 2 * SnapshotEvery {
		weight(i)
	}
	if g := onDisk(); g != 1 {
		t.Fatalf("config.json rewritten at generation %d after %d small changes", g, 2*SnapshotEvery)
	}
	for i := range 400 { // a quarter of 2000 servers' document: about 150 lines
		weight(2*SnapshotEvery + i)
	}
	if g := onDisk(); g == 1 {
		t.Fatalf("config.json never rewritten in %d changes", 400+2*SnapshotEvery)
	}
}

// BenchmarkCommitWrite: what a commit's durable write costs on this disk,
// a journal line (an append and an fdatasync of a file opened for it)
// against a revision file written atomically (temporary file, fsync,
// rename, fsync of the directory), for a line of 700 bytes (a server's
// change): `go test -run X -bench CommitWrite ./core/config/`.
func BenchmarkCommitWrite(b *testing.B) {
	line := append(bytes.Repeat([]byte("x"), 699), '\n')
	b.Run("journal", func(b *testing.B) {
		p := filepath.Join(b.TempDir(), "journal")
		if err := os.WriteFile(p, nil, 0o600); err != nil {
			b.Fatal(err)
		}
		for range b.N {
			fd, err := openRaw(p, syscall.O_WRONLY|syscall.O_APPEND, 0)
			if err != nil {
				b.Fatal(err)
			}
			if err := writeAndSync(fd, line); err != nil {
				b.Fatal(err)
			}
			syscall.Close(fd)
		}
	})
	b.Run("atomic-file", func(b *testing.B) {
		dir := b.TempDir()
		for i := range b.N {
			if err := WriteFileAtomic(dir, revisionName(int64(i)), line, nil); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestStoreJournalCutLineThatCannotBeRemoved: a journal whose cut last
// line cannot be removed at open (a read-only file system) still opens,
// and the next change, written whole, is not glued to that line.
func TestStoreJournalCutLineThatCannotBeRemoved(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	mustUpdate(t, s, killBase())
	for g := int64(2); g <= 4; g++ {
		mustUpdate(t, s, killChange(g))
	}
	_ = s.Storage().Close()
	segs, _ := filepath.Glob(filepath.Join(dir, journalPrefix+"*"))
	f, err := os.OpenFile(segs[len(segs)-1], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.WriteString(`{"generation":5,"ti`) // a line a crash cut
	f.Close()
	// append-only (even for root): the cut line cannot be truncated away
	if out, err := exec.Command("chattr", "+a", segs[len(segs)-1]).CombinedOutput(); err != nil {
		t.Skipf("chattr +a: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("chattr", "-a", segs[len(segs)-1]).Run() })
	want := killExpected(t, 6)
	r, err := Open(dir, "", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Storage().Close()
	if b, _ := json.Marshal(r.Current()); !bytes.Equal(b, want[4]) {
		t.Fatalf("generation %d, want 4", r.Current().Generation)
	}
	if !dirOf(r).whole {
		t.Fatal("the cut line was removed from an append-only file?")
	}
	mustUpdate(t, r, killChange(5))
	_ = r.Storage().Close()
	if b, _ := json.Marshal(openStore(t, dir, "").Current()); !bytes.Equal(b, want[5]) {
		t.Fatal("the change after the cut line is lost")
	}
}
