package balance

import (
	"errors"
	"fmt"
	"net/netip"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestBuildReusesServersAndCarriesStateOver(t *testing.T) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	b1 := mustBuild(t, cfg, nil)
	s0, s1 := b1.Servers[0], b1.Servers[1]
	s0.Acquire()
	s0.Acquire()
	s0.ConnectFailed()
	s1.SetUp(false, time.Now())

	cfg2 := cfgBackend(config.BalanceLeastConn, 7, 1, 1)
	cfg2.Servers[0].Maxconn = 5
	cfg2.Servers[0].AdminState = config.AdminDrain
	cfg2.Servers[2].Port = 9090 // address:port changed: a new server
	cfg2.HealthCheck = &config.HealthCheck{Type: config.CheckTCP}
	cfg2.Normalize()
	before := b1.Changes()
	b2 := mustBuild(t, cfg2, b1)

	if b2.Servers[0] != s0 || b2.Servers[1] != s1 {
		t.Fatalf("servers with the same name and address were not reused")
	}
	if b2.Servers[2] == b1.Servers[2] {
		t.Fatalf("server with a new port was reused")
	}
	st := s0.Stats()
	if st.Cur != 2 || st.Total != 2 || st.ConnFails != 1 {
		t.Errorf("counters not carried over: %+v", st)
	}
	if st.Weight != 7 || st.Maxconn != 5 || st.AdminState != config.AdminDrain {
		t.Errorf("reused server not updated: %+v", st)
	}
	if s1.Up() {
		t.Errorf("observed health not carried over: s1 is up again")
	}
	if b2.Changes() <= before {
		t.Errorf("change counter did not move: %d -> %d", before, b2.Changes())
	}
	if b2.Algo != config.BalanceLeastConn || b2.Server("s2") != b2.Servers[2] {
		t.Errorf("backend fields: algo %q, Server(s2) %p", b2.Algo, b2.Server("s2"))
	}

	// The old generation's picker sees the reused server's new state.
	p1 := b1.NewPicker(0)
	if got := counts(p1, 100); got["s0"] != 0 {
		t.Errorf("old picker picks drained s0: %v", got)
	}
	// Retire: the replaced s2 stops being picked by the old generation.
	b1.Retire(b2)
	if !b1.Servers[2].Retired() || s0.Retired() {
		t.Errorf("retire: old s2 retired %v, kept s0 retired %v", b1.Servers[2].Retired(), s0.Retired())
	}
	if got := counts(p1, 100); got["<nil>"] != 100 {
		t.Errorf("old picker after retire: %v, want nothing usable", got)
	}
}

func TestBuildRemovesServersAndRejectsBadInput(t *testing.T) {
	b1 := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 1, 1, 1), nil)
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	cfg.Servers = cfg.Servers[:2]
	b2 := mustBuild(t, cfg, b1)
	if len(b2.Servers) != 2 || b2.Server("s2") != nil {
		t.Errorf("removed server still present")
	}

	tests := []struct {
		name string
		mut  func(c *config.Backend)
		want string
	}{
		{"duplicate name", func(c *config.Backend) { c.Servers[1].Name = "s0" }, `server "s0": duplicate`},
		{"bad port", func(c *config.Backend) { c.Servers[1].Port = 0 }, `server "s1": port 0`},
		{"bad admin state", func(c *config.Backend) { c.Servers[0].AdminState = "sleepy" }, `admin state "sleepy"`},
		{"bad balance", func(c *config.Backend) { c.Balance = "fastest" }, `balance "fastest"`},
		{"unresolvable", func(c *config.Backend) { c.Servers[1].Address = "db.invalid" }, `server "s1": resolve "db.invalid"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgBackend(config.BalanceRoundRobin, 1, 1)
			c.Servers[0].Maxconn = 99 // must not reach b1's s0 on failure
			tt.mut(c)
			_, err := Build(c, b1, noResolve)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want it to contain %q", err, tt.want)
			}
			if b1.Servers[0].Maxconn() != 0 {
				t.Errorf("failed Build changed a server of prev")
			}
		})
	}
}

// TestBuildTakesNormalizedConfigsOnly: Build fills no default (config's
// Normalize does, once); a value Normalize would have set is refused, not
// replaced by a default here.
func TestBuildTakesNormalizedConfigsOnly(t *testing.T) {
	tests := []struct {
		name string
		mut  func(c *config.Backend)
		want string
	}{
		{"mode unset", func(c *config.Backend) { c.Mode = "" }, `mode ""`},
		{"balance unset", func(c *config.Backend) { c.Balance = "" }, `balance ""`},
		{"retries unset", func(c *config.Backend) { c.Retries = nil }, `retries unset`},
		{"connect timeout unset", func(c *config.Backend) { c.Timeouts.ConnectMs = 0 }, `timeouts`},
		{"server timeout unset", func(c *config.Backend) { c.Timeouts.ServerMs = 0 }, `timeouts`},
		{"queue timeout unset", func(c *config.Backend) { c.Timeouts.QueueMs = 0 }, `timeouts`},
		{"tunnel timeout unset", func(c *config.Backend) { c.Timeouts.TunnelMs = 0 }, `timeouts`},
		{"weight unset", func(c *config.Backend) { c.Servers[1].Weight = nil }, `server "s1": weight unset`},
		{"admin state unset", func(c *config.Backend) { c.Servers[1].AdminState = "" }, `admin state ""`},
		{"check interval unset", func(c *config.Backend) {
			c.HealthCheck = &config.HealthCheck{Type: config.CheckTCP, TimeoutMs: 1, Rise: 1, Fall: 1}
		}, `health check`},
		{"check fall unset", func(c *config.Backend) {
			c.HealthCheck = &config.HealthCheck{Type: config.CheckTCP, IntervalMs: 1, TimeoutMs: 1, Rise: 1}
		}, `health check`},
		{"http check path unset", func(c *config.Backend) {
			c.HealthCheck = &config.HealthCheck{Type: config.CheckHTTP, Method: "GET", StatusMin: 200, StatusMax: 399, IntervalMs: 1, TimeoutMs: 1, Rise: 1, Fall: 1}
		}, `health check`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := cfgBackend(config.BalanceRoundRobin, 1, 1)
			tt.mut(c)
			_, err := Build(c, nil, noResolve)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err %v, want ErrInvalid containing %q", err, tt.want)
			}
		})
	}
	// Zero is a weight (no new connections), not "unset".
	c := cfgBackend(config.BalanceRoundRobin, 0, 1)
	if b := mustBuild(t, c, nil); b.Servers[0].Weight() != 0 {
		t.Errorf("weight 0 built as %d", b.Servers[0].Weight())
	}
}

func TestBuildResolvesHostNames(t *testing.T) {
	t.Run("localhost with the system resolver", func(t *testing.T) {
		cfg := cfgBackend(config.BalanceRoundRobin, 1)
		cfg.Servers[0].Address = "localhost"
		b, err := Build(cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		s := b.Servers[0]
		if !s.Addr.Addr().IsLoopback() || s.Addr.Port() != 8080 || s.Host != "localhost" {
			t.Errorf("localhost resolved to %s (host %q)", s.Addr, s.Host)
		}
		if s.Addr.Addr().Is4() {
			sa, ok := s.Sockaddr.(*unix.SockaddrInet4)
			if !ok || sa.Port != 8080 || sa.Addr != [4]byte{127, 0, 0, 1} {
				t.Errorf("sockaddr %#v", s.Sockaddr)
			}
		}
	})
	t.Run("custom resolver, IPv6 literal and mapped IPv4", func(t *testing.T) {
		cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1, 1)
		cfg.Servers[0].Address = "api.internal"
		cfg.Servers[3].Address = "api.internal" // same host, looked up once
		cfg.Servers[3].Port = 8081
		cfg.Servers[1].Address = "2001:db8::7"
		cfg.Servers[2].Address = "::ffff:192.0.2.1"
		var asked []string
		b, err := Build(cfg, nil, func(h string) (netip.Addr, error) {
			asked = append(asked, h)
			return netip.MustParseAddr("192.0.2.10"), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if fmt.Sprint(asked) != "[api.internal]" {
			t.Errorf("resolver asked for %v, want only the host name", asked)
		}
		want := []string{"192.0.2.10:8080", "[2001:db8::7]:8080", "192.0.2.1:8080", "192.0.2.10:8081"}
		for i, w := range want {
			if got := b.Servers[i].Addr.String(); got != w {
				t.Errorf("server %d: %s, want %s", i, got, w)
			}
		}
		if _, ok := b.Servers[1].Sockaddr.(*unix.SockaddrInet6); !ok {
			t.Errorf("IPv6 server sockaddr %T", b.Servers[1].Sockaddr)
		}
		if _, ok := b.Servers[2].Sockaddr.(*unix.SockaddrInet4); !ok {
			t.Errorf("mapped IPv4 server sockaddr %T, want AF_INET", b.Servers[2].Sockaddr)
		}
	})
	t.Run("first IPv4 preferred", func(t *testing.T) {
		a, err := pickAddr([]netip.Addr{netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("192.0.2.3"), netip.MustParseAddr("192.0.2.4")})
		if err != nil || a.String() != "192.0.2.3" {
			t.Errorf("pickAddr: %v %v", a, err)
		}
	})
}

func TestBuildHealthStartsUpAndFollowsCheckRemoval(t *testing.T) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1)
	cfg.HealthCheck = &config.HealthCheck{Type: config.CheckTCP}
	cfg.Normalize()
	cfg.Normalize()
	b1 := mustBuild(t, cfg, nil)
	if !b1.Servers[0].Up() || b1.Check == nil || b1.Check.Rise != config.DefaultCheckRise {
		t.Fatalf("new servers with a check: up %v, check %+v", b1.Servers[0].Up(), b1.Check)
	}
	b1.Servers[0].SetUp(false, time.Now())
	b2 := mustBuild(t, cfg, b1)
	if b2.Servers[0].Up() {
		t.Errorf("down server came up on a rebuild that keeps the check")
	}
	cfg.HealthCheck = nil
	b3 := mustBuild(t, cfg, b2)
	if !b3.Servers[0].Up() {
		t.Errorf("check removed but server stays down")
	}
}

func TestSockaddrIntoCopiesWithoutAllocating(t *testing.T) {
	b := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 1), nil)
	s := b.Servers[0]
	var buf SockaddrBuf
	sa := s.SockaddrInto(&buf).(*unix.SockaddrInet4)
	if sa == s.Sockaddr || sa.Port != 8080 || sa.Addr != [4]byte{10, 0, 0, 0} {
		t.Errorf("copy %#v of %#v", sa, s.Sockaddr)
	}
	if n := testing.AllocsPerRun(100, func() { s.SockaddrInto(&buf) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

func TestAcquireNeverExceedsMaxconnUnderConcurrency(t *testing.T) {
	for _, maxconn := range []int{0, 1, 7} {
		t.Run(fmt.Sprint("maxconn=", maxconn), func(t *testing.T) {
			cfg := cfgBackend(config.BalanceRoundRobin, 1)
			cfg.Servers[0].Maxconn = maxconn
			s := mustBuild(t, cfg, nil).Servers[0]
			var peak, got atomic.Int64
			var wg sync.WaitGroup
			for range 8 {
				wg.Go(func() {
					for range 2000 {
						if !s.Acquire() {
							continue
						}
						got.Add(1)
						c := s.Cur.Load()
						for p := peak.Load(); c > p && !peak.CompareAndSwap(p, c); p = peak.Load() {
						}
						s.Release()
					}
				})
			}
			wg.Wait()
			if maxconn > 0 && peak.Load() > int64(maxconn) {
				t.Errorf("peak Cur %d above maxconn %d", peak.Load(), maxconn)
			}
			if s.Cur.Load() != 0 {
				t.Errorf("Cur %d after all releases", s.Cur.Load())
			}
			if st := s.Stats(); st.Total != uint64(got.Load()) || got.Load() == 0 {
				t.Errorf("total %d, acquired %d", st.Total, got.Load())
			}
		})
	}
}

func TestAcquireRefusesAtMaxconn(t *testing.T) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1)
	cfg.Servers[0].Maxconn = 2
	s := mustBuild(t, cfg, nil).Servers[0]
	for i, want := range []bool{true, true, false} {
		if got := s.Acquire(); got != want {
			t.Fatalf("Acquire #%d with maxconn 2 = %v, want %v (Cur %d)", i+1, got, want, s.Cur.Load())
		}
	}
	if !s.Full() {
		t.Fatalf("not Full with 2 of maxconn 2 acquired (Cur %d)", s.Cur.Load())
	}
	s.Release()
	if s.Full() || !s.Acquire() {
		t.Errorf("slot not given back by Release")
	}
}

func TestSetAdminStateRejectsUnknown(t *testing.T) {
	s := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 1), nil).Servers[0]
	if err := s.SetAdminState("paused"); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("err %v, want ErrInvalid", err)
	}
}

func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{100, 10000} {
		weights := make([]int, n)
		for i := range weights {
			weights[i] = 100
		}
		cfg := cfgBackend(config.BalanceSource, weights...)
		b.Run(fmt.Sprintf("fresh/n=%d", n), func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(cfg, nil, noResolve); err != nil {
					b.Fatal(err)
				}
			}
		})
		// The runtime-change case: one server removed, everything else reused.
		b.Run(fmt.Sprintf("reuse-one-removed/n=%d", n), func(b *testing.B) {
			prev := mustBuild(b, cfg, nil)
			cfg2 := *cfg
			cfg2.Servers = cfg.Servers[1:]
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Build(&cfg2, prev, noResolve); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestPickersRaceWithRuntimeChanges runs pickers on several goroutines (as
// loops would) while the control path flips states and rebuilds: under -race
// it proves the shared objects are only touched through atomics, and a pick
// never fails while one server stays usable throughout.
func TestPickersRaceWithRuntimeChanges(t *testing.T) {
	for _, algo := range allAlgos {
		t.Run(algo, func(t *testing.T) {
			cfg := cfgBackend(algo, 1, 2, 3, 4)
			cfg.Servers[1].Maxconn = 3
			b := mustBuild(t, cfg, nil)
			var stop atomic.Bool
			var wg sync.WaitGroup
			for g := range 3 {
				wg.Go(func() {
					p := b.NewPicker(uint64(g))
					var prev *Server
					for i := 0; !stop.Load(); i++ {
						s := p.Pick(uint64(i), prev)
						if s == nil {
							t.Errorf("nil pick while s0 is always usable")
							return
						}
						if s.Acquire() {
							s.Release()
						}
						prev = s
					}
				})
			}
			now := time.Now()
			for i := range 300 {
				s := b.Servers[1+i%3]
				switch i % 4 {
				case 0:
					_ = s.SetAdminState(config.AdminMaint)
				case 1:
					s.SetUp(i%8 == 1, now)
				case 2:
					s.SetWeight(i % 5)
				default:
					_ = s.SetAdminState(config.AdminReady)
					s.SetUp(true, now)
				}
				if i%50 == 0 {
					mustBuild(t, cfg, b) // reuses and updates the same objects
				}
			}
			stop.Store(true)
			wg.Wait()
		})
	}
}

func BenchmarkAcquireRelease(b *testing.B) {
	for _, maxconn := range []int{0, 1 << 30} {
		b.Run(fmt.Sprint("maxconn=", maxconn), func(b *testing.B) {
			cfg := cfgBackend(config.BalanceRoundRobin, 1)
			cfg.Servers[0].Maxconn = maxconn
			s := mustBuild(b, cfg, nil).Servers[0]
			b.ReportAllocs()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if s.Acquire() {
						s.Release()
					}
				}
			})
		})
	}
}

// TestBuildMakesANewServerWhenTLSChanges: a server's tls is part of its
// identity, as its address: a change retires the old Server (its pooled
// connections were made with the old settings), an unchanged tls keeps it.
func TestBuildMakesANewServerWhenTLSChanges(t *testing.T) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	cfg.Servers[0].TLS = &config.ServerTLS{Verify: config.VerifyNone}
	cfg.Servers[1].TLS = &config.ServerTLS{Verify: config.VerifyRequired, SNI: "a.test"}
	b1 := mustBuild(t, cfg, nil)
	if b1.Servers[0].TLSSpec == nil || *b1.Servers[0].TLSSpec != *cfg.Servers[0].TLS || b1.Servers[2].TLSSpec != nil {
		t.Fatalf("TLSSpec not recorded: %+v %+v", b1.Servers[0].TLSSpec, b1.Servers[2].TLSSpec)
	}
	cfg2 := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	cfg2.Servers[0].TLS = &config.ServerTLS{Verify: config.VerifyNone}                    // same
	cfg2.Servers[1].TLS = &config.ServerTLS{Verify: config.VerifyRequired, SNI: "b.test"} // sni changed
	cfg2.Servers[2].TLS = &config.ServerTLS{Verify: config.VerifyNone}                    // plain -> tls
	b2 := mustBuild(t, cfg2, b1)
	if b2.Servers[0] != b1.Servers[0] {
		t.Error("a server with the same tls was not reused")
	}
	if b2.Servers[1] == b1.Servers[1] || b2.Servers[2] == b1.Servers[2] {
		t.Error("a server whose tls changed was reused")
	}
	b1.Retire(b2)
	if !b1.Servers[1].Retired() || !b1.Servers[2].Retired() || b1.Servers[0].Retired() {
		t.Error("retire does not follow the tls change")
	}
}

// TestBuildMakesANewServerWhenProtoChanges: proto h2 sets Server.H2 and,
// as tls, is part of the server's identity: h1 <-> h2 retires the old
// Server (its pooled connections speak the other version); absent and
// "h1" are the same setting and keep it.
func TestBuildMakesANewServerWhenProtoChanges(t *testing.T) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	cfg.Servers[0].Proto = config.ProtoH2
	cfg.Servers[1].Proto = config.ProtoH2
	b1 := mustBuild(t, cfg, nil)
	if !b1.Servers[0].H2 || !b1.Servers[1].H2 || b1.Servers[2].H2 {
		t.Fatalf("H2 not recorded: %v %v %v", b1.Servers[0].H2, b1.Servers[1].H2, b1.Servers[2].H2)
	}
	cfg2 := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	cfg2.Servers[0].Proto = config.ProtoH2 // same
	cfg2.Servers[1].Proto = config.ProtoH1 // h2 -> h1
	cfg2.Servers[2].Proto = config.ProtoH1 // absent -> h1: the same
	b2 := mustBuild(t, cfg2, b1)
	if b2.Servers[0] != b1.Servers[0] || b2.Servers[2] != b1.Servers[2] {
		t.Error("a server with the same proto was not reused")
	}
	if b2.Servers[1] == b1.Servers[1] || b2.Servers[1].H2 {
		t.Error("a server whose proto changed was reused")
	}
}

// TestPeakCountsTheMostSlotsHeld: a server's and its backend's peaks are
// the most slots held at once (conn_max), exact under concurrent Acquire
// and Release, and kept once the slots are given back.
func TestPeakCountsTheMostSlotsHeld(t *testing.T) {
	b := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 100, 100), nil)
	s0, s1 := b.Servers[0], b.Servers[1]
	for range 3 {
		s0.Acquire()
	}
	for range 2 {
		s1.Acquire()
	}
	s0.Release()
	s1.Acquire() // s0 2, s1 3: the backend's peak stays 5
	for _, s := range []*Server{s0, s0, s1, s1, s1} {
		s.Release()
	}
	if s0.Peak() != 3 || s1.Peak() != 3 || b.Queue().Peak() != 5 {
		t.Fatalf("peaks s0 %d s1 %d backend %d, want 3, 3, 5", s0.Peak(), s1.Peak(), b.Queue().Peak())
	}
	// 8 goroutines each holding one slot at a time: never more than 8.
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for range 1000 {
				if s0.Acquire() {
					s0.Release()
				}
			}
		})
	}
	wg.Wait()
	if p := s0.Peak(); p < 3 || p > 8 {
		t.Fatalf("s0 peak %d after 8 concurrent holders, want 3..8", p)
	}
	if s0.Cur.Load() != 0 || b.Queue().cur.Load() != 0 {
		t.Fatalf("Cur %d, backend cur %d after all releases", s0.Cur.Load(), b.Queue().cur.Load())
	}
}
