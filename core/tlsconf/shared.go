package tlsconf

import (
	"context"
	"crypto/rand"
	"errors"
	"time"
)

// Keys shared by the nodes of a cluster (package doc, "Several nodes").

// errPresent stops Seed when the store holds a set already.
var errPresent = errors.New("ticket keys: the store holds a set")

// Share makes tk a node of a cluster whose ticket keys are kept in a
// store (edit): from now on a rotation is made in the store, conditional
// on the set stored (the first node whose timer fires rotates it, the
// others install its set), Set writes the store, and the store's sets
// reach tk through Install. While the store cannot be reached, tk keeps
// its keys and does not rotate (a key made here would not be shared); it
// tries again within sharedRetry.
func (tk *TicketKeys) Share(edit EditFunc) {
	tk.mu.Lock()
	defer tk.mu.Unlock()
	tk.shared = edit
}

// Seed stores tk's keys when the store holds none (a conditional create):
// the first node of a cluster brings its keys. A set stored already is
// left as is (Install it).
func (tk *TicketKeys) Seed(ctx context.Context) error {
	tk.mu.Lock()
	shared := tk.shared
	doc, err := marshalKeys(tk.keys, tk.source)
	tk.mu.Unlock()
	if shared == nil || err != nil {
		return err
	}
	err = shared(ctx, func(old []byte) ([]byte, error) {
		if old != nil {
			return nil, errPresent
		}
		return doc, nil
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
// keys of tk: written to the state directory (the cache a restart reads
// while the store is unreachable) and used at once by every
// configuration. A generated set is rotated next at its newest key's
// creation plus the rotation period (that key's creation is the set's
// last rotation, whichever node made it). A set that does not parse is
// refused, the keys unchanged.
func (tk *TicketKeys) Install(doc []byte) error {
	keys, source, err := parseKeys(doc, "the stored session ticket keys", "set them again with PUT /api/v1/tls/ticket-keys")
	if err != nil {
		return err
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.closed {
		return nil
	}
	if source != tk.source || !sameKeys(keys, tk.keys) {
		tk.keys, tk.source = keys, source
		tk.install()
		if err := tk.persist(keys, source); err != nil {
			tk.log.Error("session ticket keys installed from the store but not saved in the state directory", "err", err)
		}
		tk.log.Info("session ticket keys installed from the store", "source", source, "keys", len(keys), "encrypting", keyID(keys[0].key))
	}
	if tk.timer != nil {
		tk.timer.Stop()
		tk.timer = nil
	}
	if source == SourceGenerated {
		tk.schedule(max(0, time.Until(keys[0].created.Add(tk.rotation))))
	}
	return nil
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
func (tk *TicketKeys) rotateShared(shared EditFunc) {
	tk.mu.Lock()
	rotation, local, ctx := tk.rotation, tk.keys, tk.ctx
	tk.mu.Unlock()
	now := time.Now()
	var stored []byte
	err := shared(ctx, func(old []byte) ([]byte, error) {
		keys := local
		if old != nil {
			var src string
			var err error
			if keys, src, err = parseKeys(old, "the stored session ticket keys", "set them again with PUT /api/v1/tls/ticket-keys"); err != nil {
				return nil, err
			}
			if src != SourceGenerated || now.Before(keys[0].created.Add(rotation)) {
				stored = old
				return nil, errNotDue
			}
		}
		var k ticketKey
		if _, err := rand.Read(k.key[:]); err != nil {
			return nil, err
		}
		k.created = now.UTC()
		doc, err := marshalKeys(withNewKey(k, keys), SourceGenerated)
		stored = doc
		return doc, err
	})
	if err == nil || errors.Is(err, errNotDue) {
		tk.mu.Lock()
		tk.failedMsg = ""
		tk.mu.Unlock()
		if ierr := tk.Install(stored); ierr != nil {
			tk.log.Error("the stored session ticket keys cannot be used: keeping the current ones", "err", ierr)
		} else if err == nil {
			tk.log.Info("session ticket key rotated for the cluster", "encrypting", tk.Info()[0].ID)
		}
		return
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if msg := err.Error(); msg != tk.failedMsg {
		tk.failedMsg = msg
		tk.log.Warn("session ticket keys not rotated: the store cannot be reached; the current keys stay in use until it answers", "err", err)
	}
	if tk.timer == nil && tk.source == SourceGenerated { // else an Install or Set meanwhile decided
		tk.schedule(min(tk.rotation, sharedRetry))
	}
}
