package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPParserFreeListsAreBounded: the parsers given back after a peak
// of requests in flight are kept up to maxFreeParsers, not to the peak.
func TestHTTPParserFreeListsAreBounded(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var nreq, nresp int
	e.do(func() {
		for i := 0; i < maxFreeParsers+100; i++ {
			c := &stream{srvAttempt: srvAttempt{w: e.w}, req: &http1.Request{}}
			c.putReq()
			e.w.putResp(&srvConn{resp: &http1.Response{}})
		}
		nreq, nresp = len(e.w.h.freeReq), len(e.w.h.freeResp)
	})
	if nreq != maxFreeParsers || nresp != maxFreeParsers {
		t.Fatalf("free lists hold %d request and %d response parsers, want %d each", nreq, nresp, maxFreeParsers)
	}
}

// TestHTTPIdlePoolMapDropsServersWithoutIdleConnections: a server's entry
// in the loop's idle-pool map goes when its last pooled connection ends,
// so a removed (retired) server does not stay reachable from it.
func TestHTTPIdlePoolMapDropsServersWithoutIdleConnections(t *testing.T) {
	e := newEnv(t, defaultTuning())
	closeIt := make(chan struct{})
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		select {
		case <-closeIt: // the server ends its idle connection
		case <-time.After(10 * time.Second):
		}
	}).Addr
	fe := httpFrontend(t, nil, o)
	c := e.dialHTTP(fe)
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	pools := func() (n, idle int) {
		e.do(func() { n, idle = len(e.w.h.idle), e.w.h.nidle })
		return
	}
	testutil.Eventually(t, 10*time.Second, func() bool { _, idle := pools(); return idle == 1 }, "the server connection pooled")
	fe.Backend.B.Retire(nil) // the server is removed by a configuration change
	close(closeIt)
	testutil.Eventually(t, 10*time.Second, func() bool { _, idle := pools(); return idle == 0 }, "the pooled connection closed")
	if n, _ := pools(); n != 0 {
		t.Fatalf("the idle-pool map still holds %d servers", n)
	}
	c.Close()
	e.waitIdle()
}

// TestHTTPIdlePoolsKeepAtMostMaxIdle: a loop pools at most Tuning.MaxIdle
// idle server connections (its share of the fd budget, config.IdleFor);
// one more that ends its exchange cleanly is closed, not pooled.
func TestHTTPIdlePoolsKeepAtMostMaxIdle(t *testing.T) {
	tu := defaultTuning()
	tu.MaxIdle = 1
	e := newEnv(t, tu)
	arrived := make(chan struct{}, 2)
	answer := make(chan struct{})
	closed := make(chan struct{}, 2)
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		if _, err := readHead(br); err != nil {
			return
		}
		arrived <- struct{}{}
		<-answer
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := br.ReadByte(); err == io.EOF {
			closed <- struct{}{} // the proxy closed this server connection
		}
	}).Addr
	fe := httpFrontend(t, nil, o)
	var clients []*net.TCPConn
	for range 2 {
		c := e.dialHTTP(fe)
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	for range 2 {
		select {
		case <-arrived:
		case <-time.After(10 * time.Second):
			t.Fatal("both requests did not reach the origin on two connections")
		}
	}
	close(answer)
	for _, c := range clients {
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
	}
	select {
	case <-closed:
	case <-time.After(10 * time.Second):
		t.Fatal("the second idle server connection was pooled beyond MaxIdle 1")
	}
	var idle int
	e.do(func() { idle = e.w.h.nidle })
	if idle != 1 {
		t.Fatalf("%d idle server connections pooled, want 1", idle)
	}
	for _, c := range clients {
		c.Close()
	}
	e.waitIdle()
}

// TestHTTPDropIdleUnusableClosesPooledConnections: DropIdleUnusable (run
// by the engine on every loop after an Apply) closes at once the pooled
// connections to a server retired or put in maint, not at their idle
// expiry (serverIdleTimeout); the server sees them end.
func TestHTTPDropIdleUnusableClosesPooledConnections(t *testing.T) {
	for _, how := range []string{"retired", "maint"} {
		t.Run(how, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			ended := make(chan struct{})
			o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				br := bufio.NewReader(c)
				if _, err := readHead(br); err != nil {
					return
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
				c.SetReadDeadline(time.Now().Add(10 * time.Second))
				if _, err := br.ReadByte(); err == io.EOF {
					close(ended) // the proxy closed its pooled connection
				}
			}).Addr
			fe := httpFrontend(t, nil, o)
			c := e.dialHTTP(fe)
			defer c.Close()
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(resp.Body)
			idle := func() (n int) { e.do(func() { n = e.w.h.nidle }); return }
			testutil.Eventually(t, 10*time.Second, func() bool { return idle() == 1 }, "the server connection pooled")
			e.do(e.w.DropIdleUnusable) // nothing to drop: the server is usable
			if n := idle(); n != 1 {
				t.Fatalf("%d idle connections after a drop with every server usable, want 1", n)
			}
			if how == "retired" {
				fe.Backend.B.Retire(nil)
			} else if err := fe.Backend.B.Servers[0].SetAdminState(config.AdminMaint); err != nil {
				t.Fatal(err)
			}
			e.do(e.w.DropIdleUnusable)
			select {
			case <-ended:
			case <-time.After(serverIdleTimeout / 2):
				t.Fatalf("the pooled connection to a %s server still open", how)
			}
			if n := idle(); n != 0 {
				t.Fatalf("%d idle connections left", n)
			}
		})
	}
}
