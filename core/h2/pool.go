package h2

import "golang.org/x/net/http2/hpack"

// Pool keeps the memory the idle connections of one loop gave back
// (ReleaseBuffers: the output buffer, the header block scratch, the
// stream table and its free streams, the field list) and lends it to the
// next connection that gets busy, as HAProxy's pools do its buffers: an
// idle connection still holds nothing, and a connection going from idle
// to busy and back, which a client that waits for its responses before
// it asks again does after each batch, does not grow each of them again
// from nothing (on the h2 bench row, about 3 allocations per request and
// the GC work after them). At most poolSets sets and poolOutBytes of
// output buffers are kept, none above poolMaxOut: a burst does not pin
// its peak.
//
// A Pool belongs to one loop, as its connections do (Config.Pool): loop
// thread only, no lock. The zero value is ready; nil is none.
type Pool struct {
	sets     []busyMem
	outBytes int // capacity of the kept output buffers
}

// poolSets bounds the sets a Pool keeps: a loop's connections that go
// busy in one round, the rest allocate.
const poolSets = 256

// poolMaxOut: an output buffer above it (a large DATA burst queued at
// once) is not kept. A proxy stops its streams once Output holds 64 KiB
// and each may add a buffer's worth of DATA past it: 128 KiB keeps the
// buffers of connections downloading 10 KiB objects ten at a time (the
// h2-10k bench row), which otherwise grew from nothing, copied at each
// doubling and zeroed when allocated, after every idle moment.
const poolMaxOut = 128 << 10

// poolOutBytes bounds the output buffers a Pool keeps, all together.
const poolOutBytes = 8 << 20

// busyMem is what a busy connection needs and an idle one gives back.
type busyMem struct {
	out, eblock, lname, blk []byte
	streams, free           []*stream
	fields                  []hpack.HeaderField
}

// put keeps m (emptied) unless the pool is full or m's output buffer is
// too large.
func (p *Pool) put(m busyMem) {
	if p == nil || len(p.sets) >= poolSets || cap(m.out) > poolMaxOut || p.outBytes+cap(m.out) > poolOutBytes ||
		m.out == nil && m.streams == nil && m.free == nil {
		return // none, full, too large, or nothing to keep (released twice)
	}
	p.outBytes += cap(m.out)
	m.out, m.eblock, m.lname, m.blk = m.out[:0], m.eblock[:0], m.lname[:0], m.blk[:0]
	clear(m.streams[:cap(m.streams)])
	m.streams = m.streams[:0]
	clear(m.fields[:cap(m.fields)])
	m.fields = m.fields[:0]
	p.sets = append(p.sets, m)
}

// take returns a kept set, ok false when there is none.
func (p *Pool) take() (m busyMem, ok bool) {
	if p == nil || len(p.sets) == 0 {
		return busyMem{}, false
	}
	n := len(p.sets) - 1
	m = p.sets[n]
	p.outBytes -= cap(m.out)
	p.sets[n] = busyMem{}
	p.sets = p.sets[:n]
	return m, true
}
