package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/spliced-proxy/spliced/core/config"
)

// A write is carried to the nodes as its change beside the document: the
// Txn that commits generation N (the revision, whole, as before) puts in
// P/current, beside "generation", the config.Delta that makes N from the
// document of generation N-1 and the mod revision of P/current that
// document was current at ("base", "base_rev", "delta"). The Txn compares
// exactly that mod revision, so the delta applies to exactly that
// document. A node whose Store holds it (the generation and the mod
// revision it was read, written or built at: EtcdStorage.doc) builds N
// from it and the delta taken from the watch event itself (no read of
// etcd, no decoding and validation of the whole document); any other
// node (behind: it missed a write, restarted, or its watch was compacted)
// loads the document as before, and so does a node that cannot use the
// delta (damaged, not valid once applied: counted as refused).

// maxDeltaBytes bounds the change carried in P/current: every node reads
// P/current each second (the probe) and with each list of the nodes; a
// larger change (a document replaced, a backend of thousands of servers
// added) is carried by the document alone, which the nodes then load.
const maxDeltaBytes = 128 << 10

// errDeltaBase is a change whose base generation is the Store's but not
// the document the Store holds (another mod revision of P/current).
var errDeltaBase = errors.New("the change was made on another document of its base generation")

// CommitDelta is Commit of next, built on cur (the Store's current): the
// revision holds the whole document as Commit's does, and P/current, beside
// the generation, the change from cur when it can be expressed as a
// config.Delta of at most maxDeltaBytes (config.Store calls it for every
// write).
func (s *EtcdStorage) CommitDelta(ctx context.Context, cur, next *config.Config, info config.RevisionInfo, certs map[string][]byte) error {
	if info.Generation != cur.Generation+1 || next.Generation != info.Generation {
		return fmt.Errorf("cluster store: commit of generation %d on %d", info.Generation, cur.Generation)
	}
	doc, err := s.docs.encode(next) // json.Marshal(next), the unchanged servers' JSON reused
	if err != nil {
		return fmt.Errorf("cluster store: encode generation %d: %w", info.Generation, err)
	}
	delta := encodeDelta(cur, next)
	if err := s.commit(ctx, cur.Generation, info, doc, certs, delta); err != nil {
		return err
	}
	if delta != nil {
		s.noteChange(info.Generation, cur.Generation, delta)
	}
	return nil
}

// encodeDelta is the JSON of the change from cur to next, nil when there
// is none to carry (cur is no document of the store, the change is not a
// Delta, or is larger than maxDeltaBytes).
func encodeDelta(cur, next *config.Config) []byte {
	if cur.Generation <= 0 {
		return nil
	}
	d, ok, err := config.MakeDelta(cur, next)
	if err != nil || !ok {
		return nil
	}
	b, err := json.Marshal(d)
	if err != nil || len(b) > maxDeltaBytes {
		return nil
	}
	return b
}

// currentValue is the value of P/current for generation gen; with the
// change delta from generation base when the document this storage holds
// is base's at mod revision baseMod (the one the Txn compares): else the
// change would apply to another document than the one it was made on.
func (s *EtcdStorage) currentValue(gen, base, baseMod int64, delta []byte) string {
	s.knownMu.Lock()
	held := s.doc
	s.knownMu.Unlock()
	c := current{Generation: gen}
	if delta != nil && base > 0 && baseMod > 0 && held == (currentKey{gen: base, mod: baseMod}) {
		c.Base, c.BaseRev, c.Delta = base, baseMod, delta
	}
	b, _ := json.Marshal(c)
	return string(b)
}

// loaded records that Load returned the document of P/current k. The Store
// adopts what Load returns only when it is newer than its own: a newer
// generation is the one it holds from now on; the same generation at
// another mod revision (a document put again under that number) makes
// the one it holds unknown; an older one changes nothing.
func (s *EtcdStorage) loaded(k currentKey) {
	s.knownMu.Lock()
	defer s.knownMu.Unlock()
	switch {
	case k.gen > s.doc.gen:
		s.doc = k
	case k.gen == s.doc.gen && k.mod != s.doc.mod:
		s.doc = currentKey{}
	}
}

// wentBack takes P/current as read at mod revision mod (gen 0, mod 0:
// absent). Absent, or written after the document the Store holds (a
// higher mod revision) with an older generation, the store went back (etcd
// wiped, or restored from an older snapshot, or a value put by hand): its
// history is another one from there, whose mod revisions may come again,
// so the Store's document is no longer known by them, and the next
// generation is loaded whole. (An older generation at an older mod
// revision is only a read answered late.)
func (s *EtcdStorage) wentBack(k currentKey) {
	s.knownMu.Lock()
	if k.gen == 0 || k.gen < s.doc.gen && k.mod > s.doc.mod {
		s.doc = currentKey{}
	}
	s.knownMu.Unlock()
}

// deltaNote is the change P/current carried at mod revision mod: the
// generation it makes and its base.
type deltaNote struct {
	gen, mod      int64
	base, baseRev int64
	delta         json.RawMessage
}

// advancer is a Store that adopts a generation built from its current
// one (config.Store.Advance).
type advancer interface {
	Advance(build func(cur *config.Config) (*config.Config, error)) (*config.Config, error)
}

// adoptDelta makes generation d.gen the Store's current, built from the
// document it holds and the change d, when that document is d's base:
// done. The Store holding another generation (the node is behind, or
// ahead) is not done, without error: the node loads the document. The
// base generation but another document of it (errDeltaBase), or a change
// that does not apply or gives a document that is not valid: an error;
// the node loads the document too.
func (s *EtcdStorage) adoptDelta(store advancer, d deltaNote) (done bool, err error) {
	_, err = store.Advance(func(cur *config.Config) (*config.Config, error) {
		if cur == nil || cur.Generation != d.base {
			return nil, nil
		}
		s.knownMu.Lock()
		held := s.doc
		s.knownMu.Unlock()
		if held != (currentKey{gen: d.base, mod: d.baseRev}) {
			return nil, errDeltaBase
		}
		next, err := applyDelta(cur, d)
		if err != nil {
			return nil, err
		}
		s.knownMu.Lock()
		s.doc = currentKey{gen: d.gen, mod: d.mod}
		s.knownMu.Unlock()
		s.noteChange(d.gen, d.base, d.delta)
		done = true
		return next, nil
	})
	return done, err
}

// applyDelta builds generation d.gen from cur, the document of its base,
// as Load builds a document from the stored one (decoded strictly,
// migrated, normalized, validated with an empty Env), but for the servers
// that did not change, which cur holds valid (config.ValidateChange).
func applyDelta(cur *config.Config, d deltaNote) (*config.Config, error) {
	if d.gen <= d.base {
		return nil, fmt.Errorf("a change to generation %d from %d", d.gen, d.base)
	}
	var delta config.Delta
	if err := config.DecodeBytes(d.delta, &delta); err != nil {
		return nil, fmt.Errorf("damaged change: %v", err)
	}
	// The servers' lists the change does not touch stay cur's (Apply
	// replaces the lists it changes): neither copied nor, being the
	// same lists, compared again by the validation and the plan.
	next := cur.CloneSharingServers()
	if err := delta.Apply(next); err != nil {
		return nil, err
	}
	if err := next.Migrate(); err != nil {
		return nil, err
	}
	next.Normalize()
	next.Generation = d.gen
	if err := config.ValidateChange(next, config.Env{}, cur); err != nil {
		return nil, err
	}
	return next, nil
}
