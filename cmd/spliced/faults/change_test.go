package faults

// Every runtime change of the API under a running load.

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// loadStats are what the load saw since the last reset.
type loadStats struct {
	reqs, errs, wrong atomic.Int64
	total             atomic.Int64 // successes since the start, never reset
	mu                sync.Mutex
	first             []string         // the first errors, for the log
	by                map[string]int64 // http answers by server name
}

func (s *loadStats) ok(name string) {
	s.reqs.Add(1)
	s.total.Add(1)
	s.mu.Lock()
	if s.by == nil {
		s.by = map[string]int64{}
	}
	s.by[name]++
	s.mu.Unlock()
}

func (s *loadStats) fail(wrong bool, msg string) {
	if wrong {
		s.wrong.Add(1)
	} else {
		s.errs.Add(1)
	}
	s.mu.Lock()
	if len(s.first) < 3 {
		s.first = append(s.first, msg)
	}
	s.mu.Unlock()
}

func (s *loadStats) take() (reqs, errs, wrong int64, first []string, by map[string]int64) {
	s.mu.Lock()
	first, s.first = s.first, nil
	by, s.by = s.by, nil
	s.mu.Unlock()
	return s.reqs.Swap(0), s.errs.Swap(0), s.wrong.Swap(0), first, by
}

// TestRuntimeChangesUnderLoad applies every kind of runtime change while
// http clients (4 keep-alive connections of a Go client) and tcp clients
// (2 long tunnels echoing, 2 opening a tunnel per round trip) run, and
// counts per change what they saw: errors (a failed request, a status
// other than 200, a broken tunnel) and wrong answers (a request that
// started after the API answered and reached a server the change removed
// or drained). Every change here leaves what the clients use in place:
// 0 of either is expected for each.
func TestRuntimeChangesUnderLoad(t *testing.T) {
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2})
	a, b, c, b2 := named(t, "a"), named(t, "b"), named(t, "c"), named(t, "b2")
	p.backend("web", "http", map[string]any{"server_ms": 5000}, srv{"s1", a.port}, srv{"s2", b.port})
	fp := p.frontend("pub", "http", "web", nil)
	b2port := testutil.FreePort(t)
	p.must("POST", "/api/v1/frontends/pub/binds", map[string]any{"name": "b2", "address": "127.0.0.1", "port": b2port})
	echo := func(c net.Conn) { c.Write([]byte("e")); io.Copy(c, c); c.Close() }
	e1, _ := listen(t, echo)
	e2, _ := listen(t, echo)
	p.backend("tweb", "tcp", map[string]any{"tunnel_ms": 10000}, srv{"t1", e1}, srv{"t2", e2})
	tp := p.frontend("tpub", "tcp", "tweb", nil)

	var forbid atomic.Pointer[map[string]bool]
	forbid.Store(&map[string]bool{})
	var hs, ts loadStats
	stop := make(chan struct{})
	var wg sync.WaitGroup
	url := "http://127.0.0.1:" + strconv.Itoa(fp) + "/x"
	tr := &http.Transport{MaxIdleConnsPerHost: 4, DisableCompression: true}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	for i := 0; i < 4; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				fbp := forbid.Load()
				fb := *fbp
				resp, err := client.Get(url)
				if err != nil {
					hs.fail(false, err.Error())
					continue
				}
				body, err := io.ReadAll(resp.Body)
				resp.Body.Close()
				switch {
				case err != nil || resp.StatusCode != 200:
					hs.fail(false, fmt.Sprintf("status %d %q, %v", resp.StatusCode, body, err))
				case fb[string(body)] && forbid.Load() == fbp:
					// started after the change answered, and no later
					// change came in between
					hs.fail(true, "answered by "+string(body))
				default:
					hs.ok(string(body))
				}
			}
		}()
	}
	tdial := func() (net.Conn, error) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(tp), 2*time.Second)
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		g := make([]byte, 1)
		if _, err := io.ReadFull(c, g); err != nil {
			c.Close()
			return nil, fmt.Errorf("greeting: %w", err)
		}
		return c, nil
	}
	roundTrip := func(c net.Conn, i int) error {
		c.SetDeadline(time.Now().Add(5 * time.Second))
		msg := "ping" + strconv.Itoa(i)
		if _, err := io.WriteString(c, msg); err != nil {
			return err
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(c, got); err != nil || string(got) != msg {
			return fmt.Errorf("echo %q: %q, %v", msg, got, err)
		}
		return nil
	}
	for i := 0; i < 4; i++ {
		long := i < 2
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			for n := 0; ; n++ {
				select {
				case <-stop:
					if c != nil {
						c.Close()
					}
					return
				default:
				}
				if c == nil {
					var err error
					if c, err = tdial(); err != nil {
						ts.fail(false, err.Error())
						continue
					}
				}
				if err := roundTrip(c, n); err != nil {
					ts.fail(false, err.Error())
					c.Close()
					c = nil
					continue
				}
				ts.reqs.Add(1)
				if long {
					time.Sleep(2 * time.Millisecond) // a chatty long session, not a flood
				} else {
					c.Close()
					c = nil
				}
			}
		}()
	}
	t.Cleanup(func() {
		select {
		case <-stop:
		default:
			close(stop)
		}
		wg.Wait()
	})

	// window lets the load run after a change until both kinds of
	// clients did some work (at least 200 ms and 100 http requests).
	window := func() {
		t0 := time.Now()
		testutil.Eventually(t, 10*time.Second, func() bool {
			return time.Since(t0) > 200*time.Millisecond && hs.reqs.Load()+hs.errs.Load() >= 100 && ts.reqs.Load()+ts.errs.Load() >= 20
		}, "the load to go on")
	}
	window()
	hs.take()
	ts.take()

	bind2 := func(up bool) {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(b2port), time.Second)
		if err == nil {
			c.Close()
		}
		if up != (err == nil) {
			t.Errorf("bind b2 up=%v after the change, dial: %v", up, err)
		}
	}
	type change struct {
		name   string
		method string
		path   string
		body   any
		forbid []string // servers no request started after the answer may reach
		check  func()
		need   string // a server that must answer in the window after
	}
	changes := []change{
		{"weights", "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 10}, nil, nil, ""},
		{"add server", "POST", "/api/v1/backends/web/servers", map[string]any{"name": "s3", "address": "127.0.0.1", "port": c.port}, nil, nil, "c"},
		{"remove server", "DELETE", "/api/v1/backends/web/servers/s3", nil, []string{"c"}, nil, ""},
		{"drain", "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"admin_state": "drain"}, []string{"c", "a"}, nil, ""},
		{"ready again", "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"admin_state": "ready"}, []string{"c"}, nil, "a"},
		{"in-place server change", "PATCH", "/api/v1/backends/web/servers/s2", map[string]any{"port": b2.port}, []string{"c", "b"}, nil, "b2"},
		{"nbthread 2 to 1", "PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1}, []string{"c", "b"}, nil, ""},
		{"nbthread 1 to 2", "PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2}, []string{"c", "b"}, nil, ""},
		{"cpu-map manual", "PUT", "/api/v1/cpu-map", map[string]any{"mode": "manual", "threads": []map[string]any{{"thread": 0, "cpus": []int{1}}, {"thread": 1, "cpus": []int{0}}}}, []string{"c", "b"}, nil, ""},
		{"cpu-map none", "PUT", "/api/v1/cpu-map", map[string]any{"mode": "none"}, []string{"c", "b"}, nil, ""},
		{"bind removed", "DELETE", "/api/v1/frontends/pub/binds/b2", nil, []string{"c", "b"}, func() { bind2(false) }, ""},
		{"bind re-added", "POST", "/api/v1/frontends/pub/binds", map[string]any{"name": "b2", "address": "127.0.0.1", "port": b2port}, []string{"c", "b"}, func() { bind2(true) }, ""},
		{"bufsize up", "PATCH", "/api/v1/tuning", map[string]any{"bufsize": 65536}, []string{"c", "b"}, nil, ""},
		{"bufsize down", "PATCH", "/api/v1/tuning", map[string]any{"bufsize": 16384}, []string{"c", "b"}, nil, ""},
	}
	var report strings.Builder
	bad := 0
	for _, ch := range changes {
		// no check while a change is under way: a request may be routed
		// before or after it
		forbid.Store(&map[string]bool{})
		st, body, err := p.api(ch.method, ch.path, ch.body)
		if err != nil || st < 200 || st > 299 {
			t.Fatalf("%s: %s %s: %d %v %s", ch.name, ch.method, ch.path, st, err, body)
		}
		fb := map[string]bool{}
		for _, s := range ch.forbid {
			fb[s] = true
		}
		forbid.Store(&fb)
		if ch.check != nil {
			ch.check()
		}
		window()
		hr, he, hw, hf, by := hs.take()
		tr, te, _, tf, _ := ts.take()
		fmt.Fprintf(&report, "%-24s http %4d ok %3d errors %3d wrong | tcp %4d ok %3d errors | %v\n", ch.name, hr, he, hw, tr, te, by)
		if he+hw+te > 0 {
			bad++
			fmt.Fprintf(&report, "    first: %q %q\n", hf, tf)
		}
		if ch.need != "" && by[ch.need] == 0 {
			bad++
			fmt.Fprintf(&report, "    server %s got none of the requests after the change\n", ch.need)
		}
	}
	close(stop)
	wg.Wait()
	t.Logf("client results per change:\n%s", report.String())
	if bad > 0 {
		t.Errorf("%d changes broke clients that did not use what they changed", bad)
	}
	f, be := p.stats("pub", "web")
	t.Logf("counters: frontend %v; backend %v", f, be)
	// every answer the clients got is counted, whatever loop (old, new,
	// removed, added) served it
	if ok := hs.total.Load(); f.Status["2xx"] < ok || be.Status["2xx"] < ok {
		t.Errorf("the clients got %d answers 200, the counters say frontend %d, backend %d", ok, f.Status["2xx"], be.Status["2xx"])
	}
	p.healthy(t)
}

// TestBufsizeChangesAndBigHeads: heads near the buffer size across bufsize
// changes. Lowered from 64 KiB to 16 KiB after traffic, a 16 KiB response
// head to an HTTP/1.0 client is a 502, not a crash; raised from 16 KiB to
// 64 KiB after traffic, a 20 KiB request head that got 431 passes.
func TestBufsizeChangesAndBigHeads(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	// a head of 16 370 bytes: under 16 KiB, but not with the fields the
	// proxy adds for an HTTP/1.0 client
	fill := strings.Repeat("X-Big: "+strings.Repeat("b", 400)+"\r\n", 38)
	head := "HTTP/1.1 200 OK\r\n" + fill + "Content-Length: 2\r\n"
	head += "X-Pad: " + strings.Repeat("p", 16370-len(head)-len("X-Pad: \r\n\r\n")) + "\r\n\r\n"
	bigHead := head + "ok"
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		ans := okResp("small")
		if r.URL.Path == "/big" {
			ans = bigHead
		}
		_, err := io.WriteString(c, ans)
		return err == nil
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	get := func(req string) (int, string) {
		c := dial(t, fp)
		io.WriteString(c, req)
		resp, b, err := readResp(bufio.NewReader(c), "GET")
		if err != nil {
			t.Fatalf("%.40q: %v", req, err)
		}
		return resp.StatusCode, string(b)
	}
	p.must("PATCH", "/api/v1/tuning", map[string]any{"bufsize": 65536})
	for i := 0; i < 4; i++ {
		if st, _ := get("GET /big HTTP/1.0\r\n\r\n"); st != 200 {
			t.Fatalf("a 16 KiB response head with bufsize 64 KiB: %d", st)
		}
	}
	p.must("PATCH", "/api/v1/tuning", map[string]any{"bufsize": 16384})
	for i := 0; i < 4; i++ {
		if st, _ := get("GET /big HTTP/1.0\r\n\r\n"); st != 502 {
			t.Fatalf("a 16 KiB response head with bufsize 16 KiB: %d, want 502", st)
		}
		if st, b := get("GET /small HTTP/1.0\r\n\r\n"); st != 200 || b != "small" {
			t.Fatalf("a small response after bufsize went down: %d %q", st, b)
		}
	}
	p.healthy(t)
	bigReq := "GET /small HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Big: "+strings.Repeat("q", 400)+"\r\n", 50) + "\r\n"
	if st, _ := get(bigReq); st != 431 {
		t.Fatalf("a 20 KiB request head with bufsize 16 KiB: %d, want 431", st)
	}
	p.must("PATCH", "/api/v1/tuning", map[string]any{"bufsize": 65536})
	for i := 0; i < 4; i++ {
		if st, b := get(bigReq); st != 200 || b != "small" {
			t.Fatalf("a 20 KiB request head after bufsize went up to 64 KiB: %d %q", st, b)
		}
	}
	p.healthy(t)
}

// TestNoUsableServerOnAKeptAliveConnection: every server of the backend
// set to weight 0, then to maint, under a kept-alive connection: its next
// request gets 503 (with Connection: close); back to ready, a new
// connection gets 200 again.
func TestNoUsableServerOnAKeptAliveConnection(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, srv{"s1", named(t, "a").port})
	fp := p.frontend("pub", "http", "web", nil)
	for _, change := range []map[string]any{{"weight": 0}, {"admin_state": "maint"}} {
		c := dial(t, fp)
		br := bufio.NewReader(c)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, _, err := readResp(br, "GET"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("before %v: %v %v", change, resp, err)
		}
		p.must("PATCH", "/api/v1/backends/web/servers/s1", change)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, _, err := readResp(br, "GET")
		if err != nil || resp.StatusCode != 503 || !resp.Close {
			t.Fatalf("after %v: %v %v; want 503 with Connection: close", change, resp, err)
		}
		p.must("PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 100, "admin_state": "ready"})
		c2 := dial(t, fp)
		io.WriteString(c2, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, _, err := readResp(bufio.NewReader(c2), "GET"); err != nil || resp.StatusCode != 200 {
			t.Fatalf("back to ready: %v %v", resp, err)
		}
	}
	p.healthy(t)
}

// TestMoreLoopsThanCPUs: nbthread 2 -> 4 -> 8 -> 1 -> 2 on this 2-CPU
// machine under keep-alive load: no client error, every loop count
// serves.
func TestMoreLoopsThanCPUs(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", map[string]any{"server_ms": 5000}, named(t, "a"))
	fp := p.frontend("pub", "http", "web", nil)
	load := startGETs(t, fp, 4)
	for _, n := range []int{4, 8, 1, 2} {
		p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": n})
		var info struct{ Nbthread int }
		json.Unmarshal(p.must("GET", "/api/v1/info", nil), &info)
		if info.Nbthread != n {
			t.Errorf("nbthread %d asked, info says %d", n, info.Nbthread)
		}
		m := load.reqs.Load()
		testutil.Eventually(t, 5*time.Second, func() bool { return load.reqs.Load() > m+100 }, "requests with "+strconv.Itoa(n)+" loops")
	}
	load.Stop()
	t.Logf("%d requests, %d errors", load.reqs.Load(), load.errs.Load())
	if load.errs.Load() > 0 {
		t.Fatalf("%d client errors; first: %v", load.errs.Load(), load.firstErr.Load())
	}
	p.healthy(t)
}

// TestBindMovedUnderAKeptAliveConnection: the bind a kept-alive client
// came through moves to another port (PUT of the bind): the old port
// refuses, the new one serves, and the client's connection goes on.
func TestBindMovedUnderAKeptAliveConnection(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.backend("web", "http", nil, named(t, "a"))
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	br := bufio.NewReader(c)
	get := func() {
		t.Helper()
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, b, err := readResp(br, "GET"); err != nil || resp.StatusCode != 200 || string(b) != "a" {
			t.Fatalf("kept-alive client: %v %q %v", resp, b, err)
		}
	}
	get()
	np := testutil.FreePort(t)
	p.must("PUT", "/api/v1/frontends/pub/binds/b1", map[string]any{"name": "b1", "address": "127.0.0.1", "port": np})
	get()
	if nc, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second); err == nil {
		nc.Close()
		t.Fatal("the old port still accepts")
	}
	c2 := dial(t, np)
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _, err := readResp(bufio.NewReader(c2), "GET"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("new port: %v %v", resp, err)
	}
	get()
	p.healthy(t)
}
