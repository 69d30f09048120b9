package listen

import (
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Moving a listener to a group over more loops keeps what waits in the
// kernel backlog (the socket is duplicated, never closed) and spreads new
// connections over the new loops.
func TestAdoptMovesAListenerWithoutLosingItsBacklog(t *testing.T) {
	big := startGroup(t, 3, 0)
	small := NewGroup(big.Loops()[:1], 0, distribution(t, "", 0))
	s := newSink(t, big)
	ln, err := small.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, "owner", s.accept)
	if err != nil {
		t.Fatal(err)
	}
	ln.Pause()
	waitPaused(t, ln)
	dialN(t, ln.Addr().String(), 5) // in the backlog: nobody accepts

	moved, err := big.Adopt(ln, nil, "owner2", nil)
	if err != nil {
		t.Fatal(err)
	}
	defer moved.Close()
	if !moved.Paused() || moved.Addr() != ln.Addr() || moved.Owner != "owner2" || moved.Group() != big {
		t.Fatalf("adopted listener: paused %v addr %v owner %v", moved.Paused(), moved.Addr(), moved.Owner)
	}
	ln.Close()
	small.Retire()
	moved.Resume()
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 5 }, "the 5 connections of the backlog")

	big.SetDistribution(distribution(t, config.DistRoundRobin, 0))
	dialN(t, moved.Addr().String(), 30)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 35 }, "30 more")
	for id, n := range s.counts(3) {
		if n == 0 {
			t.Errorf("loop %d got no connection after the move: %v", id, s.counts(3))
		}
	}
}

// Retire (unlike Close) never closes a connection: what was handed off
// stays with its AcceptFunc.
func TestRetireIsIdempotentAndClosesNothingHandedOff(t *testing.T) {
	big := startGroup(t, 2, 0)
	g := NewGroup(big.Loops(), 0, distribution(t, "", 0))
	s := newSink(t, big)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	dialN(t, ln.Addr().String(), 10)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 10 }, "accepted")
	ln.Close()
	g.Retire()
	g.Retire() // idempotent
	if n := s.total.Load(); n != 10 {
		t.Fatalf("%d connections handed off, want 10", n)
	}
}

func TestAdoptRefusesAClosedListener(t *testing.T) {
	g := startGroup(t, 1, 0)
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
	if _, err := g.Adopt(ln, nil, nil, nil); err == nil {
		t.Fatal("adopting a closed listener succeeded")
	}
	if _, err := g.Adopt(ln, []int{5}, nil, nil); err == nil {
		t.Fatal("thread out of range accepted")
	}
}
