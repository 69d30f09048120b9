package loop

import (
	"testing"
	"time"
)

// TestBusyPollOnlyAfterWork: an idle loop's rounds that ran nothing (the
// runtime's preemption signal interrupts its epoll_wait every 10-20 ms,
// see epollWait) go back to sleep without busy polling again: the busy
// poll follows work. Each of them started a new busy poll, and an idle
// proxy with busy_poll_us 1000 spent 11% of a CPU polling (two loops),
// 75% with 10000; from 20000 up it never slept.
func TestBusyPollOnlyAfterWork(t *testing.T) {
	const window = 20 * time.Millisecond
	l := startLoop(t, Options{BusyPollUs: int(window / time.Microsecond)})
	a := l.Activity()
	execWait(t, l, func(*Loop) {})
	execWait(t, l, func(*Loop) {}) // publishes the counters of the round before
	loops0, ns0, polls0 := a.Loops.Load(), a.BusyPollNs.Load(), a.BusyPolls.Load()
	// Idle rounds: woken by nothing the loop has to run. Where none come
	// (no preemption signal), the loop sleeps and polls nothing either.
	start := time.Now()
	for a.Loops.Load() < loops0+20 && time.Since(start) < 3*time.Second {
		time.Sleep(5 * time.Millisecond)
	}
	rounds, polled := a.Loops.Load()-loops0, time.Duration(a.BusyPollNs.Load()-ns0)
	polls := a.BusyPolls.Load() - polls0
	t.Logf("%d idle rounds in %v, %d busy polls, %v busy polling", rounds, time.Since(start).Round(time.Millisecond), polls, polled)
	// The busy poll after the last Exec, and one more for a round the
	// test's own scheduling may count as work. Counted, not timed: a
	// loop thread descheduled in its busy poll (load average 10 and up)
	// counts the time it did not run too (141 ms for 2 windows of 20).
	if polls > 2 {
		t.Errorf("%d busy polls (%v) in %d idle rounds (%v): a window of %v per round woken by nothing", polls, polled, rounds, time.Since(start).Round(time.Millisecond), window)
	}
}
