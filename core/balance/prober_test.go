package balance

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// simLoop is a fake loop: a virtual clock and a list of armed timers.
type simLoop struct {
	now    time.Time
	timers map[*Check]time.Time
}

func newSimLoop() *simLoop {
	return &simLoop{now: time.Unix(0, 0), timers: map[*Check]time.Time{}}
}

func (l *simLoop) schedule(c *Check, d time.Duration) { l.timers[c] = l.now.Add(d) }

// runUntil fires timers in time order until end.
func (l *simLoop) runUntil(end time.Time) {
	for {
		var next *Check
		for c, at := range l.timers {
			if next == nil || at.Before(l.timers[next]) || (at.Equal(l.timers[next]) && c.Server.Name < next.Server.Name) {
				next = c
			}
		}
		if next == nil || l.timers[next].After(end) {
			l.now = end
			return
		}
		l.now = l.timers[next]
		delete(l.timers, next)
		next.Fire()
	}
}

func checkedBackend(t *testing.T, n, rise, fall int) *Backend {
	cfg := cfgBackend(config.BalanceRoundRobin, make([]int, n)...)
	for i := range cfg.Servers {
		w := 1
		cfg.Servers[i].Weight = &w
	}
	cfg.HealthCheck = &config.HealthCheck{Type: config.CheckTCP, IntervalMs: 1000, TimeoutMs: 500, Rise: rise, Fall: fall}
	cfg.Normalize()
	return mustBuild(t, cfg, nil)
}

func TestProberSpreadsFirstChecksOverOneInterval(t *testing.T) {
	b := checkedBackend(t, 1000, 2, 3)
	l := newSimLoop()
	p := NewProber(b)
	p.Schedule, p.Probe = l.schedule, func(c *Check) { c.Done(true) }
	p.Start()
	var at []time.Duration
	for _, c := range p.Checks() {
		at = append(at, l.timers[c].Sub(l.now))
		if c.Timeout != 500*time.Millisecond {
			t.Fatalf("timeout %v", c.Timeout)
		}
	}
	slices.Sort(at)
	if at[0] != 0 || at[len(at)-1] >= time.Second {
		t.Errorf("first checks span %v..%v, want within one interval", at[0], at[len(at)-1])
	}
	for i := 1; i < len(at); i++ {
		if at[i]-at[i-1] != time.Millisecond {
			t.Fatalf("checks %d and %d are %v apart, want 1ms", i-1, i, at[i]-at[i-1])
		}
	}
}

func TestProberTakesServerDownAndBackWithRiseFall(t *testing.T) {
	b := checkedBackend(t, 3, 2, 3)
	l := newSimLoop()
	// s1 answers between 0s and 4s, fails from 4s to 9s, answers again after.
	healthy := func(name string, now time.Time) bool {
		sec := now.Sub(time.Unix(0, 0)).Seconds()
		return name != "s1" || sec < 4 || sec >= 9
	}
	var events []string
	p := NewProber(b)
	p.Schedule = l.schedule
	p.Probe = func(c *Check) { c.Done(healthy(c.Server.Name, l.now)) }
	p.Now = func() time.Time { return l.now }
	p.OnChange = func(c *Check, up bool) {
		events = append(events, fmt.Sprintf("%s up=%v at %v", c.Server.Name, up, l.now.Sub(time.Unix(0, 0))))
	}
	p.Start()
	picker := b.NewPicker(0)

	l.runUntil(time.Unix(7, 0))
	// s1's checks run at 0.333s + k s: failures at 4.333, 5.333, 6.333 -> down.
	if b.Servers[1].Up() {
		t.Fatalf("s1 still up after three failed checks; events %v", events)
	}
	if got := counts(picker, 100); got["s1"] != 0 {
		t.Errorf("down server picked: %v", got)
	}
	l.runUntil(time.Unix(12, 0))
	// Successes at 9.333 and 10.333 -> up at the second one.
	want := []string{"s1 up=false at 6.333333333s", "s1 up=true at 10.333333333s"}
	if !slices.Equal(events, want) {
		t.Errorf("events %v, want %v", events, want)
	}
	if got := counts(picker, 99); got["s1"] != 33 {
		t.Errorf("back up server gets %v", got)
	}
	c := p.Checks()[1]
	if c.Runs != 12 || c.Fails != 5 {
		t.Errorf("s1 check runs %d fails %d, want 12 and 5", c.Runs, c.Fails)
	}
}

func TestProberStopsOnStopAndForRetiredServers(t *testing.T) {
	b := checkedBackend(t, 2, 1, 1)
	l := newSimLoop()
	var pending []*Check
	p := NewProber(b)
	p.Schedule = l.schedule
	p.Probe = func(c *Check) { pending = append(pending, c) } // answers later
	p.Start()
	l.runUntil(time.Unix(0, 0).Add(600 * time.Millisecond))
	if len(pending) != 2 {
		t.Fatalf("%d probes started, want 2", len(pending))
	}
	pending[0].Fire() // a timer firing while a probe runs starts nothing
	if len(pending) != 2 {
		t.Fatalf("second probe started while one was running")
	}
	b.Retire(nil)
	pending[0].Done(true)
	pending[1].Done(false)
	l.runUntil(time.Unix(5, 0))
	if len(pending) != 2 {
		t.Errorf("retired servers were probed again: %d probes", len(pending))
	}

	b2 := checkedBackend(t, 1, 1, 1)
	p2 := NewProber(b2)
	p2.Schedule, p2.Probe = l.schedule, func(c *Check) { c.Done(false) }
	p2.Start()
	p2.Stop()
	l.runUntil(time.Unix(10, 0))
	if !b2.Servers[0].Up() || p2.Checks()[0].Runs != 0 {
		t.Errorf("stopped prober still probes: runs %d", p2.Checks()[0].Runs)
	}
}

func TestProbeCycleDoesNotAllocate(t *testing.T) {
	b := checkedBackend(t, 1, 2, 3)
	p := NewProber(b)
	var armed *Check
	p.Schedule = func(c *Check, d time.Duration) { armed = c }
	p.Probe = func(c *Check) { c.Done(c.Runs%2 == 0) }
	now := time.Unix(1, 0)
	p.Now = func() time.Time { return now }
	p.Start()
	if n := testing.AllocsPerRun(1000, func() { armed.Fire() }); n != 0 {
		t.Errorf("%v allocations per probe cycle", n)
	}
}
