package balance

import (
	"sync"
	"sync/atomic"
	"unsafe"

	"github.com/spliced-proxy/spliced/internal/ilist"
)

// Queue holds the connections waiting for a server slot of one backend
// lineage (HAProxy's queue.c): one FIFO for "any server of the backend"
// and, on each Server, one FIFO for "this server only" (source affinity).
// It is shared by every generation of the backend and by every loop.
//
// A slot released by Server.Release goes to the oldest waiter of the
// server's own FIFO or of the backend FIFO (process_srv_queue); a server
// that becomes usable, or whose maxconn grows, takes waiters from the
// backend FIFO (pendconn_grab_from_px); a server that stops being usable
// hands its own waiters to the backend FIFO (pendconn_redistribute), and
// when no server of the backend is usable any more every waiter is
// refused. So each release costs one atomic load when nobody waits, and
// one lock plus O(1) list work per waiter served when somebody does: no
// walk over the waiters, no polling.
//
// Locking: mu guards both kinds of FIFO, the waiters' state and the server
// list; it is held only to link and unlink waiters, never across I/O. A
// granted waiter is handed to its loop through its Mailbox (a loop.Source
// of core/proxy), whose own lock nests inside mu; loops are woken after mu
// is released.
type Queue struct {
	// n counts the waiters in every FIFO of the queue. Release reads it
	// without the lock: see Wait for why no slot is lost.
	n   atomic.Int64
	mu  sync.Mutex
	any ilist.List[Waiter] // waiters for any server, oldest first
	seq uint64
	// servers is the server list of the committed generation (Build for a
	// new lineage, Retire afterwards): the servers that may take waiters.
	servers []*Server

	// cur is the slots held on the lineage's servers (HAProxy's beconn),
	// peak its highest value (conn_max): written by Acquire and Release
	// on every loop, so on a cache line of their own, away from n, which
	// Release reads.
	_    [64]byte
	cur  atomic.Int64
	peak atomic.Int64
	_    [48]byte
}

// Peak is the most slots held at once on the backend's servers, since the
// lineage was made (a backend keeps its queue across generations).
func (q *Queue) Peak() int64 { return q.peak.Load() }

// Waiter states, guarded by Queue.mu (see Waiter).
const (
	wIdle    uint8 = iota
	wQueued        // in a FIFO of q
	wGranted       // in its Mailbox, with got (nil: refused)
)

// Waiter is embedded in a connection that may wait for a slot. It belongs
// to the loop of that connection: only that loop calls Wait, Cancel and
// Mailbox.Take for it. Another loop touches it only under Queue.mu, while
// it is queued (to grant or refuse it).
type Waiter struct {
	// link: in a FIFO of q (state wQueued) or in mbox (wGranted). First:
	// ilist finds the waiter from it.
	link ilist.Link[Waiter]
	// Owner is what Mailbox.Take hands back with the waiter (set once).
	Owner any
	mbox  *Mailbox
	q     *Queue
	srv   *Server // the only server it takes (affinity), nil: any
	got   *Server // granted slot; nil when refused
	seq   uint64
	state uint8
	busy  bool // owner loop's view: queued or granted, not yet taken
}

var _ = [1]struct{}{}[unsafe.Offsetof(Waiter{}.link)] // link first (ilist)

// Init sets the owner and the mailbox of the loop the waiter lives on
// (once, before the first Wait).
func (w *Waiter) Init(owner any, mb *Mailbox) { w.Owner, w.mbox = owner, mb }

// Busy reports whether the waiter is queued or holds a grant its loop has
// not taken yet (owner loop).
func (w *Waiter) Busy() bool { return w.busy }

// Wait is called on the waiter's loop after Acquire failed: every usable
// server (or srv, for affinity) is at its maxconn. It returns a server
// whose slot the caller now holds when one was free after all, or queued
// true when the waiter waits (the outcome arrives through its Mailbox),
// or neither when no server of the backend is usable (refuse the
// connection).
//
// No slot is lost between the caller's failed Acquire and the waiter
// being linked: n is incremented before the servers are looked at again,
// and Release, when it does not hand its slot over, decrements Cur and
// then reads n (all sequentially consistent). Either that read sees n > 0
// and Release serves the FIFO under the lock, after the waiter is linked,
// or the look below sees the slot free.
func (q *Queue) Wait(w *Waiter, srv *Server) (*Server, bool) {
	var wk wakeSet
	q.mu.Lock()
	q.n.Add(1)
	q.seq++
	w.q, w.seq, w.got, w.state, w.busy = q, q.seq, nil, wQueued, true
	if srv != nil && (!srv.listed || !usableState(srv.st.Load())) {
		srv = nil // its server is gone: any server will do (redispatch)
	}
	w.srv = srv
	if srv != nil {
		srv.own.PushBack(&w.link)
		q.fill(srv, w, &wk)
	} else {
		q.any.PushBack(&w.link)
		for _, s := range q.servers {
			q.fill(s, w, &wk)
		}
	}
	var got *Server
	queued := true
	switch {
	case w.state == wIdle: // a slot was free: fill gave it to us
		got, queued = w.got, false
	case !q.usable():
		q.unlink(w)
		queued = false
	}
	if !queued {
		w.got, w.busy = nil, false
	}
	q.mu.Unlock()
	wk.notify()
	return got, queued
}

// Cancel takes the waiter out of its queue (timeout, client gone) on its
// loop. A slot granted meanwhile, still in the mailbox, is released: the
// next waiter gets it. No-op when the waiter is not busy.
func (w *Waiter) Cancel() {
	if !w.busy {
		return
	}
	w.busy = false
	q := w.q
	var give *Server
	q.mu.Lock()
	switch w.state {
	case wQueued:
		q.unlink(w)
	case wGranted:
		w.mbox.remove(w)
		give = w.got
	}
	w.state, w.got = wIdle, nil
	q.mu.Unlock()
	if give != nil {
		give.Release()
	}
}

// unlink removes a queued waiter from its FIFO (mu held).
func (q *Queue) unlink(w *Waiter) {
	if w.srv != nil {
		w.srv.own.Remove(&w.link)
	} else {
		q.any.Remove(&w.link)
	}
	w.state = wIdle
	q.n.Add(-1)
}

// usable reports whether some listed server may take connections (mu held).
func (q *Queue) usable() bool {
	for _, s := range q.servers {
		if usableState(s.st.Load()) {
			return true
		}
	}
	return false
}

// fill gives s's free slots to the oldest waiters of s's own FIFO and of
// the backend FIFO (mu held). A grant to self (the caller of Wait) is
// left in self for Wait to return; the others go to their mailboxes.
func (q *Queue) fill(s *Server, self *Waiter, wk *wakeSet) {
	for {
		w := q.next(s)
		if w == nil || !s.Acquire() {
			return
		}
		q.unlink(w)
		w.got = s
		if w == self {
			continue // state is idle: Wait returns s
		}
		q.grant(w, s, wk)
	}
}

// next is the oldest waiter s may serve: of s's own FIFO or of the
// backend's (process_srv_queue), nil when none or when s may not take
// connections (mu held).
func (q *Queue) next(s *Server) *Waiter {
	if !s.listed || !usableState(s.st.Load()) {
		return nil
	}
	a, b := s.own.Front(), q.any.Front()
	if a == nil || b != nil && b.seq < a.seq {
		return b
	}
	return a
}

// grant hands an unlinked waiter to its loop with a slot of s, or refused
// when s is nil (mu held).
func (q *Queue) grant(w *Waiter, s *Server, wk *wakeSet) {
	w.got, w.state = s, wGranted
	w.mbox.push(w)
	wk.add(w.mbox)
}

// handoff passes the slot that the caller of Release holds on s to the
// oldest waiter s may serve: Cur does not drop, so no connection arriving
// meanwhile takes the slot before the waiters. It reports false when
// nobody takes it (or s is over a lowered maxconn): then Release frees it.
func (q *Queue) handoff(s *Server) bool {
	var wk wakeSet
	q.mu.Lock()
	w := q.next(s)
	if w == nil {
		q.mu.Unlock()
		return false
	}
	if m := s.maxconn.Load(); m > 0 && s.Cur.Load() > m {
		q.mu.Unlock()
		return false
	}
	q.unlink(w)
	s.total.Add(1)
	q.grant(w, s, &wk)
	q.mu.Unlock()
	wk.notify()
	return true
}

// released serves the FIFOs after a slot of s was freed.
func (q *Queue) released(s *Server) {
	var wk wakeSet
	q.mu.Lock()
	q.fill(s, nil, &wk)
	q.mu.Unlock()
	wk.notify()
}

// lost runs when s stopped being usable (drain, maint, down, weight 0,
// retired): its own waiters move to the backend FIFO in age order, where
// the other servers serve them; if no server is usable any more, every
// waiter is refused.
func (q *Queue) lost(s *Server) {
	if q.n.Load() == 0 {
		return // a later Wait sees the new state under the lock
	}
	var wk wakeSet
	q.mu.Lock()
	q.redistribute(s)
	q.settle(&wk)
	q.mu.Unlock()
	wk.notify()
}

// settle serves the waiters after the set of usable servers changed (mu
// held): each listed server takes what it can, or, when none is usable,
// every waiter is refused.
func (q *Queue) settle(wk *wakeSet) {
	if !q.usable() {
		for _, x := range q.servers {
			q.redistribute(x)
		}
		for w := q.any.Front(); w != nil; w = q.any.Front() {
			q.unlink(w)
			q.grant(w, nil, wk)
		}
		return
	}
	for _, x := range q.servers {
		q.fill(x, nil, wk)
	}
}

// redistribute merges s's own FIFO into the backend FIFO by age (mu held).
func (q *Queue) redistribute(s *Server) {
	at := q.any.Front()
	for w := s.own.PopFront(); w != nil; w = s.own.PopFront() {
		w.srv = nil
		for at != nil && at.seq < w.seq {
			at = at.link.Next()
		}
		if at == nil {
			q.any.PushBack(&w.link)
		} else {
			q.any.InsertBefore(&w.link, &at.link)
		}
	}
}

// grab lets s take waiters after it became usable or its maxconn grew.
func (q *Queue) grab(s *Server) {
	if q.n.Load() == 0 {
		return
	}
	q.released(s)
}

// publish makes servers the list that takes waiters (control path, after
// the generation holding them was committed): servers left out hand their
// own waiters to the backend FIFO, then the waiters are served again.
func (q *Queue) publish(servers []*Server) {
	q.mu.Lock()
	old := q.servers
	for _, s := range old {
		s.listed = false
	}
	for _, s := range servers {
		s.listed = true
	}
	q.installAndUnlock(servers, old)
}

// publishChange is publish(servers) when servers is the list published
// now (prev) without dropped and with added: only their flags change.
// Otherwise (prev is not the list published) it is publish.
func (q *Queue) publishChange(prev, servers, dropped, added []*Server) {
	q.mu.Lock()
	if len(q.servers) != len(prev) || len(prev) > 0 && &q.servers[0] != &prev[0] {
		q.mu.Unlock()
		q.publish(servers)
		return
	}
	for _, s := range dropped {
		s.listed = false
	}
	for _, s := range added {
		s.listed = true
	}
	q.installAndUnlock(servers, dropped)
}

// installAndUnlock, under q.mu (which it releases), makes servers the
// list published, their listed flags already set: the servers of gone no
// longer listed hand their own waiters to the backend FIFO, then the
// waiters are served again (woken after the unlock).
func (q *Queue) installAndUnlock(servers, gone []*Server) {
	var wk wakeSet
	q.servers = servers
	if q.n.Load() > 0 {
		for _, s := range gone {
			if !s.listed {
				q.redistribute(s)
			}
		}
		q.settle(&wk)
	}
	q.mu.Unlock()
	wk.notify()
}

// Len is the number of waiters (any goroutine).
func (q *Queue) Len() int { return int(q.n.Load()) }

// Mailbox receives the grants and refusals for the waiters of one loop. Its
// loop drains it with Take (core/proxy polls it as a loop.Source); Notify
// wakes that loop and is called after each push, outside the queue lock.
type Mailbox struct {
	n    atomic.Int32
	mu   sync.Mutex
	list ilist.List[Waiter]
	// Notify wakes the loop (loop.Loop.Notify); set once before use.
	Notify func()
}

func (m *Mailbox) push(w *Waiter) {
	m.mu.Lock()
	m.list.PushBack(&w.link)
	m.n.Add(1)
	m.mu.Unlock()
}

func (m *Mailbox) remove(w *Waiter) {
	m.mu.Lock()
	m.list.Remove(&w.link)
	m.n.Add(-1)
	m.mu.Unlock()
}

// Pending reports whether grants wait to be taken (any goroutine): the
// loop's last look before it sleeps.
func (m *Mailbox) Pending() bool { return m.n.Load() > 0 }

// Take pops the oldest outcome (loop thread): the waiter and the server
// whose slot it now holds, or a nil server when it was refused. nil, nil
// when the mailbox is empty.
func (m *Mailbox) Take() (*Waiter, *Server) {
	if m.n.Load() == 0 {
		return nil, nil
	}
	m.mu.Lock()
	w := m.list.PopFront()
	if w == nil {
		m.mu.Unlock()
		return nil, nil
	}
	m.n.Add(-1)
	s := w.got
	w.got, w.state, w.busy = nil, wIdle, false
	m.mu.Unlock()
	return w, s
}

// wakeSet collects the mailboxes to notify once the queue lock is
// released. More than its capacity in one call (a refusal of waiters on
// many loops at once) notifies the overflow at once.
type wakeSet struct {
	m [8]*Mailbox
	n int
}

func (k *wakeSet) add(m *Mailbox) {
	for i := 0; i < k.n; i++ {
		if k.m[i] == m {
			return
		}
	}
	if k.n == len(k.m) {
		m.Notify()
		return
	}
	k.m[k.n] = m
	k.n++
}

func (k *wakeSet) notify() {
	for i := 0; i < k.n; i++ {
		k.m[i].Notify()
	}
}
