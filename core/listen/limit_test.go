package listen

import (
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// limitSink keeps the accepted fds and checks, on every accept, that the
// limits were reserved before it (Cur never above Max).
type limitSink struct {
	mu     sync.Mutex
	fds    []int
	limits []*Limit
	total  atomic.Int64
	over   atomic.Int64 // accepts that saw a Limit above its Max
}

func (s *limitSink) accept(l *loop.Loop, fd int, _ netip.AddrPort, ln *Listener) {
	for _, m := range s.limits {
		if mx := m.Max(); mx > 0 && m.Cur() > mx {
			s.over.Add(1)
		}
	}
	s.mu.Lock()
	s.fds = append(s.fds, fd)
	s.mu.Unlock()
	s.total.Add(1)
}

// closeOne ends one held connection as the proxy does: close, then Release.
func (s *limitSink) closeOne(ln *Listener) bool {
	s.mu.Lock()
	if len(s.fds) == 0 {
		s.mu.Unlock()
		return false
	}
	fd := s.fds[0]
	s.fds = s.fds[1:]
	s.mu.Unlock()
	unix.Close(fd)
	ln.Release()
	return true
}

func (s *limitSink) held() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.fds)
}

// dialParallel connects n clients at once (all in the backlog or accepted
// when it returns) and closes them at cleanup.
func dialParallel(t *testing.T, addr string, n int) {
	t.Helper()
	cs := make([]net.Conn, n)
	errs := make([]error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cs[i], errs[i] = net.DialTimeout("tcp", addr, 5*time.Second)
		}()
	}
	wg.Wait()
	t.Cleanup(func() {
		for _, c := range cs {
			if c != nil {
				c.Close()
			}
		}
	})
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// A burst of parallel connects on a listener accepted by 2 loops never holds
// more than the frontend's (or the process's) maximum, whatever loop
// accepts and whatever ring carries the fd; each slot released lets one
// waiting client in, until all are served.
func TestLimitReservedBeforeAcceptAcrossLoops(t *testing.T) {
	for _, tc := range []struct {
		name       string
		fe, global int64
	}{
		{"frontend", 2, 0},
		{"global", 0, 2},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := startGroup(t, 2, 0)
			g.SetDistribution(distribution(t, config.DistRoundRobin, 0)) // every other fd goes through a ring
			var fe, global Limit
			fe.SetMax(tc.fe)
			global.SetMax(tc.global)
			s := &limitSink{limits: []*Limit{&fe, &global}}
			ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Limits: []*Limit{&fe, &global}}, nil, s.accept)
			if err != nil {
				t.Fatal(err)
			}
			defer ln.Close()
			const n = 50
			dialParallel(t, ln.Addr().String(), n)
			testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 2 }, "2 accepted")
			looptest.RoundsPass(t, g.loops...)
			if got := s.total.Load(); got != 2 {
				t.Fatalf("%d accepted with maxconn 2", got)
			}
			for served := int64(2); served < n; served++ {
				if !s.closeOne(ln) {
					t.Fatal("nothing held")
				}
				testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == served+1 }, "a waiting client served")
				if h := s.held(); h > 2 {
					t.Fatalf("%d held with maxconn 2", h)
				}
			}
			if o := s.over.Load(); o != 0 {
				t.Fatalf("%d accepts above the maximum", o)
			}
			for s.closeOne(ln) {
			}
			if fe.Cur() != 0 || global.Cur() != 0 {
				t.Fatalf("slots left after every release: frontend %d, global %d", fe.Cur(), global.Cur())
			}
		})
	}
}

// At the boundary a release below the resume slack does not resume the
// limited listener (hysteresis: one pause/resume per slack connections),
// yet a client waiting for a free slot is served within LimitRecheck.
func TestLimitResumesWithHysteresis(t *testing.T) {
	g := startGroup(t, 1, 0)
	var m Limit
	m.SetMax(64) // resume slack 4
	s := &limitSink{limits: []*Limit{&m}}
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Limits: []*Limit{&m}}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dialParallel(t, ln.Addr().String(), 64+12)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 64 }, "64 accepted")
	w0 := m.Wakes()
	for range 12 {
		s.closeOne(ln)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 76 }, "the 12 waiting clients")
	// Slack 4: ~3 wake-ups (one per 4 releases); one per release without
	// hysteresis. Room for a recheck or two on a loaded machine.
	if w := m.Wakes() - w0; w > 6 {
		t.Fatalf("%d wake-ups for 12 releases, want about 12/4", w)
	}
	// One release below the slack: served by the recheck.
	dialParallel(t, ln.Addr().String(), 1)
	looptest.RoundsPass(t, g.loops...)
	start := time.Now()
	s.closeOne(ln)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 77 }, "the client after one release")
	if d := time.Since(start); d > 20*LimitRecheck {
		t.Fatalf("a free slot found after %v", d)
	}
	if o := s.over.Load(); o != 0 {
		t.Fatalf("%d accepts above the maximum", o)
	}
}

// Raising the maximum resumes the listener at once; a connection carries
// its slot through the accept ring (the slot is taken when the accepting
// loop reserves, not when the target loop pops it).
func TestLimitSetMaxResumesAndRingCarriesTheSlot(t *testing.T) {
	g := startGroup(t, 2, 0)
	g.SetDistribution(distribution(t, config.DistRoundRobin, 0))
	var m Limit
	m.SetMax(1)
	s := &limitSink{limits: []*Limit{&m}}
	ln, err := g.Open(BindSpec{Backlog: config.DefaultBacklog, Address: "127.0.0.1", Limits: []*Limit{&m}}, nil, s.accept)
	if err != nil {
		t.Fatal(err)
	}
	dialParallel(t, ln.Addr().String(), 5)
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 1 }, "1 accepted")
	hold := make(chan struct{})
	held := make(chan struct{})
	g.loops[1].Exec(func(*loop.Loop) { close(held); <-hold })
	<-held
	m.SetMax(5)
	// Loop 0 accepts the 4 others, pushes 2 to loop 1's ring (held).
	testutil.Eventually(t, 5*time.Second, func() bool { return m.Cur() == 5 }, "4 more reserved")
	testutil.Eventually(t, 5*time.Second, func() bool { return g.Ring(1).Len() == 2 }, "2 in loop 1's ring")
	if s.total.Load() != 3 {
		t.Fatalf("%d handed off, want 3 (2 wait in the ring)", s.total.Load())
	}
	closed := make(chan struct{})
	go func() { ln.Close(); close(closed) }() // waits for loop 1
	close(hold)
	<-closed
	testutil.Eventually(t, 5*time.Second, func() bool { return s.total.Load() == 5 }, "5 handed off")
	for s.closeOne(ln) {
	}
	if c := m.Cur(); c != 0 {
		t.Fatalf("%d slots held after every release", c)
	}
}

// TestLimitPeak: Peak is the most slots held at once (a frontend's
// conn_max), kept after they are released.
func TestLimitPeak(t *testing.T) {
	var m Limit
	for range 4 {
		m.reserve()
		m.accepted()
	}
	m.Release()
	m.reserve()
	m.accepted()
	m.reserve() // an accept in progress: not a connection
	m.unreserve()
	for range 4 {
		m.Release()
	}
	if m.Peak() != 4 || m.Cur() != 0 {
		t.Fatalf("peak %d cur %d, want 4 and 0", m.Peak(), m.Cur())
	}
}
