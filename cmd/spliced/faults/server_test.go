package faults

// Faults of the server side: resets mid-body, silence, early answers,
// malformed heads, pooled connections closed under the proxy's feet.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// pattern is n bytes that say where they are: a prefix check finds any
// byte out of place.
func pattern(n int) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*7 + i>>9)
	}
	return b
}

// TestServerResetMidBody: the server sends part of a response and resets
// the connection. http: the client got the 200 head and a strict prefix of
// the body, then its connection closes (nothing else: no second status
// line); tcp: the client got a prefix of the stream and a close.
func TestServerResetMidBody(t *testing.T) {
	t.Parallel()
	const sent = 200 << 10
	body := pattern(sent)
	t.Run("http", func(t *testing.T) {
		p := start(t, startOpts{})
		port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
			if r.URL.Path != "/reset" {
				io.WriteString(c, okResp("ok"))
				return true
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 1048576\r\n\r\n")
			c.Write(body)
			rst(c)
			return false
		})
		p.backend("web", "http", nil, srv{"s1", port})
		fp := p.frontend("pub", "http", "web", nil)
		for i := 0; i < 3; i++ {
			c := dial(t, fp)
			io.WriteString(c, "GET /reset HTTP/1.1\r\nHost: a\r\n\r\n")
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
			if err != nil {
				t.Fatalf("no response head: %v", err)
			}
			if resp.StatusCode != 200 || resp.ContentLength != 1<<20 {
				t.Fatalf("status %d length %d, want the server's 200 with 1 MiB", resp.StatusCode, resp.ContentLength)
			}
			got, err := io.ReadAll(resp.Body)
			if err == nil {
				t.Fatal("a body cut by a reset read as complete")
			}
			if len(got) > sent || !bytes.Equal(got, body[:len(got)]) {
				t.Fatalf("the body is not a prefix of what the server sent (%d bytes)", len(got))
			}
			closedAfter(t, c, br, 2*time.Second)
		}
		c := dial(t, fp)
		io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
		if resp, b, err := readResp(bufio.NewReader(c), "GET"); err != nil || resp.StatusCode != 200 || string(b) != "ok" {
			t.Fatalf("next request: %v %v %q", resp, err, b)
		}
		f, be := p.stats("pub", "web")
		t.Logf("counters: frontend %v; backend %v", f, be)
		p.healthy(t)
	})
	t.Run("tcp", func(t *testing.T) {
		p := start(t, startOpts{})
		// The origin waits for the client's first byte: since c623744 the
		// proxy passes a server's reset on at once, and a reset that
		// came before the client's connect(2) returned would fail the
		// dial instead of the read.
		port, _ := listen(t, func(c net.Conn) {
			var b [1]byte
			io.ReadFull(c, b[:])
			c.Write(body)
			rst(c)
		})
		p.backend("web", "tcp", nil, srv{"s1", port})
		fp := p.frontend("pub", "tcp", "web", nil)
		for i := 0; i < 3; i++ {
			c := dial(t, fp)
			io.WriteString(c, "x")
			got, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("the client connection stays open after the server's reset (%d bytes)", len(got))
			}
			if len(got) > sent || !bytes.Equal(got, body[:len(got)]) {
				t.Fatalf("the stream is not a prefix of what the server sent (%d bytes)", len(got))
			}
		}
		f, be := p.stats("pub", "web")
		t.Logf("counters: frontend %v; backend %v", f, be)
		p.healthy(t)
	})
}

// TestServerNeverAnswers: a server that accepts and never answers (reads
// the request, or reads nothing) gets the client a 504 once server_ms
// (300) passed; in tcp mode the tunnel closes after tunnel_ms (300).
func TestServerNeverAnswers(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	reads, _ := listen(t, func(c net.Conn) {
		http.ReadRequest(bufio.NewReader(c))
		<-hold
	})
	deaf, _ := listen(t, func(c net.Conn) { <-hold })
	p.backend("reads", "http", map[string]any{"server_ms": 300}, srv{"s1", reads})
	p.backend("deaf", "http", map[string]any{"server_ms": 300}, srv{"s1", deaf})
	p.backend("tcp", "tcp", map[string]any{"tunnel_ms": 300}, srv{"s1", deaf})
	pr := p.frontend("pr", "http", "reads", nil)
	pd := p.frontend("pd", "http", "deaf", nil)
	pt := p.frontend("pt", "tcp", "tcp", nil)
	for _, tc := range []struct {
		name string
		port int
	}{{"reads the request", pr}, {"reads nothing", pd}} {
		t.Run(tc.name, func(t *testing.T) {
			c := dial(t, tc.port)
			t0 := time.Now()
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			br := bufio.NewReader(c)
			resp, _, err := readResp(br, "GET")
			el := time.Since(t0)
			if err != nil || resp.StatusCode != 504 {
				t.Fatalf("got %v, %v after %v; want 504", resp, err, el)
			}
			if el < 250*time.Millisecond || el > 3*time.Second {
				t.Fatalf("504 after %v, want about server_ms (300 ms)", el)
			}
			if !resp.Close {
				t.Fatal("504 without Connection: close")
			}
			closedAfter(t, c, br, 2*time.Second)
		})
	}
	t.Run("tcp", func(t *testing.T) {
		// The tunnel's idle clock starts when the proxy has connected to
		// the server, which can be well before dial returns: a client
		// goroutine left waiting 300 ms by the scheduler after its
		// handshake finds the tunnel closed already, and a clock started
		// after the dial saw that close "after 58µs" (issue 23, item 6).
		// The lower bound counts from before the dial, the upper one
		// from after the write.
		t0 := time.Now()
		c := dial(t, pt)
		c.Write([]byte("hello"))
		t1 := time.Now()
		b, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatal("tunnel to a silent server still open after 10 s")
		}
		if el := time.Since(t0); len(b) > 0 || el < 250*time.Millisecond || time.Since(t1) > 3*time.Second {
			t.Fatalf("tunnel closed %v after the dial began (%v after the write) with %q; want a close after tunnel_ms (300 ms)",
				el, time.Since(t1), b)
		}
	})
	f, be := p.stats("pr", "reads")
	t.Logf("counters: frontend pr %v; backend reads %v", f, be)
	if f.Timeouts == 0 || be.Timeouts == 0 {
		t.Error("a server timeout not counted in the frontend's and the backend's timeouts")
	}
	p.healthy(t)
}

// TestServerAnswersEarlyAndCloses: the server answers before it read the
// whole request and closes. The client gets that answer byte for byte,
// then a close; nothing else.
func TestServerAnswersEarlyAndCloses(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	early := "HTTP/1.1 413 Payload Too Large\r\nContent-Length: 5\r\nConnection: close\r\n\r\nearly"
	port, _ := listen(t, func(c net.Conn) {
		br := bufio.NewReader(c)
		if _, err := http.ReadRequest(br); err != nil {
			return
		}
		io.WriteString(c, early)
		c.Close()
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	for i := 0; i < 5; i++ {
		c := dial(t, fp)
		go func() {
			io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nContent-Length: 8388608\r\n\r\n")
			c.Write(make([]byte, 8<<20))
		}()
		br := bufio.NewReader(c)
		resp, b, err := readResp(br, "POST")
		if err != nil || resp.StatusCode != 413 || string(b) != "early" {
			t.Fatalf("got %v %q, %v; want the server's 413 \"early\"", resp, b, err)
		}
		closedAfter(t, c, br, 3*time.Second)
	}
	f, be := p.stats("pub", "web")
	t.Logf("counters: frontend %v; backend %v", f, be)
	p.healthy(t)
}

// TestServerAnswersBeforeTheHeadIsSent is issue 12's crash: a request head
// too big for the server's receive window (bufsize 4 MiB, 3.5 MB of
// fields), a server that answers at once, before reading anything, and
// closes: the client gets that answer and a close. Then the same with a
// 100 Continue sent at once and the final answer after the whole head.
func TestServerAnswersBeforeTheHeadIsSent(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"bufsize": 4 << 20})
	// 70 fields of 50 000 bytes: 3.5 MB.
	bigReq := "GET /big HTTP/1.1\r\nHost: a\r\n" + strings.Repeat("X-Big: "+strings.Repeat("x", 50000)+"\r\n", 70) + "\r\n"
	t.Run("answer before a 3.5 MB head is sent", func(t *testing.T) {
		port := listenSmallRcvbuf(t, func(c net.Conn) {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello")
			c.Close()
		})
		p.backend("big", "http", nil, srv{"s1", port})
		fp := p.frontend("big", "http", "big", nil)
		for i := 0; i < 3; i++ {
			c := dial(t, fp)
			go io.WriteString(c, bigReq)
			br := bufio.NewReader(c)
			resp, b, err := readResp(br, "GET")
			if err != nil || resp.StatusCode != 200 || string(b) != "hello" {
				t.Fatalf("got %v %q, %v; want the server's early 200 \"hello\"", resp, b, err)
			}
			closedAfter(t, c, br, 3*time.Second)
			p.healthy(t)
		}
	})
	t.Run("100 Continue before a 3.5 MB head is sent", func(t *testing.T) {
		var gotLen atomic.Int64
		port := listenSmallRcvbuf(t, func(c net.Conn) {
			defer c.Close()
			io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
			r, err := http.ReadRequest(bufio.NewReader(c))
			if err != nil {
				return
			}
			n := 0
			for _, v := range r.Header.Values("X-Big") {
				n += len(v)
			}
			gotLen.Store(int64(n))
			io.WriteString(c, okResp("after-100"))
		})
		p.backend("big100", "http", nil, srv{"s1", port})
		fp := p.frontend("big100", "http", "big100", nil)
		c := dial(t, fp)
		go io.WriteString(c, bigReq)
		br := bufio.NewReader(c)
		// ReadResponse returns 1xx heads as responses of their own.
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != 100 {
			t.Fatalf("got %v, %v; want the server's 100", resp, err)
		}
		resp, b, err := readResp(br, "GET")
		if err != nil || resp.StatusCode != 200 || string(b) != "after-100" {
			t.Fatalf("got %v %q, %v; want 200 \"after-100\"", resp, b, err)
		}
		if gotLen.Load() != 3500000 {
			t.Fatalf("the server got 3.5 MB of fields as %d bytes", gotLen.Load())
		}
	})
	p.healthy(t)
}

// listenSmallRcvbuf is listen with a 4 KiB receive buffer on the accepted
// sockets: a big request stays mostly unsent.
func listenSmallRcvbuf(t *testing.T, serve func(c net.Conn)) int {
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		rc.Control(func(fd uintptr) { serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, 4096) })
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return serveOn(t, ln, serve)
}

// TestMalformedResponseHeads: every malformed or oversized response head
// gets the client a 502 from the proxy, none of the server's bytes, and a
// close; the next request on a new connection works.
func TestMalformedResponseHeads(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	const mark = "MARK"
	bigHead := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-Big: "+strings.Repeat("b", 1000)+"\r\n", 40) + "Content-Length: 4\r\n\r\n" + mark
	manyFields := "HTTP/1.1 200 OK\r\n" + strings.Repeat("X-F: MARK\r\n", 150) + "Content-Length: 4\r\n\r\n" + mark
	cases := map[string]string{
		"garbage":               mark + " garbage\r\n\r\n",
		"status 2000":           "HTTP/1.1 2000 OK\r\nContent-Length: 4\r\n\r\n" + mark,
		"status 99":             "HTTP/1.1 099 OK\r\nContent-Length: 4\r\n\r\n" + mark,
		"version HTTP/2.0":      "HTTP/2.0 200 OK\r\nContent-Length: 4\r\n\r\n" + mark,
		"version HTTP/1.x":      "HTTP/1.x 200 OK\r\nContent-Length: 4\r\n\r\n" + mark,
		"NUL in a field":        "HTTP/1.1 200 OK\r\nX-A: a\x00b\r\nContent-Length: 4\r\n\r\n" + mark,
		"space before colon":    "HTTP/1.1 200 OK\r\nX-A : b\r\nContent-Length: 4\r\n\r\n" + mark,
		"obs-fold":              "HTTP/1.1 200 OK\r\nX-A: a\r\n b\r\nContent-Length: 4\r\n\r\n" + mark,
		"bare LF":               "HTTP/1.1 200 OK\nContent-Length: 4\n\n" + mark,
		"CL twice, differing":   "HTTP/1.1 200 OK\r\nContent-Length: 4\r\nContent-Length: 5\r\n\r\n" + mark + "!",
		"CL list, differing":    "HTTP/1.1 200 OK\r\nContent-Length: 4, 5\r\n\r\n" + mark + "!",
		"CL negative":           "HTTP/1.1 200 OK\r\nContent-Length: -4\r\n\r\n" + mark,
		"CL not a number":       "HTTP/1.1 200 OK\r\nContent-Length: 4x\r\n\r\n" + mark,
		"head cut by a close":   "HTTP/1.1 200 OK\r\nContent-Le",
		"nothing, then a close": "",
		"head over the buffer":  bigHead,
		"more than 100 fields":  manyFields,
	}
	var mu sync.Mutex
	var resp string
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		if r.URL.Path == "/ok" {
			io.WriteString(c, okResp("ok"))
			return true
		}
		mu.Lock()
		s := resp
		mu.Unlock()
		io.WriteString(c, s)
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	for name, raw := range cases {
		t.Run(name, func(t *testing.T) {
			mu.Lock()
			resp = raw
			mu.Unlock()
			c := dial(t, fp)
			io.WriteString(c, "GET /bad HTTP/1.1\r\nHost: a\r\n\r\n")
			all, err := io.ReadAll(c)
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				t.Fatalf("connection still open after 10 s; got %q", tail(string(all), 300))
			}
			if !bytes.HasPrefix(all, []byte("HTTP/1.1 502 ")) {
				t.Fatalf("got %q; want a 502", tail(string(all), 300))
			}
			if bytes.Contains(all, []byte(mark)) {
				t.Fatalf("bytes of the bad response reached the client: %q", tail(string(all), 300))
			}
		})
	}
	t.Run("bad chunk size after the head went out", func(t *testing.T) {
		// Once the head went to the client, a framing error in the body can
		// only cut the connection: the client sees the good chunk, then a
		// close, never the bytes after the bad size.
		const good = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n"
		goOn := make(chan struct{})
		mu.Lock()
		resp = "chunked"
		mu.Unlock()
		cport, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
			io.WriteString(c, good)
			select {
			case <-goOn:
			case <-time.After(5 * time.Second):
			}
			io.WriteString(c, "zz\r\n"+mark+"\r\n0\r\n\r\n")
			return false
		})
		p.backend("chunks", "http", nil, srv{"s1", cport})
		port := p.frontend("chunks", "http", "chunks", nil)
		c := dial(t, port)
		io.WriteString(c, "GET /bad HTTP/1.1\r\nHost: a\r\n\r\n")
		br := bufio.NewReader(c)
		var head strings.Builder
		for !strings.HasSuffix(head.String(), "5\r\nhello\r\n") {
			l, err := br.ReadString('\n')
			head.WriteString(l)
			if err != nil {
				t.Fatalf("got %q, %v; want the head and the first chunk", head.String(), err)
			}
		}
		if !strings.HasPrefix(head.String(), "HTTP/1.1 200 ") {
			t.Fatalf("got %q", head.String())
		}
		close(goOn)
		closedAfter(t, c, br, 3*time.Second)
		f, be := p.stats("chunks", "chunks")
		t.Logf("counters: frontend %v; backend %v", f, be)
	})
	c := dial(t, fp)
	io.WriteString(c, "GET /ok HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, b, err := readResp(bufio.NewReader(c), "GET"); err != nil || resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("request after the bad heads: %v %v %q", resp, err, b)
	}
	f, be := p.stats("pub", "web")
	t.Logf("counters: frontend %v; backend %v", f, be)
	p.healthy(t)
}

// TestPooledConnectionsClosedAtRandom: the server closes a quarter of its
// keep-alive connections after a response, at once or a little later,
// without saying so, and one request in eight of a reused connection meets
// a close (FIN or reset) instead of its answer; 4 clients run 500 GETs each on kept-alive
// connections. Every request gets its 200 (a request that met a closed
// pooled connection is replayed on a new one) and no client connection is
// closed.
func TestPooledConnectionsClosedAtRandom(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	var closed, unanswered atomic.Int64
	var seed atomic.Uint64
	port, conns := listen(t, func(c net.Conn) {
		rng := rand.New(rand.NewPCG(seed.Add(1), 7))
		defer c.Close()
		br := bufio.NewReader(c)
		for n := 0; ; n++ {
			r, err := http.ReadRequest(br)
			if err != nil {
				return
			}
			io.Copy(io.Discard, r.Body)
			if n > 0 && rng.IntN(8) == 0 {
				// the keep-alive race: the request of a reused
				// connection meets the server's close
				unanswered.Add(1)
				if rng.IntN(2) == 0 {
					rst(c)
				}
				return
			}
			if _, err := io.WriteString(c, okResp(r.URL.Path)); err != nil {
				return
			}
			if rng.IntN(4) == 0 {
				if rng.IntN(2) == 0 {
					time.Sleep(time.Duration(rng.IntN(3000)) * time.Microsecond)
				}
				closed.Add(1)
				return
			}
		}
	})
	p.backend("web", "http", map[string]any{"server_ms": 5000}, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	const clients, each = 4, 500
	var errs atomic.Int64
	var firstErr atomic.Value
	var wg sync.WaitGroup
	for i := 0; i < clients; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var c net.Conn
			var br *bufio.Reader
			for j := 0; j < each; j++ {
				if c == nil {
					var err error
					if c, err = net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", fp), 2*time.Second); err != nil {
						errs.Add(1)
						firstErr.CompareAndSwap(nil, err.Error())
						continue
					}
					br = bufio.NewReader(c)
				}
				c.SetDeadline(time.Now().Add(5 * time.Second))
				path := fmt.Sprintf("/c%d/r%d", i, j)
				fmt.Fprintf(c, "GET %s HTTP/1.1\r\nHost: a\r\n\r\n", path)
				resp, b, err := readResp(br, "GET")
				if err != nil || resp.StatusCode != 200 || string(b) != path || resp.Close {
					errs.Add(1)
					firstErr.CompareAndSwap(nil, fmt.Sprintf("request %s: %v, %v, %q", path, resp, err, b))
					c.Close()
					c = nil
				}
			}
			if c != nil {
				c.Close()
			}
		}()
	}
	wg.Wait()
	f, be := p.stats("pub", "web")
	t.Logf("%d server connections, %d closed by the server after a response, %d with a request unanswered; counters: frontend %v; backend %v", conns.Load(), closed.Load(), unanswered.Load(), f, be)
	if n := errs.Load(); n > 0 {
		t.Fatalf("%d of %d requests failed; first: %v", n, clients*each, firstErr.Load())
	}
	p.healthy(t)
}

// TestResetsWhileSplicing: with splice on, servers reset in the middle of
// 4 MiB bodies (http) and streams (tcp), 10 times each: every client gets
// an exact prefix and a close, and no pipe or fd is left behind.
func TestResetsWhileSplicing(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	body := pattern(4 << 20)
	half := 2<<20 + 12345
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 4194304\r\n\r\n")
		c.Write(body[:half])
		rst(c)
		return false
	})
	tport, _ := listen(t, func(c net.Conn) {
		var b [1]byte
		io.ReadFull(c, b[:]) // the client is connected (see TestServerResetMidBody)
		c.Write(body[:half])
		rst(c)
	})
	p.backend("web", "http", nil, srv{"s1", port})
	p.backend("tweb", "tcp", nil, srv{"t1", tport})
	fp := p.frontend("pub", "http", "web", map[string]any{"splice": "on"})
	tp := p.frontend("tpub", "tcp", "tweb", map[string]any{"splice": "on"})
	base := p.openFDs(t)
	for i := 0; i < 10; i++ {
		c := dial(t, fp)
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("http %d: %v %v", i, resp, err)
		}
		got, err := io.ReadAll(resp.Body)
		if err == nil || len(got) > half || !bytes.Equal(got, body[:len(got)]) {
			t.Fatalf("http %d: %d bytes, %v; want a strict prefix of %d and an error", i, len(got), err, half)
		}
		c.Close()
		tc := dial(t, tp)
		io.WriteString(tc, "x")
		got, _ = io.ReadAll(tc)
		if len(got) > half || !bytes.Equal(got, body[:len(got)]) {
			t.Fatalf("tcp %d: %d bytes, not a prefix", i, len(got))
		}
		tc.Close()
	}
	var act []struct {
		PipesUsed   int   `json:"pipes_used"`
		SpliceBytes int64 `json:"splice_bytes"`
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		if err := json.Unmarshal(p.must("GET", "/api/v1/activity", nil), &act); err != nil {
			t.Fatal(err)
		}
		used := 0
		for _, a := range act {
			used += a.PipesUsed
		}
		return used == 0 && p.openFDs(t) <= base+2*len(act)*4
	}, "pipes back in the pool and fds back")
	var spliced int64
	for _, a := range act {
		spliced += a.SpliceBytes
	}
	t.Logf("%d bytes spliced, %d fds (%d before)", spliced, p.openFDs(t), base)
	if spliced == 0 {
		t.Fatal("nothing went through splice")
	}
	p.healthy(t)
}

// TestCloseDelimitedResponse: a response framed by the server's close
// (no Content-Length, not chunked) reaches a keep-alive client whole,
// marked Connection: close, and the client connection closes after it.
func TestCloseDelimitedResponse(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	body := pattern(300 << 10)
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		c.Write(body)
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	br := bufio.NewReader(c)
	resp, b, err := readResp(br, "GET")
	if err != nil || resp.StatusCode != 200 || !bytes.Equal(b, body) || !resp.Close {
		t.Fatalf("got %v, %d bytes, %v; want 200, the whole body, Connection: close", resp, len(b), err)
	}
	closedAfter(t, c, br, 2*time.Second)
	p.healthy(t)
}

// TestServerStallsMidBody: the server sends a response head and part of
// a body delimited by the close, then goes silent: after server_ms (300)
// the client reads (a prefix of) the bytes sent, then a reset, never a clean end that
// would make the cut body look complete; the server's connection is reset
// too, and the frontend counts a timeout, not an abort.
func TestServerStallsMidBody(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	body := pattern(100 << 10)
	srvEnd := make(chan error, 1)
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\n\r\n")
		c.Write(body)
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		_, err := c.Read(make([]byte, 1))
		srvEnd <- err
		return false
	})
	p.backend("web", "http", map[string]any{"server_ms": 300}, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: "GET"})
	if err != nil || resp.StatusCode != 200 {
		t.Fatalf("response head: %v %v", resp, err)
	}
	// The reset drops what the proxy had not sent yet: a prefix of the
	// body (all of it unless the machine is slow), then the reset.
	got, err := io.ReadAll(resp.Body)
	if !bytes.Equal(got, body[:min(len(got), len(body))]) || !isReset(err) {
		t.Fatalf("the client read %d bytes (the server sent %d) then %v; want a prefix of them, then a reset", len(got), len(body), err)
	}
	if err := <-srvEnd; !isReset(err) {
		t.Errorf("the stalled server read %v, want a reset", err)
	}
	var f counts
	testutil.Eventually(t, 5*time.Second, func() bool { f, _ = p.stats("pub", "web"); return f.ConnCur == 0 }, "the connection closed")
	if f.Timeouts != 1 || f.Aborts != 0 {
		t.Errorf("frontend %v; want 1 timeout, no abort", f)
	}
	p.healthy(t)
}

// TestResponseWithAHigherMinorVersion: RFC 9110 §2.5: a response whose
// status line says HTTP/1.2 is handled as HTTP/1.1, as requests are, and
// reaches the client as HTTP/1.1; HTTP/2.0 is still a 502.
func TestResponseWithAHigherMinorVersion(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		if r.URL.Path == "/2" {
			io.WriteString(c, "HTTP/2.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
			return false
		}
		io.WriteString(c, "HTTP/1.2 200 OK\r\nContent-Length: 2\r\n\r\nok")
		return true
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	c := dial(t, fp)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ { // kept alive, as HTTP/1.1
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, b, err := readResp(br, "GET")
		if err != nil || resp.StatusCode != 200 || string(b) != "ok" || resp.Proto != "HTTP/1.1" {
			t.Fatalf("request %d: got %v %q %v; want HTTP/1.1 200 ok", i, resp, b, err)
		}
	}
	io.WriteString(c, "GET /2 HTTP/1.1\r\nHost: a\r\n\r\n")
	if resp, _, err := readResp(br, "GET"); err != nil || resp.StatusCode != 502 {
		t.Fatalf("HTTP/2.0 response: got %v %v; want 502", resp, err)
	}
	p.healthy(t)
}

// TestBadChunkWithTheHeadIs502: a response whose head is valid but whose
// first chunk size (in the same read) is not, or whose first chunk
// extension runs 100 KB: nothing went to the client yet, so it gets a
// 502, not an empty close, and none of the server's bytes.
func TestBadChunkWithTheHeadIs502(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		if r.URL.Path == "/ext" {
			io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x="+strings.Repeat("e", 100<<10)+"\r\nMARK\r\n0\r\n\r\n")
			return false
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nMARK\r\n0\r\n\r\n")
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	for _, path := range []string{"/", "/ext"} {
		c := dial(t, fp)
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\n\r\n")
		all, _ := io.ReadAll(c)
		if !strings.HasPrefix(string(all), "HTTP/1.1 502 ") || strings.Contains(string(all), "MARK") {
			t.Fatalf("%s: got %q; want a 502 alone", path, tail(string(all), 300))
		}
	}
	p.healthy(t)
}

// TestChunkedResponseToAnHTTP10Client: an HTTP/1.0 client cannot read
// chunked framing (RFC 9112 §6.1: no Transfer-Encoding toward a 1.0
// recipient): it gets the decoded body, delimited by the close.
func TestChunkedResponseToAnHTTP10Client(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n")
		return true
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	for _, req := range []string{"GET / HTTP/1.0\r\n\r\n", "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n"} {
		c := dial(t, fp)
		io.WriteString(c, req)
		c.SetReadDeadline(time.Now().Add(2 * time.Second))
		b, err := io.ReadAll(c)
		if err != nil || strings.Contains(string(b), "Transfer-Encoding") || !strings.HasSuffix(string(b), "\r\n\r\nhello") {
			t.Errorf("%q: got %q, %v; want the body \"hello\" delimited by the close", req, b, err)
		}
	}
	p.healthy(t)
}
