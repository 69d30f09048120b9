package config

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
)

// Recycled revision files. Each delta commit writes its revision's copy
// (writeRevisionCopy) and each snapshot prunes the revisions past
// MaxRevisions: a new file per change and an unlink per change. On ext4
// creating a file is the costly part (a free inode searched in the
// bitmaps, and, without a journal, every recently deleted inode of the
// group looked at): about 150 µs of CPU here per change, against 25 µs to
// rewrite an existing one. So a pruned revision's file is not unlinked but
// moved, emptied, into recycleDir, and the next copy is written into one
// of those files and renamed to its name: the same inode, no allocation.
//
// Crash safety is that of a new file: the copy is written under a name
// that is not a revision's (here a spare's) and renamed to its revision's
// name, without fsync as before; a crash may leave a copy cut, empty or
// even holding a pruned revision's old bytes (metadata not written back):
// a revision file is checked against its name's generation when read
// (readRevisionFile), and Open rewrites from the journal every copy that
// does not hold its line (restoreCopy); a snapshot fsyncs the copies
// before it cuts the journal. A spare is never a revision: Open adopts
// those it finds as spares.
const (
	recycleDir  = ".recycle"
	sparePrefix = "spare-"
	maxSpares   = MaxSnapshotEvery // a snapshot prunes about as many revisions as were committed since the last
)

// spares is the pool of emptied files in recycleDir.
type spares struct {
	mu    sync.Mutex // a leaf: nothing else is locked under it
	ok    bool       // recycleDir is usable
	names []string
	seq   int
}

// openSpares sets up recycleDir (a real directory of ours) and adopts the
// spares left in it. Recycling is off, silently, when the directory
// cannot be made: nothing but speed depends on it.
func (d *DirStorage) openSpares() {
	dir := filepath.Join(d.dir, recycleDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !os.IsExist(err) {
		return
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return // a symbolic link would send the renames elsewhere
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range ents {
		n, ok := strings.CutPrefix(e.Name(), sparePrefix)
		seq, err := strconv.Atoi(n)
		if !ok || err != nil || !e.Type().IsRegular() || len(d.spares.names) >= maxSpares {
			_ = os.Remove(filepath.Join(dir, e.Name()))
			continue
		}
		d.spares.names = append(d.spares.names, e.Name())
		d.spares.seq = max(d.spares.seq, seq)
	}
	d.spares.ok = true
}

// recycle moves the file at path (a pruned revision) into recycleDir,
// emptied. false: it did not (the pool is full, or the move failed) and
// path is to be removed as before.
func (d *DirStorage) recycle(path string) bool {
	s := &d.spares
	s.mu.Lock()
	if !s.ok || len(s.names) >= maxSpares {
		s.mu.Unlock()
		return false
	}
	s.seq++
	name := sparePrefix + strconv.Itoa(s.seq)
	s.mu.Unlock()
	sp := filepath.Join(d.dir, recycleDir, name)
	if err := os.Rename(path, sp); err != nil {
		return false
	}
	fd, err := openRaw(sp, syscall.O_WRONLY|syscall.O_TRUNC, 0)
	if err != nil {
		_ = os.Remove(sp)
		return true // gone from revisions/ all the same
	}
	syscall.Close(fd)
	s.mu.Lock()
	s.names = append(s.names, name)
	s.mu.Unlock()
	return true
}

// takeSpare returns the path of a spare file, which the caller now owns
// (it renames it or removes it), or "" when there is none.
func (d *DirStorage) takeSpare() string {
	s := &d.spares
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.names) == 0 {
		return ""
	}
	name := s.names[len(s.names)-1]
	s.names = s.names[:len(s.names)-1]
	return filepath.Join(d.dir, recycleDir, name)
}
