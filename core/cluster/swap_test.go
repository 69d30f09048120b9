package cluster

import (
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
)

// A commit attempt whose answer was lost (a leader crash) may have applied;
// the next attempt reads P/current and the revision it wrote to tell. When
// another node committed on it in between, P/current names that node's
// generation, but the revision key still holds exactly what this write
// put: it applied. Taken for a lost race, the write would be built and
// committed again (twice in the history; a create answered 409 although
// it landed).
func TestSwapAppliedWhenAnotherWriteFollowedIt(t *testing.T) {
	s := &EtcdStorage{}
	ours := []byte("revision 8 as this write encoded it")
	w := swap{prev: 7, next: 8, proof: "/p/revisions/8", proofVal: ours}
	proof := []*mvccpb.KeyValue{{Key: []byte(w.proof), Value: ours, ModRevision: 100}}
	if !s.applied(w, currentKey{gen: 8, mod: 100}, proof) {
		t.Error("P/current at this write's generation, revision ours: not applied")
	}
	if !s.applied(w, currentKey{gen: 9, mod: 105}, proof) {
		t.Error("another node committed 9 on this write's 8 (revision 8 ours): taken for a lost race")
	}
	theirs := []*mvccpb.KeyValue{{Key: []byte(w.proof), Value: []byte("another node's 8"), ModRevision: 101}}
	if s.applied(w, currentKey{gen: 9, mod: 105}, theirs) || s.applied(w, currentKey{gen: 8, mod: 101}, theirs) {
		t.Error("revision 8 is another node's: taken as applied")
	}
	if s.applied(w, currentKey{gen: 7, mod: 90}, nil) {
		t.Error("revision 8 absent: taken as applied")
	}
	// A revert (no proof value: the revision removed) needs P/current at
	// its generation.
	rv := swap{prev: 8, next: 7, proof: "/p/revisions/8"}
	if !s.applied(rv, currentKey{gen: 7, mod: 110}, nil) || s.applied(rv, currentKey{gen: 9, mod: 110}, nil) {
		t.Error("revert: applied only when P/current is back at 7 and revision 8 gone")
	}
}
