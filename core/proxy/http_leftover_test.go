package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// smuggled is what a hostile server sends right behind a complete
// response: a response of its own, which must never answer a request it
// was not asked (HTTP response splitting: on a reused connection it would
// answer the next request, maybe another client's).
const smuggled = "HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\nSMUGGLED"

// TestHTTPServerBytesAfterTheResponseNeverAnswerTheNextRequest: a server
// follows a complete response with bytes nobody asked for (a whole
// response of its own). Once they reached the proxy's socket, the
// client's next request on the same connection must get its own answer
// from the server: the connection that carried them is closed, never
// pooled or reused (HAProxy: bytes from a server with no request pending
// are an error, the connection is closed). Before the fix, a response
// whose last read stopped at its end with the extra bytes already behind
// it (a spliced body clamps each splice to what is left of it; a buffered
// read may fill the buffer exactly at the end) left the socket marked
// readable with no new edge to come: the connection was pooled as clean,
// reused for the next request, and the extra bytes were relayed as its
// response.
//
// split says how the origin sends the body: its first split bytes, then,
// once the client has them, the rest and the extra bytes in one write (one
// segment: they reach the proxy's socket together); 0: head, body and
// extra bytes in one write; -1: the extra bytes in a write of their own
// once the client has the whole body (the proxy sees a new edge on the
// pooled connection). In every case the client sends its next request
// only once the proxy's kernel acknowledged the extra bytes.
func TestHTTPServerBytesAfterTheResponseNeverAnswerTheNextRequest(t *testing.T) {
	const bufsize = 16 << 10
	// exact: the Content-Length for which head and body fill one buffer.
	head := func(n int) string { return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(n) + "\r\n\r\n" }
	exact := bufsize - len(head(bufsize))
	cases := []struct {
		name   string
		splice SpliceMode
		size   int
		split  int
	}{
		{"spliced 64 KiB, its last byte with the extra bytes", SpliceOn, spliceMin, spliceMin - 1},
		{"spliced 64 KiB+1, its last byte with the extra bytes", SpliceOn, spliceMin + 1, spliceMin},
		{"spliced 256 KiB-1, its last byte with the extra bytes", SpliceOn, 256<<10 - 1, 256<<10 - 2},
		{"spliced 256 KiB, its last byte with the extra bytes", SpliceOn, 256 << 10, 256<<10 - 1},
		{"spliced 256 KiB+1, its last byte with the extra bytes", SpliceOn, 256<<10 + 1, 256 << 10},
		{"spliced 1 MiB, its last byte with the extra bytes", SpliceOn, 1 << 20, 1<<20 - 1},
		{"spliced 1 MiB, its last 4 KiB with the extra bytes", SpliceOn, 1 << 20, 1<<20 - 4<<10},
		{"spliced 1 MiB, the extra bytes after it", SpliceOn, 1 << 20, -1},
		{"buffered, head and body fill the buffer, the extra bytes behind", SpliceOff, exact, 0},
		{"buffered, a short body, the extra bytes behind", SpliceOff, 100, 0},
		{"buffered, the extra bytes after it", SpliceOff, 100, -1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, Tuning{Bufsize: bufsize, Maxpipes: 64})
			body := make([]byte, tc.size)
			for i := range body {
				body[i] = byte(i*7 + i>>8)
			}
			headSeen := make(chan struct{}) // the client has the head
			most := make(chan struct{})     // the client has the body's first split bytes (all with -1)
			extra := make(chan struct{})    // the proxy's kernel acknowledged the extra bytes
			addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				br := bufio.NewReader(c)
				for {
					req, err := http.ReadRequest(br)
					if err != nil {
						return
					}
					if req.URL.Path != "/big" {
						io.WriteString(c, head(len(req.URL.Path))+req.URL.Path)
						continue
					}
					wait := func(ch chan struct{}) bool {
						select {
						case <-ch:
							return true
						case <-time.After(10 * time.Second):
							return false
						}
					}
					switch {
					case tc.split == 0:
						c.Write([]byte(head(tc.size) + string(body) + smuggled))
					case tc.split < 0:
						io.WriteString(c, head(tc.size))
						if !wait(headSeen) {
							return
						}
						c.Write(body)
						if !wait(most) {
							return
						}
						io.WriteString(c, smuggled)
					default:
						io.WriteString(c, head(tc.size))
						if !wait(headSeen) {
							return
						}
						c.Write(body[:tc.split])
						if !wait(most) {
							return
						}
						c.Write(append(body[tc.split:len(body):len(body)], smuggled...))
					}
					if !testutil.Delivered(c) {
						return
					}
					close(extra)
				}
			}).Addr
			fe := httpFrontend(t, nil, addr)
			fe.Splice = tc.splice
			c := e.dialHTTP(fe)
			io.WriteString(c, "GET /big HTTP/1.1\r\nHost: a\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			close(headSeen)
			got := make([]byte, tc.size)
			first := tc.split
			if first <= 0 {
				first = tc.size
			}
			if _, err := io.ReadFull(resp.Body, got[:first]); err != nil {
				t.Fatalf("the body's first %d bytes: %v", first, err)
			}
			close(most)
			if _, err := io.ReadFull(resp.Body, got[first:]); err != nil {
				t.Fatalf("the body's last %d bytes: %v", tc.size-first, err)
			}
			if !bytes.Equal(got, body) {
				t.Fatal("the body differs from the server's")
			}
			select {
			case <-extra:
			case <-time.After(20 * time.Second):
				t.Fatal("the server's extra bytes did not reach the proxy")
			}
			if tc.splice == SpliceOn {
				if n := e.l.Activity().SpliceBytes.Load(); n != uint64(tc.size) {
					t.Fatalf("%d bytes spliced, want the body's %d", n, tc.size)
				}
			}
			io.WriteString(c, "GET /next HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("the next response: %v", err)
			}
			b, _ := io.ReadAll(resp.Body)
			if string(b) != "/next" {
				t.Fatalf("the next response is %d %q, want /next's", resp.StatusCode, b)
			}
		})
	}
}

// TestHTTPTakeIdleRefusesAConnectionWithBytesPending: a pooled
// connection whose server sent bytes unasked, reported by the poll (its
// readiness has EPOLLIN) but whose idle check has not run yet (its
// tasklet waits in class Urgent past the round's offer, while the next
// request is routed in class Normal) is not handed out: a request sent on
// it would take those bytes for its response. The loop is held (Exec)
// while the bytes reach the proxy's kernel, and the check runs on the
// loop thread with the readiness the poll would have set.
func TestHTTPTakeIdleRefusesAConnectionWithBytesPending(t *testing.T) {
	e := newEnv(t, defaultTuning())
	sendExtra := make(chan struct{})
	extra := make(chan struct{}) // the proxy's kernel acknowledged the extra bytes
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			req, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(len(req.URL.Path))+"\r\n\r\n"+req.URL.Path)
			select {
			case <-sendExtra:
			case <-time.After(10 * time.Second):
				return
			}
			io.WriteString(c, smuggled)
			if !testutil.Delivered(c) {
				return
			}
			close(extra)
		}
	}).Addr
	fe := httpFrontend(t, nil, addr)
	c := e.dialHTTP(fe)
	io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if b, _ := io.ReadAll(resp.Body); string(b) != "/first" {
		t.Fatalf("%q", b)
	}
	idle := func() (n int) { e.do(func() { n = e.w.h.nidle }); return }
	testutil.Eventually(t, 10*time.Second, func() bool { return idle() == 1 }, "the server connection pooled")

	held := make(chan struct{})
	type result struct {
		pooled, taken bool
		err           string
	}
	done := make(chan result, 1)
	if !e.l.Exec(func(*loop.Loop) {
		close(held)
		select {
		case <-extra:
		case <-time.After(20 * time.Second):
			done <- result{err: "the server's extra bytes did not reach the proxy"}
			return
		}
		var r result
		for s, p := range e.w.h.idle {
			sc := p.l.Front()
			r.pooled = true
			sc.side.FD.Ready |= evIn // what the poll's dispatch sets
			if got := e.w.takeIdle(s); got != nil {
				r.taken = true
				e.w.closeSrv(got)
			}
		}
		done <- r
	}) {
		t.Fatal("loop stopped")
	}
	<-held
	close(sendExtra)
	var r result
	select {
	case r = <-done:
	case <-time.After(30 * time.Second):
		t.Fatal("the loop did not run the check")
	}
	switch {
	case r.err != "":
		t.Fatal(r.err)
	case !r.pooled:
		t.Fatal("no pooled connection to take: the idle check ran (the loop was not held?)")
	case r.taken:
		t.Fatal("takeIdle handed out a pooled connection with the server's unasked bytes pending")
	}
}
