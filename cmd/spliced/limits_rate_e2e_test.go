package main

// End-to-end tests of the limits per client (stick tables, issue 28) with
// the real binary, driven through the API only: req_rate over HTTP/1.1
// and HTTP/2, tarpit, err_rate, conn_cur on a tcp frontend, the entries
// endpoint, a flood of 100 000 distinct source addresses from 127.0.0.0/8,
// and hostile documents and keys. (limits_e2e_test.go is the fd budget's.)

import (
	"bufio"
	"context"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

type limitTable struct {
	Entries  int `json:"entries"`
	Capacity int `json:"capacity"`
	Top      []struct {
		Key      string `json:"key"`
		ConnCur  int    `json:"conn_cur"`
		ReqRate  uint64 `json:"req_rate"`
		ErrRate  uint64 `json:"err_rate"`
		ConnRate uint64 `json:"conn_rate"`
	} `json:"top"`
}

type limitStats struct {
	Frontends []struct {
		Name   string `json:"name"`
		Denied int64  `json:"denied"`
		Limits []struct {
			Name      string `json:"name"`
			Denied    int64  `json:"denied"`
			Tarpitted int64  `json:"tarpitted"`
			Refused   int64  `json:"conns_refused"`
			Entries   int64  `json:"entries"`
		} `json:"limits"`
	} `json:"frontends"`
}

// httpFrontWithLimits makes backend "web" (an origin answering status) and
// http frontend "pub" with limits, access log on; it returns the port.
func httpFrontWithLimits(t *testing.T, in *instance, status int, limits ...map[string]any) int {
	t.Helper()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(status)
		io.WriteString(w, "ok")
	}))
	t.Cleanup(origin.Close)
	u, _ := url.Parse(origin.URL)
	op, _ := strconv.Atoi(u.Port())
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": op}}})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "pub", "mode": "http", "default_backend": "web",
		"access_log": true, "limits": limits,
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}})
	return port
}

// limClient is an HTTP/1.1 client whose connections come from source
// (one new connection per request).
func limClient(source string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, DisableKeepAlives: true}}
}

// h2From is an HTTP/2 client (h2c, prior knowledge) from source: every
// request goes over one connection.
func h2From(source string) *http.Client {
	d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
	p := new(http.Protocols)
	p.SetUnencryptedHTTP2(true)
	return &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{Protocols: p, DialContext: d.DialContext}}
}

func limGet(t *testing.T, c *http.Client, url string, hdr ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("GET", url, nil)
	for i := 0; i+1 < len(hdr); i += 2 {
		req.Header.Set(hdr[i], hdr[i+1])
	}
	r, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, r.Body)
	r.Body.Close()
	return r
}

// TestLimitsReqRateEndToEnd: a per-address req_rate limit answers 429 with
// Retry-After past its count, to HTTP/1.1 and HTTP/2 clients alike, each
// address on its own; the entries endpoint shows both clients, clearing
// one lets it in again; stats, metrics and the access log say so.
func TestLimitsReqRateEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := httpFrontWithLimits(t, in, 200, map[string]any{"name": "per_ip", "req_rate": map[string]any{"count": 5, "period_ms": 60000}})
	u := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	h1, h2 := limClient("127.0.0.1"), h2From("127.0.0.2")
	for name, c := range map[string]*http.Client{"HTTP/1.1": h1, "HTTP/2": h2} {
		for i := 0; i < 5; i++ {
			if r := limGet(t, c, u); r.StatusCode != 200 {
				t.Fatalf("%s request %d: %d", name, i, r.StatusCode)
			}
		}
		r := limGet(t, c, u)
		if r.StatusCode != 429 {
			t.Fatalf("%s: 6th request %d, want 429", name, r.StatusCode)
		}
		if ra, err := strconv.Atoi(r.Header.Get("Retry-After")); err != nil || ra < 1 || ra > 120 {
			t.Fatalf("%s: Retry-After %q", name, r.Header.Get("Retry-After"))
		}
		if name == "HTTP/2" && r.ProtoMajor != 2 {
			t.Fatalf("the HTTP/2 client got %s", r.Proto)
		}
	}
	// Another address is another client.
	if r := limGet(t, limClient("127.0.0.3"), u); r.StatusCode != 200 {
		t.Fatalf("a third address: %d", r.StatusCode)
	}

	var tab limitTable
	in.MustDo(200, "GET", "/api/v1/frontends/pub/limits/per_ip/entries?limit=2", nil).JSON(t, &tab)
	if tab.Entries != 3 || tab.Capacity != 100000 || len(tab.Top) != 2 || tab.Top[0].ReqRate != 6 || tab.Top[1].ReqRate != 6 {
		t.Fatalf("entries: %+v", tab)
	}
	in.MustDo(204, "DELETE", "/api/v1/frontends/pub/limits/per_ip/entries/127.0.0.1", nil)
	in.MustDo(404, "DELETE", "/api/v1/frontends/pub/limits/per_ip/entries/127.0.0.1", nil)
	if r := limGet(t, h1, u); r.StatusCode != 200 {
		t.Fatalf("after clearing its entry: %d", r.StatusCode)
	}
	if r := limGet(t, h2, u); r.StatusCode != 429 {
		t.Fatalf("the HTTP/2 client after clearing another entry: %d", r.StatusCode)
	}

	var st limitStats
	in.MustDo(200, "GET", "/api/v1/stats?frontend=pub", nil).JSON(t, &st)
	f := st.Frontends[0]
	if len(f.Limits) != 1 || f.Limits[0].Denied != 3 || f.Denied != 3 || f.Limits[0].Entries != 3 {
		t.Fatalf("stats: %+v", f)
	}
	m := in.MustDo(200, "GET", "/metrics", nil)
	for _, want := range []string{`spliced_frontend_limited_total{action="deny",frontend="pub",limit="per_ip"} 3`,
		`spliced_frontend_limit_entries{frontend="pub",limit="per_ip"} 3`} {
		if !strings.Contains(string(m.Body), want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	var recs []map[string]any
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/logs?limit=20", nil).JSON(t, &recs)
		n := 0
		for _, r := range recs {
			if r["status"] == 429.0 && r["termination"] == "PR" {
				n++
			}
		}
		return n == 3
	}, "three 429s logged PR")
}

// TestLimitsTarpitAndErrRateEndToEnd: a client that gets too many errors is
// tarpitted (held tarpit_ms, then 429, logged PT); a header key tracks
// each API key apart, a long one by its hash.
func TestLimitsTarpitAndErrRateEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := httpFrontWithLimits(t, in, 404,
		map[string]any{"name": "scan", "err_rate": map[string]any{"count": 3, "period_ms": 60000}, "action": "tarpit", "tarpit_ms": 400},
		map[string]any{"name": "api", "key": "header:X-Api-Key", "req_rate": map[string]any{"count": 1, "period_ms": 60000}})
	u := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	c := limClient("127.0.0.1")
	long := strings.Repeat("k", 1000)
	for i, key := range []string{long, "key-0", "key-1", "key-2"} {
		if r := limGet(t, c, u, "X-Api-Key", key); r.StatusCode != 404 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	start := time.Now()
	r := limGet(t, c, u, "X-Api-Key", "key-3")
	if el := time.Since(start); r.StatusCode != 429 || el < 400*time.Millisecond {
		t.Fatalf("over err_rate: %d after %v, want 429 after 400 ms", r.StatusCode, el)
	}
	var recs []map[string]any
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/logs?limit=1", nil).JSON(t, &recs)
		return len(recs) == 1 && recs[0]["termination"] == "PT" && recs[0]["status"] == 429.0
	}, "the tarpitted request logged PT")

	// The header limit: each key once a minute; the long key by its hash.
	c2 := limClient("127.0.0.2")
	if r := limGet(t, c2, u, "X-Api-Key", "key-0"); r.StatusCode != 429 {
		t.Fatalf("key-0 again from another address: %d", r.StatusCode)
	}
	var tab limitTable
	in.MustDo(200, "GET", "/api/v1/frontends/pub/limits/api/entries?limit=10", nil).JSON(t, &tab)
	hashed := ""
	for _, e := range tab.Top {
		if strings.HasPrefix(e.Key, "sha256:") {
			hashed = e.Key
		}
	}
	if tab.Entries != 4 || hashed == "" { // key-3 was tarpitted by "scan" before "api" counted it
		t.Fatalf("api entries: %+v", tab)
	}
	in.MustDo(204, "DELETE", "/api/v1/frontends/pub/limits/api/entries/"+url.PathEscape(hashed), nil)
	in.MustDo(204, "DELETE", "/api/v1/frontends/pub/limits/api/entries/key-0", nil)
	var st limitStats
	in.MustDo(200, "GET", "/api/v1/stats?frontend=pub", nil).JSON(t, &st)
	if l := st.Frontends[0].Limits; l[0].Tarpitted != 1 || l[1].Denied != 1 {
		t.Fatalf("stats: %+v", l)
	}
}

// TestLimitsConnCurTCPEndToEnd: a tcp frontend closes a client's
// connection beyond conn_cur at accept, and takes it again once one of
// its connections ended.
func TestLimitsConnCurTCPEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "echo", "mode": "tcp",
		"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": origin.Port()}}})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "db", "mode": "tcp", "default_backend": "echo",
		"limits": []map[string]any{{"name": "conns", "conn_cur": 2}},
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	open := func() (net.Conn, error) {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			return nil, err
		}
		t.Cleanup(func() { c.Close() })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := io.WriteString(c, "hi\n"); err != nil {
			return c, err
		}
		_, err = bufio.NewReader(c).ReadString('\n')
		return c, err
	}
	a, err := open()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := open(); err != nil {
		t.Fatal(err)
	}
	if _, err := open(); err == nil {
		t.Fatal("a third connection of the client was served")
	}
	a.Close()
	var tab limitTable
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/frontends/db/limits/conns/entries", nil).JSON(t, &tab)
		return len(tab.Top) == 1 && tab.Top[0].ConnCur == 1
	}, "the closed connection given back")
	if _, err := open(); err != nil {
		t.Fatalf("after one closed: %v", err)
	}
	var st limitStats
	in.MustDo(200, "GET", "/api/v1/stats?frontend=db", nil).JSON(t, &st)
	if l := st.Frontends[0].Limits; len(l) != 1 || l[0].Refused != 1 {
		t.Fatalf("stats: %+v", l)
	}
}

// TestLimitsFloodOfSourcesEndToEnd: 100 000 connections from distinct
// addresses of 127.0.0.0/8 keep the table within max_entries and the
// process's memory flat, and the admin API keeps answering all along.
//
// "Keeps answering" is measured against the flood's own progress, not
// the wall clock: on a shared machine (a load average of 47 made one
// answer take 2.6 s) every process slows down together, the flood too.
// What the data plane must not do is starve the admin API: an answer
// that waits while the flood goes on (a loop that spins, a lock the
// admin API waits for) lets the flood make thousands of connections
// meanwhile. So each answer may span at most 5 % of the flood (5 000
// connections: an unloaded answer spans a few dozen), and answers keep
// coming while the flood runs (at least one per tenth of it).
func TestLimitsFloodOfSourcesEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := testutil.FreePort(t)
	// No backend: each connection is counted at accept, then closed.
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "edge", "mode": "tcp",
		"limits": []map[string]any{{"name": "per_ip", "conn_rate": map[string]any{"count": 10, "period_ms": 10000}, "max_entries": 1000}},
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}})
	rssBefore := rssKiB(t, in.Pid())
	const total = 100000
	deadline := time.Now().Add(120 * time.Second) // bounded in time as in count
	var next, made atomic.Int64                   // made: dials ended, connected or not
	var done, failed atomic.Int64
	flood := make(chan struct{}) // closed when the flood ends
	var wg sync.WaitGroup
	for w := 0; w < 16; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(deadline) {
				i := next.Add(1)
				if i > total {
					return
				}
				src := net.IPv4(127, byte(1+i>>16), byte(i>>8), byte(i))
				d := net.Dialer{LocalAddr: &net.TCPAddr{IP: src}, Timeout: 5 * time.Second}
				c, err := d.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
				made.Add(1)
				if err != nil {
					failed.Add(1)
					continue
				}
				c.(*net.TCPConn).SetLinger(0) // no TIME_WAIT left behind
				c.Close()
				done.Add(1)
			}
		}()
	}
	go func() { wg.Wait(); close(flood) }()
	// The probe: one admin request at a time while the flood runs, each
	// noting how far the flood went while it waited for its answer.
	type probe struct {
		took  time.Duration
		span  int64 // connections the flood made meanwhile
		at    int64 // the flood's progress at its answer
		err   error
		state int
	}
	var probes []probe
	probed := make(chan struct{})
	go func() {
		defer close(probed)
		for {
			select {
			case <-flood:
				return
			case <-time.After(50 * time.Millisecond): // the probe's pace
			}
			m0, s := made.Load(), time.Now()
			r, err := sendRequest(in.Admin, "GET", "/api/v1/info", nil)
			p := probe{took: time.Since(s), span: made.Load() - m0, at: made.Load(), err: err, state: r.Status}
			select {
			case <-flood:
				if err == nil {
					return // answered after the flood: says nothing of it
				}
			default:
			}
			probes = append(probes, p)
		}
	}()
	<-flood
	select {
	case <-probed:
	case <-time.After(60 * time.Second): // liveness only: a hung admin API
		t.Fatal("an admin request still unanswered 60 s after the flood ended")
	}
	var slowest, widest probe
	for _, p := range probes {
		if p.err != nil || p.state != 200 {
			t.Fatalf("admin answer during the flood: %d %v", p.state, p.err)
		}
		slowest.took = max(slowest.took, p.took)
		if p.span > widest.span {
			widest = p
		}
	}
	if len(probes) == 0 {
		t.Fatal("no admin answer during the flood")
	}
	spans := make([]int64, len(probes))
	for i, p := range probes {
		spans[i] = p.span
	}
	slices.Sort(spans)
	t.Logf("%d connections from distinct sources (%d failed to connect) in %v; %d admin answers during it, slowest %v, widest spanned %d connections (%v); spans p50 %d p90 %d",
		done.Load(), failed.Load(), time.Since(deadline.Add(-120*time.Second)), len(probes), slowest.took, widest.span, widest.took,
		spans[len(spans)/2], spans[len(spans)*9/10])
	if done.Load() < 20000 {
		t.Fatalf("only %d connections made", done.Load())
	}
	if widest.span > total/20 {
		t.Errorf("the flood made %d connections while one admin request waited %v for its answer", widest.span, widest.took)
	}
	// Answers kept coming: no tenth of the flood without one.
	last := int64(0)
	for _, p := range append(probes, probe{at: made.Load()}) {
		if p.at-last > total/10 {
			t.Errorf("no admin answer from connection %d to %d of the flood", last, p.at)
		}
		last = p.at
	}
	var tab limitTable
	in.MustDo(200, "GET", "/api/v1/frontends/edge/limits/per_ip/entries?limit=1000", nil).JSON(t, &tab)
	if tab.Capacity != 1000 || tab.Entries > 1000 || len(tab.Top) > 1000 {
		t.Fatalf("table: %d entries of %d", tab.Entries, tab.Capacity)
	}
	rssAfter := rssKiB(t, in.Pid())
	t.Logf("RSS %d KiB before, %d KiB after", rssBefore, rssAfter)
	// 1000 entries are 128 KB; the rest is the process's own churn.
	if rssAfter-rssBefore > 64<<10 {
		t.Errorf("RSS grew by %d KiB", rssAfter-rssBefore)
	}
}

// TestLimitsHostileEndToEnd: documents that would break the tables are
// refused with a pointer each; bad keys and pages are refused; a
// viewer cannot clear an entry.
func TestLimitsHostileEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := httpFrontWithLimits(t, in, 200, map[string]any{"name": "per_ip", "conn_cur": 100})
	for _, tc := range []struct {
		limit map[string]any
		field string
	}{
		{map[string]any{"name": "x", "key": "header:X-K", "conn_cur": 1}, "/limits/0/conn_cur"},
		{map[string]any{"name": "x", "key": "dst", "conn_cur": 1}, "/limits/0/key"},
		{map[string]any{"name": "x", "key": "header:Bad Name", "req_rate": map[string]any{"count": 1, "period_ms": 1000}}, "/limits/0/key"},
		{map[string]any{"name": "x", "req_rate": map[string]any{"count": 0, "period_ms": 1000}}, "/limits/0/req_rate/count"},
		{map[string]any{"name": "x", "req_rate": map[string]any{"count": 2000000, "period_ms": 1000}}, "/limits/0/req_rate/count"},
		{map[string]any{"name": "x", "req_rate": map[string]any{"count": 1, "period_ms": 10}}, "/limits/0/req_rate/period_ms"},
		{map[string]any{"name": "x", "conn_cur": 1, "max_entries": 100000000}, "/limits/0/max_entries"},
		{map[string]any{"name": "x", "conn_cur": 1, "action": "drop"}, "/limits/0/action"},
		{map[string]any{"name": "x"}, "/limits/0"},
		{map[string]any{"name": "x", "conn_cur": 1, "unknown": 1}, ""},
	} {
		r := in.Do("PATCH", "/api/v1/frontends/pub", map[string]any{"limits": []any{tc.limit}}, "Content-Type: application/merge-patch+json")
		if tc.field == "" {
			if r.Status != 400 {
				t.Errorf("%v: %d %s", tc.limit, r.Status, r.Body)
			}
			continue
		}
		if r.Status != 422 || !strings.Contains(string(r.Body), `"field":"`+tc.field+`"`) {
			t.Errorf("%v: %d %s, want 422 at %s", tc.limit, r.Status, r.Body, tc.field)
		}
	}
	const p = "/api/v1/frontends/pub/limits/per_ip/entries"
	in.MustDo(400, "GET", p+"?limit=100000", nil)
	in.MustDo(404, "GET", "/api/v1/frontends/pub/limits/nope/entries", nil)
	in.MustDo(422, "DELETE", p+"/not-an-address", nil)
	in.MustDo(404, "DELETE", p+"/10.9.9.9", nil)
	// The limit still runs after the refused writes.
	c := limClient("127.0.0.1")
	if r := limGet(t, c, "http://127.0.0.1:"+strconv.Itoa(port)+"/"); r.StatusCode != 200 {
		t.Fatalf("request: %d", r.StatusCode)
	}
	var tab limitTable
	in.MustDo(200, "GET", p, nil).JSON(t, &tab)
	if tab.Entries != 1 || tab.Top[0].Key != "127.0.0.1" {
		t.Fatalf("entries %+v", tab)
	}
	in.MustDo(204, "DELETE", p+"/127.0.0.1?dry_run=true", nil)
	in.MustDo(200, "GET", p, nil).JSON(t, &tab)
	if tab.Entries != 1 {
		t.Fatal("dry_run cleared the entry")
	}
	// A new threshold keeps the table; a new max_entries starts another.
	patch := func(l map[string]any) {
		in.MustDo(200, "PATCH", "/api/v1/frontends/pub", map[string]any{"limits": []any{l}}, "Content-Type: application/merge-patch+json")
	}
	patch(map[string]any{"name": "per_ip", "conn_cur": 50})
	in.MustDo(200, "GET", p, nil).JSON(t, &tab)
	if tab.Entries != 1 {
		t.Fatalf("a new conn_cur lost the table: %+v", tab)
	}
	patch(map[string]any{"name": "per_ip", "conn_cur": 50, "max_entries": 64})
	in.MustDo(200, "GET", p, nil).JSON(t, &tab)
	if tab.Entries != 0 || tab.Capacity != 64 {
		t.Fatalf("a new max_entries: %+v", tab)
	}
}

// TestLimitsClientCertEndToEnd: a limit keyed by the client certificate
// counts each certificate apart, whatever the address; a handshake that
// fails gives back the connection its address's conn_cur counted at
// accept.
func TestLimitsClientCertEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	alice := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"alice"}})
	bob := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"bob"}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "mtls", "mode": "http", "default_backend": "web",
		"limits": []map[string]any{
			{"name": "per_cert", "key": "tls_client_cert", "req_rate": map[string]any{"count": 1, "period_ms": 60000}},
			{"name": "per_ip", "conn_cur": 10},
		},
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"tls": map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM}}},
	})
	u := "https://127.0.0.1:" + strconv.Itoa(port) + "/"
	get := func(c *testutil.Cert, source string) int {
		cfg := &tls.Config{ServerName: "m.example.com", RootCAs: srv.Pool()}
		if c != nil {
			cfg.Certificates = []tls.Certificate{c.TLS()}
		}
		d := &net.Dialer{LocalAddr: &net.TCPAddr{IP: net.ParseIP(source)}, Timeout: 5 * time.Second}
		cl := &http.Client{Timeout: 15 * time.Second, Transport: &http.Transport{DialContext: d.DialContext, TLSClientConfig: cfg, DisableKeepAlives: true}}
		r, err := cl.Get(u)
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, r.Body)
		r.Body.Close()
		return r.StatusCode
	}
	if s := get(alice, "127.0.0.1"); s != 200 {
		t.Fatalf("alice: %d", s)
	}
	if s := get(alice, "127.0.0.2"); s != 429 {
		t.Fatalf("alice again from another address: %d, want 429", s)
	}
	if s := get(bob, "127.0.0.1"); s != 200 {
		t.Fatalf("bob: %d", s)
	}
	if s := get(nil, "127.0.0.3"); s != 0 {
		t.Fatalf("no certificate: %d, want a failed handshake", s)
	}
	var tab limitTable
	in.MustDo(200, "GET", "/api/v1/frontends/mtls/limits/per_cert/entries", nil).JSON(t, &tab)
	sum := sha256.Sum256(alice.X509.Raw)
	if tab.Entries != 2 || tab.Top[0].Key != "sha256:"+hex.EncodeToString(sum[:]) || tab.Top[0].ReqRate != 2 {
		t.Fatalf("per_cert entries: %+v", tab)
	}
	// Every connection ended, the failed handshake's too: no conn_cur left.
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/frontends/mtls/limits/per_ip/entries", nil).JSON(t, &tab)
		held := 0
		for _, e := range tab.Top {
			held += e.ConnCur
		}
		return tab.Entries == 3 && held == 0
	}, "the three addresses tracked, no connection held")
}

// TestLimitsHTTP2TarpitEndToEnd: an HTTP/2 stream held by a tarpit that
// its client resets goes away with its timer; the next stream on the same
// connection is held, then answered 429; no stream is left open.
func TestLimitsHTTP2TarpitEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := httpFrontWithLimits(t, in, 200,
		map[string]any{"name": "slow", "req_rate": map[string]any{"count": 1, "period_ms": 60000}, "action": "tarpit", "tarpit_ms": 500})
	u := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	c := h2From("127.0.0.1")
	if r := limGet(t, c, u); r.StatusCode != 200 || r.ProtoMajor != 2 {
		t.Fatalf("first request: %d %s", r.StatusCode, r.Proto)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	if _, err := c.Do(req); err == nil {
		t.Fatal("the tarpitted request was answered within 100 ms")
	}
	cancel()
	start := time.Now()
	if r := limGet(t, c, u); r.StatusCode != 429 || time.Since(start) < 500*time.Millisecond {
		t.Fatalf("third request: %d after %v", r.StatusCode, time.Since(start))
	}
	var st struct {
		Frontends []struct {
			H2 struct {
				StreamsCur   int64 `json:"streams_cur"`
				StreamsTotal int64 `json:"streams_total"`
			} `json:"h2"`
			Limits []struct {
				Tarpitted int64 `json:"tarpitted"`
			} `json:"limits"`
		} `json:"frontends"`
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/stats?frontend=pub", nil).JSON(t, &st)
		f := st.Frontends[0]
		return f.H2.StreamsTotal == 3 && f.H2.StreamsCur == 0 && f.Limits[0].Tarpitted == 2
	}, "three streams, none open, two tarpitted")
}

// TestLimitsErrRateOfACutRequestEndToEnd: an HTTP/2 stream reset while
// tarpitted ends without a status; the stream object that served it
// serves the loop's next request, here another connection's head refused
// with 400 before any limit saw it, which must not count in the first
// client's err_rate (one loop, so that the object is the same).
func TestLimitsErrRateOfACutRequestEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	in.MustDo(200, "PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1}, "Content-Type: application/merge-patch+json")
	port := httpFrontWithLimits(t, in, 200,
		map[string]any{"name": "k", "key": "header:X-Key", "req_rate": map[string]any{"count": 1, "period_ms": 60000},
			"err_rate": map[string]any{"count": 100, "period_ms": 60000}, "action": "tarpit", "tarpit_ms": 5000})
	u := "http://127.0.0.1:" + strconv.Itoa(port) + "/"
	c := h2From("127.0.0.1")
	if r := limGet(t, c, u, "X-Key", "a"); r.StatusCode != 200 {
		t.Fatalf("first request: %d", r.StatusCode)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 200*time.Millisecond)
	req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
	req.Header.Set("X-Key", "a")
	if _, err := c.Do(req); err == nil {
		t.Fatal("the tarpitted request was answered")
	}
	cancel()
	raw, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	raw.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(raw, "GET / HTTP/1.1\r\nHost: a\r\nBad Field: x\r\n\r\n")
	if r, err := http.ReadResponse(bufio.NewReader(raw), nil); err != nil || r.StatusCode != 400 {
		t.Fatalf("malformed head: %v %v", r, err)
	}
	var tab limitTable
	in.MustDo(200, "GET", "/api/v1/frontends/pub/limits/k/entries", nil).JSON(t, &tab)
	if len(tab.Top) != 1 || tab.Top[0].Key != "a" || tab.Top[0].ErrRate != 0 {
		t.Fatalf("entries %+v: client a must have no error", tab)
	}
}
