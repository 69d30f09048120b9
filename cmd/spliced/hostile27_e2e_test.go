package main

// Issue 27's changes (server changes off the request path and into a
// journal, the close path, the loop's waits) attacked through the binary
// and its REST API.

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net"
	"net/http"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// h27Server is what the test expects of one server of the backend.
type h27Server struct {
	Port   int
	Weight int
	Admin  string
}

// h27Op is a server change sent, whose answer may not have come (the
// process was killed meanwhile): after it, the server is want (gone when
// !present).
type h27Op struct {
	name         string
	present      bool
	want         h27Server
	method, path string
}

// h27Ack is a change the API acknowledged: its audit entry must exist.
type h27Ack struct {
	method, path string
	gen          int64
}

// h27Writer changes its own servers (w<i>-<k>) at random, one request at
// a time, and keeps what the answers acknowledged.
type h27Writer struct {
	id      int
	rnd     *rand.Rand
	model   map[string]h27Server // acknowledged
	pending *h27Op               // sent, no answer (the kill)
	maxGen  int64
	n       int
	acks    []h27Ack      // acknowledged this cycle
	acked   *atomic.Int64 // every writer's acknowledged changes: the kill's pace
	err     error
}

var h27Client = &http.Client{Timeout: 30 * time.Second}

func h27Do(admin, method, path, body string) (int, http.Header, []byte, error) {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, "http://"+admin+path, rd)
	if err != nil {
		return 0, nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if method == "PATCH" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := h27Client.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// step sends one random change of the writer's servers; false once the
// process is gone (pending holds the change without answer) or on an
// unexpected answer (err).
func (w *h27Writer) step(admin, backend string) bool {
	name := fmt.Sprintf("w%d-%02d", w.id, w.rnd.Intn(24))
	cur, present := w.model[name]
	states := []string{"ready", "drain", "maint"}
	var method, path, body string
	op := h27Op{name: name, present: true, want: cur}
	switch r := w.rnd.Intn(10); {
	case !present:
		op.want = h27Server{Port: 20000 + w.rnd.Intn(40000), Weight: w.rnd.Intn(257), Admin: states[w.rnd.Intn(3)]}
		method, path = "POST", "/api/v1/backends/"+backend+"/servers"
		body = fmt.Sprintf(`{"name":%q,"address":"127.0.0.1","port":%d,"weight":%d,"admin_state":%q}`, name, op.want.Port, op.want.Weight, op.want.Admin)
	case r < 2:
		op.present = false
		method, path = "DELETE", "/api/v1/backends/"+backend+"/servers/"+name
	case r < 5:
		op.want.Weight = w.rnd.Intn(257)
		method, path, body = "PATCH", "/api/v1/backends/"+backend+"/servers/"+name, fmt.Sprintf(`{"weight":%d}`, op.want.Weight)
	case r < 8:
		op.want.Admin = states[w.rnd.Intn(3)]
		method, path, body = "PATCH", "/api/v1/backends/"+backend+"/servers/"+name, fmt.Sprintf(`{"admin_state":%q}`, op.want.Admin)
	default:
		op.want.Port = 20000 + w.rnd.Intn(40000)
		op.want.Weight = w.rnd.Intn(257)
		method, path = "PUT", "/api/v1/backends/"+backend+"/servers/"+name
		body = fmt.Sprintf(`{"name":%q,"address":"127.0.0.1","port":%d,"weight":%d,"admin_state":%q}`, name, op.want.Port, op.want.Weight, op.want.Admin)
	}
	op.method, op.path = method, path
	w.pending = &op
	st, hdr, b, err := h27Do(admin, method, path, body)
	if err != nil {
		return false // the kill: pending stays
	}
	w.pending = nil
	if st != 200 && st != 201 && st != 204 {
		w.err = fmt.Errorf("%s %s %s: %d %s", method, path, body, st, b)
		return false
	}
	g, err := strconv.ParseInt(hdr.Get("X-Spliced-Generation"), 10, 64)
	if err != nil {
		w.err = fmt.Errorf("%s %s: no X-Spliced-Generation (%q)", method, path, hdr.Get("X-Spliced-Generation"))
		return false
	}
	w.maxGen = max(w.maxGen, g)
	w.acks = append(w.acks, h27Ack{method, path, g})
	if op.present {
		w.model[name] = op.want
	} else {
		delete(w.model, name)
	}
	w.n++
	w.acked.Add(1)
	return true
}

// h27AuditEntry is what the test reads of an audit entry.
type h27AuditEntry struct {
	Seq        int64  `json:"seq"`
	Method     string `json:"method"`
	Path       string `json:"path"`
	Status     int    `json:"status"`
	Generation int64  `json:"generation"`
	Recovered  string `json:"recovered"`
	Plan       *struct {
		Items []struct {
			Object string `json:"object"`
		} `json:"items"`
	} `json:"plan"`
}

// names: the entry's plan names server name (POSTs share their path).
func (e h27AuditEntry) names(name string) bool {
	if e.Plan == nil {
		return false
	}
	for _, it := range e.Plan.Items {
		if strings.HasSuffix(it.Object, "/"+name) {
			return true
		}
	}
	return false
}

type h27AuditLog map[string][]h27AuditEntry // by method and path

func (l h27AuditLog) has(method, path string, ok func(h27AuditEntry) bool) bool {
	for _, e := range l[method+" "+path] {
		if ok(e) {
			return true
		}
	}
	return false
}

// h27Audit reads the whole audit trail.
func h27Audit(t *testing.T, in *instance) h27AuditLog {
	t.Helper()
	l := h27AuditLog{}
	before := int64(0)
	for page := 0; page < 100; page++ {
		q := "/api/v1/audit?limit=1000"
		if before > 0 {
			q += "&before=" + strconv.FormatInt(before, 10)
		}
		var es []h27AuditEntry
		in.MustDo(200, "GET", q, nil).JSON(t, &es)
		if len(es) == 0 {
			return l
		}
		for _, e := range es {
			l[e.Method+" "+e.Path] = append(l[e.Method+" "+e.Path], e)
			if before == 0 || e.Seq < before {
				before = e.Seq
			}
		}
	}
	t.Fatal("more than 100 pages of audit")
	return nil
}

// h27Servers reads the backend's servers as the model holds them.
func h27Servers(t *testing.T, in *instance, backend string) map[string]h27Server {
	t.Helper()
	var list []struct {
		Name       string `json:"name"`
		Port       int    `json:"port"`
		Weight     *int   `json:"weight"`
		AdminState string `json:"admin_state"`
	}
	in.MustDo(200, "GET", "/api/v1/backends/"+backend+"/servers", nil).JSON(t, &list)
	got := map[string]h27Server{}
	for _, s := range list {
		w := 1
		if s.Weight != nil {
			w = *s.Weight
		}
		a := s.AdminState
		if a == "" {
			a = "ready"
		}
		if _, dup := got[s.Name]; dup {
			t.Errorf("server %s listed twice", s.Name)
		}
		got[s.Name] = h27Server{Port: s.Port, Weight: w, Admin: a}
	}
	return got
}

// TestHostile27ServerChangesSurviveKill9Bursts: four writers change
// servers (add, delete, patch weight or admin_state, replace) as fast as
// the API answers, across many snapshots, and the process is killed -9 in
// the middle, five times over on the same state directory. After each
// restart every acknowledged change is there, the one in flight is there
// or not (whole), nothing else changed, and the acknowledged generation
// and its revision read back.
func TestHostile27ServerChangesSurviveKill9Bursts(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	dir := in.StateDir
	var seed []string
	for i := range 300 {
		seed = append(seed, fmt.Sprintf(`{"name":"base%03d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, 10000+i))
	}
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"big","mode":"tcp","servers":[`+strings.Join(seed, ",")+`]}`)
	base := h27Servers(t, in, "big")
	// A fifth writer replaces a backend whole (PUT) with another set of
	// servers, many at once, between the others' one-server deltas.
	var order, orderPending []string
	for i := range 12 {
		order = append(order, fmt.Sprintf("o%02d", i))
	}
	putOrder := func(names []string) string {
		var list []string
		for _, n := range names {
			list = append(list, fmt.Sprintf(`{"name":%q,"address":"127.0.0.1","port":9000,"admin_state":"maint"}`, n))
		}
		return `{"name":"moved","mode":"tcp","servers":[` + strings.Join(list, ",") + `]}`
	}
	in.MustDo(201, "POST", "/api/v1/backends", putOrder(order))
	readOrder := func() []string {
		var list []struct {
			Name string `json:"name"`
		}
		in.MustDo(200, "GET", "/api/v1/backends/moved/servers", nil).JSON(t, &list)
		var out []string
		for _, s := range list {
			out = append(out, s.Name)
		}
		return out
	}
	var moverErr error
	var acked atomic.Int64
	writers := make([]*h27Writer, 4)
	for i := range writers {
		writers[i] = &h27Writer{id: i, rnd: rand.New(rand.NewSource(int64(i) + time.Now().UnixNano())), model: map[string]h27Server{}, acked: &acked}
	}
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	total, inflight, applied := 0, 0, 0
	defer func() { t.Logf("%d changes in flight at a kill, %d of them applied", inflight, applied) }()
	for cycle := range 5 {
		var wg sync.WaitGroup
		stop := make(chan struct{})
		for _, w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if !w.step(in.Admin, "big") {
						return
					}
				}
			}()
		}
		wg.Add(1)
		seed := rnd.Int63()
		go func() {
			defer wg.Done()
			mr := rand.New(rand.NewSource(seed))
			for {
				select {
				case <-stop:
					return
				case <-time.After(time.Duration(mr.Intn(20)) * time.Millisecond):
				}
				var next []string // a random subset, never empty, in order
				for i := range 12 {
					if mr.Intn(2) == 0 || i == 11 && len(next) == 0 {
						next = append(next, fmt.Sprintf("o%02d", i))
					}
				}
				orderPending = next
				st, _, b, err := h27Do(in.Admin, "PUT", "/api/v1/backends/moved", putOrder(next))
				if err != nil {
					return // the kill: orderPending stays
				}
				if st != 200 {
					moverErr = fmt.Errorf("PUT /api/v1/backends/moved: %d %s", st, b)
					return
				}
				order, orderPending = next, nil
			}
		}()
		// Kill after a random number of acknowledged changes (bounded
		// in time too), in the middle of the writers' requests.
		want := 40 + rnd.Intn(120)
		for end := time.Now().Add(30 * time.Second); time.Now().Before(end) && acked.Load()-int64(total) < int64(want); {
			time.Sleep(time.Millisecond) // a pace, not a synchronisation
		}
		in.ExpectDeath("killed -9 in a burst of server changes")
		in.Kill()
		close(stop)
		wg.Wait()
		var maxGen int64
		n := 0
		for _, w := range writers {
			if w.err != nil {
				t.Fatalf("cycle %d, writer %d: %v", cycle, w.id, w.err)
			}
			maxGen = max(maxGen, w.maxGen)
			n += w.n
		}
		t.Logf("cycle %d: %d changes acknowledged (%d in all), last generation %d", cycle, n-total, n, maxGen)
		total = n
		in = startSpliced(t, dir)
		if moverErr != nil {
			t.Fatalf("cycle %d: %v", cycle, moverErr)
		}
		switch o := readOrder(); {
		case slices.Equal(o, order):
		case orderPending != nil && slices.Equal(o, orderPending):
			order = orderPending
		default:
			t.Errorf("cycle %d: the replaced backend's servers are %v; acknowledged %v, in flight %v", cycle, o, order, orderPending)
		}
		orderPending = nil
		got := h27Servers(t, in, "big")
		for name, s := range base {
			if got[name] != s {
				t.Errorf("cycle %d: %s is %+v, want %+v (never changed)", cycle, name, got[name], s)
			}
			delete(got, name)
		}
		audit := h27Audit(t, in)
		for _, w := range writers {
			for _, a := range w.acks {
				if !audit.has(a.method, a.path, func(e h27AuditEntry) bool { return e.Generation == a.gen && e.Status/100 == 2 }) {
					t.Errorf("cycle %d: no audit entry for the acknowledged %s %s (generation %d)", cycle, a.method, a.path, a.gen)
				}
			}
			w.acks = nil
			p := w.pending
			for name, s := range w.model {
				if p != nil && p.name == name {
					continue
				}
				if g, ok := got[name]; !ok || g != s {
					t.Errorf("cycle %d: acknowledged %s %+v, after the restart %+v (present %v)", cycle, name, s, g, ok)
				}
			}
			if p != nil {
				g, ok := got[p.name]
				before, was := w.model[p.name]
				real := was != p.present || (was && before != p.want) // the change changes something
				inflight++
				// An entry written before the kill cut the answer off (status
				// 2xx), or one the restart recovered from the revision.
				recovered := audit.has(p.method, p.path, func(e h27AuditEntry) bool {
					return e.Generation > w.maxGen && (e.Recovered == "applied" || e.Status/100 == 2) && (p.method != "POST" || e.names(p.name))
				})
				switch {
				case ok == was && (!ok || g == before):
					if real && recovered {
						t.Errorf("cycle %d: %s %s in flight, not applied, has an audit entry of a success (%+v)", cycle, p.method, p.path, audit[p.method+" "+p.path])
					}
				case ok == p.present && (!ok || g == p.want):
					if p.present {
						w.model[p.name] = p.want
					} else {
						delete(w.model, p.name)
					}
					applied++
					if !recovered {
						t.Errorf("cycle %d: %s %s in flight, applied, has no audit entry of a success (%+v)", cycle, p.method, p.path, audit[p.method+" "+p.path])
					}
				default:
					t.Errorf("cycle %d: %s in flight (present %v %+v, from present %v %+v) reads present %v %+v", cycle, p.name, p.present, p.want, was, before, ok, g)
				}
				w.pending = nil
			}
			for name := range got {
				if _, ok := w.model[name]; ok {
					delete(got, name)
				}
			}
		}
		for name, s := range got {
			if strings.HasPrefix(name, "w") {
				t.Errorf("cycle %d: %s %+v after the restart, never acknowledged present", cycle, name, s)
			}
		}
		var cfg struct {
			Generation int64 `json:"generation"`
		}
		in.MustDo(200, "GET", "/api/v1/config", nil).JSON(t, &cfg)
		if cfg.Generation < maxGen {
			t.Fatalf("cycle %d: generation %d after the restart, %d was acknowledged", cycle, cfg.Generation, maxGen)
		}
		for g := maxGen; g > maxGen-40 && g > 1; g-- {
			if st, _, b, err := h27Do(in.Admin, "GET", fmt.Sprintf("/api/v1/config/revisions/%d", g), ""); err != nil || st != 200 {
				t.Errorf("cycle %d: revision %d: %d %s %v", cycle, g, st, b, err)
				break
			}
		}
		if t.Failed() {
			return
		}
	}
}

// h27Origin is an http origin answering its own name (HTTP/1.1, and
// HTTP/2 with prior knowledge).
func h27Origin(t *testing.T, name string) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var p http.Protocols
	p.SetHTTP1(true)
	p.SetUnencryptedHTTP2(true)
	srv := &http.Server{Protocols: &p, Handler: http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { io.WriteString(w, name) })}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// TestHostile27ServerChurnRoutesAsTheModel: random adds, deletes, weight
// and admin_state changes and replacements of the servers of a backend in
// random order; after each batch GET lists exactly the model, and the
// data plane sends requests to exactly the servers that are ready with a
// weight (never to a deleted, drained, maintained or zero-weight one, and
// to each of the others).
func TestHostile27ServerChurnRoutesAsTheModel(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const k = 10
	ports := map[string]int{}
	for i := range k {
		n := fmt.Sprintf("o%d", i)
		ports[n] = h27Origin(t, n)
	}
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http", "balance": "roundrobin", "servers": []any{}})
	fport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "f", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": fport}}})
	model := map[string]h27Server{}
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	states := []string{"ready", "ready", "drain", "maint"}
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	for batch := range 12 {
		for range 15 {
			name := fmt.Sprintf("o%d", rnd.Intn(k))
			cur, present := model[name]
			var st int
			var b []byte
			switch r := rnd.Intn(10); {
			case !present:
				s := h27Server{Port: ports[name], Weight: rnd.Intn(4), Admin: states[rnd.Intn(4)]}
				st, _, b, _ = h27Do(in.Admin, "POST", "/api/v1/backends/web/servers",
					fmt.Sprintf(`{"name":%q,"address":"127.0.0.1","port":%d,"weight":%d,"admin_state":%q}`, name, s.Port, s.Weight, s.Admin))
				if st == 201 {
					model[name] = s
				}
			case r < 3:
				st, _, b, _ = h27Do(in.Admin, "DELETE", "/api/v1/backends/web/servers/"+name, "")
				if st == 204 {
					delete(model, name)
				}
			case r < 6:
				cur.Weight = rnd.Intn(4)
				st, _, b, _ = h27Do(in.Admin, "PATCH", "/api/v1/backends/web/servers/"+name, fmt.Sprintf(`{"weight":%d}`, cur.Weight))
				if st == 200 {
					model[name] = cur
				}
			case r < 9:
				cur.Admin = states[rnd.Intn(4)]
				st, _, b, _ = h27Do(in.Admin, "PATCH", "/api/v1/backends/web/servers/"+name, fmt.Sprintf(`{"admin_state":%q}`, cur.Admin))
				if st == 200 {
					model[name] = cur
				}
			default:
				cur.Weight = 1 + rnd.Intn(3)
				cur.Admin = "ready"
				st, _, b, _ = h27Do(in.Admin, "PUT", "/api/v1/backends/web/servers/"+name,
					fmt.Sprintf(`{"name":%q,"address":"127.0.0.1","port":%d,"weight":%d,"admin_state":"ready"}`, name, cur.Port, cur.Weight))
				if st == 200 {
					model[name] = cur
				}
			}
			if st/100 != 2 {
				t.Fatalf("batch %d: change of %s: %d %s", batch, name, st, b)
			}
		}
		got := h27Servers(t, in, "web")
		if fmt.Sprint(sortedH27(got)) != fmt.Sprint(sortedH27(model)) {
			t.Fatalf("batch %d: GET lists %v, the model is %v", batch, sortedH27(got), sortedH27(model))
		}
		want := map[string]bool{}
		sum := 0
		for n, s := range model {
			if s.Admin == "ready" && s.Weight > 0 {
				want[n] = true
				sum += s.Weight
			}
		}
		seen := map[string]int{}
		for i := 0; i < 20*sum+20 && len(seen) < len(want); i++ {
			resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/", fport))
			if err != nil {
				t.Fatalf("batch %d: %v", batch, err)
			}
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if len(want) == 0 {
				if resp.StatusCode != 503 {
					t.Fatalf("batch %d: no usable server, got %d %q", batch, resp.StatusCode, body)
				}
				break
			}
			if resp.StatusCode != 200 || !want[string(body)] {
				t.Fatalf("batch %d: %d from %q; the usable servers are %v (model %v)", batch, resp.StatusCode, body, want, sortedH27(model))
			}
			seen[string(body)]++
		}
		if len(seen) != len(want) {
			t.Fatalf("batch %d: requests reached %v; the usable servers are %v (model %v)", batch, seen, want, sortedH27(model))
		}
	}
}

func sortedH27(m map[string]h27Server) []string {
	var out []string
	for n, s := range m {
		out = append(out, fmt.Sprintf("%s:%d/%d/%s", n, s.Port, s.Weight, s.Admin))
	}
	sort.Strings(out)
	return out
}

// h27Pattern is n bytes that differ at every offset modulo 251: a byte
// lost, doubled or moved shows.
func h27Pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i % 251)
	}
	return b
}

// h27TCP serves each connection with serve on a new origin; its port.
func h27TCP(t *testing.T, serve func(c *net.TCPConn)) int {
	t.Helper()
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(30 * time.Second))
		serve(c)
	}).Addr.Port
}

// h27Front makes a tcp (or http) frontend with its own backend of one
// server at port, splice policy splice; the frontend's port.
func h27Front(t *testing.T, in *instance, name, mode, splice string, port int) int {
	t.Helper()
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": name, "mode": mode,
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": port}}})
	fport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": name, "mode": mode, "default_backend": name, "splice": splice,
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": fport}}})
	return fport
}

func h27Dial(t *testing.T, port int) *net.TCPConn {
	t.Helper()
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(30 * time.Second))
	t.Cleanup(func() { c.Close() })
	return c.(*net.TCPConn)
}

// h27ReadAll reads to the end of stream; an error (a reset, the deadline)
// fails the test.
func h27ReadAll(t *testing.T, c net.Conn, stallAt int) []byte {
	t.Helper()
	var out []byte
	buf := make([]byte, 32<<10)
	stalled := stallAt <= 0
	for {
		if !stalled && len(out) >= stallAt {
			stalled = true
			time.Sleep(300 * time.Millisecond) // a client that stops reading mid-transfer: the buffers between fill up
		}
		n, err := c.Read(buf)
		out = append(out, buf[:n]...)
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("after %d bytes: %v", len(out), err)
		}
	}
}

// TestHostile27TCPCloseCases: the tunnel's close path against clients
// and servers that half-close, send nothing, speak first, or stall in the
// middle of 1 MiB, with splice off and on: every byte arrives in order,
// each end of stream passes, and nothing is left open afterwards.
func TestHostile27TCPCloseCases(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const mib = 1 << 20
	data := h27Pattern(mib)
	uploaded := make(chan int, 4)
	origins := map[string]int{
		// reads to the end of stream, then sends it all back and closes
		"echo-at-eof": h27TCP(t, func(c *net.TCPConn) {
			b, err := io.ReadAll(c)
			if err == nil {
				c.Write(b)
			}
		}),
		// speaks first; says what the client sent, once it ends
		"banner": h27TCP(t, func(c *net.TCPConn) {
			io.WriteString(c, "220 hello\r\n")
			b, _ := io.ReadAll(c)
			fmt.Fprintf(c, "got %d bytes\r\n", len(b))
		}),
		// 1 MiB, then the close
		"download": h27TCP(t, func(c *net.TCPConn) {
			c.Write(data)
		}),
		// a line and its close at once, before the client says anything
		"says-and-closes": h27TCP(t, func(c *net.TCPConn) {
			io.WriteString(c, "bye\r\n")
		}),
		// resets the connection as soon as it is accepted
		"resets": h27TCP(t, func(c *net.TCPConn) {
			c.SetLinger(0)
		}),
		// one byte, its end of stream at once, then reads what the client
		// still sends
		"server-half-closes": h27TCP(t, func(c *net.TCPConn) {
			io.WriteString(c, "x")
			c.CloseWrite()
			n, _ := io.Copy(io.Discard, c)
			uploaded <- int(n)
		}),
	}
	for _, splice := range []string{"off", "on"} {
		fronts := map[string]int{}
		for name, port := range origins {
			fronts[name] = h27Front(t, in, name+"-"+splice, "tcp", splice, port)
		}
		t.Run("splice "+splice, func(t *testing.T) {
			t.Run("client sends 1 MiB then half-closes", func(t *testing.T) {
				c := h27Dial(t, fronts["echo-at-eof"])
				go func() { c.Write(data); c.CloseWrite() }()
				if got := h27ReadAll(t, c, 0); !bytes.Equal(got, data) {
					t.Fatalf("%d bytes back, want the 1 MiB sent (first difference at %d)", len(got), h27Diff(got, data))
				}
			})
			t.Run("server speaks first, client sends nothing", func(t *testing.T) {
				c := h27Dial(t, fronts["banner"])
				line := make([]byte, len("220 hello\r\n"))
				if _, err := io.ReadFull(c, line); err != nil || string(line) != "220 hello\r\n" {
					t.Fatalf("banner %q %v", line, err)
				}
				io.WriteString(c, "QUIT\r\n")
				c.CloseWrite()
				if got := h27ReadAll(t, c, 0); string(got) != "got 6 bytes\r\n" {
					t.Fatalf("after the banner: %q", got)
				}
			})
			t.Run("client half-closes at once, having sent nothing", func(t *testing.T) {
				c := h27Dial(t, fronts["banner"])
				c.CloseWrite()
				if got := h27ReadAll(t, c, 0); string(got) != "220 hello\r\ngot 0 bytes\r\n" {
					t.Fatalf("got %q", got)
				}
			})
			t.Run("client stalls in the middle of 1 MiB", func(t *testing.T) {
				c := h27Dial(t, fronts["download"])
				c.SetReadBuffer(64 << 10) // small, but above the loopback MSS: below it the kernel itself trickles (silly-window avoidance)
				if got := h27ReadAll(t, c, 300<<10); !bytes.Equal(got, data) {
					t.Fatalf("%d bytes, want 1 MiB (first difference at %d)", len(got), h27Diff(got, data))
				}
			})
			t.Run("server half-closes first, client uploads 1 MiB after", func(t *testing.T) {
				c := h27Dial(t, fronts["server-half-closes"])
				b := make([]byte, 2)
				if n, err := io.ReadAtLeast(c, b, 1); n != 1 || b[0] != 'x' {
					t.Fatalf("read %q %v", b[:n], err)
				}
				if _, err := c.Read(b); err != io.EOF {
					t.Fatalf("after the server's end of stream: %v, want EOF", err)
				}
				if _, err := c.Write(data); err != nil {
					t.Fatalf("upload after the server's half-close: %v", err)
				}
				c.CloseWrite()
				select {
				case n := <-uploaded:
					if n != mib {
						t.Fatalf("the server got %d bytes, want 1 MiB", n)
					}
				case <-time.After(20 * time.Second):
					t.Fatal("the server never saw the client's end of stream")
				}
				h27ReadAll(t, c, 0)
			})
			t.Run("server says a line and closes before the client speaks", func(t *testing.T) {
				c := h27Dial(t, fronts["says-and-closes"])
				if got := h27ReadAll(t, c, 0); string(got) != "bye\r\n" {
					t.Fatalf("got %q", got)
				}
			})
			t.Run("server resets at once", func(t *testing.T) {
				// The reset may reach the client before its own connect
				// completed (loopback is that fast): then the dial fails.
				nc, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(fronts["resets"]))
				if err != nil {
					if !errors.Is(err, unix.ECONNRESET) {
						t.Fatal(err)
					}
					return
				}
				defer nc.Close()
				nc.SetDeadline(time.Now().Add(20 * time.Second))
				b, err := io.ReadAll(nc)
				if len(b) != 0 {
					t.Fatalf("got %q, %v", b, err)
				}
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("the connection was left open")
				}
			})
			t.Run("client resets in the middle of its upload", func(t *testing.T) {
				c := h27Dial(t, fronts["echo-at-eof"])
				c.Write(data[:256<<10])
				c.SetLinger(0)
				c.Close()
			})
		})
	}
	h27NoConnLeft(t, in)
}

func h27Diff(a, b []byte) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// h27NoConnLeft waits until no frontend holds a connection.
func h27NoConnLeft(t *testing.T, in *instance) {
	t.Helper()
	var last string
	testutil.Eventually(t, 20*time.Second, func() bool {
		var st struct {
			Frontends []struct {
				Name    string `json:"name"`
				ConnCur int    `json:"conn_cur"`
			} `json:"frontends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		last = ""
		for _, f := range st.Frontends {
			if f.ConnCur != 0 {
				last += fmt.Sprintf(" %s:%d", f.Name, f.ConnCur)
			}
		}
		return last == ""
	}, func() string { return "every connection closed (left:" + last + ")" })
}

// TestHostile27HTTPCloseCases: the last response of a connection that
// closes after it (HTTP/1.0, Connection: close, a body delimited by the
// server's close, a client that half-closes after its request) reaches
// the client whole before the end of stream, with a client that stalls
// in the middle, splice off and on.
func TestHostile27HTTPCloseCases(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const mib = 1 << 20
	data := h27Pattern(mib)
	origin := h27TCP(t, func(c *net.TCPConn) {
		br := make([]byte, 4096)
		n, _ := c.Read(br)
		req := string(br[:n])
		switch {
		case strings.Contains(req, "/until-close"):
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			c.Write(data)
		case strings.Contains(req, "/chunked"):
			io.WriteString(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nTransfer-Encoding: chunked\r\n\r\n")
			for off := 0; off < len(data); off += 100000 {
				end := min(off+100000, len(data))
				fmt.Fprintf(c, "%x\r\n", end-off)
				c.Write(data[off:end])
				io.WriteString(c, "\r\n")
			}
			io.WriteString(c, "0\r\n\r\n")
		default:
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nConnection: close\r\nContent-Length: %d\r\n\r\n", len(data))
			c.Write(data)
		}
		// One request per connection, said (Connection: close): the
		// proxy pools a connection whose response did not, and would send
		// the next request to a handler that reads no more.
	})
	for _, splice := range []string{"off", "on"} {
		fport := h27Front(t, in, "web-"+splice, "http", splice, origin)
		for _, tc := range []struct{ name, req string }{
			{"HTTP/1.0, Content-Length", "GET /cl HTTP/1.0\r\n\r\n"},
			{"Connection: close, Content-Length", "GET /cl HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"},
			{"Connection: close, chunked", "GET /chunked HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n"},
			{"HTTP/1.0, chunked (dechunked)", "GET /chunked HTTP/1.0\r\n\r\n"},
			{"body until the server's close", "GET /until-close HTTP/1.1\r\nHost: a\r\n\r\n"},
			{"client half-closes after its request", "GET /cl HTTP/1.1\r\nHost: a\r\n\r\n"},
		} {
			t.Run("splice "+splice+"/"+tc.name, func(t *testing.T) {
				c := h27Dial(t, fport)
				c.SetReadBuffer(64 << 10) // small, but above the loopback MSS: below it the kernel itself trickles (silly-window avoidance)
				io.WriteString(c, tc.req)
				if strings.Contains(tc.name, "half-closes") {
					c.CloseWrite()
				}
				got := h27ReadAll(t, c, 300<<10)
				i := bytes.Index(got, []byte("\r\n\r\n"))
				if i < 0 {
					t.Fatalf("no head in %d bytes: %.200q", len(got), got)
				}
				head, body := string(got[:i]), got[i+4:]
				if strings.Contains(head, "chunked") {
					body = h27Dechunk(t, body)
				}
				if !strings.HasPrefix(head, "HTTP/1.1 200") || !bytes.Equal(body, data) {
					t.Fatalf("%q: %d bytes of body, want 1 MiB (first difference at %d)", head, len(body), h27Diff(body, data))
				}
			})
		}
	}
	h27NoConnLeft(t, in)
}

func h27Dechunk(t *testing.T, b []byte) []byte {
	t.Helper()
	var out []byte
	for {
		i := bytes.Index(b, []byte("\r\n"))
		if i < 0 {
			t.Fatalf("chunked body cut: %d bytes left", len(b))
		}
		n, err := strconv.ParseInt(string(b[:i]), 16, 64)
		if err != nil {
			t.Fatalf("chunk size %q", b[:i])
		}
		b = b[i+2:]
		if n == 0 {
			return out
		}
		if int64(len(b)) < n+2 {
			t.Fatalf("chunk of %d cut at %d", n, len(b))
		}
		out = append(out, b[:n]...)
		b = b[n+2:]
	}
}

// TestHostile27IdleLoopSleeps: after a burst of requests, with busy
// polling and naps on, an idle proxy uses (almost) no CPU: the loops'
// waits end with the traffic.
func TestHostile27IdleLoopSleeps(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	origin := h27Origin(t, "o")
	fport := h27Front(t, in, "web", "http", "auto", origin)
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"busy_poll_us":200,"poll_nap_us":50}`, "Content-Type: application/merge-patch+json")
	cl := &http.Client{Timeout: 10 * time.Second}
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 500 {
				resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/", fport))
				if err != nil {
					t.Error(err)
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}()
	}
	wg.Wait()
	cl.CloseIdleConnections()
	h27NoConnLeft(t, in)
	// Over a second of idleness the process may wake for its timers and
	// the stats; a loop that kept polling would use the whole second.
	c0 := h27CPU(t, in.Pid())
	t0 := time.Now()
	time.Sleep(time.Second) // the idle window measured (CPU time, not wall time, is asserted)
	used, wall := h27CPU(t, in.Pid())-c0, time.Since(t0)
	t.Logf("idle: %v of CPU in %v", used, wall)
	if used > wall/4 {
		t.Fatalf("the idle proxy used %v of CPU in %v", used, wall)
	}
}

// h27CPU is the process's user and system CPU time so far.
func h27CPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+2:]))
	ut, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(ut+st) * 10 * time.Millisecond // USER_HZ 100
}

// TestHostile27ClientAddressPerConnection: with accept4's address in
// place of getpeername, each of many connections from distinct sources
// (concurrent, 40 addresses of 127.0.0.0/8, each its own port) is named
// by its own address: X-Forwarded-For in http mode, the PROXY header's
// source address and port in tcp mode.
func TestHostile27ClientAddressPerConnection(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	xff := h27TCP(t, func(c *net.TCPConn) {
		buf := make([]byte, 4096)
		n, _ := c.Read(buf)
		v := ""
		for _, l := range strings.Split(string(buf[:n]), "\r\n") {
			if k, val, ok := strings.Cut(l, ":"); ok && strings.EqualFold(k, "X-Forwarded-For") {
				v = strings.TrimSpace(val)
			}
		}
		fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\nConnection: close\r\n\r\n%s", len(v), v)
	})
	proxied := h27TCP(t, func(c *net.TCPConn) {
		buf := make([]byte, 256)
		n, _ := c.Read(buf)
		line, _, _ := strings.Cut(string(buf[:n]), "\r\n")
		io.WriteString(c, line)
	})
	hport := h27Front(t, in, "xff", "http", "auto", xff)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "pp", "mode": "tcp",
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": proxied, "send_proxy": "v1"}}})
	tport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "pp", "mode": "tcp", "default_backend": "pp",
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": tport}}})
	var wg sync.WaitGroup
	for i := range 40 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			src := net.IPv4(127, 0, 3, byte(10+i))
			for round := range 5 {
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 10 * time.Second}
				c, err := d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", hport))
				if err != nil {
					t.Error(err)
					return
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
				b, _ := io.ReadAll(c)
				c.Close()
				if !bytes.HasSuffix(b, []byte("\r\n\r\n"+src.String())) {
					t.Errorf("client %s, round %d: %q", src, round, b)
				}
				c, err = d.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", tport))
				if err != nil {
					t.Error(err)
					return
				}
				c.SetDeadline(time.Now().Add(20 * time.Second))
				local := c.LocalAddr().(*net.TCPAddr)
				io.WriteString(c, "hi")
				b, _ = io.ReadAll(c)
				c.Close()
				want := fmt.Sprintf("PROXY TCP4 %s 127.0.0.1 %d %d", src, local.Port, tport)
				if string(b) != want {
					t.Errorf("client %s:%d: PROXY line %q, want %q", src, local.Port, b, want)
				}
			}
		}()
	}
	wg.Wait()
}

// TestHostile27AcceptedSocketsHaveNoDelay: the accepted connections of
// http and tcp frontends have TCP_NODELAY (now inherited from the
// listener rather than set per connection): read from the running
// process's own sockets (pidfd_getfd), not inferred from timings.
func TestHostile27AcceptedSocketsHaveNoDelay(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	hold := h27TCP(t, func(c *net.TCPConn) { io.Copy(io.Discard, c) })
	tport := h27Front(t, in, "nd-tcp", "tcp", "auto", hold)
	hport := h27Front(t, in, "nd-http", "http", "auto", hold)
	var conns []*net.TCPConn
	for range 3 {
		conns = append(conns, h27Dial(t, tport), h27Dial(t, hport))
	}
	for _, c := range conns {
		io.WriteString(c, "x") // accepted and read (a tcp one connects its server)
	}
	pidfd, err := unix.PidfdOpen(in.Pid(), 0)
	if err != nil {
		t.Skipf("pidfd_open: %v", err)
	}
	defer unix.Close(pidfd)
	testutil.Eventually(t, 10*time.Second, func() bool {
		found := map[int]int{}
		ents, _ := os.ReadDir(fmt.Sprintf("/proc/%d/fd", in.Pid()))
		for _, e := range ents {
			fd, err := strconv.Atoi(e.Name())
			if err != nil {
				continue
			}
			if l, _ := os.Readlink(fmt.Sprintf("/proc/%d/fd/%d", in.Pid(), fd)); !strings.HasPrefix(l, "socket:") {
				continue
			}
			my, err := unix.PidfdGetfd(pidfd, fd, 0)
			if err != nil {
				t.Skipf("pidfd_getfd: %v", err)
			}
			sa, _ := unix.Getsockname(my)
			acc, _ := unix.GetsockoptInt(my, unix.SOL_SOCKET, unix.SO_ACCEPTCONN)
			nd, _ := unix.GetsockoptInt(my, unix.IPPROTO_TCP, unix.TCP_NODELAY)
			unix.Close(my)
			if a, ok := sa.(*unix.SockaddrInet4); ok && acc == 0 && (a.Port == tport || a.Port == hport) {
				if nd == 0 {
					t.Fatalf("an accepted connection of the frontend on port %d has no TCP_NODELAY", a.Port)
				}
				found[a.Port]++
			}
		}
		return found[tport] == 3 && found[hport] == 3
	}, "the six accepted connections")
}

// TestHostile27SplicedBodiesKeepTheirFraming: with splice on, a 1 MiB
// request body with the next request pipelined right behind it, and a
// 1 MiB response body a server follows with bytes of its own, are each
// moved to the byte: the next request reaches the server as a request,
// and the server's extra bytes never reach the client. The client sends
// its next request once the proxy's kernel acknowledged the extra bytes:
// bytes that come after a request went out on a reused connection would
// be its answer to any proxy (HAProxy's too), so the test does not send
// before they are there to be seen. Before core/proxy's srvConn.quiet, a
// connection whose last splice stopped at the body's end with the extra
// bytes queued behind it was pooled and reused for the next request,
// whose answer was then "SMUGGLED" (about 1 run in 30).
func TestHostile27SplicedBodiesKeepTheirFraming(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const mib = 1 << 20
	data := h27Pattern(mib)
	extraIn := make(chan struct{}, 1) // the proxy's kernel has the server's extra bytes
	origin := h27TCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			b, _ := io.ReadAll(req.Body)
			switch req.URL.Path {
			case "/up":
				ok := bytes.Equal(b, data)
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%v", len(fmt.Sprint(ok)), ok)
			case "/down-extra":
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(data))
				c.Write(append(data[:len(data):len(data)], "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"...))
				if testutil.Delivered(c) {
					extraIn <- struct{}{}
				}
			default:
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s", len(req.URL.Path), req.URL.Path)
			}
		}
	})
	fport := h27Front(t, in, "sp", "http", "on", origin)
	t.Run("request body then a pipelined request", func(t *testing.T) {
		c := h27Dial(t, fport)
		go func() {
			var w bytes.Buffer
			fmt.Fprintf(&w, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", len(data))
			w.Write(data)
			io.WriteString(&w, "GET /second HTTP/1.1\r\nHost: a\r\n\r\n")
			c.Write(w.Bytes())
		}()
		br := bufio.NewReader(c)
		for _, want := range []string{"true", "/second"} {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("waiting for %q: %v", want, err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != want {
				t.Fatalf("%d %q, want %q", resp.StatusCode, b, want)
			}
		}
	})
	t.Run("response body then the server's extra bytes", func(t *testing.T) {
		c := h27Dial(t, fport)
		io.WriteString(c, "GET /down-extra HTTP/1.1\r\nHost: a\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		b, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(b, data) {
			t.Fatalf("body %d bytes, %v", len(b), err)
		}
		select {
		case <-extraIn:
		case <-time.After(20 * time.Second):
			t.Fatal("the server's extra bytes did not reach the proxy")
		}
		io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err = http.ReadResponse(br, nil)
		if err != nil {
			return // the proxy closed the connection: the extra bytes went nowhere
		}
		b, _ = io.ReadAll(resp.Body)
		if string(b) != "/next" {
			t.Fatalf("the next response on the connection is %d %q", resp.StatusCode, b)
		}
	})
	t.Run("Connection: close with a request pipelined behind", func(t *testing.T) {
		c := h27Dial(t, fport)
		io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\nGET /second HTTP/1.1\r\nHost: a\r\n\r\n")
		got := h27ReadAll(t, c, 0)
		if !bytes.HasSuffix(got, []byte("\r\n\r\n/first")) || bytes.Contains(got, []byte("/second")) {
			t.Fatalf("%q", got)
		}
	})
}

// TestHostile27ConcurrentIfMatch: writers that each read a server's ETag
// and then change it with If-Match race each other; of the writes made
// against one ETag exactly one succeeds (the others 412), and the server
// ends with the value of the last success.
func TestHostile27ConcurrentIfMatch(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	var seed []string
	for i := range 200 {
		seed = append(seed, fmt.Sprintf(`{"name":"s%03d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, 10000+i))
	}
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"race","mode":"tcp","servers":[`+strings.Join(seed, ",")+`]}`)
	const path = "/api/v1/backends/race/servers/s100"
	type result struct {
		etag   string
		weight int
		status int
		err    error
	}
	results := make(chan result, 400)
	var wg sync.WaitGroup
	for w := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 25 {
				req, _ := http.NewRequest("GET", "http://"+in.Admin+path, nil)
				resp, err := h27Client.Do(req)
				if err != nil {
					results <- result{err: err}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				etag := resp.Header.Get("ETag")
				// 200 distinct weights in 0..200 (the maximum is 256),
				// never the servers' first weight (100): an ETag is the
				// representation's hash, so a write back to an earlier
				// weight would bring that state's ETag back, and a second
				// write could rightly succeed with it.
				weight := w*25 + i
				if weight >= 100 {
					weight++
				}
				req, _ = http.NewRequest("PATCH", "http://"+in.Admin+path, strings.NewReader(fmt.Sprintf(`{"weight":%d}`, weight)))
				req.Header.Set("Content-Type", "application/merge-patch+json")
				req.Header.Set("If-Match", etag)
				resp, err = h27Client.Do(req)
				if err != nil {
					results <- result{err: err}
					return
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				results <- result{etag: etag, weight: weight, status: resp.StatusCode}
			}
		}()
	}
	wg.Wait()
	close(results)
	wins := map[string]int{}
	tries := map[string]int{}
	for r := range results {
		if r.err != nil {
			t.Fatal(r.err)
		}
		if r.etag == "" {
			t.Fatal("GET gave no ETag")
		}
		tries[r.etag]++
		switch r.status {
		case 200:
			wins[r.etag]++
		case 412:
		default:
			t.Fatalf("PATCH with If-Match: %d", r.status)
		}
	}
	for etag, n := range tries {
		if wins[etag] != 1 {
			t.Errorf("ETag %s: %d writes, %d succeeded; want exactly one", etag, n, wins[etag])
		}
	}
	t.Logf("%d ETags raced for", len(tries))
}

// TestHostile27DocumentSurvivesKill9AfterMixedWrites: server changes mixed
// with writes that move objects (a backend replaced with its servers in
// another order, a backend deleted and made again under its name, other
// backends made and removed, tuning) on a document large enough that the
// journal runs long between snapshots; after each burst, with no write
// in flight, a kill -9 and a restart give back the same document, byte
// for byte, and the same revision list (but the oldest entries a snapshot
// pruned meanwhile), and writes go on from there.
func TestHostile27DocumentSurvivesKill9AfterMixedWrites(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	dir := in.StateDir
	rnd := rand.New(rand.NewSource(time.Now().UnixNano()))
	mk := func(prefix string, n, port int) []map[string]any {
		var out []map[string]any
		for i := range n {
			out = append(out, map[string]any{"name": fmt.Sprintf("%s%04d", prefix, i), "address": "127.0.0.1",
				"port": port + i, "admin_state": "maint", "weight": 1 + i%50})
		}
		return out
	}
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "big", "mode": "tcp", "servers": mk("s", 1000, 10000)})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "small", "mode": "http", "servers": mk("m", 20, 30000)})
	do := func(want int, method, path string, body any) {
		t.Helper()
		hdr := []string{}
		if method == "PATCH" {
			hdr = append(hdr, "Content-Type: application/merge-patch+json")
		}
		in.MustDo(want, method, path, body, hdr...)
	}
	for cycle := range 5 {
		for range 60 + rnd.Intn(60) {
			switch r := rnd.Intn(20); {
			case r < 8: // 404 when the default case below deleted it
				st, _, b, err := h27Do(in.Admin, "PATCH", fmt.Sprintf("/api/v1/backends/big/servers/s%04d", rnd.Intn(1000)),
					fmt.Sprintf(`{"weight":%d,"admin_state":%q}`, rnd.Intn(257), []string{"ready", "drain", "maint"}[rnd.Intn(3)]))
				if err != nil || (st != 200 && st != 404) {
					t.Fatalf("PATCH: %d %s %v", st, b, err)
				}
			case r < 10:
				var list []map[string]any
				in.MustDo(200, "GET", "/api/v1/backends/small/servers", nil).JSON(t, &list)
				if len(list) > 0 {
					do(204, "DELETE", "/api/v1/backends/small/servers/"+list[rnd.Intn(len(list))]["name"].(string), nil)
				}
			case r < 12:
				do(201, "POST", "/api/v1/backends/small/servers", map[string]any{"name": fmt.Sprintf("n%d-%d", cycle, rnd.Int63()),
					"address": "127.0.0.1", "port": 1 + rnd.Intn(65535)})
			case r < 14: // the small backend replaced, its servers in another order
				var b map[string]any
				in.MustDo(200, "GET", "/api/v1/backends/small", nil).JSON(t, &b)
				s, _ := b["servers"].([]any)
				rnd.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
				b["servers"] = s
				do(200, "PUT", "/api/v1/backends/small", b)
			case r < 15: // deleted and made again under its name
				do(204, "DELETE", "/api/v1/backends/small", nil)
				do(201, "POST", "/api/v1/backends", map[string]any{"name": "small", "mode": "http", "servers": mk(fmt.Sprintf("r%d-", cycle), 1+rnd.Intn(30), 30000)})
			case r < 17:
				name := fmt.Sprintf("tmp%d", rnd.Intn(4))
				if st, _, _, _ := h27Do(in.Admin, "GET", "/api/v1/backends/"+name, ""); st == 200 {
					do(204, "DELETE", "/api/v1/backends/"+name, nil)
				} else {
					do(201, "POST", "/api/v1/backends", map[string]any{"name": name, "mode": "tcp", "servers": mk("t", 1+rnd.Intn(5), 40000)})
				}
			case r < 18:
				do(200, "PATCH", "/api/v1/backends/big", map[string]any{"balance": []string{"roundrobin", "leastconn"}[rnd.Intn(2)]})
			case r < 19:
				do(200, "PATCH", "/api/v1/tuning", map[string]any{"maxaccept": 16 + rnd.Intn(100)})
			default: // a server of big deleted and added back at the end
				name := fmt.Sprintf("s%04d", rnd.Intn(1000))
				if st, _, _, _ := h27Do(in.Admin, "GET", "/api/v1/backends/big/servers/"+name, ""); st == 200 {
					do(204, "DELETE", "/api/v1/backends/big/servers/"+name, nil)
				} else {
					do(201, "POST", "/api/v1/backends/big/servers", map[string]any{"name": name, "address": "127.0.0.1", "port": 20000})
				}
			}
		}
		before := in.MustDo(200, "GET", "/api/v1/config", nil).Body
		revs := in.MustDo(200, "GET", "/api/v1/config/revisions", nil).Body
		in.ExpectDeath("killed -9 between bursts of writes")
		in.Kill()
		in = startSpliced(t, dir)
		if after := in.MustDo(200, "GET", "/api/v1/config", nil).Body; !bytes.Equal(before, after) {
			t.Fatalf("cycle %d: the document changed across a kill -9 and a restart:\nbefore %.300s\nafter  %.300s (first difference at %d)",
				cycle, before, after, h27Diff(before, after))
		}
		after := in.MustDo(200, "GET", "/api/v1/config/revisions", nil).Body
		h27SameRevisions(t, cycle, revs, after)
		var cfg struct {
			Generation int64 `json:"generation"`
		}
		json.Unmarshal(before, &cfg)
		t.Logf("cycle %d: generation %d", cycle, cfg.Generation)
	}
}

// h27SameRevisions: the revision list after a kill -9 and a restart
// (after, newest first) is the one before it, but that the oldest entries
// may be gone down to config.MaxRevisions: revisions are pruned when a
// snapshot is written, on a goroutine of its own after the write's answer
// (a list of 237 read right after a write was 147 the next moment, no
// write between), so a kill may fall before or after a prune.
func h27SameRevisions(t *testing.T, cycle int, before, after []byte) {
	t.Helper()
	var b, a []json.RawMessage
	if err := json.Unmarshal(before, &b); err != nil {
		t.Fatalf("cycle %d: revisions before: %v", cycle, err)
	}
	if err := json.Unmarshal(after, &a); err != nil {
		t.Fatalf("cycle %d: revisions after: %v", cycle, err)
	}
	if len(a) < min(len(b), config.MaxRevisions) || len(a) > len(b) {
		t.Fatalf("cycle %d: %d revisions before a kill -9 and a restart, %d after (at least %d kept)", cycle, len(b), len(a), config.MaxRevisions)
	}
	for i := range a {
		if !bytes.Equal(a[i], b[i]) {
			t.Fatalf("cycle %d: the revision list changed across a kill -9 and a restart: entry %d (newest first) was\n%s\nand is\n%s", cycle, i, b[i], a[i])
		}
	}
	if len(a) < len(b) {
		t.Logf("cycle %d: %d revisions before the kill, %d after (the oldest pruned by a snapshot)", cycle, len(b), len(a))
	}
}

// TestHostile27ClientsThatDoNotRead: clients that do not read while the
// proxy has a lot to send them (64 pipelined requests whose 64 KiB
// responses pile up; a 1 MiB download over TLS, over HTTP/1.1 and HTTP/2;
// a response head of 12 KiB of fields), then read: they get every byte,
// in order. A send that blocks must be resumed when the client reads,
// whatever registered the client for EPOLLOUT.
func TestHostile27ClientsThatDoNotRead(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const mib = 1 << 20
	data := h27Pattern(mib)
	bigHead := strings.Repeat("X-Pad: "+strings.Repeat("p", 1000)+"\r\n", 12)
	origin := h27TCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, req.Body)
			n := len(data)
			switch req.URL.Path {
			case "/64k":
				n = 64 << 10
			case "/bighead":
				fmt.Fprintf(c, "HTTP/1.1 200 OK\r\n%sContent-Length: 2\r\n\r\nok", bigHead)
				continue
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", n)
			c.Write(data[:n])
		}
	})
	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.example"}})
	uploadCert(in, "c", cert, false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "o", "mode": "http",
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": origin}}})
	plain, secure := testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "f", "mode": "http", "default_backend": "o",
		"binds": []map[string]any{{"name": "p", "address": "127.0.0.1", "port": plain},
			{"name": "s", "address": "127.0.0.1", "port": secure, "tls": map[string]any{"certificates": []string{"c"}}}}})
	t.Run("64 pipelined responses, read after all were asked", func(t *testing.T) {
		c := h27Dial(t, plain)
		c.SetReadBuffer(64 << 10)
		var reqs bytes.Buffer
		for range 64 {
			io.WriteString(&reqs, "GET /64k HTTP/1.1\r\nHost: a\r\n\r\n")
		}
		go c.Write(reqs.Bytes())
		time.Sleep(300 * time.Millisecond) // not reading: the responses pile up in the proxy and the sockets
		br := bufio.NewReader(c)
		for i := range 64 {
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("response %d: %v", i, err)
			}
			b, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(b, data[:64<<10]) {
				t.Fatalf("response %d: %d bytes, %v", i, len(b), err)
			}
		}
	})
	t.Run("a head of 12 KiB of fields", func(t *testing.T) {
		c := h27Dial(t, plain)
		io.WriteString(c, "GET /bighead HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		got := h27ReadAll(t, c, 0)
		if !bytes.Contains(got, []byte(bigHead)) || !bytes.HasSuffix(got, []byte("\r\n\r\nok")) {
			t.Fatalf("%d bytes: %.200q", len(got), got)
		}
	})
	tlsConf := &tls.Config{RootCAs: cert.Pool(), ServerName: "a.example"}
	t.Run("1 MiB over TLS, HTTP/1.1, a stall in the middle", func(t *testing.T) {
		raw := h27Dial(t, secure)
		raw.SetReadBuffer(64 << 10)
		c := tls.Client(raw, tlsConf)
		io.WriteString(c, "GET /1m HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		got := h27ReadAll(t, c, 300<<10)
		i := bytes.Index(got, []byte("\r\n\r\n"))
		if i < 0 || !bytes.Equal(got[i+4:], data) {
			t.Fatalf("%d bytes, want a head and 1 MiB", len(got))
		}
	})
	t.Run("1 MiB over h2c (prior knowledge), read slowly, 8 streams at once", func(t *testing.T) {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &p}
		defer tr.CloseIdleConnections()
		cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		var wg sync.WaitGroup
		for i := range 8 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/1m", plain))
				if err != nil {
					t.Error(err)
					return
				}
				defer resp.Body.Close()
				if resp.ProtoMajor != 2 {
					t.Errorf("proto %s", resp.Proto)
				}
				buf := make([]byte, 100<<10)
				n, _ := io.ReadFull(resp.Body, buf)
				if i%2 == 0 {
					time.Sleep(300 * time.Millisecond) // half the streams stall; the others go on
				}
				rest, err := io.ReadAll(resp.Body)
				if err != nil || !bytes.Equal(append(buf[:n], rest...), data) {
					t.Errorf("stream %d: %d+%d bytes, %v", i, n, len(rest), err)
				}
			}()
		}
		wg.Wait()
	})
	t.Run("1 MiB over TLS, HTTP/2, read slowly", func(t *testing.T) {
		tr := &http.Transport{TLSClientConfig: tlsConf, ForceAttemptHTTP2: true}
		defer tr.CloseIdleConnections()
		cl := &http.Client{Transport: tr, Timeout: 30 * time.Second}
		resp, err := cl.Get(fmt.Sprintf("https://127.0.0.1:%d/1m", secure))
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		if resp.ProtoMajor != 2 {
			t.Fatalf("proto %s", resp.Proto)
		}
		buf := make([]byte, 100<<10)
		n, _ := io.ReadFull(resp.Body, buf)
		time.Sleep(300 * time.Millisecond) // the stream's window fills, the proxy stops
		rest, err := io.ReadAll(resp.Body)
		if err != nil || !bytes.Equal(append(buf[:n], rest...), data) {
			t.Fatalf("%d+%d bytes, %v", n, len(rest), err)
		}
	})
	h27NoConnLeft(t, in)
}

// TestHostile27AnsweredChangeIsInForce: once the API answered a server's
// change (maint, drain, weight 0, deleted), no request sent after the
// answer goes to that server, on any loop, over kept-alive client
// connections as over new ones; and once it answered the server's return,
// requests reach it again.
func TestHostile27AnsweredChangeIsInForce(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	a, b := h27Origin(t, "a"), h27Origin(t, "b")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "ab", "mode": "http", "balance": "roundrobin",
		"servers": []map[string]any{{"name": "a", "address": "127.0.0.1", "port": a}, {"name": "b", "address": "127.0.0.1", "port": b}}})
	fport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "ab", "mode": "http", "default_backend": "ab",
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": fport}}})
	keep := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	fresh := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{DisableKeepAlives: true}}
	defer keep.CloseIdleConnections()
	ask := func(cl *http.Client) string {
		resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/", fport))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 {
			t.Fatalf("%d %q", resp.StatusCode, body)
		}
		return string(body)
	}
	// warm: kept-alive connections on both loops
	var wg sync.WaitGroup
	for range 8 {
		wg.Add(1)
		go func() { defer wg.Done(); ask(keep) }()
	}
	wg.Wait()
	patch := func(name, body string) {
		in.MustDo(200, "PATCH", "/api/v1/backends/ab/servers/"+name, body, "Content-Type: application/merge-patch+json")
	}
	for round := range 20 {
		off, on := "a", "b"
		if round%2 == 1 {
			off, on = "b", "a"
		}
		var undo func()
		switch round % 4 {
		case 0, 1:
			patch(off, `{"admin_state":"maint"}`)
			undo = func() { patch(off, `{"admin_state":"ready"}`) }
		case 2:
			patch(off, `{"weight":0}`)
			undo = func() { patch(off, `{"weight":100}`) }
		case 3:
			in.MustDo(204, "DELETE", "/api/v1/backends/ab/servers/"+off, nil)
			port := a
			if off == "b" {
				port = b
			}
			undo = func() {
				in.MustDo(201, "POST", "/api/v1/backends/ab/servers", map[string]any{"name": off, "address": "127.0.0.1", "port": port})
			}
		}
		for i := range 12 {
			cl := keep
			if i%3 == 0 {
				cl = fresh
			}
			if got := ask(cl); got != on {
				t.Fatalf("round %d: request %d after %s was taken out went to %s", round, i, off, got)
			}
		}
		undo()
		seen := false
		for i := 0; i < 20 && !seen; i++ {
			seen = ask(keep) == off
		}
		if !seen {
			t.Fatalf("round %d: %s back, 20 requests and none reached it", round, off)
		}
	}
}

// TestHostile27ServerMovedIsNotReachedThroughItsPool: a server replaced
// (PUT) with another address or port, or renamed by delete and add, gets
// the requests sent after the answer at its new place: the connections
// pooled to its old place are not reused for it (on either loop).
func TestHostile27ServerMovedIsNotReachedThroughItsPool(t *testing.T) {
	t.Parallel()
	for _, proto := range []string{"h1", "h2"} {
		t.Run(proto, func(t *testing.T) { h27ServerMoves(t, proto) })
	}
}

func h27ServerMoves(t *testing.T, proto string) {
	in := startSpliced(t, "")
	x, y := h27Origin(t, "x"), h27Origin(t, "y")
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "mv", "mode": "http",
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": x, "proto": proto}}})
	fport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "mv", "mode": "http", "default_backend": "mv",
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": fport}}})
	cl := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 8}}
	defer cl.CloseIdleConnections()
	ask := func() string {
		resp, err := cl.Get(fmt.Sprintf("http://127.0.0.1:%d/", fport))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		return fmt.Sprintf("%d %s", resp.StatusCode, body)
	}
	warm := func() {
		var wg sync.WaitGroup
		for range 8 {
			wg.Add(1)
			go func() { defer wg.Done(); ask() }()
		}
		wg.Wait()
	}
	names := map[int]string{x: "x", y: "y"}
	port := x
	for round := range 10 {
		warm() // server connections pooled to the current place, on both loops
		next := y
		if port == y {
			next = x
		}
		in.MustDo(200, "PUT", "/api/v1/backends/mv/servers/s", map[string]any{"name": "s", "address": "127.0.0.1", "port": next, "proto": proto})
		port = next
		for i := range 16 {
			if got := ask(); got != "200 "+names[port] {
				t.Fatalf("round %d, request %d after s moved to %s: %s", round, i, names[port], got)
			}
		}
	}
}

// TestHostile27UpgradedAndRefusedClientsThatDoNotRead: an upgraded
// connection (101, then a tunnel) whose server sends 1 MiB to a client
// that stalls, both ways; and a client whose 4 MiB upload the server
// refuses at once (413, then its close) that reads the answer only
// after sending: every byte arrives, the answer comes.
func TestHostile27UpgradedAndRefusedClientsThatDoNotRead(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	const mib = 1 << 20
	data := h27Pattern(mib)
	origin := h27TCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		req, err := http.ReadRequest(br)
		if err != nil {
			return
		}
		switch req.URL.Path {
		case "/ws":
			io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			// The 1 MiB goes to the client while it uploads; the count
			// follows it, and c closes after both (h27TCP): a write left
			// running could start after the count, on a closed c.
			wrote := make(chan struct{})
			go func() { c.Write(data); close(wrote) }()
			got, _ := io.ReadAll(br)
			<-wrote
			c.Write([]byte(fmt.Sprintf("|%d", len(got))))
		default:
			io.WriteString(c, "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\nConnection: close\r\n\r\nbig!")
		}
	})
	for _, splice := range []string{"off", "on"} {
		fport := h27Front(t, in, "up-"+splice, "http", splice, origin)
		t.Run("splice "+splice+"/upgraded, 1 MiB each way, the client stalls", func(t *testing.T) {
			c := h27Dial(t, fport)
			c.SetReadBuffer(64 << 10)
			io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
			go func() { c.Write(data); c.CloseWrite() }()
			got := h27ReadAll(t, c, 300<<10)
			i := bytes.Index(got, []byte("\r\n\r\n"))
			want := append(append([]byte{}, data...), fmt.Sprintf("|%d", mib)...)
			if i < 0 || !bytes.HasPrefix(got, []byte("HTTP/1.1 101")) || !bytes.Equal(got[i+4:], want) {
				t.Fatalf("%d bytes (%.40q...%q), want the 101, 1 MiB and |%d", len(got), got, got[max(0, len(got)-20):], mib)
			}
		})
		t.Run("splice "+splice+"/4 MiB upload refused at once, read after", func(t *testing.T) {
			c := h27Dial(t, fport)
			sent := make(chan error, 1)
			go func() {
				_, err := fmt.Fprintf(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: %d\r\n\r\n", 4*mib)
				for i := 0; i < 4 && err == nil; i++ {
					_, err = c.Write(data)
				}
				sent <- err
			}()
			select {
			case <-sent: // all sent, or cut (the proxy closed after lingering): both are fine
			case <-time.After(20 * time.Second):
				t.Fatal("the upload neither went through nor was cut")
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("no answer: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if resp.StatusCode != 413 || string(b) != "big!" {
				t.Fatalf("%d %q", resp.StatusCode, b)
			}
		})
	}
	h27NoConnLeft(t, in)
}

// TestHostile27PipesRunOut: with few pipes (maxpipes 16) and 96 clients
// that stall in the middle of 1 MiB downloads and uploads (tcp, splice
// on), the directions that get no pipe copy through buffers: every byte
// arrives, and afterwards no pipe is left in use.
func TestHostile27PipesRunOut(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"maxpipes":16}`, "Content-Type: application/merge-patch+json")
	const mib = 1 << 20
	data := h27Pattern(mib)
	origin := h27TCP(t, func(c *net.TCPConn) {
		b, err := io.ReadAll(c) // the upload, to its end
		if err == nil && bytes.Equal(b, data) {
			c.Write(data)
		}
	})
	fport := h27Front(t, in, "pipes", "tcp", "on", origin)
	var wg sync.WaitGroup
	for i := range 96 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(fport))
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(60 * time.Second))
			c.(*net.TCPConn).SetReadBuffer(64 << 10)
			for off := 0; off < mib; off += 256 << 10 {
				if _, err := c.Write(data[off : off+256<<10]); err != nil {
					t.Errorf("client %d: upload: %v", i, err)
					return
				}
				if off == 512<<10 {
					time.Sleep(200 * time.Millisecond) // a stall in the middle of the upload
				}
			}
			c.(*net.TCPConn).CloseWrite()
			var got []byte
			buf := make([]byte, 32<<10)
			for {
				if len(got) >= 300<<10 && len(got) < 332<<10 {
					time.Sleep(200 * time.Millisecond) // and of the download
				}
				n, err := c.Read(buf)
				got = append(got, buf[:n]...)
				if err == io.EOF {
					break
				}
				if err != nil {
					t.Errorf("client %d: after %d bytes: %v", i, len(got), err)
					return
				}
			}
			if !bytes.Equal(got, data) {
				t.Errorf("client %d: %d bytes back, want the 1 MiB sent (first difference at %d)", i, len(got), h27Diff(got, data))
			}
		}()
	}
	wg.Wait()
	h27NoConnLeft(t, in)
	testutil.Eventually(t, 10*time.Second, func() bool {
		var act []struct {
			PipesUsed int64 `json:"pipes_used"`
		}
		in.MustDo(200, "GET", "/api/v1/activity", nil).JSON(t, &act)
		n := int64(0)
		for _, a := range act {
			n += a.PipesUsed
		}
		return n == 0
	}, "no pipe in use once every connection closed")
}

// TestHostile27TimerAnswerToAFullClient: 40 pipelined requests whose
// 64 KiB responses the client does not read yet (its socket and the
// proxy's fill up), then one the server never answers: once the client
// reads, it gets the 40 responses, then the proxy's own 504 (written from
// the server_ms timer while the client did not read).
//
// Only the last request's backend has server_ms (a rule sends /hang to
// it): with server_ms on the 40 others too, an origin that took longer
// than server_ms to answer one of them (the test process under -race,
// beside other tests, was seen to accept the proxy's connection 575 ms
// after its connect) rightly got a 504 in its place.
func TestHostile27TimerAnswerToAFullClient(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	data := h27Pattern(64 << 10)
	origin := h27TCP(t, func(c *net.TCPConn) {
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			if req.URL.Path == "/hang" {
				io.Copy(io.Discard, c) // never answers
				return
			}
			fmt.Fprintf(c, "HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n", len(data))
			c.Write(data)
		}
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "fast", "mode": "http",
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": origin}}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "slow", "mode": "http", "timeouts": map[string]any{"server_ms": 300},
		"servers": []map[string]any{{"name": "s", "address": "127.0.0.1", "port": origin}}})
	fport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "slow", "mode": "http", "default_backend": "fast",
		"rules": map[string]any{"request": []any{map[string]any{"when": map[string]any{"path": "/hang"}, "do": map[string]any{"use_backend": "slow"}}}},
		"binds": []map[string]any{{"name": "b", "address": "127.0.0.1", "port": fport}}})
	c := h27Dial(t, fport)
	c.SetReadBuffer(64 << 10)
	var reqs bytes.Buffer
	for range 40 {
		io.WriteString(&reqs, "GET /64k HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	io.WriteString(&reqs, "GET /hang HTTP/1.1\r\nHost: a\r\n\r\n")
	go c.Write(reqs.Bytes())
	// Not reading until server_ms passed and the 504 was written (or
	// queued) towards the full socket: slow's one timeout.
	testutil.Eventually(t, 30*time.Second, func() bool {
		var st struct {
			Backends []struct {
				Name     string `json:"name"`
				Timeouts int64  `json:"timeouts"`
			} `json:"backends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		for _, b := range st.Backends {
			if b.Name == "slow" {
				return b.Timeouts == 1
			}
		}
		return false
	}, "the /hang request's server_ms timeout")
	br := bufio.NewReader(c)
	for i := range 41 {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, err := io.ReadAll(resp.Body)
		switch {
		case i < 40 && (resp.StatusCode != 200 || !bytes.Equal(b, data) || err != nil):
			t.Fatalf("response %d: %d, %d bytes, %v", i, resp.StatusCode, len(b), err)
		case i == 40 && resp.StatusCode != 504:
			t.Fatalf("the last response: %d, want 504", resp.StatusCode)
		}
	}
	h27NoConnLeft(t, in)
}
