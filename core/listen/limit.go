package listen

import (
	"sync"
	"sync/atomic"
	"time"

	"github.com/spliced-proxy/spliced/core/loop"
)

// Connection limits (HAProxy's listener_accept: feconn against a frontend's
// maxconn, actconn against the global maxconn).
//
// A Limit counts the connections holding one of its slots. An acceptor
// reserves a slot on every Limit of its listener (BindSpec.Limits, in order)
// before each accept4, with a CAS that never goes past the maximum, so that
// no number of loops accepting at once can overshoot it; a failed accept4
// gives the slots back. The accepted fd carries its slots through the accept
// ring to the AcceptFunc; whoever ends the connection gives them back with
// Release (Listener.Release for a connection dropped before it is served,
// Limit.Release per Limit otherwise).
//
// An acceptor that finds a Limit full is limited: it unregisters its socket
// on its own loop (connections wait in the kernel backlog) and joins the
// Limit's wait list. A Release that leaves at least resumeSlack slots free
// resumes every acceptor of the list, each on its own loop. The slack is the
// hysteresis: at the boundary a listener is paused and resumed once per
// resumeSlack connections instead of once per connection. So that a slot
// freed below the slack does not stay unused while clients wait (long-lived
// tunnels close rarely), a limited acceptor also looks again every
// LimitRecheck and resumes the list when any slot is free.

// LimitRecheck is how often a limited acceptor checks whether a slot is
// free that no Release reported (one below the resume slack): the longest a
// client waits in the backlog for a slot that is free.
const LimitRecheck = 50 * time.Millisecond

// MaxResumeSlack caps the hysteresis of a Limit: one pause/resume per 32
// connections at the boundary costs ~2 epoll_ctl and a wake-up per 32
// accepts, and leaves at most 32 slots for LimitRecheck to find.
const MaxResumeSlack = 32

// Limit is a connection count with a maximum. The zero value is unlimited
// and counts. Any goroutine; a Limit must not be copied after first use.
type Limit struct {
	cur   atomic.Int64
	max   atomic.Int64 // 0 = unlimited
	nwait atomic.Int32 // length of wait: Release looks without mu
	wakes atomic.Int64
	// live counts the slots of connections accepted (accept4 succeeded)
	// and not released, peak its highest value (a frontend's conn_max):
	// cur also holds the reservations of accepts in progress, one per
	// accepting loop, most of which end in EAGAIN. Same cache line as
	// cur, which the same paths write.
	live atomic.Int64
	peak atomic.Int64

	mu   sync.Mutex // guards wait and acceptor.nextWait; never held across a syscall
	wait *acceptor  // limited acceptors, linked through nextWait
}

// Cur is the number of slots held: connections accepted and not released,
// including those still in accept rings.
func (m *Limit) Cur() int64 { return m.cur.Load() }

// Peak is the most connections accepted and not yet released at once,
// since the Limit was made.
func (m *Limit) Peak() int64 { return m.peak.Load() }

// Max is the maximum in force, 0 = unlimited.
func (m *Limit) Max() int64 { return m.max.Load() }

// Wakes counts the wake-ups of the acceptors waiting for a slot: each is a
// pause/resume cycle of the limited listeners (the hysteresis keeps it below
// one per connection at the boundary).
func (m *Limit) Wakes() int64 { return m.wakes.Load() }

// SetMax sets the maximum (<= 0 = unlimited). Lowering it below Cur refuses
// new connections until enough are released; raising it resumes the
// acceptors waiting for a slot. Any goroutine.
func (m *Limit) SetMax(n int64) {
	m.max.Store(max(n, 0))
	if m.nwait.Load() != 0 && m.free(m.cur.Load()) > 0 {
		m.wake()
	}
}

// Release gives one slot back; it resumes the waiting acceptors when at
// least the resume slack is free. Any goroutine (loop threads: no wait
// beyond the short mu of the wake-up, which only a limited listener takes).
func (m *Limit) Release() {
	m.live.Add(-1)
	m.unreserve()
}

// accepted counts a reserved slot as a connection's: the peak follows.
func (m *Limit) accepted() {
	n := m.live.Add(1)
	for p := m.peak.Load(); n > p && !m.peak.CompareAndSwap(p, n); p = m.peak.Load() {
	}
}

// unreserve gives back a slot reserved for an accept that took nothing.
func (m *Limit) unreserve() {
	c := m.cur.Add(-1)
	if m.nwait.Load() != 0 && m.free(c) >= resumeSlack(m.max.Load()) {
		m.wake()
	}
}

// reserve takes one slot unless the Limit is full.
func (m *Limit) reserve() bool {
	for {
		c := m.cur.Load()
		if mx := m.max.Load(); mx > 0 && c >= mx {
			return false
		}
		if m.cur.CompareAndSwap(c, c+1) {
			return true
		}
	}
}

// free is the number of free slots when cur are held (MaxInt64 unlimited).
func (m *Limit) free(cur int64) int64 {
	mx := m.max.Load()
	if mx <= 0 {
		return 1<<63 - 1
	}
	return mx - cur
}

// resumeSlack is the free slots a Release needs to resume the waiting
// acceptors: max/16 (6 %), at least 1, at most MaxResumeSlack.
func resumeSlack(mx int64) int64 {
	return min(max(mx/16, 1), MaxResumeSlack)
}

// enqueue adds a (limited on its loop already) to the wait list, then
// looks at the count again: a Release between the failed reservation and
// the enqueue saw an empty list and resumed nobody.
func (m *Limit) enqueue(a *acceptor) {
	m.mu.Lock()
	a.nextWait = m.wait
	m.wait = a
	m.nwait.Add(1)
	m.mu.Unlock()
	if m.free(m.cur.Load()) > 0 {
		m.wake()
	}
}

// wake takes the whole wait list and resumes each acceptor on its loop. An
// acceptor is in the list only while it is limited, and a limited acceptor
// does not run (its socket is unregistered), so it cannot enqueue itself
// again before its resume ran: the list walk after the unlock is safe.
func (m *Limit) wake() {
	m.mu.Lock()
	a := m.wait
	m.wait = nil
	m.nwait.Store(0)
	m.mu.Unlock()
	if a != nil {
		m.wakes.Add(1)
	}
	for a != nil {
		next := a.nextWait
		a.nextWait = nil
		a.l.Exec(a.resumeFn) // false: the loop stopped, nothing to resume
		a = next
	}
}

// reserve takes a slot on every Limit of the listener, in order; on a full
// one it gives back the slots taken and returns that Limit (nil: reserved).
func (ln *Listener) reserve() *Limit {
	for i, m := range ln.limits {
		if !m.reserve() {
			for _, r := range ln.limits[:i] {
				r.unreserve()
			}
			return m
		}
	}
	return nil
}

// unreserve gives back the slots of an accept that took nothing.
func (ln *Listener) unreserve() {
	for _, m := range ln.limits {
		m.unreserve()
	}
}

// accepted turns the slots reserved for an accept into the connection's.
func (ln *Listener) accepted() {
	for _, m := range ln.limits {
		m.accepted()
	}
}

// Release gives back the slots of one connection accepted on ln: for a
// connection dropped before it was served (the AcceptFunc closes the fd);
// a served one is released through the Limits themselves. Any goroutine.
func (ln *Listener) Release() {
	for _, m := range ln.limits {
		m.Release()
	}
}

// limit makes a stop accepting until m has a free slot (loop thread).
func (a *acceptor) limit(m *Limit) {
	a.limitedBy = m
	a.sync(a.l)
	a.l.Arm(&a.recheck, a.l.Now()+int64(LimitRecheck))
	m.enqueue(a)
}

// resume runs on a's loop after a wake of the Limit it waits for.
func (a *acceptor) resume(l *loop.Loop) {
	if a.limitedBy == nil {
		return
	}
	a.limitedBy = nil
	l.Disarm(&a.recheck)
	a.sync(l)
}

// onRecheck: a slot freed below the resume slack resumes the list too,
// LimitRecheck after the acceptor was limited at the latest.
func (a *acceptor) onRecheck(*loop.Timer) {
	m := a.limitedBy
	if m == nil {
		return
	}
	if m.free(m.cur.Load()) > 0 {
		m.wake()
		return
	}
	a.l.Arm(&a.recheck, a.l.Now()+int64(LimitRecheck))
}
