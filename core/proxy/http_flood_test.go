package proxy

import (
	"bytes"
	"context"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPLingerReadsAtMostRunCapPerRun: a connection discarding input
// after an error answer (linger) reads at most runCap per run of its
// tasklet, then yields in class Bulk. The loop is stalled while the client
// sends a malformed request and 3 MB more (the proxy's socket has a
// receive buffer that holds them); once released, the proxy must take
// several Bulk runs to discard it, not one run that holds the loop (the
// old linger read until EAGAIN, however much kept coming).
func TestHTTPLingerReadsAtMostRunCapPerRun(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := httpFrontend(t, nil, newRawServer(t))
	lc := net.ListenConfig{Control: func(_, _ string, rc syscall.RawConn) error {
		return rc.Control(func(fd uintptr) {
			unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, 4<<20)
		})
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	sc, err := ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	fd := rawFD(t, sc.(*net.TCPConn))
	watch := rawFD(t, sc.(*net.TCPConn)) // to read the socket's input queue from here
	defer unix.Close(watch)
	sc.Close()
	unix.SetNonblock(fd, true)
	e.do(func() { e.w.StartHTTP(fd, fe, nil) })

	stalled, release := make(chan struct{}), make(chan struct{})
	e.l.Exec(func(*loop.Loop) { close(stalled); <-release })
	<-stalled
	const flood = 3 << 20
	go func() {
		c.Write([]byte("BAD\x01 / HTTP/1.1\r\n\r\n"))
		c.Write(bytes.Repeat([]byte("x"), flood))
	}()
	inq := func() int {
		n, err := unix.IoctlGetInt(watch, unix.SIOCINQ)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return inq() >= flood }, "the flood queued in the proxy's socket")
	act := e.l.Activity()
	bulk := act.Tasklets[loop.Bulk].Load()
	close(release)
	testutil.Eventually(t, 10*time.Second, func() bool { return inq() == 0 }, "the flood discarded")
	if runs := act.Tasklets[loop.Bulk].Load() - bulk; runs < flood/runCap-1 {
		t.Fatalf("%d MiB discarded with %d Bulk runs, want at least %d (runCap per run)", flood>>20, runs, flood/runCap-1)
	}
}

// TestHTTPFloodingConnectionDoesNotHoldTheLoop: every read loop of an
// http connection stops after runCap bytes per run and yields in class
// Bulk, so while one connection floods the loop another one on the same
// loop is served. Floods: a server sending 100 Continue without end to an
// HTTP/1.0 client (each is parsed and dropped, so nothing ever blocks the
// read loop), and a client sending garbage without end after a 400 (the
// proxy discards it while lingering).
func TestHTTPFloodingConnectionDoesNotHoldTheLoop(t *testing.T) {
	for _, tc := range []struct {
		name  string
		flood func(t *testing.T, e *env, stop chan struct{})
	}{
		{"1xx to an HTTP/1.0 client", func(t *testing.T, e *env, stop chan struct{}) {
			burst := bytes.Repeat([]byte("HTTP/1.1 100 Continue\r\n\r\n"), 40000)
			o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.Write(burst); err != nil {
						return
					}
				}
			}).Addr
			c := e.dialHTTP(httpFrontend(t, nil, o))
			c.SetDeadline(time.Time{})
			if _, err := c.Write([]byte("GET /flood HTTP/1.0\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
		}},
		{"garbage after a 400", func(t *testing.T, e *env, stop chan struct{}) {
			c := e.dialHTTP(httpFrontend(t, nil, newRawServer(t)))
			c.SetDeadline(time.Time{})
			garbage := bytes.Repeat([]byte("x"), 1<<20)
			if _, err := c.Write([]byte("BAD\x01 / HTTP/1.1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			go func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					if _, err := c.Write(garbage); err != nil {
						return
					}
				}
			}()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			stop := make(chan struct{})
			defer close(stop)
			tc.flood(t, e, stop)
			fe := httpFrontend(t, nil, newRawServer(t))
			for i := 0; i < 3; i++ {
				c := e.dialHTTPWithin(fe, 5*time.Second)
				if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				buf := make([]byte, len(rawResponse)+64)
				n, err := readAtLeast(c, buf, len("HTTP/1.1 200"))
				if err != nil || !strings.HasPrefix(string(buf[:n]), "HTTP/1.1 200") {
					t.Fatalf("request %d beside the flood: %q %v", i, buf[:n], err)
				}
				c.Close()
			}
		})
	}
}

// dialHTTPWithin is dialHTTP whose hand-over to the loop and later I/O
// must complete within d.
func (e *env) dialHTTPWithin(fe *Frontend, d time.Duration) *net.TCPConn {
	e.t.Helper()
	c := e.connect(func(fd int) { e.w.StartHTTP(fd, fe, nil) })
	c.SetDeadline(time.Now().Add(d))
	return c
}

func readAtLeast(c net.Conn, buf []byte, min int) (int, error) {
	n := 0
	for n < min {
		m, err := c.Read(buf[n:])
		n += m
		if err != nil {
			return n, err
		}
	}
	return n, nil
}
