package api

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spliced-proxy/spliced/core/stats"
)

func TestStatsFilters(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends/web/servers", `{"name":"s2","address":"127.0.0.1","port":8082}`)
	tests := []struct {
		query         string
		status        int
		fronts, backs int
		servers       int // servers of the first backend
	}{
		{"", 200, 1, 1, 2},
		{"?frontend=public", 200, 1, 0, 0},
		{"?backend=web", 200, 0, 1, 2},
		{"?server=s2", 200, 0, 1, 1},
		{"?backend=web&server=s1", 200, 0, 1, 1},
		{"?frontend=public&backend=web", 200, 1, 1, 2},
		{"?frontend=ghost", 404, 0, 0, 0},
		{"?backend=ghost", 404, 0, 0, 0},
		{"?backend=web&server=ghost", 404, 0, 0, 0},
	}
	for _, tc := range tests {
		t.Run(tc.query, func(t *testing.T) {
			w := f.must(t, tc.status, "GET", "/api/v1/stats"+tc.query, "")
			if tc.status != 200 {
				problemOf(t, w)
				return
			}
			s := decodeJSON[stats.Snapshot](t, w)
			if len(s.Frontends) != tc.fronts || len(s.Backends) != tc.backs {
				t.Fatalf("%d frontends, %d backends; want %d, %d", len(s.Frontends), len(s.Backends), tc.fronts, tc.backs)
			}
			if tc.backs > 0 && len(s.Backends[0].Servers) != tc.servers {
				t.Fatalf("%d servers, want %d", len(s.Backends[0].Servers), tc.servers)
			}
		})
	}
}

func TestActivityIsAJSONArray(t *testing.T) {
	f := newFixture(t)
	w := f.must(t, 200, "GET", "/api/v1/activity", "")
	if got := strings.TrimSpace(w.Body.String()); got != "[]" {
		t.Fatalf("activity of a core without loops = %s, want []", got)
	}
}

func TestMemoryReportsTheProcess(t *testing.T) {
	f := newFixture(t)
	w := f.must(t, 200, "GET", "/api/v1/memory", "")
	m := decodeJSON[stats.Memory](t, w)
	if m.RSSBytes <= 0 || m.Go.TotalBytes == 0 || m.Go.HeapObjectsBytes == 0 || m.Loops == nil {
		t.Fatalf("memory of a core without loops = %s: want the process's RSS, the runtime's classes and an empty loops array", w.Body)
	}
}

// documentedMetrics are the names the README table promises (a subset of
// every family is enough to catch a rename).
var documentedMetrics = []string{
	"spliced_frontend_connections_total", "spliced_frontend_current_connections", "spliced_frontend_connection_rate",
	"spliced_frontend_requests_total", "spliced_frontend_request_rate", "spliced_frontend_bytes_in_total",
	"spliced_frontend_bytes_out_total", "spliced_frontend_denied_total", "spliced_frontend_request_errors_total",
	"spliced_frontend_http_responses_total", "spliced_frontend_max_connections",
	"spliced_frontend_tls_handshakes_total", "spliced_frontend_tls_handshake_timeouts_total",
	"spliced_backend_connections_total", "spliced_backend_connect_errors_total", "spliced_backend_retries_total",
	"spliced_backend_response_errors_total", "spliced_server_response_errors_total",
	"spliced_frontend_peak_connections", "spliced_backend_peak_request_rate", "spliced_server_peak_connection_rate",
	"spliced_backend_queue", "spliced_backend_up", "spliced_backend_servers_up", "spliced_backend_connect_time_seconds",
	"spliced_backend_response_time_seconds", "spliced_backend_http_responses_total",
	"spliced_server_connections_total", "spliced_server_current_connections", "spliced_server_bytes_in_total",
	"spliced_server_up", "spliced_server_state", "spliced_server_weight", "spliced_server_last_change_timestamp_seconds",
	"spliced_config_generation", "spliced_loops", "spliced_info",
}

func scrape(t *testing.T, h http.Handler) map[string]*dto.MetricFamily {
	t.Helper()
	w := httptest.NewRecorder()
	h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	if w.Code != 200 {
		t.Fatalf("/metrics: %d %s", w.Code, w.Body.String())
	}
	if ct := w.Header().Get("Content-Type"); !strings.HasPrefix(ct, "text/plain") {
		t.Fatalf("Content-Type %q, want the text format", ct)
	}
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(strings.NewReader(w.Body.String()))
	if err != nil {
		t.Fatalf("the exposition does not parse: %v\n%s", err, w.Body.String())
	}
	return fams
}

func TestMetricsParseAndCarryTheDocumentedNames(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	fams := scrape(t, f.h)
	for _, name := range documentedMetrics {
		fam, ok := fams[name]
		if !ok {
			t.Errorf("metric %s missing", name)
			continue
		}
		if len(fam.GetMetric()) == 0 {
			t.Errorf("metric %s has no sample", name)
		}
	}
	g := fams["spliced_config_generation"].GetMetric()[0].GetGauge().GetValue()
	if g != 2 {
		t.Errorf("spliced_config_generation = %v, want 2", g)
	}
	lbl := fams["spliced_server_up"].GetMetric()[0].GetLabel()
	if len(lbl) != 2 || lbl[0].GetName() != "backend" || lbl[0].GetValue() != "web" || lbl[1].GetValue() != "s1" {
		t.Errorf("spliced_server_up labels = %v", lbl)
	}
}

type auditPage []AuditEntry

func (f *fixture) audit(t *testing.T, query string) (auditPage, *httptest.ResponseRecorder) {
	t.Helper()
	w := f.must(t, 200, "GET", "/api/v1/audit"+query, "")
	return decodeJSON[auditPage](t, w), w
}

// Every write, accepted or refused, leaves exactly one entry; accepted
// ones carry the plan and the before/after of the changed object.
func TestAuditOneEntryPerWriteWithTheDiff(t *testing.T) {
	dir := t.TempDir()
	f := newFixtureIn(t, dir)
	f.seed(t) // 2 writes
	writes := []struct {
		method, path, body string
		h                  []hdr
		status             int
	}{
		{"PATCH", "/api/v1/backends/web/servers/s1", `{"weight":50}`, nil, 200},
		{"POST", "/api/v1/backends/web/servers", `{"name":"s5","address":"127.0.0.1","port":0}`, nil, 422},
		{"PUT", "/api/v1/tuning", `{}`, []hdr{{"Content-Type": "text/plain"}}, 415},
		{"DELETE", "/api/v1/backends/web/servers/s1?dry_run=true", "", nil, 200},
		{"DELETE", "/api/v1/frontends/ghost", "", nil, 404},
	}
	for _, wr := range writes {
		f.must(t, wr.status, wr.method, wr.path, wr.body, wr.h...)
	}
	f.must(t, 200, "GET", "/api/v1/config", "") // reads are not audited
	got, _ := f.audit(t, "")
	if len(got) != 2+len(writes) {
		t.Fatalf("%d entries, want %d: %+v", len(got), 2+len(writes), got)
	}
	for i, wr := range writes {
		e := got[len(writes)-1-i] // newest first
		if e.Method != wr.method || !strings.HasPrefix(wr.path, strings.SplitN(e.Path, "?", 2)[0]) || e.Status != wr.status {
			t.Errorf("entry for %s %s = %s %s %d", wr.method, wr.path, e.Method, e.Path, e.Status)
		}
		if e.Actor != "local" || e.RequestID == "" || e.Remote == "" || e.Time.IsZero() {
			t.Errorf("entry %d lacks who/when: %+v", e.Seq, e)
		}
		if (e.Status >= 400) != (e.Error != "") {
			t.Errorf("entry %d: status %d, error %q", e.Seq, e.Status, e.Error)
		}
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq >= got[i-1].Seq {
			t.Fatalf("not newest first: %d then %d", got[i-1].Seq, got[i].Seq)
		}
	}
	patch := got[len(writes)-1]
	if patch.Generation != 3 || patch.Plan == nil || len(patch.Plan.Items) != 1 || len(patch.Changes) != 1 {
		t.Fatalf("PATCH entry = %+v, want generation 3, one plan item, one change", patch)
	}
	var before, after struct{ Weight int }
	if json.Unmarshal(patch.Changes[0].Before, &before) != nil || json.Unmarshal(patch.Changes[0].After, &after) != nil ||
		before.Weight != 100 || after.Weight != 50 || patch.Changes[0].Object != "backend/web/server/s1" {
		t.Fatalf("PATCH change = %s: %s -> %s", patch.Changes[0].Object, patch.Changes[0].Before, patch.Changes[0].After)
	}
	if dry := got[1]; !dry.DryRun || dry.Plan == nil || len(dry.Changes) != 1 || dry.Changes[0].After != nil {
		t.Fatalf("dry-run delete entry = %+v", dry)
	}
	if !strings.Contains(got[3].Error, "validation") {
		t.Errorf("refused POST error = %q", got[3].Error)
	}

	// A restart (a new API over the same state directory) keeps the trail
	// and goes on numbering.
	f2 := newFixtureIn(t, dir)
	f2.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":60}`)
	again, _ := f2.audit(t, "")
	if len(again) != len(got)+1 || again[0].Seq != got[0].Seq+1 || again[1].Seq != got[0].Seq {
		t.Fatalf("after restart: %d entries, newest seq %d; want %d and %d", len(again), again[0].Seq, len(got)+1, got[0].Seq+1)
	}
}

// auditSeqs reads the audit trail from query on, following the Link of
// each page (10 pages at most), and lists the seqs read.
func (f *fixture) auditSeqs(t *testing.T, q string) string {
	t.Helper()
	var out []int64
	for range 10 {
		page, w := f.audit(t, q)
		for _, e := range page {
			out = append(out, e.Seq)
		}
		link := w.Header().Get("Link")
		if link == "" {
			break
		}
		q = strings.TrimPrefix(link[1:strings.Index(link, ">")], base+"/audit")
	}
	return fmt.Sprint(out)
}

func TestAuditPagesWithTheBeforeCursor(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	for i := range 5 {
		f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", fmt.Sprintf(`{"weight":%d}`, 10+i))
	}
	if seqs := f.auditSeqs(t, "?limit=3"); seqs != "[7 6 5 4 3 2 1]" {
		t.Fatalf("paged seqs %v, want [7 6 5 4 3 2 1]", seqs)
	}
	f.must(t, 400, "GET", "/api/v1/audit?limit=0", "")
	f.must(t, 400, "GET", "/api/v1/audit?before=x", "")
}

// The filters of GET /api/v1/audit select over the whole trail, and the
// Link of a page keeps them.
func TestAuditFiltersByActorObjectResultAndDryRun(t *testing.T) {
	f := newFixture(t)
	f.seed(t)                                                                               // 1 POST backend web, 2 POST frontend pub
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1?dry_run=true", `{"weight":3}`) // 3
	f.must(t, 422, "PATCH", "/api/v1/backends/web/servers/s1", `{"port":0}`)                // 4
	for i := range 3 {
		f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", fmt.Sprintf(`{"weight":%d}`, 10+i)) // 5, 6, 7
	}
	for _, tc := range []struct{ q, want string }{
		{"?dry_run=false", "[7 6 5 4 2 1]"},
		{"?dry_run=true", "[3]"},
		{"?result=refused", "[4]"},
		{"?result=ok&dry_run=false", "[7 6 5 2 1]"},
		{"?object=FRONTEND/pub", "[2]"},
		{"?object=backend/web/server/s1&dry_run=false&limit=2", "[7 6 5 4]"}, // paged: the Link keeps the filters
		{"?object=backend/web/server/s1&result=ok&limit=1", "[7 6 5 3]"},
		{"?actor=local", "[7 6 5 4 3 2 1]"},
		{"?actor=nobody", "[]"},
	} {
		if got := f.auditSeqs(t, tc.q); got != tc.want {
			t.Errorf("%s: seqs %s, want %s", tc.q, got, tc.want)
		}
	}
	f.must(t, 400, "GET", "/api/v1/audit?result=maybe", "")
	f.must(t, 400, "GET", "/api/v1/audit?dry_run=yes", "")
}

func TestAuditRotatesPastItsBound(t *testing.T) {
	dir := t.TempDir()
	l := newAuditLog(dir, slog.New(slog.DiscardHandler))
	l.maxBytes, l.keep = 2000, 1
	for i := range 40 {
		if err := l.write(&AuditEntry{Method: "PUT", Path: fmt.Sprintf("/api/v1/tuning/%d", i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"audit.log", "audit.log.1"} {
		fi, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if fi.Size() > 2000 {
			t.Fatalf("%s is %d bytes, bound 2000", name, fi.Size())
		}
	}
	got, err := l.read(1000, 0, auditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) == 0 || got[0].Seq != 40 || len(got) >= 40 {
		t.Fatalf("read back %d entries, newest %d; want the newest (40) and fewer than 40 kept", len(got), got[0].Seq)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq-1 {
			t.Fatalf("gap across rotation: %d then %d", got[i-1].Seq, got[i].Seq)
		}
	}
}

// readEvents reads the SSE stream and sends each "event: name" with its data.
func readEvents(t *testing.T, body *bufio.Reader, out chan<- [2]string) {
	var name string
	for {
		line, err := body.ReadString('\n')
		if err != nil {
			close(out)
			return
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case strings.HasPrefix(line, "event: "):
			name = line[len("event: "):]
		case strings.HasPrefix(line, "data: "):
			out <- [2]string{name, line[len("data: "):]}
		}
	}
}

func TestEventsCarryConfigChangesAndStatsTicks(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Fatalf("Content-Type %q", ct)
	}
	evs := make(chan [2]string, 16)
	go readEvents(t, bufio.NewReader(resp.Body), evs)

	start := time.Now()
	f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7}`)
	var sawConfig, sawStats bool
	deadline := time.After(3 * time.Second)
	for !sawConfig || !sawStats {
		select {
		case ev, ok := <-evs:
			if !ok {
				t.Fatal("stream ended")
			}
			switch ev[0] {
			case "config":
				var c ConfigEvent
				if err := json.Unmarshal([]byte(ev[1]), &c); err != nil || c.Generation != 3 || len(c.Plan.Items) != 1 {
					t.Fatalf("config event %s (%v)", ev[1], err)
				}
				if d := time.Since(start); d > time.Second {
					t.Fatalf("config event after %v, want within a second", d)
				}
				sawConfig = true
			case "stats":
				var s StatsEvent
				if err := json.Unmarshal([]byte(ev[1]), &s); err != nil || len(s.Frontends) != 1 || len(s.Servers) != 1 || s.Servers[0].Name != "web/s1" {
					t.Fatalf("stats event %s (%v)", ev[1], err)
				}
				sawStats = true
			}
		case <-deadline:
			t.Fatalf("config event seen %v, stats event seen %v after 3 s", sawConfig, sawStats)
		}
	}
}

// A client that does not read is dropped once its queue is full; publish
// never blocks, and the ticker stops with the last client.
func TestEventsDropSlowClientsWithoutBlocking(t *testing.T) {
	f := newFixture(t)
	h := f.h.(interface {
		ServeHTTP(http.ResponseWriter, *http.Request)
	})
	_ = h
	hub := newEventHub(f.core, slog.New(slog.DiscardHandler))
	slow := hub.subscribe()
	fast := hub.subscribe()
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range eventQueue + 10 {
			hub.publish([]byte(fmt.Sprintf("event: x\ndata: %d\n\n", i)))
			<-fast.ch // the fast client keeps up
		}
	}()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("publish blocked on a slow client")
	}
	select {
	case <-slow.gone:
	default:
		t.Fatal("slow client still subscribed")
	}
	select {
	case <-fast.gone:
		t.Fatal("fast client dropped")
	default:
	}
	hub.unsubscribe(fast)
	hub.mu.Lock()
	running := hub.stop != nil
	hub.mu.Unlock()
	if running {
		t.Fatal("stats ticker still running without clients")
	}
}

// BenchmarkMetricsScrape1kServers: one /metrics scrape with 1 000 servers
// (the collector's cost on the admin goroutine; the loops are not involved).
func BenchmarkMetricsScrape1kServers(b *testing.B) {
	f := newFixture(b)
	var sb strings.Builder
	sb.WriteString(`{"backends":[{"name":"big","servers":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"s%d","address":"10.0.%d.%d","port":80}`, i, i>>8&255, i&255)
	}
	sb.WriteString(`]}]}`)
	f.must(b, 200, "PUT", "/api/v1/config", sb.String())
	b.ReportAllocs()
	for b.Loop() {
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
		if w.Code != 200 {
			b.Fatal(w.Code)
		}
	}
}
