package tlsconf

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"time"
)

// Keys shared by the nodes of a cluster (package doc, "Several nodes").

// errPresent stops Seed when the store holds a set already.
var errPresent = errors.New("ticket keys: the store holds a set")

// Share makes tk a node of a cluster whose ticket keys are kept in a
// store: from now on a rotation is made in the store, conditional
// on the set stored (the first node whose timer fires rotates it, the
// others install its set), Set writes the store, and the store's sets
// reach tk through Install. While the store cannot be reached, tk keeps
// its keys and does not rotate (a key made here would not be shared); it
// tries again within sharedRetry.
func (tk *TicketKeys) Share(s KeyStore) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.shared = s
}

// Seed stores tk's keys when the store holds none (a conditional create):
// the first node of a cluster brings its keys. A set stored already is
// left as is (Install it).
func (tk *TicketKeys) Seed(ctx context.Context) error {
	tk.mu.Lock()
	shared, keys, source, installed := tk.shared, tk.keys, tk.source, tk.serial
	tk.mu.Unlock()
	if shared == nil {
		return nil
	}
	err := shared.Edit(ctx, func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, errPresent
		}
		return marshalKeys(keys, source, nextSerial(nil, installed))
	})
	switch {
	case errors.Is(err, errPresent):
		return nil
	case err == nil:
		tk.log.Info("the store had no session ticket keys: seeded with this node's")
	}
	return err
}

// Install makes the set doc (the JSON of TicketKeysFile, as stored) the
// keys of tk, unless tk has installed a set of this serial or a later one
// (a set read before the last write and handed over after it): written
// to the state directory (the cache a restart reads while the store is
// unreachable) and used at once by every configuration. The first set
// installed after the start is taken whatever its serial (the store's,
// not the copy's). A generated set is rotated next at its newest key's
// creation plus the rotation period (that key's creation is the set's
// last rotation, whichever node made it). A set that does not parse is
// refused, the keys unchanged.
//
// Sets are ordered by their serial (nextSerial), not by the store's
// revision: etcd restored from an older snapshot counts its revisions
// from the snapshot's, so the sets written after a restore would have
// revisions lower than the one installed, and no node would install
// them. The serial is in the set, written by the node that writes it.
func (tk *TicketKeys) Install(doc []byte) error {
	keys, source, err := parseKeys(doc, "the stored session ticket keys", "set them again with PUT /api/v1/tls/ticket-keys")
	if err != nil {
		return err
	}
	serial := serialOf(doc)
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.closed {
		return nil
	}
	if serial > tk.serial || tk.serial < 0 {
		tk.serial = serial
		if source != tk.source || !sameKeys(keys, tk.keys) {
			tk.keys, tk.source = keys, source
			tk.install()
			if err := tk.persist(keys, source); err != nil {
				tk.log.Error("session ticket keys installed from the store but not saved in the state directory", "err", err)
			}
			tk.log.Info("session ticket keys installed from the store", "source", source, "keys", len(keys), "encrypting", keyID(keys[0].key))
		}
	}
	// The next rotation, from the keys in use.
	if tk.timer != nil {
		tk.timer.Stop()
		tk.timer = nil
	}
	if tk.source == SourceGenerated {
		tk.schedule(max(0, time.Until(tk.keys[0].created.Add(tk.rotation))))
	}
	return nil
}

// nextSerial is the serial of a set replacing old (the stored set, nil
// when absent) on a node that installed the set of serial installed: one
// more than both, and at least the time in ns. One more than old's: the
// store's edits are conditional, so each set stored has a higher serial
// than the one it replaced, and a set handed over late (older) is
// ignored; of two nodes rotating at once one writes, the other's edit
// runs again on its set (not due: it installs it); two Sets at once both
// write, the second with the higher serial. One more than installed's,
// and the time: after a restore the store holds an older set with a
// lower serial, but the next set written is above the one the nodes
// installed (the writer's, and any written before the restore by a node
// whose clock was not ahead by more than the time since), so every node
// installs it.
func nextSerial(old []byte, installed int64) int64 {
	return max(serialOf(old)+1, installed+1, time.Now().UnixNano())
}

// serialOf is the serial of a stored set (0 when it has none or does not
// parse).
func serialOf(doc []byte) int64 {
	var f struct {
		Serial int64 `json:"serial"`
	}
	if doc == nil || json.Unmarshal(doc, &f) != nil {
		return 0
	}
	return f.Serial
}

func (tk *TicketKeys) installedSerial() int64 {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	return tk.serial
}

func sameKeys(a, b []ticketKey) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].key != b[i].key || !a[i].created.Equal(b[i].created) {
			return false
		}
	}
	return true
}

// rotateShared rotates the stored set if no other node did for this
// period, then installs the stored set (its own or the winner's). When
// the store does not answer, the keys stay and the rotation is tried
// again later.
func (tk *TicketKeys) rotateShared(shared KeyStore) {
	tk.mu.Lock()
	rotation, local, ctx, installed := tk.rotation, tk.keys, tk.ctx, tk.serial
	tk.mu.Unlock()
	now := time.Now()
	err := shared.Edit(ctx, func(old []byte) ([]byte, error) {
		keys := local
		if old != nil {
			var src string
			var err error
			if keys, src, err = parseKeys(old, "the stored session ticket keys", "set them again with PUT /api/v1/tls/ticket-keys"); err != nil {
				return nil, err
			}
			if src != SourceGenerated || now.Before(keys[0].created.Add(rotation)) {
				return nil, errNotDue
			}
		}
		var k ticketKey
		if _, err := rand.Read(k.key[:]); err != nil {
			return nil, err
		}
		k.created = now.UTC()
		return marshalKeys(withNewKey(k, keys), SourceGenerated, nextSerial(old, installed))
	})
	rotated := err == nil
	if rotated || errors.Is(err, errNotDue) {
		// Ours or the winner's: installed from the store, with its serial.
		if err = tk.reload(ctx, shared); err == nil {
			tk.mu.Lock()
			tk.failedMsg = ""
			tk.mu.Unlock()
			if rotated {
				tk.log.Info("session ticket key rotated for the cluster", "encrypting", tk.Info()[0].ID)
			}
			return
		}
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.closed {
		return // Close ended the edit: not a failure of the store
	}
	if msg := err.Error(); msg != tk.failedMsg {
		tk.failedMsg = msg
		tk.log.Warn("session ticket keys not rotated: the store cannot be reached, or holds a set that cannot be used; the current keys stay in use", "err", err)
	}
	if tk.timer == nil && tk.source == SourceGenerated { // else an Install or Set meanwhile decided
		tk.schedule(min(tk.rotation, sharedRetry))
	}
}

// reload installs the set the store holds now.
func (tk *TicketKeys) reload(ctx context.Context, shared KeyStore) error {
	doc, err := shared.Read(ctx)
	switch {
	case err != nil:
		return err
	case doc == nil:
		return errors.New("ticket keys: the store holds none")
	}
	return tk.Install(doc)
}
