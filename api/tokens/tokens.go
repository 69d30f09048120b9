package tokens

import (
	"bytes"
	"crypto/rand"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

// FileName is the token file in the state directory.
const FileName = "tokens.json"

// lockName is the flock file serialising command-line edits.
const lockName = "tokens.json.lock"

// MaxFileBytes bounds the token file (a few hundred bytes per token).
const MaxFileBytes = 1 << 20

// secretPrefix makes a leaked token recognisable (secret scanners, logs).
const secretPrefix = "spliced_"

// maxSecretLen bounds what Lookup hashes; real secrets are 51 bytes.
const maxSecretLen = 256

// Role is what a token may do on the admin API.
type Role string

// Roles, from least to most powerful.
const (
	Viewer   Role = "viewer"   // every GET except the audit log and tokens
	Operator Role = "operator" // viewer + server admin_state and weight (drain)
	Admin    Role = "admin"    // everything
)

// Rank orders roles; 0 for an unknown one.
func (r Role) Rank() int {
	switch r {
	case Viewer:
		return 1
	case Operator:
		return 2
	case Admin:
		return 3
	}
	return 0
}

// Allows reports whether r is at least need.
func (r Role) Allows(need Role) bool { return r.Rank() > 0 && r.Rank() >= need.Rank() }

// ParseRole accepts viewer, operator or admin.
func ParseRole(s string) (Role, error) {
	r := Role(s)
	if r.Rank() == 0 {
		return "", fmt.Errorf("role %q: must be viewer, operator or admin: %w", s, config.ErrInvalid)
	}
	return r, nil
}

// Entry is one token as stored: never the secret.
type Entry struct {
	Name    string    `json:"name"`
	Role    Role      `json:"role"`
	Hash    string    `json:"hash"` // "sha256:" + 64 hex digits
	Created time.Time `json:"created"`
}

type fileDoc struct {
	Version int     `json:"version"`
	Tokens  []Entry `json:"tokens"`
}

// ErrCorrupt wraps every reason a token file is refused.
var ErrCorrupt = errors.New("token file is corrupt")

// Parse decodes a token file strictly: version 1, no unknown members, valid
// unique names, known roles, well-formed hashes. Error texts never quote a
// hash.
func Parse(data []byte) ([]Entry, error) {
	if len(data) > MaxFileBytes {
		return nil, fmt.Errorf("%w: larger than %d bytes", ErrCorrupt, MaxFileBytes)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var doc fileDoc
	if err := dec.Decode(&doc); err != nil {
		return nil, fmt.Errorf("%w: %s", ErrCorrupt, describeJSONError(err))
	}
	if _, err := dec.Token(); err != io.EOF {
		return nil, fmt.Errorf("%w: data after the document", ErrCorrupt)
	}
	if doc.Version != 1 {
		return nil, fmt.Errorf("%w: version %d, want 1", ErrCorrupt, doc.Version)
	}
	seen := make(map[string]bool, len(doc.Tokens))
	for i, e := range doc.Tokens {
		if !config.ValidName(e.Name) {
			return nil, fmt.Errorf("%w: token %d: invalid name", ErrCorrupt, i)
		}
		if seen[e.Name] {
			return nil, fmt.Errorf("%w: token %q appears twice", ErrCorrupt, e.Name)
		}
		seen[e.Name] = true
		if e.Role.Rank() == 0 {
			return nil, fmt.Errorf("%w: token %q: unknown role", ErrCorrupt, e.Name)
		}
		if _, ok := parseHash(e.Hash); !ok {
			return nil, fmt.Errorf("%w: token %q: hash is not sha256:<64 hex digits>", ErrCorrupt, e.Name)
		}
	}
	if doc.Tokens == nil {
		doc.Tokens = []Entry{}
	}
	return doc.Tokens, nil
}

// describeJSONError keeps the position of a syntax error but never the
// offending text (it could be part of a hash).
func describeJSONError(err error) string {
	var se *json.SyntaxError
	var te *json.UnmarshalTypeError
	switch {
	case errors.As(err, &se):
		return fmt.Sprintf("invalid JSON at byte %d", se.Offset)
	case errors.As(err, &te):
		return fmt.Sprintf("member %q has the wrong type", te.Field)
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		return "truncated or empty"
	case strings.HasPrefix(err.Error(), "json: unknown field"):
		return err.Error() // names a member, from a fixed set or short
	}
	return "invalid JSON"
}

// Marshal encodes entries as a token file.
func Marshal(entries []Entry) []byte {
	if entries == nil {
		entries = []Entry{}
	}
	b, _ := json.MarshalIndent(fileDoc{Version: 1, Tokens: entries}, "", "  ")
	return append(b, '\n')
}

func parseHash(h string) ([sha256.Size]byte, bool) {
	var out [sha256.Size]byte
	hx, ok := strings.CutPrefix(h, "sha256:")
	if !ok || len(hx) != 2*sha256.Size {
		return out, false
	}
	if _, err := hex.Decode(out[:], []byte(hx)); err != nil {
		return out, false
	}
	return out, true
}

// HashOf is the stored form of a secret.
func HashOf(secret string) string {
	sum := sha256.Sum256([]byte(secret))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// Generate makes a new secret.
func Generate() (string, error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", fmt.Errorf("tokens: random: %w", err)
	}
	return secretPrefix + base64.RawURLEncoding.EncodeToString(b[:]), nil
}

// ---- command-line edits ----

// List returns the tokens of the state directory dir (none when the file is
// absent).
func List(dir string) ([]Entry, error) {
	data, err := readNoFollow(filepath.Join(dir, FileName))
	if errors.Is(err, fs.ErrNotExist) {
		return []Entry{}, nil
	}
	if err != nil {
		return nil, err
	}
	es, err := Parse(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(dir, FileName), err)
	}
	return es, nil
}

// Add creates a token named name with role and returns its secret, the only
// time it exists outside the caller's hands. A taken name is an error
// wrapping config.ErrConflict.
func Add(dir, name string, role Role, now time.Time) (string, error) {
	secret, err := Generate()
	if err != nil {
		return "", err
	}
	err = edit(dir, func(es []Entry) ([]Entry, error) { return AddTo(es, name, role, HashOf(secret), now) })
	if err != nil {
		return "", err
	}
	return secret, nil
}

// AddTo returns es with a token named name, role and the secret's hash
// (HashOf). A taken name is an error wrapping config.ErrConflict. es is
// not modified (a cluster store's edit may run it more than once).
func AddTo(es []Entry, name string, role Role, hash string, now time.Time) ([]Entry, error) {
	if !config.ValidName(name) {
		return nil, fmt.Errorf("token name %q: use 1-%d lowercase letters, digits, '-' or '_' (not first or last): %w",
			name, config.MaxNameLen, config.ErrInvalid)
	}
	if role.Rank() == 0 {
		return nil, fmt.Errorf("role %q: must be viewer, operator or admin: %w", role, config.ErrInvalid)
	}
	for _, e := range es {
		if e.Name == name {
			return nil, fmt.Errorf("token %q already exists (revoke it first): %w", name, config.ErrConflict)
		}
	}
	return append(es[:len(es):len(es)], Entry{Name: name, Role: role, Hash: hash, Created: now.UTC().Truncate(time.Second)}), nil
}

// Revoke removes the token named name; unknown names wrap config.ErrNotFound.
func Revoke(dir, name string) error {
	return edit(dir, func(es []Entry) ([]Entry, error) { return RevokeFrom(es, name) })
}

// RevokeFrom returns es without the token named name (es is not modified);
// unknown names wrap config.ErrNotFound.
func RevokeFrom(es []Entry, name string) ([]Entry, error) {
	for i, e := range es {
		if e.Name == name {
			return append(es[:i:i], es[i+1:]...), nil
		}
	}
	return nil, fmt.Errorf("token %q: %w", name, config.ErrNotFound)
}

// WriteMirror replaces dir/tokens.json with doc, a token file kept
// elsewhere (a cluster store's P/tokens), under the lock of the
// command-line edits; a doc that does not Parse is refused, the file
// unchanged. The running server's Checker sees the new file at once.
func WriteMirror(dir string, doc []byte) error {
	if _, err := Parse(doc); err != nil {
		return err
	}
	return locked(dir, func() error { return writeAtomic(dir, doc) })
}

// edit runs change on the current entries under the directory's lock and
// writes the result atomically.
func edit(dir string, change func([]Entry) ([]Entry, error)) error {
	return locked(dir, func() error {
		es, err := List(dir)
		if err != nil {
			return err
		}
		next, err := change(es)
		if err != nil {
			return err
		}
		return writeAtomic(dir, Marshal(next))
	})
}

// locked runs fn under the lock of the command-line edits of dir.
func locked(dir string, fn func() error) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	lf, err := os.OpenFile(filepath.Join(dir, lockName), os.O_CREATE|os.O_RDWR|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return err
	}
	defer lf.Close()
	if err := flock(lf); err != nil {
		return err
	}
	return fn()
}

func flock(f *os.File) error {
	for {
		err := unix.Flock(int(f.Fd()), unix.LOCK_EX)
		if err != unix.EINTR {
			if err != nil {
				return fmt.Errorf("lock %s: %w", f.Name(), err)
			}
			return nil
		}
	}
}

// writeAtomic replaces dir/tokens.json through config.WriteFileAtomic
// (temporary file 0600, fsync, rename, fsync dir). The new file keeps the
// owner of the old one (or of the directory) when run as root, so
// `sudo spliced token add` does not leave a file the service user cannot read.
func writeAtomic(dir string, data []byte) error {
	var keepOwner func(tmp *os.File)
	if os.Geteuid() == 0 {
		keepOwner = func(tmp *os.File) {
			ref := filepath.Join(dir, FileName)
			if _, err := os.Stat(ref); err != nil {
				ref = dir
			}
			if fi, err := os.Stat(ref); err == nil {
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					_ = tmp.Chown(int(st.Uid), int(st.Gid))
				}
			}
		}
	}
	return config.WriteFileAtomic(dir, FileName, data, keepOwner)
}

// ---- the server's view ----

// Checker answers lookups from the token file of one state directory,
// re-reading it when it changes. Any goroutine.
type Checker struct {
	path   string
	mu     sync.Mutex
	loaded bool // snap was read for snap.st
	snap   snapshot
}

type stamp struct {
	exists     bool
	dev, ino   uint64
	size       int64
	mtimeNanos int64
	ctimeNanos int64 // chmod/chown change it: a fixed permission is seen
}

type snapshot struct {
	st      stamp
	entries []checked
	err     error
}

type checked struct {
	Entry
	sum [sha256.Size]byte
}

// NewChecker reads dir/tokens.json once; an unreadable or corrupt file is
// an error (the server refuses to start rather than guess).
func NewChecker(dir string) (*Checker, error) {
	if err := CheckMode(dir); err != nil {
		return nil, err
	}
	c := &Checker{path: filepath.Join(dir, FileName)}
	s := c.current()
	if s.err != nil {
		return nil, s.err
	}
	return c, nil
}

// Path is the file the Checker reads.
func (c *Checker) Path() string { return c.path }

// readNoFollow reads path, refusing a symbolic link: tokens.json decides
// who may reconfigure the proxy, and a link planted in the state directory
// must not make another file the token list.
func readNoFollow(path string) ([]byte, error) {
	f, err := os.OpenFile(path, os.O_RDONLY|unix.O_NOFOLLOW, 0)
	if err != nil {
		if errors.Is(err, unix.ELOOP) {
			return nil, fmt.Errorf("%w (a symbolic link: refused, remove it)", err)
		}
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
}

// CheckMode refuses a tokens.json that other users may read: the hashes
// are unsalted SHA-256 of random secrets, not something to share, and a
// file left world-readable is a sign the directory is not kept private.
func CheckMode(dir string) error {
	path := filepath.Join(dir, FileName)
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if fi.Mode()&fs.ModeSymlink != 0 {
		return fmt.Errorf("%s is a symbolic link: refused (remove it and recreate the tokens with `spliced token add`)", path)
	}
	if fi.Mode().Perm()&0o007 != 0 {
		return fmt.Errorf("%s is accessible to other users (mode %04o): fix it with `chmod 600 %s`",
			path, fi.Mode().Perm(), path)
	}
	return nil
}

func statOf(path string) (stamp, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return stamp{}, nil
		}
		return stamp{}, &fs.PathError{Op: "stat", Path: path, Err: err}
	}
	return stamp{exists: true, dev: uint64(st.Dev), ino: st.Ino, size: st.Size,
		mtimeNanos: st.Mtim.Nano(), ctimeNanos: st.Ctim.Nano()}, nil
}

// current returns the snapshot for the file as it is now.
func (c *Checker) current() snapshot {
	st, err := statOf(c.path)
	c.mu.Lock()
	defer c.mu.Unlock()
	if err != nil {
		c.loaded, c.snap = false, snapshot{err: err}
		return c.snap
	}
	if c.loaded && st == c.snap.st {
		return c.snap
	}
	c.loaded, c.snap = true, load(c.path, st)
	return c.snap
}

func load(path string, st stamp) snapshot {
	s := snapshot{st: st, entries: []checked{}}
	if !st.exists {
		return s
	}
	data, err := readNoFollow(path)
	if err != nil {
		return snapshot{st: st, err: err}
	}
	es, err := Parse(data)
	if err != nil {
		return snapshot{st: st, err: fmt.Errorf("%s: %w", path, err)}
	}
	for _, e := range es {
		sum, _ := parseHash(e.Hash)
		s.entries = append(s.entries, checked{Entry: e, sum: sum})
	}
	return s
}

// Empty reports whether no token exists. An unreadable file counts as not
// empty (with the error): access is refused, never opened, by a broken file.
func (c *Checker) Empty() (bool, error) {
	s := c.current()
	if s.err != nil {
		return false, s.err
	}
	return len(s.entries) == 0, nil
}

// Lookup returns the entry whose secret is secret. Every entry is compared,
// in constant time each, whatever matches.
func (c *Checker) Lookup(secret string) (Entry, bool, error) {
	s := c.current()
	if s.err != nil {
		return Entry{}, false, s.err
	}
	if len(secret) > maxSecretLen {
		return Entry{}, false, nil // real secrets are 51 bytes
	}
	sum := sha256.Sum256([]byte(secret))
	found := -1
	for i := range s.entries {
		if subtle.ConstantTimeCompare(sum[:], s.entries[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return Entry{}, false, nil
	}
	return s.entries[found].Entry, true, nil
}
