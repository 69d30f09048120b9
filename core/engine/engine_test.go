package engine

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"log/slog"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// greeter is an origin that writes its name on every connection, then
// echoes what it reads.
func greeter(t *testing.T, name string) int {
	t.Helper()
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.Write([]byte(name))
		io.Copy(c, c)
	}).Port()
}

func newTestEngine(t *testing.T) *Engine {
	t.Helper()
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return e
}

func tcpConfig(gen int64, serverPort int, binds ...int) *config.Config {
	c := &config.Config{
		Generation: gen,
		Tuning:     config.Tuning{Nbthread: 2},
		Backends: []config.Backend{{Name: "be", Servers: []*config.Server{
			{Name: "s1", Address: "127.0.0.1", Port: serverPort},
		}}},
		Frontends: []config.Frontend{{Name: "fe", DefaultBackend: "be"}},
	}
	for i, p := range binds {
		c.Frontends[0].Binds = append(c.Frontends[0].Binds, config.Bind{Name: "b" + strconv.Itoa(i+1), Address: "127.0.0.1", Port: p})
	}
	c.Normalize()
	return c
}

func apply(t *testing.T, e *Engine, c *config.Config) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := e.Apply(ctx, c); err != nil {
		t.Fatalf("apply generation %d: %v", c.Generation, err)
	}
}

// hello connects to port and returns the connection after reading the
// origin's greeting of len(want) bytes.
func hello(t *testing.T, port int, want string) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		t.Fatalf("dial %d: %v", port, err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, len(want))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != want {
		t.Fatalf("greeting via %d: %q, %v (want %q)", port, b, err, want)
	}
	c.SetReadDeadline(time.Time{})
	return c
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, len(msg))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != msg {
		t.Fatalf("echo %q: got %q, %v", msg, b, err)
	}
}

func TestEngineRunsSnapshotAndReportsRuntime(t *testing.T) {
	e := newTestEngine(t)
	p := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, greeter(t, "A"), p))
	c := hello(t, p, "A")
	echo(t, c, "ping")
	rt := e.Runtime()
	if rt.Nbthread != 2 || rt.Generation != 1 || rt.Maxconn <= 0 {
		t.Fatalf("runtime %+v", rt)
	}
}

// TestEngineBindConflictChangesNothing: a bind on a taken port fails with an
// ApplyError naming it, and the running binds and generation are untouched.
func TestEngineBindConflictChangesNothing(t *testing.T) {
	e := newTestEngine(t)
	p1 := testutil.FreePort(t)
	origin := greeter(t, "A")
	apply(t, e, tcpConfig(1, origin, p1))
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	p3 := testutil.FreePort(t)
	bad := tcpConfig(2, origin, p1, p3, taken.Addr().(*net.TCPAddr).Port)
	err = e.Apply(context.Background(), bad)
	var ae *config.ApplyError
	if !errors.As(err, &ae) {
		t.Fatalf("apply with a taken port: %v, want *config.ApplyError", err)
	}
	// The refusal names the address and points at the bind's port, the
	// field to change (issue 23: "address already in use" named neither).
	addr := "127.0.0.1:" + strconv.Itoa(taken.Addr().(*net.TCPAddr).Port)
	if ae.Field != "/frontends/0/binds/2/port" || ae.Object != "frontend fe bind b3" || ae.Err.Error() != addr+": address already in use" {
		t.Fatalf("ApplyError field %q object %q err %q", ae.Field, ae.Object, ae.Err)
	}
	if !errors.Is(err, config.ErrConflict) || !errors.Is(err, unix.EADDRINUSE) {
		t.Fatalf("error %v does not unwrap to ErrConflict and EADDRINUSE", err)
	}
	if g := e.Runtime().Generation; g != 1 {
		t.Fatalf("generation %d after a failed apply", g)
	}
	// b2, opened by the failed apply, was closed again.
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p3), time.Second); err == nil {
		c.Close()
		t.Fatal("bind opened by a failed apply is still listening")
	}
	hello(t, p1, "A")
}

// TestEngineBindAddRemoveKeepsConnections: adding a bind accepts at once;
// removing one closes its port while a connection made through it goes on.
func TestEngineBindAddRemoveKeepsConnections(t *testing.T) {
	e := newTestEngine(t)
	p1, p2 := testutil.FreePort(t), testutil.FreePort(t)
	origin := greeter(t, "A")
	apply(t, e, tcpConfig(1, origin, p1))
	apply(t, e, tcpConfig(2, origin, p1, p2))
	c2 := hello(t, p2, "A")
	apply(t, e, tcpConfig(3, origin, p1))
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p2), time.Second); err == nil {
		c.Close()
		t.Fatal("removed bind still accepts")
	}
	echo(t, c2, "still here")
	hello(t, p1, "A")
}

// TestEngineServerChangeKeepsLiveConnections: a server replaced by another
// gets no new connection, its live connection finishes normally.
func TestEngineServerChangeKeepsLiveConnections(t *testing.T) {
	e := newTestEngine(t)
	p := testutil.FreePort(t)
	a, b := greeter(t, "A"), greeter(t, "B")
	apply(t, e, tcpConfig(1, a, p))
	ca := hello(t, p, "A")
	apply(t, e, tcpConfig(2, b, p))
	hello(t, p, "B")
	echo(t, ca, "old server still serves")
}

// TestEngineFrontendMaxconnPausesAccept: at maxconn the listener pauses
// (the next client waits in the backlog) and resumes when one closes.
func TestEngineFrontendMaxconnPausesAccept(t *testing.T) {
	e := newTestEngine(t)
	p := testutil.FreePort(t)
	cfg := tcpConfig(1, greeter(t, "A"), p)
	cfg.Frontends[0].Maxconn = 1
	apply(t, e, cfg)
	c1 := hello(t, p, "A")
	c2, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(p))
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	c2.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if _, err := c2.Read(make([]byte, 1)); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("second connection served past maxconn: %v", err)
	}
	c1.Close()
	c2.SetReadDeadline(time.Now().Add(5 * time.Second))
	b := make([]byte, 1)
	if _, err := io.ReadFull(c2, b); err != nil || string(b) != "A" {
		t.Fatalf("waiting connection after a slot freed: %q, %v", b, err)
	}
}

// TestEngineCloseLetsConnectionsFinish: Close stops accepting at once and
// returns when the last connection ended, within the grace period.
func TestEngineCloseLetsConnectionsFinish(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	p := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, greeter(t, "A"), p))
	c := hello(t, p, "A")
	done := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		done <- e.Close(ctx)
	}()
	testutil.Eventually(t, 5*time.Second, func() bool {
		cc, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), time.Second)
		if err != nil {
			return true
		}
		cc.Close()
		return false
	}, "the listener to stop accepting after Close")
	echo(t, c, "finishing")
	select {
	case <-done:
		t.Fatal("Close returned while a connection was live")
	case <-time.After(100 * time.Millisecond):
	}
	c.Close()
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("Close did not return after the last connection ended")
	}
}

// TestEngineFailedApplyRestoresBindsWithoutRace: a failed Apply that had
// closed a bind for a rebind reopens it while the loop threads keep
// pausing and resuming the binds (a frontend at its maxconn): the restored
// listener is published under the lock the loops read it with (run with
// -race).
func TestEngineFailedApplyRestoresBindsWithoutRace(t *testing.T) {
	e := newTestEngine(t)
	p1, p2 := testutil.FreePort(t), testutil.FreePort(t)
	origin := greeter(t, "A")
	good := tcpConfig(1, origin, p1, p2)
	good.Frontends[0].Maxconn = 1
	apply(t, e, good)
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()

	// Churn on p2: every connection reaches the frontend's maxconn and
	// every close resumes, so the loops run syncPause over every bind.
	stop := make(chan struct{})
	churned := make(chan int)
	first := make(chan struct{}) // the churn runs before the applies start
	go func() {
		n := 0
		defer func() { churned <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p2), time.Second)
			if err != nil {
				continue
			}
			c.SetReadDeadline(time.Now().Add(time.Second))
			if _, err := io.ReadFull(c, make([]byte, 1)); err == nil {
				if n++; n == 1 {
					close(first)
				}
			}
			c.Close()
		}
	}()
	select {
	case <-first:
	case <-time.After(5 * time.Second):
		t.Fatal("no connection served through the frontend at its maxconn")
	}
	for i := range 30 {
		// b1 changes (rebind: closed, to be reopened on failure), b3 is on
		// a taken port: the apply fails after b1 was closed.
		bad := tcpConfig(int64(2+i), origin, p1, p2, taken.Addr().(*net.TCPAddr).Port)
		bad.Frontends[0].Maxconn = 1
		bad.Frontends[0].Binds[0].Backlog = 100 + i
		if err := e.Apply(context.Background(), bad); err == nil {
			t.Fatal("apply with a taken port succeeded")
		}
	}
	close(stop)
	if n := <-churned; n == 0 {
		t.Fatal("no connection was served during the failed applies")
	}
	hello(t, p1, "A").Close()
}

// TestEngineMaxconnHoldsUnderBurst: with maxconn 2 (a frontend's, or the
// process's) and 2 loops, a burst of 50 parallel connects is served 2 at a
// time: the origin never sees more than 2 connections whose client has not
// closed yet, and every waiting client is served as slots free.
func TestEngineMaxconnHoldsUnderBurst(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(c *config.Config)
		global bool
	}{
		{"frontend", func(c *config.Config) { c.Frontends[0].Maxconn = 2 }, false},
		{"global", func(c *config.Config) { c.Tuning.Maxconn = 2 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newTestEngine(t)
			p := testutil.FreePort(t)
			var opened, closed, worst atomic.Int64
			origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				// closed counts clients before they close, so a correct
				// proxy (close, release, accept the next) never makes the
				// difference exceed maxconn.
				if d := opened.Add(1) - closed.Load(); d > worst.Load() {
					worst.Store(d)
				}
				defer c.Close()
				c.Write([]byte("A"))
				io.Copy(io.Discard, c)
			}).Port()
			cfg := tcpConfig(1, origin, p)
			tc.set(cfg)
			apply(t, e, cfg)
			const n = 50
			var wg sync.WaitGroup
			errs := make(chan error, n)
			for range n {
				wg.Add(1)
				go func() {
					defer wg.Done()
					c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(p), 5*time.Second)
					if err != nil {
						errs <- err
						return
					}
					c.SetReadDeadline(time.Now().Add(20 * time.Second))
					b := make([]byte, 1)
					_, err = io.ReadFull(c, b)
					closed.Add(1)
					c.Close()
					if err != nil {
						errs <- err
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Fatal("client:", err)
			}
			if w := worst.Load(); w > 2 {
				t.Fatalf("%d tunnels at once with maxconn 2", w)
			}
			if rt := e.Runtime(); tc.global && rt.Maxconn != 2 {
				t.Fatalf("runtime maxconn %d", rt.Maxconn)
			}
		})
	}
}

// A bindID is a comparable map key whose parts cannot run into each other
// (a string key joined with a separator could), and it logs as the
// frontend and bind attributes every bind line carries.
func TestBindIDIsAValueKeyThatLogsItsParts(t *testing.T) {
	m := map[bindID]int{{"a", "bc"}: 1, {"ab", "c"}: 2}
	if len(m) != 2 || m[bindID{"a", "bc"}] != 1 || m[bindID{Frontend: "ab", Bind: "c"}] != 2 {
		t.Fatalf("map %v", m)
	}
	var buf bytes.Buffer
	slog.New(slog.NewJSONHandler(&buf, nil)).Info("bind opened", bindID{"pub", "b1"}.attr(), "address", "127.0.0.1:80")
	var line map[string]any
	if err := json.Unmarshal(buf.Bytes(), &line); err != nil {
		t.Fatal(err)
	}
	if line["frontend"] != "pub" || line["bind"] != "b1" || line["address"] != "127.0.0.1:80" {
		t.Fatalf("log line %s", buf.Bytes())
	}
}

// TestEngineBindCountsItsConnectionsPerLoop: each bind counts its live
// connections per loop (listen.LoopConns, what the accept distribution
// compares): a connection counts from its hand-off to its end, on the
// bind that accepted it, across an Apply that builds new frontends.
func TestEngineBindCountsItsConnectionsPerLoop(t *testing.T) {
	e := newTestEngine(t)
	p1, p2 := testutil.FreePort(t), testutil.FreePort(t)
	a, b := greeter(t, "A"), greeter(t, "B")
	apply(t, e, tcpConfig(1, a, p1, p2))
	total := func(name string) int64 {
		n := int64(0)
		c := e.binds[bindID{"fe", name}].spec.Conns
		for id := range 2 {
			n += c.Load(id)
		}
		return n
	}
	var conns []net.Conn
	for range 4 {
		conns = append(conns, hello(t, p1, "A"))
	}
	conns = append(conns, hello(t, p2, "A"), hello(t, p2, "A"))
	if n1, n2 := total("b1"), total("b2"); n1 != 4 || n2 != 2 {
		t.Fatalf("live connections counted %d on b1, %d on b2; want 4, 2", n1, n2)
	}
	apply(t, e, tcpConfig(2, b, p1, p2)) // new frontends, same binds
	c := hello(t, p1, "B")
	if n := total("b1"); n != 5 {
		t.Fatalf("b1 counts %d, want 5", n)
	}
	c.Close()
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return total("b1") == 0 && total("b2") == 0 },
		"every connection's end counted on its bind")
}
