package balance

import (
	"fmt"
	"net/netip"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// cfgBackend returns a normalized backend config with one server per
// weight, named s0, s1, ... on distinct addresses.
func cfgBackend(algo string, weights ...int) *config.Backend {
	b := &config.Backend{Name: "web", Balance: algo}
	for i, w := range weights {
		b.Servers = append(b.Servers, cfgServer(i, w))
	}
	b.Normalize()
	return b
}

// ownServer replaces l[i] with a copy and returns it, to be changed: a
// config's servers are shared with the configs copied from it and never
// written (config.Backend.Servers).
func ownServer(l []*config.Server, i int) *config.Server {
	s := *l[i]
	l[i] = &s
	return &s
}

// cfgServer is a normalized server (Build takes configs as Normalize
// leaves them).
func cfgServer(i, w int) *config.Server {
	s := &config.Server{
		Name:    fmt.Sprintf("s%d", i),
		Address: netip.AddrFrom4([4]byte{10, byte(i >> 16), byte(i >> 8), byte(i)}).String(),
		Port:    8080,
		Weight:  &w,
	}
	s.Normalize()
	return s
}

func mustBuild(t testing.TB, cfg *config.Backend, prev *Backend) *Backend {
	t.Helper()
	b, err := Build(cfg, prev, noResolve)
	if err != nil {
		t.Fatalf("Build: %v", err)
	}
	return b
}

func noResolve(host string) (netip.Addr, error) {
	return netip.Addr{}, fmt.Errorf("no resolution in tests: %q", host)
}

// counts picks n times and returns the picks per server name.
func counts(p *Picker, n int) map[string]int {
	m := map[string]int{}
	for i := 0; i < n; i++ {
		s := p.Pick(uint64(i), nil)
		if s == nil {
			m["<nil>"]++
			continue
		}
		m[s.Name]++
	}
	return m
}

var allAlgos = []string{config.BalanceRoundRobin, config.BalanceLeastConn, config.BalanceSource, config.BalanceRandom}
