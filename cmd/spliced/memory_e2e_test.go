package main

import (
	"bufio"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestMemoryReportCountsIdleConnections: GET /api/v1/memory counts, on
// the loops, the kept-alive connections that are open and idle — one
// h1Conn each, no stream, no parser, no buffer in use — whatever loop
// they landed on, and says what one of them holds.
func TestMemoryReportCountsIdleConnections(t *testing.T) {
	in := startSpliced(t, "")
	o := newHTTPOrigin(t, "a", func(net.Conn, *rawReq) string { return okResp("a") })
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", o.server("s1"))},
		frontend: map[string]any{"default_backend": "web"},
	})
	const n = 30
	for range n {
		c := dialProxy(t, port)
		defer c.Close()
		if _, err := fmt.Fprintf(c, "GET / HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		readResp(t, bufio.NewReader(c), "GET")
	}
	type pool struct {
		Name  string `json:"name"`
		Live  int    `json:"live"`
		Bytes int64  `json:"bytes"`
	}
	var m struct {
		RSSBytes int64 `json:"rss_bytes"`
		Go       struct {
			TotalBytes int64 `json:"total_bytes"`
		} `json:"go"`
		Loops []struct {
			Objects []pool `json:"objects"`
		} `json:"loops"`
		IdleHTTPConnBytes int64 `json:"idle_http_conn_bytes"`
	}
	live := map[string]int{}
	testutil.Eventually(t, 5*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/memory", nil).JSON(t, &m)
		clear(live)
		for _, l := range m.Loops {
			for _, p := range l.Objects {
				live[p.Name] += p.Live
			}
		}
		return live["h1_conn"] == n && live["stream"] == 0
	}, "every idle connection counted once, none holding a stream")
	for _, k := range []string{"request_parser", "response_parser", "buffer", "tunnel"} {
		if live[k] != 0 {
			t.Errorf("%d %s in use with every connection idle", live[k], k)
		}
	}
	if m.RSSBytes <= 0 || m.Go.TotalBytes <= 0 || m.IdleHTTPConnBytes != 304 || len(m.Loops) == 0 {
		t.Errorf("rss %d, go total %d, idle connection %d B (want 304), %d loops", m.RSSBytes, m.Go.TotalBytes, m.IdleHTTPConnBytes, len(m.Loops))
	}
}
