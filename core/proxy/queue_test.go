package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// newEnvOn is newEnv for loop number id (several loops in one test).
func newEnvOn(t testing.TB, id int) *env {
	t.Helper()
	return startEnv(t, id, defaultTuning())
}

// queuedFrontend is an http frontend for nloops loops whose backend has one
// server per address, each with maxconn 1, and queue_ms queue.
func queuedFrontend(t testing.TB, nloops int, queue time.Duration, addrs ...*net.TCPAddr) *Frontend {
	t.Helper()
	cfg := config.Backend{Name: "be", Mode: config.ModeHTTP}
	for i, a := range addrs {
		cfg.Servers = append(cfg.Servers, &config.Server{Name: "s" + strconv.Itoa(i), Address: a.IP.String(), Port: a.Port, Maxconn: 1})
	}
	cfg.Normalize()
	b, err := balance.Build(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	b.QueueTimeout = queue
	be := NewBackend(b, nloops, new(Counters))
	return &Frontend{
		Name: "fe", Backend: be, Stats: new(Counters), TunnelTimeout: time.Hour,
		HTTP: &HTTPFront{
			Default:        be,
			RequestTimeout: 5 * time.Second, KeepAliveTimeout: 5 * time.Second, ClientTimeout: 5 * time.Second,
		},
	}
}

func sendGET(t *testing.T, c net.Conn, path string) {
	t.Helper()
	if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
}

func readStatus(t *testing.T, c net.Conn) int {
	t.Helper()
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	return resp.StatusCode
}

// TestQueueSlotFreedOnAnotherLoopIsHandedOver: a request queued on loop B
// gets the slot that a response finishing on loop A releases, at once and
// without any timer: while it waits, loop B fires no timer at all (the
// queue used to poll every millisecond, and a slot freed on another loop
// was seen only by that poll).
func TestQueueSlotFreedOnAnotherLoopIsHandedOver(t *testing.T) {
	ea, eb := newEnvOn(t, 0), newEnvOn(t, 1)
	release := make(chan struct{})
	o := newRawOrigin(t, func(head string) string {
		<-release
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	})
	fe := queuedFrontend(t, 2, time.Minute, o.addr)
	s := fe.Backend.B.Servers[0]
	q := fe.Backend.B.Queue()

	first := ea.dialHTTP(fe)
	sendGET(t, first, "/first")
	testutil.Eventually(t, 5*time.Second, func() bool { return o.conns.Load() == 1 }, "first request at the server")
	second := eb.dialHTTP(fe)
	sendGET(t, second, "/second")
	testutil.Eventually(t, 5*time.Second, func() bool { return q.Len() == 1 }, "second request queued")
	if n := fe.Backend.Stats.Loop(1).Queue.Load(); n != 1 {
		t.Fatalf("loop B queue gauge %d, want 1", n)
	}

	// Nothing may run on loop B while the request waits: no poll timer.
	timers := eb.l.Activity().Timers.Load()
	window := time.Now()
	testutil.Eventually(t, time.Second, func() bool { return time.Since(window) >= 30*time.Millisecond }, "a 30 ms window")
	if n := eb.l.Activity().Timers.Load() - timers; n != 0 {
		t.Fatalf("loop B fired %d timers while its request waited in the queue", n)
	}

	close(release)
	if st := readStatus(t, first); st != 200 {
		t.Fatalf("first: %d", st)
	}
	freed := time.Now()
	if st := readStatus(t, second); st != 200 {
		t.Fatalf("second: %d", st)
	}
	t.Logf("second answered %v after the first", time.Since(freed))
	if n := fe.Backend.Stats.Loop(1).Queue.Load(); n != 0 || q.Len() != 0 {
		t.Fatalf("queue gauge %d, len %d after the grant", n, q.Len())
	}
	first.Close()
	second.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return s.Cur.Load() == 0 }, "slot released")
}

// TestQueueTimeoutOnEachLoopKeepsOrderAndSlots: requests queued on two
// loops are served in arrival order, across the loops; one that times out
// (503) leaves no slot behind.
func TestQueueTimeoutOnEachLoopKeepsOrderAndSlots(t *testing.T) {
	ea, eb := newEnvOn(t, 0), newEnvOn(t, 1)
	release := make(chan struct{}, 8)
	var mu sync.Mutex
	var order []string
	o := newRawOrigin(t, func(head string) string {
		<-release
		mu.Lock()
		order = append(order, head[4:7])
		mu.Unlock()
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	})
	fe := queuedFrontend(t, 2, time.Minute, o.addr)
	q := fe.Backend.B.Queue()
	holder := ea.dialHTTP(fe)
	sendGET(t, holder, "/h0")
	testutil.Eventually(t, 5*time.Second, func() bool { return o.conns.Load() == 1 }, "holder at the server")
	var cs []net.Conn
	for i, e := range []*env{eb, ea, eb} {
		c := e.dialHTTP(fe)
		sendGET(t, c, "/q"+strconv.Itoa(i))
		testutil.Eventually(t, 5*time.Second, func() bool { return q.Len() == i+1 }, "queued")
		cs = append(cs, c)
	}
	for range 4 {
		release <- struct{}{}
	}
	if st := readStatus(t, holder); st != 200 {
		t.Fatalf("holder: %d", st)
	}
	for i, c := range cs {
		if st := readStatus(t, c); st != 200 {
			t.Fatalf("q%d: %d", i, st)
		}
	}
	mu.Lock()
	got := append([]string(nil), order...)
	mu.Unlock()
	if len(got) != 4 || got[0] != "/h0" || got[1] != "/q0" || got[2] != "/q1" || got[3] != "/q2" {
		t.Fatalf("served %v, want [/h0 /q0 /q1 /q2]", got)
	}
	holder.Close()
	for _, c := range cs {
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return fe.Backend.B.Servers[0].Cur.Load() == 0 }, "slot released")

	// A queue timeout: 503 at queue_ms, and the slot is not leaked.
	fe2 := queuedFrontend(t, 2, 100*time.Millisecond, o.addr)
	h := ea.dialHTTP(fe2)
	sendGET(t, h, "/h1")
	testutil.Eventually(t, 5*time.Second, func() bool { return o.conns.Load() >= 2 }, "holder at the server")
	late := eb.dialHTTP(fe2)
	sendGET(t, late, "/late")
	if st := readStatus(t, late); st != 503 {
		t.Fatalf("queued past queue_ms: %d, want 503", st)
	}
	release <- struct{}{}
	if st := readStatus(t, h); st != 200 {
		t.Fatalf("holder: %d", st)
	}
	h.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return fe2.Backend.B.Servers[0].Cur.Load() == 0 }, "slot released")
	if fe2.Backend.B.Queue().Len() != 0 {
		t.Fatal("timed-out request still queued")
	}
}

// TestQueueTimeoutsRacingGrantsLeakNoSlot: requests on two loops against a
// server with maxconn 1 and a queue_ms of a few milliseconds, with answers
// that take about as long: queue timeouts fall in the same instants as
// grants from the other loop. Each request gets 200 or 503, and at the end
// the server holds no slot, nobody is queued and the gauges are back to 0.
func TestQueueTimeoutsRacingGrantsLeakNoSlot(t *testing.T) {
	const perLoop = 30
	envs := []*env{newEnvOn(t, 0), newEnvOn(t, 1)}
	var n atomic.Int64
	o := newRawOrigin(t, func(head string) string {
		time.Sleep(time.Duration(n.Add(1)%4) * time.Millisecond) // the origin's service time
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	})
	fe := queuedFrontend(t, 2, 3*time.Millisecond, o.addr)
	var wg sync.WaitGroup
	var ok, busy atomic.Int64
	for _, e := range envs {
		for range perLoop {
			c := e.dialHTTP(fe)
			wg.Add(1)
			go func() {
				defer wg.Done()
				defer c.Close()
				if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: h\r\n\r\n"); err != nil {
					t.Error(err)
					return
				}
				resp, err := http.ReadResponse(bufio.NewReader(c), nil)
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				switch resp.StatusCode {
				case 200:
					ok.Add(1)
				case 503:
					busy.Add(1)
				default:
					t.Errorf("status %d", resp.StatusCode)
				}
			}()
		}
	}
	wg.Wait()
	t.Logf("200: %d, 503 (queue timeout): %d", ok.Load(), busy.Load())
	s := fe.Backend.B.Servers[0]
	testutil.Eventually(t, 5*time.Second, func() bool { return s.Cur.Load() == 0 }, "every slot released")
	if l := fe.Backend.B.Queue().Len(); l != 0 {
		t.Fatalf("%d requests still queued", l)
	}
	for id := range envs {
		if g := fe.Backend.Stats.Loop(id).Queue.Load(); g != 0 {
			t.Fatalf("loop %d queue gauge %d", id, g)
		}
	}
	if ok.Load() == 0 || busy.Load() == 0 {
		t.Fatalf("want both grants and queue timeouts, got 200×%d 503×%d", ok.Load(), busy.Load())
	}
}
