package listen

import (
	"net/netip"
	"sync/atomic"

	"github.com/spliced-proxy/spliced/core/loop"
)

// Ring is a loop's accept ring (HAProxy's accept_queue_ring): a bounded
// lock-free MPSC queue of accepted fds waiting to be handed to their
// AcceptFunc on the ring's loop. Any loop may push; only the owning loop
// pops, as a loop.Source. An entry holds the connection slots its acceptor
// reserved (limit.go): a ring drained without a hand-off releases them. It
// is Dmitry Vyukov's bounded queue: each slot carries a sequence number
// telling producers and the consumer whose turn it is, so a push is one CAS
// on tail and a pop touches no shared counter but head. Neither allocates.
type Ring struct {
	_     [64]byte
	tail  atomic.Uint64 // next position to push (producers)
	_     [56]byte
	head  atomic.Uint64 // next position to pop (consumer; atomic for Len)
	_     [56]byte
	mask  uint64
	slots []slot
	g     *Group
}

type slot struct {
	seq  atomic.Uint64
	fd   int32
	ln   *Listener
	peer netip.AddrPort // the client's address, as accept4 gave it
}

// newRing makes a ring of size rounded up to a power of two, at least 2: with
// one slot, "published at pos" (seq pos+1) and "free for pos+1" would be the
// same sequence number and a full ring would look empty to producers.
func newRing(size int) *Ring {
	n := 2
	for n < size {
		n <<= 1
	}
	r := &Ring{mask: uint64(n - 1), slots: make([]slot, n)}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r
}

// Cap is the number of entries the ring holds.
func (r *Ring) Cap() int { return len(r.slots) }

// Len is the number of queued entries, approximately when producers are
// racing (any goroutine). It is the "queue" part of a loop's accept load.
func (r *Ring) Len() int {
	t, h := r.tail.Load(), r.head.Load()
	if t <= h {
		return 0
	}
	return int(t - h)
}

// Pending reports whether entries are queued (or being queued): the loop
// checks it before it sleeps (loop.Source), so a push that raced with the
// loop going to sleep is not left waiting.
func (r *Ring) Pending() bool { return r.tail.Load() != r.head.Load() }

// push adds an entry; false when the ring is full. Any goroutine.
func (r *Ring) push(fd int, peer netip.AddrPort, ln *Listener) bool {
	pos := r.tail.Load()
	for {
		s := &r.slots[pos&r.mask]
		seq := s.seq.Load()
		switch d := int64(seq - pos); {
		case d == 0:
			if r.tail.CompareAndSwap(pos, pos+1) {
				s.fd, s.ln, s.peer = int32(fd), ln, peer
				s.seq.Store(pos + 1) // publish to the consumer
				return true
			}
			pos = r.tail.Load()
		case d < 0:
			return false // the slot still holds the entry of the previous lap
		default:
			pos = r.tail.Load() // another producer took pos
		}
	}
}

// pop takes the oldest entry. Owning loop only.
func (r *Ring) pop() (int, netip.AddrPort, *Listener, bool) {
	pos := r.head.Load()
	s := &r.slots[pos&r.mask]
	if s.seq.Load() != pos+1 {
		return -1, netip.AddrPort{}, nil, false // empty, or its producer has not published yet
	}
	fd, peer, ln := int(s.fd), s.peer, s.ln
	s.ln = nil
	s.seq.Store(pos + r.mask + 1) // free the slot for the next lap
	r.head.Store(pos + 1)
	return fd, peer, ln, true
}

// Poll hands up to budget queued connections to their AcceptFunc on l; it
// makes the ring a loop.Source of its loop.
func (r *Ring) Poll(l *loop.Loop, budget int) int {
	n := 0
	for ; n < budget; n++ {
		fd, peer, ln, ok := r.pop()
		if !ok {
			break
		}
		ln.handOff(l, fd, peer)
	}
	return n
}
