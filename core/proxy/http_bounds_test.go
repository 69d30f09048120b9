package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/http1"
)

// TestHTTPParserFreeListsAreBounded: the parsers given back after a peak
// of requests in flight are kept up to maxFreeParsers, not to the peak.
func TestHTTPParserFreeListsAreBounded(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var nreq, nresp int
	e.do(func() {
		for i := 0; i < maxFreeParsers+100; i++ {
			c := &httpConn{w: e.w, req: &http1.Request{}}
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
	o := origin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		select {
		case <-closeIt: // the server ends its idle connection
		case <-time.After(10 * time.Second):
		}
	})
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
	waitUntil(t, 10*time.Second, "the server connection pooled", func() bool { _, idle := pools(); return idle == 1 })
	fe.Backend.B.Retire(nil) // the server is removed by a configuration change
	close(closeIt)
	waitUntil(t, 10*time.Second, "the pooled connection closed", func() bool { _, idle := pools(); return idle == 0 })
	if n, _ := pools(); n != 0 {
		t.Fatalf("the idle-pool map still holds %d servers", n)
	}
	c.Close()
	e.waitIdle()
}
