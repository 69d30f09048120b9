package engine

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
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
		c.Backends[0].Servers = append(c.Backends[0].Servers, &config.Server{Name: fmt.Sprintf("x%03d", i),
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
		n.Backends[0].Servers = append(n.Backends[0].Servers, &config.Server{Name: "y", Address: "127.0.0.1", Port: 30001})
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

// TestEngineInPlaceChangeNeedsNoLoopRound: a change that retires nothing
// (weight, drain) and keeps the tuning is applied without a round of the
// loops: Apply returns while every loop is busy, without waiting for any.
// A change that puts a server in maint still asks the loops (they close
// its pooled connections), as does a tuning change.
func TestEngineInPlaceChangeNeedsNoLoopRound(t *testing.T) {
	var warned atomic.Int64 // "not every loop confirmed": a round the busy loops did not answer
	log := slog.New(countHandler{slog.DiscardHandler, &warned})
	e, err := New(Options{Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	p := testutil.FreePort(t)
	c := tcpConfig(1, greeter(t, "A"), p)
	apply(t, e, c)
	next := func(mutate func(n *config.Config)) *config.Config {
		n := c.Clone()
		n.Generation++
		mutate(n)
		n.Normalize()
		c = n
		return n
	}
	// waits applies n while every loop is blocked, and reports whether
	// Apply waited for a loop: it did not return before the loops were
	// released, or it gave up on a loop (liveLoopsWait) and said so.
	waits := func(n *config.Config) bool {
		ch := make(chan struct{})
		var once sync.Once
		release := func() { once.Do(func() { close(ch) }) }
		defer release()
		for _, l := range e.loops {
			l.Exec(func(*loop.Loop) { <-ch })
		}
		before := warned.Load()
		done := make(chan error, 1)
		go func() {
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			done <- e.Apply(ctx, n)
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatal(err)
			}
			return warned.Load() != before
		case <-time.After(5 * time.Second):
			release()
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			return true
		}
	}
	w := 7
	if waits(next(func(n *config.Config) { n.Backends[0].Servers[0].Weight = &w })) {
		t.Fatal("a weight change waited for the loops")
	}
	if waits(next(func(n *config.Config) { n.Backends[0].Servers[0].AdminState = config.AdminDrain })) {
		t.Fatal("a drain waited for the loops")
	}
	if !waits(next(func(n *config.Config) { n.Backends[0].Servers[0].AdminState = config.AdminMaint })) {
		t.Fatal("a server put in maint did not ask the loops to close its pooled connections")
	}
	if !waits(next(func(n *config.Config) { n.Tuning.Bufsize = 32768 })) {
		t.Fatal("a tuning change did not wait for the loops to take it")
	}
	// the tuning the loops took is not sent again
	if waits(next(func(n *config.Config) { n.Backends[0].Servers[0].AdminState = config.AdminReady })) {
		t.Fatal("a change after a tuning change waited for the loops")
	}
}

// countHandler counts the records of level warning and above.
type countHandler struct {
	slog.Handler
	n *atomic.Int64
}

func (h countHandler) Enabled(context.Context, slog.Level) bool { return true }
func (h countHandler) Handle(_ context.Context, r slog.Record) error {
	if r.Level >= slog.LevelWarn {
		h.n.Add(1)
	}
	return nil
}
func (h countHandler) WithAttrs([]slog.Attr) slog.Handler { return h }
func (h countHandler) WithGroup(string) slog.Handler      { return h }
