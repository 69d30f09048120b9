package config

// Defaults applied by Normalize. They follow HAProxy's where HAProxy has one
// (runqueue-depth 200, maxpollevents 200, bufsize 16 KiB, maxaccept 64) so
// that side-by-side comparisons start from the same place.
const (
	DefaultWeight          = 100
	DefaultRunqueueDepth   = 200
	DefaultMaxpollevents   = 200
	DefaultMaxaccept       = 64
	DefaultBufsize         = 16 * 1024
	DefaultPipesize        = 0 // 0 = kernel default (64 KiB), as HAProxy's tune.pipesize
	DefaultMaxpipes        = 1024
	DefaultSchedUrgent     = 33
	DefaultSchedNormal     = 50
	DefaultSchedBulk       = 17
	DefaultRetries         = 3
	DefaultConnectMs       = 5000
	DefaultServerMs        = 30000
	DefaultClientMs        = 30000
	DefaultQueueMs         = 5000
	DefaultTunnelMs        = 3600000
	DefaultHTTPRequestMs   = 10000
	DefaultHTTPKeepAliveMs = 10000
	DefaultCheckIntervalMs = 2000
	DefaultCheckTimeoutMs  = 1000
	DefaultCheckRise       = 2
	DefaultCheckFall       = 3
	// DefaultGraceMs: long enough for ordinary responses in flight to
	// complete on stop, short enough for systemd's stop timeout (20 s in
	// the packaged unit).
	DefaultGraceMs = 10000
)

// Normalize fills every field a client left at its zero value with its
// default, so that what GET returns is what runs. It is idempotent. Fields
// whose zero value is meaningful (server weight 0, tuning nbthread/maxconn 0
// meaning "from the machine") are pointers or documented as such.
func (c *Config) Normalize() {
	if c.Frontends == nil {
		c.Frontends = []Frontend{}
	}
	if c.Backends == nil {
		c.Backends = []Backend{}
	}
	for i := range c.Frontends {
		c.Frontends[i].Normalize()
	}
	for i := range c.Backends {
		c.Backends[i].Normalize()
	}
	c.Tuning.Normalize()
	if c.CPUMap.Mode == "" {
		c.CPUMap.Mode = CPUMapNone
	}
	if c.IRQ.Policy == "" {
		c.IRQ.Policy = IRQPolicyNone
	}
}

// Normalize fills a frontend's defaults.
func (f *Frontend) Normalize() {
	if f.Mode == "" {
		f.Mode = ModeTCP
	}
	if f.Binds == nil {
		f.Binds = []Bind{}
	}
	if f.Routes == nil {
		f.Routes = []Route{}
	}
	if f.Splice == "" {
		f.Splice = SpliceAuto
	}
	def(&f.Timeouts.ClientMs, DefaultClientMs)
	def(&f.Timeouts.TunnelMs, DefaultTunnelMs)
	if f.Mode == ModeHTTP {
		def(&f.Timeouts.HTTPRequestMs, DefaultHTTPRequestMs)
		def(&f.Timeouts.HTTPKeepAliveMs, DefaultHTTPKeepAliveMs)
		if f.HTTP == nil {
			f.HTTP = &FrontendHTTPOpts{XForwardedFor: true}
		}
	}
}

// Normalize fills a backend's defaults.
func (b *Backend) Normalize() {
	if b.Mode == "" {
		b.Mode = ModeTCP
	}
	if b.Balance == "" {
		b.Balance = BalanceRoundRobin
	}
	if b.Servers == nil {
		b.Servers = []Server{}
	}
	for i := range b.Servers {
		b.Servers[i].Normalize()
	}
	if b.Retries == nil {
		r := DefaultRetries
		b.Retries = &r
	}
	def(&b.Timeouts.ConnectMs, DefaultConnectMs)
	def(&b.Timeouts.ServerMs, DefaultServerMs)
	def(&b.Timeouts.QueueMs, DefaultQueueMs)
	def(&b.Timeouts.TunnelMs, DefaultTunnelMs)
	if hc := b.HealthCheck; hc != nil {
		def(&hc.IntervalMs, DefaultCheckIntervalMs)
		def(&hc.TimeoutMs, DefaultCheckTimeoutMs)
		def(&hc.Rise, DefaultCheckRise)
		def(&hc.Fall, DefaultCheckFall)
		if hc.Type == CheckHTTP {
			if hc.Method == "" {
				hc.Method = "GET"
			}
			if hc.Path == "" {
				hc.Path = "/"
			}
			def(&hc.StatusMin, 200)
			def(&hc.StatusMax, 399)
		}
	}
}

// Normalize fills a server's defaults.
func (s *Server) Normalize() {
	if s.Weight == nil {
		w := DefaultWeight
		s.Weight = &w
	}
	if s.AdminState == "" {
		s.AdminState = AdminReady
	}
}

// EffectiveWeight is the weight of a normalized or raw server.
func (s *Server) EffectiveWeight() int {
	if s.Weight == nil {
		return DefaultWeight
	}
	return *s.Weight
}

// Normalize fills the tuning defaults. The sched shares are filled only when
// all three are zero: a client that sets one share sets all three.
func (t *Tuning) Normalize() {
	def(&t.RunqueueDepth, DefaultRunqueueDepth)
	def(&t.Maxpollevents, DefaultMaxpollevents)
	def(&t.Maxaccept, DefaultMaxaccept)
	def(&t.Bufsize, DefaultBufsize)
	def(&t.Maxpipes, DefaultMaxpipes)
	def(&t.GraceMs, DefaultGraceMs)
	if t.Sched == (Sched{}) {
		t.Sched = Sched{Urgent: DefaultSchedUrgent, Normal: DefaultSchedNormal, Bulk: DefaultSchedBulk}
	}
	if t.Distribution == "" {
		t.Distribution = DistP2CRR
	}
}

func def(p *int, v int) {
	if *p == 0 {
		*p = v
	}
}

// Clone returns a deep copy: no slice, pointer or nested struct is shared
// with c. It is written out by hand (not a JSON round trip) because the
// store clones the whole config on every write, and a config may hold 10 000
// servers. A test checks it against the model with reflection, so a field
// added to the model without a line here fails the build's tests.
func (c *Config) Clone() *Config {
	out := *c
	out.Frontends = cloneSlice(c.Frontends, (*Frontend).clone)
	out.Backends = cloneSlice(c.Backends, (*Backend).clone)
	out.CPUMap.Threads = cloneSlice(c.CPUMap.Threads, func(t *ThreadCPUs) ThreadCPUs {
		return ThreadCPUs{Thread: t.Thread, CPUs: cloneInts(t.CPUs)}
	})
	if c.IRQ.NICs != nil {
		out.IRQ.NICs = append([]string{}, c.IRQ.NICs...)
	}
	out.IRQ.Pins = cloneSlice(c.IRQ.Pins, func(p *IRQPin) IRQPin {
		return IRQPin{IRQ: p.IRQ, CPUs: cloneInts(p.CPUs)}
	})
	return &out
}

func (f *Frontend) clone() Frontend {
	out := *f
	out.Binds = cloneSlice(f.Binds, func(b *Bind) Bind {
		nb := *b
		nb.Threads = cloneInts(b.Threads)
		return nb
	})
	if f.Routes != nil {
		out.Routes = append([]Route{}, f.Routes...)
	}
	if f.HTTP != nil {
		h := *f.HTTP
		out.HTTP = &h
	}
	return out
}

func (b *Backend) clone() Backend {
	out := *b
	out.Servers = cloneSlice(b.Servers, func(s *Server) Server {
		ns := *s
		if s.Weight != nil {
			w := *s.Weight
			ns.Weight = &w
		}
		return ns
	})
	if b.HealthCheck != nil {
		hc := *b.HealthCheck
		out.HealthCheck = &hc
	}
	if b.Retries != nil {
		r := *b.Retries
		out.Retries = &r
	}
	return out
}

// cloneSlice deep-copies s element by element, keeping nil as nil.
func cloneSlice[T any](s []T, clone func(*T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s))
	for i := range s {
		out[i] = clone(&s[i])
	}
	return out
}

func cloneInts(s []int) []int {
	if s == nil {
		return nil
	}
	return append([]int{}, s...)
}

// equal reports whether two servers have the same settings.
func (s *Server) equal(o *Server) bool {
	if (s.Weight == nil) != (o.Weight == nil) || s.Weight != nil && *s.Weight != *o.Weight {
		return false
	}
	return s.Name == o.Name && s.Address == o.Address && s.Port == o.Port &&
		s.Maxconn == o.Maxconn && s.AdminState == o.AdminState
}

// FindFrontend returns the index of the named frontend or -1.
func (c *Config) FindFrontend(name string) int {
	for i := range c.Frontends {
		if c.Frontends[i].Name == name {
			return i
		}
	}
	return -1
}

// FindBackend returns the index of the named backend or -1.
func (c *Config) FindBackend(name string) int {
	for i := range c.Backends {
		if c.Backends[i].Name == name {
			return i
		}
	}
	return -1
}
