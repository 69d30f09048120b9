package balance

import "time"

// Prober runs the health checks of one backend generation without doing any
// I/O or owning any timer itself: Schedule arms a timer (on a loop, later)
// and Probe performs one check (tcp connect or http request, owned by the
// proxy). Both are called on the thread that runs the Prober, and the
// caller calls Check.Fire when the timer expires and Check.Done when the
// probe finished, on that same thread. One Prober therefore belongs to one
// loop; its Checks need no locks and a probe cycle allocates nothing here.
//
// Spreading: the first check of server i of n fires at i*Interval/n, so
// 1 000 servers with a 2 s interval start 2 ms apart instead of all at
// once; each next check fires Interval after the previous one completed
// (as HAProxy reschedules from completion), so a slow server does not make
// checks pile up.
//
// Every server is probed whatever its admin state, so its observed state is
// known when it returns to ready; retired servers are not.
type Prober struct {
	// Interval, Timeout, Rise and Fall are the backend's check settings,
	// as Build accepted them (all > 0); a caller that builds a Prober
	// without a check sets them before Start.
	Interval time.Duration
	// Timeout is copied into each Check for the probe implementation.
	Timeout time.Duration
	Rise    int
	Fall    int
	// Schedule arms c's timer to fire after d (d may be 0).
	Schedule func(c *Check, d time.Duration)
	// Probe starts one check of c.Server; it must end with c.Done.
	Probe func(c *Check)
	// Now is the clock (time.Now when nil).
	Now func() time.Time
	// OnChange, when set, is told about each up/down transition (the caller
	// logs it, naming backend and server).
	OnChange func(c *Check, up bool)

	checks  []*Check
	started bool
}

// Check is the state of one server's health check.
type Check struct {
	Server  *Server
	Health  *Health
	Timeout time.Duration
	// Owner is free for the caller: its timer, connection, buffers.
	Owner any
	// Runs and Fails count probes started and failed (for stats).
	Runs, Fails uint64

	p       *Prober
	running bool
	stopped bool
}

// NewProber returns a Prober for b's servers with b's health check settings
// (zero values are left to the caller when b has no check).
func NewProber(b *Backend) *Prober {
	p := &Prober{}
	if hc := b.Check; hc != nil {
		p.Interval = time.Duration(hc.IntervalMs) * time.Millisecond
		p.Timeout = time.Duration(hc.TimeoutMs) * time.Millisecond
		p.Rise, p.Fall = hc.Rise, hc.Fall
	}
	for _, s := range b.Servers {
		p.checks = append(p.checks, &Check{Server: s, p: p})
	}
	return p
}

// Checks returns the per-server checks, in the backend's server order.
func (p *Prober) Checks() []*Check { return p.checks }

// Start schedules the first check of every server, spread over one
// Interval. The Health of each check starts from its server's current
// observed state (see NewHealth).
func (p *Prober) Start() {
	if p.started {
		return
	}
	p.started = true
	n := len(p.checks)
	for i, c := range p.checks {
		c.Health = NewHealth(c.Server, p.Rise, p.Fall)
		c.Timeout = p.Timeout
		p.Schedule(c, time.Duration(int64(p.Interval)*int64(i)/int64(n)))
	}
}

// Stop makes every later Fire and Done a no-op; the caller disarms its
// timers and aborts probes in flight.
func (p *Prober) Stop() {
	for _, c := range p.checks {
		c.stopped = true
	}
}

// Fire is called when c's timer expired: it starts a probe unless one is
// still running or the prober stopped.
func (c *Check) Fire() {
	if c.stopped || c.running {
		return
	}
	if c.Server.Retired() {
		c.stopped = true
		return
	}
	c.running = true
	c.Runs++
	c.p.Probe(c)
}

// Done records the outcome of the probe started by Fire, applies it to the
// server's observed state, and schedules the next check.
func (c *Check) Done(ok bool) {
	if !c.running {
		return
	}
	c.running = false
	if c.stopped {
		return
	}
	if !ok {
		c.Fails++
	}
	now := time.Now
	if c.p.Now != nil {
		now = c.p.Now
	}
	if c.Health.Observe(ok, now()) && c.p.OnChange != nil {
		c.p.OnChange(c, c.Health.Up())
	}
	c.p.Schedule(c, c.p.Interval)
}
