package proxy

import (
	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
)

// waiter is a connection (http request or tcp tunnel) queued for a server
// slot of its backend: every usable server was at its maxconn. It is
// embedded in its owner; who is set once when the owner is created.
type waiter struct {
	prev, next *waiter
	who        queued
	be         *Backend
	hash       uint64
	in         bool
}

// queued is what the queue asks of a waiting connection.
type queued interface {
	// granted: the connection holds a slot of s (Acquire succeeded) and
	// left the queue.
	granted(s *balance.Server)
	// refused: no server of the backend is usable any more; the
	// connection left the queue.
	refused()
}

// waitQueue is a loop's FIFO of waiters (all backends).
type waitQueue struct {
	head, tail *waiter
	n          int
	timer      loop.Timer
	kicking    bool
	rekick     bool
}

// queuePoll is how often a loop retries its queued connections on its
// own. A slot freed on the same loop is granted at once (the releaser
// calls kickQueue); one freed by another loop is seen at the next poll,
// which costs one timer per millisecond only while something is queued.
const queuePoll = 1e6

func runQueueTimer(tm *loop.Timer) { tm.Owner.(*Worker).kickQueue() }

// enqueue puts wt at the tail of the loop's queue.
func (w *Worker) enqueue(wt *waiter) {
	q := &w.h.q
	if q.timer.Run == nil {
		q.timer.Run, q.timer.Owner = runQueueTimer, w
	}
	wt.prev, wt.next = q.tail, nil
	if q.tail != nil {
		q.tail.next = wt
	} else {
		q.head = wt
	}
	q.tail = wt
	q.n++
	wt.in = true
	wt.be.Stats.Loop(w.id).Queue.Add(1)
	if !q.timer.Armed() {
		w.L.Arm(&q.timer, w.L.Now()+queuePoll)
	}
}

// dequeue removes wt if it is queued.
func (w *Worker) dequeue(wt *waiter) {
	if !wt.in {
		return
	}
	q := &w.h.q
	if wt.prev != nil {
		wt.prev.next = wt.next
	} else {
		q.head = wt.next
	}
	if wt.next != nil {
		wt.next.prev = wt.prev
	} else {
		q.tail = wt.prev
	}
	wt.prev, wt.next = nil, nil
	wt.in = false
	q.n--
	wt.be.Stats.Loop(w.id).Queue.Add(-1)
}

// slotFreed is called after a server slot was released on this loop.
func (w *Worker) slotFreed() {
	if w.h.q.head != nil {
		w.kickQueue()
	}
}

// kickQueue grants free server slots to queued connections, oldest first.
// A connection whose backend has a free slot starts even when an older
// one (of another, full backend) still waits.
func (w *Worker) kickQueue() {
	q := &w.h.q
	if q.kicking {
		q.rekick = true
		return
	}
	q.kicking = true
	for {
		q.rekick = false
		for wt := q.head; wt != nil; {
			next := wt.next
			s := wt.be.pickers[w.id].Pick(wt.hash, nil)
			if s == nil {
				w.dequeue(wt)
				wt.who.refused()
			} else if s.Acquire() {
				w.dequeue(wt)
				wt.who.granted(s)
			}
			if q.rekick {
				break // the queue changed under us: start over
			}
			wt = next
		}
		if !q.rekick {
			break
		}
	}
	q.kicking = false
	if q.head != nil {
		w.L.Arm(&q.timer, w.L.Now()+queuePoll)
	} else {
		w.L.Disarm(&q.timer)
	}
}
