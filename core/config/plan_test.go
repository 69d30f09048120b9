package config

import (
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
	"testing"
)

func TestDiff(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		want   []PlanItem
	}{
		{name: "identical configs give an empty plan", mutate: func(c *Config) {}, want: []PlanItem{}},
		{name: "generation is not a change", mutate: func(c *Config) { c.Generation = 99 }, want: []PlanItem{}},
		{name: "nil and empty threads are the same", mutate: func(c *Config) { c.Frontends[1].Binds[0].Threads = []int{} }, want: []PlanItem{}},
		{name: "create backend", mutate: func(c *Config) {
			c.Backends = append(c.Backends, Backend{Name: "new", Servers: []*Server{{Name: "s", Address: "::1", Port: 1}}})
			c.Normalize()
		}, want: []PlanItem{{Object: "backend/new", Op: OpCreate, Apply: ApplyInPlace}}},
		{name: "delete backend", mutate: func(c *Config) { c.Backends = c.Backends[:2] },
			want: []PlanItem{{Object: "backend/db", Op: OpDelete, Apply: ApplyInPlace}}},
		{name: "backend fields", mutate: func(c *Config) {
			c.Backends[0].Balance = BalanceLeastConn
			c.Backends[0].Timeouts.ConnectMs = 1
			c.Backends[0].HealthCheck.Rise = 5
		}, want: []PlanItem{{Object: "backend/web", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"balance", "health_check", "timeouts"}}}},
		{name: "health check removed", mutate: func(c *Config) { c.Backends[2].HealthCheck = nil },
			want: []PlanItem{{Object: "backend/db", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"health_check"}}}},
		{name: "server create update delete", mutate: func(c *Config) {
			w := 5
			c.Backends[0].Servers[0].Weight = &w
			c.Backends[0].Servers[0].AdminState = AdminDrain
			c.Backends[0].Servers = append(c.Backends[0].Servers[:1], &Server{Name: "s3", Address: "::1", Port: 3})
			c.Normalize()
		}, want: []PlanItem{
			{Object: "backend/web/server/s1", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"weight", "admin_state"}},
			{Object: "backend/web/server/s3", Op: OpCreate, Apply: ApplyInPlace},
			{Object: "backend/web/server/s2", Op: OpDelete, Apply: ApplyInPlace},
		}},
		{name: "server rename is delete and create", mutate: func(c *Config) { c.Backends[2].Servers[0].Name = "pg-2" },
			want: []PlanItem{
				{Object: "backend/db/server/pg-2", Op: OpCreate, Apply: ApplyInPlace},
				{Object: "backend/db/server/pg-1", Op: OpDelete, Apply: ApplyInPlace},
			}},
		{name: "route change is a frontend update", mutate: func(c *Config) { c.Frontends[0].Routes[0].PathPrefix = "/v2" },
			want: []PlanItem{{Object: "frontend/public", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"routes"}}}},
		{name: "frontend fields", mutate: func(c *Config) { c.Frontends[0].Maxconn = 20000; c.Frontends[0].Splice = SpliceOn },
			want: []PlanItem{{Object: "frontend/public", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"maxconn", "splice"}}}},
		{name: "create frontend with binds rebinds", mutate: func(c *Config) {
			c.Frontends = append(c.Frontends, Frontend{Name: "f3", Binds: []Bind{{Name: "b", Address: "*", Port: 1}}})
			c.Normalize()
		}, want: []PlanItem{{Object: "frontend/f3", Op: OpCreate, Apply: ApplyRebind}}},
		{name: "create frontend without binds is in place", mutate: func(c *Config) {
			c.Frontends = append(c.Frontends, Frontend{Name: "f3"})
			c.Normalize()
		}, want: []PlanItem{{Object: "frontend/f3", Op: OpCreate, Apply: ApplyInPlace}}},
		{name: "delete frontend rebinds", mutate: func(c *Config) { c.Frontends = c.Frontends[1:] },
			want: []PlanItem{{Object: "frontend/public", Op: OpDelete, Apply: ApplyRebind}}},
		{name: "bind create", mutate: func(c *Config) {
			c.Frontends[1].Binds = append(c.Frontends[1].Binds, Bind{Name: "b2", Address: "::", Port: 5432})
		}, want: []PlanItem{{Object: "frontend/db_front/bind/b2", Op: OpCreate, Apply: ApplyRebind}}},
		{name: "bind delete", mutate: func(c *Config) { c.Frontends[0].Binds = c.Frontends[0].Binds[:1] },
			want: []PlanItem{{Object: "frontend/public/bind/b2", Op: OpDelete, Apply: ApplyRebind}}},
		{name: "bind port change rebinds", mutate: func(c *Config) { c.Frontends[0].Binds[0].Port = 9090 },
			want: []PlanItem{{Object: "frontend/public/bind/b1", Op: OpUpdate, Apply: ApplyRebind, Fields: []string{"port"}}}},
		{name: "bind address shards backlog threads rebind", mutate: func(c *Config) {
			b := &c.Frontends[0].Binds[1]
			b.Address, b.Shards, b.Backlog, b.Threads = "::2", 2, 10, []int{1}
		}, want: []PlanItem{{Object: "frontend/public/bind/b2", Op: OpUpdate, Apply: ApplyRebind,
			Fields: []string{"address", "shards", "backlog", "threads"}}}},
		{name: "frontend update precedes its bind items", mutate: func(c *Config) {
			c.Frontends[0].Maxconn = 1
			c.Frontends[0].Binds[0].Port = 1
		}, want: []PlanItem{
			{Object: "frontend/public", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"maxconn"}},
			{Object: "frontend/public/bind/b1", Op: OpUpdate, Apply: ApplyRebind, Fields: []string{"port"}},
		}},
		{name: "servers reordered", mutate: func(c *Config) {
			s := c.Backends[0].Servers
			s[0], s[1] = s[1], s[0]
		}, want: []PlanItem{{Object: "backend/web", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"servers"}}}},
		{name: "servers reordered with a backend field", mutate: func(c *Config) {
			s := c.Backends[0].Servers
			s[0], s[1] = s[1], s[0]
			c.Backends[0].Balance = BalanceLeastConn
		}, want: []PlanItem{{Object: "backend/web", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"balance", "servers"}}}},
		{name: "servers reordered precede a server's update", mutate: func(c *Config) {
			s := c.Backends[0].Servers
			s[0], s[1] = s[1], s[0]
			s[1].AdminState = AdminDrain
		}, want: []PlanItem{
			{Object: "backend/web", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"servers"}},
			{Object: "backend/web/server/s1", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"admin_state"}},
		}},
		{name: "binds reordered", mutate: func(c *Config) {
			b := c.Frontends[0].Binds
			b[0], b[1] = b[1], b[0]
		}, want: []PlanItem{{Object: "frontend/public", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"binds"}}}},
		{name: "backends and frontends reordered", mutate: func(c *Config) {
			c.Backends[0], c.Backends[2] = c.Backends[2], c.Backends[0]
			c.Frontends[0], c.Frontends[1] = c.Frontends[1], c.Frontends[0]
		}, want: []PlanItem{
			{Object: "frontends", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"order"}},
			{Object: "backends", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"order"}},
		}},
		{name: "nbthread restarts loops", mutate: func(c *Config) { c.Tuning.Nbthread = 4; c.Tuning.Maxaccept = 8 },
			want: []PlanItem{{Object: "tuning", Op: OpUpdate, Apply: ApplyRestartLoops, Fields: []string{"nbthread", "maxaccept"}}}},
		{name: "other tuning in place", mutate: func(c *Config) { c.Tuning.Sched = Sched{Urgent: 50, Normal: 40, Bulk: 10} },
			want: []PlanItem{{Object: "tuning", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"sched"}}}},
		{name: "grace_ms in place", mutate: func(c *Config) { c.Tuning.GraceMs = 2500 },
			want: []PlanItem{{Object: "tuning", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"grace_ms"}}}},
		{name: "cpu_map and irq in place", mutate: func(c *Config) {
			c.CPUMap.Threads[0].CPUs = []int{3}
			c.IRQ.Policy = IRQPolicyNone
			c.IRQ.NICs = nil
		}, want: []PlanItem{
			{Object: "cpu_map", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"threads"}},
			{Object: "irq", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"policy", "nics"}},
		}},
		{name: "document order: frontends, backends, tuning; deletes after creates", mutate: func(c *Config) {
			c.Tuning.Maxpipes = 1
			c.Backends = append(c.Backends[1:], Backend{Name: "zz"})
			c.Frontends[0].DefaultBackend = "api"
			c.Frontends = append(c.Frontends, Frontend{Name: "aa"})
			c.Normalize()
		}, want: []PlanItem{
			{Object: "frontend/public", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"default_backend"}},
			{Object: "frontend/aa", Op: OpCreate, Apply: ApplyInPlace},
			{Object: "backend/zz", Op: OpCreate, Apply: ApplyInPlace},
			{Object: "backend/web", Op: OpDelete, Apply: ApplyInPlace},
			{Object: "tuning", Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{"maxpipes"}},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old := goodConfig()
			next := old.Clone()
			tt.mutate(next)
			got := Diff(old, next)
			if got.Items == nil {
				t.Fatal("Items is nil")
			}
			if !reflect.DeepEqual(got.Items, tt.want) {
				g, _ := json.Marshal(got.Items)
				w, _ := json.Marshal(tt.want)
				t.Fatalf("Diff()\n got: %s\nwant: %s", g, w)
			}
			// The plan is deterministic.
			if again := Diff(old, next); !reflect.DeepEqual(again, got) {
				t.Fatalf("second Diff differs: %v", again)
			}
		})
	}
}

func TestDiffFromNilListsTopLevelObjects(t *testing.T) {
	got := Diff(nil, goodConfig())
	var objs []string
	for _, it := range got.Items {
		objs = append(objs, it.Op+" "+it.Object)
	}
	want := "create frontend/public,create frontend/db_front,create backend/web,create backend/api,create backend/db,update tuning,update cpu_map,update irq"
	if strings.Join(objs, ",") != want {
		t.Fatalf("Diff(nil, good) = %v\nwant %s", objs, want)
	}
	if p := Diff(nil, nil); p.Items == nil || len(p.Items) != 0 {
		t.Fatalf("Diff(nil, nil) = %#v", p)
	}
}

func TestDiffToleratesDuplicateNames(t *testing.T) {
	old := goodConfig()
	next := old.Clone()
	next.Backends = append(next.Backends, next.Backends[0])
	next.Backends[3].Servers = append(next.Backends[3].Servers, next.Backends[3].Servers[0])
	if p := Diff(old, next); len(p.Items) != 0 {
		t.Fatalf("duplicates of unchanged objects gave %v", p.Items)
	}
}

func TestPlanSummary(t *testing.T) {
	tests := []struct {
		plan Plan
		want string
	}{
		{Plan{Items: []PlanItem{}}, "no change"},
		{Plan{Items: []PlanItem{{Object: "backend/web", Op: OpCreate}, {Object: "frontend/public", Op: OpUpdate}}},
			"create backend/web; update frontend/public"},
		{Plan{Items: []PlanItem{{Object: "a", Op: "x"}, {Object: "b", Op: "x"}, {Object: "c", Op: "x"}, {Object: "d", Op: "x"},
			{Object: "e", Op: "x"}, {Object: "f", Op: "x"}, {Object: "g", Op: "x"}, {Object: "h", Op: "x"}}},
			"x a; x b; x c; x d; x e; x f; and 2 more"},
		// An update names what it changed: two updates of one server read
		// apart (issue 23).
		{Plan{Items: []PlanItem{{Object: "backend/web/server/s1", Op: OpUpdate, Fields: []string{"weight"}}}},
			"update backend/web/server/s1 (weight)"},
		{Plan{Items: []PlanItem{{Object: "backend/web/server/s1", Op: OpUpdate, Fields: []string{"admin_state", "weight"}},
			{Object: "frontend/pub", Op: OpUpdate, Fields: []string{"a", "b", "c", "d", "e", "f"}}}},
			"update backend/web/server/s1 (admin_state, weight); update frontend/pub (a, b, c, d +2)"},
	}
	for _, tt := range tests {
		if got := tt.plan.Summary(); got != tt.want {
			t.Errorf("Summary() = %q, want %q", got, tt.want)
		}
	}
}

func TestPlanJSONHasItemsArray(t *testing.T) {
	b, _ := json.Marshal(Diff(goodConfig(), goodConfig()))
	if string(b) != `{"items":[]}` {
		t.Fatalf("empty plan encodes as %s", b)
	}
}

// The store diffs validated configs (unique names) with the prefix/suffix
// shortcut; it must give exactly the plan of the general algorithm.
func TestDiffOfUniqueNamesMatchesGeneralDiff(t *testing.T) {
	base := func() *Config {
		c := &Config{Backends: []Backend{{Name: "big"}}}
		for i := range 200 {
			c.Backends[0].Servers = append(c.Backends[0].Servers,
				&Server{Name: fmt.Sprintf("s%03d", i), Address: "127.0.0.1", Port: 1000 + i})
		}
		c.Normalize()
		return c
	}
	tests := []struct {
		name   string
		change func(s *[]*Server)
	}{
		{"state of one in the middle", func(s *[]*Server) { (*s)[100].AdminState = AdminDrain }},
		{"first and last", func(s *[]*Server) { (*s)[0].Port = 1; (*s)[199].Maxconn = 5 }},
		{"append", func(s *[]*Server) { *s = append(*s, &Server{Name: "new", Address: "127.0.0.1", Port: 9}) }},
		{"insert at the front", func(s *[]*Server) {
			*s = append([]*Server{{Name: "new", Address: "127.0.0.1", Port: 9}}, *s...)
		}},
		{"delete in the middle", func(s *[]*Server) { *s = append((*s)[:50], (*s)[51:]...) }},
		{"delete and change after it", func(s *[]*Server) { *s = append((*s)[:50], (*s)[51:]...); (*s)[120].Port = 2 }},
		{"swap two", func(s *[]*Server) { (*s)[3], (*s)[150] = (*s)[150], (*s)[3] }},
		{"rename one", func(s *[]*Server) { (*s)[7].Name = "renamed" }},
		{"delete all", func(s *[]*Server) { *s = nil }},
		{"no change", func(s *[]*Server) {}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			old, next := base(), base()
			tt.change(&next.Backends[0].Servers)
			next.Normalize()
			want, got := Diff(old, next), diff(old, next, true, nil)
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("diff with unique names = %+v\nwant %+v", got.Items, want.Items)
			}
			if got := diff(old, next, true, serverSpans(old, next)); !reflect.DeepEqual(got, want) {
				t.Fatalf("diff of the servers' span = %+v\nwant %+v", got.Items, want.Items)
			}
		})
	}
}
