package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// bigRespHead is a response head of size bytes (HTTP/1.0, body "ok").
func bigRespHead(size int) string {
	const start, end = "HTTP/1.0 200 OK\r\nX-Big: ", "\r\nContent-Length: 2\r\n\r\n"
	return start + strings.Repeat("b", size-len(start)-len(end)) + end
}

// get sends one request on a new client connection and returns the status
// and body.
func (e *env) get(fe *Frontend, req string) (int, string) {
	e.t.Helper()
	c := e.dialHTTP(fe)
	defer c.Close()
	if _, err := c.Write([]byte(req)); err != nil {
		e.t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		e.t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// TestHTTPLoweredBufsizeBoundsHeads is issue 12's second crash: bufsize
// 65536, one request, bufsize lowered to 16384 (as the engine does on
// PATCH /api/v1/tuning), then an HTTP/1.0 request whose response head is
// ~16 KiB. The recycled parser kept its 64 KiB limit and the rewritten
// head overflowed the 16 KiB buffer it was written into. The head limit
// is now that of the buffer a head is parsed from: 502, and the loop
// serves on.
func TestHTTPLoweredBufsizeBoundsHeads(t *testing.T) {
	e := newEnv(t, Tuning{Bufsize: 65536, Maxpipes: 64})
	o := newRawOrigin(t, func(head string) string {
		if strings.HasPrefix(head, "GET /big ") {
			return bigRespHead(16370)
		}
		return "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	})
	fe := httpFrontend(t, nil, o.addr)
	if st, b := e.get(fe, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n"); st != 200 || b != "ok" {
		t.Fatalf("before: %d %q", st, b)
	}
	e.do(func() { e.w.SetTuning(Tuning{Bufsize: 16384, Maxpipes: 64}) })
	if st, _ := e.get(fe, "GET /big HTTP/1.0\r\n\r\n"); st != 502 {
		t.Fatalf("response head over the new bufsize: %d, want 502", st)
	}
	// A request head that fit the old size and not the new one: 431.
	if st, _ := e.get(fe, "GET /small HTTP/1.1\r\nHost: a\r\nX-Big: "+strings.Repeat("q", 16200)+"\r\n\r\n"); st != 431 {
		t.Fatalf("request head over the new bufsize: %d, want 431", st)
	}
	if st, b := e.get(fe, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n"); st != 200 || b != "ok" {
		t.Fatalf("after: %d %q", st, b)
	}
	e.waitIdle()
}

// TestHTTPResponseHeadCheckedAgainstTheBufferItGoesInto: a response head
// whose first part was read into a 64 KiB server buffer before bufsize
// went down to 16 KiB is parsed under that buffer's limit, but its
// rewritten form must fit the 16 KiB buffer it is written into: 502, not
// a write past the buffer.
func TestHTTPResponseHeadCheckedAgainstTheBufferItGoesInto(t *testing.T) {
	e := newEnv(t, Tuning{Bufsize: 65536, Maxpipes: 64})
	head := bigRespHead(30000)
	first, rest := head[:1000], head[1000:]
	more := make(chan struct{})
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		c.Write([]byte(first))
		select {
		case <-more:
		case <-time.After(10 * time.Second):
		}
		c.Write([]byte(rest))
	}).Addr
	fe := httpFrontend(t, nil, o)
	c := e.dialHTTP(fe)
	if _, err := c.Write([]byte("GET /big HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		held := false
		e.do(func() {
			for h := e.w.h.live.Front(); h != nil; h = h.link.Next() {
				if h.st != nil && h.st.sc != nil && h.st.sc.in != nil && h.st.sc.in.Len() == len(first) {
					held = true
				}
			}
		})
		return held
	}, "the first part of the response head in the proxy")
	e.do(func() { e.w.SetTuning(Tuning{Bufsize: 16384, Maxpipes: 64}) })
	close(more)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != 502 {
		t.Fatalf("status %d, want 502", resp.StatusCode)
	}
	c.Close()
	e.waitIdle()
}
