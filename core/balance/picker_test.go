package balance

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestSmoothRoundRobinGivesExactSharesPerLap(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		picks   int
		want    []int
	}{
		{"1/2/3 over 6000", []int{1, 2, 3}, 6000, []int{1000, 2000, 3000}},
		{"5/1/1 over 7000", []int{5, 1, 1}, 7000, []int{5000, 1000, 1000}},
		{"equal weights", []int{100, 100, 100, 100}, 400, []int{100, 100, 100, 100}},
		{"weight 0 gets nothing", []int{0, 1, 1}, 1000, []int{0, 500, 500}},
		{"256 against 1", []int{256, 1}, 257 * 10, []int{2560, 10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustBuild(t, cfgBackend(config.BalanceRoundRobin, tt.weights...), nil).NewPicker(1)
			got := counts(p, tt.picks)
			for i, want := range tt.want {
				if n := got[fmt.Sprintf("s%d", i)]; n != want {
					t.Errorf("s%d: %d picks, want %d (all: %v)", i, n, want, got)
				}
			}
		})
	}
}

func TestSmoothRoundRobinInterleaves(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		want    string // names without the "s", one lap and a half
	}{
		{"nginx 5/1/1", []int{5, 1, 1}, "0010200" + "0010200"},
		{"equal weights rotate", []int{3, 3, 3}, "012012012"},
		{"2/1", []int{2, 1}, "010010"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := mustBuild(t, cfgBackend(config.BalanceRoundRobin, tt.weights...), nil).NewPicker(0)
			var sb strings.Builder
			for range len(tt.want) {
				sb.WriteString(strings.TrimPrefix(p.Pick(0, nil).Name, "s"))
			}
			if sb.String() != tt.want {
				t.Errorf("order %s, want %s", sb.String(), tt.want)
			}
		})
	}
}

// nginxRR is the reference: ngx_http_upstream_get_peer over all servers, one
// current value each, O(n) per pick.
type nginxRR struct {
	w, cur []int64
}

func (r *nginxRR) pick() int {
	best := -1
	var total int64
	for i := range r.w {
		r.cur[i] += r.w[i]
		total += r.w[i]
		if best < 0 || r.cur[i] > r.cur[best] {
			best = i
		}
	}
	r.cur[best] -= total
	return best
}

func TestSmoothRoundRobinMatchesNginxReference(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		n := 1 + rng.IntN(30)
		weights := make([]int, n)
		ref := &nginxRR{w: make([]int64, n), cur: make([]int64, n)}
		for i := range weights {
			// Few distinct values so that groups have several members.
			weights[i] = []int{1, 2, 3, 7, 100, 256}[rng.IntN(6)]
			ref.w[i] = int64(weights[i])
		}
		p := mustBuild(t, cfgBackend(config.BalanceRoundRobin, weights...), nil).NewPicker(0)
		for k := range 3000 {
			want := fmt.Sprintf("s%d", ref.pick())
			if got := p.Pick(0, nil).Name; got != want {
				t.Fatalf("round %d weights %v pick %d: %s, nginx picks %s", round, weights, k, got, want)
			}
		}
	}
}

func TestUnusableServersAreNeverPicked(t *testing.T) {
	now := time.Now()
	tests := []struct {
		name  string
		spoil func(s *Server)
	}{
		{"weight 0", func(s *Server) { s.SetWeight(0) }},
		{"maint", func(s *Server) { _ = s.SetAdminState(config.AdminMaint) }},
		{"drain", func(s *Server) { _ = s.SetAdminState(config.AdminDrain) }},
		{"down", func(s *Server) { s.SetUp(false, now) }},
		{"retired", func(s *Server) { s.retire() }},
	}
	for _, algo := range allAlgos {
		for _, tt := range tests {
			t.Run(algo+"/"+tt.name, func(t *testing.T) {
				b := mustBuild(t, cfgBackend(algo, 1, 2, 3), nil)
				p := b.NewPicker(7)
				// Spoiled after the picker was built: it must notice.
				tt.spoil(b.Servers[1])
				got := counts(p, 3000)
				if got["s1"] != 0 || got["<nil>"] != 0 {
					t.Errorf("picks %v: s1 or nil picked", got)
				}
				if got["s0"] == 0 || got["s2"] == 0 {
					t.Errorf("picks %v: a usable server never picked", got)
				}
			})
		}
	}
}

func TestServerComesBackAfterChange(t *testing.T) {
	for _, algo := range allAlgos {
		t.Run(algo, func(t *testing.T) {
			b := mustBuild(t, cfgBackend(algo, 1, 1), nil)
			p := b.NewPicker(3)
			_ = b.Servers[0].SetAdminState(config.AdminMaint)
			if got := counts(p, 200); got["s0"] != 0 {
				t.Fatalf("maint server picked: %v", got)
			}
			_ = b.Servers[0].SetAdminState(config.AdminReady)
			if got := counts(p, 200); got["s0"] == 0 {
				t.Fatalf("server back to ready never picked: %v", got)
			}
		})
	}
}

func TestPickReturnsNilWhenNoServerIsUsable(t *testing.T) {
	for _, algo := range allAlgos {
		t.Run(algo, func(t *testing.T) {
			if s := mustBuild(t, cfgBackend(algo), nil).NewPicker(1).Pick(1, nil); s != nil {
				t.Errorf("empty backend: picked %s", s.Name)
			}
			b := mustBuild(t, cfgBackend(algo, 1, 1), nil)
			p := b.NewPicker(1)
			b.Servers[0].SetUp(false, time.Now())
			_ = b.Servers[1].SetAdminState(config.AdminMaint)
			if s := p.Pick(1, nil); s != nil {
				t.Errorf("all unusable: picked %s", s.Name)
			}
			if s := p.Pick(1, b.Servers[0]); s != nil {
				t.Errorf("all unusable, with exclude: picked %s", s.Name)
			}
		})
	}
}

func TestWeightChangeAfterPickerBuiltIsSeen(t *testing.T) {
	b := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 1, 1), nil)
	p := b.NewPicker(0)
	counts(p, 3) // mid-lap
	b.Servers[0].SetWeight(3)
	got := counts(p, 4000)
	if got["s0"] < 2990 || got["s0"] > 3010 {
		t.Errorf("after weight 3/1: %v, want about 3000/1000", got)
	}
}

func TestLeastConnFollowsCurPerWeight(t *testing.T) {
	tests := []struct {
		name    string
		weights []int
		cur     []int64
		want    string
	}{
		{"lowest count", []int{1, 1, 1}, []int64{5, 2, 9}, "s1"},
		{"ratio to weight", []int{1, 4, 1}, []int64{2, 6, 3}, "s1"}, // 2/1, 6/4, 3/1
		{"idle heavy server", []int{1, 2}, []int64{1, 1}, "s1"},
		{"zero beats any", []int{256, 1}, []int64{1, 0}, "s1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := mustBuild(t, cfgBackend(config.BalanceLeastConn, tt.weights...), nil)
			for i, c := range tt.cur {
				b.Servers[i].Cur.Store(c)
			}
			p := b.NewPicker(0)
			for range 10 {
				if got := p.Pick(0, nil).Name; got != tt.want {
					t.Fatalf("picked %s, want %s", got, tt.want)
				}
			}
		})
	}
}

func TestLeastConnBalancesAndRotatesTies(t *testing.T) {
	b := mustBuild(t, cfgBackend(config.BalanceLeastConn, 1, 1, 1, 1), nil)
	p := b.NewPicker(0)
	// Idle backend: ties rotate, every server gets picks.
	if got := counts(p, 400); len(got) != 4 || got["s0"] != 100 {
		t.Errorf("idle picks %v, want 100 each", got)
	}
	// Connections held: Cur stays level.
	for range 1000 {
		s := p.Pick(0, nil)
		s.Acquire()
	}
	for _, s := range b.Servers {
		if c := s.Cur.Load(); c != 250 {
			t.Errorf("%s: Cur %d, want 250", s.Name, c)
		}
	}
}

func TestSourceIsStableAndMovesFewKeys(t *testing.T) {
	const servers, keys = 10, 20000
	cfg := cfgBackend(config.BalanceSource, make([]int, servers)...)
	for i := range cfg.Servers {
		w := 100
		cfg.Servers[i].Weight = &w
	}
	b := mustBuild(t, cfg, nil)
	p1, p2 := b.NewPicker(1), b.NewPicker(99)
	before := make([]string, keys)
	per := map[string]int{}
	for k := range keys {
		h := mix64(uint64(k) + 12345)
		before[k] = p1.Pick(h, nil).Name
		if again, other := p1.Pick(h, nil).Name, p2.Pick(h, nil).Name; again != before[k] || other != before[k] {
			t.Fatalf("key %d: %s then %s, other loop %s", k, before[k], again, other)
		}
		per[before[k]]++
	}
	for name, n := range per {
		if n < keys/servers*8/10 || n > keys/servers*12/10 {
			t.Errorf("%s holds %d keys, want about %d", name, n, keys/servers)
		}
	}

	moved := func(p *Picker, gone string) (moved, strays int) {
		for k := range keys {
			got := p.Pick(mix64(uint64(k)+12345), nil).Name
			if got != before[k] {
				moved++
				if before[k] != gone {
					strays++
				}
			}
		}
		return
	}
	// Taken down at runtime: only its keys move.
	_ = b.Servers[3].SetAdminState(config.AdminMaint)
	if m, strays := moved(p1, "s3"); strays != 0 || m != per["s3"] {
		t.Errorf("maint s3: %d keys moved (%d not from s3), want exactly the %d of s3", m, strays, per["s3"])
	}
	_ = b.Servers[3].SetAdminState(config.AdminReady)
	if m, _ := moved(p1, ""); m != 0 {
		t.Errorf("s3 back: %d keys differ from the start", m)
	}

	// Removed from the configuration: only its keys move.
	cfg2 := *cfg
	cfg2.Servers = append(append([]*config.Server{}, cfg.Servers[:3]...), cfg.Servers[4:]...)
	b2 := mustBuild(t, &cfg2, b)
	if m, strays := moved(b2.NewPicker(5), "s3"); strays != 0 || m != per["s3"] {
		t.Errorf("s3 removed: %d keys moved (%d not from s3), want exactly the %d of s3", m, strays, per["s3"])
	}
	// Added back as a new server: it takes a share, nothing else moves.
	cfg3 := *cfg
	cfg3.Servers = append(append([]*config.Server{}, cfg2.Servers...), cfgServer(50, 100))
	b3 := mustBuild(t, &cfg3, b2)
	p3 := b3.NewPicker(5)
	newKeys := 0
	for k := range keys {
		got := p3.Pick(mix64(uint64(k)+12345), nil).Name
		if got == "s50" {
			newKeys++
		} else if got != before[k] && before[k] != "s3" {
			t.Fatalf("key %d moved from %s to %s when s50 was added", k, before[k], got)
		}
	}
	if newKeys < keys/servers*8/10 || newKeys > keys/servers*12/10 {
		t.Errorf("new server took %d keys, want about %d", newKeys, keys/servers)
	}
}

func TestSourceFollowsWeights(t *testing.T) {
	b := mustBuild(t, cfgBackend(config.BalanceSource, 1, 2, 3), nil)
	got := map[string]int{}
	p := b.NewPicker(0)
	for k := range 60000 {
		got[p.Pick(mix64(uint64(k)), nil).Name]++
	}
	for i, want := range []int{10000, 20000, 30000} {
		n := got[fmt.Sprintf("s%d", i)]
		if n < want*9/10 || n > want*11/10 {
			t.Errorf("s%d: %d keys, want about %d (%v)", i, n, want, got)
		}
	}
}

func TestRandomTwoChoicesSpreadsWithinBounds(t *testing.T) {
	t.Run("held connections stay level", func(t *testing.T) {
		b := mustBuild(t, cfgBackend(config.BalanceRandom, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1), nil)
		p := b.NewPicker(42)
		for range 10000 {
			p.Pick(0, nil).Acquire()
		}
		lo, hi := int64(1<<62), int64(0)
		for _, s := range b.Servers {
			lo, hi = min(lo, s.Cur.Load()), max(hi, s.Cur.Load())
		}
		// Two choices keep the gap at O(log log n); one choice would give
		// about ±3*sqrt(1000) ≈ ±95.
		if hi-lo > 6 {
			t.Errorf("Cur spread %d..%d, want a gap of at most 6", lo, hi)
		}
	})
	t.Run("held connections follow weights", func(t *testing.T) {
		b := mustBuild(t, cfgBackend(config.BalanceRandom, 1, 3), nil)
		p := b.NewPicker(42)
		for range 4000 {
			p.Pick(0, nil).Acquire()
		}
		if c := b.Servers[1].Cur.Load(); c < 2900 || c > 3100 {
			t.Errorf("weight 3 server holds %d of 4000, want about 3000", c)
		}
	})
	t.Run("idle backend spreads by weight", func(t *testing.T) {
		p := mustBuild(t, cfgBackend(config.BalanceRandom, 1, 3), nil).NewPicker(42)
		got := counts(p, 40000)
		if got["s1"] < 28000 || got["s1"] > 32000 {
			t.Errorf("idle picks %v, want about 30000 for s1", got)
		}
	})
}

func TestExcludeSkipsUnlessOnlyUsable(t *testing.T) {
	for _, algo := range allAlgos {
		t.Run(algo, func(t *testing.T) {
			b := mustBuild(t, cfgBackend(algo, 3, 1, 1), nil)
			p := b.NewPicker(9)
			for k := range 2000 {
				ex := b.Servers[k%3]
				s := p.Pick(mix64(uint64(k)), ex)
				if s == nil || s == ex {
					t.Fatalf("pick %d excluding %s: got %v", k, ex.Name, s)
				}
			}
			_ = b.Servers[1].SetAdminState(config.AdminMaint)
			_ = b.Servers[2].SetAdminState(config.AdminDrain)
			if s := p.Pick(1, b.Servers[0]); s != b.Servers[0] {
				t.Errorf("only usable server excluded: got %v, want it anyway", s)
			}
		})
	}
}

func TestFullServersAreAvoidedWhileOthersHaveRoom(t *testing.T) {
	for _, algo := range []string{config.BalanceRoundRobin, config.BalanceLeastConn, config.BalanceRandom} {
		t.Run(algo, func(t *testing.T) {
			cfg := cfgBackend(algo, 10, 1)
			cfg.Servers[0].Maxconn = 2
			b := mustBuild(t, cfg, nil)
			b.Servers[0].Cur.Store(2)
			p := b.NewPicker(5)
			if got := counts(p, 100); got["s1"] != 100 {
				t.Errorf("picks %v: the full server was chosen while s1 had room", got)
			}
			b.Servers[1].SetMaxconn(1)
			b.Servers[1].Cur.Store(1)
			if s := p.Pick(0, nil); s == nil {
				t.Errorf("all full: got nil, want a server so the caller queues")
			}
		})
	}
}

func TestPickDoesNotAllocate(t *testing.T) {
	for _, algo := range allAlgos {
		t.Run(algo, func(t *testing.T) {
			b := mustBuild(t, cfgBackend(algo, 1, 2, 3, 4, 5, 100, 100, 100), nil)
			p := b.NewPicker(1)
			var h uint64
			if n := testing.AllocsPerRun(1000, func() {
				h++
				p.Pick(mix64(h), b.Servers[h%8])
			}); n != 0 {
				t.Errorf("%v allocations per Pick, want 0", n)
			}
		})
	}
}

func benchBackend(b *testing.B, algo string, n int, mixed bool) *Backend {
	weights := make([]int, n)
	for i := range weights {
		weights[i] = 100
		if mixed {
			weights[i] = 1 + i%MaxWeight
		}
	}
	return mustBuild(b, cfgBackend(algo, weights...), nil)
}

func BenchmarkPick(b *testing.B) {
	for _, algo := range allAlgos {
		for _, n := range []int{2, 100, 10000} {
			for _, mixed := range []bool{false, true} {
				name := fmt.Sprintf("%s/n=%d/w=100", algo, n)
				if mixed {
					if n == 2 {
						continue
					}
					name = fmt.Sprintf("%s/n=%d/w=1..256", algo, n)
				}
				b.Run(name, func(b *testing.B) {
					be := benchBackend(b, algo, n, mixed)
					p := be.NewPicker(1)
					b.ReportAllocs()
					var h uint64
					for b.Loop() {
						h++
						p.Pick(h*0x9e3779b97f4a7c15, nil)
					}
				})
			}
		}
	}
}

// BenchmarkPickAfterChange measures a pick that finds the change counter
// moved (one server flapping) and rebuilds its view first.
func BenchmarkPickAfterChange(b *testing.B) {
	for _, algo := range allAlgos {
		b.Run(algo+"/n=10000", func(b *testing.B) {
			be := benchBackend(b, algo, 10000, false)
			p := be.NewPicker(1)
			now := time.Now()
			b.ReportAllocs()
			up := false
			for b.Loop() {
				be.Servers[5000].SetUp(up, now)
				up = !up
				p.Pick(1, nil)
			}
		})
	}
}

func TestHashAddrIgnoresMappingAndSpreads(t *testing.T) {
	v4 := netip.MustParseAddr("192.0.2.1")
	mapped := netip.MustParseAddr("::ffff:192.0.2.1")
	if HashAddr(v4) != HashAddr(mapped) {
		t.Errorf("IPv4 and its mapped form hash differently")
	}
	if HashAddr(v4) == HashAddr(netip.MustParseAddr("192.0.2.2")) {
		t.Errorf("neighbour addresses collide")
	}
	// Consecutive client addresses spread over the servers of a source backend.
	p := mustBuild(t, cfgBackend(config.BalanceSource, 1, 1, 1, 1), nil).NewPicker(0)
	got := map[string]int{}
	for i := range 4000 {
		got[p.Pick(HashAddr(netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)})), nil).Name]++
	}
	for name, n := range got {
		if n < 800 || n > 1200 {
			t.Errorf("%s: %d of 4000 clients (%v)", name, n, got)
		}
	}
	if n := testing.AllocsPerRun(100, func() { HashAddr(mapped) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}
