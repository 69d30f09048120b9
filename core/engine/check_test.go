package engine

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

func checkConfig(gen int64, hc *config.HealthCheck, ports ...int) *config.Config {
	c := &config.Config{
		Generation: gen,
		Tuning:     config.Tuning{Nbthread: 2},
		Backends:   []config.Backend{{Name: "be", HealthCheck: hc}},
		Frontends:  []config.Frontend{{Name: "fe", DefaultBackend: "be"}},
	}
	for i, p := range ports {
		c.Backends[0].Servers = append(c.Backends[0].Servers, &config.Server{Name: "s" + string(rune('1'+i)), Address: "127.0.0.1", Port: p})
	}
	c.Normalize()
	return c
}

// engineBackend reads what Apply published for backend name.
func engineBackend(e *Engine, name string) (*balance.Backend, *proxy.Checker) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if b := e.backends[name]; b != nil {
		return b.bb, b.chk
	}
	return nil, nil
}

// quietOrigin accepts connections and reads them until the peer goes.
// (Not io.Copy: TCPConn.ReadFrom splices through pipes that Go's runtime
// caches, which would show as fds that the engine never opened.)
func quietOrigin(t *testing.T) int {
	t.Helper()
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		buf := make([]byte, 512)
		for {
			if _, err := c.Read(buf); err != nil {
				return
			}
		}
	}).Port()
}

// TestEngineHealthChecksAcrossGenerations: the engine starts a checker
// for a backend with a health check, keeps it over an unrelated change,
// restarts it over a changed check without losing the observed state,
// stops it and sets servers up when the check is removed, and leaves no
// fd behind after Close.
func TestEngineHealthChecksAcrossGenerations(t *testing.T) {
	live := quietOrigin(t)
	dead := testutil.FreePort(t)
	before := testutil.OpenFDs(t)
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	// s2 fails at once (connection refused); s1's probe succeeds unless a
	// loop stalls past the timeout, which with fall 1 would take s1 down:
	// a timeout far above the interval (the prober allows it, validation
	// would not) keeps the test about the checker's life cycle on a
	// loaded machine under -race.
	hc := &config.HealthCheck{Type: config.CheckTCP, IntervalMs: 40, TimeoutMs: 2000, Rise: 1, Fall: 1}

	apply(t, e, checkConfig(1, hc, live, dead))
	bb, chk1 := engineBackend(e, "be")
	if chk1 == nil {
		t.Fatal("no checker for a backend with a health check")
	}
	s1, s2 := bb.Server("s1"), bb.Server("s2")
	testutil.Eventually(t, 5*time.Second, func() bool { return !s2.Up() }, "s2 down")
	if !s1.Up() {
		t.Fatal("live server s1 down")
	}

	// Unrelated change: same checker.
	c2 := checkConfig(2, hc, live, dead)
	c2.Frontends[0].Maxconn = 10
	apply(t, e, c2)
	if _, chk := engineBackend(e, "be"); chk != chk1 {
		t.Error("checker restarted by a change that does not touch the check")
	}

	// Changed check: new checker, s2 still down (same Server object).
	hc3 := *hc
	hc3.IntervalMs = 50
	apply(t, e, checkConfig(3, &hc3, live, dead))
	bb3, chk3 := engineBackend(e, "be")
	if chk3 == nil || chk3 == chk1 || bb3.Server("s2") != s2 {
		t.Fatalf("changed check: checker %p (was %p), server carried %v", chk3, chk1, bb3.Server("s2") == s2)
	}
	if s2.Up() {
		t.Error("s2 came up on a restart of the checks")
	}
	runs := func(c *proxy.Checker) (n uint64) {
		for _, st := range c.States() {
			n += st.Runs
		}
		return n
	}
	r1 := runs(chk1)
	testutil.Eventually(t, 5*time.Second, func() bool { return runs(chk3) >= 4 }, "new checker probing")
	if runs(chk1) != r1 {
		t.Error("replaced checker still probes")
	}

	// No check: everything up, checker gone; still up a few intervals later.
	apply(t, e, checkConfig(4, nil, live, dead))
	if _, chk := engineBackend(e, "be"); chk != nil {
		t.Fatal("checker kept after the check was removed")
	}
	if !s2.Up() {
		t.Fatal("s2 still down after the check was removed")
	}
	// Three former intervals on the loops' clocks: had the stopped
	// checker kept a timer, it would have fired and probed by then.
	r3 := runs(chk3)
	looptest.ClockPasses(t, 3*time.Duration(hc3.IntervalMs)*time.Millisecond, e.loops...)
	if !s2.Up() || runs(chk3) != r3 {
		t.Errorf("after removal: s2 up=%v, checker runs %d -> %d", s2.Up(), r3, runs(chk3))
	}

	// Back again, then Close: every probe socket and loop fd released.
	apply(t, e, checkConfig(5, hc, live, dead))
	testutil.Eventually(t, 5*time.Second, func() bool { return !s2.Up() }, "s2 down again")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Close(ctx); err != nil {
		t.Fatal(err)
	}
	var left []string
	testutil.Eventually(t, 5*time.Second, func() bool {
		left = testutil.FDsOpenedSince(t, before)
		return len(left) == 0
	}, func() string { return fmt.Sprintf("the fds opened by the engine to close after Close: %v", left) })
}

// TestEngineStatsShowEachServersCheck: /api/v1/stats shows every checked
// server's last result as HAProxy names it (L4OK, L4CON) with its reason,
// and no "check" for the servers of a backend without health check.
func TestEngineStatsShowEachServersCheck(t *testing.T) {
	live := quietOrigin(t)
	dead := testutil.FreePort(t)
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(context.Background())
	hc := &config.HealthCheck{Type: config.CheckTCP, IntervalMs: 40, TimeoutMs: 2000, Rise: 1, Fall: 1}
	c := checkConfig(1, hc, live, dead)
	c.Backends = append(c.Backends, config.Backend{Name: "unchecked", Servers: []*config.Server{{Name: "u1", Address: "127.0.0.1", Port: live}}})
	c.Normalize()
	apply(t, e, c)
	check := func(be, srv string) *stats.Check {
		for _, b := range e.Stats().Backends {
			for _, s := range b.Servers {
				if b.Name == be && s.Name == srv {
					return s.Check
				}
			}
		}
		t.Fatalf("no server %s/%s in the stats", be, srv)
		return nil
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		c1, c2 := check("be", "s1"), check("be", "s2")
		return c1.Runs >= 2 && c2.Runs >= 2
	}, "two probes each")
	c1, c2 := check("be", "s1"), check("be", "s2")
	if c1.Status != "L4OK" || c1.Reason != "connected" || c1.Type != "tcp" || c1.Health != 1 || c1.CheckedAt == nil {
		t.Errorf("live server: %+v", c1)
	}
	if c2.Status != "L4CON" || c2.Reason != "connection refused" || c2.Health != 0 || c2.Fails != c2.Runs {
		t.Errorf("refusing server: %+v", c2)
	}
	if c2.Since.After(*c2.CheckedAt) || c2.Since.Equal(*c2.CheckedAt) {
		t.Errorf("L4CON since %v, last checked %v: want since the first probe", c2.Since, *c2.CheckedAt)
	}
	if u := check("unchecked", "u1"); u != nil {
		t.Errorf("server without health check has a check: %+v", u)
	}

	// A changed check restarts the checker: s2 keeps its result and since
	// when, not INI until its next probe.
	hc2 := *hc
	hc2.IntervalMs = 60000
	hc2.TimeoutMs = 2000
	cfg2 := checkConfig(2, &hc2, live, dead)
	cfg2.Backends = append(cfg2.Backends, c.Backends[1])
	cfg2.Normalize()
	before := check("be", "s2")
	apply(t, e, cfg2)
	if after := check("be", "s2"); after.Status != "L4CON" || !after.Since.Equal(before.Since) || after.Reason != "connection refused" {
		t.Errorf("after a check change: %+v, want L4CON since %v", after, before.Since)
	}
}
