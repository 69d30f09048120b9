package config

import (
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

// inodeOf is the inode number of the file at p.
func inodeOf(t *testing.T, p string) uint64 {
	t.Helper()
	fi, err := os.Stat(p)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Sys().(*syscall.Stat_t).Ino
}

// TestStoreRevisionCopiesReusePrunedFiles: the revisions a snapshot
// prunes are kept, emptied, as spares, and the next delta commits write
// their copies into them (no new file: on ext4 a file's creation is most
// of a copy's CPU); every revision still reads, and a reopen adopts the
// spares left.
func TestStoreRevisionCopiesReusePrunedFiles(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	const n = MaxRevisions + 2*SnapshotEvery + 5
	for i := range n {
		mustUpdate(t, s, func(c *Config) error { c.Tuning.Maxaccept = i + 1; return nil })
	}
	settled(s)
	d := dirOf(s)
	rd := filepath.Join(dir, recycleDir)
	ents, err := os.ReadDir(rd)
	if err != nil || len(ents) == 0 {
		t.Fatalf("no spare after %d changes and their prunes: %v, %v", n, ents, err)
	}
	spare := map[uint64]bool{}
	for _, e := range ents {
		p := filepath.Join(rd, e.Name())
		if fi, err := os.Stat(p); err != nil || fi.Size() != 0 {
			t.Fatalf("spare %s: %v, size %d (a spare holds nothing)", e.Name(), err, fi.Size())
		}
		spare[inodeOf(t, p)] = true
	}
	before := len(d.spares.names)
	r := mustUpdate(t, s, func(c *Config) error { c.Tuning.Maxaccept = 7; return nil })
	if !spare[inodeOf(t, d.revisionPath(r.Generation))] {
		t.Fatal("the copy of the next delta is a new file, not a spare")
	}
	if after := len(d.spares.names); after != before-1 {
		t.Fatalf("%d spares after one copy, %d before", after, before)
	}
	for _, gen := range revisionGens(t, s) {
		if c, err := s.Revision(gen); err != nil || c.Generation != gen {
			t.Fatalf("Revision(%d) = %v, %v", gen, c, err)
		}
	}
	// a reopen adopts the spares and keeps them out of revisions/
	if err := s.Storage().Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, "")
	if got := len(dirOf(s2).spares.names); got != before-1 {
		t.Fatalf("reopened with %d spares, want %d", got, before-1)
	}
	if c := s2.Current(); c.Tuning.Maxaccept != 7 {
		t.Fatalf("reopened at maxaccept %d", c.Tuning.Maxaccept)
	}
}

// TestStoreRecycledCopyWithStaleBytesIsRewritten: a crash may leave a
// recycled copy under its revision's name holding the bytes of the
// revision it was before (its emptying and new content not written
// back): Open finds that it is not its journal line and rewrites it.
func TestStoreRecycledCopyWithStaleBytesIsRewritten(t *testing.T) {
	dir := t.TempDir()
	s := openStore(t, dir, "")
	for i := range 3 {
		mustUpdate(t, s, func(c *Config) error { c.Tuning.Maxaccept = i + 1; return nil })
	}
	settled(s)
	gens := revisionGens(t, s) // newest first
	newest, old := gens[0], gens[len(gens)-1]
	stale, err := os.ReadFile(dirOf(s).revisionPath(old)) // a whole revision
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Storage().Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, RevisionsDir, revisionName(newest)), stale, 0o600); err != nil {
		t.Fatal(err)
	}
	s2 := openStore(t, dir, "")
	if c, err := s2.Revision(newest); err != nil || c.Generation != newest || c.Tuning.Maxaccept != 3 {
		t.Fatalf("Revision(%d) after reopen = %+v, %v", newest, c, err)
	}
}
