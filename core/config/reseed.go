package config

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// ReseedResult is what a reseed did (or, dry run, would do).
type ReseedResult struct {
	// Generation is the generation the store holds now (dry run: would
	// hold): this node's document as max(store's, node's)+1.
	Generation int64 `json:"generation" example:"58"`
	// StoreGeneration is what the store held before (0: no document).
	StoreGeneration int64 `json:"store_generation" example:"40"`
	// NodeGeneration is the generation of this node's document.
	NodeGeneration int64 `json:"node_generation" example:"57"`
	// Summary is the new revision's summary.
	Summary string `json:"summary" example:"reseeded by node edge-1 from its generation 57 (the store held generation 40)"`
	// Config is the document committed (dry run: that would be). Immutable.
	Config *Config `json:"-"`
}

// Reseed is the way out of a storage that went back (ErrStoreBehind: etcd
// restored from an older snapshot, or wiped) while the nodes kept running
// their newer generation: the Store never adopts an older generation, so
// no write could commit again. It commits Current, unchanged, as
// generation max(store's, Current's)+1 with Storage.Reseed, conditional on
// the storage's current as read (another writer first: an error wrapping
// ErrRace, nothing written). Every node then adopts it, being newer than
// what it runs. The certificates' bundles are committed with it (a wiped
// store lost them).
//
// A storage that is not behind Current (it holds the same generation or a
// newer one) is refused with an error wrapping ErrNotBehind: a normal
// write, or a restore, changes it. A storage that cannot be reached is
// refused with its Health. o.DryRun reads and answers, writes nothing;
// o.Actor and o.Node go to the revision's header; o.Apply is not called (a
// cluster node applies the new generation as any other it adopts).
func (s *Store) Reseed(ctx context.Context, o UpdateOptions) (*ReseedResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	stored, _, err := s.st.Load(ctx)
	if err != nil {
		return nil, err
	}
	// Load answers the node's cache while etcd is unreachable: that is
	// not what the store holds.
	if err := s.st.Health(); err != nil {
		return nil, err
	}
	cur := s.cur.Load()
	res := &ReseedResult{NodeGeneration: cur.Generation}
	held := "no document"
	if stored != nil {
		res.StoreGeneration = stored.Generation
		held = fmt.Sprintf("generation %d", stored.Generation)
	}
	if res.StoreGeneration >= cur.Generation {
		return nil, fmt.Errorf("%w: it holds %s, this node generation %d: nothing to recover "+
			"(a write, or the restore of a kept revision, changes what it holds)", ErrNotBehind, held, cur.Generation)
	}
	next := cur.Clone()
	next.Generation = max(res.StoreGeneration, cur.Generation) + 1
	res.Generation, res.Config = next.Generation, next
	by := "reseeded"
	if o.Node != "" {
		by += " by node " + o.Node
	}
	res.Summary = fmt.Sprintf("%s from its generation %d (the store held %s)", by, cur.Generation, held)
	certs := make(map[string][]byte, len(next.Certificates))
	for i := range next.Certificates {
		for _, sum := range next.Certificates[i].Files() {
			b, err := s.st.CertificateBundle(ctx, sum)
			if err != nil {
				return nil, fmt.Errorf("config store: reseed: certificate %q: %w", next.Certificates[i].Name, err)
			}
			certs[sum] = b
		}
	}
	if o.DryRun {
		return res, nil
	}
	doc, err := json.Marshal(next)
	if err != nil {
		return nil, fmt.Errorf("config store: encode generation %d: %w", next.Generation, err)
	}
	info := RevisionInfo{Generation: next.Generation, Time: time.Now(), Summary: res.Summary, Actor: o.Actor, Node: o.Node}
	if err := s.st.Reseed(ctx, res.StoreGeneration, info, doc, certs); err != nil {
		return nil, err
	}
	s.cur.Store(next)
	s.log.Warn("configuration store reseeded with this node's document", "generation", next.Generation,
		"node_generation", cur.Generation, "store_generation", res.StoreGeneration, "actor", o.Actor)
	return res, nil
}
