package proxy

import (
	"testing"
	"time"
)

// TestHTTPKeepAliveRequestTwoRoundsTwoSleeps pins the loop's work per
// keep-alive request, one request at a time: one round for the request
// (read, forwarded to the server in that round) and one for the response
// (read, written to the client in that round), and at most one sleep
// before each: the loop never sleeps with a wake-up pending nor leaves a
// write to a later round. Rounds and sleeps are the loop's own counters
// (Activity.Loops, Activity.Sleeps); the slack covers the Go runtime's
// preemption signals, each of which ends a sleep early (EINTR: one more
// round and one more sleep).
func TestHTTPKeepAliveRequestTwoRoundsTwoSleeps(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawServer(t)
	fe := httpFrontend(t, nil, o)
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(rawResponse); {
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
	}
	for range 20 {
		one() // the server connection is pooled, buffers taken
	}
	const n = 300
	act := e.l.Activity()
	loops0, sleeps0, io0, wk0 := act.Loops.Load(), act.Sleeps.Load(), act.PollIO.Load(), act.WakeTasks.Load()
	start := time.Now()
	for range n {
		one()
	}
	elapsed := time.Since(start)
	e.do(func() {}) // a round publishes the counters
	loops, sleeps := act.Loops.Load()-loops0, act.Sleeps.Load()-sleeps0
	t.Logf("poll_io %d wake_tasks %d", act.PollIO.Load()-io0, act.WakeTasks.Load()-wk0)
	// One preemption signal per 10 ms at most, and the round that
	// publishes the counters.
	slack := uint64(elapsed/(10*time.Millisecond)) + 8
	t.Logf("%d requests in %v: %d rounds, %d sleeps", n, elapsed, loops, sleeps)
	if loops > 2*n+slack {
		t.Errorf("%d rounds for %d requests, want at most 2 per request (+%d): a write waits for a later round", loops, n, slack)
	}
	if sleeps > 2*n+slack {
		t.Errorf("%d sleeps for %d requests, want at most 2 per request (+%d): the loop sleeps with work pending", sleeps, n, slack)
	}
}
