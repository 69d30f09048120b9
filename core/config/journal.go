package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// The journal: the changes committed as deltas since config.json's
// generation, one line each, in files journal.NNNN (NNNN: the generation
// current when the file was started, 20 digits) in the state directory.
//
// A delta commit is one line appended to the newest journal file and one
// fdatasync: that line is the commit point. The line is the revision file
// of the generation, byte for byte (header, "base", "delta"); the file
// revisions/NNNN.json is also written, without fsync (a copy for the
// readers of revisions, rebuilt from the journal at open when a crash lost
// or cut it). A revert (Storage.Revert of a delta whose apply failed)
// appends {"revert":N}.
//
// Every SnapshotEvery generations the commit hands the new document to a
// goroutine that makes it config.json after the answer (snapshotLoop):
// it starts the next journal file (changes committed meanwhile go there),
// fsyncs the delta revisions written since the last snapshot, writes the
// whole revision and config.json (atomically), and only then removes the
// journal files whose every line is at or below the new config.json. A
// crash at any point leaves config.json at a generation the journal
// continues from: Open replays the journal lines after it.
const journalPrefix = "journal."

// journalSeg is one journal file.
type journalSeg struct {
	name string
	base int64 // the generation current when it was started
	max  int64 // the newest generation it holds a line of (0: none)
}

func journalName(base int64) string {
	return journalPrefix + fmt.Sprintf("%0*d", revisionDigits, base)
}

func parseJournalName(name string) (int64, bool) {
	digits, ok := strings.CutPrefix(name, journalPrefix)
	if !ok {
		return 0, false
	}
	return parseGeneration(digits)
}

// storageFault, set only by tests, is called at the named points of a
// commit and of a snapshot (see TestStoreKill9AtEveryWritePoint).
// Production code never sets it.
var storageFault func(point string)

func faultPoint(point string) {
	if storageFault != nil {
		storageFault(point)
	}
}

// journalEntry is one valid line of the journal.
type journalEntry struct {
	gen    int64
	base   int64
	revert bool
	line   []byte // the line, newline included
}

// readJournal reads the journal files (oldest first) and returns the
// files and their valid lines in order. A file's lines end at its first
// line that is torn or does not decode (a write a crash cut: never
// acknowledged); valid is the length of the last file's valid lines.
func (d *DirStorage) readJournal() (segs []journalSeg, lines []journalEntry, valid int64, err error) {
	ents, err := os.ReadDir(d.dir)
	if err != nil {
		return nil, nil, 0, fmt.Errorf("config store: list %s: %w", d.dir, err)
	}
	for _, e := range ents { // sorted by name: by base
		base, ok := parseJournalName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		data, err := readFileNoFollow(filepath.Join(d.dir, e.Name()))
		if err != nil {
			return nil, nil, 0, fmt.Errorf("config store: read %s: %w", e.Name(), err)
		}
		seg := journalSeg{name: e.Name(), base: base}
		valid = 0
		for len(data) > 0 {
			i := bytes.IndexByte(data, '\n')
			if i < 0 {
				break
			}
			je, ok := parseJournalLine(data[:i+1])
			if !ok {
				break
			}
			lines = append(lines, je)
			if !je.revert {
				seg.max = max(seg.max, je.gen)
			}
			valid += int64(i + 1)
			data = data[i+1:]
		}
		segs = append(segs, seg)
	}
	return segs, lines, valid, nil
}

var revertPrefix = []byte(`{"revert":`)

func parseJournalLine(line []byte) (journalEntry, bool) {
	if rest, ok := bytes.CutPrefix(line, revertPrefix); ok {
		g, err := strconv.ParseInt(string(bytes.TrimSuffix(bytes.TrimSpace(rest), []byte("}"))), 10, 64)
		return journalEntry{gen: g, revert: true, line: line}, err == nil && g > 0
	}
	var r revisionFile
	if err := DecodeBytes(line, &r); err != nil || r.Delta == nil || r.Config != nil || r.Generation <= 0 {
		return journalEntry{}, false
	}
	return journalEntry{gen: r.Generation, base: r.Base, line: line}, true
}

// journalChain is what the journal commits after generation from: the
// delta lines of from+1, from+2... in order, a revert line taking back the
// line of its generation, a later line of a generation replacing an
// earlier one (written after it was taken back).
func journalChain(lines []journalEntry, from int64) []journalEntry {
	var chain []journalEntry
	for _, je := range lines {
		top := from + int64(len(chain))
		switch {
		case je.revert:
			if len(chain) > 0 && chain[len(chain)-1].gen == je.gen {
				chain = chain[:len(chain)-1]
			}
		case je.gen <= from:
		case je.gen <= top+1 && je.base == je.gen-1:
			chain = append(chain[:je.gen-from-1], je)
		}
	}
	return chain
}

// openJournal sets up the journal at open: the files found, the newest one
// (cut after its last valid line) to append to. Under no lock: Open only.
func (d *DirStorage) openJournal(segs []journalSeg, valid int64) error {
	d.segs = segs
	if len(segs) == 0 {
		return nil
	}
	last := segs[len(segs)-1]
	p := filepath.Join(d.dir, last.name)
	if fi, err := os.Lstat(p); err == nil && fi.Size() != valid {
		d.log.Warn("cutting the journal after its last complete line (a write a crash interrupted)", "file", last.name,
			"size", fi.Size(), "valid", valid)
		f, err := os.OpenFile(p, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if err == nil {
			if err = f.Truncate(valid); err == nil {
				err = f.Sync()
			}
			f.Close()
		}
		if err != nil {
			// Appending after the cut line would glue the next line
			// to it: the next commit is whole and starts a new journal.
			d.log.Warn("the journal's cut line could not be removed: the next change is written whole", "file", last.name, "err", noFollowError(err))
			d.whole = true
		}
	}
	d.jname, d.jsize = last.name, valid
	return nil
}

// createSegment creates journal.<base> and makes its name durable.
func (d *DirStorage) createSegment(base int64) (string, error) {
	name := journalName(base)
	f, err := os.OpenFile(filepath.Join(d.dir, name), os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0o600)
	if err != nil {
		return name, err
	}
	f.Close()
	if err := syncDir(d.dir); err != nil {
		_ = os.Remove(filepath.Join(d.dir, name))
		return name, err
	}
	return name, nil
}

// ensureJournal makes sure a journal file takes appends. Under d.mu.
func (d *DirStorage) ensureJournal() error {
	if d.jname != "" {
		return nil
	}
	name, err := d.createSegment(d.gen)
	if err != nil {
		return fmt.Errorf("create %s: %w", name, err)
	}
	d.jname, d.jsize = name, 0
	d.segs = append(d.segs, journalSeg{name: name, base: d.gen})
	return nil
}

// appendJournal appends line (of generation gen; 0 for a revert line) and
// fdatasyncs it: the commit point. On failure the file is cut back to
// where it was, and when it could not be the next commits are whole
// (d.whole) until one resets the journal. Under d.mu.
//
// The file is opened for each line: a file held open for writing would
// keep the file system from being remounted read-only. It is opened as a
// raw descriptor: an os.File would try to add it to the poller (four
// fcntl and an epoll_ctl that fails, for a regular file).
func (d *DirStorage) appendJournal(line []byte, gen int64) error {
	if err := d.ensureJournal(); err != nil {
		return err
	}
	p := filepath.Join(d.dir, d.jname)
	fd, err := openRaw(p, syscall.O_WRONLY|syscall.O_APPEND, 0)
	if err != nil {
		return fmt.Errorf("open %s: %w", d.jname, noFollowError(err))
	}
	err = d.journalWrite(fd, line)
	if err != nil {
		if terr := syscall.Ftruncate(fd, d.jsize); terr != nil {
			d.whole = true
		} else if serr := fdatasyncRaw(fd); serr != nil {
			d.whole = true
		}
		syscall.Close(fd)
		return &fs.PathError{Op: "append", Path: p, Err: err}
	}
	if err := syscall.Close(fd); err != nil {
		return &fs.PathError{Op: "close", Path: p, Err: err}
	}
	d.jsize += int64(len(line))
	if gen > 0 {
		d.segs[len(d.segs)-1].max = gen
	}
	return nil
}

// openRaw is open(2) of path with O_NOFOLLOW and O_CLOEXEC added,
// retried on EINTR.
func openRaw(path string, flags int, perm uint32) (int, error) {
	for {
		fd, err := syscall.Open(path, flags|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, perm)
		if err != syscall.EINTR {
			return fd, err
		}
	}
}

// writeRaw writes all of b to fd.
func writeRaw(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if err == syscall.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrShortWrite
		}
		b = b[n:]
	}
	return nil
}

func fdatasyncRaw(fd int) error {
	for {
		if err := syscall.Fdatasync(fd); err != syscall.EINTR {
			return err
		}
	}
}

// writeAndSync is journalWrite: one write and one fdatasync.
func writeAndSync(fd int, b []byte) error {
	if err := writeRaw(fd, b); err != nil {
		return err
	}
	return fdatasyncRaw(fd)
}

// resetJournal removes every journal file: config.json now holds the
// current generation (a whole commit). Under d.mu.
func (d *DirStorage) resetJournal() {
	d.jname, d.jsize = "", 0
	for _, s := range d.segs {
		if err := os.Remove(filepath.Join(d.dir, s.name)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("removing a journal file failed", "file", s.name, "err", err)
		}
	}
	d.segs = nil
	d.whole = false
}

// writeRevisionCopy writes revisions/<gen>.json (temporary file and rename,
// no fsync): the copy of a journal line for the readers of revisions.
// Under d.mu, so one temporary name serves (Open removes a leftover).
func (d *DirStorage) writeRevisionCopy(gen int64, line []byte) error {
	tmp := filepath.Join(d.revDir(), "."+revisionName(gen)+tmpMarker+"copy")
	fd := -1
	if sp := d.takeSpare(); sp != "" {
		// a pruned revision's file (recycle.go): written where it is,
		// then renamed like the temporary file
		if sfd, err := openRaw(sp, syscall.O_WRONLY|syscall.O_TRUNC, 0); err == nil {
			fd, tmp = sfd, sp
		} else {
			_ = os.Remove(sp)
		}
	}
	var err error
	if fd < 0 {
		if fd, err = openRaw(tmp, syscall.O_WRONLY|syscall.O_CREAT|syscall.O_TRUNC, 0o600); err != nil {
			return noFollowError(&fs.PathError{Op: "open", Path: tmp, Err: err})
		}
	}
	err = writeRaw(fd, line)
	if cerr := syscall.Close(fd); err == nil {
		err = cerr
	}
	if err != nil {
		_ = os.Remove(tmp)
		return &fs.PathError{Op: "write", Path: tmp, Err: err}
	}
	if err := os.Rename(tmp, d.revisionPath(gen)); err != nil {
		_ = os.Remove(tmp)
		return err
	}
	return nil
}

// replayJournal applies to c (config.json's document, not migrated) the
// delta revision files written before the journal existed, then the
// journal's chain. open: at NewDirStorage, it also rewrites (durably) the
// revision copies a crash lost or cut and sets up the journal for appends.
func (d *DirStorage) replayJournal(c *Config, open bool) error {
	segs, lines, valid, err := d.readJournal()
	if err != nil {
		return err
	}
	// Delta revision files after config.json that no journal line holds:
	// written (durably) by a spliced before the journal, or by a commit
	// with no journal file yet; every generation above the first journal
	// file's base is in the journal (a file is started before the
	// copies of the lines it will hold).
	firstBase := int64(1<<63 - 1)
	if len(segs) > 0 {
		firstBase = segs[0].base
	}
	for g := c.Generation + 1; g <= firstBase; g++ {
		p := d.revisionPath(g)
		if _, err := os.Lstat(p); errors.Is(err, fs.ErrNotExist) {
			break
		}
		r, err := readRevisionFile(p)
		if err != nil {
			return err
		}
		if r.Delta == nil {
			break
		}
		if r.Base != c.Generation {
			return fmt.Errorf("revision %d: a delta from %d, not %d", g, r.Base, c.Generation)
		}
		if err := r.Delta.Apply(c); err != nil {
			return fmt.Errorf("revision %d: %w", g, err)
		}
		c.Generation = g
	}
	for _, je := range journalChain(lines, c.Generation) {
		var r revisionFile
		if err := DecodeBytes(je.line, &r); err != nil {
			return fmt.Errorf("%s: generation %d: %v", journalPrefix+"*", je.gen, err)
		}
		if err := r.Delta.Apply(c); err != nil {
			return fmt.Errorf("journal: revision %d: %w", je.gen, err)
		}
		c.Generation = je.gen
		if open {
			d.restoreCopy(je)
			d.lastLine = je.gen
		}
	}
	if !open {
		return nil
	}
	return d.openJournal(segs, valid)
}

// restoreCopy rewrites the revision file of a journal line unless it holds
// that line, or the whole revision of its generation (a snapshot's).
func (d *DirStorage) restoreCopy(je journalEntry) {
	p := d.revisionPath(je.gen)
	if b, err := readFileNoFollow(p); err == nil {
		if bytes.Equal(b, je.line) {
			return
		}
		if r, err := readRevisionFile(p); err == nil && r.Config != nil {
			return
		}
	}
	d.log.Warn("revision file rewritten from the journal", "generation", je.gen)
	if err := d.writeFile(d.revDir(), revisionName(je.gen), je.line, nil); err != nil {
		d.log.Warn("rewriting a revision file from the journal failed", "generation", je.gen, "err", err)
	}
}

// requestSnapshot hands c (just committed by a journal line of lineLen
// bytes) to the snapshot goroutine when a snapshot is due since the last
// one asked for (SnapshotEvery). Under d.mu.
func (d *DirStorage) requestSnapshot(c *Config, info RevisionInfo, audit []byte, lineLen int) {
	d.jbytes += int64(lineLen)
	n := c.Generation - d.snapAsk
	if n < SnapshotEvery || (n < MaxSnapshotEvery && d.jbytes*snapshotDocShare < d.snapBytes) {
		return
	}
	d.snapAsk, d.jbytes = c.Generation, 0
	d.snapReq, d.snapInfo, d.snapAudit = c, info, audit
	if !d.snapRunning {
		d.snapRunning = true
		d.snapWG.Add(1)
		go d.snapshotLoop()
	}
}

// snapshotLoop writes the snapshots asked for, the newest each time, until
// none is.
func (d *DirStorage) snapshotLoop() {
	defer d.snapWG.Done()
	for {
		d.snapMu.Lock()
		d.mu.Lock()
		c, info, audit, prev := d.snapReq, d.snapInfo, d.snapAudit, d.snap
		d.snapReq = nil
		if c == nil {
			d.snapRunning = false
			d.mu.Unlock()
			d.snapMu.Unlock()
			return
		}
		d.mu.Unlock()
		if err := d.snapshot(c, info, audit, prev); err != nil {
			d.log.Warn("snapshot failed: config.json stays at its generation, the journal keeps the changes after it",
				"generation", c.Generation, "config_generation", prev, "err", err)
		}
		d.snapMu.Unlock()
	}
}

// snapshot makes c config.json. Under d.snapMu: the only writer of
// config.json meanwhile; commits of deltas go on.
func (d *DirStorage) snapshot(c *Config, info RevisionInfo, audit []byte, prev int64) error {
	faultPoint("snapshot-start")
	doc, err := json.Marshal(c)
	if err != nil {
		return err
	}
	d.mu.Lock()
	d.snapBytes = int64(len(doc))
	d.mu.Unlock()
	// The next journal file: lines from now on go where the cut below
	// does not look.
	if name, err := d.createSegment(c.Generation); err == nil {
		d.mu.Lock()
		d.jname, d.jsize = name, 0
		d.segs = append(d.segs, journalSeg{name: name, base: c.Generation})
		d.mu.Unlock()
	} else if !errors.Is(err, fs.ErrExist) {
		return err
	}
	faultPoint("snapshot-segment")
	// The deltas' copies since the last snapshot: durable before
	// config.json stops replaying them from the journal.
	for g := prev + 1; g < c.Generation; g++ {
		f, err := os.OpenFile(d.revisionPath(g), os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_CLOEXEC, 0)
		if errors.Is(err, fs.ErrNotExist) {
			continue // a revision a whole commit replaced, or pruned
		}
		if err != nil {
			return err
		}
		err = f.Sync()
		f.Close()
		if err != nil {
			return err
		}
	}
	// the whole revision (its directory fsync covers the copies' names)
	if err := d.writeRevisionDoc(info, doc, audit); err != nil {
		return err
	}
	faultPoint("snapshot-revision")
	if err := d.writeConfigDoc(doc); err != nil {
		return err
	}
	faultPoint("snapshot-config")
	d.mu.Lock()
	d.snap, d.snapSchema = c.Generation, SchemaVersion
	var drop []string
	keep := d.segs[:0]
	for i, s := range d.segs {
		if i < len(d.segs)-1 && s.max <= c.Generation {
			drop = append(drop, s.name)
			continue
		}
		keep = append(keep, s)
	}
	d.segs = keep
	d.mu.Unlock()
	for _, n := range drop {
		if err := os.Remove(filepath.Join(d.dir, n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			d.log.Warn("removing a journal file failed", "file", n, "err", err)
		}
	}
	faultPoint("snapshot-cut")
	d.pruneRevisions()
	return nil
}

// WaitSnapshots waits until no snapshot is being written or asked for.
func (d *DirStorage) WaitSnapshots() { d.snapWG.Wait() }

// writeAudit adds the member "audit" (a write's audit record) to a
// revision being encoded, when there is one.
func writeAudit(buf *bytes.Buffer, audit []byte) {
	if len(audit) == 0 {
		return
	}
	buf.WriteString(`,"audit":`)
	buf.Write(audit)
}

// RevisionAudit is the audit record a revision holds.
type RevisionAudit struct {
	Generation int64
	Record     json.RawMessage
}

// RevisionAudits returns the audit records (UpdateOptions.AuditRecord) of
// the newest n kept revisions that hold one, newest first: how the API's
// audit trail finds, at start, the writes a crash stopped between their
// commit and their entry.
func (d *DirStorage) RevisionAudits(n int) ([]RevisionAudit, error) {
	names, err := d.revisionNames()
	if err != nil {
		return nil, err
	}
	var out []RevisionAudit
	for i := len(names) - 1; i >= 0 && i >= len(names)-n; i-- {
		p := filepath.Join(d.revDir(), names[i])
		info, rec, err := readRevisionHead(p)
		if err != nil {
			d.log.Warn("unreadable revision skipped", "file", p, "err", err)
			continue
		}
		if len(rec) > 0 {
			out = append(out, RevisionAudit{Generation: info.Generation, Record: rec})
		}
	}
	return out, nil
}
