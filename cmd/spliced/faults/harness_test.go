package faults

// The harness: one binary built per run and one process per case
// (internal/e2e, which fails a case whose process reported a race or a
// panic), the three checks every case ends with (alive, admin API
// answers, what the client got), origins on raw sockets and raw-socket
// clients.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// proc is one running spliced: an e2e.Node, stopped with SIGTERM at the
// end of the test and checked then for races, panics and a death the test
// did not expect (ExpectDeath).
type proc struct {
	*e2e.Node
	t        testing.TB
	cmd      *exec.Cmd
	admin    string
	stateDir string
	logs     *testutil.SyncBuffer
	exited   chan struct{} // closed once exitErr is set
	exitErr  error
	client   *http.Client
}

// startOpts change how the binary runs.
type startOpts struct {
	nofile int // RLIMIT_NOFILE, soft and hard (0: inherited)
}

// start runs the binary on a free admin port and a fresh state directory
// and waits for /healthz; the process is stopped and checked at the end
// of the test and its logs shown if the test failed.
func start(t testing.TB, o startOpts) *proc {
	t.Helper()
	return startWith(t, o, t.TempDir())
}

// startIn is start on an existing state directory.
func startIn(t testing.TB, stateDir string) *proc {
	t.Helper()
	return startWith(t, startOpts{}, stateDir)
}

func startWith(t testing.TB, o startOpts, stateDir string) *proc {
	t.Helper()
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	var wrap []string
	if o.nofile > 0 {
		// prlimit sets the limits and execs the binary: same pid.
		wrap = []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", o.nofile, o.nofile), "--"}
	}
	n := e2e.Start(t, e2e.Options{Wrap: wrap, StateDir: stateDir, Client: client, Args: []string{"--log-format", "json"}})
	p := &proc{Node: n, t: t, cmd: n.Cmd, admin: n.Admin, stateDir: n.StateDir, logs: n.Output(),
		exited: make(chan struct{}), client: client}
	go func() { <-n.Exited(); p.exitErr = n.ExitErr(); close(p.exited) }()
	return p
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func (p *proc) pid() int { return p.cmd.Process.Pid }

// api sends a request to the admin API; body is nil or marshalled as JSON.
func (p *proc) api(method, path string, body any) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		j, err := json.Marshal(body)
		if err != nil {
			return 0, nil, err
		}
		rd = bytes.NewReader(j)
	}
	req, err := http.NewRequest(method, "http://"+p.admin+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := p.client.Do(req)
	if err != nil {
		return 0, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, b, err
}

// must is api that fails the test unless the answer is a 2xx.
func (p *proc) must(method, path string, body any) []byte {
	p.t.Helper()
	st, b, err := p.api(method, path, body)
	if err != nil || st < 200 || st > 299 {
		p.t.Fatalf("%s %s: status %d, %v: %s", method, path, st, err, b)
	}
	return b
}

// healthy is the check every case ends with: the process runs and the
// admin API answers within 2 s.
func (p *proc) healthy(t testing.TB) {
	t.Helper()
	select {
	case <-p.exited:
		t.Fatalf("spliced died: %v", p.exitErr)
	default:
	}
	c := &http.Client{Timeout: 2 * time.Second}
	r, err := c.Get("http://" + p.admin + "/api/v1/info")
	if err != nil {
		t.Fatalf("admin API does not answer: %v", err)
	}
	r.Body.Close()
	if r.StatusCode != 200 {
		t.Fatalf("admin API answers %d", r.StatusCode)
	}
	if r := e2e.Reports(p.logs.String()); len(r) > 0 {
		t.Fatalf("the process reported %d data races or panics, the first:\n%s", len(r), r[0])
	}
	// gauges never go below zero, whatever the fault
	r, err = c.Get("http://" + p.admin + "/api/v1/stats")
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	var doc any
	err = json.NewDecoder(r.Body).Decode(&doc)
	r.Body.Close()
	if err != nil {
		t.Fatalf("stats: %v", err)
	}
	if where := negativeGauge(doc, ""); where != "" {
		t.Fatalf("a negative gauge in the stats: %s", where)
	}
}

// negativeGauge returns the path of a conn_cur or queue below zero in a
// decoded stats document, or "".
func negativeGauge(v any, path string) string {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			if f, ok := e.(float64); ok && (k == "conn_cur" || k == "queue") && f < 0 {
				return fmt.Sprintf("%s/%s = %v", path, k, f)
			}
			if w := negativeGauge(e, path+"/"+k); w != "" {
				return w
			}
		}
	case []any:
		for i, e := range x {
			if w := negativeGauge(e, path+"/"+strconv.Itoa(i)); w != "" {
				return w
			}
		}
	}
	return ""
}

// counts is the part of an object's stats the cases read.
type counts struct {
	Name          string `json:"name"`
	ConnTotal     int64  `json:"conn_total"`
	ConnCur       int64  `json:"conn_cur"`
	Requests      int64  `json:"requests"`
	Errors        int64  `json:"errors"`
	ConnectErrors int64  `json:"connect_errors"`
	Retries       int64  `json:"retries"`
	NoServer      int64  `json:"no_server"`
	Timeouts      int64  `json:"timeouts"`
	Aborts        int64  `json:"aborts"`
	Queue         int64  `json:"queue"`
	Status        map[string]int64
}

func (c counts) String() string {
	return fmt.Sprintf("conn_total=%d conn_cur=%d requests=%d errors=%d connect_errors=%d retries=%d no_server=%d timeouts=%d aborts=%d status=%v",
		c.ConnTotal, c.ConnCur, c.Requests, c.Errors, c.ConnectErrors, c.Retries, c.NoServer, c.Timeouts, c.Aborts, c.Status)
}

// stats returns the counters of frontend fe and backend be.
func (p *proc) stats(fe, be string) (f, b counts) {
	p.t.Helper()
	var doc struct {
		Frontends []counts `json:"frontends"`
		Backends  []counts `json:"backends"`
	}
	if err := json.Unmarshal(p.must("GET", "/api/v1/stats", nil), &doc); err != nil {
		p.t.Fatal(err)
	}
	for _, x := range doc.Frontends {
		if x.Name == fe {
			f = x
		}
	}
	for _, x := range doc.Backends {
		if x.Name == be {
			b = x
		}
	}
	return f, b
}

// rssKiB is the resident set of the process (VmRSS).
func (p *proc) rssKiB(t testing.TB) int {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
			n, _ := strconv.Atoi(strings.Fields(v)[0])
			return n
		}
	}
	t.Fatal("no VmRSS")
	return 0
}

// cpuTicks is user+system CPU time of the process in clock ticks.
func (p *proc) cpuTicks(t testing.TB) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

func (p *proc) openFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", p.pid()))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// ---- configuration through the API ----

type srv struct {
	name string
	port int
}

func servers(ss ...srv) []map[string]any {
	out := []map[string]any{}
	for _, s := range ss {
		out = append(out, map[string]any{"name": s.name, "address": "127.0.0.1", "port": s.port})
	}
	return out
}

// backend creates backend name (mode, roundrobin, retries 1) with timeouts
// (connect_ms 1000 and server_ms 5000 unless given: generous, since the
// Go origins share 2 CPUs with the -race binary and the other cases; the
// cases about a timeout set it short themselves).
func (p *proc) backend(name, mode string, timeouts map[string]any, ss ...srv) {
	p.t.Helper()
	to := map[string]any{"connect_ms": 1000, "server_ms": 5000}
	for k, v := range timeouts {
		to[k] = v
	}
	p.must("POST", "/api/v1/backends", map[string]any{"name": name, "mode": mode,
		"balance": "roundrobin", "servers": servers(ss...), "timeouts": to, "retries": 1})
}

// frontend creates frontend name with one bind b1 on a free port to
// backend be, with extra fields; it returns the port.
func (p *proc) frontend(name, mode, be string, extra map[string]any) int {
	p.t.Helper()
	port := testutil.FreePort(p.t)
	fe := map[string]any{"name": name, "mode": mode, "default_backend": be,
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}}
	for k, v := range extra {
		fe[k] = v
	}
	p.must("POST", "/api/v1/frontends", fe)
	return port
}

// ---- origins ----

// listen runs serve on its own goroutine for every connection accepted on
// a free 127.0.0.1 port; the listener and every connection close at the
// end of the test. It returns the port and the count of accepted
// connections.
func listen(t testing.TB, serve func(c net.Conn)) (int, *atomic.Int64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var n atomic.Int64
	return serveCounted(t, ln, &n, serve), &n
}

// serveOn is listen on a listener of the caller's.
func serveOn(t testing.TB, ln net.Listener, serve func(c net.Conn)) int {
	return serveCounted(t, ln, new(atomic.Int64), serve)
}

func serveCounted(t testing.TB, ln net.Listener, n *atomic.Int64, serve func(c net.Conn)) int {
	var mu sync.Mutex
	var open []net.Conn
	done := false
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		done = true
		for _, c := range open {
			c.Close()
		}
		mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n.Add(1)
			mu.Lock()
			if done {
				mu.Unlock()
				c.Close()
				return
			}
			open = append(open, c)
			mu.Unlock()
			go serve(c)
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

// httpOrigin serves keep-alive HTTP/1.1: it reads each request (head and
// Content-Length or chunked body, with Go's parser) and calls answer,
// which writes the response itself and says whether to go on.
func httpOrigin(t testing.TB, answer func(c net.Conn, r *http.Request) bool) (int, *atomic.Int64) {
	return listen(t, func(c net.Conn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if _, err := io.Copy(io.Discard, r.Body); err != nil {
				return
			}
			if !answer(c, r) {
				return
			}
		}
	})
}

func okResp(body string) string {
	return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// named is an origin that answers 200 with its name to every request.
func named(t testing.TB, name string) srv {
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		_, err := io.WriteString(c, okResp(name))
		return err == nil
	})
	return srv{name, port}
}

// rst closes c with SO_LINGER 0: the peer gets a reset.
func rst(c net.Conn) {
	if tc, ok := c.(*net.TCPConn); ok {
		tc.SetLinger(0)
	}
	c.Close()
}

// ---- clients ----

func dial(t testing.TB, port int) net.Conn {
	t.Helper()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
	if err != nil {
		t.Fatalf("dial proxy: %v", err)
	}
	t.Cleanup(func() { c.Close() })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// readResp reads one response and its whole body.
func readResp(br *bufio.Reader, method string) (*http.Response, []byte, error) {
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		return nil, nil, err
	}
	b, err := io.ReadAll(resp.Body)
	return resp, b, err
}

// closedAfter reads what is left on the connection: it must be nothing,
// ended by a close (EOF or a reset), within d.
func closedAfter(t testing.TB, c net.Conn, br *bufio.Reader, d time.Duration) {
	t.Helper()
	c.SetReadDeadline(time.Now().Add(d))
	b, err := io.ReadAll(br)
	if len(b) > 0 {
		t.Fatalf("%d more bytes after the answer: %q", len(b), tail(string(b), 200))
	}
	if ne, ok := err.(net.Error); ok && ne.Timeout() {
		t.Fatalf("connection still open %v after the answer", d)
	}
}

// isReset says whether err is a connection reset.
func isReset(err error) bool {
	return err != nil && (errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE))
}

// getLoad is keep-alive GET traffic to a frontend from a few goroutines,
// until stop: every answer other than a 200 counts as an error (the first
// one kept for the message), and last holds the latest 200's body.
type getLoad struct {
	reqs, errs atomic.Int64
	firstErr   atomic.Value // string
	last       atomic.Value // string
	stop       chan struct{}
	wg         sync.WaitGroup
}

// startGETs starts workers goroutines sending GET / to 127.0.0.1:port over
// kept-alive connections (5 s per request).
func startGETs(t *testing.T, port, workers int) *getLoad {
	tr := &http.Transport{MaxIdleConnsPerHost: workers}
	t.Cleanup(tr.CloseIdleConnections)
	client := &http.Client{Transport: tr, Timeout: 5 * time.Second}
	url := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	l := &getLoad{stop: make(chan struct{})}
	l.last.Store("")
	for i := 0; i < workers; i++ {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for {
				select {
				case <-l.stop:
					return
				default:
				}
				resp, err := client.Get(url)
				if err == nil {
					body, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if resp.StatusCode != 200 {
						err = fmt.Errorf("status %d", resp.StatusCode)
					} else {
						l.last.Store(string(body))
					}
				}
				if err != nil {
					l.errs.Add(1)
					l.firstErr.CompareAndSwap(nil, err.Error())
				} else {
					l.reqs.Add(1)
				}
			}
		}()
	}
	return l
}

// Stop ends the load and waits for its goroutines.
func (l *getLoad) Stop() {
	close(l.stop)
	l.wg.Wait()
}
