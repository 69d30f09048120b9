package api

import (
	"bufio"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/core/stats"
)

func logsFixture(t *testing.T) (http.Handler, *accesslog.Log) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := config.Open(t.TempDir(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	nop := &coretest.Nop{}
	if err := nop.Apply(t.Context(), st.Current()); err != nil {
		t.Fatal(err)
	}
	al := accesslog.New(log, 0, 0, func() int64 { return 0 })
	h := New(Options{Store: st, Core: nop, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}, AccessLog: al})
	return h, al
}

func writeEntry(al *accesslog.Log, status int32, line string) {
	e := stats.LogEntry{HTTP: true, Frontend: "fe", Status: status, Term: stats.TermNormal}
	e.SetLine([]byte(line))
	al.Write(&e)
}

// TestLogsListsTheLastEntriesNewestLast: ?limit= keeps the newest, in
// order, with the request line redacted; a bad limit is a 400.
func TestLogsListsTheLastEntriesNewestLast(t *testing.T) {
	h, al := logsFixture(t)
	f := &fixture{h: h}
	if got := decodeJSON[[]accesslog.Record](t, f.must(t, 200, "GET", "/api/v1/logs", "")); len(got) != 0 {
		t.Fatalf("before any entry: %+v", got)
	}
	for _, st := range []int32{200, 404, 503} {
		writeEntry(al, st, "GET /?token=t HTTP/1.1")
	}
	got := decodeJSON[[]accesslog.Record](t, f.must(t, 200, "GET", "/api/v1/logs?limit=2", ""))
	if len(got) != 2 || got[0].Status != 404 || got[1].Status != 503 || got[1].Request != "GET /?token=REDACTED HTTP/1.1" ||
		got[1].TqMs != -1 || got[1].Termination != "--" {
		t.Fatalf("limit=2: %+v", got)
	}
	f.must(t, 400, "GET", "/api/v1/logs?limit=0", "")
	f.must(t, 400, "GET", "/api/v1/logs?follow=2", "")
}

// TestLogsFiltersSelectAmongWhatIsKept: each filter of GET /api/v1/logs
// over a 502 followed by more normal requests than the last entries'
// ring holds: the 502 stays found by the filters that select it; a value
// that cannot be is a 400 whose detail names its parameter.
func TestLogsFiltersSelectAmongWhatIsKept(t *testing.T) {
	h, al := logsFixture(t)
	f := &fixture{h: h}
	add := func(fe, be, sv string, status int32, term stats.Termination, client, line string) {
		e := stats.LogEntry{HTTP: true, Frontend: fe, Backend: be, Server: sv, Status: status, Term: term,
			Client: netip.MustParseAddrPort(client)}
		e.SetLine([]byte(line))
		al.Add(&e)
	}
	add("pub", "web", "s2", 502, stats.Termination{'S', 'H'}, "192.0.2.7:51234", "GET /incident HTTP/1.1")
	add("pub", "web", "s1", 404, stats.TermNormal, "192.0.2.8:1000", "GET /missing HTTP/1.1")
	add("adm", "api", "a1", 200, stats.Termination{'C', 'D'}, "[2001:db8::1]:443", "POST /upload HTTP/1.1")
	for range accesslog.KeepDefault + 10 {
		add("pub", "web", "s1", 200, stats.TermNormal, "192.0.2.9:2000", "GET /ok HTTP/1.1")
	}
	al.Flush()
	for _, tc := range []struct {
		query string
		want  []string // request lines, oldest first
	}{
		{"status=5xx", []string{"GET /incident HTTP/1.1"}},
		{"status=502", []string{"GET /incident HTTP/1.1"}},
		{"status=4xx", []string{"GET /missing HTTP/1.1"}},
		{"termination=SH", []string{"GET /incident HTTP/1.1"}},
		{"abnormal=1", []string{"GET /incident HTTP/1.1", "GET /missing HTTP/1.1", "POST /upload HTTP/1.1"}},
		{"abnormal=1&frontend=adm", []string{"POST /upload HTTP/1.1"}},
		{"abnormal=1&backend=web&server=s2", []string{"GET /incident HTTP/1.1"}},
		{"abnormal=1&client=192.0.2.7", []string{"GET /incident HTTP/1.1"}},
		{"abnormal=1&client=192.0.2.7:51234", []string{"GET /incident HTTP/1.1"}},
		{"abnormal=1&client=192.0.2.7:51235", nil},
		{"abnormal=1&client=2001:db8::1", []string{"POST /upload HTTP/1.1"}},
		{"status=5xx&since=2000-01-01T00:00:00Z", []string{"GET /incident HTTP/1.1"}},
		{"status=5xx&since=2999-01-01T00:00:00Z", nil},
		{"status=2xx&client=192.0.2.9&limit=2", []string{"GET /ok HTTP/1.1", "GET /ok HTTP/1.1"}},
		{"frontend=pub&server=s1&status=4xx", []string{"GET /missing HTTP/1.1"}},
	} {
		got := decodeJSON[[]accesslog.Record](t, f.must(t, 200, "GET", "/api/v1/logs?"+tc.query, ""))
		var lines []string
		for _, r := range got {
			lines = append(lines, r.Request)
		}
		if !slices.Equal(lines, tc.want) {
			t.Errorf("%s: %q, want %q", tc.query, lines, tc.want)
		}
	}
	// The last entries alone (limit up to their ring) no longer hold it.
	for _, r := range decodeJSON[[]accesslog.Record](t, f.must(t, 200, "GET", "/api/v1/logs?limit=1000", "")) {
		if r.Status != 200 {
			t.Fatalf("the last 1000 hold %+v", r)
		}
	}
	// What is kept: the last 1000 and the abnormal ones.
	if got := decodeJSON[[]accesslog.Record](t, f.must(t, 200, "GET", "/api/v1/logs?limit=2000", "")); len(got) != 1003 {
		t.Fatalf("limit=2000: %d entries, want the last 1000 and the 3 abnormal", len(got))
	}
	for _, tc := range []struct{ query, param string }{
		{"status=6xx", "status"},
		{"status=abc", "status"},
		{"termination=XX", "termination"},
		{"frontend=NOT%20A%20NAME", "frontend"},
		{"backend=-x", "backend"},
		{"server=a.b", "server"},
		{"client=example.com", "client"},
		{"since=2026-13-01", "since"},
		{"abnormal=yes", "abnormal"},
		{"limit=3001", "limit"},
	} {
		w := f.must(t, 400, "GET", "/api/v1/logs?"+tc.query, "")
		if p := problemOf(t, w); p.Type != "urn:spliced:problem:bad-query" || !strings.HasPrefix(p.Detail, tc.param+" must be") {
			t.Errorf("%s: %+v, want a bad-query naming %s", tc.query, p, tc.param)
		}
	}
}

// TestLogsFollowStreamsNewEntries: ?follow=1 is an event stream with one
// "event: access" per entry written after it started.
func TestLogsFollowStreamsNewEntries(t *testing.T) {
	h, al := logsFixture(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/v1/logs?follow=1", nil)
	req.Host = "example.com:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "text/event-stream" {
		t.Fatalf("%d %s", resp.StatusCode, resp.Header.Get("Content-Type"))
	}
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || l != ": connected\n" {
		t.Fatalf("first line %q %v", l, err)
	}
	// The subscription exists once the stream answered: entries written
	// from now on are streamed.
	done := make(chan string, 1)
	go func() {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				done <- ""
				return
			}
			if strings.HasPrefix(l, "data: ") {
				done <- l
				return
			}
		}
	}()
	writeEntry(al, 201, "POST /x HTTP/1.1")
	select {
	case l := <-done:
		if !strings.Contains(l, `"status":201`) || !strings.Contains(l, `"request":"POST /x HTTP/1.1"`) {
			t.Fatalf("event data %q", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no access event")
	}
}

// TestLogsFollowStreamsTheFilteredEntries: the filters apply to the
// stream too: with ?status=5xx a 200 written first is not sent, the 503
// after it is.
func TestLogsFollowStreamsTheFilteredEntries(t *testing.T) {
	h, al := logsFixture(t)
	srv := httptest.NewServer(h)
	defer srv.Close()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", srv.URL+"/api/v1/logs?follow=1&status=5xx", nil)
	req.Host = "example.com:80"
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	br := bufio.NewReader(resp.Body)
	if l, err := br.ReadString('\n'); err != nil || l != ": connected\n" {
		t.Fatalf("first line %q %v", l, err)
	}
	done := make(chan string, 1)
	go func() {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				done <- ""
				return
			}
			if strings.HasPrefix(l, "data: ") {
				done <- l
				return
			}
		}
	}()
	writeEntry(al, 200, "GET /fine HTTP/1.1")
	writeEntry(al, 503, "GET /busy HTTP/1.1")
	select {
	case l := <-done:
		if !strings.Contains(l, `"status":503`) {
			t.Fatalf("first event %q, want the 503", l)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no access event")
	}
}
