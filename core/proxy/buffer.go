package proxy

import (
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
)

// Buffer is a fixed-size linear byte buffer: data sits in b[head:tail].
// It is never wrapped: the tunnel always flushes a buffer completely before
// it reads into it again, so a ring would only add arithmetic.
type Buffer struct {
	b          []byte
	head, tail int
}

// Len is the number of pending bytes.
func (b *Buffer) Len() int { return b.tail - b.head }

// Room is the number of bytes that can still be read into the buffer.
func (b *Buffer) Room() int { return len(b.b) - b.tail }

// Cap is the buffer size.
func (b *Buffer) Cap() int { return len(b.b) }

// Data is the pending bytes.
func (b *Buffer) Data() []byte { return b.b[b.head:b.tail] }

// Free is the space after the pending bytes.
func (b *Buffer) Free() []byte { return b.b[b.tail:] }

// Produced records n bytes written into Free().
func (b *Buffer) Produced(n int) { b.tail += n }

// Consumed records n bytes taken from Data(); an emptied buffer rewinds.
func (b *Buffer) Consumed(n int) {
	b.head += n
	if b.head == b.tail {
		b.head, b.tail = 0, 0
	}
}

// maxIdleBuffers bounds how many free buffers a loop keeps for reuse
// (16 MiB at the default bufsize); beyond that released buffers go to the GC.
const maxIdleBuffers = 1024

// Trimming (HAProxy's pool_gc, jemalloc's decay). A loop's pool grows to
// what its busiest moment needed — 64 clients sending a request at once
// leave up to 128 buffers (2 MiB) behind — and a pool that kept them for
// ever would charge that peak to every connection that stays open idle
// (bench/README.md, idle: 0.2–0.3 KiB of the 0.47–0.70 per idle
// connection). So every trimPeriod while the pool holds more than
// trimReserve free buffers, the loop gives back those that no Get needed
// during the whole period (the free list's low-water mark, above the
// reserve): their pages go back to the kernel at once (madvise
// MADV_DONTNEED: the RSS falls now, not at the next GC and its
// scavenger, which an idle proxy may never run) and the buffer to the GC.
// Under a steady load the low-water mark is the spare the load never
// touches, so nothing it uses is trimmed; a load that comes back after a
// lull allocates again (one make and its page faults per buffer).
const (
	trimPeriod  = 100e6 // ns: two periods after a burst its buffers are gone
	trimReserve = 8     // free buffers always kept: a few requests start without allocating
)

// BufPool is a loop's pool of fixed-size buffers. It belongs to one loop and
// is used only from that loop's thread: no locks. A connection holds a
// buffer only while it has bytes pending in it.
type BufPool struct {
	free  []*Buffer
	size  int
	inUse int
	low   int           // fewest free buffers since the last trim (or the timer armed)
	used  *atomic.Int64 // the loop's Activity.BufsUsed, may be nil
	// l and tm trim the pool (nil l: never, a pool outside a loop).
	l       *loop.Loop
	tm      loop.Timer
	trimmed uint64 // buffers given back by trim since start
}

// NewBufPool returns a pool of size-byte buffers.
func NewBufPool(size int) *BufPool {
	return &BufPool{size: size, free: make([]*Buffer, 0, 64)}
}

// trimOn makes l's timer trim the pool (NewWorker).
func (p *BufPool) trimOn(l *loop.Loop) {
	p.l = l
	p.tm.Run = func(*loop.Timer) { p.trim() }
}

// SetSize changes the size of buffers handed out from now on; buffers of the
// old size still in use are dropped when released.
func (p *BufPool) SetSize(size int) {
	if size == p.size {
		return
	}
	p.size = size
	for _, b := range p.free {
		b.release()
	}
	clear(p.free)
	p.free = p.free[:0]
	p.low = 0
}

// Size is the current buffer size.
func (p *BufPool) Size() int { return p.size }

// InUse is the number of buffers handed out and not yet released.
func (p *BufPool) InUse() int { return p.inUse }

// Idle is the number of free buffers kept for reuse.
func (p *BufPool) Idle() int { return len(p.free) }

// Trimmed is the number of buffers trim gave back since start.
func (p *BufPool) Trimmed() uint64 { return p.trimmed }

// Get returns an empty buffer.
func (p *BufPool) Get() *Buffer {
	p.inUse++
	if p.used != nil {
		p.used.Add(1)
	}
	if n := len(p.free); n > 0 {
		b := p.free[n-1]
		p.free[n-1] = nil
		p.free = p.free[:n-1]
		p.low = min(p.low, n-1)
		return b
	}
	return &Buffer{b: make([]byte, p.size)}
}

// Put releases b. A buffer with pending bytes must not be released.
func (p *BufPool) Put(b *Buffer) {
	p.inUse--
	if p.used != nil {
		p.used.Add(-1)
	}
	if len(b.b) != p.size || len(p.free) >= maxIdleBuffers {
		b.release()
		return
	}
	b.head, b.tail = 0, 0
	p.free = append(p.free, b)
	if len(p.free) > trimReserve && p.l != nil && !p.tm.Armed() {
		p.low = len(p.free)
		p.l.Arm(&p.tm, p.l.Now()+trimPeriod)
	}
}

// trim gives back the free buffers no Get needed since the last trim,
// beyond trimReserve, the coldest first (the bottom of the free list:
// Get takes from the top), and runs again in a period while more than
// the reserve are left (loop thread).
func (p *BufPool) trim() {
	if n := p.low - trimReserve; n > 0 {
		for _, b := range p.free[:n] {
			b.release()
		}
		m := copy(p.free, p.free[n:])
		clear(p.free[m:])
		p.free = p.free[:m]
		p.trimmed += uint64(n)
	}
	p.low = len(p.free)
	if len(p.free) > trimReserve && p.l != nil {
		p.l.Arm(&p.tm, p.l.Now()+trimPeriod)
	}
}

// release gives b's memory back to the kernel now (the whole pages inside
// it: a buffer of a Go size class of 8 KiB or more starts on a page), ahead
// of the GC that frees b once the caller drops it. The pages read as
// zeros if touched again; nothing does: b is dropped.
func (b *Buffer) release() {
	const page = 4096
	if len(b.b) < page {
		return
	}
	a := uintptr(unsafe.Pointer(unsafe.SliceData(b.b)))
	lo := (a + page - 1) &^ (page - 1)
	hi := (a + uintptr(len(b.b))) &^ (page - 1)
	if hi > lo {
		_ = unix.Madvise(b.b[lo-a:hi-a], unix.MADV_DONTNEED)
	}
}
