package proxy

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// slowOrigin is an origin whose accepted sockets have a small receive
// buffer, so that a large request head stays unsent in the proxy while
// the origin does not read; each connection is handed to handle.
func slowOrigin(t *testing.T, handle func(c *net.TCPConn)) *net.TCPAddr {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		var serr error
		err := rc.Control(func(fd uintptr) {
			serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4096)
		})
		if err != nil {
			return err
		}
		return serr
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go handle(c.(*net.TCPConn))
		}
	}()
	return ln.Addr().(*net.TCPAddr)
}

// bigHead is a request head of about size bytes in 80 fields (the parser
// takes at most 100), the last one named X-Pad-79.
func bigHead(size int) string {
	var sb strings.Builder
	sb.WriteString("GET /big HTTP/1.1\r\nHost: a\r\n")
	pad := strings.Repeat("x", size/80)
	for i := 0; i < 80; i++ {
		sb.WriteString("X-Pad-" + strconv.Itoa(i) + ": " + pad + "\r\n")
	}
	sb.WriteString("\r\n")
	return sb.String()
}

// TestHTTPEarlyResponseBeforeTheRequestHeadIsSent is issue 12's first
// crash: bufsize 4 MiB, a 3.5 MB request head, an origin with a small
// receive buffer that answers "200 Content-Length: 5" at once and closes
// without reading. The early response is relayed with Connection: close,
// nothing more of the request is sent, the backend counts an abort, and
// the client connection ends after the response. The "in two parts"
// case makes the old crash certain: the response head is relayed while
// the request head is still unsent, then the origin's reset wakes the
// server side, which flushed a request head already given back (nil).
func TestHTTPEarlyResponseBeforeTheRequestHeadIsSent(t *testing.T) {
	for _, split := range []bool{false, true} {
		name := "at once"
		if split {
			name = "in two parts"
		}
		t.Run(name, func(t *testing.T) {
			e := newEnv(t, Tuning{Bufsize: 4 << 20, Maxpipes: 64})
			headSeen := make(chan struct{})
			o := slowOrigin(t, func(c *net.TCPConn) {
				defer c.Close() // unread input: the close sends a reset
				if !split {
					c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"))
					return
				}
				c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhel"))
				select {
				case <-headSeen:
				case <-time.After(10 * time.Second):
				}
				c.Write([]byte("lo"))
			})
			fe := httpFrontend(t, nil, o)
			c := e.dialHTTP(fe)
			werr := make(chan error, 1)
			go func() {
				_, err := c.Write([]byte(bigHead(3_500_000)))
				werr <- err
			}()
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			close(headSeen)
			b, err := io.ReadAll(resp.Body)
			if err != nil || resp.StatusCode != 200 || string(b) != "hello" {
				t.Fatalf("got %d %q %v, want 200 \"hello\"", resp.StatusCode, b, err)
			}
			if !resp.Close {
				t.Fatalf("early response without Connection: close: %v", resp.Header)
			}
			if err := <-werr; err != nil {
				t.Fatalf("client write: %v", err)
			}
			if rest, err := io.ReadAll(br); err != nil || len(rest) > 0 {
				t.Fatalf("after the response: %q %v, want end of stream", rest, err)
			}
			if n := fe.Backend.Stats.Total(0).Aborts; n != 1 {
				t.Fatalf("backend aborts %d, want 1", n)
			}
			e.waitIdle()
		})
	}
}

// TestHTTPInterimResponseKeepsTheUnsentRequestHead: a 1xx that comes
// while the request head is still being sent must not drop the rest of
// the head (it was given back to the pool, then flushed as nil).
func TestHTTPInterimResponseKeepsTheUnsentRequestHead(t *testing.T) {
	e := newEnv(t, Tuning{Bufsize: 4 << 20, Maxpipes: 64})
	head := bigHead(3_500_000)
	hintsSeen := make(chan struct{})
	got := make(chan string, 1)
	o := slowOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.Write([]byte("HTTP/1.1 103 Early Hints\r\nLink: </s.css>\r\n\r\n"))
		select {
		case <-hintsSeen:
		case <-time.After(10 * time.Second):
		}
		h, err := readHead(bufio.NewReader(c))
		got <- h
		if err == nil {
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
		}
	})
	fe := httpFrontend(t, nil, o)
	c := e.dialHTTP(fe)
	go c.Write([]byte(head))
	br := bufio.NewReader(c)
	resp, err := http.ReadResponse(br, nil)
	if err != nil || resp.StatusCode != 103 {
		t.Fatalf("first response %v %v, want 103", resp, err)
	}
	close(hintsSeen)
	resp, err = http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || string(b) != "ok" {
		t.Fatalf("got %d %q, want 200 ok", resp.StatusCode, b)
	}
	h := <-got
	if len(h) < len(head) || !strings.HasPrefix(h, "GET /big HTTP/1.1\r\n") || !strings.Contains(h, "X-Pad-79: ") {
		t.Fatalf("origin got a head of %d bytes, want the whole %d", len(h), len(head))
	}
	c.Close()
	e.waitIdle()
}
