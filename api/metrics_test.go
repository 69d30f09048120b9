package api

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// fakeStats is a core whose Stats and LoopActivity are fixed, with every
// counter set, and which counts the calls to Stats.
type fakeStats struct {
	coretest.Nop
	snap  stats.Snapshot
	act   []stats.LoopActivity
	calls atomic.Int64
}

func (f *fakeStats) Stats() stats.Snapshot {
	f.calls.Add(1)
	return f.snap
}
func (f *fakeStats) LoopActivity() []stats.LoopActivity { return f.act }

func fakeCounts(n int) stats.Counts {
	var c stats.Counts
	c.ConnTotal, c.ConnCur, c.ConnRate, c.Requests, c.ReqRate = int64(n*7+1), int64(n%5), float64(n)/3, int64(n*11), 0.5
	c.BytesIn, c.BytesOut, c.Denied, c.Errors, c.ConnectErrors = int64(n)<<40, int64(n)*1e9, 1, int64(n%2), 3
	c.Retries, c.NoServer, c.Timeouts, c.Aborts, c.Queue = 4, 5, 6, int64(n), -1
	c.Status = stats.StatusCounts{S1xx: int64(n), S2xx: int64(n * 10), S3xx: 3, S4xx: int64(n % 7), S5xx: 5, Other: 6}
	c.ConnectNs, c.ConnectCount, c.RespNs, c.RespCount = int64(n)*1234567, int64(n), 333333333, 1
	return c
}

// newFakeStats has nfe frontends, nbe backends of spb servers each and
// 12 loops (so that the loop label sorts "10" before "2"), names in an
// order that is not the sorted one, with characters the text format escapes.
func newFakeStats(nfe, nbe, spb int) *fakeStats {
	f := &fakeStats{}
	f.snap = stats.Snapshot{Time: time.Now(), Generation: 42}
	for i := nfe - 1; i >= 0; i-- {
		sf := stats.Frontend{Name: fmt.Sprintf("fe%d", i), Maxconn: i, Counts: fakeCounts(i)}
		if i%2 == 1 { // a frontend with a TLS bind
			sf.TLS = &stats.TLSCounts{Full: int64(10 * i), Resumed: int64(i), Failed: int64(i + 1), Timeouts: int64(i % 3)}
		}
		if i%3 == 0 { // a frontend with a bind with accept_proxy
			sf.Proxy = &stats.ProxyCounts{Accepted: int64(100 * i), Refused: int64(i), Invalid: int64(i + 2), Timeouts: int64(i % 2)}
		}
		f.snap.Frontends = append(f.snap.Frontends, sf)
	}
	f.snap.Frontends = append(f.snap.Frontends, stats.Frontend{Name: "q\"uo\\te\nnl", Counts: fakeCounts(3)})
	states := []string{"up", "down", "drain", "maint"}
	for i := nbe - 1; i >= 0; i-- {
		b := stats.Backend{Name: fmt.Sprintf("be%d", i), State: states[i%2], ServersUp: i % 3, Counts: fakeCounts(i + 1)}
		for k, h := range []*stats.HistTotals{&b.Timings.Request, &b.Timings.Queue, &b.Timings.Connect} {
			for j := range h.Cumulative {
				h.Cumulative[j] = uint64(i*k + j*j)
			}
			h.Count, h.SumSeconds = uint64(i*k+200), float64(i)*0.123+float64(k)
		}
		for j := spb - 1; j >= 0; j-- {
			b.Servers = append(b.Servers, stats.Server{Name: fmt.Sprintf("s%d", j), State: states[(i+j)%4], Up: j%2 == 0,
				Weight: j, Maxconn: 100 * j, LastChange: time.Unix(1700000000+int64(i), int64(j)*1000), Counts: fakeCounts(i*spb + j)})
			if (i+j)%2 == 0 { // a server with a health check
				b.Servers[len(b.Servers)-1].Check = &stats.Check{Status: stats.CheckStatuses()[(i+j)%12], Code: 200 + j, DurationMs: float64(i) + 0.25}
			}
			if (i+j)%3 == 1 { // a server with tls
				b.Servers[len(b.Servers)-1].TLS = &stats.TLSCounts{Full: int64(j + 1), Resumed: int64(7 * i), Failed: int64(i + j), Timeouts: int64(j % 2)}
			}
		}
		f.snap.Backends = append(f.snap.Backends, b)
	}
	for i := range 12 {
		f.act = append(f.act, stats.LoopActivity{Loop: i, Loops: uint64(i) * 1000, PollIO: 7, AvgLoopUs: 12,
			TaskletsUrg: uint64(i), TaskletsNrm: 2 * uint64(i), TaskletsBlk: 3, Conns: int64(i),
			CPUUrgentNs: 1e6 * uint64(i), CPUNormalNs: 3e6, CPUBulkNs: 5e5, CPUHandshakeNs: 7e5,
			ShareUrg: 25.5, ShareNrm: 50, ShareBlk: 24.5})
	}
	return f
}

// discard is a ResponseWriter that counts the body without keeping it
// (httptest.ResponseRecorder would copy 20 MB per scrape into the
// measurement).
type discard struct {
	h    http.Header
	code int
	n    int
	sum  uint64 // cheap checksum to compare bodies
}

func newDiscard() *discard { return &discard{h: http.Header{}} }

func (d *discard) Header() http.Header { return d.h }
func (d *discard) WriteHeader(c int) {
	if d.code == 0 {
		d.code = c
	}
}
func (d *discard) Write(b []byte) (int, error) {
	if d.code == 0 {
		d.code = 200
	}
	d.n += len(b)
	for _, c := range b {
		d.sum = d.sum*31 + uint64(c)
	}
	return len(b), nil
}

// splicedLines keeps the lines of the spliced_* families (the Go runtime's
// and the process's change from one scrape to the next).
func splicedLines(body string) string {
	var b strings.Builder
	for _, l := range strings.SplitAfter(body, "\n") {
		if strings.HasPrefix(l, "spliced_") || strings.HasPrefix(l, "# HELP spliced_") || strings.HasPrefix(l, "# TYPE spliced_") {
			b.WriteString(l)
		}
	}
	return b.String()
}

// The exposition is byte for byte what the client_golang collector gave
// (metrics_ref_test.go): names, label order, sample order, values,
// escaping. Empty families are left out as the gatherer did.
func TestMetricsSameAsTheCollector(t *testing.T) {
	for _, fc := range []*fakeStats{newFakeStats(5, 4, 3), newFakeStats(0, 0, 0), newFakeStats(1, 2, 0)} {
		if len(fc.snap.Frontends) == 1 && len(fc.snap.Backends) == 0 {
			fc.snap.Frontends, fc.act = nil, nil
		}
		ref := httptest.NewRecorder()
		refMetricsHandler(fc, "v1.2.3").ServeHTTP(ref, httptest.NewRequest("GET", "/metrics", nil))
		got := httptest.NewRecorder()
		newMetricsHandler(fc, "v1.2.3").ServeHTTP(got, httptest.NewRequest("GET", "/metrics", nil))
		if got.Code != 200 || ref.Code != 200 {
			t.Fatalf("status %d, reference %d", got.Code, ref.Code)
		}
		if g, r := got.Header().Get("Content-Type"), ref.Header().Get("Content-Type"); g != r {
			t.Errorf("Content-Type %q, the collector's %q", g, r)
		}
		g, r := splicedLines(got.Body.String()), splicedLines(ref.Body.String())
		if g != r {
			gl, rl := strings.Split(g, "\n"), strings.Split(r, "\n")
			for i := 0; i < len(gl) && i < len(rl); i++ {
				if gl[i] != rl[i] {
					t.Fatalf("line %d differs:\n got %s\nwant %s\n(%d lines, want %d)", i, gl[i], rl[i], len(gl), len(rl))
				}
			}
			t.Fatalf("%d lines, want %d", len(gl), len(rl))
		}
		if !strings.Contains(got.Body.String(), "\ngo_goroutines ") || !strings.Contains(got.Body.String(), "\nprocess_") {
			t.Errorf("the Go runtime's or the process's metrics are missing")
		}
		// It parses, as the text parser of Prometheus reads it.
		scrape(t, newMetricsHandler(fc, "v1.2.3"))
	}
}

// Scrapes within metricsMaxAge share one rendering; with gzip they get the
// same text compressed.
func TestMetricsScrapesShareOneRendering(t *testing.T) {
	fc := newFakeStats(3, 3, 3)
	m := newMetricsHandler(fc, "test")
	m.maxAge = time.Hour
	a, b := httptest.NewRecorder(), httptest.NewRecorder()
	m.ServeHTTP(a, httptest.NewRequest("GET", "/metrics", nil))
	req := httptest.NewRequest("GET", "/metrics", nil)
	req.Header.Set("Accept-Encoding", "gzip")
	m.ServeHTTP(b, req)
	if n := fc.calls.Load(); n != 1 {
		t.Fatalf("two scrapes read the stats %d times, want once", n)
	}
	if b.Header().Get("Content-Encoding") != "gzip" {
		t.Fatalf("no gzip for Accept-Encoding: gzip")
	}
	zr, err := gzip.NewReader(b.Body)
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil || !bytes.Equal(plain, a.Body.Bytes()) {
		t.Fatalf("gzipped body differs from the plain one (err %v)", err)
	}
	m.maxAge = 0
	m.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/metrics", nil))
	if n := fc.calls.Load(); n != 2 {
		t.Fatalf("an expired rendering was reused (%d reads of the stats)", n)
	}
}

// scaleFixture is the size of issue 13: 1 000 frontends, 3 000 backends,
// 9 000 servers (every counter non-zero).
func scaleFixture() *fakeStats { return newFakeStats(1000, 3000, 3) }

// allocPerScrape is the bytes allocated by one scrape of h (a fresh
// rendering each time) and the body size.
func allocPerScrape(t *testing.T, h http.Handler, n int) (alloc uint64, body int, dur time.Duration) {
	t.Helper()
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	start := time.Now()
	for range n {
		d := newDiscard()
		h.ServeHTTP(d, httptest.NewRequest("GET", "/metrics", nil))
		if d.code != 200 {
			t.Fatalf("status %d", d.code)
		}
		body = d.n
	}
	dur = time.Since(start) / time.Duration(n)
	runtime.ReadMemStats(&after)
	return (after.TotalAlloc - before.TotalAlloc) / uint64(n), body, dur
}

// At the size of issue 13 a scrape through the client_golang collector
// allocated ~10 times its 27 MB body (264 MB, 1.5 s). Written directly, the
// first scrape allocates about its body once, and the next ones render
// into the buffer of the one before.
func TestMetricsMemoryPerScrapeAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("13 000 objects")
	}
	fc := scaleFixture()
	m := newMetricsHandler(fc, "test")
	m.maxAge = 0 // every scrape renders
	first, body, fdur := allocPerScrape(t, m, 1)
	alloc, _, dur := allocPerScrape(t, m, 3)
	t.Logf("direct: %d objects, body %d bytes; first scrape %.1f MB allocated in %v, then %.2f MB and %v per scrape",
		len(fc.snap.Frontends)+len(fc.snap.Backends)*4, body, float64(first)/1e6, fdur, float64(alloc)/1e6, dur)
	if first > uint64(2*body) {
		t.Errorf("the first scrape allocates %d bytes for a %d-byte body; want at most twice the body", first, body)
	}
	if alloc > uint64(body/20) {
		t.Errorf("a later scrape allocates %d bytes for a %d-byte body; want at most 1/20 of the body", alloc, body)
	}
	if testing.Verbose() {
		ralloc, rbody, rdur := allocPerScrape(t, refMetricsHandler(fc, "test"), 1)
		t.Logf("collector (before): body %d bytes, %.1f MB allocated and %v per scrape", rbody, float64(ralloc)/1e6, rdur)
	}
}

// 16 scrapes at once at that size: at most metricsMaxInFlight are served,
// the others get 503 at once; the served ones share one rendering; after
// them the heap is back near where it was.
func TestMetricsParallelScrapesAtScale(t *testing.T) {
	if testing.Short() {
		t.Skip("13 000 objects")
	}
	fc := scaleFixture()
	m := newMetricsHandler(fc, "test")
	m.maxAge = time.Hour // all of them within one rendering's life
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	// Hold every slot so that the parallel scrapes find them taken.
	for range metricsMaxInFlight {
		m.inflight <- struct{}{}
	}
	d := newDiscard()
	m.ServeHTTP(d, httptest.NewRequest("GET", "/metrics", nil))
	if d.code != http.StatusServiceUnavailable || d.h.Get("Retry-After") == "" {
		t.Fatalf("scrape over the in-flight limit: %d, Retry-After %q; want 503 with Retry-After", d.code, d.h.Get("Retry-After"))
	}
	for range metricsMaxInFlight {
		<-m.inflight
	}
	const n = 16
	var (
		wg     sync.WaitGroup
		mu     sync.Mutex
		codes  = map[int]int{}
		sums   = map[uint64]bool{}
		start  = make(chan struct{})
		served atomic.Int64
	)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			d := newDiscard()
			m.ServeHTTP(d, httptest.NewRequest("GET", "/metrics", nil))
			mu.Lock()
			codes[d.code]++
			if d.code == 200 {
				sums[d.sum] = true
				served.Add(1)
			}
			mu.Unlock()
		}()
	}
	close(start)
	wg.Wait()
	runtime.GC()
	runtime.ReadMemStats(&after)
	if codes[200]+codes[503] != n || codes[200] == 0 {
		t.Fatalf("status codes %v, want only 200 and 503", codes)
	}
	if c := fc.calls.Load(); c != 1 || len(sums) != 1 {
		t.Fatalf("%d scrapes read the stats %d times (%d distinct bodies); want one rendering", served.Load(), c, len(sums))
	}
	total := after.TotalAlloc - before.TotalAlloc
	grown := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	body := len(m.cur.body)
	t.Logf("%d parallel scrapes: %v; %.1f MB allocated in all, heap after GC %+.1f MB (body %d bytes)",
		n, codes, float64(total)/1e6, float64(grown)/1e6, body)
	// One rendering, kept: the body and its growth, little more.
	if total > uint64(4*body) {
		t.Errorf("%d parallel scrapes allocated %d bytes; want at most 4 bodies (%d)", n, total, 4*body)
	}
	if grown > int64(2*body) {
		t.Errorf("heap after GC grew by %d bytes; want at most 2 bodies (%d): only the current rendering is kept", grown, 2*body)
	}
}

// blockingStats is a core whose Stats waits until release is closed.
type blockingStats struct {
	*fakeStats
	release chan struct{}
}

func (b *blockingStats) Stats() stats.Snapshot {
	<-b.release
	return b.fakeStats.Stats()
}

// Through the whole API: while scrapes are being served, the ones over the
// in-flight limit get 503 at once instead of piling up (each of them used
// to build its own exposition: 16 of them took RSS from 267 MB to 3.5 GB).
func TestMetricsScrapesOverTheLimitGet503AtOnce(t *testing.T) {
	st, err := config.Open(t.TempDir(), "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	bc := &blockingStats{fakeStats: newFakeStats(2, 2, 2), release: make(chan struct{})}
	h := New(Options{Store: st, Core: bc, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0",
		AdminHosts: []string{"example.com:80"}})
	const n = 12
	var done, refused atomic.Int64
	codes := make(chan int, n)
	for range n {
		go func() {
			w := httptest.NewRecorder()
			h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
			if w.Code == http.StatusServiceUnavailable {
				refused.Add(1)
			}
			done.Add(1)
			codes <- w.Code
		}()
	}
	// The data plane's stats are not readable yet: no scrape can finish but
	// by being refused.
	testutil.Eventually(t, 10*time.Second, func() bool { return refused.Load() >= n-4 }, "the scrapes over the limit to be refused")
	close(bc.release)
	got := map[int]int{}
	for range n {
		got[<-codes]++
	}
	if got[200] == 0 || got[200]+got[503] != n {
		t.Fatalf("status codes %v; want some 200 and the rest 503", got)
	}
	if c := bc.calls.Load(); c != 1 {
		t.Fatalf("%d scrapes read the stats %d times; want once (one shared rendering)", got[200], c)
	}
}
