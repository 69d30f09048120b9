package engine

import (
	"fmt"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestEngineServerFieldChangeInPlace: a change of weight, maxconn or
// admin_state keeps the running backend (same balance.Backend, the same
// servers) and sets the new values on its servers; a change of address,
// a server added or a backend field builds the backend again, as does a
// backend whose servers are host names (resolved again on each Apply).
func TestEngineServerFieldChangeInPlace(t *testing.T) {
	e := newTestEngine(t)
	p := testutil.FreePort(t)
	a := greeter(t, "A")
	c := tcpConfig(1, a, p)
	for i := range 100 {
		c.Backends[0].Servers = append(c.Backends[0].Servers, config.Server{Name: fmt.Sprintf("x%03d", i),
			Address: "127.0.0.1", Port: 20000 + i, AdminState: config.AdminMaint})
	}
	c.Normalize()
	apply(t, e, c)
	conn := hello(t, p, "A")
	bb := e.backends["be"].bb

	step := func(gen int64, mutate func(c *config.Config)) *config.Config {
		n := c.Clone()
		n.Generation = gen
		mutate(n)
		n.Normalize()
		apply(t, e, n)
		c = n
		return n
	}
	w := 9
	step(2, func(n *config.Config) {
		n.Backends[0].Servers[5].Weight = &w
		n.Backends[0].Servers[6].Maxconn = 3
		n.Backends[0].Servers[7].AdminState = config.AdminDrain
	})
	if e.backends["be"].bb != bb {
		t.Fatal("a weight/maxconn/admin_state change rebuilt the backend")
	}
	if s := bb.Servers[5]; s.Weight() != 9 {
		t.Fatalf("weight %d", s.Weight())
	}
	if s := bb.Servers[6]; s.Maxconn() != 3 {
		t.Fatalf("maxconn %d", s.Maxconn())
	}
	if s := bb.Servers[7]; s.AdminState() != config.AdminDrain {
		t.Fatalf("admin state %s", s.AdminState())
	}
	echo(t, conn, "still served")
	hello(t, p, "A")

	step(3, func(n *config.Config) { n.Backends[0].Servers[8].Port = 30000 })
	if e.backends["be"].bb == bb {
		t.Fatal("an address change was applied in place")
	}
	bb = e.backends["be"].bb
	step(4, func(n *config.Config) {
		n.Backends[0].Servers = append(n.Backends[0].Servers, config.Server{Name: "y", Address: "127.0.0.1", Port: 30001})
	})
	if e.backends["be"].bb == bb {
		t.Fatal("an added server was applied in place")
	}
	bb = e.backends["be"].bb
	step(5, func(n *config.Config) { n.Backends[0].Balance = config.BalanceLeastConn })
	if e.backends["be"].bb == bb {
		t.Fatal("a backend field change was applied in place")
	}
	step(6, func(n *config.Config) { n.Backends[0].Servers[9].Address = "localhost" })
	bb = e.backends["be"].bb
	step(7, func(n *config.Config) { n.Backends[0].Servers[10].Weight = &w })
	if e.backends["be"].bb == bb {
		t.Fatal("a backend with a host name was not built again (not resolved again)")
	}
	echo(t, conn, "still served after the rebuilds")
	hello(t, p, "A")
}
