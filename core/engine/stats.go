package engine

import (
	"context"
	"math"
	"sync/atomic"
	"time"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/listen"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/stats"
)

// statsView is what Stats reads: the objects of the running generation and
// their counters, published by Apply as one immutable value so a reader
// never waits for an Apply in progress (nor for e.mu).
type statsView struct {
	gen      int64
	loops    []*loop.Loop
	workers  []*proxy.Worker
	fronts   []feView
	backends []beView
}

type feView struct {
	name, mode string
	maxconn    int
	tls        bool // a bind with tls
	proxy      bool // a bind with accept_proxy
	h2         bool // an http frontend that speaks HTTP/2
	rules      *ruleRT
	c          *stats.Counters
	lim        *listen.Limit // the frontend's connections: conn_max
	limits     *limitsView   // its limits per client (limits.go), nil: none
}

type beView struct {
	name, mode, algo string
	bb               *balance.Backend
	chk              *proxy.Checker // nil without health check
	c                *stats.Counters
}

// accessLogRing is the size of each loop's access-log ring: at 100k
// requests per second per loop the drain goroutine, every
// accessLogEvery, sees at most 5k entries. An entry is ~440 bytes (its
// request line is copied in): 3.6 MB per loop, touched only by logging.
const (
	accessLogRing  = 8192
	accessLogEvery = 50 * time.Millisecond
	// accessLogWarnEvery spaces the warnings of a failing sink (a full
	// disk fails every line): the first at once, then at most one per
	// 10 s, each with the lines lost since the previous one.
	accessLogWarnEvery = 10 * time.Second
)

// newCounters is the counters of a new object: one slot per loop.
func (e *Engine) newCounters() *stats.Counters { return stats.New(len(e.loops)) }

// serverCounters gives the servers (of a backend, or the part of its list
// that may hold new ones) that have none (new in this generation) their
// counters, before the backend is published; carried-over servers keep
// theirs.
func (e *Engine) serverCounters(servers []*balance.Server) {
	for _, s := range servers {
		if s.Counters == nil {
			s.Counters = e.newCounters()
		}
	}
}

// publishStats records the objects of snap for Stats (end of Apply, e.mu held).
func (e *Engine) publishStats(snap *config.Config) {
	v := &statsView{gen: snap.Generation, loops: e.loops, workers: e.workers}
	for i := range snap.Frontends {
		cf := &snap.Frontends[i]
		if f := e.fronts[cf.Name]; f != nil {
			v.fronts = append(v.fronts, feView{name: cf.Name, mode: cf.Mode, maxconn: cf.Maxconn, tls: hasTLSBind(cf), proxy: hasProxyBind(cf),
				h2: cf.Mode == config.ModeHTTP && cf.HTTP.SpeaksHTTP(config.HTTPVersion2), c: f.stats, lim: &f.lim,
				limits: newLimitsView(f, cf), rules: f.rules})
		}
	}
	for i := range snap.Backends {
		cb := &snap.Backends[i]
		if b := e.backends[cb.Name]; b != nil {
			v.backends = append(v.backends, beView{name: cb.Name, mode: cb.Mode, algo: b.bb.Algo, bb: b.bb, chk: b.chk, c: b.stats})
		}
	}
	e.view.Store(v)
}

// Stats returns every frontend's, backend's and server's counters of the
// running generation (any goroutine; never blocks on the loops or Apply).
func (e *Engine) Stats() stats.Snapshot {
	snap := stats.Snapshot{Time: time.Now(), Frontends: []stats.Frontend{}, Backends: []stats.Backend{}}
	v := e.view.Load()
	if v == nil {
		return snap
	}
	now := loop.Mono()
	snap.Generation = v.gen
	for _, f := range v.fronts {
		t := f.c.Total(now)
		sf := stats.Frontend{Name: f.name, Mode: f.mode, Maxconn: f.maxconn, Counts: t.Counts()}
		sf.ConnMax = max(f.lim.Peak(), sf.ConnCur)
		if tc := t.TLS(); f.tls || tc != (stats.TLSCounts{}) {
			sf.TLS = &tc
		}
		if pc := t.Proxy(); f.proxy || pc != (stats.ProxyCounts{}) {
			sf.Proxy = &pc
		}
		if hc := t.H2(); f.h2 || hc != (stats.H2Counts{}) {
			sf.H2 = &hc
		}
		sf.Rules = ruleStats(f.rules, t)
		sf.Limits = f.limits.counts() // limits.go
		snap.Frontends = append(snap.Frontends, sf)
	}
	for _, b := range v.backends {
		sb := stats.Backend{Name: b.name, Mode: b.mode, Algo: b.algo, Counts: b.c.Total(now).Counts(),
			Servers: make([]stats.Server, 0, len(b.bb.Servers)), Timings: b.c.TimingTotal()}
		if q := b.bb.Queue(); q != nil {
			sb.ConnMax = max(q.Peak(), sb.ConnCur)
		}
		for i, s := range b.bb.Servers {
			ss := serverStats(s, now)
			if st, ok := b.chk.State(i, s); ok {
				ss.Check = checkStats(&st)
			}
			if s.Usable() {
				sb.ServersUp++
			}
			sb.Servers = append(sb.Servers, ss)
		}
		sb.State = "down"
		if sb.ServersUp > 0 {
			sb.State = "up"
		}
		snap.Backends = append(snap.Backends, sb)
	}
	return snap
}

func serverStats(s *balance.Server, now int64) stats.Server {
	st := s.Stats()
	var c stats.Counts
	var tc stats.TLSCounts
	if s.Counters != nil {
		t := s.Counters.Total(now)
		c, tc = t.Counts(), t.TLS()
	}
	// Slots taken, live connections and failed connects are kept by
	// balance (Acquire/Release/ConnectFailed) for the pickers already.
	c.ConnTotal, c.ConnCur, c.ConnectErrors = int64(st.Total), st.Cur, int64(st.ConnFails)
	c.ConnMax = max(s.Peak(), st.Cur)
	ss := stats.Server{
		Name: s.Name, Address: s.Addr.String(), State: stats.ServerState(st.Up, st.AdminState), Up: st.Up,
		AdminState: st.AdminState, Weight: st.Weight, Maxconn: st.Maxconn,
		LastChange: st.LastChange, Counts: c,
	}
	if s.TLSSpec != nil || tc != (stats.TLSCounts{}) {
		ss.TLS = &tc
	}
	return ss
}

// checkStats is the API view of a server's check state.
func checkStats(st *proxy.CheckState) *stats.Check {
	c := &stats.Check{Status: st.Status, Code: st.Code, Reason: st.Last, Since: st.Since,
		DurationMs: float64(st.Duration.Microseconds()) / 1e3, Type: st.Type,
		Health: st.Health, Rise: st.Rise, Fall: st.Fall, Runs: st.Runs, Fails: st.Fails}
	if !st.CheckedAt.IsZero() {
		at := st.CheckedAt
		c.CheckedAt = &at
	}
	if st.Status == stats.CheckINI {
		c.Reason = "not checked yet"
	}
	return c
}

// LoopActivity returns each loop's activity (any goroutine).
func (e *Engine) LoopActivity() []stats.LoopActivity {
	v := e.view.Load()
	if v == nil {
		return []stats.LoopActivity{}
	}
	out := make([]stats.LoopActivity, len(v.loops))
	for i, l := range v.loops {
		a := l.Activity().Snapshot()
		out[i] = stats.LoopActivity{
			Loop: l.ID(), Loops: a.Loops, PollIO: a.PollIO, WakeTasks: a.WakeTasks,
			TaskletsUrg: a.Tasklets[loop.Urgent], TaskletsNrm: a.Tasklets[loop.Normal], TaskletsBlk: a.Tasklets[loop.Bulk],
			Timers: a.Timers, AvgLoopUs: a.AvgLoopUs, Accepted: a.Accepted, AccqPushed: a.AccqPushed,
			AccqFull: a.AccqFull, AcceptPause: a.AcceptPauses, SpliceBytes: a.SpliceBytes,
			PipesUsed: a.PipesUsed, BuffersUsed: a.BufsUsed, Conns: a.Conns,
			CPUUrgentNs: a.CPUNs[loop.Urgent], CPUNormalNs: a.CPUNs[loop.Normal], CPUBulkNs: a.CPUNs[loop.Bulk],
			CPUHandshakeNs:      a.HandshakeNs,
			HandshakeSlotWaitNs: a.HandshakeSlotWaitNs, HandshakeCPUWaitNs: a.HandshakeCPUWaitNs,
			HandshakeHandoffNs: a.HandshakeHandoffNs, HandshakeParks: a.HandshakeParks,
			Sleeps: a.Sleeps, SleepNs: a.SleepNs, Notified: a.Notified,
			BusyPolls: a.BusyPolls, BusyPollNs: a.BusyPollNs,
			Naps: a.Naps, NapNs: a.NapNs,
		}
		if sum := a.CPUNs[0] + a.CPUNs[1] + a.CPUNs[2]; sum > 0 {
			pct := func(v uint64) float64 { return math.Round(1000*float64(v)/float64(sum)) / 10 }
			out[i].ShareUrg, out[i].ShareNrm, out[i].ShareBlk = pct(a.CPUNs[0]), pct(a.CPUNs[1]), pct(a.CPUNs[2])
		}
	}
	return out
}

// startAccessLog gives every worker an access-log ring and starts the
// goroutine that drains them into the log (first Apply, before the loops
// run). It returns the function that stops it after a last drain.
func (e *Engine) startAccessLog() func() {
	if e.alog == nil {
		e.alog = accesslog.New(e.log, 0, 0, loop.Mono)
	}
	rings := make([]*stats.LogRing, len(e.workers))
	for i, w := range e.workers {
		rings[i] = stats.NewLogRing(accessLogRing)
		w.AccessLog = rings[i]
	}
	e.th.logRings.Store(&rings) // loops added by nbthread get theirs (threads.go)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	var dropped atomic.Uint64
	var unwritten uint64 // lines a sink failed to take, as last warned of
	var warnedAt time.Time
	var tails []uint64
	drain := func(last bool) {
		var lost uint64
		tails, lost = drainLogRings(*e.th.logRings.Load(), tails, e.alog.Add)
		if last {
			e.alog.Flush()
		} else { // what ended within the last period may still have a predecessor to come (FlushBefore)
			e.alog.FlushBefore(loop.Mono() - int64(accessLogEvery))
		}
		if d := lost - dropped.Load(); d > 0 {
			dropped.Store(lost)
			e.log.Warn("access log lines dropped: the log writer is slower than the traffic", "dropped", d, "dropped_total", lost)
		}
		// A failing sink fails every line: one warning per
		// accessLogWarnEvery, not one per batch; the last drain tells
		// what is left.
		if n, err := e.alog.Unwritten(); n > unwritten && (last || time.Since(warnedAt) >= accessLogWarnEvery) {
			e.log.Warn("access log lines not written: a sink fails", "lost", n-unwritten, "lost_total", n, "error", err)
			unwritten, warnedAt = n, time.Now()
		}
	}
	go func() {
		defer close(done)
		t := time.NewTicker(accessLogEvery)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				drain(true)
				return
			case <-t.C:
				drain(false)
			}
		}
	}()
	return func() { cancel(); <-done }
}

// drainLogRings hands add the entries of every ring pushed up to one
// instant — the tails are all read first (into tails, reused), then each
// ring is drained up to its own — and returns the entries dropped so far.
// Draining each ring up to where it stands when its turn comes would let
// a loop whose ring is drained late give an entry that ended after one of
// an earlier ring's that missed this batch: the two would be written out
// of order (Flush orders a batch, not two), as TestUILogsPage's burst saw
// (… 355, 353, 354 …).
func drainLogRings(rings []*stats.LogRing, tails []uint64, add func(*stats.LogEntry)) ([]uint64, uint64) {
	tails = tails[:0]
	for _, r := range rings {
		tails = append(tails, r.Tail())
	}
	var lost uint64
	for i, r := range rings {
		r.DrainTo(tails[i], add)
		lost += r.Dropped()
	}
	return tails, lost
}

// hasProxyBind: a bind of cf reads a PROXY protocol header.
func hasProxyBind(cf *config.Frontend) bool {
	for i := range cf.Binds {
		if cf.Binds[i].AcceptProxy != nil {
			return true
		}
	}
	return false
}

// hasTLSBind: a bind of cf terminates TLS.
func hasTLSBind(cf *config.Frontend) bool {
	for i := range cf.Binds {
		if cf.Binds[i].TLS != nil {
			return true
		}
	}
	return false
}
