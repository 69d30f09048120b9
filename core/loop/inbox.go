package loop

import "sync/atomic"

// inbox is the MPSC queue of functions Exec'd on a loop: a lock-free Treiber
// stack that producers push onto with CAS and the loop takes whole with one
// Swap, then reverses to run in FIFO order (per producer, order is kept).
// Closing swaps in a sentinel that makes later pushes fail, so Exec returning
// true guarantees the function runs (in a round, or in Run's final drain).
// Only the loop thread calls take.
type inbox struct {
	head   atomic.Pointer[execNode]
	closed execNode // sentinel, compared by address
}

type execNode struct {
	fn   func(l *Loop)
	next *execNode
}

func (q *inbox) push(fn func(*Loop)) bool {
	n := &execNode{fn: fn}
	for {
		h := q.head.Load()
		if h == &q.closed {
			return false
		}
		n.next = h
		if q.head.CompareAndSwap(h, n) {
			return true
		}
	}
}

func (q *inbox) empty() bool {
	h := q.head.Load()
	return h == nil || h == &q.closed
}

// take returns the queued functions oldest first; close=true makes it the
// last take: later pushes fail.
func (q *inbox) take(close bool) *execNode {
	var h *execNode
	if close {
		h = q.head.Swap(&q.closed)
	} else if h0 := q.head.Load(); h0 != nil && h0 != &q.closed {
		h = q.head.Swap(nil)
	}
	if h == &q.closed {
		return nil
	}
	var rev *execNode
	for h != nil {
		nx := h.next
		h.next = rev
		rev = h
		h = nx
	}
	return rev
}
