package main

// End-to-end test of per-server statistics and health check results: the
// real binary, an http backend with an http check whose Host is set, one
// origin that serves and one that refuses, then answers its checks 503.

import (
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

type srvCheck struct {
	Status    string     `json:"status"`
	Code      int        `json:"code"`
	Reason    string     `json:"reason"`
	Since     time.Time  `json:"since"`
	CheckedAt *time.Time `json:"checked_at"`
}

type srvCounts struct {
	Requests int64            `json:"requests"`
	Status   map[string]int64 `json:"status"`
	RespAvg  float64          `json:"response_time_avg_us"`
}

type srvStats struct {
	Frontends []struct {
		Name string `json:"name"`
		srvCounts
	} `json:"frontends"`
	Backends []struct {
		Name string `json:"name"`
		srvCounts
		Servers []struct {
			Name string `json:"name"`
			Up   bool   `json:"up"`
			srvCounts
			Check *srvCheck `json:"check"`
		} `json:"servers"`
	} `json:"backends"`
}

func readSrvStats(t *testing.T, in *instance) srvStats {
	t.Helper()
	var s srvStats
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &s)
	return s
}

// TestServerStatsAndCheckReasons: 7 requests answered 200 five times then
// 503 twice by s1 count exactly that for s1, its backend and the
// frontend, the health checks of s1 (its Host the check's host) apart;
// s2, refused, shows L4CON "connection refused", then L7STS 503 once a
// server answers its checks 503, with a later since; /metrics says the
// same.
func TestServerStatsAndCheckReasons(t *testing.T) {
	in := startSpliced(t, "")
	var served atomic.Int64
	var hostMu sync.Mutex
	checkHosts := map[string]int{}
	s1 := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/health" {
			hostMu.Lock()
			checkHosts[r.Host]++
			hostMu.Unlock()
			return // 200
		}
		if served.Add(1) > 5 {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		io.WriteString(w, "s1")
	})}
	ln1, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go s1.Serve(ln1)
	t.Cleanup(func() { s1.Close() })
	port2 := testutil.FreePort(t) // refuses until a server listens there
	be := httpBackend("web", "roundrobin",
		map[string]any{"name": "s1", "address": "127.0.0.1", "port": ln1.Addr().(*net.TCPAddr).Port},
		map[string]any{"name": "s2", "address": "127.0.0.1", "port": port2})
	be["health_check"] = map[string]any{"type": "http", "path": "/health", "host": "check.example:8080",
		"interval_ms": 100, "timeout_ms": 100, "rise": 1, "fall": 1}
	port := setupHTTP(t, in, httpSetup{backends: []map[string]any{be}, frontend: map[string]any{"default_backend": "web"}})

	server := func(s srvStats, name string) (up bool, c srvCounts, chk *srvCheck) {
		for _, b := range s.Backends {
			for _, sv := range b.Servers {
				if b.Name == "web" && sv.Name == name {
					return sv.Up, sv.srvCounts, sv.Check
				}
			}
		}
		t.Fatalf("no server web/%s in the stats", name)
		return
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		s := readSrvStats(t, in)
		up2, _, c2 := server(s, "s2")
		_, _, c1 := server(s, "s1")
		return !up2 && c2 != nil && c2.Status == "L4CON" && c1 != nil && c1.Status == "L7OK"
	}, "s2 down with L4CON, s1 checked L7OK")

	client := &http.Client{Timeout: 5 * time.Second}
	for i := range 7 {
		resp, err := client.Get("http://127.0.0.1:" + strconv.Itoa(port) + "/x")
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if want := map[bool]int{true: 200, false: 503}[i < 5]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	s := readSrvStats(t, in)
	_, c1, chk1 := server(s, "s1")
	_, c2, chk2 := server(s, "s2")
	want := func(who string, c srvCounts) {
		t.Helper()
		if c.Requests != 7 || c.Status["2xx"] != 5 || c.Status["5xx"] != 2 || c.Status["4xx"] != 0 {
			t.Errorf("%s: requests %d status %v, want 7 with 5 2xx and 2 5xx", who, c.Requests, c.Status)
		}
	}
	want("server s1", c1)
	want("backend web", s.Backends[0].srvCounts)
	want("frontend pub", s.Frontends[0].srvCounts)
	if c1.RespAvg <= 0 {
		t.Errorf("server s1: response_time_avg_us %v", c1.RespAvg)
	}
	if c2.Requests != 0 {
		t.Errorf("down server s2 counts %d requests", c2.Requests)
	}
	if chk1.Code != 200 || chk1.CheckedAt == nil {
		t.Errorf("s1 check %+v", chk1)
	}
	if chk2.Reason != "connection refused" {
		t.Errorf("s2 check %+v, want reason connection refused", chk2)
	}
	hostMu.Lock()
	if len(checkHosts) != 1 || checkHosts["check.example:8080"] == 0 {
		t.Errorf("check requests' Host: %v, want check.example:8080 only", checkHosts)
	}
	hostMu.Unlock()

	// s2 now answers, but its checks get 503: L7STS 503, since later.
	ln2, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(port2))
	if err != nil {
		t.Fatal(err)
	}
	s2 := &http.Server{ReadHeaderTimeout: 5 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
	})}
	go s2.Serve(ln2)
	t.Cleanup(func() { s2.Close() })
	var chk *srvCheck
	testutil.Eventually(t, 5*time.Second, func() bool {
		_, _, chk = server(readSrvStats(t, in), "s2")
		return chk.Status == "L7STS"
	}, "s2 checked L7STS")
	if chk.Code != 503 || chk.Reason != "status 503" || !chk.Since.After(chk2.Since) {
		t.Errorf("s2 check %+v, want code 503, reason status 503, since after %v", chk, chk2.Since)
	}

	// /metrics: the check status and the request histogram.
	testutil.Eventually(t, 5*time.Second, func() bool {
		body := string(in.MustDo(200, "GET", "/metrics", nil).Body)
		return strings.Contains(body, `spliced_server_check_status{backend="web",server="s2",status="L7STS"} 1`+"\n") &&
			strings.Contains(body, `spliced_server_check_code{backend="web",server="s2"} 503`+"\n") &&
			strings.Contains(body, `spliced_backend_request_duration_seconds_count{backend="web"} 7`+"\n") &&
			strings.Contains(body, `spliced_backend_request_duration_seconds_bucket{backend="web",le="+Inf"} 7`+"\n") &&
			strings.Contains(body, `spliced_server_requests_total{backend="web",server="s1"} 7`+"\n")
	}, "/metrics with the check status and the histograms")
}
