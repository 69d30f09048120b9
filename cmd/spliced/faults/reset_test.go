package faults

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
)

// TestServerResetReachesTheClientAsAReset: a server that resets its
// connection (SO_LINGER 0) after a close-delimited http body, or in a tcp
// stream, aborted: the client must see a reset, not a clean end (which
// reads as a complete body or stream). A server's clean close (FIN) still
// reads as a clean end of stream.
func TestServerResetReachesTheClientAsAReset(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	body := make([]byte, 100<<10)
	origin := func(reset bool) (int, int) {
		port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
			c.Write(body)
			if reset {
				rst(c)
			}
			return false
		})
		tport, _ := listen(t, func(c net.Conn) {
			// the client's byte first: a reset before the client's
			// connect completed would fail its dial
			if _, err := c.Read(make([]byte, 1)); err != nil {
				c.Close()
				return
			}
			c.Write(body)
			if reset {
				rst(c)
			} else {
				c.Close()
			}
		})
		return port, tport
	}
	rport, rtport := origin(true)
	cport, ctport := origin(false)
	p.backend("web", "http", nil, srv{"s1", rport})
	p.backend("tweb", "tcp", nil, srv{"t1", rtport})
	p.backend("cweb", "http", nil, srv{"s1", cport})
	p.backend("ctweb", "tcp", nil, srv{"t1", ctport})
	fp := p.frontend("pub", "http", "web", nil)
	tp := p.frontend("tpub", "tcp", "tweb", nil)
	cfp := p.frontend("cpub", "http", "cweb", nil)
	ctp := p.frontend("ctpub", "tcp", "ctweb", nil)
	check := func(what string, reset bool, fp, tp int) {
		c := dial(t, fp)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatal(err)
		}
		got, err := io.ReadAll(resp.Body)
		if reset && !isReset(err) {
			t.Errorf("http, close-delimited, %s: %d bytes then %v; want a reset", what, len(got), err)
		}
		if !reset && (err != nil || len(got) != len(body)) {
			t.Errorf("http, close-delimited, %s: %d bytes then %v; want %d bytes and EOF", what, len(got), err, len(body))
		}
		tc := dial(t, tp)
		io.WriteString(tc, "x")
		got, err = io.ReadAll(tc)
		if reset && !isReset(err) {
			t.Errorf("tcp, %s: %d bytes then %v; want a reset", what, len(got), err)
		}
		if !reset && (err != nil || len(got) != len(body)) {
			t.Errorf("tcp, %s: %d bytes then %v; want %d bytes and EOF", what, len(got), err, len(body))
		}
	}
	for i := 0; i < 5; i++ {
		check("server reset", true, fp, tp)
		check("server FIN", false, cfp, ctp)
	}
	p.healthy(t)
}
