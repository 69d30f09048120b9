package proxy

import (
	"context"
	"errors"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Health checks (check.go)
//
// A Checker runs one backend generation's health_check on the loops:
// server i is probed by loop i % nbthread, each loop's share through its
// own balance.Prober, which spreads that share's first checks evenly over
// one interval (1 000 servers on 4 loops: 250 per loop, 8 ms apart at a
// 2 s interval) and applies rise/fall (balance.Health, HAProxy's counter);
// the next check of a server is due one interval after its last one
// finished. Each server has one loop.Timer (next check, or the running
// probe's timeout_ms), one Side and its prebuilt request, so a probe
// cycle allocates nothing (TestCheckProbeCycleDoesNotAllocate).
//
//   - tcp: a non-blocking connect; success when connected (EPOLLOUT with
//     SO_ERROR 0) within timeout_ms.
//   - http: connect, send "METHOD PATH HTTP/1.1" with Host (health_check
//     host when set, else the server's configured address and port),
//     Connection: close and User-Agent: spliced-check, then read 13
//     bytes: a strict "HTTP/1.x DDD" status line start, followed by SP or CR. Success when status_min <= status
//     <= status_max, all within timeout_ms. Anything else (refused, reset,
//     closed early, not a status line, timeout) is a failure. The rest of
//     the response is not read.
//   - http, to a server with proto h2: the same request as HTTP/2 (h2c
//     with prior knowledge, or h2 by ALPN over TLS), and the response's
//     :status decides the same way (check_h2.go).
//
// A server with tls (balance.Server.TLS) is checked over TLS, as HAProxy
// checks an "ssl" server with check-ssl by default: once the TCP connect
// completes, the probe's fd leaves the loop and the client handshake runs
// on the worker's pool of outgoing handshakes (Worker.tlsOut, xprt_tls.go,
// tuning.tls.max_handshakes, shared with the connections to servers: a
// check never takes more helper threads than the bound) within what is left of timeout_ms, with the server's own
// *tls.Config (its verification, its SNI, its session cache, so checks
// resume like connections do). Established, the fd comes back to the loop
// with the tlsSock as the Side's transport: an http check sends its
// request and reads the status line through it; a tcp check succeeds
// once the handshake completes ("tls handshake completed"), so that a
// certificate the proxy would refuse (expired, unknown CA, wrong name)
// takes the server down instead of every request failing behind an up
// server. A failed handshake is a failed check whose reason is the
// handshake's error ("tls handshake: tls: failed to verify certificate:
// x509: ..."); a handshake past timeout_ms is "timeout (handshake)". The
// Host of an https check is the server's TLS name (sni, else its address),
// with the port unless it is 443. A handshake given up (timeout, Stop)
// keeps its fd until it ends, at the latest at its deadline (timeout_ms
// from the probe's start): the pool closes it then, never under the helper
// goroutine. TLS probes allocate (crypto/tls); plain ones do not.
//
// Each probe's result is kept for the stats (Checker.State, States) as
// HAProxy names it (checkStatus: L4OK, L4TOUT, L4CON, L6OK, L6TOUT, L6RSP,
// L7OK, L7TOUT, L7RSP, L7STS with the status code, SOCKERR; INI before
// the first), with its reason, when that status began, when the probe
// ended, how long it took and the rise/fall counter after it. A checker
// that replaces another starts from the last results of the servers both
// check, so the status and its "since" survive a configuration change. The loop
// writes them as atomics under a sequence count, so a reader gets one
// probe's fields without a lock and a probe cycle still allocates nothing.
//
// Probe sockets are closed with SO_LINGER 0 (an RST): a check has nothing
// left to say, and one connection per server per interval must not leave
// TIME_WAIT sockets behind. A socket(2) failure (EMFILE) counts as a
// failed check, as HAProxy's socket errors do.
//
// A state change sets balance.Server's observed state (pickers skip a
// down server at once) and is logged on the loop thread (rare: allocation
// allowed there) as "server health changed" with backend, server, from,
// to, reason ("connection refused", "timeout (connect)", "timeout
// (response)", "status 503", ...), check type and thread.
//
// Across generations (core/engine/check.go): identical check settings
// over the same Server objects keep the running Checker; otherwise the old
// one is stopped (Stop waits until every loop closed its probes) and the
// new one takes over the rise/fall counters of carried-over servers when
// rise and fall did not change, so an unrelated configuration change does
// not make an up server fall at its first failure. Removing the check sets
// every server up.

// statusLineLen is what a probe reads of an http check's answer:
// "HTTP/1.1 200" and the byte after the status code (SP, or CR when the
// reason phrase is omitted). The rest of the response is never read.
const statusLineLen = 13

// stopWait bounds how long Stop waits for the loops to confirm.
const stopWait = 5 * time.Second

// Probe states.
const (
	prIdle uint8 = iota
	prConnecting
	prSending
	prReading
	prHandshake // TLS: the handshake pool owns the fd
)

// Outcome kinds of a probe, for the reason logged with a state change.
const (
	resNone      uint8 = iota
	resOK              // tcp: connected
	resStatus          // http: a status line was read (val = status)
	resSocket          // socket(2) failed (val = errno)
	resConnect         // connect failed (val = errno)
	resTimeout         // no answer within timeout_ms (val = state it was in)
	resIO              // send/recv error (val = errno)
	resClosed          // end of stream before a whole status line
	resBadStatus       // bytes that are not an HTTP/1.x status line
	resTLS             // the TLS handshake failed (probe.tlsMsg says why)
	resTLSOK           // tcp check of a TLS server: handshake completed
	resH2              // h2: not an HTTP/2 answer (val = h2Chk* kind)
	resH2Reset         // h2: RST_STREAM on the check's stream (val = code)
	resH2GoAway        // h2: GOAWAY leaving the stream unprocessed (val = code)
)

// Checker runs the health checks of one backend generation on the loops:
// server i of the backend is probed by loop i % len(loops), each loop's
// share through its own balance.Prober (which spreads that share's first
// checks over one interval and applies rise/fall). Probes are non-blocking
// sockets registered with the loop, with one loop.Timer per server for
// both the next check and the probe's timeout.
//
// NewChecker, Start, Stop, Matches and States may be called from any
// goroutine but not concurrently with each other (the engine calls them
// under its Apply lock); the probes run on the loop threads only.
type Checker struct {
	backend string
	cfg     config.HealthCheck
	servers []*balance.Server
	nloops  int
	log     *slog.Logger
	parts   []*checkPart
	started bool
	stopped bool
}

// checkPart is the share of a Checker that one loop runs.
type checkPart struct {
	w      *Worker
	l      *loop.Loop
	p      *balance.Prober
	probes []*probe
}

// probe is the state of one server's check: everything a probe cycle
// touches is here, prebuilt, so a cycle allocates nothing.
type probe struct {
	ck    *Checker
	l     *loop.Loop
	hs    *tlsHandshakes // the loop's handshake pool (TLS servers)
	c     *balance.Check
	side  Side
	timer loop.Timer
	sa    balance.SockaddrBuf
	req   []byte // the http request, prebuilt; nil for tcp checks
	// h2 reads the answer of an http check of a server with proto h2
	// (req is then the HTTP/2 preface, SETTINGS and HEADERS); nil
	// otherwise.
	h2    *h2CheckReader
	sent  int
	buf   [statusLineLen]byte
	got   int
	state uint8
	// deadline of the running probe (loop.Now units); attempt numbers the
	// probes, so that a handshake that ends after its probe was given up
	// is told apart from the current one.
	deadline int64
	attempt  uint32
	// Outcome of the last finished probe.
	res    uint8
	resVal int
	// startedAt: when the running probe started (loop.Now units).
	startedAt int64
	// Counters for States (any goroutine).
	runs, fails atomic.Uint64
	// The last result for States, written by the loop under a sequence
	// count (odd while it writes) so a reader sees one probe's fields
	// together without a lock or an allocation per probe.
	seq       atomic.Uint64
	last      atomic.Uint64 // ok<<40 | res<<32 | resVal of the last probe
	checkedAt atomic.Int64  // wall clock (Unix ns) at its end
	durNs     atomic.Int64
	health    atomic.Int64 // the rise/fall counter after it
	since     atomic.Int64 // Unix ns: when the status (and code) became what it is
	// tlsMsg is the error of the last failed handshake (res resTLS).
	tlsMsg atomic.Pointer[string]
}

// CheckState is what States reports of one server's check.
type CheckState struct {
	Server string `json:"server"`
	// Runs and Fails count finished probes and the failed ones.
	Runs  uint64 `json:"runs"`
	Fails uint64 `json:"fails"`
	// Last is the outcome of the last probe ("" before the first one),
	// e.g. "connected", "status 200", "timeout", "connection refused".
	Last string `json:"last"`
	Up   bool   `json:"up"`
	// Status is the last result as HAProxy names it (checkStatus,
	// stats.CheckL4OK...), INI before the first probe; Code the HTTP status of L7OK and L7STS.
	Status string `json:"status"`
	Code   int    `json:"code,omitempty"`
	// Since: when Status (with Code) became what it is (the checker's
	// start for INI); CheckedAt: when the last probe ended (zero before).
	Since     time.Time     `json:"since"`
	CheckedAt time.Time     `json:"checked_at"`
	Duration  time.Duration `json:"duration"`
	// Health is the rise/fall counter: up while Health >= Rise, a
	// success fills it to Rise+Fall-1, a failure below Rise drops it to 0.
	Health, Rise, Fall int
	Type               string `json:"type"` // tcp or http
}

// checkStatus names a probe outcome as HAProxy does; code is the HTTP
// status for L7OK and L7STS, 0 otherwise.
func checkStatus(ok bool, res uint8, val int) (status string, code int) {
	switch res {
	case resNone:
		return stats.CheckINI, 0
	case resOK:
		return stats.CheckL4OK, 0
	case resTLSOK:
		return stats.CheckL6OK, 0
	case resTLS:
		return stats.CheckL6RSP, 0
	case resStatus:
		if ok {
			return stats.CheckL7OK, val
		}
		return stats.CheckL7STS, val
	case resSocket:
		return stats.CheckSOCKERR, 0
	case resConnect:
		return stats.CheckL4CON, 0
	case resTimeout:
		switch uint8(val) {
		case prConnecting:
			return stats.CheckL4TOUT, 0
		case prHandshake:
			return stats.CheckL6TOUT, 0
		}
		return stats.CheckL7TOUT, 0
	case resClosed:
		if uint8(val) == prConnecting {
			return stats.CheckL4CON, 0
		}
		return stats.CheckL7RSP, 0
	}
	return stats.CheckL7RSP, 0 // resIO (send/recv error), resBadStatus
}

func runProbeTask(t *loop.Tasklet) { t.Owner.(*probe).process() }
func runProbeTimer(t *loop.Timer)  { t.Owner.(*probe).onTimer() }

// NewChecker prepares the checks of b on the workers' loops (server i on
// loop i % len(workers)); TLS servers' handshakes run on the workers'
// handshake pools. It returns nil when b has no health check or there
// are no workers. Nothing runs until Start. b's check is used as
// balance.Build accepted it (normalized: interval, timeout, rise and fall
// set, and for http the method, path and status range); no default is
// filled here.
func NewChecker(b *balance.Backend, workers []*Worker, log *slog.Logger) *Checker {
	if b == nil || b.Check == nil || len(workers) == 0 {
		return nil
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	ck := &Checker{
		backend: b.Name,
		cfg:     *b.Check,
		servers: slices.Clone(b.Servers),
		nloops:  len(workers),
		log:     log,
	}
	for k, w := range workers {
		var share []*balance.Server
		for i := k; i < len(b.Servers); i += len(workers) {
			share = append(share, b.Servers[i])
		}
		if len(share) == 0 {
			continue
		}
		// NewProber reads only Check and Servers: a Backend value holding
		// this loop's share is all it needs.
		pr := balance.NewProber(&balance.Backend{Name: b.Name, Check: b.Check, Servers: share})
		part := &checkPart{w: w, l: w.L, p: pr}
		pr.Schedule = scheduleProbe
		pr.Probe = startProbe
		pr.OnChange = ck.changed
		for _, c := range pr.Checks() {
			p := &probe{ck: ck, l: w.L, hs: w.tlsOut, c: c}
			p.side.FD = loop.FD{Fd: -1, T: &p.side.Task}
			p.side.Task.Run, p.side.Task.Owner = runProbeTask, p
			p.timer.Run, p.timer.Owner = runProbeTimer, p
			if ck.cfg.Type == config.CheckHTTP {
				if c.Server.H2 {
					p.req, p.h2 = checkRequestH2(&ck.cfg, c.Server), &h2CheckReader{}
				} else {
					p.req = checkRequest(&ck.cfg, c.Server)
				}
			}
			c.Owner = p
			part.probes = append(part.probes, p)
		}
		ck.parts = append(ck.parts, part)
	}
	return ck
}

// checkRequest is the http check request of hc for s, built once. The
// Host is hc.Host when set (validated as host[:port], sent as it is);
// else the server's configured address, or for a TLS server the name its
// handshake verifies (sni, else the address), as a browser would send,
// the port left out when it is the scheme's default (80, 443 for TLS).
func checkRequest(hc *config.HealthCheck, s *balance.Server) []byte {
	return checkRequestTo(hc, checkHost(hc, s))
}

// checkHost is the Host (HTTP/2: :authority) of the http check hc of s:
// see checkRequest.
func checkHost(hc *config.HealthCheck, s *balance.Server) string {
	if hc.Host != "" {
		return hc.Host
	}
	host, defPort := s.Host, uint16(80)
	if s.TLS != nil {
		defPort = 443
		if s.TLS.ServerName != "" {
			host = s.TLS.ServerName
		}
	}
	if host == "" {
		host = s.Addr.Addr().String()
	}
	if a, err := netip.ParseAddr(host); err == nil && a.Is6() {
		host = "[" + host + "]"
	}
	if p := s.Addr.Port(); p != defPort {
		host += ":" + strconv.Itoa(int(p))
	}
	return host
}

func checkRequestTo(hc *config.HealthCheck, host string) []byte {
	return []byte(hc.Method + " " + hc.Path + " HTTP/1.1\r\nHost: " + host +
		"\r\nConnection: close\r\nUser-Agent: spliced-check\r\n\r\n")
}

// Matches reports whether c already runs exactly the checks b asks for
// (same settings, same Server objects in the same order, same loops), so
// the engine can keep it across a generation instead of restarting it.
func (c *Checker) Matches(b *balance.Backend, nloops int) bool {
	if c == nil || b == nil || b.Check == nil || c.stopped || nloops != c.nloops || b.Name != c.backend {
		return false
	}
	return *b.Check == c.cfg && slices.Equal(b.Servers, c.servers)
}

// Start stops prev (when not nil) and starts c's checks on the loops. A
// server that prev checked keeps its rise/fall counter when rise and fall
// did not change, so a configuration change elsewhere does not turn an up
// server into one that a single failure takes down. Returns at once; the
// loops start the checks at their next round.
func (c *Checker) Start(prev *Checker) {
	if c == nil || c.started {
		return
	}
	c.started = true
	var inherit map[*balance.Server]*balance.Health
	var results map[*balance.Server]*probe
	if prev != nil {
		// Once Stop confirmed, no loop touches prev's Health objects and
		// probes any more: reading them here is ordered after their last use.
		if prev.Stop() && prev.started {
			results = make(map[*balance.Server]*probe)
			for _, part := range prev.parts {
				for _, p := range part.probes {
					results[p.c.Server] = p
				}
			}
			if prev.cfg.Rise == c.cfg.Rise && prev.cfg.Fall == c.cfg.Fall {
				inherit = make(map[*balance.Server]*balance.Health)
				for _, part := range prev.parts {
					for _, ch := range part.p.Checks() {
						if ch.Health != nil {
							inherit[ch.Server] = ch.Health
						}
					}
				}
			}
		}
	}
	now := time.Now().UnixNano()
	for _, part := range c.parts {
		for _, p := range part.probes {
			if old := results[p.c.Server]; old != nil && old.last.Load() != 0 {
				// A carried-over server keeps its last result (and since
				// when) until its first probe here: a change elsewhere in
				// the backend does not turn its L4CON into INI.
				p.res, p.resVal = old.res, old.resVal
				p.last.Store(old.last.Load())
				p.since.Store(old.since.Load())
				p.checkedAt.Store(old.checkedAt.Load())
				p.durNs.Store(old.durNs.Load())
				p.tlsMsg.Store(old.tlsMsg.Load())
				continue
			}
			p.since.Store(now) // INI since the start
		}
		part.l.Exec(func(*loop.Loop) {
			part.p.Start()
			for _, ch := range part.p.Checks() {
				if h := inherit[ch.Server]; h != nil && h.Up() == ch.Server.Up() {
					ch.Health = h
				}
				ch.Owner.(*probe).health.Store(int64(ch.Health.Count()))
			}
		})
	}
}

// Stop stops every check and closes the probes in flight, and waits for
// the loops to have done it (bounded by stopWait). It reports whether all
// loops confirmed. Stopping twice is a no-op.
func (c *Checker) Stop() bool {
	if c == nil || c.stopped {
		return true
	}
	c.stopped = true
	var wg sync.WaitGroup
	for _, part := range c.parts {
		wg.Add(1)
		if !part.l.Exec(func(*loop.Loop) { part.stop(); wg.Done() }) {
			// The loop no longer runs: nothing else touches the probes.
			part.stop()
			wg.Done()
		}
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
		return true
	case <-time.After(stopWait):
		c.log.Warn("health checks: a loop did not confirm the stop", "backend", c.backend)
		return false
	}
}

func (part *checkPart) stop() {
	part.p.Stop()
	for _, p := range part.probes {
		p.closeFD()
		p.l.Disarm(&p.timer)
		p.state = prIdle
	}
}

// States reports every server's check (any goroutine).
func (c *Checker) States() []CheckState {
	if c == nil {
		return nil
	}
	var out []CheckState
	for _, part := range c.parts {
		for _, p := range part.probes {
			out = append(out, p.checkState())
		}
	}
	return out
}

// State reports the check of server s, number i of the backend c was
// made for (false when c does not check it). Any goroutine.
func (c *Checker) State(i int, s *balance.Server) (CheckState, bool) {
	if c == nil || i < 0 || i >= len(c.servers) || c.servers[i] != s {
		return CheckState{}, false
	}
	// Server i is probe i/nloops of loop i%nloops; only loops beyond the
	// server count have no part.
	return c.parts[i%c.nloops].probes[i/c.nloops].checkState(), true
}

// checkState reads the probe's last result (any goroutine): the fields of one
// probe, retried while the loop writes them.
func (p *probe) checkState() CheckState {
	st := CheckState{Server: p.c.Server.Name, Rise: p.ck.cfg.Rise, Fall: p.ck.cfg.Fall, Type: p.ck.cfg.Type}
	for {
		seq := p.seq.Load()
		if seq&1 != 0 {
			runtime.Gosched() // the loop is writing: a few stores
			continue
		}
		last := p.last.Load()
		ok, res, val := last>>40&1 == 1, uint8(last>>32), int(int32(uint32(last)))
		st.Runs, st.Fails = p.runs.Load(), p.fails.Load()
		st.Last = reason(res, val, p.tlsMsg.Load())
		st.Status, st.Code = checkStatus(ok, res, val)
		st.Since = time.Unix(0, p.since.Load())
		st.CheckedAt = time.Time{}
		if at := p.checkedAt.Load(); at != 0 {
			st.CheckedAt = time.Unix(0, at)
		}
		st.Duration = time.Duration(p.durNs.Load())
		st.Health = int(p.health.Load())
		if p.seq.Load() == seq {
			break
		}
	}
	st.Up = p.c.Server.Up()
	return st
}

// changed logs an up/down transition (loop thread, rare: allocation ok).
func (c *Checker) changed(ch *balance.Check, up bool) {
	p := ch.Owner.(*probe)
	from, to, lvl := "up", "down", slog.LevelWarn
	if up {
		from, to, lvl = "down", "up", slog.LevelInfo
	}
	c.log.Log(context.Background(), lvl, "server health changed",
		"backend", c.backend, "server", ch.Server.Name, "from", from, "to", to,
		"reason", reason(p.res, p.resVal, p.tlsMsg.Load()), "check", c.cfg.Type, "thread", p.l.ID())
}

// scheduleProbe is the Prober's Schedule: arm the server's timer.
func scheduleProbe(c *balance.Check, d time.Duration) {
	p := c.Owner.(*probe)
	p.l.Arm(&p.timer, p.l.Now()+int64(d))
}

// startProbe is the Prober's Probe.
func startProbe(c *balance.Check) { c.Owner.(*probe).start() }

// onTimer: time for the next check when idle, the probe's timeout
// otherwise.
func (p *probe) onTimer() {
	if p.state != prIdle {
		p.finish(false, resTimeout, int(p.state))
		return
	}
	p.c.Fire()
}

// start opens a non-blocking connection to the server (loop thread).
func (p *probe) start() {
	s := p.c.Server
	p.sent, p.got = 0, 0
	p.attempt++
	p.startedAt = p.l.Now()
	if p.h2 != nil {
		p.h2.reset()
		if p.req == nil { // a check HTTP/2 cannot express (CONNECT)
			p.finish(false, resH2, h2ChkRequest)
			return
		}
	}
	switch stage, e := p.side.connect(p.l, s, &p.sa); stage {
	case connOK:
	case connRefused:
		p.finish(false, resConnect, int(e))
		return
	default:
		// EMFILE and the like, or the loop's refusal: counted as a
		// failed check, as HAProxy's "socket error" is.
		p.finish(false, resSocket, int(e))
		return
	}
	p.state = prConnecting
	p.deadline = p.l.Now() + int64(p.c.Timeout)
	p.l.Arm(&p.timer, p.deadline)
}

// stepStarted: the server's TLS handshake runs.
func (p *probe) stepStarted() { p.state = prHandshake }

// stepCurrent: the handshake of probe number attempt ended; the probe
// still waits for it unless its timeout or a Stop ended it meanwhile.
func (p *probe) stepCurrent(attempt uint32) bool {
	return p.state == prHandshake && p.attempt == attempt
}

// stepDone: the probe's handshake ended (connectOwner): a tcp check is
// done, an http check sends its request.
func (p *probe) stepDone(err error) {
	var re *registerError
	switch {
	case errors.Is(err, os.ErrDeadlineExceeded):
		p.finish(false, resTimeout, int(prHandshake))
		return
	case errors.As(err, &re):
		p.finish(false, resSocket, errnoOf(re.err))
		return
	case err != nil:
		msg := "tls handshake: " + err.Error()
		p.tlsMsg.Store(&msg)
		p.finish(false, resTLS, 0)
		return
	case p.req == nil:
		p.finish(true, resTLSOK, 0)
		return
	}
	p.state = prSending
	p.process()
}

// process advances the probe on readiness (loop thread).
func (p *probe) process() {
	switch p.state {
	case prIdle, prHandshake:
		return // a wakeup left over from a closed or detached fd
	}
	// A probe is a health-check result in the making: all of it runs in
	// class Normal (seed 000), its fd events requeue it there.
	if !decideInNormal(p.l, &p.side.Task) {
		return
	}
	switch p.state {
	case prConnecting:
		pending, e := p.side.connectResult()
		switch {
		case pending:
			return
		case e == unix.ENOTCONN:
			p.finish(false, resClosed, int(prConnecting))
			return
		case e != 0:
			p.finish(false, resConnect, int(e))
			return
		}
		if !sendProxy(&p.side, p.c.Server, netip.AddrPort{}, netip.AddrPort{}, nil) {
			p.finish(false, resIO, int(unix.EPIPE))
			return
		}
		if p.side.xp.afterConnect(&p.side, connectStep{l: p.l, pool: p.hs,
			within: handshakeWithin(p.l, p.deadline), owner: p, attempt: p.attempt}) {
			return // the server's TLS handshake (stepStarted)
		}
		if p.req == nil {
			p.finish(true, resOK, 0)
			return
		}
		p.state = prSending
		fallthrough
	case prSending:
		for p.sent < len(p.req) {
			n, e := p.side.send(p.req[p.sent:], false)
			if e == unix.EAGAIN {
				p.side.blocked()
				return
			}
			if e != 0 {
				p.finish(false, resIO, int(e))
				return
			}
			p.sent += n
		}
		p.state = prReading
		fallthrough
	case prReading:
		if p.h2 != nil {
			p.readH2()
			return
		}
		for {
			n, e := p.side.recv(p.buf[p.got:])
			if e == unix.EAGAIN {
				p.side.FD.Ready &^= evIn
				return
			}
			if e != 0 {
				p.finish(false, resIO, int(e))
				return
			}
			if n == 0 {
				p.finish(false, resClosed, int(prReading))
				return
			}
			p.got += n
			status, ok := parseStatusLine(p.buf[:p.got])
			if !ok {
				p.finish(false, resBadStatus, 0)
				return
			}
			if status >= 0 {
				in := status >= p.ck.cfg.StatusMin && status <= p.ck.cfg.StatusMax
				p.finish(in, resStatus, status)
				return
			}
		}
	}
}

// readH2 reads an h2 check's answer up to its status (prReading).
func (p *probe) readH2() {
	for {
		n, e := p.side.recv(p.h2.rbuf[:])
		if e == unix.EAGAIN {
			p.side.FD.Ready &^= evIn
			return
		}
		if e != 0 {
			p.finish(false, resIO, int(e))
			return
		}
		if n == 0 {
			p.finish(false, resClosed, int(prReading))
			return
		}
		if done, res, val := p.h2.feed(p.h2.rbuf[:n]); done {
			ok := res == resStatus && val >= p.ck.cfg.StatusMin && val <= p.ck.cfg.StatusMax
			p.finish(ok, res, val)
			return
		}
	}
}

// parseStatusLine checks the start of an HTTP/1.x status line: "HTTP/1."
// then 0 or 1, SP, three digits, then SP or CR. It returns the status
// once statusLineLen bytes are there (-1 before), and ok=false as soon as
// a byte does not fit.
func parseStatusLine(b []byte) (status int, ok bool) {
	const prefix = "HTTP/1."
	for i, c := range b {
		switch {
		case i < len(prefix):
			if c != prefix[i] {
				return -1, false
			}
		case i == 7:
			if c != '0' && c != '1' {
				return -1, false
			}
		case i == 8:
			if c != ' ' {
				return -1, false
			}
		case i <= 11:
			if c < '0' || c > '9' || (i == 9 && c == '0') {
				return -1, false
			}
		case i == 12:
			if c != ' ' && c != '\r' {
				return -1, false
			}
		}
	}
	if len(b) < statusLineLen {
		return -1, true
	}
	return int(b[9]-'0')*100 + int(b[10]-'0')*10 + int(b[11]-'0'), true
}

// finish closes the probe's socket and hands the outcome to the Prober,
// which applies rise/fall and schedules the next check.
func (p *probe) finish(ok bool, res uint8, val int) {
	p.closeFD()
	p.l.Disarm(&p.timer)
	p.state = prIdle
	prevOK, prevRes, prevVal := p.okLast(), p.res, p.resVal
	p.res, p.resVal = res, val
	now := time.Now().UnixNano()
	var okBit uint64
	if ok {
		okBit = 1 << 40
	}
	p.seq.Add(1)
	if s, c := checkStatus(ok, res, val); !sameStatus(s, c, prevOK, prevRes, prevVal) {
		p.since.Store(now)
	}
	p.last.Store(okBit | uint64(res)<<32 | uint64(uint32(int32(val))))
	p.checkedAt.Store(now)
	p.durNs.Store(p.l.Now() - p.startedAt)
	p.runs.Add(1)
	if !ok {
		p.fails.Add(1)
	}
	p.seq.Add(1)
	p.c.Done(ok) // rise/fall; a state change is logged with the counts above
	p.seq.Add(1)
	p.health.Store(int64(p.c.Health.Count()))
	p.seq.Add(1)
}

// okLast: the last probe succeeded (loop thread).
func (p *probe) okLast() bool { return p.last.Load()>>40&1 == 1 }

// sameStatus: status s with code c is what the previous outcome was.
func sameStatus(s string, c int, prevOK bool, prevRes uint8, prevVal int) bool {
	ps, pc := checkStatus(prevOK, prevRes, prevVal)
	return s == ps && c == pc
}

// closeFD closes the probe's socket with an RST (SO_LINGER 0): a check
// connection has nothing left to say, and this leaves no TIME_WAIT behind
// on either side at one connection per server per interval.
func (p *probe) closeFD() {
	if p.side.FD.Fd < 0 {
		return
	}
	p.side.close(p.l, true)
}

// errnoOf extracts the errno of a syscall error (EIO when there is none).
func errnoOf(err error) int {
	var e unix.Errno
	if errors.As(err, &e) {
		return int(e)
	}
	return int(unix.EIO)
}

// reason is the human form of a probe outcome (logs, States); tlsMsg is
// the last handshake error (resTLS).
func reason(res uint8, val int, tlsMsg *string) string {
	switch res {
	case resOK:
		return "connected"
	case resTLSOK:
		return "tls handshake completed"
	case resTLS:
		if tlsMsg != nil {
			return *tlsMsg
		}
		return "tls handshake failed"
	case resStatus:
		return "status " + strconv.Itoa(val)
	case resSocket:
		return "socket: " + unix.Errno(val).Error()
	case resConnect, resIO:
		return unix.Errno(val).Error()
	case resTimeout:
		switch uint8(val) {
		case prConnecting:
			return "timeout (connect)"
		case prHandshake:
			return "timeout (handshake)"
		case prSending, prReading:
			return "timeout (response)"
		}
		return "timeout"
	case resClosed:
		return "connection closed before a status line"
	case resBadStatus:
		return "not an HTTP/1.x status line"
	case resH2:
		switch val {
		case h2ChkNotH2:
			return "not an HTTP/2 server (no SETTINGS frame first)"
		case h2ChkProtocol:
			return "HTTP/2 protocol error"
		case h2ChkMalformed:
			return "malformed HTTP/2 response headers"
		case h2ChkRequest:
			return "the check's request cannot be sent over HTTP/2"
		}
		return "bad HTTP/2 answer"
	case resH2Reset:
		return "stream reset by the server (" + http2.ErrCode(val).String() + ")"
	case resH2GoAway:
		return "GOAWAY from the server (" + http2.ErrCode(val).String() + ")"
	}
	return ""
}
