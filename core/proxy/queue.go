package proxy

import (
	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// waiter is a connection (http request or tcp tunnel) queued for a server
// slot of its backend: every usable server was at its maxconn. It is
// embedded in its owner; init runs once when the owner is created.
//
// The queue itself is balance.Queue, one per backend and shared by all
// loops: a slot released on any loop goes straight to the oldest waiter
// that may use it, and the grant reaches the waiter's loop through the
// loop's mailbox (grants below), polled as a loop.Source and woken with
// the loop's eventfd. Nothing polls on a timer; a waiter that timed out or
// closed meanwhile gives a slot granted to it back (balance.Waiter.Cancel).
//
// The connection is the balance.Waiter's Owner, and the waiter is found
// from the connection (queued.waiting), not the other way round: a second
// interface field here would cost 16 bytes per connection (see
// TestConnectionObjectsKeepTheirSizeClass).
type waiter struct {
	bw balance.Waiter
	qs *stats.Slot // the backend's slot whose Queue gauge counts us
}

// queued is what the queue asks of a waiting connection.
type queued interface {
	// waiting is the waiter embedded in the connection.
	waiting() *waiter
	// granted: the connection holds a slot of s (Acquire succeeded) and
	// left the queue.
	granted(s *balance.Server)
	// refused: no server of the backend is usable any more; the
	// connection left the queue.
	refused()
}

func (w *Worker) initWaiter(who queued) {
	who.waiting().bw.Init(who, &w.grants.Mailbox)
}

// wait queues wt for a slot of be after s.Acquire failed (s is what the
// picker chose). It returns a server whose slot the caller now holds when
// one freed meanwhile; else queued reports whether wt waits (false: no
// usable server, refuse).
func (w *Worker) wait(wt *waiter, be *Backend, s *balance.Server) (got *balance.Server, queued bool) {
	var only *balance.Server
	if be.source {
		only = s // source affinity: wait for the server the hash chose
	}
	got, queued = be.B.Queue().Wait(&wt.bw, only)
	if queued {
		wt.qs = be.Stats.Loop(w.id)
		wt.qs.Queue.Add(1)
	}
	return got, queued
}

// dequeue takes wt out of the queue if it waits there (a slot granted to
// it and not yet taken goes back to the server).
func (w *Worker) dequeue(wt *waiter) {
	if !wt.bw.Busy() {
		return
	}
	wt.bw.Cancel()
	wt.qs.Queue.Add(-1)
	wt.qs = nil
}

// grants is the loop's mailbox of queue outcomes: other loops (and this
// one) push granted or refused waiters; the loop hands each to its owner
// at the start of a round, before tasklets run.
type grants struct {
	balance.Mailbox
}

// Poll implements loop.Source.
func (g *grants) Poll(_ *loop.Loop, budget int) int {
	n := 0
	for n < budget {
		bw, s := g.Take()
		if bw == nil {
			break
		}
		n++
		who := bw.Owner.(queued)
		wt := who.waiting()
		wt.qs.Queue.Add(-1)
		wt.qs = nil
		if s != nil {
			who.granted(s)
		} else {
			who.refused()
		}
	}
	return n
}
