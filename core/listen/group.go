package listen

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
)

// DefaultRingSize is the accept ring size per loop when NewGroup gets 0, as
// HAProxy's ACCEPT_QUEUE_SIZE.
const DefaultRingSize = 512

// Distribution algorithms, as stored in the Group.
const (
	distP2CRR int32 = iota
	distRoundRobin
	distLeastConn
	distLocal
	distP2C
)

// Distribution is how a Group spreads the connections a loop accepts over
// the loops of the group, and how many a loop accepts per wake-up. It is a
// value from ParseDistribution: the zero Distribution accepts nothing.
type Distribution struct {
	alg       int32
	maxaccept int32
}

// ParseDistribution reads tuning.distribution (config.Dist* values) and
// tuning.maxaccept as config.Normalize left them; it fills no default (see
// the config package doc, "Defaults") and refuses, with config.ErrInvalid,
// an unknown or empty algorithm and a maxaccept below 1 (a loop that
// accepts nothing per wake-up is woken again at once by its level-triggered
// listener, for ever).
func ParseDistribution(alg string, maxaccept int) (Distribution, error) {
	d := Distribution{maxaccept: int32(min(maxaccept, 1<<30))}
	switch alg {
	case config.DistP2CRR:
		d.alg = distP2CRR
	case config.DistRoundRobin:
		d.alg = distRoundRobin
	case config.DistLeastConn:
		d.alg = distLeastConn
	case config.DistLocal:
		d.alg = distLocal
	case config.DistP2C:
		d.alg = distP2C
	default:
		return Distribution{}, fmt.Errorf("accept distribution %q: %w", alg, config.ErrInvalid)
	}
	if maxaccept < 1 {
		return Distribution{}, fmt.Errorf("maxaccept %d: must be at least 1 (config.Normalize sets it): %w", maxaccept, config.ErrInvalid)
	}
	return d, nil
}

// Group is the set of loops that accept connections and their accept rings.
// One Group serves every Listener of the engine.
type Group struct {
	loops     []*loop.Loop
	rings     []*Ring
	alg       atomic.Int32
	maxaccept atomic.Int32
	closeOnce sync.Once
}

// NewGroup makes one accept ring of ringSize entries (rounded up to a power
// of two, at least 2; 0 = DefaultRingSize) per loop and adds it to its loop as a Source
// (through Exec: the loops may already run, or start later). Loop i of the
// slice is "thread i" of BindSpec.Threads. d is its first distribution
// (see SetDistribution). Any goroutine.
func NewGroup(loops []*loop.Loop, ringSize int, d Distribution) *Group {
	if ringSize <= 0 {
		ringSize = DefaultRingSize
	}
	g := &Group{loops: loops, rings: make([]*Ring, len(loops))}
	g.SetDistribution(d)
	for i, l := range loops {
		r := newRing(ringSize)
		r.g = g
		g.rings[i] = r
		l.Exec(func(l *loop.Loop) { l.AddSource(r) })
	}
	return g
}

// Loops returns the loops of the group (do not modify).
func (g *Group) Loops() []*loop.Loop { return g.loops }

// Ring returns loop i's accept ring.
func (g *Group) Ring(i int) *Ring { return g.rings[i] }

// SetDistribution selects the accept distribution and the maximum number
// of connections a loop accepts per wake-up, as ParseDistribution accepted
// them. Any goroutine; effective at the next accept.
func (g *Group) SetDistribution(d Distribution) {
	g.alg.Store(d.alg)
	g.maxaccept.Store(d.maxaccept)
}

// load is loop i's accept load for ln (seed 001, HAProxy's listener_accept):
// connections waiting in its ring (every bind's: the ring is the loop's)
// plus the live connections of ln's bind it owns (ln.conns, thr_conn), not
// every connection of the loop: a loop full of another bind's long tunnels
// is not loaded for this bind.
func (g *Group) load(ln *Listener, i int) int64 {
	return int64(g.rings[i].Len()) + ln.conns.Load(g.loops[i].ID())
}

// Close removes the rings from their loops and closes the fds still queued
// in them (connections accepted but never handed off), giving their
// reserved slots back (Listener.Release). Call it after every
// Listener of the group is closed; control goroutine only (it waits for the
// loops, so never from a loop thread).
func (g *Group) Close() {
	g.closeOnce.Do(func() {
		var wg sync.WaitGroup
		for i, l := range g.loops {
			r := g.rings[i]
			wg.Add(1)
			drain := func() {
				for {
					fd, _, ln, ok := r.pop()
					if !ok {
						break
					}
					closeFd(fd)
					ln.Release()
				}
			}
			if !l.Exec(func(l *loop.Loop) { l.RemoveSource(r); drain(); wg.Done() }) {
				drain() // the loop stopped: nobody else pops this ring
				wg.Done()
			}
		}
		wg.Wait()
	})
}

func (g *Group) checkThreads(threads []int) ([]int, error) {
	if len(g.loops) == 0 {
		return nil, fmt.Errorf("listen: no loops: %w", config.ErrInvalid)
	}
	if len(threads) == 0 {
		all := make([]int, len(g.loops))
		for i := range all {
			all[i] = i
		}
		return all, nil
	}
	seen := make(map[int]bool, len(threads))
	out := make([]int, 0, len(threads))
	for _, t := range threads {
		if t < 0 || t >= len(g.loops) {
			return nil, fmt.Errorf("listen: thread %d out of range 0..%d: %w", t, len(g.loops)-1, config.ErrInvalid)
		}
		if !seen[t] {
			seen[t] = true
			out = append(out, t)
		}
	}
	return out, nil
}
