package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"

	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPServerCountsRequestsAndStatusClasses: 7 requests on one
// keep-alive connection, answered 200 five times then 503 twice by the
// origin, count 7 requests with 5 2xx and 2 5xx for the server, as for
// its backend and the frontend; the backend's histograms count every
// request, one connect and no wait.
func TestHTTPServerCountsRequestsAndStatusClasses(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var n atomic.Int64
	o := newRawOrigin(t, func(string) string {
		if n.Add(1) <= 5 {
			return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
		}
		return "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 4\r\n\r\nbusy"
	})
	fe := httpFrontend(t, nil, o.addr)
	srv := fe.Backend.B.Servers[0]
	srv.Counters = new(stats.Counters)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 7; i++ {
		resp, _ := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
		if want := map[bool]int{true: 200, false: 503}[i < 5]; resp.StatusCode != want {
			t.Fatalf("request %d: %d, want %d", i, resp.StatusCode, want)
		}
	}
	// The last exchange ends on the loop after its bytes left: wait for
	// its request to be timed.
	testutil.Eventually(t, 5e9, func() bool { return fe.Backend.Stats.TimingTotal().Request.Count == 7 }, "7 requests timed")
	want := stats.StatusCounts{S2xx: 5, S5xx: 2}
	for _, o := range []struct {
		name string
		c    *stats.Counters
	}{{"frontend", fe.Stats}, {"backend", fe.Backend.Stats}, {"server", srv.Counters}} {
		got := o.c.Total(0).Counts()
		if got.Requests != 7 || got.Status != want {
			t.Errorf("%s: requests %d status %+v, want 7 and %+v", o.name, got.Requests, got.Status, want)
		}
		if o.name != "frontend" && (got.RespCount != 7 || got.ConnectCount != 1 || got.ResponseTimeAvgUs <= 0) {
			t.Errorf("%s: %d responses timed (avg %v us), %d connects, want 7 (> 0) and 1", o.name, got.RespCount, got.ResponseTimeAvgUs, got.ConnectCount)
		}
	}
	tm := fe.Backend.Stats.TimingTotal()
	if tm.Connect.Count != 1 || tm.Queue.Count != 7 || tm.Queue.Cumulative[0] != 7 || tm.Queue.SumSeconds != 0 {
		t.Errorf("connect %+v queue %+v: want 1 connect, 7 requests that did not wait", tm.Connect, tm.Queue)
	}
	if tm.Request.Cumulative[stats.HistBuckets-1] != 7 {
		t.Errorf("request durations %+v: want 7 under 10 s", tm.Request)
	}
}

// TestHTTPReplayIsOneServerRequest: a request replayed on a new connection
// after its pooled one died is one request for the server, not two.
func TestHTTPReplayIsOneServerRequest(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var conns atomic.Int64
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		n := conns.Add(1)
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if _, err := readHead(br); err != nil {
				return
			}
			if n == 1 && i == 1 {
				return // dies with the request unanswered
			}
			io.WriteString(c, rawResponse)
		}
	}).Addr
	fe := httpFrontend(t, nil, addr)
	srv := fe.Backend.B.Servers[0]
	srv.Counters = new(stats.Counters)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d server connections, want 2 (a replay)", n)
	}
	if got := srv.Counters.Total(0); got.Requests != 2 || got.Status[2] != 2 {
		t.Fatalf("server: %d requests, %d 2xx; want 2 and 2", got.Requests, got.Status[2])
	}
}

// TestHTTPClientResetMidResponseCountsAnAbort: a client that resets in
// the middle of a response aborts the exchange, and both its connections
// are reset (package doc, "Aborts"): the abort counts for the frontend,
// the backend and the server, as a tunnel's does.
func TestHTTPClientResetMidResponseCountsAnAbort(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100000000\r\n\r\n")
		chunk := make([]byte, 64<<10)
		for range 100000000 / len(chunk) { // until the proxy resets
			if _, err := c.Write(chunk); err != nil {
				return
			}
		}
	}).Addr
	fe := httpFrontend(t, nil, addr)
	srv := fe.Backend.B.Servers[0]
	srv.Counters = new(stats.Counters)
	c := e.dialHTTP(fe)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, err := io.ReadFull(c, make([]byte, 1<<20)); err != nil {
		t.Fatal(err)
	}
	c.SetLinger(0)
	c.Close()
	testutil.Eventually(t, 5e9, func() bool { return fe.Stats.Total(0).Aborts == 1 }, "the frontend's abort")
	e.waitIdle()
	for _, o := range []struct {
		name string
		c    *stats.Counters
	}{{"backend", fe.Backend.Stats}, {"server", srv.Counters}} {
		if n := o.c.Total(0).Aborts; n != 1 {
			t.Errorf("%s: %d aborts, want 1", o.name, n)
		}
	}
}

// TestHTTPProxyAnswersCountOnTheServer: an answer the proxy makes on
// behalf of a server (502 for a bad or cut response, 504 at server_ms,
// 503 after its connect failed) counts in the status classes of the
// server and its backend as of the frontend; a bad, cut or late response
// counts one response_errors there too, and errors (malformed requests)
// stays 0. A body cut after its head went out counts the server's 200,
// not a 5xx, and a response error.
func TestHTTPProxyAnswersCountOnTheServer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	killed := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		readHead(bufio.NewReader(c))
		c.SetLinger(0)
		c.Close() // an origin killed with the request in flight
	}).Addr
	garbage := newRawOrigin(t, func(string) string { return "SSH-2.0-OpenSSH\r\n\r\n" })
	cut := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		readHead(bufio.NewReader(c))
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly ten b")
	}).Addr
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c)
	}).Addr
	refused := closedPort(t)
	short := func(cfg *config.Backend) {
		cfg.Timeouts.ServerMs = 200
		cfg.Timeouts.ConnectMs = 500
		r := 0
		cfg.Retries = &r
	}
	for _, tc := range []struct {
		name       string
		addr       *net.TCPAddr
		status     int // 0: the response is cut
		want       stats.StatusCounts
		respErrs   int64
		connErrors int64
	}{
		{"origin killed: 502", killed, 502, stats.StatusCounts{S5xx: 1}, 1, 0},
		{"garbage: 502", garbage.addr, 502, stats.StatusCounts{S5xx: 1}, 1, 0},
		{"silent: 504", silent, 504, stats.StatusCounts{S5xx: 1}, 1, 0},
		{"refused: 503", refused, 503, stats.StatusCounts{S5xx: 1}, 0, 1},
		{"body cut", cut, 0, stats.StatusCounts{S2xx: 1}, 1, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := httpFrontend(t, short, tc.addr)
			srv := fe.Backend.B.Servers[0]
			srv.Counters = new(stats.Counters)
			c := e.dialHTTP(fe)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if tc.status == 0 {
				// The cut response is reset (package doc, "Aborts"): the
				// reset may reach the client before it read the head.
				if err == nil {
					io.Copy(io.Discard, resp.Body)
				}
			} else {
				if err != nil {
					t.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				if resp.StatusCode != tc.status {
					t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
				}
			}
			testutil.Eventually(t, 5e9, func() bool { return fe.Stats.Total(0).ConnCur == 0 }, "the connection closed")
			for _, o := range []struct {
				name string
				c    *stats.Counters
			}{{"frontend", fe.Stats}, {"backend", fe.Backend.Stats}, {"server", srv.Counters}} {
				got := o.c.Total(0).Counts()
				if got.Status != tc.want || got.ResponseErrors != tc.respErrs || got.Errors != 0 {
					t.Errorf("%s: status %+v response_errors %d errors %d; want %+v, %d and 0",
						o.name, got.Status, got.ResponseErrors, got.Errors, tc.want, tc.respErrs)
				}
			}
			if n := fe.Backend.Stats.Total(0).ConnectErrors; n != tc.connErrors {
				t.Errorf("backend: %d connect errors, want %d", n, tc.connErrors)
			}
		})
	}
	e.waitIdle()
}
