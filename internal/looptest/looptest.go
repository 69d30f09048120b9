// Package looptest runs event loops for the tests of the packages above
// core/loop (listen, proxy), as net/http/httptest runs servers: with the
// tuning the engine gives them by default, which config.Normalize fills
// (core/loop takes its options as given and imports no config).
//
// core/loop's own tests cannot import it: it imports core/loop. It is
// imported by _test.go files only; nothing in it runs in spliced.
package looptest

import (
	"sync"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
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
