package main

// End-to-end tests of health checks: the real binary in front of Go http
// origins whose health endpoint can fail, die and come back, with a tcp
// frontend. The observed server state is read from GET /api/v1/stats when
// the endpoint answers, and from the "server health changed" log lines
// otherwise.

import (
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

// healthOrigin is an http origin: /health answers 200 while healthy (and
// no forced failure is pending), 503 otherwise; every other path answers
// its name. It can be killed and restarted on the same port.
type healthOrigin struct {
	t        *testing.T
	name     string
	port     int
	healthy  atomic.Bool
	failNext atomic.Int64 // forced 503s while healthy
	checks   atomic.Int64 // health requests answered 200
	failed   atomic.Int64 // health requests answered 503
	hits     atomic.Int64 // other requests
	mu       sync.Mutex
	srv      *http.Server
}

func newHealthOrigin(t *testing.T, name string) *healthOrigin {
	o := &healthOrigin{t: t, name: name}
	o.healthy.Store(true)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o.port = ln.Addr().(*net.TCPAddr).Port
	o.serve(ln)
	t.Cleanup(o.kill)
	return o
}

func (o *healthOrigin) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/health" {
		o.hits.Add(1)
		io.WriteString(w, o.name)
		return
	}
	if r.UserAgent() != "spliced-check" || r.Header.Get("Connection") != "close" {
		o.t.Errorf("health request with User-Agent %q Connection %q", r.UserAgent(), r.Header.Get("Connection"))
	}
	if o.healthy.Load() && o.failNext.Add(-1) < 0 {
		o.failNext.Store(0)
		o.checks.Add(1)
		w.WriteHeader(http.StatusOK)
		return
	}
	o.failed.Add(1)
	w.WriteHeader(http.StatusServiceUnavailable)
}

func (o *healthOrigin) serve(ln net.Listener) {
	srv := &http.Server{Handler: o, ReadHeaderTimeout: 5 * time.Second}
	o.mu.Lock()
	o.srv = srv
	o.mu.Unlock()
	go srv.Serve(ln)
}

// kill closes the listener and every connection: the port refuses.
func (o *healthOrigin) kill() {
	o.mu.Lock()
	srv := o.srv
	o.srv = nil
	o.mu.Unlock()
	if srv != nil {
		srv.Close()
	}
}

// restart listens on the same port again.
func (o *healthOrigin) restart() {
	o.t.Helper()
	var ln net.Listener
	var err error
	testutil.Eventually(o.t, 5*time.Second, func() bool {
		ln, err = net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(o.port))
		return err == nil
	}, "port "+strconv.Itoa(o.port)+" free again")
	o.serve(ln)
}

func (o *healthOrigin) server(name string) map[string]any {
	return map[string]any{"name": name, "address": "127.0.0.1", "port": o.port}
}

// setupHealth creates backend "web" with an http health check and a tcp
// frontend in front of it; it returns the frontend's port.
func setupHealth(t *testing.T, in *instance, check map[string]any, servers ...map[string]any) int {
	t.Helper()
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "tcp", "balance": "roundrobin", "servers": servers,
		"timeouts": map[string]any{"connect_ms": 1000}, "retries": 1, "health_check": check,
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "pub", "mode": "tcp", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
	})
	return port
}

// who asks through the proxy which origin answers (a new connection each
// time).
func who(t *testing.T, port int) string {
	t.Helper()
	c := &http.Client{Transport: &http.Transport{DisableKeepAlives: true}, Timeout: 5 * time.Second}
	resp, err := c.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/who")
	if err != nil {
		t.Fatalf("request through the proxy: %v", err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("reading the answer through the proxy: %v", err)
	}
	return string(b)
}

// serverState is the observed state of backend web's server: "up" or
// "down", from the stats endpoint when it answers, else from the last
// state change logged for it (initially up).
func serverState(t *testing.T, in *instance, server string) string {
	t.Helper()
	if r := in.Do("GET", "/api/v1/stats", nil); r.Status == http.StatusOK {
		var snap struct {
			Backends []struct {
				Name    string `json:"name"`
				Servers []struct {
					Name string `json:"name"`
					Up   bool   `json:"up"`
				} `json:"servers"`
			} `json:"backends"`
		}
		r.JSON(t, &snap)
		for _, b := range snap.Backends {
			for _, s := range b.Servers {
				if b.Name == "web" && s.Name == server {
					if s.Up {
						return "up"
					}
					return "down"
				}
			}
		}
		t.Fatalf("server web/%s not in stats: %s", server, r.Body)
	}
	return loggedState(in.Logs(), server)
}

// loggedState is the "to" of the last "server health changed" line of
// web/server, "up" when there is none. The tests of this file start
// spliced with --log-format text (the default, auto, logs JSON when stderr
// is a pipe) and read slog's text lines.
func loggedState(logs, server string) string {
	state := "up"
	for _, line := range strings.Split(logs, "\n") {
		if !strings.Contains(line, `msg="server health changed" backend=web server=`+server+" ") {
			continue
		}
		if strings.Contains(line, " to=down ") {
			state = "down"
		} else if strings.Contains(line, " to=up ") {
			state = "up"
		}
	}
	return state
}

func countLines(logs, substr string) int {
	n := 0
	for _, line := range strings.Split(logs, "\n") {
		if strings.Contains(line, substr) {
			n++
		}
	}
	return n
}

// TestHealthCheckDownAndBackUp: a server whose check fails is taken out
// of balancing within bounded time, comes back after rise successes and
// receives traffic again; a killed origin goes down the same way; removing
// the health check sets every server up.
func TestHealthCheckDownAndBackUp(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "", "--log-format", "text")
	a, b := newHealthOrigin(t, "A"), newHealthOrigin(t, "B")
	// Checks time out after 1 s, not 100 ms: the origins run in this
	// process, and on a loaded machine healthy B missed two 100 ms
	// answers in a row ("timeout (response)"), went down with A, and the
	// request through the proxy found no server. Nothing here is about
	// a timeout (A fails by its status, then by a refused connect).
	port := setupHealth(t, in, map[string]any{
		"type": "http", "path": "/health", "interval_ms": 1000, "timeout_ms": 1000, "rise": 2, "fall": 2,
	}, a.server("s1"), b.server("s2"))
	in.waitLog(t, `msg="health checks started" backend=web type=http`)
	testutil.Eventually(t, 15*time.Second, func() bool {
		return a.checks.Load() >= 2 && b.checks.Load() >= 2 && serverState(t, in, "s1") == "up" && serverState(t, in, "s2") == "up"
	}, "both origins checked and up")
	seen := map[string]int{}
	for range 8 {
		seen[who(t, port)]++
	}
	if seen["A"] == 0 || seen["B"] == 0 {
		t.Fatalf("both healthy, traffic %v", seen)
	}

	// A's health endpoint fails while A still answers traffic: any
	// connection that reaches A after it is down is a balancing bug.
	a.healthy.Store(false)
	testutil.Eventually(t, 15*time.Second, func() bool { return serverState(t, in, "s1") == "down" }, "s1 down")
	if a.failed.Load() < 2 {
		t.Errorf("s1 down after %d failed checks, fall is 2", a.failed.Load())
	}
	in.waitLog(t, `backend=web server=s1 from=up to=down reason="status 503" check=http`)
	hits := a.hits.Load()
	for i := range 10 {
		if got := who(t, port); got != "B" {
			t.Fatalf("connection %d went to %s while s1 is down", i, got)
		}
	}
	if a.hits.Load() != hits {
		t.Fatal("a down server got traffic")
	}

	// New generations keep the observed state: an unrelated change keeps
	// the running checks, a changed interval restarts them, and s1 stays
	// down through both.
	mustOK(t, in.Do("PATCH", "/api/v1/backends/web", map[string]any{"timeouts": map[string]any{"connect_ms": 900}}), "connect_ms")
	mustOK(t, in.Do("PATCH", "/api/v1/backends/web", map[string]any{"health_check": map[string]any{"interval_ms": 1100, "timeout_ms": 1000}}), "interval")
	testutil.Eventually(t, 15*time.Second, func() bool { return countLines(in.Logs(), `msg="health checks started" backend=web`) >= 2 },
		"the restarted checks logged")
	if n := countLines(in.Logs(), `msg="health checks started" backend=web`); n != 2 {
		t.Errorf("health checks started %d times, want 2 (first config, changed interval)", n)
	}
	for i := range 4 {
		if got := who(t, port); got != "B" {
			t.Fatalf("connection %d went to %s after a new generation while s1 is down", i, got)
		}
	}
	if st := serverState(t, in, "s1"); st != "down" {
		t.Fatalf("s1 is %s after new generations while failing", st)
	}

	// Killed, then back: up after rise (2) successful checks, then traffic.
	a.kill()
	ok0 := a.checks.Load()
	a.healthy.Store(true)
	a.restart()
	testutil.Eventually(t, 15*time.Second, func() bool { return serverState(t, in, "s1") == "up" }, "s1 up again")
	if n := a.checks.Load() - ok0; n < 2 {
		t.Errorf("s1 up after %d successful checks, rise is 2", n)
	}
	testutil.Eventually(t, 15*time.Second, func() bool { return who(t, port) == "A" }, "traffic on s1 again")

	// Killed while up: the port refuses, s1 goes down, clients only see B.
	a.kill()
	testutil.Eventually(t, 15*time.Second, func() bool { return serverState(t, in, "s1") == "down" }, "killed s1 down")
	in.waitLog(t, `backend=web server=s1 from=up to=down reason="connection refused"`)
	for i := range 6 {
		if got := who(t, port); got != "B" {
			t.Fatalf("connection %d answered by %q with s1 dead", i, got)
		}
	}
	if st := serverState(t, in, "s2"); st != "up" {
		t.Errorf("healthy s2 is %s", st)
	}

	// A witness: backend "clock" checks one origin per loop at the same
	// interval. Once each has been checked three more times, every loop's
	// timers have run three intervals past the removal below: a check of
	// web still armed would have reached its origin by then.
	var loops []map[string]any
	in.MustDo(200, "GET", "/api/v1/activity", nil).JSON(t, &loops)
	var clock []*healthOrigin
	var clockServers []map[string]any
	for i := range loops {
		o := newHealthOrigin(t, "W"+strconv.Itoa(i))
		clock = append(clock, o)
		clockServers = append(clockServers, o.server("w"+strconv.Itoa(i)))
	}
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "clock", "mode": "tcp", "servers": clockServers,
		"health_check": map[string]any{"type": "http", "path": "/health", "interval_ms": 1100, "timeout_ms": 1000, "rise": 2, "fall": 2},
	})
	clockTicks := func(n int64) {
		t.Helper()
		var want []int64
		for _, o := range clock {
			want = append(want, o.checks.Load()+n)
		}
		testutil.Eventually(t, 15*time.Second, func() bool {
			for i, o := range clock {
				if o.checks.Load() < want[i] {
					return false
				}
			}
			return true
		}, "%d more checks of every witness origin", n)
	}
	clockTicks(1)

	// No health check any more: every server is up again (s1 is still
	// dead; the tcp retry then reaches s2).
	mustOK(t, in.Do("PATCH", "/api/v1/backends/web", map[string]any{"health_check": nil}), "remove health check")
	in.waitLog(t, `msg="health checks stopped: servers considered up" backend=web`)
	if r := in.Do("GET", "/api/v1/stats", nil); r.Status == http.StatusOK {
		if st := serverState(t, in, "s1"); st != "up" {
			t.Errorf("s1 is %s after the health check was removed", st)
		}
	}
	for range 4 {
		if got := who(t, port); got != "B" {
			t.Fatalf("answered by %q", got)
		}
	}
	// A check sent before the stop is answered within the interval that
	// follows; from then on no check may come for three intervals.
	clockTicks(1)
	checks := b.checks.Load()
	clockTicks(3)
	if n := b.checks.Load() - checks; n != 0 {
		t.Errorf("%d health checks in three intervals after the check was removed", n)
	}
}

// TestHealthCheckFallRespected: with fall=3, one failed check leaves the
// server up and in balancing; three in a row take it down.
func TestHealthCheckFallRespected(t *testing.T) {
	in := startSpliced(t, "", "--log-format", "text")
	a, b := newHealthOrigin(t, "A"), newHealthOrigin(t, "B")
	port := setupHealth(t, in, map[string]any{
		"type": "http", "path": "/health", "interval_ms": 200, "timeout_ms": 200, "rise": 2, "fall": 3,
	}, a.server("s1"), b.server("s2"))
	testutil.Eventually(t, 5*time.Second, func() bool { return a.checks.Load() >= 2 }, "s1 checked")

	a.failNext.Store(1)
	ok := a.checks.Load()
	testutil.Eventually(t, 5*time.Second, func() bool {
		return a.failed.Load() == 1 && a.checks.Load() >= ok+2
	}, "one failed check then two good ones")
	if st := serverState(t, in, "s1"); st != "up" || countLines(in.Logs(), `msg="server health changed"`) != 0 {
		t.Fatalf("one failed check with fall=3: s1 %s, logs:\n%s", st, in.Logs())
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return who(t, port) == "A" }, "traffic on s1")

	a.healthy.Store(false)
	testutil.Eventually(t, 5*time.Second, func() bool { return serverState(t, in, "s1") == "down" }, "s1 down")
	// Seen within 10 ms of the change, an interval is 200 ms: the count is
	// that of the failures that took it down (plus the one before).
	if n := a.failed.Load() - 1; n < 3 {
		t.Errorf("s1 down after %d consecutive failed checks, fall is 3", n)
	}
}

// TestHealthCheckNoFDLeak: checks against a dead server and a live one
// leave the process's fd count where it was.
func TestHealthCheckNoFDLeak(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "", "--log-format", "text")
	a := newHealthOrigin(t, "A")
	dead := testutil.FreePort(t)
	setupHealth(t, in, map[string]any{
		"type": "http", "path": "/health", "interval_ms": 50, "timeout_ms": 50, "rise": 1, "fall": 1,
	}, a.server("s1"), map[string]any{"name": "s2", "address": "127.0.0.1", "port": dead})
	testutil.Eventually(t, 5*time.Second, func() bool { return serverState(t, in, "s2") == "down" }, "s2 down")
	start := openFDs(t, in.Pid())
	n := a.checks.Load()
	testutil.Eventually(t, 5*time.Second, func() bool { return a.checks.Load() >= n+20 }, "20 more checks")
	// A probe may be in flight at either count: allow for the two servers'.
	if d := openFDs(t, in.Pid()) - start; d > 2 || d < -2 {
		t.Errorf("fd count moved by %d over 20 check intervals", d)
	}
}
