package main

// End-to-end tests of observability (issue 5): counters against the exact
// traffic the test sends, the Prometheus exposition, the event stream, the
// audit trail across a restart, structured and access logs, and a scrape
// under load that must not stall the loops.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// obsCounts is the part of a stats object the tests compare.
type obsCounts struct {
	Name      string `json:"name"`
	ConnTotal int64  `json:"conn_total"`
	ConnCur   int64  `json:"conn_cur"`
	BytesIn   int64  `json:"bytes_in"`
	BytesOut  int64  `json:"bytes_out"`
	State     string `json:"state"`
}

type obsStats struct {
	Generation int64       `json:"generation"`
	Frontends  []obsCounts `json:"frontends"`
	Backends   []struct {
		obsCounts
		Servers []obsCounts `json:"servers"`
	} `json:"backends"`
}

func getStats(t *testing.T, in *instance, query string) obsStats {
	t.Helper()
	var s obsStats
	in.MustDo(200, "GET", "/api/v1/stats"+query, nil).JSON(t, &s)
	return s
}

func scrapeMetrics(t *testing.T, in *instance) map[string]*dto.MetricFamily {
	t.Helper()
	r := in.MustDo(200, "GET", "/metrics", nil)
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(bytes.NewReader(r.Body))
	if err != nil {
		t.Fatalf("/metrics does not parse: %v\n%s", err, r.Body)
	}
	return fams
}

// metricValue is the value of the sample of name whose labels include want.
func metricValue(t *testing.T, fams map[string]*dto.MetricFamily, name string, want map[string]string) float64 {
	t.Helper()
	fam := fams[name]
	if fam == nil {
		t.Fatalf("metric %s missing", name)
	}
next:
	for _, m := range fam.GetMetric() {
		lbl := map[string]string{}
		for _, l := range m.GetLabel() {
			lbl[l.GetName()] = l.GetValue()
		}
		for k, v := range want {
			if lbl[k] != v {
				continue next
			}
		}
		switch {
		case m.Counter != nil:
			return m.GetCounter().GetValue()
		case m.Gauge != nil:
			return m.GetGauge().GetValue()
		}
	}
	t.Fatalf("metric %s has no sample with labels %v", name, want)
	return 0
}

// TestObsCountersMatchTrafficExactly: N connections each sending and
// receiving known byte counts are counted exactly on the frontend, the
// backend and the server, in /api/v1/stats and in /metrics.
func TestObsCountersMatchTrafficExactly(t *testing.T) {
	in := startSpliced(t, "")
	o := newTCPOrigin(t, "a")
	port := setupTCP(t, in, o.server("s1"))

	const n = 25
	msg := strings.Repeat("x", 100)
	for range n {
		c, who := greet(t, port)
		if who != "a" {
			t.Fatalf("greeting %q", who)
		}
		echoes(t, c, msg)
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		f := getStats(t, in, "?frontend=pub").Frontends[0]
		return f.ConnTotal == n && f.ConnCur == 0
	}, "every connection counted and closed")
	wantIn, wantOut := int64(n*len(msg)), int64(n*(1+len(msg)))
	s := getStats(t, in, "")
	f := s.Frontends[0]
	if f.BytesIn != wantIn || f.BytesOut != wantOut {
		t.Errorf("frontend bytes in/out %d/%d, want %d/%d", f.BytesIn, f.BytesOut, wantIn, wantOut)
	}
	be := s.Backends[0]
	if be.Name != "web" || be.ConnTotal != n || be.ConnCur != 0 || be.BytesIn != wantIn || be.BytesOut != wantOut || be.State != "up" {
		t.Errorf("backend %+v, want %d connections, %d/%d bytes, up", be.obsCounts, n, wantIn, wantOut)
	}
	sv := be.Servers[0]
	if sv.Name != "s1" || sv.ConnTotal != n || sv.ConnCur != 0 || sv.BytesIn != wantIn || sv.BytesOut != wantOut || sv.State != "up" {
		t.Errorf("server %+v, want %d connections, %d/%d bytes, up", sv, n, wantIn, wantOut)
	}
	if got := o.origin.Accepted(); got != n {
		t.Errorf("origin saw %d connections, want %d", got, n)
	}

	fams := scrapeMetrics(t, in)
	for _, c := range []struct {
		name   string
		labels map[string]string
		want   float64
	}{
		{"spliced_frontend_connections_total", map[string]string{"frontend": "pub"}, n},
		{"spliced_frontend_current_connections", map[string]string{"frontend": "pub"}, 0},
		{"spliced_frontend_bytes_in_total", map[string]string{"frontend": "pub"}, float64(wantIn)},
		{"spliced_frontend_bytes_out_total", map[string]string{"frontend": "pub"}, float64(wantOut)},
		{"spliced_backend_connections_total", map[string]string{"backend": "web"}, n},
		{"spliced_backend_bytes_out_total", map[string]string{"backend": "web"}, float64(wantOut)},
		{"spliced_server_connections_total", map[string]string{"backend": "web", "server": "s1"}, n},
		{"spliced_server_bytes_in_total", map[string]string{"backend": "web", "server": "s1"}, float64(wantIn)},
		{"spliced_server_up", map[string]string{"backend": "web", "server": "s1"}, 1},
		{"spliced_server_state", map[string]string{"backend": "web", "server": "s1", "state": "up"}, 1},
		{"spliced_backend_up", map[string]string{"backend": "web"}, 1},
		{"spliced_config_generation", nil, float64(s.Generation)},
	} {
		if got := metricValue(t, fams, c.name, c.labels); got != c.want {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, got, c.want)
		}
	}
	if cs := fams["spliced_backend_connect_time_seconds"]; cs == nil || cs.GetMetric()[0].GetSummary().GetSampleCount() != n {
		t.Errorf("connect time summary: %v, want %d samples", cs, n)
	}

	var act []struct {
		Loop     int    `json:"loop"`
		Loops    uint64 `json:"loops"`
		Accepted uint64 `json:"accepted"`
	}
	in.MustDo(200, "GET", "/api/v1/activity", nil).JSON(t, &act)
	var accepted uint64
	for _, a := range act {
		accepted += a.Accepted
	}
	if len(act) == 0 || accepted != n {
		t.Errorf("activity: %d loops, %d accepted; want >0 loops and %d accepted", len(act), accepted, n)
	}
	var loops float64
	for _, a := range act {
		loops += metricValue(t, fams, "spliced_loop_accepted_total", map[string]string{"loop": fmt.Sprint(a.Loop)})
	}
	if loops != n {
		t.Errorf("spliced_loop_accepted_total sums to %v, want %d", loops, n)
	}

	// A new generation that keeps the objects keeps their counters.
	in.MustDo(200, "PATCH", "/api/v1/frontends/pub", `{"maxconn":1000}`)
	if f := getStats(t, in, "?frontend=pub").Frontends[0]; f.ConnTotal != n || f.BytesIn != wantIn {
		t.Errorf("after a config change the frontend shows %+v, want the counts kept", f)
	}
}

// sseReader reads "event: name" / "data: json" pairs from a stream.
func sseReader(body *bufio.Reader, out chan<- [2]string) {
	defer close(out)
	var name string
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			return
		}
		line = strings.TrimRight(line, "\n")
		if v, ok := strings.CutPrefix(line, "event: "); ok {
			name = v
		} else if v, ok := strings.CutPrefix(line, "data: "); ok {
			out <- [2]string{name, v}
		}
	}
}

// TestObsEventStreamSeesAWriteWithinASecond.
func TestObsEventStreamSeesAWriteWithinASecond(t *testing.T) {
	in := startSpliced(t, "")
	o := newTCPOrigin(t, "a")
	setupTCP(t, in, o.server("s1"))

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://"+in.Admin+"/api/v1/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	evs := make(chan [2]string, 64)
	go sseReader(bufio.NewReader(resp.Body), evs)

	start := time.Now()
	w := in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":42}`)
	var res struct{ Generation int64 }
	w.JSON(t, &res)
	timeout := time.After(time.Second)
	for {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("event stream ended")
			}
			if ev[0] != "config" {
				continue
			}
			var c struct {
				Generation int64 `json:"generation"`
				Plan       struct {
					Items []struct{ Object, Op string }
				} `json:"plan"`
			}
			if err := json.Unmarshal([]byte(ev[1]), &c); err != nil {
				t.Fatalf("config event %s: %v", ev[1], err)
			}
			if c.Generation != res.Generation || len(c.Plan.Items) != 1 || c.Plan.Items[0].Object != "backend/web/server/s1" {
				t.Fatalf("config event %s, want generation %d updating backend/web/server/s1", ev[1], res.Generation)
			}
			t.Logf("config event %v after the write was sent", time.Since(start))
			return
		case <-timeout:
			t.Fatal("no config event within a second of the write")
		}
	}
}

type auditEntry struct {
	Seq        int64  `json:"seq"`
	Actor      string `json:"actor"`
	Method     string `json:"method"`
	Path       string `json:"path"`
	Status     int    `json:"status"`
	Generation int64  `json:"generation"`
	Error      string `json:"error"`
	Plan       *struct {
		Items []struct{ Object string }
	} `json:"plan"`
	Changes []struct {
		Object string          `json:"object"`
		Before json.RawMessage `json:"before"`
		After  json.RawMessage `json:"after"`
	} `json:"changes"`
}

// TestObsAuditTrailOneEntryPerWriteSurvivesRestart.
func TestObsAuditTrailOneEntryPerWriteSurvivesRestart(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := startSpliced(t, dir)
	o := newTCPOrigin(t, "a")
	setupTCP(t, in, o.server("s1"))                                                       // 2 writes
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"drain"}`) // 3
	in.MustDo(422, "PATCH", "/api/v1/backends/web/servers/s1", `{"port":0}`)              // 4, refused
	in.MustDo(404, "DELETE", "/api/v1/backends/ghost", nil)                               // 5, refused
	var before []auditEntry
	in.MustDo(200, "GET", "/api/v1/audit", nil).JSON(t, &before)
	if len(before) != 5 {
		t.Fatalf("%d audit entries, want 5: %+v", len(before), before)
	}
	drain := before[2]
	if drain.Method != "PATCH" || drain.Status != 200 || drain.Actor != "local" || drain.Plan == nil || len(drain.Changes) != 1 ||
		!strings.Contains(string(drain.Changes[0].Before), `"admin_state":"ready"`) ||
		!strings.Contains(string(drain.Changes[0].After), `"admin_state":"drain"`) {
		t.Fatalf("drain entry %+v", drain)
	}
	if r := before[1]; r.Status != 422 || r.Error == "" || r.Generation != 0 {
		t.Fatalf("refused write entry %+v", r)
	}

	if err := in.Stop(10 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	in2 := startSpliced(t, dir)
	in2.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"admin_state":"ready"}`)
	var after []auditEntry
	in2.MustDo(200, "GET", "/api/v1/audit", nil).JSON(t, &after)
	if len(after) != 6 || after[0].Seq != before[0].Seq+1 || after[1].Seq != before[0].Seq {
		t.Fatalf("after restart %d entries (newest seq %d), want 6 continuing from %d", len(after), after[0].Seq, before[0].Seq)
	}
}

// TestObsJSONLogsAndAccessLog: --log-format json gives structured lines
// naming their object; a frontend's access_log adds one line per
// connection, and none without it.
func TestObsJSONLogsAndAccessLog(t *testing.T) {
	in := startSpliced(t, "", "--log-format", "json")
	o := newTCPOrigin(t, "a")
	port := setupTCP(t, in, o.server("s1"))
	c, _ := greet(t, port)
	c.Close()
	lines := func(msg string) []map[string]any {
		var out []map[string]any
		for _, l := range strings.Split(in.Logs(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == msg {
				out = append(out, m)
			}
		}
		return out
	}
	// Logged before the API answered, read through a pipe: wait for it.
	testutil.Eventually(t, 5*time.Second, func() bool { return len(lines("bind opened")) > 0 }, "the bind opened line")
	if b := lines("bind opened"); len(b) != 1 || b[0]["frontend"] != "pub" || b[0]["bind"] != "b1" {
		t.Fatalf("bind opened lines: %v", b)
	}
	in.MustDo(200, "PATCH", "/api/v1/frontends/pub", `{"access_log":true}`)
	const n = 3
	for range n {
		c, _ := greet(t, port)
		echoes(t, c, "hello")
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return len(lines("access")) == n }, "3 access lines")
	for _, m := range lines("access") {
		if m["frontend"] != "pub" || m["backend"] != "web" || m["server"] != "s1" || m["bytes_in"] != 5.0 || m["bytes_out"] != 6.0 {
			t.Errorf("access line %v", m)
		}
	}
}

// TestObsScrapeUnderLoadDoesNotStallLoops: scrapes of /metrics and
// /api/v1/stats while clients keep the loops busy; the loops' average
// round stays bounded and every request is still counted exactly.
func TestObsScrapeUnderLoadDoesNotStallLoops(t *testing.T) {
	in := startSpliced(t, "")
	o := newTCPOrigin(t, "a")
	port := setupTCP(t, in, o.server("s1"))

	const clients, rounds = 8, 900
	msg := strings.Repeat("y", 512)
	var wg sync.WaitGroup
	var failed atomic.Value
	var exchanges atomic.Int64
	for range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 3 { // a few connections per client, many exchanges each
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 2*time.Second)
				if err != nil {
					failed.Store(err)
					return
				}
				defer c.Close()
				buf := make([]byte, len(msg))
				c.SetDeadline(time.Now().Add(5 * time.Second))
				if _, err := readFull(c, buf[:1]); err != nil { // the greeting
					failed.Store(err)
					return
				}
				for range rounds / 3 {
					c.SetDeadline(time.Now().Add(5 * time.Second))
					if _, err := c.Write([]byte(msg)); err != nil {
						failed.Store(err)
						return
					}
					if _, err := readFull(c, buf); err != nil {
						failed.Store(err)
						return
					}
					exchanges.Add(1)
				}
				c.Close()
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	var maxAvg uint64
	scrapes := 0
	for loop := true; loop; {
		select {
		case <-done:
			loop = false
		default:
		}
		scrapeMetrics(t, in)
		getStats(t, in, "")
		var act []struct {
			AvgLoopUs uint64 `json:"avg_loop_us"`
		}
		in.MustDo(200, "GET", "/api/v1/activity", nil).JSON(t, &act)
		for _, a := range act {
			maxAvg = max(maxAvg, a.AvgLoopUs)
		}
		scrapes++
	}
	if err := failed.Load(); err != nil {
		t.Fatalf("client failed under scraping: %v", err)
	}
	t.Logf("%d scrapes during %d exchanges; highest avg_loop_us %d", scrapes, exchanges.Load(), maxAvg)
	if maxAvg >= 50_000 {
		t.Fatalf("avg_loop_us reached %d µs while scraping, bound 50 ms", maxAvg)
	}
	const conns = clients * 3
	testutil.Eventually(t, 5*time.Second, func() bool {
		f := getStats(t, in, "?frontend=pub").Frontends[0]
		return f.ConnTotal == conns && f.ConnCur == 0
	}, "every connection counted")
	f := getStats(t, in, "?frontend=pub").Frontends[0]
	if want := exchanges.Load() * int64(len(msg)); f.BytesIn != want || f.BytesOut != want+conns {
		t.Fatalf("bytes in/out %d/%d, want %d/%d", f.BytesIn, f.BytesOut, want, want+conns)
	}
}

func readFull(c interface{ Read([]byte) (int, error) }, b []byte) (int, error) {
	n := 0
	for n < len(b) {
		m, err := c.Read(b[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}

// TestObsHTTPRequestsAndStatusClassesCountedExactly: requests on one
// keep-alive connection are counted one by one, with their status classes,
// on the frontend and the backend, in /api/v1/stats and /metrics.
func TestObsHTTPRequestsAndStatusClassesCountedExactly(t *testing.T) {
	in := startSpliced(t, "")
	o := newHTTPOrigin(t, "a", func(_ net.Conn, r *rawReq) string {
		switch r.Path {
		case "/missing":
			return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"
		case "/down":
			return "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n"
		}
		return okResp("a")
	})
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", o.server("s1"))},
		frontend: map[string]any{"default_backend": "web"},
	})
	paths := []string{"/", "/missing", "/", "/down", "/", "/missing", "/", "/", "/missing", "/"}
	want := map[string]int64{"2xx": 6, "4xx": 3, "5xx": 1}
	c := dialProxy(t, port)
	br := bufio.NewReader(c)
	for _, p := range paths {
		if _, err := fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: x\r\n\r\n", p); err != nil {
			t.Fatal(err)
		}
		readResp(t, br, "GET")
	}
	c.Close()
	type httpCounts struct {
		Name     string           `json:"name"`
		Requests int64            `json:"requests"`
		ConnCur  int64            `json:"conn_cur"`
		Status   map[string]int64 `json:"status"`
	}
	var s struct {
		Frontends []httpCounts `json:"frontends"`
		Backends  []httpCounts `json:"backends"`
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &s)
		return s.Frontends[0].ConnCur == 0 && s.Frontends[0].Requests == int64(len(paths))
	}, "the connection closed and counted")
	for _, obj := range []httpCounts{s.Frontends[0], s.Backends[0]} {
		if obj.Requests != int64(len(paths)) {
			t.Errorf("%s: %d requests, want %d", obj.Name, obj.Requests, len(paths))
		}
		for class, n := range want {
			if obj.Status[class] != n {
				t.Errorf("%s: %d %s responses, want %d (%v)", obj.Name, obj.Status[class], class, n, obj.Status)
			}
		}
	}
	fams := scrapeMetrics(t, in)
	if got := metricValue(t, fams, "spliced_frontend_requests_total", map[string]string{"frontend": "pub"}); got != float64(len(paths)) {
		t.Errorf("spliced_frontend_requests_total = %v, want %d", got, len(paths))
	}
	for class, n := range want {
		if got := metricValue(t, fams, "spliced_frontend_http_responses_total", map[string]string{"frontend": "pub", "code": class}); got != float64(n) {
			t.Errorf("spliced_frontend_http_responses_total{code=%q} = %v, want %d", class, got, n)
		}
	}
}
