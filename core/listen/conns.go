package listen

import "sync/atomic"

// LoopConns counts the live connections of one bind per loop, HAProxy's
// thr_conn (src/listener.c): one more when a loop takes a connection of
// the bind (the hand-off to its AcceptFunc), one less when that connection
// ends (Done, on the loop that owns it). The accept distribution compares
// it, plus the loop's accept-ring length, between its candidates (seed
// 001): the load of a loop for this bind, so that connections of another
// bind (a busy tcp frontend beside an idle http one) do not push this
// bind's connections off the loops that hold them.
//
// It is indexed by loop ID (stable when nbthread changes, unlike the index
// in a Group), so a Listener moved by Adopt keeps its counts. Counters are
// allocated in chunks of loopChunk loops, the first time a loop of the
// chunk takes a connection (or at Open, for the Group's loops), never per
// connection; IDs from MaxLoopID on are not counted. Any goroutine; a
// LoopConns must not be copied after first use.
type LoopConns struct {
	chunks [MaxLoopID / loopChunk]atomic.Pointer[[loopChunk]atomic.Int64]
}

// MaxLoopID bounds the loop IDs a LoopConns counts (tuning.nbthread is at
// most 1024; draining loops follow the active ones).
const MaxLoopID = 4096

const loopChunk = 64

// NewLoopConns returns counters for a bind (BindSpec.Conns), all zero.
func NewLoopConns() *LoopConns { return new(LoopConns) }

// chunk returns the counters of loop id's chunk, allocating it if asked.
func (c *LoopConns) chunk(id int, alloc bool) *[loopChunk]atomic.Int64 {
	if c == nil || id < 0 || id >= MaxLoopID {
		return nil
	}
	p := &c.chunks[id/loopChunk]
	ch := p.Load()
	if ch == nil && alloc {
		p.CompareAndSwap(nil, new([loopChunk]atomic.Int64))
		ch = p.Load()
	}
	return ch
}

func (c *LoopConns) add(id int, d int64) {
	if ch := c.chunk(id, true); ch != nil {
		ch[id%loopChunk].Add(d)
	}
}

// Done counts the end of a connection of the bind owned by loop id (the
// loop whose AcceptFunc took it). Any goroutine.
func (c *LoopConns) Done(id int) { c.add(id, -1) }

// Load is the number of live connections of the bind on loop id.
func (c *LoopConns) Load(id int) int64 {
	if ch := c.chunk(id, false); ch != nil {
		return ch[id%loopChunk].Load()
	}
	return 0
}

// prealloc allocates the counters of g's loops (control goroutine, at
// Open and Adopt), so that no loop allocates them on its first hand-off.
func (c *LoopConns) prealloc(g *Group) {
	for _, l := range g.loops {
		c.chunk(l.ID(), true)
	}
}
