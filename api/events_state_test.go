package api

import (
	"encoding/json"
	"testing"

	"github.com/spliced-proxy/spliced/core/stats"
)

// A stats event names a server's health and admin state apart: a drained
// server that is down is "up": false and "admin_state": "drain", and its
// "state" says its health first: "down" (stats.ServerState).
func TestStatsEventServerHealthAndAdminState(t *testing.T) {
	snap := stats.Snapshot{Backends: []stats.Backend{{Name: "web", State: "down", Servers: []stats.Server{
		{Name: "down-drained", State: stats.ServerState(false, "drain"), Up: false, AdminState: "drain"},
		{Name: "up-maint", State: stats.ServerState(true, "maint"), Up: true, AdminState: "maint"},
		{Name: "down", State: "down", Up: false, AdminState: "ready"},
	}}}}
	b, err := json.Marshal(statsEvent(snap))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Backends []map[string]any `json:"backends"`
		Servers  []map[string]any `json:"servers"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		name  string
		up    bool
		admin string
		state string
	}{{"web/down-drained", false, "drain", "down"}, {"web/up-maint", true, "maint", "maint"}, {"web/down", false, "ready", "down"}}
	if len(ev.Servers) != len(want) {
		t.Fatalf("servers %v", ev.Servers)
	}
	for i, w := range want {
		s := ev.Servers[i]
		if s["name"] != w.name || s["up"] != w.up || s["admin_state"] != w.admin || s["state"] != w.state {
			t.Errorf("server %d = %v, want name %s up %v admin_state %s state %s", i, s, w.name, w.up, w.admin, w.state)
		}
	}
	if _, ok := ev.Backends[0]["up"]; ok {
		t.Errorf("a backend item has up: %v", ev.Backends[0])
	}
}

// A stats event carries a frontend's TLS and HTTP/2 counts as
// /api/v1/stats does (the web UI's live frontend card reads them), and
// leaves them out where /api/v1/stats has none.
func TestStatsEventFrontendTLSAndH2(t *testing.T) {
	snap := stats.Snapshot{Frontends: []stats.Frontend{
		{Name: "h2", TLS: &stats.TLSCounts{Full: 2, Resumed: 1}, H2: &stats.H2Counts{ConnCur: 1, StreamsTotal: 7, StreamsRefused: 1}},
		{Name: "plain"},
	}}
	b, err := json.Marshal(statsEvent(snap))
	if err != nil {
		t.Fatal(err)
	}
	var ev struct {
		Frontends []struct {
			Name string           `json:"name"`
			TLS  *stats.TLSCounts `json:"tls"`
			H2   *stats.H2Counts  `json:"h2"`
		} `json:"frontends"`
	}
	if err := json.Unmarshal(b, &ev); err != nil {
		t.Fatal(err)
	}
	f := ev.Frontends
	if len(f) != 2 || f[0].TLS == nil || *f[0].TLS != *snap.Frontends[0].TLS || f[0].H2 == nil || *f[0].H2 != *snap.Frontends[0].H2 {
		t.Fatalf("frontend h2: %+v", f)
	}
	if f[1].TLS != nil || f[1].H2 != nil {
		t.Fatalf("frontend plain has tls or h2: %+v", f[1])
	}
}
