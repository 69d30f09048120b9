package faults

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
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

// TestClientResetReachesTheServerAsAReset: the other direction; a client
// that resets in a tcp stream, or in the middle of an http request body,
// aborts the server connection with a reset too, not a clean end.
func TestClientResetReachesTheServerAsAReset(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	ends := make(chan error, 16)
	got := make(chan struct{}, 16)
	drain := func(c net.Conn, r io.Reader) {
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		// the client resets once its first bytes reached the server
		_, err := io.ReadFull(r, make([]byte, 1))
		got <- struct{}{}
		if err == nil {
			_, err = io.Copy(io.Discard, r)
		}
		ends <- err
	}
	port, _ := listen(t, func(c net.Conn) { // httpOrigin reads the body before answer
		defer c.Close()
		r, err := http.ReadRequest(bufio.NewReader(c))
		if err != nil {
			got <- struct{}{}
			ends <- err
			return
		}
		drain(c, r.Body)
	})
	tport, _ := listen(t, func(c net.Conn) {
		drain(c, c)
		c.Close()
	})
	p.backend("web", "http", nil, srv{"s1", port})
	p.backend("tweb", "tcp", nil, srv{"t1", tport})
	fp := p.frontend("pub", "http", "web", nil)
	tp := p.frontend("tpub", "tcp", "tweb", nil)
	body := make([]byte, 100<<10)
	for i := 0; i < 3; i++ {
		c := dial(t, fp)
		io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 10000000\r\n\r\n")
		c.Write(body)
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the client's bytes did not reach the server")
		}
		rst(c)
		select {
		case err := <-ends:
			if !isReset(err) {
				t.Errorf("http request body: the server read %v; want a reset", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("http: the server's read did not end")
		}
		tc := dial(t, tp)
		tc.Write(body)
		select {
		case <-got:
		case <-time.After(5 * time.Second):
			t.Fatal("the client's bytes did not reach the server")
		}
		rst(tc)
		select {
		case err := <-ends:
			if !isReset(err) {
				t.Errorf("tcp: the server read %v; want a reset", err)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("tcp: the server's read did not end")
		}
	}
	p.healthy(t)
}
