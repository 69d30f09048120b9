package config

// Defaults applied by Normalize, once, where a config enters (see the
// package doc, "Defaults"): nothing downstream (loop, listen, proxy, the
// engine) fills them again. They follow HAProxy's where HAProxy has one so
// that side-by-side comparisons start from the same place; each says what
// it buys, as HAProxy's task.c does ("[TL_URGENT] = 64, // ~50% of CPU
// bandwidth for I/O").
const (
	DefaultWeight        = 100       // mid-range of 0-256: a server can be given half (50) or twice (200) the share of its peers
	DefaultRunqueueDepth = 200       // tasklets per round (HAProxy's runqueue-depth): new I/O events are polled for at least every 200 tasklets (HAProxy measured 5.7 ms average loop time with it under mixed traffic, seed 000)
	DefaultMaxpollevents = 200       // events per epoll_wait (HAProxy's maxpollevents): one syscall can fill a whole round's budget
	DefaultBacklog       = 1024      // connections a bind's kernel queue holds before the loops accept them (listen(2) backlog, capped by net.core.somaxconn): a burst or a maxconn pause waits there instead of being refused
	DefaultMaxaccept     = 64        // accepts per listener wake-up (HAProxy's tune.maxaccept): a connection burst cannot starve the established connections of the accepting loop
	DefaultBufsize       = 16 * 1024 // bytes per I/O buffer (HAProxy's tune.bufsize): a whole request head (16 KiB at most) fits in one; pooled, held only while data is pending
	DefaultPipesize      = 0         // 0 = automatic: 256 KiB for a process the per-user pipe quota does not bind (CAP_SYS_RESOURCE/CAP_SYS_ADMIN, root), else the kernel default (64 KiB, HAProxy's tune.pipesize default); see core/proxy's autoPipeSize
	DefaultMaxpipes      = 1024      // splice pipes, process-wide and capped to maxconn/4: 1024 directions splice at once, the rest copy through buffers (2 fds per pipe)
	// Class shares of a round (seed 000, HAProxy 1dfc9bbdc6, measured with
	// 60000 connections at 100 Gbps); what a class leaves unused flows to
	// the next ones.
	DefaultSchedUrgent = 33 // ~1/3 of a round for tasklets woken by I/O: connection rate and latency
	DefaultSchedNormal = 50 // ~3/4 of what urgent left (50/(50+17)) for regular tasks and fired timers
	DefaultSchedBulk   = 17 // the rest for self-rewaking transfers (a splice or copy that used its byte cap): byte rate without starving new connections
	DefaultRetries     = 3  // connect attempts after a failed one, to another server when there is one (HAProxy's retries): a restarting server costs the client no error
	// Timeouts.
	DefaultConnectMs       = 5000    // covers two SYN retransmits (Linux RTO 1 s, then 2 s); past it the server is down or saturated and a retry goes elsewhere
	DefaultServerMs        = 30000   // 30 s of server silence (a slow report, a cold cache) before the exchange is cut (504 when no response started)
	DefaultClientMs        = 30000   // 30 s of client silence mid-exchange closes it: a stalled client does not hold its fds and buffers for ever
	DefaultQueueMs         = 5000    // a request waits 5 s at most for a server slot (server maxconn): a spike is absorbed, a lasting overload answers 503 fast
	DefaultTunnelMs        = 3600000 // 1 h of silence on a tcp tunnel or WebSocket: long-lived idle sessions (SSH, database pools) survive, dead peers are reaped
	DefaultHTTPRequestMs   = 10000   // 10 s to send a whole request head (HAProxy's usual timeout http-request): slowloris defence
	DefaultHandshakeMs     = 5000    // 5 s for a TLS client to send its ClientHello (SNI routing): a real client sends it at once, a silent one frees its fd
	DefaultHTTPKeepAliveMs = 10000   // an idle keep-alive connection waits 10 s for its next request: browsers reuse within seconds, idle fds go
	// Health checks (HAProxy's inter 2000, rise 2, fall 3).
	DefaultCheckIntervalMs = 2000 // a probe every 2 s per server: a dead server is noticed in seconds at a negligible cost
	DefaultCheckTimeoutMs  = 1000 // a probe unanswered in 1 s fails: half the interval, so probes never overlap
	DefaultCheckRise       = 2    // 2 good probes (~4 s) before traffic returns: a flapping server is not put back at its first answer
	DefaultCheckFall       = 3    // 3 failed probes (~6 s) before a server is taken out: one lost packet does not take it down
	// DefaultGraceMs: long enough for ordinary responses in flight to
	// complete on stop, short enough for systemd's stop timeout (20 s in
	// the packaged unit).
	DefaultGraceMs = 10000
	// DefaultPollNapUs: a loop whose events come fast naps 20 µs on its
	// own timer before it polls (loop.SetPollNap): on a quiet 2-core
	// machine the keep-alive rows went from 0.78× (tcp) and 0.94× (http)
	// the best peer's req/s to 1.03× and 1.01×, at 1.00× and 0.81× its CPU
	// per request (bench/README.md); one client at a time never naps, and
	// 20 µs is about 3 % of a loaded keep-alive request's latency on the
	// loopback (p50 550-620 µs at 50 clients).
	DefaultPollNapUs = 20
	// TLS.
	DefaultTLSMinVersion    = TLSVersion12 // TLS 1.0 and 1.1 are deprecated (RFC 8996): every client of the last ten years speaks 1.2
	DefaultMaxHandshakes    = 16           // handshakes computing at once per loop (one waiting for its peer holds none): one costs ~0.1 ms (ECDSA P-256) to ~1.5 ms (RSA-2048) of CPU plus a client round trip, so 16 keep a CPU busy with handshakes while a flood beyond them waits in the loop's queue instead of taking the CPUs from established connections
	DefaultTicketRotationMs = 3600000      // a new session ticket key every hour, 3 kept: a client resumes for 2-3 h, and a leaked key decrypts at most 3 h of sessions
	// DefaultClientCertHeaderPrefix names the headers carrying a verified
	// client certificate in http mode: X-Client-Cert-Subject and its
	// siblings, the names nginx users write by hand.
	DefaultClientCertHeaderPrefix = "X-Client-Cert-"
)

// HTTP/2 settings of an http frontend (http.h2), advertised in its
// SETTINGS frame.
const (
	DefaultH2MaxConcurrentStreams = 100   // HAProxy's tune.h2.max-concurrent-streams (nginx: 128): a browser's parallel requests of a page fit, and one client connection holds at most 100 server connections (each stream goes over its own HTTP/1.1 one)
	DefaultH2InitialWindowSize    = 65535 // the RFC's: a stream holds at most 64 KiB of request body not yet forwarded, and clients that never send SETTINGS agree with it
	DefaultH2MaxFrameSize         = 16384 // the RFC's minimum, which every peer must accept: a DATA frame's payload fits one 16 KiB buffer
	DefaultH2MaxHeaderListSize    = 16384 // the default bufsize: a request is forwarded as an HTTP/1.1 head that must fit one buffer, so a larger list could not be forwarded anyway
)

// DefaultHTTPVersions are the versions an http frontend speaks when
// http.versions is not set: both, on clear binds (h2c by prior knowledge)
// and TLS binds (ALPN) alike. A client that does not ask for HTTP/2 gets
// HTTP/1.1, so offering it costs nothing to older clients.
func DefaultHTTPVersions() []string { return []string{HTTPVersion11, HTTPVersion2} }

// DefaultCiphers are the TLS 1.0-1.2 suites of a TLS bind: ECDHE key
// exchange (forward secrecy) with AEAD ciphers only, for ECDSA and RSA
// certificates. No CBC suite (Lucky13-class attacks; testssl.sh rates them
// LOW), no static RSA key exchange (no forward secrecy), no 3DES or RC4.
// Go's order of preference applies (AES-GCM first where the CPU has AES
// instructions, ChaCha20 otherwise), not the order of this list.
func DefaultCiphers() []string {
	return []string{
		"TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256",
		"TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256",
		"TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384",
		"TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384",
		"TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256",
		"TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256",
	}
}

// Normalize fills every field a client left at its zero value with its
// default, so that what GET returns is what runs. It is idempotent. It is
// called where a config enters (decode of PUT /config, every store write,
// load and restore, spliced validate); the data plane receives normalized
// snapshots only and applies no default of its own. Fields whose zero
// value is meaningful (server weight 0, tuning nbthread/maxconn 0 meaning
// "from the machine") are pointers or documented as such.
func (c *Config) Normalize() {
	if c.Frontends == nil {
		c.Frontends = []Frontend{}
	}
	if c.Backends == nil {
		c.Backends = []Backend{}
	}
	if c.Certificates == nil {
		c.Certificates = []Certificate{}
	}
	for i := range c.Certificates {
		if c.Certificates[i].SANs == nil {
			c.Certificates[i].SANs = []string{}
		}
	}
	for i := range c.Frontends {
		c.Frontends[i].Normalize()
	}
	for i := range c.Backends {
		c.Backends[i].Normalize()
	}
	c.Tuning.Normalize()
	c.Schema = SchemaVersion
	if c.CPUMap.Mode == "" {
		c.CPUMap.Mode = CPUMapNone
	}
	if c.IRQ.Policy == "" {
		c.IRQ.Policy = IRQPolicyNone
	}
	for _, s := range c.Nodes {
		s.normalize() // fills through the section's pointers
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
	tlsBind := false
	for i := range f.Binds {
		def(&f.Binds[i].Backlog, DefaultBacklog)
		if t := f.Binds[i].TLS; t != nil {
			t.normalize(f.Mode)
			tlsBind = true
		}
		if f.Binds[i].AcceptProxy != nil {
			tlsBind = true // the header waits handshake_ms at most too
		}
	}
	if f.Routes == nil {
		f.Routes = []Route{}
	}
	if f.Rules != nil {
		f.Rules.normalize()
	}
	if f.Splice == "" {
		f.Splice = SpliceAuto
	}
	for i := range f.Limits {
		f.Limits[i].normalize()
	}
	def(&f.Timeouts.ClientMs, DefaultClientMs)
	def(&f.Timeouts.TunnelMs, DefaultTunnelMs)
	if f.Mode == ModeTCP && len(f.Routes) > 0 || tlsBind {
		def(&f.Timeouts.HandshakeMs, DefaultHandshakeMs)
	}
	if f.Mode == ModeHTTP {
		def(&f.Timeouts.HTTPRequestMs, DefaultHTTPRequestMs)
		def(&f.Timeouts.HTTPKeepAliveMs, DefaultHTTPKeepAliveMs)
		if f.HTTP == nil {
			f.HTTP = &FrontendHTTPOpts{}
		}
	}
	if o := f.HTTP; o != nil {
		if o.XForwardedFor == nil {
			// Each member its own default: never "on only when the whole
			// object is absent", which turned it off for {"max_body_size":100}.
			on := true
			o.XForwardedFor = &on
		}
		// nil only: an empty list is a client's mistake, which Validate
		// reports rather than replaces.
		if o.Versions == nil {
			o.Versions = DefaultHTTPVersions()
		}
		def(&o.H2.MaxConcurrentStreams, DefaultH2MaxConcurrentStreams)
		def(&o.H2.InitialWindowSize, DefaultH2InitialWindowSize)
		def(&o.H2.MaxFrameSize, DefaultH2MaxFrameSize)
		def(&o.H2.MaxHeaderListSize, DefaultH2MaxHeaderListSize)
	}
}

// normalize fills the TLS defaults of a bind of a frontend of mode mode.
func (t *BindTLS) normalize(mode string) {
	if t.Certificates == nil {
		t.Certificates = []string{}
	}
	if t.MinVersion == "" {
		t.MinVersion = DefaultTLSMinVersion
	}
	if len(t.Ciphers) == 0 {
		t.Ciphers = DefaultCiphers()
	}
	// alpn is not filled: on an http frontend an unset list is derived
	// from http.versions when the bind is applied (OfferedALPN), so that
	// a stored list is always one a client set.
	if t.ClientCA != "" {
		if t.ClientAuth == "" {
			t.ClientAuth = ClientAuthRequired
		}
		if t.ClientCertHeaderPrefix == "" && mode == ModeHTTP {
			t.ClientCertHeaderPrefix = DefaultClientCertHeaderPrefix
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
		b.Servers = []*Server{}
	}
	// A server of a published config is normalized already, so this
	// writes only into the servers a write brought (see Backend.Servers).
	for _, s := range b.Servers {
		if s != nil { // refused by Validate
			s.Normalize()
		}
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
	if s.TLS != nil && s.TLS.Verify == "" {
		s.TLS.Verify = VerifyRequired
	}
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
	def(&t.PollNapUs, DefaultPollNapUs)
	def(&t.TLS.MaxHandshakes, DefaultMaxHandshakes)
	def(&t.TLS.TicketRotationMs, DefaultTicketRotationMs)
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
	return c.clone((*Backend).clone)
}

// cloneSharingServers is Clone but for the backends' lists of servers,
// which the copy shares with c (capacity clipped, so that an append to
// one copies it): an Update with UpdateOptions.ShareServers. A write
// changes one server among 10 000 of one backend, or none (a frontend
// change): the lists it does not change are not copied, and the
// comparisons that follow (ServerSpan) see the same slice at once.
func (c *Config) cloneSharingServers() *Config {
	return c.clone(func(b *Backend) Backend {
		out := b.cloneHead()
		out.Servers = b.Servers[:len(b.Servers):len(b.Servers)]
		return out
	})
}

// OwnServers makes the list of servers of c.Backends[i] c's own (a copy
// of the pointers, 80 KB for 10 000 servers) and returns it to be changed:
// under UpdateOptions.ShareServers, the mutate of an Update calls it before
// it adds, removes or replaces a server. The servers themselves stay shared
// with the config c was cloned from and are never written (see
// Backend.Servers): to change one, replace its pointer with a changed copy
// (OwnServer). It copies on each call.
func (c *Config) OwnServers(i int) *[]*Server {
	b := &c.Backends[i]
	b.Servers = append(make([]*Server, 0, len(b.Servers)+4), b.Servers...)
	return &b.Servers
}

// OwnServer replaces server j of c.Backends[i] with a copy of it in a list
// of c's own (OwnServers) and returns the copy, to be changed. The copy
// shares nothing with the original (Weight and TLS copied too).
func (c *Config) OwnServer(i, j int) *Server {
	l := *c.OwnServers(i)
	s := l[j].clone()
	l[j] = s
	return s
}

// clone is a deep copy of s.
func (s *Server) clone() *Server {
	ns := *s
	if s.Weight != nil {
		w := *s.Weight
		ns.Weight = &w
	}
	if s.TLS != nil {
		t := *s.TLS
		ns.TLS = &t
	}
	return &ns
}

func (c *Config) clone(backend func(*Backend) Backend) *Config {
	out := *c
	out.Frontends = cloneSlice(c.Frontends, (*Frontend).clone)
	out.Backends = cloneSlice(c.Backends, backend)
	out.Certificates = cloneSlice(c.Certificates, (*Certificate).clone)
	out.CPUMap = c.CPUMap.clone()
	out.IRQ = c.IRQ.clone()
	if c.Nodes != nil {
		out.Nodes = make(map[string]NodeSettings, len(c.Nodes))
		for name, s := range c.Nodes {
			out.Nodes[name] = s.Clone()
		}
	}
	return &out
}

func (m *CPUMap) clone() CPUMap {
	out := *m
	out.Threads = cloneSlice(m.Threads, func(t *ThreadCPUs) ThreadCPUs {
		return ThreadCPUs{Thread: t.Thread, CPUs: cloneInts(t.CPUs)}
	})
	return out
}

func (q *IRQ) clone() IRQ {
	out := *q
	out.NICs = cloneStrings(q.NICs)
	out.Pins = cloneSlice(q.Pins, func(p *IRQPin) IRQPin {
		return IRQPin{IRQ: p.IRQ, CPUs: cloneInts(p.CPUs)}
	})
	return out
}

func (f *Frontend) clone() Frontend {
	out := *f
	out.Binds = cloneSlice(f.Binds, func(b *Bind) Bind {
		nb := *b
		nb.Threads = cloneInts(b.Threads)
		if b.TLS != nil {
			nb.TLS = b.TLS.clone()
		}
		if b.AcceptProxy != nil {
			nb.AcceptProxy = &AcceptProxy{Trusted: cloneStrings(b.AcceptProxy.Trusted)}
		}
		return nb
	})
	if f.Routes != nil {
		out.Routes = append([]Route{}, f.Routes...)
	}
	out.Limits = cloneLimits(f.Limits)
	if f.Rules != nil {
		out.Rules = f.Rules.clone()
	}
	if f.HTTP != nil {
		h := *f.HTTP
		if h.XForwardedFor != nil {
			v := *h.XForwardedFor
			h.XForwardedFor = &v
		}
		h.Versions = cloneStrings(f.HTTP.Versions)
		out.HTTP = &h
	}
	return out
}

func (t *BindTLS) clone() *BindTLS {
	out := *t
	out.Certificates = cloneStrings(t.Certificates)
	out.ALPN = cloneStrings(t.ALPN)
	out.Ciphers = cloneStrings(t.Ciphers)
	return &out
}

func (b *Backend) clone() Backend {
	out := b.cloneHead()
	if b.Servers == nil {
		return out
	}
	// The servers and their weights each in one array: a backend of
	// 10 000 servers is cloned in one piece, and one allocation per server
	// and per weight was most of its cost. A nil server (refused by
	// Validate) stays nil.
	out.Servers = make([]*Server, len(b.Servers), len(b.Servers)+4)
	servers := make([]Server, len(b.Servers))
	var weights []int
	for i, s := range b.Servers {
		if s == nil {
			continue
		}
		ns := &servers[i]
		*ns = *s
		if s.Weight != nil {
			if weights == nil {
				weights = make([]int, len(b.Servers))
			}
			weights[i] = *s.Weight
			ns.Weight = &weights[i]
		}
		if s.TLS != nil {
			t := *s.TLS
			ns.TLS = &t
		}
		out.Servers[i] = ns
	}
	return out
}

// cloneHead is clone but for the servers, which it leaves shared.
func (b *Backend) cloneHead() Backend {
	out := *b
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
	return cloneSliceRoom(s, 0, clone)
}

// cloneSliceRoom is cloneSlice with room for extra more elements: a
// write that adds a server to 10 000 then appends in place instead of
// copying them all once more.
func cloneSliceRoom[T any](s []T, extra int, clone func(*T) T) []T {
	if s == nil {
		return nil
	}
	out := make([]T, len(s), len(s)+extra)
	for i := range s {
		out[i] = clone(&s[i])
	}
	return out
}

func cloneStrings(s []string) []string {
	if s == nil {
		return nil
	}
	return append([]string{}, s...)
}

func cloneInts(s []int) []int {
	if s == nil {
		return nil
	}
	return append([]int{}, s...)
}

// equal reports whether two servers have the same settings.
func (s *Server) equal(o *Server) bool {
	if s == nil || o == nil { // refused by Validate; compared before it
		return s == o
	}
	if (s.Weight == nil) != (o.Weight == nil) || s.Weight != nil && *s.Weight != *o.Weight {
		return false
	}
	if (s.TLS == nil) != (o.TLS == nil) || s.TLS != nil && *s.TLS != *o.TLS {
		return false
	}
	return s.Name == o.Name && s.Address == o.Address && s.Port == o.Port &&
		s.Maxconn == o.Maxconn && s.AdminState == o.AdminState && s.SendProxy == o.SendProxy &&
		s.Proto == o.Proto
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

// FindServer returns the index of the named server in servers or -1.
func FindServer(servers []*Server, name string) int {
	for i := range servers {
		if servers[i].Name == name {
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
