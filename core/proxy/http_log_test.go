package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// logged gives the worker of e an access-log ring and turns fe's
// access_log on; the returned function waits for n entries and returns
// them (copies, in order).
func logged(t *testing.T, e *env, fe *Frontend) func(n int) []stats.LogEntry {
	ring := stats.NewLogRing(64)
	e.do(func() { e.w.AccessLog = ring })
	fe.AccessLog = true
	var got []stats.LogEntry
	return func(n int) []stats.LogEntry {
		t.Helper()
		testutil.Eventually(t, 10*time.Second, func() bool {
			e.do(func() { ring.Drain(func(le *stats.LogEntry) { got = append(got, *le) }) })
			return len(got) >= n
		}, "access-log entries")
		if len(got) != n {
			t.Fatalf("%d entries, want %d", len(got), n)
		}
		return got
	}
}

func ms(ns int64) time.Duration { return time.Duration(ns) }

// TestHTTPAccessLogKeepAlive: each request of a kept-alive connection has
// its own entry: request line, status, exact bytes each way (heads
// included), a connect for the first only (the second reuses the pooled
// connection), and the second's tq counts from the end of the first.
func TestHTTPAccessLogKeepAlive(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, nil, newRawServer(t))
	fe.HTTP.XForwardedFor = false
	entries := logged(t, e, fe)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	req := "GET /x?token=secret HTTP/1.1\r\nHost: a\r\n\r\n"
	get := func() {
		io.WriteString(c, req)
		if _, err := io.ReadFull(br, make([]byte, len(rawResponse))); err != nil {
			t.Fatal(err)
		}
	}
	get()
	const pause = 50 * time.Millisecond
	time.Sleep(pause) // the idle time the second request's tq includes (not synchronisation)
	get()
	got := entries(2)
	for i, le := range got {
		if le.Status != 200 || le.Term != stats.TermNormal || string(le.RequestLine()) != "GET /x?token=secret HTTP/1.1" ||
			le.BytesIn != int64(len(req)) || le.BytesOut != int64(len(rawResponse)) || !le.HTTP ||
			le.Frontend != fe.Name || le.Backend != fe.Backend.Name || le.Server != "s0" ||
			le.Client.Addr().String() != "127.0.0.1" || le.Client.Port() != uint16(c.LocalAddr().(*net.TCPAddr).Port) {
			t.Errorf("entry %d: %+v", i, le)
		}
		if le.Head < le.Start || le.Resp < le.Granted || le.End < le.Resp {
			t.Errorf("entry %d: times out of order: %+v", i, le)
		}
	}
	if got[0].ConnStart == 0 || got[0].Connected < got[0].ConnStart {
		t.Errorf("first request: no connect timed: %+v", got[0])
	}
	if got[1].ConnStart != 0 || got[1].Connected != 0 {
		t.Errorf("second request reused the pooled connection, yet a connect is timed: %+v", got[1])
	}
	if tq := ms(got[1].Head - got[1].Start); tq < pause || got[1].Start < got[0].End {
		t.Errorf("second request's tq %v, want from the end of the first (>= %v)", tq, pause)
	}
	// The counters see the same bytes, while the connection is still open.
	var tot stats.Totals
	e.do(func() { tot = fe.Stats.Total(e.l.Now()) })
	if tot.BytesIn != 2*int64(len(req)) || tot.BytesOut != 2*int64(len(rawResponse)) {
		t.Errorf("frontend bytes in %d out %d, want %d and %d", tot.BytesIn, tot.BytesOut, 2*len(req), 2*len(rawResponse))
	}
	e.do(func() { tot = fe.Backend.Stats.Total(e.l.Now()) })
	if tot.BytesIn != 2*int64(len(req)) || tot.BytesOut != 2*int64(len(rawResponse)) {
		t.Errorf("backend bytes in %d out %d, want %d and %d", tot.BytesIn, tot.BytesOut, 2*len(req), 2*len(rawResponse))
	}
}

// TestHTTPAccessLogTerminations: the termination state of each way a
// request can end that a test can provoke, with its status.
func TestHTTPAccessLogTerminations(t *testing.T) {
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c) // reads, never answers
	}).Addr
	refused := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: testutil.FreePort(t)}
	for _, tc := range []struct {
		name    string
		addr    *net.TCPAddr
		opts    func(*config.Backend)
		request string
		abort   bool // the client resets after sending
		status  int32
		term    string
	}{
		{"bad request", newRawServer(t), nil, "BAD\x01 / HTTP/1.1\r\n\r\n", false, 400, "PR"},
		{"no server", newRawServer(t), func(b *config.Backend) { b.Servers[0].AdminState = config.AdminMaint },
			"GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 503, "SC"},
		{"connect refused", refused, func(b *config.Backend) { one := 1; b.Retries = &one }, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 503, "SC"},
		{"server timeout", silent, func(b *config.Backend) { b.Timeouts.ServerMs = 200 }, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", false, 504, "sH"},
		{"client abort", silent, nil, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\npart", true, 0, "CD"},
		{"client leaves within its head", silent, nil, "GET / HTTP/1.1\r\nHost:", true, 0, "CR"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			opts := tc.opts
			if opts == nil {
				opts = func(*config.Backend) {}
			}
			fe := httpFrontend(t, opts, tc.addr)
			entries := logged(t, e, fe)
			c := e.dialHTTP(fe)
			io.WriteString(c, tc.request)
			if tc.abort {
				time.Sleep(50 * time.Millisecond) // let the proxy read the bytes first (pacing: any delay works)
				c.SetLinger(0)
				c.Close()
			} else if resp, err := http.ReadResponse(bufio.NewReader(c), nil); err != nil || resp.StatusCode != int(tc.status) {
				t.Fatalf("response %v %v, want %d", resp, err, tc.status)
			}
			le := entries(1)[0]
			if le.Status != tc.status || le.Term.String() != tc.term {
				t.Errorf("status %d termination %s, want %d %s (%+v)", le.Status, le.Term, tc.status, tc.term, le)
			}
			if tc.name == "bad request" && string(le.RequestLine()) != "BAD\x01 / HTTP/1.1" {
				t.Errorf("bad request line %q, want the line as sent", le.RequestLine())
			}
			if tc.name == "connect refused" && le.Retries != 1 {
				t.Errorf("retries %d, want 1", le.Retries)
			}
		})
	}
}

// TestHTTPKeepAliveRequestWithAccessLogDoesNotAllocate: logging a request
// (entry from the free list, line copied, pushed to the ring) allocates
// nothing on the loop.
func TestHTTPKeepAliveRequestWithAccessLogDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, nil, newRawServer(t))
	ring := stats.NewLogRing(1 << 10)
	e.do(func() { e.w.AccessLog = ring })
	fe.AccessLog = true
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(rawResponse); {
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
	}
	drain := func() { e.do(func() { ring.Drain(func(*stats.LogEntry) {}) }) }
	for range 50 {
		one()
	}
	drain()
	// 200 runs fit the ring: nothing is dropped, and draining (the writer's
	// side) is not measured.
	if a := testing.AllocsPerRun(200, one); a > 0.05 {
		t.Fatalf("%.2f allocations per logged request, want 0", a)
	}
	drain()
	if ring.Dropped() != 0 {
		t.Fatalf("%d entries dropped", ring.Dropped())
	}
}

// TestAccessLogKilledAtTheEndOfTheGrace: a request still waiting for its
// server when CloseAll ends a stop's grace is logged as K (HAProxy's
// killed), in the phase it was in; a tunnel too.
func TestAccessLogKilledAtTheEndOfTheGrace(t *testing.T) {
	e := newEnv(t, defaultTuning())
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c)
	}).Addr
	fe := httpFrontend(t, nil, silent)
	entries := logged(t, e, fe)
	c := e.dialHTTP(fe)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	tfe := frontend(t, SpliceAuto, silent)
	tfe.AccessLog = true
	tc := e.dial(tfe)
	tc.Write([]byte("x"))
	testutil.Eventually(t, 5*time.Second, func() bool {
		n := 0
		e.do(func() {
			for h := e.w.h.live.Front(); h != nil; h = h.link.Next() {
				if h.st != nil && h.st.phase == phExchange {
					n++
				}
			}
			for tu := e.w.live.Front(); tu != nil; tu = tu.link.Next() {
				if tu.state == stEstablished {
					n++
				}
			}
		})
		return n == 2
	}, "the request at its server, the tunnel established")
	e.do(func() { e.w.CloseAll() })
	got := entries(2)
	terms := map[bool]string{}
	for _, le := range got {
		terms[le.HTTP] = le.Term.String()
	}
	if terms[true] != "KH" || terms[false] != "KD" {
		t.Errorf("terminations %v, want http KH and tcp KD", terms)
	}
}

// TestTunnelAccessLogTerminations: a tcp connection's entry says how it
// ended: normally, the server refusing every connect (SC, with the retry
// counted), the client resetting (CD), the server resetting (SD).
func TestTunnelAccessLogTerminations(t *testing.T) {
	echo := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	}).Addr
	resetting := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		c.Read(make([]byte, 1))
		c.SetLinger(0)
		c.Close()
	}).Addr
	refused := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: testutil.FreePort(t)}
	for _, tc := range []struct {
		name  string
		addrs []*net.TCPAddr
		end   func(c *net.TCPConn)
		term  string
	}{
		{"normal", []*net.TCPAddr{echo}, func(c *net.TCPConn) {
			c.Write([]byte("x"))
			c.Read(make([]byte, 1))
			c.CloseWrite()
			io.Copy(io.Discard, c)
		}, "--"},
		{"connect refused", []*net.TCPAddr{refused, refused}, func(c *net.TCPConn) { io.Copy(io.Discard, c) }, "SC"},
		{"client reset", []*net.TCPAddr{echo}, func(c *net.TCPConn) {
			c.Write([]byte("x"))
			c.Read(make([]byte, 1))
			c.SetLinger(0)
			c.Close()
		}, "CD"},
		{"server reset", []*net.TCPAddr{resetting}, func(c *net.TCPConn) {
			c.Write([]byte("x"))
			io.Copy(io.Discard, c)
		}, "SD"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			fe := frontend(t, SpliceAuto, tc.addrs...)
			entries := logged(t, e, fe)
			c := e.dial(fe)
			tc.end(c)
			le := entries(1)[0]
			if le.Term.String() != tc.term || le.HTTP || le.Frontend != "fe" {
				t.Errorf("termination %s, want %s (%+v)", le.Term, tc.term, le)
			}
			if tc.name == "connect refused" && int(le.Retries) != fe.Backend.B.Retries {
				t.Errorf("retries %d, want the backend's %d", le.Retries, fe.Backend.B.Retries)
			}
			if tc.name == "normal" && (le.BytesIn != 1 || le.BytesOut != 1 || le.Connected == 0) {
				t.Errorf("normal: %+v", le)
			}
		})
	}
}

// BenchmarkHTTPKeepAliveAccessLog is BenchmarkHTTPKeepAlive with the
// frontend's access log on (a goroutine drains the ring, as the engine's
// writer does, without formatting): what an entry costs the loop.
func BenchmarkHTTPKeepAliveAccessLog(b *testing.B) {
	e := newEnv(b, defaultTuning())
	fe := httpFrontend(b, nil, newRawServer(b))
	ring := stats.NewLogRing(8192)
	e.do(func() { e.w.AccessLog = ring })
	fe.AccessLog = true
	stop := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			ring.Drain(func(*stats.LogEntry) {})
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
		}
	}()
	defer func() { close(stop); <-done }()
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		for n := 0; n < len(rawResponse); {
			m, err := c.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}

// TestHTTPRetryOnAPooledConnectionIsCounted: a request whose connect is
// refused and that then goes to another server over a pooled connection
// was retried: the backend's retries and the entry's say so, as many as
// the connect errors (every one was retried here).
func TestHTTPRetryOnAPooledConnectionIsCounted(t *testing.T) {
	e := newEnv(t, defaultTuning())
	refused := &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: testutil.FreePort(t)}
	fe := httpFrontend(t, func(b *config.Backend) { three := 3; b.Retries = &three }, newRawServer(t), refused)
	entries := logged(t, e, fe)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	const n = 6 // roundrobin: every other request tries the refused server first
	for range n {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if _, err := io.ReadFull(br, make([]byte, len(rawResponse))); err != nil {
			t.Fatal(err)
		}
	}
	var logged int32
	for _, le := range entries(n) {
		if le.Status != 200 || le.Server != "s0" {
			t.Errorf("entry %+v, want a 200 from s0", le)
		}
		logged += le.Retries
	}
	var tot stats.Totals
	e.do(func() { tot = fe.Backend.Stats.Total(e.l.Now()) })
	if tot.ConnectErrors < 2 || tot.Retries != tot.ConnectErrors || int64(logged) != tot.ConnectErrors {
		t.Errorf("connect errors %d, retries %d, retries logged %d: want as many retries as errors", tot.ConnectErrors, tot.Retries, logged)
	}
}

// TestHTTPClientResetWhileQueuedLeavesTheQueue: a client that resets
// while its request waits for a server slot gives its place up at once,
// logged CQ (HAProxy's client abort in the queue): its request never
// takes a slot for nobody, and the queue does not hold it until a slot
// frees.
func TestHTTPClientResetWhileQueuedLeavesTheQueue(t *testing.T) {
	e := newEnv(t, defaultTuning())
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c) // holds the only slot
	}).Addr
	fe := httpFrontend(t, func(b *config.Backend) { b.Timeouts.QueueMs = 10000 }, silent)
	fe.Backend.B.Servers[0].SetMaxconn(1)
	entries := logged(t, e, fe)
	first := e.dialHTTP(fe)
	io.WriteString(first, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
	testutil.Eventually(t, 5e9, func() bool { return fe.Backend.B.Servers[0].Stats().Cur == 1 }, "the first request holding the slot")
	second := e.dialHTTP(fe)
	io.WriteString(second, "GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
	testutil.Eventually(t, 5e9, func() bool { return fe.Backend.B.Queue().Len() == 1 }, "the second request queued")
	second.SetLinger(0)
	second.Close()
	le := entries(1)[0]
	if string(le.RequestLine()) != "GET /second HTTP/1.1" || le.Term.String() != "CQ" || le.Granted != 0 {
		t.Errorf("entry %q %s granted %d, want the second request, CQ, never granted", le.RequestLine(), le.Term, le.Granted)
	}
	if n := fe.Backend.B.Queue().Len(); n != 0 {
		t.Errorf("%d still queued", n)
	}
	first.Close()
}

// TestTunnelClientResetWhileQueuedIsCQ: a tcp client that resets while
// its connection waits for a server slot is logged CQ (the phase it
// ended in), not CD as if data had flowed.
func TestTunnelClientResetWhileQueuedIsCQ(t *testing.T) {
	e := newEnv(t, defaultTuning())
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c) // holds the only slot
	}).Addr
	fe := frontend(t, SpliceOff, silent)
	fe.Backend.B.Servers[0].SetMaxconn(1)
	fe.Backend.B.QueueTimeout = 10 * time.Second
	entries := logged(t, e, fe)
	first := e.dial(fe)
	first.Write([]byte("x"))
	testutil.Eventually(t, 5e9, func() bool { return fe.Backend.B.Servers[0].Stats().Cur == 1 }, "the first connection holding the slot")
	second := e.dial(fe)
	second.Write([]byte("y"))
	testutil.Eventually(t, 5e9, func() bool { return fe.Backend.B.Queue().Len() == 1 }, "the second connection queued")
	second.SetLinger(0)
	second.Close()
	if le := entries(1)[0]; le.Term.String() != "CQ" || le.Connected != 0 {
		t.Errorf("termination %s connected %d, want CQ, never connected", le.Term, le.Connected)
	}
	first.Close()
}
