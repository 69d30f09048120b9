package tlsconf

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// TicketKeysFile is the name of the ticket key file in the state directory.
const TicketKeysFile = "tls-ticket-keys.json"

// Key sources (TicketKeyInfo.Source).
const (
	SourceGenerated = "generated" // made here, rotated on the schedule
	SourceAPI       = "api"       // set through PUT /api/v1/tls/ticket-keys, never rotated here
)

// Bounds of the key list.
const (
	KeptTicketKeys = 3 // generated keys kept: the newest encrypts, all decrypt, so a ticket lives 2-3 rotation periods
	MaxTicketKeys  = 8 // keys Set accepts: the current one and enough predecessors for any rotation a cluster runs
)

// ticketKey is one session ticket key.
type ticketKey struct {
	key     [32]byte
	created time.Time
}

// TicketKeyInfo describes a key without revealing it.
type TicketKeyInfo struct {
	// ID is the first 8 hex digits of the key's SHA-256: enough to tell
	// which keys two nodes share, useless to recover the key.
	ID      string
	Created time.Time
	Source  string
}

// TicketKeys holds the session ticket keys every server configuration
// shares (package doc). Safe for concurrent use.
type TicketKeys struct {
	dir string
	log *slog.Logger
	// enc holds the keys (SetSessionTicketKeys): its EncryptTicket and
	// DecryptTicket serve the WrapSession and UnwrapSession of every
	// configuration wired to this object. Nothing else of it is used.
	enc *tls.Config

	mu       sync.Mutex
	keys     []ticketKey // newest first
	source   string
	rotation time.Duration
	timer    *time.Timer // next rotation; nil when the keys come from the API or after Close
	closed   bool
	// shared is the store of a cluster's keys (Share; nil on a single
	// node); ctx ends at Close and bounds its calls.
	shared    KeyStore
	serial    int64 // serial of the set installed from the store (-1: none yet; Install)
	ctx       context.Context
	cancel    context.CancelFunc
	failedMsg string // the last failure of a shared rotation logged
}

// KeyStore keeps the ticket keys of a cluster (cluster.ShareTicketKeys:
// P/tls/ticket-keys in etcd). A set is the JSON of TicketKeysFile.
type KeyStore interface {
	// Edit replaces the stored set with what edit makes of it: old is
	// the stored set (nil when absent), edit returns the set to store
	// (or an error: nothing is written, the error is returned as is).
	// The replacement is conditional on the set not having changed
	// since it was read (edit then runs again on the new one).
	Edit(ctx context.Context, edit func(old []byte) ([]byte, error)) error
	// Read returns the stored set (nil when absent).
	Read(ctx context.Context) ([]byte, error)
}

// sharedRetry is the longest wait before a shared rotation that failed
// (the store unreachable) is tried again.
const sharedRetry = 5 * time.Second

// errNotDue stops a shared rotation that finds the stored set rotated
// already (by another node) or not rotated on a schedule (set through
// the API).
var errNotDue = errors.New("ticket keys: no rotation due")

// NewTicketKeys reads the ticket keys of stateDir (TicketKeysFile), or
// generates one, and rotates generated keys every rotation (a key older
// than rotation at start is rotated at once). It refuses a key file that
// other users may read or that does not parse: never replaced silently,
// since keys set through the API may be shared with other nodes.
func NewTicketKeys(stateDir string, rotation time.Duration, log *slog.Logger) (*TicketKeys, error) {
	return newTicketKeys(stateDir, rotation, nil, log)
}

// NewSharedTicketKeys is NewTicketKeys for a node of a cluster whose keys
// are kept in store (Share): the state directory's keys are the copy of
// the store's, and a rotation due at start is made in the store, not
// here (when the store cannot be reached, the keys stay as they are).
func NewSharedTicketKeys(stateDir string, rotation time.Duration, store KeyStore, log *slog.Logger) (*TicketKeys, error) {
	return newTicketKeys(stateDir, rotation, store, log)
}

func newTicketKeys(stateDir string, rotation time.Duration, store KeyStore, log *slog.Logger) (*TicketKeys, error) {
	if rotation <= 0 {
		return nil, fmt.Errorf("ticket keys: rotation %v: %w", rotation, config.ErrInvalid)
	}
	tk := &TicketKeys{dir: stateDir, log: log.With("object", "tls ticket keys"), enc: &tls.Config{}, rotation: rotation, shared: store, serial: -1}
	tk.ctx, tk.cancel = context.WithCancel(context.Background())
	// Held through the start: the first rotation may be due at once.
	tk.mu.Lock()
	defer tk.mu.Unlock()
	// A write cut by a crash leaves its temporary file (config.WriteFileAtomic
	// names it ".<name>.tmp-<random>"), keys included: remove it.
	if left, _ := filepath.Glob(filepath.Join(stateDir, "."+TicketKeysFile+".tmp-*")); len(left) > 0 {
		for _, p := range left {
			_ = os.Remove(p)
		}
	}
	keys, source, err := readKeyFile(filepath.Join(stateDir, TicketKeysFile))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		tk.source = SourceGenerated
		if err := tk.rotateLocked(time.Now()); err != nil {
			return nil, err
		}
	case err != nil:
		return nil, err
	default:
		tk.keys, tk.source = keys, source
		tk.install()
		if source == SourceGenerated {
			if age := time.Since(keys[0].created); age >= rotation && store == nil {
				if err := tk.rotateLocked(time.Now()); err != nil {
					return nil, err
				}
			} else {
				tk.schedule(max(0, rotation-age)) // shared: rotateShared, once tk.mu is released
			}
		}
	}
	tk.log.Info("session ticket keys ready", "source", tk.source, "keys", len(tk.keys), "encrypting", keyID(tk.keys[0].key))
	return tk, nil
}

// Set replaces the keys by keys (1 to MaxTicketKeys; the first encrypts,
// all decrypt), writes them to the state directory and stops the
// automatic rotation: the operator rotates by setting them again. On error
// nothing changed.
func (tk *TicketKeys) Set(keys [][32]byte) error {
	if len(keys) == 0 || len(keys) > MaxTicketKeys {
		return fmt.Errorf("ticket keys: %d keys, want 1 to %d: %w", len(keys), MaxTicketKeys, config.ErrInvalid)
	}
	now := time.Now().UTC()
	list := make([]ticketKey, len(keys))
	for i, k := range keys {
		list[i] = ticketKey{key: k, created: now}
	}
	tk.mu.Lock()
	shared, ctx := tk.shared, tk.ctx
	tk.mu.Unlock()
	if shared != nil {
		// A cluster's keys: stored first, then installed here (the other
		// nodes install them from the store).
		installed := tk.installedSerial()
		if err := shared.Edit(ctx, func(old []byte) ([]byte, error) {
			return marshalKeys(list, SourceAPI, nextSerial(old, installed))
		}); err != nil {
			return fmt.Errorf("ticket keys: %w", err)
		}
		if err := tk.reload(ctx, shared); err != nil {
			// Stored: every node installs them from its watch.
			tk.log.Warn("session ticket keys stored but not read back yet", "err", err)
		}
		return nil
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if err := tk.persist(list, SourceAPI); err != nil {
		return err
	}
	tk.keys, tk.source = list, SourceAPI
	tk.install()
	if tk.timer != nil {
		tk.timer.Stop()
		tk.timer = nil
	}
	tk.log.Info("session ticket keys set through the API", "keys", len(list), "encrypting", keyID(list[0].key))
	return nil
}

// Info describes the keys, the encrypting one first; never the keys.
func (tk *TicketKeys) Info() []TicketKeyInfo {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	out := make([]TicketKeyInfo, len(tk.keys))
	for i, k := range tk.keys {
		out[i] = TicketKeyInfo{ID: keyID(k.key), Created: k.created, Source: tk.source}
	}
	return out
}

// SetRotation sets the period of the automatic rotation (ms; Server calls
// it with tuning.tls.ticket_rotation_ms). The next rotation moves to the
// encrypting key's creation plus the new period.
func (tk *TicketKeys) SetRotation(ms int) {
	d := time.Duration(ms) * time.Millisecond
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if d <= 0 || d == tk.rotation {
		return
	}
	tk.rotation = d
	if tk.timer != nil {
		tk.timer.Stop()
		tk.schedule(max(0, d-time.Since(tk.keys[0].created)))
	}
}

// Close stops the rotation. Configurations already built keep the keys
// they have.
func (tk *TicketKeys) Close() {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.closed = true
	tk.cancel()
	if tk.timer != nil {
		tk.timer.Stop()
		tk.timer = nil
	}
}

// wire makes tc encrypt its tickets with tk's keys and accept only the
// tickets issued with the same context (package doc).
func (tk *TicketKeys) wire(tc *tls.Config, context []byte) {
	tc.WrapSession = func(cs tls.ConnectionState, ss *tls.SessionState) ([]byte, error) {
		ss.Extra = [][]byte{context}
		return tk.enc.EncryptTicket(cs, ss)
	}
	tc.UnwrapSession = func(identity []byte, cs tls.ConnectionState) (*tls.SessionState, error) {
		ss, err := tk.enc.DecryptTicket(identity, cs)
		if ss == nil || err != nil {
			return nil, err // nil, nil: not ours, or a key gone: a full handshake
		}
		if len(ss.Extra) != 1 || !bytes.Equal(ss.Extra[0], context) {
			return nil, nil // another bind's, or this bind's before its certificates or client CA changed
		}
		return ss, nil
	}
}

// rotateLocked puts a new key first, keeps KeptTicketKeys, persists them
// and schedules the next rotation. tk.mu is held (or tk not yet shared).
func (tk *TicketKeys) rotateLocked(now time.Time) error {
	var k ticketKey
	if _, err := rand.Read(k.key[:]); err != nil {
		return fmt.Errorf("ticket keys: %w", err)
	}
	k.created = now.UTC()
	list := withNewKey(k, tk.keys)
	err := tk.persist(list, SourceGenerated)
	tk.keys = list
	tk.install()
	tk.schedule(tk.rotation)
	return err
}

// rotate runs on the rotation timer's goroutine.
func (tk *TicketKeys) rotate() {
	tk.mu.Lock()
	if shared := tk.shared; shared != nil && !tk.closed {
		tk.timer = nil
		tk.mu.Unlock() // not held across the store's round trips
		tk.rotateShared(shared)
		return
	}
	defer tk.mu.Unlock()
	if tk.closed || tk.source != SourceGenerated {
		return
	}
	if err := tk.rotateLocked(time.Now()); err != nil {
		// The new key is in use; a restart before the next successful
		// write reads the previous keys, which still decrypt.
		tk.log.Error("session ticket key rotated but not saved", "err", err)
		return
	}
	tk.log.Info("session ticket key rotated", "encrypting", keyID(tk.keys[0].key), "keys", len(tk.keys))
}

// withNewKey is k followed by the newest of keys, KeptTicketKeys in all.
func withNewKey(k ticketKey, keys []ticketKey) []ticketKey {
	list := append([]ticketKey{k}, keys...)
	if len(list) > KeptTicketKeys {
		list = list[:KeptTicketKeys]
	}
	return list
}

func (tk *TicketKeys) schedule(d time.Duration) {
	if tk.closed {
		return
	}
	tk.timer = time.AfterFunc(d, tk.rotate)
}

// install hands the keys to enc (safe while handshakes run).
func (tk *TicketKeys) install() {
	raw := make([][32]byte, len(tk.keys))
	for i, k := range tk.keys {
		raw[i] = k.key
	}
	tk.enc.SetSessionTicketKeys(raw)
}

// keyFile is the JSON form of TicketKeysFile.
type keyFile struct {
	Source string        `json:"source"`
	Keys   []keyFileItem `json:"keys"`
	// Serial orders the sets of a cluster's store (Install, nextSerial);
	// absent from the state directory's file.
	Serial int64 `json:"serial,omitempty"`
}

type keyFileItem struct {
	Key     []byte    `json:"key"` // base64
	Created time.Time `json:"created"`
}

// marshalKeys is the JSON of TicketKeysFile (and of a cluster's stored set).
func marshalKeys(keys []ticketKey, source string, serial int64) ([]byte, error) {
	f := keyFile{Source: source, Keys: make([]keyFileItem, len(keys)), Serial: serial}
	for i, k := range keys {
		f.Keys[i] = keyFileItem{Key: append([]byte(nil), k.key[:]...), Created: k.created}
	}
	return json.MarshalIndent(&f, "", "  ")
}

func (tk *TicketKeys) persist(keys []ticketKey, source string) error {
	data, err := marshalKeys(keys, source, 0)
	if err != nil {
		return err
	}
	// WriteFileAtomic creates the file 0600 and renames it into place.
	if err := config.WriteFileAtomic(tk.dir, TicketKeysFile, append(data, '\n'), nil); err != nil {
		return &config.StorageError{Err: fmt.Errorf("ticket keys: %w", err)}
	}
	return nil
}

func readKeyFile(path string) ([]ticketKey, string, error) {
	fd, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if err != nil {
		return nil, "", err
	}
	defer fd.Close()
	fi, err := fd.Stat()
	if err != nil {
		return nil, "", err
	}
	if fi.Mode().Perm()&0o077 != 0 || !fi.Mode().IsRegular() {
		return nil, "", fmt.Errorf("%s holds the session ticket keys and is accessible to other users (mode %v): fix it with `chmod 600 %s`: %w",
			path, fi.Mode(), path, config.ErrCorrupt)
	}
	data, err := io.ReadAll(io.LimitReader(fd, 64<<10))
	if err != nil {
		return nil, "", err
	}
	return parseKeys(data, path, "remove it to start with generated keys")
}

// parseKeys reads the JSON of TicketKeysFile; errors name where and say
// what to do.
func parseKeys(data []byte, where, fix string) ([]ticketKey, string, error) {
	var f keyFile
	bad := func(why string) error {
		return fmt.Errorf("%s: %s (%s): %w", where, why, fix, config.ErrCorrupt)
	}
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, "", bad(err.Error())
	}
	if f.Source != SourceGenerated && f.Source != SourceAPI {
		return nil, "", bad(fmt.Sprintf("source %q is neither %q nor %q", f.Source, SourceGenerated, SourceAPI))
	}
	if len(f.Keys) == 0 || len(f.Keys) > MaxTicketKeys {
		return nil, "", bad(fmt.Sprintf("%d keys, want 1 to %d", len(f.Keys), MaxTicketKeys))
	}
	keys := make([]ticketKey, len(f.Keys))
	for i, k := range f.Keys {
		if len(k.Key) != 32 {
			return nil, "", bad(fmt.Sprintf("key %d has %d bytes, not 32", i, len(k.Key)))
		}
		keys[i] = ticketKey{key: [32]byte(k.Key), created: k.Created}
	}
	return keys, f.Source, nil
}

func keyID(k [32]byte) string {
	sum := sha256.Sum256(k[:])
	return hex.EncodeToString(sum[:4])
}
