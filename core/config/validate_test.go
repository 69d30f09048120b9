package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// goodConfig is a valid, normalized document exercising most of the model.
func goodConfig() *Config {
	w0 := 0
	c := &Config{
		Frontends: []Frontend{
			{
				Name: "public", Mode: ModeHTTP, DefaultBackend: "web",
				Binds: []Bind{
					{Name: "b1", Address: "127.0.0.1", Port: 8080},
					{Name: "b2", Address: "::1", Port: 8080, Threads: []int{0, 1}},
				},
				Routes: []Route{
					{Host: "api.example.com", PathPrefix: "/v1", Method: "GET", Backend: "api"},
					{Host: "*.example.org", Backend: "web"},
				},
			},
			{
				Name: "db_front", Mode: ModeTCP, DefaultBackend: "db",
				Binds: []Bind{{Name: "b1", Address: "*", Port: 5432, Shards: 2}},
			},
		},
		Backends: []Backend{
			{Name: "web", Mode: ModeHTTP, Servers: []*Server{
				{Name: "s1", Address: "127.0.0.1", Port: 8081},
				{Name: "s2", Address: "origin.example.com", Port: 8082, Weight: &w0},
			}, HealthCheck: &HealthCheck{Type: CheckHTTP, Path: "/healthz"}},
			{Name: "api", Mode: ModeHTTP, Servers: []*Server{{Name: "s1", Address: "::1", Port: 9000}}},
			{Name: "db", Mode: ModeTCP, Servers: []*Server{{Name: "pg-1", Address: "10.0.0.5", Port: 5432}},
				HealthCheck: &HealthCheck{Type: CheckTCP}},
		},
		Tuning: Tuning{Nbthread: 2},
		CPUMap: CPUMap{Mode: CPUMapManual, Threads: []ThreadCPUs{{Thread: 0, CPUs: []int{0}}, {Thread: 1, CPUs: []int{1, 2}}}},
		IRQ:    IRQ{Policy: IRQPolicySeparate, NICs: []string{"eth0", "enp3s0f1"}, Pins: []IRQPin{{IRQ: 24, CPUs: []int{3}}}},
	}
	c.Normalize()
	return c
}

var fourCPUs = Env{CPUs: []int{0, 1, 2, 3}}

type want struct{ field, code string }

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		mutate func(c *Config)
		env    Env
		want   []want
	}{
		{name: "good document passes", mutate: func(c *Config) {}, env: fourCPUs},
		{name: "empty normalized document passes", mutate: func(c *Config) { *c = Config{}; c.Normalize() }, env: fourCPUs},
		{name: "good document passes without env", mutate: func(c *Config) {}},

		// names
		{name: "frontend name required", mutate: func(c *Config) { c.Frontends[0].Name = "" },
			want: []want{{"/frontends/0/name", CodeRequired}}},
		{name: "upper case name refused", mutate: func(c *Config) { c.Frontends[0].Name = "Public" },
			want: []want{{"/frontends/0/name", CodeFormat}}},
		{name: "name starting with dash refused", mutate: func(c *Config) { c.Backends[2].Name = "-db"; c.Frontends[1].DefaultBackend = "-db" },
			want: []want{{"/backends/2/name", CodeFormat}}},
		{name: "name ending with underscore refused", mutate: func(c *Config) { c.Frontends[0].Binds[0].Name = "b_" },
			want: []want{{"/frontends/0/binds/0/name", CodeFormat}}},
		{name: "name of 64 characters refused", mutate: func(c *Config) { c.Backends[0].Servers[0].Name = strings.Repeat("a", 64) },
			want: []want{{"/backends/0/servers/0/name", CodeFormat}}},
		{name: "name with dot refused", mutate: func(c *Config) { c.Backends[0].Servers[0].Name = "s.1" },
			want: []want{{"/backends/0/servers/0/name", CodeFormat}}},
		{name: "name of 63 characters with inner dash and underscore passes",
			mutate: func(c *Config) { c.Backends[0].Servers[0].Name = "a-_" + strings.Repeat("b", 60) }},
		{name: "duplicate frontend", mutate: func(c *Config) { c.Frontends[1].Name = "public" },
			want: []want{{"/frontends/1/name", CodeDuplicate}}},
		{name: "duplicate backend", mutate: func(c *Config) { c.Backends[1].Name = "web" },
			want: []want{{"/frontends/0/routes/0/backend", CodeUnknownReference}, {"/backends/1/name", CodeDuplicate}}},
		{name: "duplicate bind within a frontend", mutate: func(c *Config) { c.Frontends[0].Binds[1].Name = "b1" },
			want: []want{{"/frontends/0/binds/1/name", CodeDuplicate}}},
		{name: "same bind name in two frontends passes", mutate: func(c *Config) {}},
		{name: "duplicate server within a backend", mutate: func(c *Config) { c.Backends[0].Servers[1].Name = "s1" },
			want: []want{{"/backends/0/servers/1/name", CodeDuplicate}}},

		// references and modes
		{name: "unknown default_backend", mutate: func(c *Config) { c.Frontends[0].DefaultBackend = "nope" },
			want: []want{{"/frontends/0/default_backend", CodeUnknownReference}}},
		{name: "unknown route backend", mutate: func(c *Config) { c.Frontends[0].Routes[1].Backend = "nope" },
			want: []want{{"/frontends/0/routes/1/backend", CodeUnknownReference}}},
		{name: "route backend required", mutate: func(c *Config) { c.Frontends[0].Routes[1].Backend = "" },
			want: []want{{"/frontends/0/routes/1/backend", CodeRequired}}},
		{name: "tcp frontend to http backend", mutate: func(c *Config) { c.Frontends[1].DefaultBackend = "web" },
			want: []want{{"/frontends/1/default_backend", CodeModeMismatch}}},
		{name: "http frontend to tcp backend", mutate: func(c *Config) { c.Frontends[0].DefaultBackend = "db" },
			want: []want{{"/frontends/0/default_backend", CodeModeMismatch}}},
		{name: "sni routes in tcp mode pass", mutate: func(c *Config) {
			c.Frontends[1].Routes = []Route{{SNI: "a.example.com", Backend: "db"}, {SNI: "*.example.com", Backend: "db"}}
		}},
		{name: "tcp route without sni", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{Backend: "db"}} },
			want: []want{{"/frontends/1/routes/0/sni", CodeRequired}}},
		{name: "tcp route with host", mutate: func(c *Config) {
			c.Frontends[1].Routes = []Route{{SNI: "a.example.com", Host: "a.example.com", Backend: "db"}}
		},
			want: []want{{"/frontends/1/routes/0/host", CodeModeMismatch}}},
		{name: "sni upper case", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "A.example.com", Backend: "db"}} },
			want: []want{{"/frontends/1/routes/0/sni", CodeFormat}}},
		{name: "sni not a host name", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "a..example.com", Backend: "db"}} },
			want: []want{{"/frontends/1/routes/0/sni", CodeFormat}}},
		{name: "sni bare wildcard", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "*", Backend: "db"}} },
			want: []want{{"/frontends/1/routes/0/sni", CodeFormat}}},
		{name: "sni inner wildcard", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "a.*.example.com", Backend: "db"}} },
			want: []want{{"/frontends/1/routes/0/sni", CodeFormat}}},
		{name: "sni duplicate", mutate: func(c *Config) {
			c.Frontends[1].Routes = []Route{{SNI: "*.example.com", Backend: "db"}, {SNI: "*.example.com", Backend: "db"}}
		}, want: []want{{"/frontends/1/routes/1/sni", CodeDuplicate}}},
		{name: "sni route to http backend", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "a.example.com", Backend: c.Backends[0].Name}} },
			want: []want{{"/frontends/1/routes/0/backend", CodeModeMismatch}}},
		{name: "sni route to missing backend", mutate: func(c *Config) { c.Frontends[1].Routes = []Route{{SNI: "a.example.com", Backend: "nope"}} },
			want: []want{{"/frontends/1/routes/0/backend", CodeUnknownReference}}},
		{name: "sni in http mode", mutate: func(c *Config) { c.Frontends[0].Routes[0].SNI = "a.example.com" },
			want: []want{{"/frontends/0/routes/0/sni", CodeModeMismatch}}},
		{name: "handshake_ms negative", mutate: func(c *Config) { c.Frontends[1].Timeouts.HandshakeMs = -1 },
			want: []want{{"/frontends/1/timeouts/handshake_ms", CodeOutOfRange}}},
		{name: "route host with space", mutate: func(c *Config) { c.Frontends[0].Routes[0].Host = "a b.com" },
			want: []want{{"/frontends/0/routes/0/host", CodeFormat}}},
		{name: "route host wildcard in the middle", mutate: func(c *Config) { c.Frontends[0].Routes[0].Host = "a.*.com" },
			want: []want{{"/frontends/0/routes/0/host", CodeFormat}}},
		{name: "route host bare star", mutate: func(c *Config) { c.Frontends[0].Routes[0].Host = "*" },
			want: []want{{"/frontends/0/routes/0/host", CodeFormat}}},
		{name: "route host IP literals pass", mutate: func(c *Config) {
			c.Frontends[0].Routes[0].Host = "10.1.2.3"
			c.Frontends[0].Routes[1].Host = "[::1]"
		}},
		{name: "route path without slash", mutate: func(c *Config) { c.Frontends[0].Routes[0].PathPrefix = "v1" },
			want: []want{{"/frontends/0/routes/0/path_prefix", CodeFormat}}},
		{name: "route method not a token", mutate: func(c *Config) { c.Frontends[0].Routes[0].Method = "GE T" },
			want: []want{{"/frontends/0/routes/0/method", CodeFormat}}},
		{name: "one_of on mode", mutate: func(c *Config) { c.Backends[0].Mode = "udp" },
			want: []want{{"/backends/0/mode", CodeOneOf}}},
		{name: "one_of on balance", mutate: func(c *Config) { c.Backends[0].Balance = "hash" },
			want: []want{{"/backends/0/balance", CodeOneOf}}},
		{name: "one_of on admin_state", mutate: func(c *Config) { c.Backends[0].Servers[1].AdminState = "down" },
			want: []want{{"/backends/0/servers/1/admin_state", CodeOneOf}}},

		{name: "http options are checked", mutate: func(c *Config) { c.Frontends[0].HTTP.MaxBodySize = -1 },
			want: []want{{"/frontends/0/http/max_body_size", CodeOutOfRange}}},
		{name: "retries over 100", mutate: func(c *Config) { r := 101; c.Backends[1].Retries = &r },
			want: []want{{"/backends/1/retries", CodeOutOfRange}}},
		{name: "frontend timeout over a day", mutate: func(c *Config) { c.Frontends[1].Timeouts.ClientMs = 86400001 },
			want: []want{{"/frontends/1/timeouts/client_ms", CodeOutOfRange}}},

		// binds
		{name: "bind address host name refused", mutate: func(c *Config) { c.Frontends[0].Binds[0].Address = "localhost" },
			want: []want{{"/frontends/0/binds/0/address", CodeFormat}}},
		{name: "bind address required", mutate: func(c *Config) { c.Frontends[0].Binds[0].Address = "" },
			want: []want{{"/frontends/0/binds/0/address", CodeRequired}}},
		{name: "bind port 0", mutate: func(c *Config) { c.Frontends[0].Binds[0].Port = 0 },
			want: []want{{"/frontends/0/binds/0/port", CodeOutOfRange}}},
		{name: "bind port 65536", mutate: func(c *Config) { c.Frontends[0].Binds[0].Port = 65536 },
			want: []want{{"/frontends/0/binds/0/port", CodeOutOfRange}}},
		{name: "same address and port in two frontends", mutate: func(c *Config) {
			c.Frontends[1].Binds[0].Address = "127.0.0.1"
			c.Frontends[1].Binds[0].Port = 8080
		}, want: []want{{"/frontends/1/binds/0", CodeAddressConflict}}},
		{name: "wildcard star overlaps loopback on the same port", mutate: func(c *Config) { c.Frontends[1].Binds[0].Port = 8080 },
			want: []want{{"/frontends/1/binds/0", CodeAddressConflict}}},
		{name: "v6 unspecified overlaps ::1 on the same port", mutate: func(c *Config) {
			c.Frontends[1].Binds[0].Address = "::"
			c.Frontends[1].Binds[0].Port = 8080
		}, want: []want{{"/frontends/1/binds/0", CodeAddressConflict}}},
		{name: "v4-mapped address overlaps its v4 address", mutate: func(c *Config) {
			c.Frontends[1].Binds[0].Address = "::ffff:127.0.0.1"
			c.Frontends[1].Binds[0].Port = 8080
		}, want: []want{{"/frontends/1/binds/0", CodeAddressConflict}}},
		{name: "v4 wildcard and v6 loopback on the same port pass", mutate: func(c *Config) {
			c.Frontends[0].Binds[0].Port = 8081
			c.Frontends[1].Binds[0].Port = 8080
		}},
		{name: "same address on different ports passes", mutate: func(c *Config) { c.Frontends[0].Binds[1].Address = "127.0.0.1"; c.Frontends[0].Binds[1].Port = 8443 }},
		{name: "bind thread beyond nbthread", mutate: func(c *Config) { c.Frontends[0].Binds[1].Threads = []int{0, 2} },
			want: []want{{"/frontends/0/binds/1/threads/1", CodeOutOfRange}}},
		{name: "bind thread listed twice", mutate: func(c *Config) { c.Frontends[0].Binds[1].Threads = []int{1, 1} },
			want: []want{{"/frontends/0/binds/1/threads/1", CodeDuplicate}}},

		// servers
		{name: "server address bad host name", mutate: func(c *Config) { c.Backends[0].Servers[1].Address = "bad_host" },
			want: []want{{"/backends/0/servers/1/address", CodeFormat}}},
		{name: "server address numeric non-IP refused", mutate: func(c *Config) { c.Backends[0].Servers[1].Address = "10.0.0.300" },
			want: []want{{"/backends/0/servers/1/address", CodeFormat}}},
		{name: "server address label over 63 characters", mutate: func(c *Config) { c.Backends[0].Servers[1].Address = strings.Repeat("a", 64) + ".com" },
			want: []want{{"/backends/0/servers/1/address", CodeFormat}}},
		{name: "server port 0", mutate: func(c *Config) { c.Backends[1].Servers[0].Port = 0 },
			want: []want{{"/backends/1/servers/0/port", CodeOutOfRange}}},
		{name: "server weight 257", mutate: func(c *Config) { w := 257; c.Backends[0].Servers[0].Weight = &w },
			want: []want{{"/backends/0/servers/0/weight", CodeOutOfRange}}},
		{name: "server weight -1", mutate: func(c *Config) { w := -1; c.Backends[0].Servers[0].Weight = &w },
			want: []want{{"/backends/0/servers/0/weight", CodeOutOfRange}}},
		{name: "server weight 256 passes", mutate: func(c *Config) { w := 256; c.Backends[0].Servers[0].Weight = &w }},

		// tuning
		{name: "sched shares must sum to 100", mutate: func(c *Config) { c.Tuning.Sched = Sched{Urgent: 50, Normal: 50, Bulk: 10} },
			want: []want{{"/tuning/sched", CodeSum}}},
		{name: "sched share over 100", mutate: func(c *Config) { c.Tuning.Sched = Sched{Urgent: 101, Normal: 0, Bulk: -1} },
			want: []want{{"/tuning/sched/bulk", CodeOutOfRange}, {"/tuning/sched/urgent", CodeOutOfRange}}},
		{name: "sched urgent 0 would starve I/O tasklets", mutate: func(c *Config) { c.Tuning.Sched = Sched{Urgent: 0, Normal: 80, Bulk: 20} },
			want: []want{{"/tuning/sched/urgent", CodeOutOfRange}}},
		{name: "bufsize below 1024", mutate: func(c *Config) { c.Tuning.Bufsize = 1023 },
			want: []want{{"/tuning/bufsize", CodeOutOfRange}}},
		{name: "pipesize below 4096", mutate: func(c *Config) { c.Tuning.Pipesize = 4095 },
			want: []want{{"/tuning/pipesize", CodeOutOfRange}}},
		{name: "pipesize not a power of two passes", mutate: func(c *Config) { c.Tuning.Pipesize = 100000 }},
		{name: "distribution one_of", mutate: func(c *Config) { c.Tuning.Distribution = "random" },
			want: []want{{"/tuning/distribution", CodeOneOf}}},
		{name: "nbthread over 1024", mutate: func(c *Config) { c.Tuning.Nbthread = 1025 },
			want: []want{{"/tuning/nbthread", CodeOutOfRange}}},
		{name: "grace_ms over one hour", mutate: func(c *Config) { c.Tuning.GraceMs = 3600001 },
			want: []want{{"/tuning/grace_ms", CodeOutOfRange}}},
		{name: "grace_ms negative", mutate: func(c *Config) { c.Tuning.GraceMs = -1 },
			want: []want{{"/tuning/grace_ms", CodeOutOfRange}}},
		{name: "grace_ms 100 passes", mutate: func(c *Config) { c.Tuning.GraceMs = 100 }},

		// health checks
		{name: "check timeout above interval", mutate: func(c *Config) { c.Backends[0].HealthCheck.TimeoutMs = 3000 },
			want: []want{{"/backends/0/health_check/timeout_ms", CodeOutOfRange}}},
		{name: "check status_min above status_max", mutate: func(c *Config) {
			c.Backends[0].HealthCheck.StatusMin, c.Backends[0].HealthCheck.StatusMax = 300, 299
		}, want: []want{{"/backends/0/health_check/status_max", CodeOutOfRange}}},
		{name: "http check path without slash", mutate: func(c *Config) { c.Backends[0].HealthCheck.Path = "healthz" },
			want: []want{{"/backends/0/health_check/path", CodeFormat}}},
		{name: "check type required", mutate: func(c *Config) { c.Backends[2].HealthCheck.Type = "" },
			want: []want{{"/backends/2/health_check/type", CodeRequired}}},
		{name: "check host with a path", mutate: func(c *Config) { c.Backends[0].HealthCheck.Host = "www.example.com/x" },
			want: []want{{"/backends/0/health_check/host", CodeFormat}}},
		{name: "check host with port 0", mutate: func(c *Config) { c.Backends[0].HealthCheck.Host = "www.example.com:0" },
			want: []want{{"/backends/0/health_check/host", CodeFormat}}},
		{name: "check host IPv6 without brackets", mutate: func(c *Config) { c.Backends[0].HealthCheck.Host = "::1" },
			want: []want{{"/backends/0/health_check/host", CodeFormat}}},
		{name: "check host with a port passes", mutate: func(c *Config) { c.Backends[0].HealthCheck.Host = "www.example.com:8443" }},
		{name: "check host IPv6 literal passes", mutate: func(c *Config) { c.Backends[0].HealthCheck.Host = "[2001:db8::1]:80" }},
		{name: "check status 600", mutate: func(c *Config) { c.Backends[0].HealthCheck.StatusMax = 600 },
			want: []want{{"/backends/0/health_check/status_max", CodeOutOfRange}}},

		// cpu map and irq
		{name: "manual cpu_map needs threads", mutate: func(c *Config) { c.CPUMap.Threads = nil }, env: fourCPUs,
			want: []want{{"/cpu_map/threads", CodeRequired}}},
		{name: "threads with mode auto", mutate: func(c *Config) { c.CPUMap.Mode = CPUMapAuto }, env: fourCPUs,
			want: []want{{"/cpu_map/threads", CodeModeMismatch}}},
		{name: "cpu_map thread listed twice", mutate: func(c *Config) { c.CPUMap.Threads[1].Thread = 0 }, env: fourCPUs,
			want: []want{{"/cpu_map/threads/1/thread", CodeDuplicate}}},
		{name: "cpu_map thread beyond nbthread", mutate: func(c *Config) { c.CPUMap.Threads[1].Thread = 2 }, env: fourCPUs,
			want: []want{{"/cpu_map/threads/1/thread", CodeOutOfRange}}},
		{name: "cpu_map thread beyond machine when nbthread is 0", mutate: func(c *Config) {
			c.Tuning.Nbthread = 0
			c.CPUMap.Threads[1].Thread = 4
		}, env: fourCPUs, want: []want{{"/cpu_map/threads/1/thread", CodeOutOfRange}}},
		{name: "cpu_map thread not checked when nbthread is 0 and env unknown", mutate: func(c *Config) {
			c.Tuning.Nbthread = 0
			c.CPUMap.Threads[1].Thread = 4
		}},
		{name: "cpu_map cpu not online", mutate: func(c *Config) { c.CPUMap.Threads[1].CPUs = []int{1, 7} }, env: fourCPUs,
			want: []want{{"/cpu_map/threads/1/cpus/1", CodeCPUUnknown}}},
		{name: "cpu not checked with empty env", mutate: func(c *Config) { c.CPUMap.Threads[1].CPUs = []int{1, 7} }},
		{name: "cpu_map empty cpu list", mutate: func(c *Config) { c.CPUMap.Threads[0].CPUs = []int{} }, env: fourCPUs,
			want: []want{{"/cpu_map/threads/0/cpus", CodeRequired}}},
		{name: "irq pin cpu not online", mutate: func(c *Config) { c.IRQ.Pins[0].CPUs = []int{4} }, env: fourCPUs,
			want: []want{{"/irq/pins/0/cpus/0", CodeCPUUnknown}}},
		{name: "irq pinned twice", mutate: func(c *Config) { c.IRQ.Pins = append(c.IRQ.Pins, IRQPin{IRQ: 24, CPUs: []int{2}}) }, env: fourCPUs,
			want: []want{{"/irq/pins/1/irq", CodeDuplicate}}},
		{name: "irq nic name with slash", mutate: func(c *Config) { c.IRQ.NICs[1] = "eth0/1" },
			want: []want{{"/irq/nics/1", CodeFormat}}},
		{name: "irq nic name too long", mutate: func(c *Config) { c.IRQ.NICs[0] = "abcdefghijklmnop" },
			want: []want{{"/irq/nics/0", CodeFormat}}},
		{name: "irq policy separate needs pinned loops", mutate: func(c *Config) {
			c.IRQ.Policy = IRQPolicySeparate
			c.CPUMap = CPUMap{Mode: CPUMapNone}
		}, want: []want{{"/irq/policy", CodeModeMismatch}}},
		{name: "irq policy separate with cpu_map auto passes", mutate: func(c *Config) {
			c.IRQ.Policy = IRQPolicySeparate
			c.CPUMap = CPUMap{Mode: CPUMapAuto}
		}},
		{name: "irq policy one_of", mutate: func(c *Config) { c.IRQ.Policy = "spread" },
			want: []want{{"/irq/policy", CodeOneOf}}},

		// several problems at once, in document order
		{name: "all problems reported in document order", mutate: func(c *Config) {
			c.Tuning.Sched.Bulk = 0
			c.Backends[1].Servers[0].Port = 70000
			c.Frontends[0].Name = "UP"
			c.Backends[0].Servers[1].Port = 0
		}, want: []want{
			{"/frontends/0/name", CodeFormat},
			{"/backends/0/servers/1/port", CodeOutOfRange},
			{"/backends/1/servers/0/port", CodeOutOfRange},
			{"/tuning/sched", CodeSum},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tt.mutate(c)
			err := Validate(c, tt.env)
			got := fieldErrors(t, err)
			if !slices.Equal(got, tt.want) {
				t.Fatalf("Validate() problems\n got: %v\nwant: %v\n err: %v", got, tt.want, err)
			}
		})
	}
}

func fieldErrors(t *testing.T, err error) []want {
	t.Helper()
	if err == nil {
		return nil
	}
	var ve *ValidationError
	if !errors.As(err, &ve) {
		t.Fatalf("error %v (%T) is not a *ValidationError", err, err)
	}
	var out []want
	for _, fe := range ve.Errors {
		if fe.Message == "" {
			t.Errorf("%s %s: empty message", fe.Field, fe.Code)
		}
		out = append(out, want{fe.Field, fe.Code})
	}
	return out
}

func TestValidationErrorKind(t *testing.T) {
	tests := []struct {
		name         string
		mutate       func(c *Config)
		conflict     bool
		wantSentinel error
	}{
		{"a taken name is a conflict", func(c *Config) { c.Backends[0].Servers[1].Name = "s1" }, true, ErrConflict},
		{"a taken address is a conflict", func(c *Config) { c.Frontends[1].Binds[0].Port = 8080 }, true, ErrConflict},
		{"a bad value is invalid", func(c *Config) { c.Tuning.Bufsize = 1 }, false, ErrInvalid},
		{"a taken name with a bad value is invalid", func(c *Config) { c.Backends[1].Name = "web"; c.Tuning.Bufsize = 1 }, false, ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			tt.mutate(c)
			err := Validate(c, Env{})
			var ve *ValidationError
			if !errors.As(err, &ve) || ve.Conflict != tt.conflict || !errors.Is(err, tt.wantSentinel) {
				t.Fatalf("Validate() = %v; want Conflict=%v and errors.Is %v", err, tt.conflict, tt.wantSentinel)
			}
		})
	}
}

func TestValidateNil(t *testing.T) {
	if err := Validate(nil, Env{}); !errors.Is(err, ErrInvalid) {
		t.Fatalf("Validate(nil) = %v, want ErrInvalid", err)
	}
}

func TestValidName(t *testing.T) {
	tests := map[string]bool{
		"a": true, "web": true, "web-1": true, "web_1": true, "0": true, "1a": true,
		"": false, "-a": false, "a-": false, "_a": false, "a_": false, "A": false, "a.b": false,
		"a b": false, "é": false, strings.Repeat("x", 63): true, strings.Repeat("x", 64): false,
	}
	for name, ok := range tests {
		if got := ValidName(name); got != ok {
			t.Errorf("ValidName(%q) = %v, want %v", name, got, ok)
		}
	}
}

func TestParseCPUList(t *testing.T) {
	tests := []struct {
		in      string
		want    []int
		wantErr bool
	}{
		{in: "0", want: []int{0}},
		{in: "0-3\n", want: []int{0, 1, 2, 3}},
		{in: "0-3,5", want: []int{0, 1, 2, 3, 5}},
		{in: " 5,0-1,1 ", want: []int{0, 1, 5}},
		{in: "", want: []int{}},
		{in: "8191", want: []int{8191}},
		{in: "3-1", wantErr: true},
		{in: "a", wantErr: true},
		{in: "1,", wantErr: true},
		{in: "-1", wantErr: true},
		{in: "0-", wantErr: true},
		{in: "8192", wantErr: true},
		{in: "0-99999999999999999999", wantErr: true},
		{in: "+1", wantErr: true},
		{in: "0,,1", wantErr: true},
		{in: "0, 1", wantErr: true},
		{in: "0-15:2/4", wantErr: true},
		{in: "007", want: []int{7}},
	}
	for _, tt := range tests {
		got, err := ParseCPUList(tt.in)
		if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
			t.Errorf("ParseCPUList(%q) = %v, %v; want %v, err %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && !errors.Is(err, ErrInvalid) {
			t.Errorf("ParseCPUList(%q) error %v does not wrap ErrInvalid", tt.in, err)
		}
		if err == nil {
			if back, _ := ParseCPUList(FormatCPUList(got)); !slices.Equal(back, got) {
				t.Errorf("FormatCPUList(%v) = %q does not parse back", got, FormatCPUList(got))
			}
		}
	}
	if got := FormatCPUList([]int{5, 0, 1, 2, 7, 8}); got != "0-2,5,7-8" {
		t.Errorf("FormatCPUList = %q, want 0-2,5,7-8", got)
	}
	if got := FormatCPUList([]int{-1, 2}); got != "2" {
		t.Errorf("FormatCPUList drops negative ids: got %q, want 2", got)
	}
}

func TestHostEnvReadsCPUList(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "online")
	if err := os.WriteFile(p, []byte("0-1,3\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got := envFromFile(p).CPUs; !slices.Equal(got, []int{0, 1, 3}) {
		t.Fatalf("envFromFile = %v", got)
	}
	if got := envFromFile(filepath.Join(dir, "missing")); len(got.CPUs) != 0 {
		t.Fatalf("missing file gave %v, want empty Env", got)
	}
	if _, err := os.Stat(cpuOnlinePath); err == nil {
		if env := HostEnv(); len(env.CPUs) == 0 {
			t.Fatalf("HostEnv() is empty on a machine with %s", cpuOnlinePath)
		}
	}
}

func TestComparePointers(t *testing.T) {
	in := []string{"/tuning", "/backends/10/name", "/backends/2/name", "", "/backends/2", "/frontends/0"}
	slices.SortFunc(in, comparePointers)
	want := []string{"", "/frontends/0", "/backends/2", "/backends/2/name", "/backends/10/name", "/tuning"}
	if !slices.Equal(in, want) {
		t.Fatalf("sorted %v, want %v", in, want)
	}
}

func TestNamespaceToPointer(t *testing.T) {
	for in, want := range map[string]string{
		"Config.frontends[0].binds[12].port": "/frontends/0/binds/12/port",
		"Config.tuning.sched.urgent":         "/tuning/sched/urgent",
		"Config":                             "",
	} {
		if got := namespaceToPointer(in); got != want {
			t.Errorf("namespaceToPointer(%q) = %q, want %q", in, got, want)
		}
	}
}

func BenchmarkValidate10kServers(b *testing.B) {
	c := goodConfig()
	for i := range 10000 {
		c.Backends[0].Servers = append(c.Backends[0].Servers, &Server{Name: fmt.Sprintf("x%d", i), Address: "127.0.0.1", Port: 1000 + i%60000})
	}
	c.Normalize()
	b.ReportAllocs()
	for b.Loop() {
		if err := Validate(c, fourCPUs); err != nil {
			b.Fatal(err)
		}
	}
}

// Unchanged servers skip the field rules by matching the previous
// generation by position (shifted by a create or delete); a changed or new
// server among them must still be checked, at its own pointer.
func TestValidateChecksChangedServersAfterAShift(t *testing.T) {
	prev := goodConfig()
	for i := range 100 {
		prev.Backends[0].Servers = append(prev.Backends[0].Servers,
			&Server{Name: fmt.Sprintf("s%03d", i), Address: "127.0.0.1", Port: 2000 + i})
	}
	prev.Normalize()
	if err := validate(prev, Env{}, nil, nil); err != nil {
		t.Fatal(err)
	}
	bad := 300
	tests := []struct {
		name   string
		change func(s *[]*Server) string
	}{
		{"after a delete", func(s *[]*Server) string {
			*s = append((*s)[:10], (*s)[11:]...)
			(*s)[60].Weight = &bad
			return "/backends/0/servers/60/weight"
		}},
		{"after an insert", func(s *[]*Server) string {
			*s = append((*s)[:10], append([]*Server{{Name: "ins", Address: "127.0.0.1", Port: 9}}, (*s)[10:]...)...)
			(*s)[70].Port = 70000
			return "/backends/0/servers/70/port"
		}},
		{"a new server that reuses no name", func(s *[]*Server) string {
			*s = append(*s, &Server{Name: "fresh", Address: "127.0.0.1", Port: 0})
			return fmt.Sprintf("/backends/0/servers/%d/port", len(*s)-1)
		}},
		{"a duplicate name", func(s *[]*Server) string {
			*s = append(*s, &Server{Name: "s005", Address: "127.0.0.1", Port: 9})
			return fmt.Sprintf("/backends/0/servers/%d/name", len(*s)-1)
		}},
		// The span where the lists differ is one server: its name is
		// still compared with those before and after it.
		{"one renamed to a later server's name", func(s *[]*Server) string {
			(*s)[40].Name = "s090"
			return "/backends/0/servers/92/name" // the second use, as Validate says
		}},
		{"one renamed to an earlier server's name", func(s *[]*Server) string {
			(*s)[40].Name = "s003"
			return "/backends/0/servers/40/name"
		}},
		{"one inserted with a later server's name", func(s *[]*Server) string {
			*s = append((*s)[:10], append([]*Server{{Name: "s095", Address: "127.0.0.1", Port: 9}}, (*s)[10:]...)...)
			return "/backends/0/servers/98/name"
		}},
		{"a bad address in the span", func(s *[]*Server) string {
			(*s)[50].Address = "not an address!"
			return "/backends/0/servers/50/address"
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			next := prev.Clone()
			field := tt.change(&next.Backends[0].Servers)
			next.Normalize()
			err := validate(next, Env{}, prev, nil)
			var ve *ValidationError
			if !errors.As(err, &ve) || len(ve.Errors) != 1 || ve.Errors[0].Field != field {
				t.Fatalf("validate = %v, want one problem at %s", err, field)
			}
			if whole := Validate(next, Env{}); !reflect.DeepEqual(whole, err) {
				t.Fatalf("validate on the previous generation = %v, Validate = %v", err, whole)
			}
		})
	}
}

func TestValidHostPort(t *testing.T) {
	for _, tc := range []struct {
		in string
		ok bool
	}{
		{"www.example.com", true}, {"www.example.com:8080", true}, {"10.0.0.1", true}, {"10.0.0.1:80", true},
		{"[::1]", true}, {"[2001:db8::1]:65535", true}, {"localhost", true},
		{"", false}, {":80", false}, {"www.example.com:", false}, {"www.example.com:65536", false},
		{"www.example.com:080", false}, {"www.example.com:+80", false}, {"::1", false}, {"[::1", false},
		{"[10.0.0.1]", false}, {"[::1]x", false}, {"[fe80::1%eth0]", false}, {"a b", false},
		{"host\r\nX-Evil: 1", false}, {"10.0.0.300", false}, {"user@host", false},
	} {
		if got := ValidHostPort(tc.in); got != tc.ok {
			t.Errorf("ValidHostPort(%q) = %v, want %v", tc.in, got, tc.ok)
		}
	}
}
