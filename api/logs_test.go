package api

import (
	"bufio"
	"log/slog"
	"net/http"
	"net/http/httptest"
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
	al := accesslog.New(log, 0, func() int64 { return 0 })
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
