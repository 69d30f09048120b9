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
	shared := tk.shared
	doc, err := marshalKeys(tk.keys, tk.source)
	tk.mu.Unlock()
	if shared == nil || err != nil {
		return err
	}
	err = shared.Edit(ctx, func(old []byte) ([]byte, error) {
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

// Install makes the set doc (the JSON of TicketKeysFile, as stored at
// revision rev) the keys of tk, unless tk has installed a set of this
// revision or a later one (a set read before the last write and handed
// over after it): written to the state directory (the cache a restart
// reads while the store is unreachable) and used at once by every
// configuration. A generated set is rotated next at its newest key's
// creation plus the rotation period (that key's creation is the set's
// last rotation, whichever node made it). A set that does not parse is
// refused, the keys unchanged.
func (tk *TicketKeys) Install(doc []byte, rev int64) error {
	keys, source, err := parseKeys(doc, "the stored session ticket keys", "set them again with PUT /api/v1/tls/ticket-keys")
	if err != nil {
		return err
	}
	tk.mu.Lock()
	defer tk.mu.Unlock()
	if tk.closed {
		return nil
	}
	if rev > tk.rev {
		tk.rev = rev
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
	rotation, local, ctx := tk.rotation, tk.keys, tk.ctx
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
		return marshalKeys(withNewKey(k, keys), SourceGenerated)
	})
	rotated := err == nil
	if rotated || errors.Is(err, errNotDue) {
		// Ours or the winner's: installed from the store, with its revision.
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
	doc, rev, err := shared.Read(ctx)
	switch {
	case err != nil:
		return err
	case doc == nil:
		return errors.New("ticket keys: the store holds none")
	}
	return tk.Install(doc, rev)
}
