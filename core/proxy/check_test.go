package proxy

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// chkLoops runs n loops in the background for a test, each with its
// worker (the checks' TLS handshakes run on its pool).
func chkLoops(t testing.TB, n int) []*Worker {
	t.Helper()
	ws := make([]*Worker, 0, n)
	looptest.Run(t, 0, n, func(l *loop.Loop) { ws = append(ws, NewWorker(l, defaultTuning())) })
	return ws
}

// chkBackend builds backend "web" with one server per port on 127.0.0.1.
func chkBackend(t testing.TB, hc config.HealthCheck, prev *balance.Backend, ports ...int) *balance.Backend {
	t.Helper()
	cb := &config.Backend{Name: "web", Mode: config.ModeTCP, HealthCheck: &hc}
	for i, p := range ports {
		cb.Servers = append(cb.Servers, &config.Server{Name: "s" + strconv.Itoa(i+1), Address: "127.0.0.1", Port: p})
	}
	return chkBuild(t, cb, prev)
}

// chkBackendAt is chkBackend with one server at host:port.
func chkBackendAt(t testing.TB, hc config.HealthCheck, host string, port int) *balance.Backend {
	t.Helper()
	cb := &config.Backend{Name: "web", Mode: config.ModeTCP, HealthCheck: &hc,
		Servers: []*config.Server{{Name: "s1", Address: host, Port: port}}}
	return chkBuild(t, cb, nil)
}

func chkBuild(t testing.TB, cb *config.Backend, prev *balance.Backend) *balance.Backend {
	t.Helper()
	cb.Normalize()
	b, err := balance.Build(cb, prev, nil)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func chkState(ck *Checker, server string) CheckState {
	for _, s := range ck.States() {
		if s.Server == server {
			return s
		}
	}
	return CheckState{}
}

// chkOrigin is a test server on 127.0.0.1 that runs handle for each
// connection and records the first request it read.
type chkOrigin struct {
	host string
	port int
	mu   sync.Mutex
	req  string
}

func chkNewOrigin(t testing.TB, handle func(c net.Conn, o *chkOrigin)) *chkOrigin {
	t.Helper()
	return chkNewOriginOn(t, "127.0.0.1", handle)
}

// uniqueLoopback is an address of 127.0.0.0/8 that no other test uses
// (chosen at random among millions).
func uniqueLoopback(t testing.TB) string {
	return fmt.Sprintf("127.%d.%d.%d", 100+rand.IntN(100), rand.IntN(256), 1+rand.IntN(254))
}

// chkNewOriginOn is chkNewOrigin on host (a loopback address).
func chkNewOriginOn(t testing.TB, host string, handle func(c net.Conn, o *chkOrigin)) *chkOrigin {
	t.Helper()
	ln, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		t.Fatal(err)
	}
	o := &chkOrigin{host: host, port: ln.Addr().(*net.TCPAddr).Port}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); defer c.Close(); handle(c, o) }()
		}
	}()
	return o
}

// readHead reads a request head and records the first one.
func (o *chkOrigin) readHead(c net.Conn) bool {
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	r := bufio.NewReader(c)
	var sb strings.Builder
	for {
		line, err := r.ReadString('\n')
		sb.WriteString(line)
		if err != nil {
			return false
		}
		if line == "\r\n" {
			break
		}
	}
	o.mu.Lock()
	if o.req == "" {
		o.req = sb.String()
	}
	o.mu.Unlock()
	return true
}

func chkAnswer(resp string) func(c net.Conn, o *chkOrigin) {
	return func(c net.Conn, o *chkOrigin) {
		if o.readHead(c) {
			io.WriteString(c, resp)
		}
	}
}

// chkClosedPort is a port whose connects are refused for the whole test.
func chkClosedPort(t testing.TB) int { return closedPort(t).Port }

// chkBlackholePort is a port whose connects never complete.
func chkBlackholePort(t testing.TB) int { return testutil.BlackholeAddr(t).Port }

func TestCheckProbeOutcomes(t *testing.T) {
	loops := chkLoops(t, 1)
	ok := chkNewOrigin(t, chkAnswer("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
	unavailable := chkNewOrigin(t, chkAnswer("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"))
	bare := chkNewOrigin(t, chkAnswer("HTTP/1.0 204\r\n\r\n"))
	silent := chkNewOrigin(t, func(c net.Conn, o *chkOrigin) { o.readHead(c); io.Copy(io.Discard, c) })
	closes := chkNewOrigin(t, func(c net.Conn, o *chkOrigin) { o.readHead(c) })
	notHTTP := chkNewOrigin(t, chkAnswer("SSH-2.0-OpenSSH_9.6\r\n"))
	accepts := chkNewOrigin(t, func(c net.Conn, o *chkOrigin) { io.Copy(io.Discard, c) })
	hole := chkBlackholePort(t)
	refused := chkClosedPort(t)

	// Timeouts generous enough for a loaded machine under -race (300 ms
	// was not: the origin that closes after the head was sometimes not
	// scheduled within it, and its row read "timeout (response)"); the
	// timeout rows take two of them.
	tcp := config.HealthCheck{Type: config.CheckTCP, IntervalMs: 50, TimeoutMs: 2000, Rise: 1, Fall: 1}
	http := config.HealthCheck{Type: config.CheckHTTP, IntervalMs: 50, TimeoutMs: 2000, Rise: 1, Fall: 1}
	only503 := http
	only503.StatusMin, only503.StatusMax = 500, 503
	for _, tc := range []struct {
		name string
		hc   config.HealthCheck
		port int
		up   bool
		last string
		// HAProxy's name of the result, and the HTTP status it carries.
		status string
		code   int
	}{
		{"tcp connect succeeds", tcp, accepts.port, true, "connected", stats.CheckL4OK, 0},
		{"tcp connection refused", tcp, refused, false, "connection refused", stats.CheckL4CON, 0},
		{"tcp connect times out", tcp, hole, false, "timeout (connect)", stats.CheckL4TOUT, 0},
		{"http status in range", http, ok.port, true, "status 200", stats.CheckL7OK, 200},
		{"http status out of range", http, unavailable.port, false, "status 503", stats.CheckL7STS, 503},
		{"http custom range accepts 503", only503, unavailable.port, true, "status 503", stats.CheckL7OK, 503},
		{"http custom range refuses 200", only503, ok.port, false, "status 200", stats.CheckL7STS, 200},
		{"http status line without reason", http, bare.port, true, "status 204", stats.CheckL7OK, 204},
		{"http accepted but never answered", http, silent.port, false, "timeout (response)", stats.CheckL7TOUT, 0},
		{"http closed before answering", http, closes.port, false, "connection closed before a status line", stats.CheckL7RSP, 0},
		{"http answer is not http", http, notHTTP.port, false, "not an HTTP/1.x status line", stats.CheckL7RSP, 0},
		{"http connection refused", http, refused, false, "connection refused", stats.CheckL4CON, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := chkBackend(t, tc.hc, nil, tc.port)
			ck := NewChecker(b, loops, nil)
			ck.Start(nil)
			defer ck.Stop()
			testutil.Eventually(t, 15*time.Second, func() bool { return chkState(ck, "s1").Runs >= 2 }, "two probes")
			st := chkState(ck, "s1")
			if b.Servers[0].Up() != tc.up || st.Last != tc.last {
				t.Errorf("up=%v last=%q, want up=%v last=%q", b.Servers[0].Up(), st.Last, tc.up, tc.last)
			}
			if tc.up && st.Fails != 0 || !tc.up && st.Fails != st.Runs {
				t.Errorf("runs %d fails %d", st.Runs, st.Fails)
			}
			if st.Status != tc.status || st.Code != tc.code {
				t.Errorf("status %s code %d, want %s %d", st.Status, st.Code, tc.status, tc.code)
			}
			// The same result every time: its status dates from the first probe.
			if st.CheckedAt.IsZero() || st.Since.After(st.CheckedAt) || st.Since.Equal(st.CheckedAt) && st.Runs > 1 {
				t.Errorf("since %v checked at %v after %d probes", st.Since, st.CheckedAt, st.Runs)
			}
			if want := map[bool]int{true: tc.hc.Rise + tc.hc.Fall - 1, false: 0}[tc.up]; st.Health != want || st.Rise != 1 || st.Fall != 1 {
				t.Errorf("health %d rise %d fall %d, want %d 1 1", st.Health, st.Rise, st.Fall, want)
			}
		})
	}
}

func TestCheckHTTPRequestIsPrebuiltPerServer(t *testing.T) {
	loops := chkLoops(t, 1)
	for _, host := range []string{"", "www.example.com:8443"} {
		o := chkNewOrigin(t, chkAnswer("HTTP/1.1 200 OK\r\n\r\n"))
		hc := config.HealthCheck{Type: config.CheckHTTP, Method: "HEAD", Path: "/healthz?full=1", Host: host, IntervalMs: 100, TimeoutMs: 2000}
		b := chkBackend(t, hc, nil, o.port)
		ck := NewChecker(b, loops, nil)
		ck.Start(nil)
		// The origin's record of the request, not the probe's end: under
		// load the origin's goroutine may read it after the probe ended.
		var got string
		testutil.Eventually(t, 10*time.Second, func() bool {
			o.mu.Lock()
			defer o.mu.Unlock()
			got = o.req
			return got != ""
		}, "a probe's request at the origin")
		ck.Stop()
		// health_check.host, when set, is the Host as it is; else the
		// server's address and port.
		wantHost := host
		if host == "" {
			wantHost = "127.0.0.1:" + strconv.Itoa(o.port)
		}
		want := "HEAD /healthz?full=1 HTTP/1.1\r\nHost: " + wantHost +
			"\r\nConnection: close\r\nUser-Agent: spliced-check\r\n\r\n"
		if got != want {
			t.Errorf("host %q: request %q, want %q", host, got, want)
		}
	}
}

func TestParseStatusLine(t *testing.T) {
	for _, tc := range []struct {
		in     string
		status int
		ok     bool
	}{
		{"HTTP/1.1 200 OK", 200, true},
		{"HTTP/1.0 404\r\n", 404, true},
		{"HTTP/1.1 20", -1, true}, // incomplete
		{"", -1, true},
		{"HTTP/2.0 200 OK", -1, false},
		{"HTTP/1.2 200 OK", -1, false},
		{"http/1.1 200 OK", -1, false},
		{"HTTP/1.1  200 OK", -1, false},
		{"HTTP/1.1 2x0 OK", -1, false},
		{"HTTP/1.1 099 OK", -1, false},
		{"HTTP/1.1 2000 OK", -1, false},
		{"HTTP/1.1 200\n", -1, false},
		{"SSH-2.0", -1, false},
	} {
		st, ok := parseStatusLine([]byte(tc.in))
		if st != tc.status || ok != tc.ok {
			t.Errorf("parseStatusLine(%q) = %d, %v; want %d, %v", tc.in, st, ok, tc.status, tc.ok)
		}
	}
}

// changeLog records "server health changed" lines with the check counters
// at the moment of the change (the handler runs on the loop thread, inside
// the probe's Done).
type chkChangeLog struct {
	ck     atomic.Pointer[Checker]
	mu     sync.Mutex
	events []chkChangeEvent
}

type chkChangeEvent struct {
	server, to, reason string
	runs, fails        uint64
}

func (h *chkChangeLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *chkChangeLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *chkChangeLog) WithGroup(string) slog.Handler            { return h }
func (h *chkChangeLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "server health changed" {
		return nil
	}
	var ev chkChangeEvent
	r.Attrs(func(a slog.Attr) bool {
		switch a.Key {
		case "server":
			ev.server = a.Value.String()
		case "to":
			ev.to = a.Value.String()
		case "reason":
			ev.reason = a.Value.String()
		}
		return true
	})
	if ck := h.ck.Load(); ck != nil {
		st := chkState(ck, ev.server)
		ev.runs, ev.fails = st.Runs, st.Fails
	}
	h.mu.Lock()
	h.events = append(h.events, ev)
	h.mu.Unlock()
	return nil
}

// of returns the state changes of one server. The test watches s1 only: a
// probe of the other server may time out on a heavily loaded machine (-race
// on 2 shared cores) and must not fail the test about s1.
func (h *chkChangeLog) of(server string) []chkChangeEvent {
	var out []chkChangeEvent
	for _, ev := range h.list() {
		if ev.server == server {
			out = append(out, ev)
		}
	}
	return out
}

func (h *chkChangeLog) list() []chkChangeEvent {
	h.mu.Lock()
	defer h.mu.Unlock()
	return append([]chkChangeEvent(nil), h.events...)
}

// flipServer answers 200 while healthy, else 503; failNext forces that
// many 503s while healthy.
type chkFlipServer struct {
	healthy  atomic.Bool
	failNext atomic.Int64
	port     int
}

func chkNewFlipServer(t *testing.T) *chkFlipServer {
	f := &chkFlipServer{}
	f.healthy.Store(true)
	o := chkNewOrigin(t, func(c net.Conn, o *chkOrigin) {
		if !o.readHead(c) {
			return
		}
		if f.healthy.Load() && f.failNext.Add(-1) < 0 {
			f.failNext.Store(0)
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
		} else {
			io.WriteString(c, "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n")
		}
	})
	f.port = o.port
	return f
}

func TestCheckRiseFallThroughRealProbes(t *testing.T) {
	const rise, fall = 2, 3
	loops := chkLoops(t, 2)
	f := chkNewFlipServer(t)
	other := chkNewFlipServer(t)
	hc := config.HealthCheck{Type: config.CheckHTTP, IntervalMs: 30, TimeoutMs: 1000, Rise: rise, Fall: fall}
	b := chkBackend(t, hc, nil, f.port, other.port)
	logs := &chkChangeLog{}
	ck := NewChecker(b, loops, slog.New(logs))
	logs.ck.Store(ck)
	ck.Start(nil)
	defer ck.Stop()
	s1 := b.Servers[0]

	// A success first: from then on the server needs fall failures.
	testutil.Eventually(t, 5*time.Second, func() bool { st := chkState(ck, "s1"); return st.Runs-st.Fails >= 1 }, "a successful check")

	// One failed check (fall=3) does not take it down.
	before := chkState(ck, "s1")
	f.failNext.Store(1)
	testutil.Eventually(t, 5*time.Second, func() bool {
		st := chkState(ck, "s1")
		return st.Fails > before.Fails && st.Runs >= before.Runs+2
	}, "a failed then a successful check")
	if !s1.Up() || len(logs.of("s1")) != 0 {
		t.Fatalf("one failed check changed the state: up=%v events %+v", s1.Up(), logs.of("s1"))
	}

	// Failing: down after exactly fall consecutive failures.
	base := chkState(ck, "s1")
	f.healthy.Store(false)
	// The loop thread flips Up before it logs the change: wait for both,
	// else the test may read the log in between.
	testutil.Eventually(t, 5*time.Second, func() bool { return !s1.Up() && len(logs.of("s1")) >= 1 }, "s1 down and logged")
	ev := logs.of("s1")
	if len(ev) != 1 || ev[0].server != "s1" || ev[0].to != "down" || ev[0].reason != "status 503" {
		t.Fatalf("events %+v, want one s1 down with status 503", ev)
	}
	if n := ev[0].fails - base.Fails; n != fall {
		t.Errorf("went down after %d failed checks, want %d", n, fall)
	}
	picker := b.NewPicker(1)
	for range 10 {
		if s := picker.Pick(0, nil); s == s1 {
			t.Fatal("down server picked")
		}
	}

	// Healthy again: up after exactly rise successes.
	f.healthy.Store(true)
	testutil.Eventually(t, 5*time.Second, func() bool { return s1.Up() && len(logs.of("s1")) >= 2 }, "s1 up and logged")
	ev = logs.of("s1")
	if len(ev) != 2 || ev[1].to != "up" || ev[1].reason != "status 200" {
		t.Fatalf("events %+v, want s1 down then up", ev)
	}
	if ok := (ev[1].runs - ev[1].fails) - (ev[0].runs - ev[0].fails); ok != rise {
		t.Errorf("came up after %d successful checks, want %d", ok, rise)
	}
	// s2 always answers 200: had s1's 503s been counted against it, it
	// would have gone down (s1 failed at least fall times in a row). A
	// lone s2 probe timing out on a loaded machine is not the question.
	if !b.Servers[1].Up() || len(logs.of("s2")) != 0 {
		t.Errorf("the healthy server s2 was affected: %+v, events %+v", chkState(ck, "s2"), logs.of("s2"))
	}
}

func TestCheckerRestartKeepsRiseFallCounters(t *testing.T) {
	loops := chkLoops(t, 2)
	f := chkNewFlipServer(t)
	hc := config.HealthCheck{Type: config.CheckHTTP, IntervalMs: 30, TimeoutMs: 1000, Rise: 2, Fall: 3}
	b1 := chkBackend(t, hc, nil, f.port)
	ck1 := NewChecker(b1, loops, nil)
	ck1.Start(nil)
	testutil.Eventually(t, 5*time.Second, func() bool { st := chkState(ck1, "s1"); return st.Runs-st.Fails >= 1 }, "a successful check")

	// Same settings and servers: the engine keeps the running checker.
	b2 := chkBackend(t, hc, b1, f.port)
	if b2.Servers[0] != b1.Servers[0] {
		t.Fatal("server not carried over")
	}
	if !ck1.Matches(b2, len(loops)) {
		t.Fatal("identical check does not match")
	}
	hc3 := hc
	hc3.IntervalMs = 40
	b3 := chkBackend(t, hc3, b2, f.port)
	if ck1.Matches(b3, len(loops)) || ck1.Matches(b2, 1) {
		t.Fatal("a changed interval or loop count matches")
	}

	// A changed interval restarts the checks; the server that was up with
	// a full counter still needs fall failures, not one.
	ck3 := NewChecker(b3, loops, nil)
	ck3.Start(ck1)
	defer ck3.Stop()
	f.failNext.Store(1)
	testutil.Eventually(t, 5*time.Second, func() bool {
		st := chkState(ck3, "s1")
		return st.Fails >= 1 && st.Runs >= st.Fails+1 && f.failNext.Load() == 0
	}, "a failed then a successful check")
	if !b3.Servers[0].Up() {
		t.Fatal("one failed check after a restart took the server down")
	}
	// The stopped checker must stay silent: no timer armed and no socket
	// left, so nothing can start or finish one of its probes; rounds of
	// every loop later its count has not moved.
	runs := chkState(ck1, "s1").Runs
	for _, part := range ck1.parts {
		var armed, open atomic.Int32
		done := make(chan struct{})
		part.l.Exec(func(*loop.Loop) {
			for _, p := range part.probes {
				if p.timer.Armed() {
					armed.Add(1)
				}
				if p.side.FD.Fd >= 0 {
					open.Add(1)
				}
			}
			close(done)
		})
		select {
		case <-done:
		case <-time.After(5 * time.Second):
			t.Fatalf("loop %d did not run within 5s", part.l.ID())
		}
		if armed.Load() != 0 || open.Load() != 0 {
			t.Errorf("stopped checker on loop %d: %d timers armed, %d probe sockets open", part.l.ID(), armed.Load(), open.Load())
		}
	}
	for _, w := range loops {
		looptest.RoundsPass(t, w.L)
	}
	if chkState(ck1, "s1").Runs != runs {
		t.Error("stopped checker still probes")
	}
}

func TestCheckerStopLeavesNoFDs(t *testing.T) {
	loops := chkLoops(t, 2)
	ok := chkNewOrigin(t, chkAnswer("HTTP/1.1 200 OK\r\n\r\n"))
	silent := chkNewOrigin(t, func(c net.Conn, o *chkOrigin) { io.Copy(io.Discard, c) })
	hole := chkBlackholePort(t)
	refused := chkClosedPort(t)
	var ports []int
	for range 5 {
		ports = append(ports, ok.port, silent.port, hole, refused)
	}
	hc := config.HealthCheck{Type: config.CheckHTTP, IntervalMs: 50, TimeoutMs: 40, Rise: 1, Fall: 1}
	before := testutil.OpenFDs(t)
	for round := range 3 {
		b := chkBackend(t, hc, nil, ports...)
		ck := NewChecker(b, loops, nil)
		ck.Start(nil)
		testutil.Eventually(t, 5*time.Second, func() bool {
			for _, st := range ck.States() {
				if st.Runs < 2 {
					return false
				}
			}
			return true
		}, "every server probed twice")
		if !ck.Stop() {
			t.Fatalf("round %d: stop not confirmed", round)
		}
	}
	// The origins close their side of the reset connections on their own
	// goroutines: poll.
	var left []string
	testutil.Eventually(t, 5*time.Second, func() bool {
		left = testutil.FDsOpenedSince(t, before)
		return len(left) == 0
	}, func() string { return fmt.Sprintf("the fds opened by the checks to close after Stop: %v", left) })
}

// rawHTTPServer answers every connection with a fixed response using
// blocking raw syscalls only, so that it allocates nothing while a test
// counts allocations. stop shuts it down.
func chkRawHTTPServer(t testing.TB) (port int, stop func()) {
	t.Helper()
	return chkRawServer(t, []byte("HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n"))
}

// chkRawServer is chkRawHTTPServer answering resp (read once, written
// once, closed).
func chkRawServer(t testing.TB, resp []byte) (port int, stop func()) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1)
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(fd, 1024); err != nil {
		t.Fatal(err)
	}
	sa, _ := unix.Getsockname(fd)
	var buf [512]byte
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, _, e := unix.Syscall6(unix.SYS_ACCEPT4, uintptr(fd), 0, 0, unix.SOCK_CLOEXEC, 0, 0)
			if e == unix.EINTR || e == unix.ECONNABORTED {
				continue
			}
			if e != 0 {
				return
			}
			unix.Syscall(unix.SYS_READ, c, uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)))
			unix.Syscall(unix.SYS_WRITE, c, uintptr(unsafe.Pointer(&resp[0])), uintptr(len(resp)))
			unix.Syscall(unix.SYS_CLOSE, c, 0, 0)
		}
	}()
	return sa.(*unix.SockaddrInet4).Port, func() {
		unix.Shutdown(fd, unix.SHUT_RDWR) // wakes the blocked accept
		<-done
		unix.Close(fd)
	}
}

func TestCheckProbeCycleDoesNotAllocate(t *testing.T) {
	if testing.Short() {
		t.Skip("allocation count needs real probe cycles")
	}
	for _, typ := range []string{config.CheckTCP, config.CheckHTTP, "http h2"} {
		t.Run(typ, func(t *testing.T) {
			loops := chkLoops(t, 1)
			var port int
			var stop func()
			if typ == "http h2" {
				port, stop = chkRawServer(t, chkH2Answer(t))
			} else {
				port, stop = chkRawHTTPServer(t)
			}
			defer stop()
			hc := config.HealthCheck{Type: strings.Fields(typ)[0], IntervalMs: 1, TimeoutMs: 5000, Rise: 1, Fall: 1} // a loaded machine under -race
			var b *balance.Backend
			if typ == "http h2" {
				b = chkH2Backend(t, hc, port)
			} else {
				b = chkBackend(t, hc, nil, port)
			}
			ck := NewChecker(b, loops, nil)
			ck.Start(nil)
			defer ck.Stop()
			p := ck.parts[0].probes[0]
			// Warm up: fd table, timer heap and epoll set at their size.
			testutil.Eventually(t, 5*time.Second, func() bool { return p.runs.Load() >= 20 }, "warm-up probes")
			var stuck atomic.Bool
			allocs := testing.AllocsPerRun(200, func() {
				n := p.runs.Load()
				deadline := time.Now().Add(10 * time.Second)
				for p.runs.Load() == n {
					if time.Now().After(deadline) {
						stuck.Store(true)
						return
					}
					runtime.Gosched()
				}
			})
			if stuck.Load() {
				t.Fatal("probes stopped completing")
			}
			if st := chkState(ck, "s1"); st.Fails != 0 {
				t.Fatalf("failed probes: %+v", st)
			}
			if allocs != 0 {
				t.Errorf("%v allocations per probe cycle, want 0", allocs)
			}
		})
	}
}

// TestCheckSpreadsServersOverLoops: server i is probed by loop i % n.
func TestCheckSpreadsServersOverLoops(t *testing.T) {
	loops := chkLoops(t, 3)
	hc := config.HealthCheck{Type: config.CheckTCP, IntervalMs: 1000, TimeoutMs: 100}
	ports := make([]int, 7)
	for i := range ports {
		ports[i] = 1000 + i
	}
	b := chkBackend(t, hc, nil, ports...)
	ck := NewChecker(b, loops, nil)
	if len(ck.parts) != 3 {
		t.Fatalf("%d loop shares, want 3", len(ck.parts))
	}
	for k, part := range ck.parts {
		for j, p := range part.probes {
			if want := b.Servers[k+3*j]; p.c.Server != want || p.l != loops[k].L {
				t.Errorf("loop %d probe %d checks %s on loop %d, want %s", k, j, p.c.Server.Name, p.l.ID(), want.Name)
			}
		}
	}
}

// TestCheckSpreadsFirstChecksOverLoopsAndInterval: 1 000 servers on 4
// loops: 250 per loop, whose first checks are spread evenly over one
// interval, so no loop fires more than one check at a time.
func TestCheckSpreadsFirstChecksOverLoopsAndInterval(t *testing.T) {
	const n, nloops = 1000, 4
	loops := chkLoops(t, nloops)
	refused := chkClosedPort(t)
	ports := make([]int, n)
	for i := range ports {
		ports[i] = refused
	}
	hc := config.HealthCheck{Type: config.CheckTCP, IntervalMs: 60000, TimeoutMs: 1000, Rise: 1, Fall: 1}
	b := chkBackend(t, hc, nil, ports...)
	ck := NewChecker(b, loops, nil)
	ck.Start(nil)
	defer ck.Stop()
	for k, part := range ck.parts {
		if len(part.probes) != n/nloops {
			t.Fatalf("loop %d probes %d servers, want %d", k, len(part.probes), n/nloops)
		}
		// Read the timers on the loop thread. The first probes (offsets
		// 0, 240 ms, ...) may have run already on a loaded machine, their
		// timers since re-armed for their connect or their next interval
		// (once seen as "-59.78 s apart"): only probes that have not
		// started (attempt 0) still carry their first offset, and most of
		// them must be left to compare.
		got := make(chan []int64, 1)
		part.l.Exec(func(l *loop.Loop) {
			at := make([]int64, len(part.probes))
			for j, p := range part.probes {
				if at[j] = -1; p.attempt == 0 {
					at[j] = p.timer.When()
				}
			}
			got <- at
		})
		at := <-got
		step := int64(time.Minute) / int64(n/nloops)
		pairs := 0
		for j := 1; j < len(at); j++ {
			if at[j-1] < 0 || at[j] < 0 {
				continue
			}
			pairs++
			if d := at[j] - at[j-1]; d != step {
				t.Fatalf("loop %d: checks %d and %d are %v apart, want %v", k, j, j+1, time.Duration(d), time.Duration(step))
			}
		}
		if pairs < n/nloops/2 {
			t.Fatalf("loop %d: only %d pairs of checks not started yet to compare", k, pairs)
		}
	}
}

// BenchmarkCheckProbes runs the checks of 1 000 servers (1 s interval) on 2
// loops against an in-process raw-syscall origin and reports the process
// CPU time per probe (loops, origin and the Go runtime together: an upper
// bound), the loop threads' CPU time per probe (schedstat: the probe's own
// cost, wakeups included) and the failed probes (0 unless the machine is overloaded).
// Run with -benchtime 3000x: b.N probes take b.N ms.
func BenchmarkCheckProbes(b *testing.B) {
	for _, typ := range []string{config.CheckTCP, config.CheckHTTP} {
		b.Run(typ, func(b *testing.B) {
			loops := chkLoops(b, 2)
			port, stop := chkRawHTTPServer(b)
			defer stop()
			ports := make([]int, 1000)
			for i := range ports {
				ports[i] = port
			}
			// 1 000 probes per second, timeouts generous for a shared machine.
			hc := config.HealthCheck{Type: typ, IntervalMs: 1000, TimeoutMs: 1000, Rise: 1, Fall: 1}
			bk := chkBackend(b, hc, nil, ports...)
			ck := NewChecker(bk, loops, nil)
			total := func() uint64 {
				var n uint64
				for _, part := range ck.parts {
					for _, p := range part.probes {
						n += p.runs.Load()
					}
				}
				return n
			}
			ck.Start(nil)
			defer ck.Stop()
			testutil.Eventually(b, 10*time.Second, func() bool { return total() >= 1000 }, "warm-up")
			tids := make([]int, len(loops))
			for i, w := range loops {
				got := make(chan int, 1)
				w.L.Exec(func(*loop.Loop) { got <- unix.Gettid() })
				tids[i] = <-got
			}
			loopCPU := func() (ns int64) {
				for _, tid := range tids {
					// schedstat: time on CPU in ns, then wait time, then slices.
					data, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/schedstat")
					if err != nil {
						b.Fatal(err)
					}
					f := strings.Fields(string(data))
					v, _ := strconv.ParseInt(f[0], 10, 64)
					ns += v
				}
				return ns
			}
			var ru0, ru1 unix.Rusage
			unix.Getrusage(unix.RUSAGE_SELF, &ru0)
			lc0 := loopCPU()
			start := total()
			b.ReportAllocs()
			b.ResetTimer()
			for total()-start < uint64(b.N) {
				time.Sleep(time.Millisecond)
			}
			b.StopTimer()
			unix.Getrusage(unix.RUSAGE_SELF, &ru1)
			lc := loopCPU() - lc0
			cpu := time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()) * time.Nanosecond
			done := total() - start
			b.ReportMetric(float64(cpu.Microseconds())/float64(done), "proc-cpu-us/probe")
			b.ReportMetric(float64(lc)/1e3/float64(done), "loop-cpu-us/probe")
			var fails uint64
			for _, st := range ck.States() {
				fails += st.Fails
			}
			b.ReportMetric(float64(fails), "failed")
		})
	}
}

// TestCheckProbesCloseWithReset: a probe closes its connection with an
// RST, never a FIN, whatever the outcome (tcp connected, http answered,
// http answered with a failing status): at one connection per server per
// interval, a FIN would leave a TIME_WAIT socket on the proxy's side for
// every check (package doc, "Health checks"). The origin reads each
// connection to its end and sees ECONNRESET, and no TIME_WAIT socket to
// the origin's port is left.
func TestCheckProbesCloseWithReset(t *testing.T) {
	loops := chkLoops(t, 1)
	for _, tc := range []struct {
		name string
		typ  string
		resp string
	}{
		{"tcp", config.CheckTCP, ""},
		// Exactly what a probe reads (statusLineLen): a close with
		// unread bytes would reset the connection anyway.
		{"http/up", config.CheckHTTP, "HTTP/1.1 200 "},
		{"http/down", config.CheckHTTP, "HTTP/1.1 503 "},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var resets, fins atomic.Int64
			// On an address of its own: a TIME_WAIT socket to the origin's
			// port can then only be a probe's. Another socket of the
			// machine that had that port number as its remote port (any
			// test, any process: ports are reused) made this test fail
			// about 1 run in 15 under load.
			o := chkNewOriginOn(t, uniqueLoopback(t), func(c net.Conn, o *chkOrigin) {
				if tc.typ == config.CheckHTTP {
					if !o.readHead(c) {
						return
					}
					io.WriteString(c, tc.resp)
				}
				c.SetReadDeadline(time.Now().Add(5 * time.Second))
				_, err := io.Copy(io.Discard, c)
				switch {
				case errors.Is(err, unix.ECONNRESET):
					resets.Add(1)
				case err == nil:
					fins.Add(1)
				}
			})
			hc := config.HealthCheck{Type: tc.typ, IntervalMs: 20, TimeoutMs: 1000, Rise: 1, Fall: 1}
			ck := NewChecker(chkBackendAt(t, hc, o.host, o.port), loops, nil)
			ck.Start(nil)
			testutil.Eventually(t, 5*time.Second, func() bool { return resets.Load()+fins.Load() >= 5 }, "five probes ended")
			if !ck.Stop() {
				t.Fatal("stop not confirmed")
			}
			if n := fins.Load(); n != 0 {
				t.Errorf("%d probes ended with a FIN (%d with an RST), want RSTs only", n, resets.Load())
			}
			if n := timeWaitTo(t, o.host, o.port); n != 0 {
				t.Errorf("%d TIME_WAIT sockets to the checked server, want none", n)
			}
		})
	}
}

// timeWaitTo counts the sockets in TIME_WAIT whose remote address is
// host:port, host an IPv4 address (/proc/net/tcp: state 06, addresses in
// the kernel's byte order).
func timeWaitTo(t *testing.T, host string, port int) int {
	t.Helper()
	ip := net.ParseIP(host).To4()
	want := fmt.Sprintf("%02X%02X%02X%02X:%04X", ip[3], ip[2], ip[1], ip[0], port)
	n := 0
	for _, f := range []string{"/proc/net/tcp"} {
		b, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n")[1:] {
			fs := strings.Fields(l)
			if len(fs) > 3 && fs[3] == "06" && fs[2] == want {
				n++
			}
		}
	}
	return n
}
