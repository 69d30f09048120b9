package engine

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/pin"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// trafficLoop opens short connections through port (greeting + one echo)
// until stop is closed, at most max of them; it counts successes and
// records every failure.
type trafficLoop struct {
	ok   atomic.Int64
	mu   sync.Mutex
	errs []string
	done chan struct{}
}

func startTraffic(port int, greeting string, stop <-chan struct{}, maxConns int) *trafficLoop {
	tl := &trafficLoop{done: make(chan struct{})}
	go func() {
		defer close(tl.done)
		buf := make([]byte, 64)
		for i := 0; i < maxConns; i++ {
			select {
			case <-stop:
				return
			default:
			}
			err := func() error {
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
				if err != nil {
					return err
				}
				defer c.Close()
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := io.ReadFull(c, buf[:len(greeting)]); err != nil {
					return err
				}
				if string(buf[:len(greeting)]) != greeting {
					return errors.New("bad greeting " + string(buf[:len(greeting)]))
				}
				msg := "ping" + strconv.Itoa(i%10)
				if _, err := c.Write([]byte(msg)); err != nil {
					return err
				}
				if _, err := io.ReadFull(c, buf[:len(msg)]); err != nil {
					return err
				}
				if string(buf[:len(msg)]) != msg {
					return errors.New("bad echo")
				}
				return nil
			}()
			if err != nil {
				tl.mu.Lock()
				tl.errs = append(tl.errs, err.Error())
				tl.mu.Unlock()
				continue
			}
			tl.ok.Add(1)
		}
	}()
	return tl
}

// acceptedOn is what loop id (active or draining) accepted so far.
func (e *Engine) acceptedOn(id int) uint64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id < len(e.th.all) {
		return e.th.all[id].l.Activity().Accepted.Load()
	}
	return 0
}

func TestNbthreadChangesAtRuntimeUnderTrafficWithoutFailures(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		e.Close(ctx)
	})
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	gen := int64(1)
	cfg := func(n int) *config.Config {
		c := tcpConfig(gen, origin, port)
		c.Tuning.Nbthread = n
		c.Tuning.Distribution = config.DistRoundRobin
		gen++
		return c
	}
	apply(t, e, cfg(2))

	stop := make(chan struct{})
	tl := startTraffic(port, "hi", stop, 200000)
	defer func() { close(stop); <-tl.done }()
	progress := func(min int64) {
		t.Helper()
		start := tl.ok.Load()
		testutil.Eventually(t, 5*time.Second, func() bool { return tl.ok.Load() >= start+min }, "traffic")
	}
	progress(20)

	// A long connection opened now must live through every change.
	long := hello(t, port, "hi")

	// 2 -> 4: the new loops start receiving connections.
	apply(t, e, cfg(4))
	if n := e.Runtime().Nbthread; n != 4 {
		t.Fatalf("nbthread %d after growing to 4", n)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return e.acceptedOn(2) > 0 && e.acceptedOn(3) > 0 }, func() string {
		tl.mu.Lock()
		defer tl.mu.Unlock()
		return fmt.Sprintf("loops 2 and 3 to accept: accepted %d %d %d %d, traffic ok %d, errors %q",
			e.acceptedOn(0), e.acceptedOn(1), e.acceptedOn(2), e.acceptedOn(3), tl.ok.Load(), tl.errs)
	})
	progress(20)
	echo(t, long, "after-4")

	// 4 -> 1: loops 1..3 get nothing new, drain, stop.
	apply(t, e, cfg(1))
	if n := e.Runtime().Nbthread; n != 1 {
		t.Fatalf("nbthread %d after shrinking to 1", n)
	}
	before := []uint64{e.acceptedOn(1), e.acceptedOn(2), e.acceptedOn(3)}
	progress(50)
	for i, b := range before {
		if a := e.acceptedOn(i + 1); a > b { // 0 once the loop stopped
			t.Errorf("removed loop %d accepted %d connections after the shrink", i+1, a-b)
		}
	}
	echo(t, long, "after-1")
	ts := e.Threads()
	if ts[0].State != "active" {
		t.Fatalf("thread 0 state %q", ts[0].State)
	}

	// 1 -> 2: a draining loop is taken back or a new one started.
	apply(t, e, cfg(2))
	accepted := e.acceptedOn(1) // of the loop that is thread 1 from now on
	testutil.Eventually(t, 5*time.Second, func() bool { return e.acceptedOn(1) > accepted }, "loop 1 accepts again")
	progress(20)
	echo(t, long, "after-2")
	long.Close()
	testutil.Eventually(t, 10*time.Second, func() bool { return len(e.Threads()) == 2 }, "draining loops stop")

	close(stop)
	<-tl.done
	stop = make(chan struct{}) // for the deferred close
	tl.mu.Lock()
	defer tl.mu.Unlock()
	if len(tl.errs) > 0 {
		t.Fatalf("%d of %d connections failed, first: %s", len(tl.errs), int(tl.ok.Load())+len(tl.errs), tl.errs[0])
	}
	t.Logf("%d connections, none failed", tl.ok.Load())
}

func TestDrainingLoopClosesConnectionsAfterGrace(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	c := tcpConfig(1, origin, port)
	c.Tuning.Nbthread = 2
	c.Tuning.Distribution = config.DistRoundRobin
	apply(t, e, c)
	// Two connections: round robin puts one on each loop.
	a, b := hello(t, port, "hi"), hello(t, port, "hi")
	c2 := tcpConfig(2, origin, port)
	c2.Tuning.Nbthread = 1
	c2.Tuning.GraceMs = 200
	apply(t, e, c2)
	testutil.Eventually(t, 5*time.Second, func() bool { return len(e.Threads()) == 1 }, "loop 1 stops after the grace")
	// One of the two was on loop 1 and is closed now; the other lives.
	alive := 0
	for _, conn := range []net.Conn{a, b} {
		conn.SetReadDeadline(time.Now().Add(2 * time.Second))
		if _, err := conn.Write([]byte("x")); err == nil {
			buf := make([]byte, 1)
			if _, err := io.ReadFull(conn, buf); err == nil {
				alive++
			}
		}
	}
	if alive != 1 {
		t.Fatalf("%d connections alive after the drain grace, want 1", alive)
	}
}

// cpusAllowed reads Cpus_allowed_list of a thread of this process.
func cpusAllowed(t *testing.T, tid int) string {
	t.Helper()
	b, err := os.ReadFile("/proc/self/task/" + strconv.Itoa(tid) + "/status")
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Cpus_allowed_list:"); ok {
			return strings.TrimSpace(v)
		}
	}
	t.Fatal("no Cpus_allowed_list")
	return ""
}

func TestCPUMapPinsEachLoopThreadAtRuntime(t *testing.T) {
	mask, err := pin.Host().AffinityMask()
	if err != nil || len(mask) < 2 {
		t.Skipf("needs 2 CPUs in the affinity mask (have %v, %v)", mask, err)
	}
	e := newTestEngine(t)
	gen := int64(1)
	withMap := func(m config.CPUMap) *config.Config {
		c := &config.Config{Generation: gen, Tuning: config.Tuning{Nbthread: 2}, CPUMap: m}
		c.Normalize()
		gen++
		return c
	}
	check := func(want ...string) {
		t.Helper()
		ts := e.Threads()
		if len(ts) != len(want) {
			t.Fatalf("%d threads, want %d", len(ts), len(want))
		}
		for i, th := range ts {
			if got := pin.FormatCPUList(th.Granted); got != want[i] {
				t.Errorf("thread %d granted %q, want %q", i, got, want[i])
			}
			if got := cpusAllowed(t, th.TID); got != want[i] {
				t.Errorf("thread %d (tid %d) Cpus_allowed_list %q, want %q", i, th.TID, got, want[i])
			}
		}
	}
	apply(t, e, withMap(config.CPUMap{Mode: config.CPUMapManual, Threads: []config.ThreadCPUs{{Thread: 0, CPUs: []int{mask[1]}}, {Thread: 1, CPUs: []int{mask[0]}}}}))
	check(strconv.Itoa(mask[1]), strconv.Itoa(mask[0]))
	apply(t, e, withMap(config.CPUMap{Mode: config.CPUMapAuto}))
	check(strconv.Itoa(mask[0]), strconv.Itoa(mask[1]))
	apply(t, e, withMap(config.CPUMap{Mode: config.CPUMapNone}))
	all := pin.FormatCPUList(mask)
	check(all, all)
}

// writeTreeFile writes root/rel, creating its directories: a file of a
// fake /proc or /sys tree.
func writeTreeFile(t *testing.T, root, rel, content string) {
	t.Helper()
	p := filepath.Join(root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

// fakeIRQTree is a fake /proc and /sys with IRQs 30 and 31 and CPUs 0-1.
func fakeIRQTree(t *testing.T) pin.FS {
	t.Helper()
	root := t.TempDir()
	w := func(rel, content string) { writeTreeFile(t, root, rel, content) }
	w("proc/interrupts", "           CPU0       CPU1\n 30:  5  7  PCI-MSI 1-edge  eth0-rx-0\n 31:  1  2  PCI-MSI 2-edge  eth0-tx-0\n")
	w("proc/irq/30/smp_affinity_list", "0-1\n")
	w("proc/irq/31/smp_affinity_list", "0-1\n")
	w("sys/devices/system/cpu/online", "0-1\n")
	return pin.FS{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Mask: []int{0, 1}}
}

func TestIRQPinIsAppliedAndARefusedOneChangesNothing(t *testing.T) {
	fs := fakeIRQTree(t)
	e, err := New(Options{PinFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	c := &config.Config{Generation: 1, Tuning: config.Tuning{Nbthread: 1}, IRQ: config.IRQ{Pins: []config.IRQPin{{IRQ: 30, CPUs: []int{1}}}}}
	c.Normalize()
	apply(t, e, c)
	if got, _ := fs.IRQAffinity(30); pin.FormatCPUList(got) != "1" {
		t.Fatalf("irq 30 affinity %v, want 1", got)
	}
	// IRQ 31's file cannot be written (a directory stands for a refused
	// write even for root): 409-class error, irq 30 back where it was.
	p31 := filepath.Join(fs.Proc, "irq/31/smp_affinity_list")
	os.Remove(p31)
	os.Mkdir(p31, 0o755)
	c2 := c.Clone()
	c2.Generation = 2
	c2.IRQ.Pins = []config.IRQPin{{IRQ: 30, CPUs: []int{0}}, {IRQ: 31, CPUs: []int{1}}}
	err = e.Apply(context.Background(), c2)
	var ae *config.ApplyError
	if !errors.As(err, &ae) || !errors.Is(err, config.ErrConflict) {
		t.Fatalf("apply with an unwritable IRQ: %v, want an ApplyError (conflict)", err)
	}
	if ae.Field != "/irq/pins/1/cpus" {
		t.Errorf("field %q, want /irq/pins/1/cpus", ae.Field)
	}
	var pe *pin.PinError
	if !errors.As(err, &pe) {
		t.Errorf("no *pin.PinError in %v", err)
	}
	if got, _ := fs.IRQAffinity(30); pin.FormatCPUList(got) != "1" {
		t.Fatalf("irq 30 affinity %v after the failed apply, want 1 (rolled back)", got)
	}
	if g := e.Runtime().Generation; g != 1 {
		t.Fatalf("running generation %d, want 1", g)
	}
}

func TestPinThatCannotBeAppliedAtStartIsAWarningNotAnError(t *testing.T) {
	fs := fakeIRQTree(t)
	p31 := filepath.Join(fs.Proc, "irq/31/smp_affinity_list")
	os.Remove(p31)
	os.Mkdir(p31, 0o755)
	e, err := New(Options{PinFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	c := &config.Config{Generation: 1, Tuning: config.Tuning{Nbthread: 1},
		IRQ: config.IRQ{Pins: []config.IRQPin{{IRQ: 30, CPUs: []int{1}}, {IRQ: 31, CPUs: []int{1}}}}}
	c.Normalize()
	apply(t, e, c)
	if got, _ := fs.IRQAffinity(30); pin.FormatCPUList(got) != "1" {
		t.Fatalf("irq 30 affinity %v, want 1 (the other pin still applies)", got)
	}
	w := e.PinWarnings()
	if len(w) != 1 || !strings.Contains(w[0], "irq 31") {
		t.Fatalf("warnings %q, want one about irq 31", w)
	}
	// An unrelated change does not trip over the pin that cannot apply:
	// the IRQ placement is the one written at start, so it is not
	// written again (it was api/pin_test.go's check with a real engine).
	c2 := c.Clone()
	c2.Generation = 2
	c2.Tuning.Maxaccept = 32
	apply(t, e, c2)
}

// cpu_map auto cannot place the loops without the process affinity mask; at
// start that is a warning like any other pin that cannot be applied, not an
// error and not silence.
func TestUnreadableAffinityMaskAtStartIsAWarning(t *testing.T) {
	fs := fakeIRQTree(t)
	fs.Mask = []int{pin.MaxCPU + 1} // above any CPU id: AffinityMask fails
	if _, err := fs.AffinityMask(); err == nil {
		t.Fatal("AffinityMask of a mask above MaxCPU succeeded; the test needs it to fail")
	}
	e, err := New(Options{PinFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	c := &config.Config{Generation: 1, Tuning: config.Tuning{Nbthread: 1}, CPUMap: config.CPUMap{Mode: config.CPUMapAuto}}
	c.Normalize()
	apply(t, e, c)
	w := e.PinWarnings()
	if len(w) != 1 || !strings.HasPrefix(w[0], "cpu_map auto: cannot read the process affinity mask") {
		t.Fatalf("warnings %q, want one about the affinity mask", w)
	}
}

// onLoop runs fn on loop i's thread and waits for it.
func (e *Engine) onLoop(t *testing.T, i int, fn func(*Engine, int)) {
	t.Helper()
	done := make(chan struct{})
	e.mu.Lock()
	l := e.loops[i]
	e.mu.Unlock()
	if !l.Exec(func(*loop.Loop) { fn(e, i); close(done) }) {
		t.Fatal("loop stopped")
	}
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("loop did not run the function")
	}
}

func TestEveryTuningValueAppliesAtRuntime(t *testing.T) {
	e := newTestEngine(t)
	c := &config.Config{Generation: 1, Tuning: config.Tuning{Nbthread: 2}}
	c.Normalize()
	apply(t, e, c)
	c2 := c.Clone()
	c2.Generation = 2
	c2.Tuning = config.Tuning{Nbthread: 2, RunqueueDepth: 50, Maxpollevents: 33,
		Sched: config.Sched{Urgent: 40, Normal: 40, Bulk: 20}, Distribution: config.DistLeastConn,
		Maxaccept: 7, Bufsize: 8192, Pipesize: 131072, Maxpipes: 2, Maxconn: 5}
	c2.Normalize()
	if p := config.Diff(c, c2); len(p.Items) != 1 || p.Items[0].Apply != config.ApplyInPlace {
		t.Fatalf("plan %+v, want one in_place item", p)
	}
	apply(t, e, c2)
	if m := e.Runtime().Maxconn; m != 5 {
		t.Errorf("maxconn %d, want 5", m)
	}
	for i := range 2 {
		e.onLoop(t, i, func(e *Engine, i int) {
			d, mpe, s := e.loops[i].Tuning()
			if d != 50 || mpe != 33 || s != loop.Sched(c2.Tuning.Sched) {
				t.Errorf("loop %d tuning %d %d %+v", i, d, mpe, s)
			}
			w := e.workers[i]
			if n := w.Bufs.Size(); n != 8192 {
				t.Errorf("loop %d bufsize %d", i, n)
			}
			// maxpipes 2 over 2 loops: one pipe each, of pipesize bytes.
			p1 := w.Pipes.Get()
			p2 := w.Pipes.Get()
			if p1 == nil || p2 != nil {
				t.Errorf("loop %d: pipes %v %v, want one and then none", i, p1 != nil, p2 != nil)
			}
			if p1 != nil {
				if p1.Size() != 131072 { // not the kernel default (64 KiB)
					t.Errorf("loop %d pipe size %d", i, p1.Size())
				}
				w.Pipes.Put(p1)
			}
		})
	}
}

// The separate policy puts the NIC's IRQs on the CPU sharing the loops' L3
// that runs no loop; an explicit pin wins over it for its IRQ.
func TestSeparatePolicyPlacesNICIRQsBesideTheLoops(t *testing.T) {
	fs := fakeIRQTree(t)
	root := filepath.Dir(fs.Proc)
	w := func(rel, content string) { writeTreeFile(t, root, rel, content) }
	w("proc/interrupts", "           CPU0       CPU1\n 30:  5  7  PCI-MSI 1-edge  eth0-rx-0\n 31:  1  2  PCI-MSI 2-edge  eth0-tx-0\n 32:  1  2  PCI-MSI 3-edge  eth0-rx-1\n")
	w("proc/irq/32/smp_affinity_list", "0-1\n")
	for _, cpu := range []string{"cpu0", "cpu1"} {
		w("sys/devices/system/cpu/"+cpu+"/cache/index3/level", "3\n")
		w("sys/devices/system/cpu/"+cpu+"/cache/index3/type", "Unified\n")
		w("sys/devices/system/cpu/"+cpu+"/cache/index3/shared_cpu_list", "0-1\n")
	}
	for _, n := range []string{"30", "31", "32"} {
		w("sys/class/net/eth0/device/msi_irqs/"+n, "msix\n")
	}
	e, err := New(Options{PinFS: fs})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { e.Close(context.Background()) })
	mask, _ := pin.Host().AffinityMask()
	if len(mask) == 0 || mask[0] != 0 {
		t.Skipf("needs CPU 0 in the affinity mask (%v)", mask)
	}
	c := &config.Config{Generation: 1, Tuning: config.Tuning{Nbthread: 1},
		CPUMap: config.CPUMap{Mode: config.CPUMapManual, Threads: []config.ThreadCPUs{{Thread: 0, CPUs: []int{0}}}},
		IRQ:    config.IRQ{Policy: config.IRQPolicySeparate, NICs: []string{"eth0"}, Pins: []config.IRQPin{{IRQ: 31, CPUs: []int{0}}}}}
	c.Normalize()
	apply(t, e, c)
	for irq, want := range map[int]string{30: "1", 31: "0", 32: "1"} {
		if got, _ := fs.IRQAffinity(irq); pin.FormatCPUList(got) != want {
			t.Errorf("irq %d on %v, want %s", irq, got, want)
		}
	}
	if w := e.PinWarnings(); len(w) != 0 {
		t.Errorf("warnings %q", w)
	}
	// A NIC that owns no IRQ is refused at run time, nothing changed.
	c2 := c.Clone()
	c2.Generation = 2
	c2.IRQ.NICs = []string{"eth9"}
	err = e.Apply(context.Background(), c2)
	var ae *config.ApplyError
	if !errors.As(err, &ae) || ae.Field != "/irq/policy" {
		t.Fatalf("apply with an unknown NIC: %v", err)
	}
	if got, _ := fs.IRQAffinity(30); pin.FormatCPUList(got) != "1" {
		t.Errorf("irq 30 moved to %v by a refused apply", got)
	}
}

// httpLoopsConfig is an http frontend on port in front of origin, on n
// loops that take connections in turn.
func httpLoopsConfig(gen int64, origin, port, n, graceMs int) *config.Config {
	c := tcpConfig(gen, origin, port)
	c.Frontends[0].Mode = config.ModeHTTP
	c.Backends[0].Mode = config.ModeHTTP
	c.Tuning.Nbthread = n
	c.Tuning.Distribution = config.DistRoundRobin
	c.Tuning.GraceMs = graceMs
	c.Normalize()
	return c
}

// TestRemovedLoopSoftStops: nbthread 2 -> 1 closes the removed loop's idle
// keep-alive connection at once (not when grace_ms ends), lets its request
// in flight finish with Connection: close, and leaves the other loop's
// connections as they were.
func TestRemovedLoopSoftStops(t *testing.T) {
	e := newTestEngine(t)
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			<-release
		}
		io.WriteString(w, "ok")
	})}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	origin := ln.Addr().(*net.TCPAddr).Port
	port := testutil.FreePort(t)
	apply(t, e, httpLoopsConfig(1, origin, port, 2, 30000))

	type client struct {
		c  net.Conn
		br *bufio.Reader
	}
	dial := func() client {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.Close() })
		return client{c, bufio.NewReader(c)}
	}
	get := func(cl client, path string) *http.Response {
		t.Helper()
		cl.c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(cl.c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(cl.br, nil)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		if b, _ := io.ReadAll(resp.Body); resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("GET %s: %d %q", path, resp.StatusCode, b)
		}
		return resp
	}
	// Round robin: one idle and one slow client on each loop.
	idle := []client{dial(), dial()}
	for _, cl := range idle {
		get(cl, "/")
	}
	slow := []client{dial(), dial()}
	for _, cl := range slow {
		io.WriteString(cl.c, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		return e.liveOn(0) == 2 && e.liveOn(1) == 2
	}, "both slow requests in flight")

	apply(t, e, httpLoopsConfig(2, origin, port, 1, 30000))
	start := time.Now()
	closed := -1
	testutil.Eventually(t, 3*time.Second, func() bool {
		for i, cl := range idle {
			cl.c.SetReadDeadline(time.Now().Add(10 * time.Millisecond))
			if _, err := cl.br.Peek(1); errors.Is(err, io.EOF) {
				closed = i
				return true
			}
		}
		return false
	}, "the removed loop's idle connection closed")
	t.Logf("idle connection of the removed loop closed %v after the change", time.Since(start))
	get(idle[1-closed], "/") // the kept loop's client goes on

	close(release)
	var last int
	for _, cl := range slow {
		cl.c.SetDeadline(time.Now().Add(5 * time.Second))
		resp, err := http.ReadResponse(cl.br, nil)
		if err != nil {
			t.Fatalf("request in flight: %v", err)
		}
		io.ReadAll(resp.Body)
		if resp.Close {
			last++
			if _, err := cl.br.Peek(1); !errors.Is(err, io.EOF) {
				t.Fatalf("after its Connection: close response: %v, want end of stream", err)
			}
		}
	}
	if last != 1 {
		t.Fatalf("%d responses in flight carried Connection: close, want the removed loop's one", last)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return len(e.Threads()) == 1 }, "the removed loop stops (long before grace_ms)")
}

// liveOn is the number of connections loop id owns (0 once it stopped).
func (e *Engine) liveOn(id int) int64 {
	e.mu.Lock()
	defer e.mu.Unlock()
	if id < len(e.th.all) {
		return e.th.all[id].l.Activity().Conns.Load()
	}
	return 0
}

// TLS handshakes compute on the Ps the running loops leave: at a shrink
// the draining loop still runs, and once it stopped its P is theirs again
// (nbthread 2 -> 1 with GOMAXPROCS 3 left them 1 token instead of 2 until
// the next nbthread change).
func TestHandshakeCPUsFollowTheLoopsThatRun(t *testing.T) {
	e := newTestEngine(t)
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	c := tcpConfig(1, origin, port)
	c.Tuning.Nbthread = 2
	apply(t, e, c)
	procs := runtime.GOMAXPROCS(0)
	if got := proxy.HandshakeCPUs(); got != procs-2 {
		t.Fatalf("nbthread 2: %d handshake CPUs, want GOMAXPROCS %d less 2 loops", got, procs)
	}
	c = tcpConfig(2, origin, port)
	c.Tuning.Nbthread = 1
	apply(t, e, c)
	// Loop 1 holds no connection, so its drain may end before this
	// check: the tokens are read first, the threads after, and a drain
	// that ended in between shows as no draining loop.
	got := proxy.HandshakeCPUs()
	draining := len(e.Threads()) == 2
	if got != max(procs-2, 1) && (draining || got != procs-1) {
		t.Fatalf("nbthread 1, loop 1 draining %v: %d handshake CPUs, want %d (%d once it stopped)", draining, got, max(procs-2, 1), procs-1)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return len(e.Threads()) == 1 }, "loop 1 drains and stops")
	if got := proxy.HandshakeCPUs(); got != procs-1 {
		t.Fatalf("nbthread 1, loop 1 stopped: %d handshake CPUs, want GOMAXPROCS %d less 1 loop", got, procs)
	}
}
