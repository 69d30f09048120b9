package main

// End-to-end tests of what spliced counts when a server spoils its
// response (issue 23, item 7): the answers spliced makes on a server's
// behalf count on that server and its backend, and response_errors says
// how many responses were bad, cut or late — in /api/v1/stats, /metrics
// and the backends page.

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// spoilingOrigin reads one request head per connection and then, by path:
// /kill resets the connection (an origin killed with the request in
// flight), /garbage answers something that is not HTTP, anything else a
// 200.
func spoilingOrigin(t *testing.T) int {
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		line, err := br.ReadString('\n')
		if err != nil {
			return
		}
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return
			}
			if l == "\r\n" {
				break
			}
		}
		switch {
		case strings.HasPrefix(line, "GET /kill "):
			c.SetLinger(0)
		case strings.HasPrefix(line, "GET /garbage "):
			io.WriteString(c, "SSH-2.0-OpenSSH_9.2\r\n\r\n")
		default:
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")
		}
	}).Port()
}

type respErrStats struct {
	Status         map[string]int64 `json:"status"`
	Errors         int64            `json:"errors"`
	ResponseErrors int64            `json:"response_errors"`
	ConnectErrors  int64            `json:"connect_errors"`
}

// TestHTTPOriginKilledCountsOnTheServer: 4 requests cut by an origin
// killed mid-request and 3 answered with garbage get 7 502s from
// spliced; the frontend, backend web and server s1 each count 7 5xx and
// 7 response_errors, errors stays 0; /metrics says the same. The 2 good
// answers count 2xx only.
func TestHTTPOriginKilledCountsOnTheServer(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin",
			map[string]any{"name": "s1", "address": "127.0.0.1", "port": spoilingOrigin(t)})},
		frontend: map[string]any{"default_backend": "web"},
	})
	for i, path := range []string{"/kill", "/", "/garbage", "/kill", "/garbage", "/kill", "/", "/garbage", "/kill"} {
		resp, _ := roundTrip(t, port, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		want := 502
		if path == "/" {
			want = 200
		}
		if resp.StatusCode != want {
			t.Fatalf("request %d (%s): %d, want %d", i, path, resp.StatusCode, want)
		}
	}
	want := func(what string, c respErrStats) bool {
		if c.Status["5xx"] != 7 || c.Status["2xx"] != 2 || c.ResponseErrors != 7 || c.Errors != 0 || c.ConnectErrors != 0 {
			t.Logf("%s: %+v, want 7 5xx, 2 2xx, 7 response_errors, 0 errors, 0 connect_errors", what, c)
			return false
		}
		return true
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		var st struct {
			Frontends []struct {
				Name string `json:"name"`
				respErrStats
			} `json:"frontends"`
			Backends []struct {
				Name string `json:"name"`
				respErrStats
				Servers []struct {
					Name string `json:"name"`
					respErrStats
				} `json:"servers"`
			} `json:"backends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		return len(st.Frontends) == 1 && len(st.Backends) == 1 && len(st.Backends[0].Servers) == 1 &&
			want("frontend pub", st.Frontends[0].respErrStats) && want("backend web", st.Backends[0].respErrStats) &&
			want("server web/s1", st.Backends[0].Servers[0].respErrStats)
	}, "7 5xx and 7 response errors on the frontend, the backend and the server")
	body := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	for _, line := range []string{
		`spliced_backend_response_errors_total{backend="web"} 7`,
		`spliced_server_response_errors_total{backend="web",server="s1"} 7`,
		`spliced_server_http_responses_total{backend="web",code="5xx",server="s1"} 7`,
		`spliced_backend_http_responses_total{backend="web",code="5xx"} 7`,
		`spliced_frontend_response_errors_total{frontend="pub"} 7`,
		`spliced_server_request_errors_total{backend="web",server="s1"} 0`,
	} {
		if !strings.Contains(body, line+"\n") {
			t.Errorf("/metrics has no %s", line)
		}
	}
}

// TestUIServerResponseErrors: the backends page shows a server's 5xx and
// response errors as spliced counted them, in red.
func TestUIServerResponseErrors(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin",
			map[string]any{"name": "s1", "address": "127.0.0.1", "port": spoilingOrigin(t)})},
		frontend: map[string]any{"default_backend": "web"},
	})
	for i := 0; i < 3; i++ {
		if resp, _ := roundTrip(t, port, "GET /garbage HTTP/1.1\r\nHost: a\r\n\r\n"); resp.StatusCode != 502 {
			t.Fatalf("status %d, want 502", resp.StatusCode)
		}
	}
	u := newUITest(t, in)
	u.run("load backends",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base+"#/backends"),
		chromedp.WaitVisible(chromedp.CSS(`#page-backends[data-ready="1"]`)))
	sel := func(field string) string {
		return fmt.Sprintf(`tr[data-server="web/s1"] [data-stat="srv/web/s1/%s"]`, field)
	}
	u.waitJS(10*time.Second, "web/s1's 5xx and response errors", fmt.Sprintf(
		`(document.querySelector(%q) || {}).textContent === '3' && (document.querySelector(%q) || {}).textContent === '3' && document.querySelector(%q).classList.contains('bad-v')`,
		sel("s5xx"), sel("responseErrors"), sel("responseErrors")))
	u.waitJS(5*time.Second, "web's response errors", `(document.querySelector('section[data-backend="web"] [data-stat="be/web/responseErrors"]') || {}).textContent === '3'`)
	u.errs.check(t, "backends page")
}
