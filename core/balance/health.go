package balance

import "time"

// Health is the rise/fall state machine of one server's health check, as in
// HAProxy (src/check.c, check_notify_*): a counter health in
// [0, rise+fall-1]; the server is up while health >= rise.
//
//   - A success increments health; reaching rise sets it to rise+fall-1
//     ("OK now"), so an up server needs fall consecutive failures to go
//     down: any success in between refills it.
//   - A failure decrements health; falling below rise drops it to 0, so a
//     down server needs rise consecutive successes to come back: any failure
//     in between starts it over.
//
// A new Health of an up server starts at health = rise, like HAProxy's
// servers at startup ("up, but will fall down at first failure"): a dead
// server is noticed after one interval instead of fall intervals. A down one
// starts at 0.
//
// Health is pure (no I/O, no clock); it belongs to whoever runs the probes
// of its server (one loop) and is not safe for concurrent use.
type Health struct {
	Rise, Fall int
	// Srv, when set, receives every transition through Server.SetUp.
	Srv    *Server
	health int
}

// NewHealth returns the state machine for s (may be nil) with the given
// rise and fall (values below 1 count as 1), starting from s's current
// observed state (up when s is nil).
func NewHealth(s *Server, rise, fall int) *Health {
	h := &Health{Rise: max(rise, 1), Fall: max(fall, 1), Srv: s}
	if s == nil || s.Up() {
		h.health = h.Rise
	}
	return h
}

// Up reports the state the counter stands for.
func (h *Health) Up() bool { return h.health >= h.Rise }

// Count is the raw counter (for stats: HAProxy shows it as "check health").
func (h *Health) Count() int { return h.health }

// Observe feeds one probe outcome and reports whether the up/down state
// changed; a change is applied to Srv with now as its time.
func (h *Health) Observe(success bool, now time.Time) (changed bool) {
	rise, fall := max(h.Rise, 1), max(h.Fall, 1)
	wasUp := h.health >= rise
	if success {
		if h.health < rise+fall-1 {
			h.health++
			if h.health >= rise {
				h.health = rise + fall - 1
			}
		}
	} else if h.health > 0 {
		h.health--
		if h.health < rise {
			h.health = 0
		}
	}
	up := h.health >= rise
	if up == wasUp {
		return false
	}
	if h.Srv != nil {
		h.Srv.SetUp(up, now)
	}
	return true
}
