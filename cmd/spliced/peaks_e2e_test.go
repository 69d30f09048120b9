package main

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

type peakCounts struct {
	ConnCur     int64 `json:"conn_cur"`
	ConnMax     int64 `json:"conn_max"`
	ConnRateMax int64 `json:"conn_rate_max"`
	ReqRateMax  int64 `json:"req_rate_max"`
}

type peakStats struct {
	Frontends []struct {
		Name string `json:"name"`
		peakCounts
	} `json:"frontends"`
	Backends []struct {
		Name string `json:"name"`
		peakCounts
		Servers []struct {
			Name string `json:"name"`
			peakCounts
		} `json:"servers"`
	} `json:"backends"`
}

// TestStatsPeaksEndToEnd: 6 kept-alive http connections open at once, each
// with a request in flight, then closed: conn_max is 6 for the frontend,
// and the backend and server held 6 slots at once; 40 requests sent within
// a second give a req_rate_max of at least 20 (the burst may straddle a
// second) and at most 46; the peaks stay once it is all over, in
// /api/v1/stats and in /metrics.
func TestStatsPeaksEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	release := make(chan struct{})
	o := newHTTPOrigin(t, "A", func(_ net.Conn, r *rawReq) string {
		if r.Path == "/hold" {
			<-release
		}
		return okResp("ok")
	})
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", o.server("s1"))},
		frontend: map[string]any{"default_backend": "web"},
	})
	var conns []net.Conn
	for range 6 {
		c := dialProxy(t, port)
		fmt.Fprintf(c, "GET /hold HTTP/1.1\r\nHost: a\r\n\r\n")
		conns = append(conns, c)
	}
	read := func() peakStats {
		var s peakStats
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &s)
		return s
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		s := read()
		return len(s.Backends) == 1 && len(s.Backends[0].Servers) == 1 && s.Backends[0].Servers[0].ConnCur == 6
	}, "6 requests in flight on web/s1")
	close(release)
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		s := read()
		return len(s.Frontends) == 1 && s.Frontends[0].ConnCur == 0
	}, "the 6 connections closed")
	c := dialProxy(t, port)
	start := time.Now()
	var batch strings.Builder
	for range 40 {
		batch.WriteString("GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	c.Write([]byte(batch.String()))
	br := bufio.NewReader(c)
	for range 40 {
		readResp(t, br, "GET")
	}
	if d := time.Since(start); d > 900*time.Millisecond {
		t.Skipf("40 pipelined requests took %v: too slow a machine for a one-second burst", d)
	}
	c.Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		s := read()
		if len(s.Frontends) != 1 || len(s.Backends) != 1 || len(s.Backends[0].Servers) != 1 {
			return false
		}
		f, b, sv := s.Frontends[0].peakCounts, s.Backends[0].peakCounts, s.Backends[0].Servers[0].peakCounts
		ok := f.ConnCur == 0 && f.ConnMax == 6 && b.ConnMax == 6 && sv.ConnMax == 6 &&
			f.ReqRateMax >= 20 && f.ReqRateMax <= 46 && b.ReqRateMax >= 20 && sv.ReqRateMax >= 20 && f.ConnRateMax >= 6
		if !ok {
			t.Logf("frontend %+v backend %+v server %+v", f, b, sv)
		}
		return ok
	}, "the peaks: 6 connections, at least 20 requests in a second")
	body := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	for _, line := range []string{
		`spliced_frontend_peak_connections{frontend="pub"} 6`,
		`spliced_backend_peak_connections{backend="web"} 6`,
		`spliced_server_peak_connections{backend="web",server="s1"} 6`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics has no %s", line)
		}
	}
}
