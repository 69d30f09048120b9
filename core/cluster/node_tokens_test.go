package cluster

import (
	"slices"
	"testing"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The probe reads P/tokens when its mod revision changed, while the watch
// may still hold older events (the loop's select takes the tick first):
// those must not hand an older document to OnTokens after the newer one
// (a revoked token would be accepted again until the watch catches up).
func TestTokensWatchEventsOlderThanARead(t *testing.T) {
	var got []string
	n := &Node{o: NodeOptions{OnTokens: func(doc []byte) {
		if doc == nil {
			got = append(got, "<deleted>")
		} else {
			got = append(got, string(doc))
		}
	}}}
	put := func(v string, mod int64) *clientv3.Event {
		return &clientv3.Event{Type: clientv3.EventTypePut, Kv: &mvccpb.KeyValue{Value: []byte(v), ModRevision: mod}}
	}
	// The probe read v3 (mod 30) at revision 31; the watch brings v2 and
	// v3, then v4.
	n.tokensRead([]byte("v3"), 30, 31)
	n.tokensEvent(put("v2", 20))
	n.tokensEvent(put("v3", 30))
	n.tokensEvent(put("v4", 40))
	// A read that finds the key deleted (at revision 50): the put of 40,
	// delivered late, does not bring it back.
	n.tokensRead(nil, 0, 50)
	n.tokensEvent(put("v4", 40))
	n.tokensEvent(&clientv3.Event{Type: clientv3.EventTypeDelete, Kv: &mvccpb.KeyValue{ModRevision: 45}})
	n.tokensEvent(put("v5", 60))
	if want := []string{"v3", "v4", "<deleted>", "v5"}; !slices.Equal(got, want) {
		t.Errorf("OnTokens got %q, want %q", got, want)
	}
}
