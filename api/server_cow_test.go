package api

import (
	"net/http"
	"strings"
	"testing"
)

// A PATCH of a server's weight replaces that server in the new config with
// a changed copy (config.Backend.Servers: servers reachable from a
// published config are never written): the config that was current before
// the PATCH, and the revision of that generation, keep the old weight, and
// its other servers are the new config's, shared.
func TestServerPatchLeavesThePreviousConfigAlone(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends/web/servers", `{"name":"s2","address":"127.0.0.1","port":8082,"weight":3}`)
	before := f.store.Current()
	f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7,"admin_state":"drain"}`)
	after := f.store.Current()
	if after.Generation != before.Generation+1 {
		t.Fatalf("generation %d after %d", after.Generation, before.Generation)
	}
	old, cur := before.Backends[0].Servers, after.Backends[0].Servers
	if *old[0].Weight != 100 || old[0].AdminState != "ready" {
		t.Fatalf("the previous Current's server was written: weight %d, admin_state %s", *old[0].Weight, old[0].AdminState)
	}
	if *cur[0].Weight != 7 || cur[0].AdminState != "drain" || cur[0] == old[0] {
		t.Fatalf("the new Current's server: weight %d, admin_state %s, shared %v", *cur[0].Weight, cur[0].AdminState, cur[0] == old[0])
	}
	if cur[1] != old[1] {
		t.Fatal("the unchanged server was copied: the configs should share it")
	}
	rev, err := f.store.Revision(before.Generation)
	if err != nil {
		t.Fatal(err)
	}
	if w := *rev.Backends[0].Servers[0].Weight; w != 100 {
		t.Fatalf("revision %d has weight %d", before.Generation, w)
	}
	// the answer of the PATCH and a GET agree with the new config
	if got := f.must(t, http.StatusOK, "GET", "/api/v1/backends/web/servers/s1", "").Body.String(); !strings.Contains(got, `"weight":7`) {
		t.Fatalf("GET after PATCH: %s", got)
	}
}
