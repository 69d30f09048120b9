package engine

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/listen"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/pin"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Loop threads at run time: every loop runs on a goroutine of its
// own that locks its OS thread for good (the thread ends with the goroutine,
// pin included, so a pinned thread never goes back to the runtime's pool),
// records its kernel tid and its original CPU mask, then runs the loop.
//
// tuning.nbthread changes the set of loops while traffic flows:
//   - more loops: draining loops (see below) are taken back first, then new
//     ones are created and started; a new accept Group over the new set is
//     built, binds opened by the same Apply go on it, and once the new
//     generation's frontends are published (their backends have a picker
//     per loop) every running bind is moved to it (listen.Group.Adopt: the
//     same sockets, duplicated, so nothing waiting in a backlog is lost);
//     the old Group is retired (its rings hand off what they hold).
//   - fewer loops: the same move to a Group over the remaining loops, so the
//     removed loops get no new connection; each removed loop is "draining":
//     it is soft-stopped as on SIGTERM (proxy.Worker.SoftStop: idle
//     keep-alive connections closed at once, requests in flight finish with
//     Connection: close, tcp tunnels go on), and what still runs after
//     tuning.grace_ms is closed; then the loop stops and its thread ends.
//     A draining loop taken back by a larger nbthread resumes keep-alive.
//
// Loop IDs stay dense: active loops are 0..nbthread-1 and draining ones
// follow; IDs index the workers, the per-loop counter slots and the
// backends' pickers, which are built for every live loop (active or
// draining), so a connection of a draining loop still picks servers.

// Loop thread states (loopRT.state, under Engine.mu).
const (
	loopActive = iota
	loopDraining
	loopStopped
)

// loopRT is one loop thread and what the engine knows about it.
type loopRT struct {
	l    *loop.Loop
	w    *proxy.Worker
	tid  atomic.Int64 // kernel thread id, 0 until the thread started
	orig []int        // the thread's mask when it started; written before Run
	done chan struct{}

	// Under Engine.mu.
	cpus     []int // mask the engine set last; nil = orig (not pinned)
	state    int
	drainGen uint64 // bumped when a drain starts or is cancelled
}

// threads is the engine's loop-thread bookkeeping (part of Engine).
type threads struct {
	fs pin.FS
	// all is every live loop by ID: the active ones, then the draining
	// ones (stopped ones at the tail are trimmed). Under Engine.mu.
	all []*loopRT
	// byID is the worker of every live loop by loop ID, for accept on the
	// loop threads (copy on write).
	byID atomic.Pointer[[]*proxy.Worker]
	// logRings are the access-log rings by loop ID (copy on write), read
	// by the access-log writer.
	logRings atomic.Pointer[[]*stats.LogRing]
	// Pins (pin.go).
	warnings atomic.Pointer[[]string]
	irqs     map[int][]int // the IRQ placement the last Apply wrote
}

// workerOf is the worker of loop l (loop thread; no lock, no allocation).
func (e *Engine) workerOf(l *loop.Loop) *proxy.Worker {
	return (*e.th.byID.Load())[l.ID()]
}

// publishWorkers republishes byID from all (e.mu held).
func (e *Engine) publishWorkers() {
	ws := make([]*proxy.Worker, len(e.th.all))
	for i, rt := range e.th.all {
		ws[i] = rt.w
	}
	e.th.byID.Store(&ws)
}

// initThreads records the loops start made (e.mu held, before they run).
func (e *Engine) initThreads() {
	e.th.all = make([]*loopRT, len(e.loops))
	for i, l := range e.loops {
		e.th.all[i] = &loopRT{l: l, w: e.workers[i], done: make(chan struct{})}
	}
	e.publishWorkers()
}

// runLoops starts the goroutine of every loop of all that has none (start).
func (e *Engine) runLoops() {
	for _, rt := range e.th.all {
		e.loopsWG.Add(1)
		go e.runLoop(rt)
	}
}

// runLoop is the goroutine of one loop. The OS thread stays locked until
// the goroutine exits, so the runtime ends the thread with its pin.
func (e *Engine) runLoop(rt *loopRT) {
	defer e.loopsWG.Done()
	defer close(rt.done)
	runtime.LockOSThread() // never unlocked: see above
	rt.tid.Store(int64(unix.Gettid()))
	if m, err := pin.ThreadAffinity(); err == nil {
		rt.orig = m
	}
	rt.l.Run()
}

// loopsOf returns the loops and workers of rts.
func loopsOf(rts []*loopRT) ([]*loop.Loop, []*proxy.Worker) {
	ls := make([]*loop.Loop, len(rts))
	ws := make([]*proxy.Worker, len(rts))
	for i, rt := range rts {
		ls[i], ws[i] = rt.l, rt.w
	}
	return ls, ws
}

// wantLoops is the number of loops t asks for.
func wantLoops(t *config.Tuning) int {
	if t.Nbthread > 0 {
		return t.Nbthread
	}
	return affinityCPUs()
}

// resize is a change of the number of loops prepared by Apply: new loops
// run but receive nothing until commitResize moves the binds to group.
type resize struct {
	from, to int
	grace    time.Duration // tuning.grace_ms of the snapshot: drain bound
	group    *listen.Group // over the loops 0..to-1
	started  []*loopRT     // created by this resize
	revived  []*loopRT     // draining loops made active again
}

// prepareResize starts or revives the loops a larger nbthread needs and
// builds the accept group over the new active set (e.mu held). Nothing is
// visible to traffic yet.
func (e *Engine) prepareResize(t *config.Tuning, to int, dist listen.Distribution) (*resize, error) {
	rs := &resize{from: len(e.loops), to: to, grace: graceOf(&config.Config{Tuning: *t})}
	if to > rs.from {
		if runtime.GOMAXPROCS(0) < to+1 {
			runtime.GOMAXPROCS(to + 1)
		}
		pt := proxyTuning(t, to, e.conns.Max()) // Apply re-tunes with the new maxconn
		for id := rs.from; id < to; id++ {
			if id < len(e.th.all) && e.th.all[id].state == loopDraining {
				rt := e.th.all[id]
				rt.state = loopActive
				rt.drainGen++ // cancels its drain
				w := rt.w
				rt.l.Exec(func(*loop.Loop) { w.Resume() }) // keep-alive again
				rs.revived = append(rs.revived, rt)
				continue
			}
			l, err := loop.New(loopOptions(id, t))
			if err != nil {
				e.abortResize(rs)
				return nil, fmt.Errorf("start loop %d: %w", id, err)
			}
			rt := &loopRT{l: l, w: proxy.NewWorker(l, pt), done: make(chan struct{})}
			e.giveLogRing(rt.w)
			if id < len(e.th.all) {
				e.th.all[id] = rt // the slot's previous loop has stopped
			} else {
				e.th.all = append(e.th.all, rt)
			}
			rs.started = append(rs.started, rt)
			e.loopsWG.Add(1)
			go e.runLoop(rt)
		}
		e.publishWorkers()
		deadline := time.Now().Add(5 * time.Second)
		for _, rt := range rs.started {
			for !rt.l.Running() {
				if time.Now().After(deadline) {
					e.abortResize(rs)
					return nil, fmt.Errorf("loop %d did not start", rt.l.ID())
				}
				time.Sleep(time.Millisecond)
			}
		}
	}
	loops, _ := loopsOf(e.th.all[:to])
	rs.group = listen.NewGroup(loops, 0, dist)
	return rs, nil
}

// abortResize undoes prepareResize after a failed Apply (e.mu held; the
// listeners opened on rs.group are closed already).
func (e *Engine) abortResize(rs *resize) {
	if rs.group != nil {
		rs.group.Retire()
	}
	for _, rt := range rs.revived {
		e.startDrain(rt, graceOf(e.cur))
	}
	for _, rt := range rs.started {
		e.stopLoop(rt, context.Background())
	}
	e.trimStopped()
	e.publishWorkers()
}

// commitResize moves every bind of newBinds that is not on rs.group yet to
// it, retires the old group, makes the first rs.to loops the active ones and
// starts draining the loops beyond (Apply's publish step, e.mu held, after
// the new frontends are published and removed binds are closed).
func (e *Engine) commitResize(rs *resize, newBinds map[bindID]*bindRT) {
	old := e.group
	keepOld := false
	for _, b := range newBinds {
		if b.ln.Group() == rs.group {
			continue
		}
		ln, err := rs.group.Adopt(b.ln, b.spec.Threads, b, e.accept)
		if err != nil {
			// Rare (no fd left to duplicate): the bind stays on the old
			// group, whose loops keep accepting for it.
			e.log.Error("nbthread: could not move a bind to the new loops", b.id.attr(), "err", err)
			keepOld = true
			continue
		}
		prev := b.ln
		b.ln = ln
		prev.Close() // closes its duplicates only
	}
	if !keepOld {
		old.Retire()
	}
	e.group = rs.group
	for i, rt := range e.th.all {
		if i >= rs.to && rt.state == loopActive {
			e.startDrain(rt, rs.grace)
		}
	}
	e.loops, e.workers = loopsOf(e.th.all[:rs.to])
	e.publishWorkers()
	e.setHandshakeCPUs()
	e.nbthread.Store(int64(rs.to))
	e.log.Info("nbthread changed", "from", rs.from, "to", rs.to)
}

// startDrain marks rt draining, soft-stops it, and watches it until its
// connections are gone or grace is over, then stops it (e.mu held).
func (e *Engine) startDrain(rt *loopRT, grace time.Duration) {
	rt.state = loopDraining
	rt.drainGen++
	gen := rt.drainGen
	e.softStop(rt)
	e.log.Info("loop draining", "loop", rt.l.ID(), "connections", rt.l.Activity().Conns.Load(), "grace", grace.String())
	go func() {
		deadline := time.Now().Add(grace)
		tick := time.NewTicker(10 * time.Millisecond)
		defer tick.Stop()
		for {
			idle := rt.l.Activity().Conns.Load() <= 0
			if idle || time.Now().After(deadline) {
				e.mu.Lock()
				if e.closed || rt.state != loopDraining || rt.drainGen != gen {
					e.mu.Unlock()
					return
				}
				if n := rt.l.Activity().Conns.Load(); n > 0 {
					e.log.Warn("loop drain grace over, closing its connections", "loop", rt.l.ID(), "connections", n)
				}
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				e.stopLoop(rt, ctx)
				cancel()
				e.trimStopped()
				e.publishWorkers()
				e.setHandshakeCPUs() // its P is the handshakes' again
				e.mu.Unlock()
				e.log.Info("loop stopped", "loop", rt.l.ID())
				return
			}
			<-tick.C
		}
	}()
}

// softStop runs proxy.Worker.SoftStop on rt's thread (any goroutine; it
// does not wait: what the loop runs next comes after it).
func (e *Engine) softStop(rt *loopRT) {
	w := rt.w
	rt.l.Exec(func(*loop.Loop) { w.SoftStop() })
}

// softStopAll soft-stops every live loop in two steps (Close, e.mu held):
// BeginStop on all of them, waited for (bounded by ctx and softStopWait,
// so a wedged loop cannot hold the stop), then CloseIdle. Once any client
// sees its idle connection closed, every request in flight on any loop
// already ends with Connection: close.
func (e *Engine) softStopAll(ctx context.Context) {
	var wg sync.WaitGroup
	for _, rt := range e.th.all {
		w := rt.w
		wg.Add(1)
		if !rt.l.Exec(func(*loop.Loop) { w.BeginStop(); wg.Done() }) {
			wg.Done()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, softStopWait)
	defer cancel()
	if err := waitGroup(wctx, &wg); err != nil {
		e.log.Warn("soft stop: not every loop confirmed", "err", err)
	}
	for _, rt := range e.th.all {
		w := rt.w
		rt.l.Exec(func(*loop.Loop) { w.CloseIdle() })
	}
}

// softStopWait bounds how long softStopAll waits for the loops to begin
// stopping: a loop answers within one round, milliseconds.
const softStopWait = time.Second

// stopLoop closes what rt still runs, stops it and waits for its thread
// to end (e.mu held). The thread exits locked, so its pin dies with it.
func (e *Engine) stopLoop(rt *loopRT, ctx context.Context) {
	if rt.state == loopStopped {
		return
	}
	done := make(chan struct{})
	w := rt.w
	if rt.l.Exec(func(*loop.Loop) { w.CloseAll(); close(done) }) {
		select {
		case <-done:
		case <-ctx.Done():
		}
	}
	rt.l.Stop()
	<-rt.done
	rt.l.Close()
	rt.state = loopStopped
	rt.drainGen++
}

// trimStopped drops stopped loops from the tail of all (e.mu held).
func (e *Engine) trimStopped() {
	n := len(e.th.all)
	for n > len(e.loops) && e.th.all[n-1].state == loopStopped {
		n--
	}
	e.th.all = e.th.all[:n]
}

// setHandshakeCPUs gives the TLS handshakes the Ps the running loops
// (active and draining) leave (e.mu held): at a shrink the draining loops
// still run, and each one that stops gives its P back. Without the second
// step a nbthread 2 -> 1 left the handshakes GOMAXPROCS-2 tokens after the
// drain ended, one instead of two with GOMAXPROCS 3: half the handshake
// capacity of the remaining loop, until the next nbthread change.
func (e *Engine) setHandshakeCPUs() {
	n := len(e.loops)
	for _, rt := range e.th.all[min(len(e.loops), len(e.th.all)):] {
		if rt.state != loopStopped {
			n++
		}
	}
	proxy.SetHandshakeCPUs(runtime.GOMAXPROCS(0) - n)
}

// liveLoops is the number of loops that may hold connections (active and
// draining): what backends size their pickers for (e.mu held).
func (e *Engine) liveLoops() int { return max(len(e.th.all), len(e.loops)) }

// giveLogRing gives w the access-log ring of its loop ID, reusing the ring
// of a stopped loop of the same ID (its producer is gone), else a new one
// the writer drains from now on (e.mu held).
func (e *Engine) giveLogRing(w *proxy.Worker) {
	p := e.th.logRings.Load()
	if p == nil {
		return // no writer (engine never started)
	}
	rings := *p
	if id := w.ID(); id < len(rings) {
		w.AccessLog = rings[id]
		return
	}
	next := append(append([]*stats.LogRing(nil), rings...), stats.NewLogRing(accessLogRing))
	w.AccessLog = next[len(next)-1]
	e.th.logRings.Store(&next)
}

// stopAllLoops closes every loop's remaining connections and stops every
// loop, active and draining (Close, e.mu held).
func (e *Engine) stopAllLoops(ctx context.Context) {
	for _, rt := range e.th.all {
		e.stopLoop(rt, ctx)
	}
	e.loopsWG.Wait()
}
