package listen

import (
	"errors"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// distribution is alg with maxaccept as a normalized tuning has them ("" and
// 0 take the defaults): ParseDistribution fills none.
func distribution(t testing.TB, alg string, maxaccept int) Distribution {
	t.Helper()
	tu := config.Tuning{Distribution: alg, Maxaccept: maxaccept}
	tu.Normalize()
	d, err := ParseDistribution(tu.Distribution, tu.Maxaccept)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// startGroup runs n loops and a Group over them; everything is stopped and
// closed at cleanup.
func startGroup(t testing.TB, n, ringSize int) *Group {
	t.Helper()
	// Running loops, so that Open waits for registration.
	g := NewGroup(looptest.Run(t, 0, n, nil), ringSize, distribution(t, "", 0))
	t.Cleanup(g.Close) // before the loops stop
	return g
}

// sink is an AcceptFunc that keeps the connections, counts them per loop and
// maintains Activity.Conns like the proxy does.
type sink struct {
	mu    sync.Mutex
	fds   map[int][]int // loop ID -> fds
	total atomic.Int64
	g     *Group
}

func newSink(t testing.TB, g *Group) *sink {
	s := &sink{fds: map[int][]int{}, g: g}
	t.Cleanup(s.release)
	return s
}

func (s *sink) accept(l *loop.Loop, fd int, _ netip.AddrPort, ln *Listener) {
	l.Activity().Conns.Add(1)
	s.mu.Lock()
	s.fds[l.ID()] = append(s.fds[l.ID()], fd)
	s.mu.Unlock()
	s.total.Add(1)
}

func (s *sink) counts(n int) []int {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]int, n)
	for id, fds := range s.fds {
		out[id] = len(fds)
	}
	return out
}

func (s *sink) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, fds := range s.fds {
		for _, fd := range fds {
			unix.Close(fd)
		}
		s.g.loops[id].Activity().Conns.Add(-int64(len(fds)))
	}
	s.fds = map[int][]int{}
	s.total.Store(0)
}

// dialN opens n client connections and closes them at cleanup.
func dialN(t testing.TB, addr string, n int) []net.Conn {
	t.Helper()
	cs := make([]net.Conn, 0, n)
	for range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			t.Fatal(err)
		}
		cs = append(cs, c)
	}
	t.Cleanup(func() {
		for _, c := range cs {
			c.Close()
		}
	})
	return cs
}

func countFds(t testing.TB) int {
	t.Helper()
	es, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	return len(es)
}

func TestOpenCloseReopenSamePort(t *testing.T) {
	g := startGroup(t, 2, 0)
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, "fe", s.accept)
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr()
	if ln.Owner != "fe" || addr.Port() == 0 {
		t.Fatalf("owner %v addr %v", ln.Owner, addr)
	}
	for round := range 3 {
		dialN(t, addr.String(), 2)
		want := int64(2 * (round + 1))
		testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == want }, "accepts")
		ln.Close()
		ln.Close() // idempotent
		if c, err := net.Dial("tcp", addr.String()); err == nil {
			c.Close()
			t.Fatal("connected to a closed listener")
		}
		ln, err = g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Port: int(addr.Port())}, "fe", s.accept)
		if err != nil {
			t.Fatalf("reopen %d: %v", round, err)
		}
	}
	ln.Close()
	// Accepted connections live on after Close.
	if s.total.Load() != 6 {
		t.Fatalf("total %d", s.total.Load())
	}
}

func TestOpenErrorsAreSyscallErrorsAndLeaveNothingOpen(t *testing.T) {
	g := startGroup(t, 2, 0)
	s := newSink(t, g)
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	busyPort := busy.Addr().(*net.TCPAddr).Port

	tests := []struct {
		name string
		spec BindSpec
		want error
	}{
		{"port in use", BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Port: busyPort}, syscall.EADDRINUSE},
		{"port in use, reuseport shards", BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Port: busyPort, Shards: 2}, syscall.EADDRINUSE},
		{"address not local", BindSpec{Backlog: config.DefaultBacklog, Address: "192.0.2.1", Port: 0}, syscall.EADDRNOTAVAIL},
		{"not an IP literal", BindSpec{Backlog: config.DefaultBacklog, Address: "localhost"}, config.ErrInvalid},
		{"thread out of range", BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Threads: []int{2}}, config.ErrInvalid},
		// Normalize sets it: Open fills no default.
		{"backlog unset", BindSpec{Address: "127.0.0.1"}, config.ErrInvalid},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := countFds(t)
			ln, err := g.Open(tt.spec, nil, s.accept)
			if err == nil {
				ln.Close()
				t.Fatal("Open succeeded")
			}
			if !errors.Is(err, tt.want) {
				t.Fatalf("got %v, want %v", err, tt.want)
			}
			var se *os.SyscallError
			if _, isErrno := tt.want.(syscall.Errno); isErrno && !errors.As(err, &se) {
				t.Fatalf("%v (%T) is not an *os.SyscallError", err, err)
			}
			if after := countFds(t); after != before {
				t.Fatalf("fds %d before, %d after", before, after)
			}
		})
	}
}

func TestOpenAndCloseReturnFdCountToStart(t *testing.T) {
	g := startGroup(t, 2, 0)
	s := newSink(t, g)
	before := countFds(t)
	for _, shards := range []int{0, 3} {
		ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Shards: shards}, nil, s.accept)
		if err != nil {
			t.Fatal(err)
		}
		ln.Close()
	}
	if after := countFds(t); after != before {
		t.Fatalf("fds %d before, %d after", before, after)
	}
}

func TestOpenIPv6AndWildcard(t *testing.T) {
	g := startGroup(t, 1, 0)
	s := newSink(t, g)
	for _, a := range []string{"::1", "*"} {
		ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: a}, nil, s.accept)
		if err != nil {
			if a == "::1" && errors.Is(err, syscall.EADDRNOTAVAIL) {
				t.Log("no IPv6 loopback here")
				continue
			}
			t.Fatal(err)
		}
		target := ln.Addr().String()
		if a == "*" {
			target = net.JoinHostPort("127.0.0.1", fmtInt(int(ln.Addr().Port())))
		}
		n := s.total.Load()
		dialN(t, target, 1)
		testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == n+1 }, "accept on "+a)
		ln.Close()
	}
}

func fmtInt(n int) string { return strconv.Itoa(n) }

// For bursts of N x loops connections, each algorithm's spread over 2 and 4
// loops. The connections stay open for the burst (they count as load).
// p2c-rr, round-robin, least-conn and p2c must not leave a loop with twice the
// connections of another; round-robin is exact.
func TestDistributionSpreadsBursts(t *testing.T) {
	const perLoop = 16
	for _, alg := range []string{config.DistP2CRR, config.DistRoundRobin, config.DistLeastConn, config.DistLocal, config.DistP2C} {
		for _, n := range []int{2, 4} {
			t.Run(alg+"/"+fmtInt(n), func(t *testing.T) {
				g := startGroup(t, n, 0)
				g.SetDistribution(distribution(t, alg, 0))
				s := newSink(t, g)
				ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
				if err != nil {
					t.Fatal(err)
				}
				defer ln.Close()
				total := perLoop * n
				dialN(t, ln.Addr().String(), total)
				testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == int64(total) }, "all accepted")
				c := s.counts(n)
				t.Logf("%s over %d loops, %d connections: %v", alg, n, total, c)
				var accepted uint64
				for i, l := range g.loops {
					a := l.Activity().Accepted.Load()
					if a != uint64(c[i]) {
						t.Errorf("loop %d: Accepted %d, OnAccept ran %d times", i, a, c[i])
					}
					accepted += a
				}
				if accepted != uint64(total) {
					t.Errorf("Accepted %d, want %d", accepted, total)
				}
				lo, hi := slices.Min(c), slices.Max(c)
				switch alg {
				case config.DistRoundRobin:
					if lo != perLoop || hi != perLoop {
						t.Errorf("round-robin spread %v, want %d each", c, perLoop)
					}
				case config.DistP2CRR, config.DistLeastConn, config.DistP2C:
					if lo == 0 || hi >= 2*lo {
						t.Errorf("%s spread %v: a loop has twice the connections of another", alg, c)
					}
				}
			})
		}
	}
}

// TestLoadIsPerBind: the distribution compares, between its candidates,
// the connections of the bind each loop owns (LoopConns, HAProxy's
// thr_conn) plus its ring, not all the loop's connections (seed 001): 32
// connections of another bind held by loop 0 do not push this bind's
// connections to loop 1, and the counts follow the hand-offs and Done.
func TestLoadIsPerBind(t *testing.T) {
	g := startGroup(t, 2, 0) // p2c-rr
	busy := newSink(t, g)
	a, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Threads: []int{0}}, nil, busy.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	dialN(t, a.Addr().String(), 32)
	testutil.Eventually(t, 5*time.Second, func() bool { return busy.total.Load() == 32 }, "the busy bind's connections accepted")
	if c := busy.counts(2); c[0] != 32 || a.Conns().Load(0) != 32 || a.Conns().Load(1) != 0 {
		t.Fatalf("busy bind: %v accepted, counted %d/%d; want all on loop 0", c, a.Conns().Load(0), a.Conns().Load(1))
	}
	s := newSink(t, g)
	b, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	const n = 32
	dialN(t, b.Addr().String(), n)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == n }, "all accepted")
	c := s.counts(2)
	t.Logf("loop 0 holds %d connections of another bind; this bind's spread: %v", 32, c)
	if lo, hi := slices.Min(c), slices.Max(c); lo == 0 || hi >= 2*lo {
		t.Errorf("spread %v: the other bind's load skewed this one's", c)
	}
	for i := range 2 {
		if got := b.Conns().Load(i); got != int64(c[i]) {
			t.Errorf("loop %d: LoopConns %d, hand-offs %d", i, got, c[i])
		}
	}
	for range c[0] {
		b.Conns().Done(0)
	}
	if got := b.Conns().Load(0); got != 0 {
		t.Errorf("after Done for each: %d", got)
	}
}

func TestReuseportShardsKeepConnectionsOnTheirLoop(t *testing.T) {
	g := startGroup(t, 2, 0)
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Shards: 2}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	if len(ln.socks) != 2 || len(ln.acc) != 2 || ln.acc[0].li != 0 || ln.acc[1].li != 1 {
		t.Fatalf("sockets %d acceptors %d", len(ln.socks), len(ln.acc))
	}
	const total = 64
	dialN(t, ln.Addr().String(), total)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == total }, "all accepted")
	c := s.counts(2)
	t.Logf("reuseport spread over 2 shards: %v", c)
	// The kernel hashes the 4-tuple: with 64 source ports both shards get
	// some (all on one has probability 2^-63).
	if c[0] == 0 || c[1] == 0 {
		t.Fatalf("spread %v", c)
	}
	for i, l := range g.loops {
		if p := l.Activity().AccqPushed.Load(); p != 0 {
			t.Fatalf("loop %d: %d ring pushes with reuseport", i, p)
		}
	}
}

// maxaccept bounds the accepts of one wake-up: with a backlog of 10 and
// maxaccept 3, no round hands more than 3 connections to OnAccept.
func TestMaxacceptBoundsAcceptsPerWakeup(t *testing.T) {
	g := startGroup(t, 1, 0)
	g.SetDistribution(distribution(t, config.DistLocal, 3))
	perRound := map[uint64]int{}
	var total atomic.Int64
	var fds []int
	t.Cleanup(func() {
		for _, fd := range fds {
			unix.Close(fd)
		}
	})
	fn := func(l *loop.Loop, fd int, _ netip.AddrPort, _ *Listener) {
		perRound[l.Activity().Loops.Load()]++ // published at each round's end: constant within a round
		fds = append(fds, fd)
		total.Add(1)
	}
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, fn)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.Pause()
	waitPaused(t, ln)
	dialN(t, ln.Addr().String(), 10) // handshakes complete in the backlog
	ln.Resume()
	testutil.Eventually(t, 5*time.Second, func() bool { return total.Load() == 10 }, "10 accepts")
	done := make(chan struct{})
	g.loops[0].Exec(func(*loop.Loop) {
		for r, n := range perRound {
			if n > 3 {
				t.Errorf("round %d accepted %d > maxaccept 3", r, n)
			}
		}
		if len(perRound) < 4 {
			t.Errorf("10 accepts in %d rounds with maxaccept 3", len(perRound))
		}
		close(done)
	})
	<-done
}

// waitPaused waits until every acceptor has unregistered.
func waitPaused(t testing.TB, ln *Listener) {
	t.Helper()
	for _, a := range ln.acc {
		done := make(chan bool)
		a.l.Exec(func(*loop.Loop) { done <- a.registered })
		if <-done {
			t.Fatal("acceptor still registered after Pause")
		}
	}
}

func TestPauseStopsAcceptingAndResumeRestarts(t *testing.T) {
	g := startGroup(t, 2, 0)
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.Pause()
	ln.Pause()
	waitPaused(t, ln)
	dialN(t, ln.Addr().String(), 5)
	// Nothing may be accepted: a registered listener would have had its
	// connections accepted within a few rounds of every loop.
	looptest.RoundsPass(t, g.loops...)
	if n := s.total.Load(); n != 0 {
		t.Fatalf("%d accepted while paused", n)
	}
	ln.Resume()
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 5 }, "accepts after Resume")
}

// A full ring makes the accepting loop keep the connection and counts
// AccqFull on the target. Loop 1 is held busy so its ring (2 entries) fills;
// round-robin alternates targets 0,1,0,1... so of 8 connections accepted by
// loop 0, 4 target loop 1: 2 fit in its ring, 2 are kept by loop 0.
func TestFullRingFallsBackToLocal(t *testing.T) {
	g := startGroup(t, 2, 2)
	g.SetDistribution(distribution(t, config.DistRoundRobin, 0))
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Threads: []int{0, 1}}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	hold := make(chan struct{})
	held := make(chan struct{})
	g.loops[1].Exec(func(*loop.Loop) { close(held); <-hold })
	<-held
	released := false
	defer func() {
		if !released {
			close(hold)
		}
	}()
	dialN(t, ln.Addr().String(), 8)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.counts(2)[0] == 6 }, "6 accepts on loop 0")
	if f := g.loops[1].Activity().AccqFull.Load(); f != 2 {
		t.Fatalf("AccqFull %d, want 2", f)
	}
	if p := g.loops[1].Activity().AccqPushed.Load(); p != 2 {
		t.Fatalf("AccqPushed %d, want 2", p)
	}
	if n := g.Ring(1).Len(); n != 2 {
		t.Fatalf("ring length %d, want 2", n)
	}
	close(hold)
	released = true
	testutil.Eventually(t, 5*time.Second, func() bool { return s.counts(2)[1] == 2 }, "the ring entries on loop 1")
}

// Out of fds, a loop backs off for FdLimitBackoff instead of spinning, counts
// it, and accepts again once fds are available.
func TestFdExhaustionPausesAcceptWithoutBusyLoop(t *testing.T) {
	g := startGroup(t, 1, 0)
	s := newSink(t, g)
	var m Limit // every failed accept4 gives its reserved slot back
	m.SetMax(100)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Limits: []*Limit{&m}}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	ln.Pause()
	waitPaused(t, ln)
	dialN(t, ln.Addr().String(), 3)

	var old unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
		t.Fatal(err)
	}
	lowest, err := unix.Dup(0) // the next fd number the process would get
	if err != nil {
		t.Fatal(err)
	}
	unix.Close(lowest)
	lim := old
	lim.Cur = uint64(lowest)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Skip("cannot lower RLIMIT_NOFILE:", err)
	}
	restored := false
	restore := func() {
		if !restored {
			restored = true
			if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &old); err != nil {
				t.Error(err)
			}
		}
	}
	defer restore()
	act := g.loops[0].Activity()
	ln.Resume()
	testutil.Eventually(t, 5*time.Second, func() bool { return act.AcceptPauses.Load() >= 1 }, "an accept pause")
	rounds := act.Loops.Load()
	time.Sleep(FdLimitBackoff / 2) // inside the back-off window
	if n := act.Loops.Load() - rounds; n > 10 {
		t.Fatalf("%d rounds in %v of back-off: busy loop", n, FdLimitBackoff/2)
	}
	if s.total.Load() != 0 {
		t.Fatalf("accepted %d without fds", s.total.Load())
	}
	restore()
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 3 }, "accepts after the back-off")
	if c := m.Cur(); c != 3 {
		t.Fatalf("%d slots held for 3 connections after EMFILE", c)
	}
}

// Connections waiting in an accept ring when their listener closes are still
// handed to the AcceptFunc: Close stops accepting, it drops nothing accepted.
func TestCloseKeepsConnectionsAlreadyInRings(t *testing.T) {
	g := startGroup(t, 2, 0)
	g.SetDistribution(distribution(t, config.DistRoundRobin, 0))
	s := newSink(t, g)
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1"}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	hold := make(chan struct{})
	held := make(chan struct{})
	g.loops[1].Exec(func(*loop.Loop) { close(held); <-hold })
	<-held
	dialN(t, ln.Addr().String(), 4) // loop 0 keeps 2, pushes 2 to loop 1's ring
	testutil.Eventually(t, 5*time.Second, func() bool { return g.loops[1].Activity().AccqPushed.Load() == 2 }, "2 pushes")
	closed := make(chan struct{})
	go func() { ln.Close(); close(closed) }() // waits for loop 1
	close(hold)
	<-closed
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 4 }, "4 hand-offs")
	if c := s.counts(2); c[0] != 2 || c[1] != 2 {
		t.Fatalf("spread %v, want [2 2]", c)
	}
}

func TestPickAndDispatchAllocateNothing(t *testing.T) {
	g := startGroup(t, 4, 0)
	ln := &Listener{g: g, targets: []int{0, 1, 2, 3}, fn: func(*loop.Loop, int, netip.AddrPort, *Listener) {}}
	ln.addAcceptor(0, -1, 0, false)
	a := ln.acc[0]
	for _, alg := range []string{config.DistP2CRR, config.DistRoundRobin, config.DistLeastConn, config.DistLocal} {
		g.SetDistribution(distribution(t, alg, 0))
		if n := testing.AllocsPerRun(1000, func() { _ = a.pick() }); n != 0 {
			t.Errorf("%s: %v allocations per pick", alg, n)
		}
	}
}

func BenchmarkPickP2CRR(b *testing.B) {
	g := startGroup(b, 4, 0)
	ln := &Listener{g: g, targets: []int{0, 1, 2, 3}}
	ln.addAcceptor(0, -1, 0, false)
	a := ln.acc[0]
	b.ReportAllocs()
	for b.Loop() {
		_ = a.pick()
	}
}

// TestParseDistributionFillsNoDefault: every algorithm of the config is
// known; an empty or unknown one and a maxaccept below 1 (what a tuning that
// skipped config.Normalize holds) are refused, not defaulted.
func TestParseDistributionFillsNoDefault(t *testing.T) {
	for _, alg := range []string{config.DistP2CRR, config.DistRoundRobin, config.DistLeastConn, config.DistLocal} {
		if d, err := ParseDistribution(alg, 1); err != nil || d.maxaccept != 1 {
			t.Errorf("%s: %+v, %v", alg, d, err)
		}
	}
	for _, tt := range []struct {
		alg       string
		maxaccept int
	}{{"", 64}, {"fastest", 64}, {config.DistP2CRR, 0}, {config.DistLocal, -1}} {
		if _, err := ParseDistribution(tt.alg, tt.maxaccept); !errors.Is(err, config.ErrInvalid) {
			t.Errorf("ParseDistribution(%q, %d): %v, want ErrInvalid", tt.alg, tt.maxaccept, err)
		}
	}
}

// TestAcceptedConnectionsHaveNoDelayAndPeer: an accepted socket has
// TCP_NODELAY on without a setsockopt of its own (it inherits it from the
// listening socket, which Open sets: core/proxy no longer sets it per
// connection), and the AcceptFunc gets the client's address from accept4
// (core/proxy no longer calls getpeername), through a ring hand-off to
// another loop as well as locally.
func TestAcceptedConnectionsHaveNoDelayAndPeer(t *testing.T) {
	for _, alg := range []string{config.DistLocal, config.DistRoundRobin} {
		t.Run(alg, func(t *testing.T) {
			g := startGroup(t, 2, 0)
			g.SetDistribution(distribution(t, alg, 0))
			type acc struct {
				nodelay int
				peer    netip.AddrPort
				loop    int
			}
			got := make(chan acc, 4)
			ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Threads: []int{0, 1}}, "fe",
				func(l *loop.Loop, fd int, peer netip.AddrPort, ln *Listener) {
					v, err := unix.GetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY)
					if err != nil {
						v = -1
					}
					unix.Close(fd)
					ln.Release()
					ln.Conns().Done(l.ID())
					got <- acc{v, peer, l.ID()}
				})
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			want := map[netip.AddrPort]bool{}
			for _, c := range dialN(t, ln.Addr().String(), 4) {
				want[c.LocalAddr().(*net.TCPAddr).AddrPort()] = true
			}
			for range 4 {
				select {
				case a := <-got:
					if a.nodelay != 1 {
						t.Errorf("accepted socket TCP_NODELAY = %d, want 1", a.nodelay)
					}
					if !want[a.peer] {
						t.Errorf("peer %v on loop %d, want one of %v", a.peer, a.loop, want)
					}
					delete(want, a.peer)
				case <-time.After(10 * time.Second):
					t.Fatal("no connection accepted")
				}
			}
		})
	}
}
