// Package looptest runs event loops for the tests of the packages above
// core/loop (listen, proxy), as net/http/httptest runs servers: with the
// tuning the engine gives them by default, which config.Normalize fills
// (core/loop takes its options as given and imports no config).
//
// It also proves that nothing happens without sleeping on it: RoundsPass
// waits for the loops to run rounds (what was queued to them has run),
// ClockPasses for their clock to pass a time (what a timer would have
// fired by then has fired).
//
// core/loop's own tests cannot import it: it imports core/loop. It is
// imported by _test.go files only; nothing in it runs in spliced.
package looptest

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Options is loop id with the default tuning, as the engine runs it.
func Options(id int) loop.Options {
	var t config.Tuning
	t.Normalize()
	return loop.Options{ID: id, RunqueueDepth: t.RunqueueDepth, Maxpollevents: t.Maxpollevents, Sched: loop.Sched(t.Sched)}
}

// Run starts loops first, first+1, ... first+n-1 (their ids) on goroutines
// of their own and returns once every one runs. prepare, unless nil, is
// called with each loop before it runs, for what must be set up then (a
// proxy.Worker adds its sources). At cleanup Run stops the loops, waits
// for them (failing t after 5 s) and closes them; a cleanup the test
// registers later runs before, while the loops still run.
func Run(t testing.TB, first, n int, prepare func(*loop.Loop)) []*loop.Loop {
	t.Helper()
	loops := make([]*loop.Loop, 0, n)
	var wg sync.WaitGroup
	for i := range n {
		l, err := loop.New(Options(first + i))
		if err != nil {
			t.Fatal(err)
		}
		loops = append(loops, l)
		if prepare != nil {
			prepare(l)
		}
		wg.Add(1)
		go func() { defer wg.Done(); l.Run() }()
	}
	t.Cleanup(func() {
		for _, l := range loops {
			l.Stop()
		}
		done := make(chan struct{})
		go func() { wg.Wait(); close(done) }()
		select {
		case <-done:
			for _, l := range loops {
				l.Close()
			}
		case <-time.After(5 * time.Second):
			t.Error("loops did not stop within 5s")
		}
	})
	for _, l := range loops {
		ran := make(chan struct{})
		if !l.Exec(func(*loop.Loop) { close(ran) }) {
			t.Fatalf("loop %d stopped before it ran", l.ID())
		}
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatalf("loop %d did not run within 5s", l.ID())
		}
	}
	return loops
}

// RoundsPass waits until every loop ran three more rounds: the work queued
// to a loop before the call (an Exec'd function, a woken tasklet, an
// accept ring's entry, a due timer) has run by then, so what did not
// happen will not. A sleeping loop is woken (an empty Exec); fails t
// after 5 s.
func RoundsPass(t testing.TB, loops ...*loop.Loop) {
	t.Helper()
	for _, l := range loops {
		start := l.Activity().Loops.Load()
		testutil.Eventually(t, 5*time.Second, func() bool {
			l.Exec(func(*loop.Loop) {}) // wake it if it sleeps
			return l.Activity().Loops.Load() >= start+3
		}, "three rounds of loop %d", l.ID())
	}
}

// ClockPasses waits until every loop's clock (Loop.Now, read on the loop)
// is d past what it read at the call, then for RoundsPass: a timer armed
// before the call to fire within d has fired by then, however late a
// loaded machine ran the loop. It is how a test shows that a timer was
// not armed (a stopped health check, a removed timeout) when the timer
// itself cannot be seen; a sleep of d would pass while a starved loop had
// not reached the time yet. Fails t 5 s after d.
func ClockPasses(t testing.TB, d time.Duration, loops ...*loop.Loop) {
	t.Helper()
	now := func(l *loop.Loop) int64 {
		var at atomic.Int64
		at.Store(-1)
		l.Exec(func(l *loop.Loop) { at.Store(l.Now()) })
		testutil.Eventually(t, 5*time.Second, func() bool { return at.Load() >= 0 }, "loop %d to run", l.ID())
		return at.Load()
	}
	ends := make([]int64, len(loops))
	for i, l := range loops {
		ends[i] = now(l) + int64(d)
	}
	for i, l := range loops {
		testutil.Eventually(t, d+5*time.Second, func() bool { return now(l) >= ends[i] }, "loop %d's clock to pass %v", l.ID(), d)
	}
	RoundsPass(t, loops...)
}
