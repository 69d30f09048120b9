package proxy

import (
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// env is one loop with its worker, running in the background for a test.
type env struct {
	t testing.TB
	l *loop.Loop
	w *Worker
}

func newEnv(t testing.TB, tu Tuning) *env {
	t.Helper()
	return startEnv(t, 0, tu)
}

// startEnv is an env on loop number id whose worker runs with tu. Its
// connections are closed at cleanup, before the loop stops.
func startEnv(t testing.TB, id int, tu Tuning) *env {
	t.Helper()
	e := &env{t: t}
	e.l = looptest.Run(t, id, 1, func(l *loop.Loop) { e.w = NewWorker(l, tu) })[0]
	t.Cleanup(func() { e.do(func() { e.w.CloseAll() }) })
	return e
}

func defaultTuning() Tuning { return Tuning{Bufsize: 16 << 10, Maxpipes: 64} }

// do runs fn on the loop thread and waits for it.
func (e *env) do(fn func()) {
	e.t.Helper()
	ch := make(chan struct{})
	if !e.l.Exec(func(*loop.Loop) { fn(); close(ch) }) {
		e.t.Fatal("loop stopped")
	}
	select {
	case <-ch:
	case <-time.After(10 * time.Second):
		e.t.Fatal("loop did not run Exec within 10s")
	}
}

// state reads the worker's pool and connection counts on its thread.
type state struct{ live, bufs, pipes, idlePipes int }

func (e *env) state() state {
	var s state
	e.do(func() {
		s = state{e.w.Live(), e.w.Bufs.InUse(), e.w.Pipes.InUse(), e.w.Pipes.Idle()}
	})
	return s
}

// waitIdle polls until the worker owns no connection and holds no buffer
// or pipe.
func (e *env) waitIdle() {
	e.t.Helper()
	testutil.Eventually(e.t, 10*time.Second, func() bool {
		s := e.state()
		return s.live == 0 && s.bufs == 0 && s.pipes == 0
	}, "tunnels closed and pools refilled")
}

// frontend builds a tcp frontend whose backend has one server per address.
func frontend(t testing.TB, mode SpliceMode, addrs ...*net.TCPAddr) *Frontend {
	t.Helper()
	cfg := config.Backend{Name: "be"}
	for i, a := range addrs {
		cfg.Servers = append(cfg.Servers, &config.Server{Name: "s" + strconv.Itoa(i), Address: a.IP.String(), Port: a.Port})
	}
	cfg.Normalize()
	b, err := balance.Build(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return &Frontend{
		Name: "fe", Splice: mode, TunnelTimeout: time.Hour,
		Backend: NewBackend(b, 1, new(Counters)), Stats: new(Counters),
	}
}

// dial connects a client to the proxy: the test keeps the client end as a
// net.Conn and hands the accepted end, as a raw non-blocking fd, to the
// worker (what core/listen does for real).
func (e *env) dial(fe *Frontend) *net.TCPConn {
	e.t.Helper()
	return e.connect(func(fd int) { e.w.StartTCP(fd, fe) })
}

// connect makes a client connection and runs start on the loop thread with
// its accepted end as a raw non-blocking fd: dial and dialHTTP share it.
func (e *env) connect(start func(fd int)) *net.TCPConn {
	e.t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		e.t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		e.t.Fatal(err)
	}
	e.t.Cleanup(func() { c.Close() })
	sc, err := ln.Accept()
	if err != nil {
		e.t.Fatal(err)
	}
	fd := rawFD(e.t, sc.(*net.TCPConn))
	sc.Close()
	if err := unix.SetNonblock(fd, true); err != nil {
		e.t.Fatal(err)
	}
	e.do(func() { start(fd) })
	return c.(*net.TCPConn)
}

// rawFD duplicates the socket of c; the caller owns the new fd.
func rawFD(t testing.TB, c *net.TCPConn) int {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var nfd int
	var derr error
	if err := rc.Control(func(fd uintptr) { nfd, derr = unix.FcntlInt(fd, unix.F_DUPFD_CLOEXEC, 0) }); err != nil {
		t.Fatal(err)
	}
	if derr != nil {
		t.Fatal(derr)
	}
	return nfd
}
