package balance

import (
	"fmt"
	"math/rand/v2"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// shape is what a built backend is, for comparing two builds: per server
// its name, whether it is prev's object (reused) and its values; the
// slot list by name; the index.
func shape(b, prev *Backend) string {
	var s strings.Builder
	for _, sv := range b.Servers {
		reused := prev != nil && prev.byName[sv.Name] == sv
		fmt.Fprintf(&s, "%s %v %s w%d m%d %s up%v|", sv.Name, reused, sv.Addr, sv.Weight(), sv.Maxconn(), sv.AdminState(), sv.Up())
	}
	s.WriteString("slots:")
	for _, sv := range b.slots {
		if sv == nil {
			s.WriteString("_,")
		} else {
			s.WriteString(sv.Name + ",")
		}
	}
	for n, sv := range b.byName {
		if !slices.Contains(b.Servers, sv) {
			return "index holds a server not in the list: " + n
		}
	}
	fmt.Fprintf(&s, " index:%d", len(b.byName))
	return s.String()
}

// TestBuildFromAsBuild: the fast path of Build on a previous generation
// (buildFrom) gives what the general path gives, for random sequences of
// server changes (values, addresses, removals, additions, re-adds of a
// removed name, moves), and Retire retires the same servers.
func TestBuildFromAsBuild(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	cfg := cfgBackend(config.BalanceSource, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	prev := mustBuild(t, cfg, nil)
	next := 100
	fastSeen := 0
	for step := range 400 {
		c := *cfg
		c.Servers = slices.Clone(cfg.Servers)
		switch op := rng.IntN(8); {
		case op == 0 && len(c.Servers) > 2: // remove
			i := rng.IntN(len(c.Servers))
			c.Servers = slices.Delete(c.Servers, i, i+1)
		case op == 1: // add at the end
			c.Servers = append(c.Servers, cfgServer(next, 1+rng.IntN(5)))
			next++
		case op == 2: // value changes
			for range 1 + rng.IntN(3) {
				i := rng.IntN(len(c.Servers))
				w := rng.IntN(200)
				c.Servers[i].Weight = &w
				c.Servers[i].Maxconn = rng.IntN(3)
				c.Servers[i].AdminState = []string{config.AdminReady, config.AdminDrain, config.AdminMaint}[rng.IntN(3)]
			}
		case op == 3: // address change
			i := rng.IntN(len(c.Servers))
			c.Servers[i].Port = 9000 + rng.IntN(100)
		case op == 4 && len(c.Servers) > 1: // move
			i, j := rng.IntN(len(c.Servers)), rng.IntN(len(c.Servers))
			c.Servers[i], c.Servers[j] = c.Servers[j], c.Servers[i]
		case op == 5 && len(c.Servers) > 2: // remove one, re-add its name at the end
			i := rng.IntN(len(c.Servers))
			s := c.Servers[i]
			c.Servers = append(slices.Delete(c.Servers, i, i+1), s)
		case op == 6: // add several
			for range 1 + rng.IntN(10) {
				c.Servers = append(c.Servers, cfgServer(next, 1))
				next++
			}
		}
		// fast first: the servers both reuse get their values from it
		fast, err := build(&c, prev, noResolve, true)
		if err != nil {
			t.Fatal(err)
		}
		if fast.from == prev {
			fastSeen++
		}
		got := shape(fast, prev)
		slow, err := build(&c, prev, noResolve, false)
		if err != nil {
			t.Fatal(err)
		}
		if want := shape(slow, prev); got != want {
			t.Fatalf("step %d: buildFrom gives\n%s\nBuild gives\n%s", step, got, want)
		}
		// Retire: the same servers of prev are dropped either way.
		var dropSlow, dropFast []string
		for _, s := range prev.Servers {
			if slow.byName[s.Name] != s {
				dropSlow = append(dropSlow, s.Name)
			}
		}
		if fast.from == prev {
			for _, s := range fast.dropped {
				dropFast = append(dropFast, s.Name)
			}
			slices.Sort(dropFast)
			slices.Sort(dropSlow)
			if !slices.Equal(dropFast, dropSlow) {
				t.Fatalf("step %d: dropped %v, want %v", step, dropFast, dropSlow)
			}
		}
		prev.Retire(fast)
		prev, cfg = fast, &c
	}
	if fastSeen < 100 {
		t.Fatalf("buildFrom took only %d of 400 steps", fastSeen)
	}
}

// TestBuildFromResolvesAHostNameAgain: a server kept under another
// spelling of its address (a host name that resolves to the same IP)
// is looked up again when the host name comes back, and the backend is
// not taken for one of IP addresses only.
func TestBuildFromResolvesAHostNameAgain(t *testing.T) {
	lookups := 0
	resolve := func(host string) (netip.Addr, error) {
		lookups++
		return netip.MustParseAddr("10.0.0.0"), nil
	}
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1, 1)
	addr := cfg.Servers[0].Address // 10.0.0.0
	cfg.Servers[0].Address = "name.test"
	b, err := Build(cfg, nil, resolve)
	if err != nil || b.Literal() || lookups != 1 {
		t.Fatalf("%v literal %v lookups %d", err, b.Literal(), lookups)
	}
	cfg.Servers[0].Address = addr
	b2, err := Build(cfg, b, resolve)
	if err != nil || !b2.Literal() || b2.Servers[0] != b.Servers[0] {
		t.Fatalf("%v literal %v, reused %v", err, b2.Literal(), b2.Servers[0] == b.Servers[0])
	}
	cfg.Servers[0].Address = "name.test"
	b3, err := Build(cfg, b2, resolve)
	if err != nil || b3.Literal() || lookups != 2 {
		t.Fatalf("%v literal %v lookups %d", err, b3.Literal(), lookups)
	}
}
