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
)

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
// slice is "thread i" of BindSpec.Threads. Any goroutine.
func NewGroup(loops []*loop.Loop, ringSize int) *Group {
	if ringSize <= 0 {
		ringSize = DefaultRingSize
	}
	g := &Group{loops: loops, rings: make([]*Ring, len(loops))}
	g.maxaccept.Store(config.DefaultMaxaccept)
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

// SetDistribution selects the accept distribution (config.Dist* values;
// unknown or empty = p2c-rr) and the maximum number of connections a loop
// accepts per wake-up (<= 0 = config.DefaultMaxaccept). Any goroutine;
// effective at the next accept.
func (g *Group) SetDistribution(alg string, maxaccept int) {
	switch alg {
	case config.DistRoundRobin:
		g.alg.Store(distRoundRobin)
	case config.DistLeastConn:
		g.alg.Store(distLeastConn)
	case config.DistLocal:
		g.alg.Store(distLocal)
	default:
		g.alg.Store(distP2CRR)
	}
	if maxaccept <= 0 {
		maxaccept = config.DefaultMaxaccept
	}
	g.maxaccept.Store(int32(min(maxaccept, 1<<30)))
}

// load is loop i's accept load: connections waiting in its ring plus the
// live connections it owns (Activity.Conns, maintained by the proxy).
func (g *Group) load(i int) int64 {
	return int64(g.rings[i].Len()) + g.loops[i].Activity().Conns.Load()
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
					fd, ln, ok := r.pop()
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
