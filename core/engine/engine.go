package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"reflect"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/listen"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/pin"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/tlsconf"
)

// Options configure New.
type Options struct {
	Logger *slog.Logger
	// Resolve turns a server host name into an address; nil = system resolver.
	Resolve func(host string) (netip.Addr, error)
	// PinFS names the procfs/sysfs IRQs are read and pinned in; the zero
	// value is the host (tests use a fake tree). pin.go.
	PinFS pin.FS
	// Certs and TicketKeys build the *tls.Config of each bind with tls
	// (tlsconf.Certs.Server) at every Apply; without them such a bind
	// fails the Apply.
	Certs      *tlsconf.Certs
	TicketKeys *tlsconf.TicketKeys
	// AccessLog writes the access-log lines of the frontends with
	// access_log on and keeps the last ones (cmd/spliced builds it from
	// its --access-log-* flags); nil: lines "access" through Logger.
	AccessLog *accesslog.Log
	// ACME answers http-01 challenges on the clear binds of http
	// frontends (core/acme's Manager); nil: none.
	ACME proxy.HTTPChallenges
}

// Engine is the data plane: nbthread loops, their proxy workers, the accept
// group and the runtime objects built from the applied snapshot. It
// implements core.Control. Apply and Close are serialised by mu; the loops only
// read what Apply publishes through atomics and Exec.
type Engine struct {
	log     *slog.Logger
	alog    *accesslog.Log
	resolve func(string) (netip.Addr, error)
	certs   *tlsconf.Certs
	keys    *tlsconf.TicketKeys
	acme    proxy.HTTPChallenges
	// h2 is proxy.HTTP2Supported, which config.OfferedALPN is given: a
	// field so that the tests of the ALPN a bind offers force both values.
	h2 bool

	mu       sync.Mutex // serialises Apply and Close
	loops    []*loop.Loop
	workers  []*proxy.Worker
	group    *listen.Group
	loopsWG  sync.WaitGroup
	closed   bool
	cur      *config.Config
	tuned    *applied // the tuning every loop ran last (nil: to send)
	binds    map[bindID]*bindRT
	fronts   map[string]*feRT // by frontend name
	backends map[string]*beRT // by backend name

	gen      atomic.Int64
	nbthread atomic.Int64
	// liveNodes is the number of live nodes of the cluster (1 alone):
	// limits with scope cluster divide by it (SetLiveNodes).
	liveNodes atomic.Int32

	// stopping is set as the first thing Close does, before it waits for
	// mu: Apply refuses at once from then on (core.ErrStopping), and Stopping
	// reports it for /readyz, while Close holds mu for the whole grace.
	stopping atomic.Bool

	th threads // loop threads, nbthread changes, pins (threads.go, pin.go)

	view       atomic.Pointer[statsView] // what Stats reads (stats.go)
	stopAccess func()                    // stops the access-log writer

	// conns counts the live client connections of every frontend against
	// the global maxconn: each bind reserves a slot on it (and on its
	// frontend's feRT.lim) before accept4 (listen.Limit).
	conns listen.Limit
	// limitWarn says why the global maxconn is below what the config asks
	// or low (globalMaxconn); "" when it is not. Runtime reports it.
	limitWarn atomic.Pointer[string]
}

// feRT is a frontend's state that survives snapshots (same name): counters
// and its connection limit (maxconn, 0 = unlimited).
type feRT struct {
	name  string
	stats *proxy.Counters
	lim   listen.Limit
	// limits: the tables and counters of its limits by name, and the
	// running generation's compiled set (limits.go).
	limits   map[string]*limitRT
	limitSet *proxy.LimitSet
	rules    *ruleRT // compiled rules (rules.go), nil: none
}

// bindRT is one open bind. front is the current generation of its
// frontend; Apply swaps it. tcp connections keep the one they were
// accepted with; http connections load it for each new request.
type bindRT struct {
	id   bindID
	f    *feRT
	spec listen.BindSpec // Limits: &f.lim, &Engine.conns
	// ln is the bind's listener; only Apply's goroutine reads and replaces
	// it (e.mu held): the loops reach a listener through its acceptors.
	ln    *listen.Listener
	front atomic.Pointer[proxy.Frontend]
	// onClose is the OnClose of the frontends this bind serves
	// (bindRT.frontend): the connection's maxconn slots go back, and its
	// end counts in spec.Conns, the bind's per-loop load that the accept
	// distribution compares (listen.LoopConns, HAProxy's thr_conn).
	onClose func(loop int)
}

// newBind is the runtime of a bind about to open with spec, of the
// frontend whose state is f.
func (e *Engine) newBind(id bindID, f *feRT, spec listen.BindSpec) *bindRT {
	conns := listen.NewLoopConns()
	spec.Conns = conns
	b := &bindRT{id: id, f: f, spec: spec}
	b.onClose = func(loop int) {
		e.release(f)
		conns.Done(loop)
	}
	return b
}

// frontend is f as bind b serves it: a copy whose OnClose is the bind's.
func (b *bindRT) frontend(f *proxy.Frontend) *proxy.Frontend {
	c := *f
	c.OnClose = b.onClose
	return &c
}

// beRT is a backend's state across snapshots: the balance lineage and
// counters.
type beRT struct {
	bb    *balance.Backend
	pb    *proxy.Backend
	chk   *proxy.Checker // health checks, nil without (check.go)
	stats *proxy.Counters
	// nloops is the pickers pb was made with; literal that every server
	// address is an IP address (none to resolve again): both say whether
	// the next Apply may update this backend in place (inPlace).
	nloops  int
	literal bool
}

// New returns an engine that runs nothing until the first Apply.
func New(o Options) (*Engine, error) {
	log := o.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Engine{
		log:      log,
		alog:     o.AccessLog,
		resolve:  o.Resolve,
		certs:    o.Certs,
		keys:     o.TicketKeys,
		acme:     o.ACME,
		h2:       proxy.HTTP2Supported,
		binds:    map[bindID]*bindRT{},
		fronts:   map[string]*feRT{},
		backends: map[string]*beRT{},
		th:       threads{fs: o.PinFS},
	}, nil
}

// Runtime reports what runs (any goroutine).
func (e *Engine) Runtime() core.Runtime {
	return core.Runtime{
		Nbthread:   int(e.nbthread.Load()),
		Maxconn:    int(e.conns.Max()),
		Warnings:   e.limitWarnings(),
		Generation: e.gen.Load(),
	}
}

// limitWarnings is the warning of globalMaxconn in force, if any.
func (e *Engine) limitWarnings() []string {
	if w := e.limitWarn.Load(); w != nil && *w != "" {
		return []string{*w}
	}
	return nil
}

// Activity returns every loop's counters, by loop index (any goroutine).
func (e *Engine) Activity() []*loop.Activity {
	e.mu.Lock()
	defer e.mu.Unlock()
	out := make([]*loop.Activity, len(e.loops))
	for i, l := range e.loops {
		out[i] = l.Activity()
	}
	return out
}

// affinityCPUs is the number of CPUs the process may run on.
func affinityCPUs() int {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return runtime.NumCPU()
	}
	if n := set.Count(); n > 0 {
		return n
	}
	return 1
}

// start creates and runs the loops (first Apply).
func (e *Engine) start(t *config.Tuning, dist listen.Distribution) error {
	n := t.Nbthread
	if n <= 0 {
		n = affinityCPUs()
	}
	// One P per loop thread (they never park in Go) plus one for the admin
	// API, health checks and the GC.
	if runtime.GOMAXPROCS(0) < n+1 {
		runtime.GOMAXPROCS(n + 1)
	}
	// TLS handshakes compute on the Ps the loops leave (xprt_tls.go).
	proxy.SetHandshakeCPUs(runtime.GOMAXPROCS(0) - n)
	loops := make([]*loop.Loop, 0, n)
	for i := range n {
		l, err := loop.New(loopOptions(i, t))
		if err != nil {
			for _, l := range loops {
				l.Close()
			}
			return fmt.Errorf("start loop %d: %w", i, err)
		}
		loops = append(loops, l)
	}
	e.loops = loops
	pt := proxyTuning(t, n, e.conns.Max())
	for _, l := range loops {
		e.workers = append(e.workers, proxy.NewWorker(l, pt))
	}
	e.stopAccess = e.startAccessLog()
	e.group = listen.NewGroup(loops, 0, dist)
	e.initThreads()
	e.runLoops()
	// Wait until every loop runs: listen.Open waits for running loops only,
	// and a bind must accept when Apply returns.
	deadline := time.Now().Add(5 * time.Second)
	for _, l := range loops {
		for !l.Running() {
			if time.Now().After(deadline) {
				return fmt.Errorf("loop %d did not start", l.ID())
			}
			time.Sleep(time.Millisecond)
		}
	}
	e.nbthread.Store(int64(n))
	e.log.Info("data plane started", "nbthread", n, "gomaxprocs", runtime.GOMAXPROCS(0))
	return nil
}

// loopOptions is what loop id runs with under t (normalized: the loops
// take the values as given).
func loopOptions(id int, t *config.Tuning) loop.Options {
	return loop.Options{ID: id, RunqueueDepth: t.RunqueueDepth, Maxpollevents: t.Maxpollevents, Sched: loop.Sched(t.Sched),
		BusyPollUs: t.BusyPollUs, PollNapUs: t.PollNapUs}
}

// proxyTuning is what the workers run with nloops loops and the global
// maxconn in force (Apply's last step re-tunes every loop with the maxconn
// it publishes). t is normalized: no default is applied here.
func proxyTuning(t *config.Tuning, nloops int, maxconn int64) proxy.Tuning {
	// tuning.maxpipes is process-wide as in HAProxy, capped to a quarter of
	// the global maxconn (the fd budget, config.PipesFor); each loop gets
	// its share.
	maxpipes := config.PipesFor(t.Maxpipes, int(maxconn))
	// The idle server connections of the http pools are capped the same
	// way (config.IdleFor: a quarter of maxconn), each loop its share.
	maxidle := config.IdleFor(int(maxconn))
	return proxy.Tuning{Bufsize: t.Bufsize, Maxpipes: (maxpipes + nloops - 1) / nloops, Pipesize: t.Pipesize,
		MaxIdle: (maxidle + nloops - 1) / nloops, TLSMaxHandshakes: t.TLS.MaxHandshakes}
}

// globalMaxconn is the global maxconn in force for c on nloops loops:
// tuning.maxconn, or what the fd limit allows (config.FdBudget: 2 fds per
// connection, 2 per pipe of a maxpipes capped to maxconn/4, 1 per pooled
// idle server connection (maxconn/4, config.IdleFor), the loops' and
// listening sockets' fds, and config.FdReserve kept for the admin API).
// warn says why it is lower than the config asks, or that the fd limit
// leaves fewer than config.LowMaxconn connections; empty otherwise. A
// tuning.maxconn above the limit is refused by validation (422) when it
// comes through the API; a persisted one is clamped here.
func globalMaxconn(c *config.Config, nloops int) (n int64, warn string) {
	t := &c.Tuning
	var rl unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &rl); err != nil {
		if t.Maxconn > 0 {
			return int64(t.Maxconn), ""
		}
		return 1024, ""
	}
	lim := int64(min(rl.Cur, 1<<62))
	b := config.NewFdBudget(c, nloops)
	fit := max(b.Maxconn(lim), 1) // 0 would mean unlimited
	switch {
	case t.Maxconn > 0 && b.Fds(t.Maxconn) > lim:
		return int64(fit), "tuning." + b.Message(t.Maxconn, lim) + ": running with maxconn " + strconv.Itoa(fit)
	case t.Maxconn > 0:
		return int64(t.Maxconn), ""
	case fit < config.LowMaxconn:
		return int64(fit), "the fd limit (RLIMIT_NOFILE) is " + strconv.FormatInt(lim, 10) + ": maxconn " + strconv.Itoa(fit) +
			" (2 fds per connection, 2 per pipe, 1 per pooled idle server connection, " + strconv.FormatInt(b.Fixed, 10) +
			" for the loops, the listening sockets, the health checks and the admin API); raise the hard limit (systemd LimitNOFILE=, ulimit -Hn) for more"
	}
	return int64(fit), ""
}

// bindID names a bind: its frontend and its name within it. It is a
// comparable value type (a map key, compared with ==), as net/netip's
// Addr, not a string joined with a separator.
type bindID struct {
	Frontend, Bind string
}

// LogValue makes a bindID log as the frontend and bind attributes every
// bind log line carries; logged with attr (under the empty key, which
// slog inlines), a line reads frontend=pub bind=b1.
func (id bindID) LogValue() slog.Value {
	return slog.GroupValue(slog.String("frontend", id.Frontend), slog.String("bind", id.Bind))
}

// attr is id as the frontend and bind attributes of a log line.
func (id bindID) attr() slog.Attr { return slog.Any("", id) }

func bindSpec(b *config.Bind) listen.BindSpec {
	return listen.BindSpec{Address: b.Address, Port: b.Port, Backlog: b.Backlog, Shards: b.Shards, Threads: b.Threads}
}

func sameSpec(a, b listen.BindSpec) bool {
	return a.Address == b.Address && a.Port == b.Port && a.Backlog == b.Backlog &&
		a.Shards == b.Shards && slices.Equal(a.Threads, b.Threads)
}

// bindError is the ApplyError of a bind the OS refused to open (ptr is
// the bind's pointer in the document). It names the address, and points at
// the field to change: the port when it is taken (EADDRINUSE) or
// privileged (EACCES), the address when no interface has it
// (EADDRNOTAVAIL), else the bind. The errno stays reachable (errors.Is).
func bindError(ptr, frontend, bind string, spec listen.BindSpec, err error) *config.ApplyError {
	oe := osErr(err)
	switch {
	case errors.Is(oe, syscall.EADDRINUSE), errors.Is(oe, syscall.EACCES):
		ptr += "/port"
	case errors.Is(oe, syscall.EADDRNOTAVAIL):
		ptr += "/address"
	}
	addr := net.JoinHostPort(spec.Address, strconv.Itoa(spec.Port))
	return &config.ApplyError{Field: ptr, Object: "frontend " + frontend + " bind " + bind, Err: fmt.Errorf("%s: %w", addr, oe)}
}

// osErr extracts the errno of an OS refusal, for ApplyError.
func osErr(err error) error {
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return errno
	}
	return err
}

// Apply makes the data plane run snap; see core.Control. The order keeps a
// failure side-effect free: backends are built (on error rebuilt from the
// running config, which restores weights and states of shared servers),
// new and changed binds are opened (on error the ones opened here are
// closed and changed ones reopened as they were), and only then is
// anything published. Removed binds are closed last; their established
// connections live on.
func (e *Engine) Apply(ctx context.Context, snap *config.Config) error {
	if e.stopping.Load() {
		return core.ErrStopping // at once: Close holds mu for the whole grace
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed || e.stopping.Load() {
		return core.ErrStopping
	}
	// Refused before anything changes; set with the rest of the snapshot.
	dist, err := listen.ParseDistribution(snap.Tuning.Distribution, snap.Tuning.Maxaccept)
	if err != nil {
		return &config.ApplyError{Field: "/tuning", Object: "tuning", Err: err}
	}
	first := e.loops == nil
	var rs *resize // nbthread change (threads.go)
	if first {
		if err := e.start(&snap.Tuning, dist); err != nil {
			return err
		}
	} else if n := wantLoops(&snap.Tuning); n != len(e.loops) {
		var err error
		if rs, err = e.prepareResize(&snap.Tuning, n, dist); err != nil {
			return &config.ApplyError{Field: "/tuning/nbthread", Object: "tuning nbthread", Err: err}
		}
	}
	group, active := e.group, e.th.all[:len(e.loops)]
	if rs != nil {
		group, active = rs.group, e.th.all[:rs.to]
	}
	// Pickers for every loop that may hold a connection, draining ones too.
	nloops := e.liveLoops()

	// 1. Backends.
	toMaint := false // a server updated in place went into maint
	newBE := make(map[string]*beRT, len(snap.Backends))
	spans := config.SpansOf(ctx) // where the store found the lists differ, if it did
	var curBE map[string]*config.Backend
	if e.cur != nil {
		curBE = make(map[string]*config.Backend, len(e.cur.Backends))
		for i := range e.cur.Backends {
			curBE[e.cur.Backends[i].Name] = &e.cur.Backends[i]
		}
	}
	for i := range snap.Backends {
		cb := &snap.Backends[i]
		prev := e.backends[cb.Name]
		old := curBE[cb.Name]
		// Only the servers between the equal head and tail may differ
		// (prev was built from old: its servers are old's, in order).
		h, t := 0, 0
		if prev != nil && old != nil && len(prev.bb.Servers) == len(old.Servers) {
			h, t = spans.Servers(e.cur, old, snap, i)
		}
		if prev != nil && prev.nloops == nloops && prev.literal && old != nil &&
			len(old.Servers) == len(cb.Servers) && len(prev.bb.Servers) == len(cb.Servers) {
			if inPlace(old, cb, h, len(cb.Servers)-t) {
				// The same servers in the same order, only weight,
				// maxconn or admin_state changed (or nothing): set in
				// place on the running servers what changed, as Build's
				// second pass does, without rebuilding the backend.
				if setInPlace(prev.bb.Servers[h:len(cb.Servers)-t], cb.Servers[h:len(cb.Servers)-t], old.Servers[h:len(cb.Servers)-t]) {
					toMaint = true
				}
				newBE[cb.Name] = prev
				continue
			}
		}
		var prevBB *balance.Backend

		if prev != nil {
			prevBB = prev.bb
		}
		bb, err := balance.BuildChange(cb, prevBB, h, t, e.resolveFn())
		if err != nil {
			e.restoreBackends(newBE)
			return &config.ApplyError{Field: "/backends/" + strconv.Itoa(i), Object: "backend " + cb.Name, Err: err}
		}
		// Built on prev by buildFrom: the servers outside the window it
		// looked at are prev's, which have their TLS and counters.
		lo, hi, _ := bb.Window(prevBB)
		if err := serverTLS(bb, cb, i, lo, hi); err != nil {
			newBE[cb.Name] = &beRT{bb: bb} // its reused servers were updated: restore them too
			e.restoreBackends(newBE)
			return err
		}
		e.serverCounters(bb.Servers[lo:hi])
		stats := e.newCounters()
		if prev != nil {
			stats = prev.stats
		}
		newBE[cb.Name] = &beRT{bb: bb, pb: proxy.NewBackend(bb, nloops, stats), stats: stats,
			nloops: nloops, literal: bb.Literal()}
	}

	// 2. Frontends (new runtime objects; feRT carried over by name).
	newFE := make(map[string]*feRT, len(snap.Frontends))
	fronts := make(map[string]*proxy.Frontend, len(snap.Frontends))
	newRules := make(map[string]*ruleRT, len(snap.Frontends))
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		f := e.fronts[cf.Name]
		if f == nil {
			f = &feRT{name: cf.Name, stats: e.newCounters()}
			f.lim.SetMax(int64(cf.Maxconn)) // nobody reserves on it before its binds open
		}
		newFE[cf.Name] = f
		rrt, err := compileRules(f, cf, nloops)
		if err != nil {
			if rs != nil {
				e.abortResize(rs)
			}
			e.restoreBackends(newBE)
			return rulesError(i, cf, err)
		}
		newRules[cf.Name] = rrt
		pf := &proxy.Frontend{
			Name:          cf.Name,
			Splice:        proxy.ParseSplice(cf.Splice),
			TunnelTimeout: time.Duration(cf.Timeouts.TunnelMs) * time.Millisecond,
			ClientTimeout: time.Duration(cf.Timeouts.ClientMs) * time.Millisecond,
			Stats:         f.stats,
			AccessLog:     cf.AccessLog,
		}
		pf.Limits = e.frontLimits(f, cf) // limits.go
		if be := newBE[cf.DefaultBackend]; be != nil {
			pf.Backend = be.pb
		}
		if cf.Mode == config.ModeHTTP {
			pf.HTTP = httpFront(cf, pf.Backend, newBE)
			pf.HTTP.Rules = frontRules(rrt, newBE, pf.Limits)
			pf.CertStrip = certStrip(cf)
			pf.CertStripName = string(pf.CertStrip)
			pf.ACME = e.acme // http-01 on clear binds (tlsFronts clears it)
		} else if rrt != nil {
			pf.Rules = rrt.req
		}
		if cf.Mode != config.ModeHTTP && len(cf.Routes) > 0 {
			// SNI routes, resolved to this generation's backends (a route
			// to a missing one closes its connections, as no server).
			pf.InspectTimeout = time.Duration(cf.Timeouts.HandshakeMs) * time.Millisecond
			for _, r := range cf.Routes {
				var be *proxy.Backend
				if b := newBE[r.Backend]; b != nil {
					be = b.pb
				}
				pf.SNI = append(pf.SNI, proxy.NewSNIRoute(r.SNI, be))
			}
		}
		fronts[cf.Name] = pf
	}

	// 2b. TLS: each bind with tls gets its own copy of its frontend with
	// the *tls.Config built from this snapshot (certificates as they are
	// now: a certificate replaced since the last Apply serves the new
	// handshakes from here on; established connections keep theirs).
	bindFronts, err := e.tlsFronts(snap, fronts)
	if err != nil {
		if rs != nil {
			e.abortResize(rs)
		}
		e.restoreBackends(newBE)
		return err
	}
	bindFronts = proxyFronts(snap, fronts, bindFronts)
	frontOf := func(id bindID) *proxy.Frontend {
		if f := bindFronts[id]; f != nil {
			return f
		}
		return fronts[id.Frontend]
	}

	// 3. Binds: open new ones, rebind changed ones.
	type reopen struct {
		old  *bindRT
		spec listen.BindSpec
	}
	var opened []*bindRT  // opened by this Apply
	var replaced []reopen // old binds closed for a rebind, to restore on failure
	newBinds := make(map[bindID]*bindRT, len(e.binds))
	fail := func(err error) error {
		for _, b := range opened {
			b.ln.Close()
		}
		if rs != nil {
			e.abortResize(rs)
		}
		for _, r := range replaced {
			ln, oerr := e.group.Open(r.spec, r.old, e.accept)
			if oerr != nil {
				e.log.Error("could not restore a bind after a failed apply", r.old.id.attr(), "err", oerr)
				delete(e.binds, r.old.id)
				continue
			}
			r.old.ln = ln
		}
		e.restoreBackends(newBE)
		return err
	}
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		for j := range cf.Binds {
			cb := &cf.Binds[j]
			id := bindID{cf.Name, cb.Name}
			spec := bindSpec(cb)
			old := e.binds[id]
			if old != nil && sameSpec(old.spec, spec) {
				newBinds[id] = old
				continue
			}
			if old != nil {
				old.ln.Close() // rebind: the port must be free for the new socket
				replaced = append(replaced, reopen{old, old.spec})
			}
			spec.Limits = []*listen.Limit{&newFE[cf.Name].lim, &e.conns}
			b := e.newBind(id, newFE[cf.Name], spec)
			b.front.Store(b.frontend(frontOf(id)))
			ln, err := group.Open(b.spec, b, e.accept)
			if err != nil {
				return fail(bindError("/frontends/"+strconv.Itoa(i)+"/binds/"+strconv.Itoa(j), cf.Name, cb.Name, spec, err))
			}
			b.ln = ln
			opened = append(opened, b)
			newBinds[id] = b
			e.log.Info("bind opened", id.attr(), "address", ln.Addr().String())
		}
	}

	// 3b. CPU map and IRQ pins (pin.go): the last step that may fail.
	if _, err := e.applyPins(ctx, snap, active, first); err != nil {
		return fail(err)
	}

	// 4. Publish. From here on nothing fails.
	for id, b := range newBinds {
		// b.f is fixed at bind creation: the same frontend name keeps its feRT.
		b.front.Store(b.frontend(frontOf(id)))
	}
	if e.certs != nil {
		e.certs.Retain(snap) // bundles no certificate names any more
	}
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		newFE[cf.Name].lim.SetMax(int64(cf.Maxconn))
		newFE[cf.Name].rules = newRules[cf.Name]
	}
	removed := false
	for id, b := range e.binds {
		if nb := newBinds[id]; nb == nil {
			b.ln.Close() // removed: stop accepting
			// Its connections wind down: HTTP/1.1 ones close after their
			// next response or now if idle, HTTP/2 ones get GOAWAY.
			b.front.Store(proxy.Removed)
			removed = true
			e.log.Info("bind closed", id.attr())
		}
	}
	if rs != nil {
		e.commitResize(rs, newBinds) // new loops get connections from here on
	}
	// A request resolves its frontend and picks its server in one run of
	// its loop: once every live loop ran an empty function after the new
	// frontends were stored, none still picks from the previous generation,
	// so its servers may be retired without a request finding them all
	// retired (503) between its resolve and its pick. A change that
	// retires nothing (every backend updated in place, no bind removed:
	// a weight or admin_state change) needs no such round of the loops.
	retiring := removed
	for name, prev := range e.backends {
		if newBE[name] != prev {
			retiring = true
		}
	}
	if retiring {
		e.onLiveLoops(ctx, func(w *proxy.Worker) {
			if removed {
				w.EndRemoved()
			}
		})
	}
	for name, prev := range e.backends {
		if nb := newBE[name]; nb == prev {
			continue // updated in place: nothing retired, nothing moved
		} else if nb != nil {
			prev.bb.Retire(nb.bb)
		} else {
			prev.bb.Retire(nil)
		}
	}
	e.swapCheckers(newBE)
	e.binds, e.fronts, e.backends = newBinds, newFE, newBE
	// Pooled idle connections to servers retired or put in maint are of no
	// further use: every loop closes its own now, not at their idle expiry.
	if retiring || toMaint {
		e.onLiveLoops(ctx, (*proxy.Worker).DropIdleUnusable)
	}
	maxconn, warn := globalMaxconn(snap, e.liveLoops())
	e.conns.SetMax(maxconn)
	if old := e.limitWarn.Swap(&warn); warn != "" && (old == nil || *old != warn) {
		e.log.Warn("the fd limit lowers maxconn", "maxconn", maxconn, "why", warn)
	}
	e.group.SetDistribution(dist)

	// 5. Every loop picks the snapshot up: tuning applied on its thread;
	// Apply returns once all of them ran it. The same tuning on the same
	// loops as the last Apply's (a server or frontend change) is not
	// sent again.
	t := snap.Tuning
	pt := proxyTuning(&t, len(e.loops), maxconn)
	if tu := (applied{t, pt, len(e.loops)}); first || rs != nil || e.tuned == nil || *e.tuned != tu {
		if err := e.onEveryLoop(ctx, func(l *loop.Loop, w *proxy.Worker) {
			l.SetTuning(t.RunqueueDepth, t.Maxpollevents, loop.Sched(t.Sched))
			l.SetBusyPoll(t.BusyPollUs)
			l.SetPollNap(t.PollNapUs)
			w.SetTuning(pt)
		}); err != nil {
			// The snapshot is published; only the wait was cut short.
			e.log.Warn("apply: not every loop confirmed the snapshot", "err", err)
			e.tuned = nil // sent again by the next Apply
		} else {
			e.tuned = &tu
		}
	}
	e.cur = snap
	e.gen.Store(snap.Generation)
	e.publishStats(snap)
	return nil
}

func (e *Engine) resolveFn() func(string) (netip.Addr, error) { return e.resolve }

// inPlace reports that the running backend built from old becomes next by
// setting its servers' weight, maxconn and admin state: everything else
// (the backend's own fields, each server's name, address, port, tls,
// send_proxy and proto, their order) is the same. HAProxy changes weights
// and states at run time the same way, without rebuilding the backend.
// The servers of both, as many, are equal outside [from, to)
// (config.ServerSpan): only those between are compared.
func inPlace(old, next *config.Backend, from, to int) bool {
	if old == nil || len(old.Servers) != len(next.Servers) {
		return false
	}
	a, b := *old, *next
	a.Servers, b.Servers = nil, nil
	if !reflect.DeepEqual(&a, &b) {
		return false
	}
	for i := from; i < to; i++ {
		o, n := old.Servers[i], next.Servers[i]
		if o.Name != n.Name || o.Address != n.Address || o.Port != n.Port || o.SendProxy != n.SendProxy ||
			o.Proto != n.Proto || (o.TLS == nil) != (n.TLS == nil) || o.TLS != nil && *o.TLS != *n.TLS ||
			n.Weight == nil || o.Weight == nil {
			return false
		}
		switch n.AdminState {
		case config.AdminReady, config.AdminDrain, config.AdminMaint:
		default:
			return false
		}
	}
	return true
}

// applied is the tuning the loops last ran (Apply's step 5).
type applied struct {
	t     config.Tuning
	pt    proxy.Tuning
	loops int
}

// setInPlace sets on the running servers what changed from old to next
// (inPlace said that it is their weight, maxconn or admin_state). It
// reports that a server went into maint (its pooled connections are to
// be closed: DropIdleUnusable).
func setInPlace(run []*balance.Server, next, old []*config.Server) (toMaint bool) {
	for j, s := range run {
		cs, oc := next[j], old[j]
		if *cs.Weight != *oc.Weight {
			s.SetWeight(*cs.Weight)
		}
		if cs.Maxconn != oc.Maxconn {
			s.SetMaxconn(cs.Maxconn)
		}
		if cs.AdminState != oc.AdminState {
			_ = s.SetAdminState(cs.AdminState) // validated (inPlace)
			toMaint = toMaint || cs.AdminState == config.AdminMaint
		}
	}
	return toMaint
}

// restoreBackends undoes the in-place server updates of a failed Apply by
// rebuilding the running configuration's backends over the ones built.
func (e *Engine) restoreBackends(built map[string]*beRT) {
	if e.cur == nil {
		return
	}
	for i := range e.cur.Backends {
		cb := &e.cur.Backends[i]
		if nb := built[cb.Name]; nb != nil {
			if _, err := balance.Build(cb, nb.bb, e.resolveFn()); err != nil {
				e.log.Error("could not restore backend after a failed apply", "backend", cb.Name, "err", err)
			}
		}
	}
}

// onEveryLoop runs fn on every loop thread and waits for all of them.
func (e *Engine) onEveryLoop(ctx context.Context, fn func(l *loop.Loop, w *proxy.Worker)) error {
	var wg sync.WaitGroup
	for i, l := range e.loops {
		w := e.workers[i]
		wg.Add(1)
		if !l.Exec(func(l *loop.Loop) { fn(l, w); wg.Done() }) {
			wg.Done()
		}
	}
	return waitGroup(ctx, &wg)
}

// onLiveLoops runs fn on the thread of every live loop, active and
// draining (e.mu held), and waits for all of them, bounded by ctx and
// liveLoopsWait so that a wedged loop cannot hold Apply.
func (e *Engine) onLiveLoops(ctx context.Context, fn func(w *proxy.Worker)) {
	var wg sync.WaitGroup
	for _, rt := range e.th.all {
		if rt.state == loopStopped {
			continue
		}
		w := rt.w
		wg.Add(1)
		if !rt.l.Exec(func(*loop.Loop) { fn(w); wg.Done() }) {
			wg.Done()
		}
	}
	wctx, cancel := context.WithTimeout(ctx, liveLoopsWait)
	defer cancel()
	if err := waitGroup(wctx, &wg); err != nil {
		e.log.Warn("apply: not every loop confirmed", "err", err)
	}
}

// liveLoopsWait bounds onLiveLoops: a loop answers within one round.
const liveLoopsWait = time.Second

// accept runs on the loop thread that owns the new connection.
func (e *Engine) accept(l *loop.Loop, fd int, peer netip.AddrPort, ln *listen.Listener) {
	b := ln.Owner.(*bindRT)
	fe := b.front.Load()
	f := b.f
	if fe == nil || f == nil || fe == proxy.Removed { // queued in a ring when its bind went away
		proxy.Refuse(fd)
		ln.Release()
		ln.Conns().Done(l.ID())
		return
	}
	// The connection holds the slots its acceptor reserved (f.lim and
	// e.conns); the frontend's OnClose gives them back (release), whatever
	// the outcome (a failed TLS handshake included). http requests
	// resolve against b.front.
	e.workerOf(l).AcceptFrom(fd, peer, fe, &b.front)
}

// tlsFronts builds, for each bind of snap with tls, a copy of its
// frontend (fronts, this Apply's) that terminates TLS with the bind's
// *tls.Config. An error (a certificate that cannot be read or parsed, no
// TLS support configured) is the Apply's: nothing has changed yet.
func (e *Engine) tlsFronts(snap *config.Config, fronts map[string]*proxy.Frontend) (map[bindID]*proxy.Frontend, error) {
	var out map[bindID]*proxy.Frontend
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		for j := range cf.Binds {
			cb := &cf.Binds[j]
			if cb.TLS == nil {
				continue
			}
			fail := func(err error) error {
				return &config.ApplyError{
					Field:  "/frontends/" + strconv.Itoa(i) + "/binds/" + strconv.Itoa(j) + "/tls",
					Object: "frontend " + cf.Name + " bind " + cb.Name,
					Err:    err,
				}
			}
			if e.certs == nil || e.keys == nil {
				return nil, fail(errors.New("this data plane was started without TLS support"))
			}
			tc, err := e.certs.Server(snap, cb.TLS, e.keys)
			if err != nil {
				return nil, fail(err)
			}
			// An http bind without alpn offers what http.versions says.
			tc.NextProtos = config.OfferedALPN(cf, cb.TLS, e.h2)
			f := *fronts[cf.Name]
			f.TLS = tc
			f.ACME = nil // http-01 is answered on clear binds only
			f.HandshakeTimeout = time.Duration(cf.Timeouts.HandshakeMs) * time.Millisecond
			if cf.Mode == config.ModeHTTP && cb.TLS.ClientCA != "" {
				f.CertHeader = cb.TLS.ClientCertHeaderPrefix
			}
			if out == nil {
				out = map[bindID]*proxy.Frontend{}
			}
			out[bindID{cf.Name, cb.Name}] = &f
		}
	}
	return out, nil
}

// proxyFronts gives each bind of snap with accept_proxy its own copy of
// its frontend (the one tlsFronts made for it, else the frontend's) that
// reads the PROXY header first, and returns bindFronts with them.
// Validation parsed every trusted entry already.
func proxyFronts(snap *config.Config, fronts map[string]*proxy.Frontend, bindFronts map[bindID]*proxy.Frontend) map[bindID]*proxy.Frontend {
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		for j := range cf.Binds {
			cb := &cf.Binds[j]
			if cb.AcceptProxy == nil {
				continue
			}
			id := bindID{cf.Name, cb.Name}
			base := bindFronts[id]
			if base == nil {
				base = fronts[cf.Name]
			}
			f := *base
			ap := &proxy.AcceptProxy{Timeout: time.Duration(cf.Timeouts.HandshakeMs) * time.Millisecond}
			for _, t := range cb.AcceptProxy.Trusted {
				if p, err := config.ParseTrusted(t); err == nil {
					ap.Trusted = append(ap.Trusted, p)
				}
			}
			f.AcceptProxy = ap
			if bindFronts == nil {
				bindFronts = map[bindID]*proxy.Frontend{}
			}
			bindFronts[id] = &f
		}
	}
	return bindFronts
}

// certStrip is the client-certificate field prefix that every bind of an
// http frontend drops from its requests: the first one its binds with
// client_ca add (nil when none verifies client certificates).
func certStrip(cf *config.Frontend) []byte {
	for i := range cf.Binds {
		if t := cf.Binds[i].TLS; t != nil && t.ClientCA != "" && t.ClientCertHeaderPrefix != "" {
			return []byte(t.ClientCertHeaderPrefix)
		}
	}
	return nil
}

// httpFront builds the http-mode part of a frontend: routes resolved to
// the new generation's backends (a route to a missing backend answers 503).
func httpFront(cf *config.Frontend, def *proxy.Backend, bes map[string]*beRT) *proxy.HTTPFront {
	ms := func(v int) time.Duration { return time.Duration(v) * time.Millisecond }
	h := &proxy.HTTPFront{
		Default:          def,
		RequestTimeout:   ms(cf.Timeouts.HTTPRequestMs),
		KeepAliveTimeout: ms(cf.Timeouts.HTTPKeepAliveMs),
		ClientTimeout:    ms(cf.Timeouts.ClientMs),
	}
	if o := cf.HTTP; o != nil {
		h.XForwardedFor, h.XForwardedProto, h.Via, h.MaxBody = o.ForwardFor(), o.XForwardedProto, o.Via, o.MaxBodySize
		h.H2 = proxy.H2Settings{
			MaxConcurrentStreams: uint32(o.H2.MaxConcurrentStreams),
			InitialWindowSize:    uint32(o.H2.InitialWindowSize),
			MaxFrameSize:         uint32(o.H2.MaxFrameSize),
			MaxHeaderListSize:    uint32(o.H2.MaxHeaderListSize),
		}
	}
	h.Versions = httpVersions(cf.HTTP)
	for _, r := range cf.Routes {
		var be *proxy.Backend
		if b := bes[r.Backend]; b != nil {
			be = b.pb
		}
		h.Routes = append(h.Routes, proxy.NewRoute(r.Host, r.PathPrefix, r.Method, be))
	}
	return h
}

// httpVersions is the bit set of the versions o lists (the defaults
// when o is nil, as Normalize fills them).
func httpVersions(o *config.FrontendHTTPOpts) uint8 {
	var v uint8
	if o.SpeaksHTTP(config.HTTPVersion11) {
		v |= proxy.HTTPVersion1
	}
	if o.SpeaksHTTP(config.HTTPVersion2) {
		v |= proxy.HTTPVersion2
	}
	return v
}

// release is a frontend's OnClose: the connection gives back the slots its
// acceptor reserved; a listener waiting for one resumes (listen.Limit).
func (e *Engine) release(f *feRT) {
	f.lim.Release()
	e.conns.Release()
}

// Close stops the data plane as HAProxy's soft stop: it stops accepting,
// closes idle keep-alive connections and pooled server connections at
// once, lets requests in flight finish (their responses carry Connection:
// close) and tcp tunnels run, until none is left or tuning.grace_ms (or
// ctx) ends; then it closes what is left and stops the loops.
func (e *Engine) Close(ctx context.Context) error {
	e.stopping.Store(true)
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.closed {
		return nil
	}
	e.closed = true
	if e.loops == nil {
		return nil
	}
	for _, b := range e.binds {
		b.ln.Close()
	}
	e.group.Close() // closes what the accept rings still held
	grace := graceOf(e.cur)
	gctx, cancel := context.WithTimeout(ctx, grace)
	defer cancel()
	// Every live loop, draining ones too (they may be soft-stopped already).
	e.softStopAll(gctx)
	if live := e.conns.Cur(); live > 0 {
		e.log.Info("waiting for connections to finish", "connections", live, "grace", grace.String())
	}
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
wait:
	for e.conns.Cur() > 0 {
		select {
		case <-gctx.Done():
			e.log.Warn("grace period over, closing connections", "connections", e.conns.Cur())
			break wait
		case <-tick.C:
		}
	}
	// Close what is left; bounded so a wedged loop cannot hang shutdown.
	cctx, ccancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer ccancel()
	e.stopCheckers()
	e.stopAllLoops(cctx) // active and draining loops (threads.go)
	if e.stopAccess != nil {
		e.stopAccess()
	}
	e.log.Info("data plane stopped")
	return nil
}

// Stopping reports whether Close was called.
func (e *Engine) Stopping() bool { return e.stopping.Load() }

// graceOf is tuning.grace_ms of c (normalized), or the default when no
// config was applied yet (a first Apply that failed after the loops
// started).
func graceOf(c *config.Config) time.Duration {
	if c == nil {
		return config.DefaultGraceMs * time.Millisecond
	}
	return time.Duration(c.Tuning.GraceMs) * time.Millisecond
}
