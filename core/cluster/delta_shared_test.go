package cluster

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// A node builds a generation from the change it receives on the servers of
// the one it runs (applyDelta: config.Backend.Servers, a server of a
// published config is never written): the changed server is a new one,
// the unchanged ones are the same pointers, and the config it was built
// on, which the node's data plane and its readers still hold, encodes as
// it did — for a change, an addition and a deletion of servers.
func TestApplyDeltaLeavesTheRunningConfigAlone(t *testing.T) {
	cur := testConfig(t, 7, 50, "a", "b")
	before := docOf(t, cur)
	next := cur.CloneSharingServers()
	w := 3
	s := next.OwnServer(0, 10)
	s.Weight, s.AdminState = &w, config.AdminDrain
	next.OwnServer(1, 20).TLS = &config.ServerTLS{Verify: config.VerifyNone} // Normalize leaves it alone
	l := next.OwnServers(1)
	*l = append(append((*l)[:5:5], (*l)[6:]...), &config.Server{Name: "new", Address: "10.9.9.9", Port: 1})
	next.Normalize()
	next.Generation = cur.Generation + 1
	d, ok, err := config.MakeDelta(cur, next)
	if err != nil || !ok {
		t.Fatalf("MakeDelta: %v %v", ok, err)
	}
	b, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := applyDelta(cur, deltaNote{gen: next.Generation, base: cur.Generation, delta: b})
	if err != nil {
		t.Fatal(err)
	}
	if after := docOf(t, cur); !bytes.Equal(after, before) {
		t.Fatalf("the config the change was applied to changed:\nwas %.400s\nnow %.400s", before, after)
	}
	if g, want := docOf(t, got), docOf(t, next); !bytes.Equal(g, want) {
		t.Fatalf("the node built another document than the writer's:\n got %.400s\nwant %.400s", g, want)
	}
	ga, ca := got.Backends[0].Servers, cur.Backends[0].Servers
	if ga[10] == ca[10] || *ca[10].Weight != 100 || ca[10].AdminState != config.AdminReady {
		t.Fatal("the changed server is the running config's, written")
	}
	if ga[9] != ca[9] || ga[11] != ca[11] {
		t.Fatal("an unchanged server was copied: the configs should share it")
	}
	gb, cb := got.Backends[1].Servers, cur.Backends[1].Servers
	if len(cb) != 50 || cb[5].Name != "s5" || cb[20].TLS != nil || gb[4] != cb[4] || gb[5] != cb[6] || gb[len(gb)-1].Name != "new" {
		t.Fatalf("backend b: %d servers running, %d built", len(cb), len(gb))
	}
}
