package proxy

import "sync/atomic"

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

// BufPool is a loop's pool of fixed-size buffers. It belongs to one loop and
// is used only from that loop's thread: no locks. A connection holds a
// buffer only while it has bytes pending in it.
type BufPool struct {
	free  []*Buffer
	size  int
	inUse int
	used  *atomic.Int64 // the loop's Activity.BufsUsed, may be nil
}

// NewBufPool returns a pool of size-byte buffers.
func NewBufPool(size int) *BufPool {
	return &BufPool{size: size, free: make([]*Buffer, 0, 64)}
}

// SetSize changes the size of buffers handed out from now on; buffers of the
// old size still in use are dropped when released.
func (p *BufPool) SetSize(size int) {
	if size == p.size {
		return
	}
	p.size = size
	clear(p.free)
	p.free = p.free[:0]
}

// Size is the current buffer size.
func (p *BufPool) Size() int { return p.size }

// InUse is the number of buffers handed out and not yet released.
func (p *BufPool) InUse() int { return p.inUse }

// Idle is the number of free buffers kept for reuse.
func (p *BufPool) Idle() int { return len(p.free) }

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
		return
	}
	b.head, b.tail = 0, 0
	p.free = append(p.free, b)
}
