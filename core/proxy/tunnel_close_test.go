package proxy

import (
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// answerThenFin is an origin that reads the client's request, then sends
// answer and its FIN in one segment (MSG_MORE, then shutdown(SHUT_WR)), as
// a server closing after a Connection: close response does, and reads what
// the client still sends until its FIN (passed on got).
func answerThenFin(t *testing.T, answer string, got chan<- string) *net.TCPAddr {
	t.Helper()
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		req := make([]byte, 64)
		n, err := c.Read(req)
		if err != nil {
			got <- "read: " + err.Error()
			return
		}
		rc, _ := c.SyscallConn()
		rc.Control(func(fd uintptr) {
			unix.Sendto(int(fd), []byte(answer), unix.MSG_MORE, nil)
			unix.Shutdown(int(fd), unix.SHUT_WR)
		})
		rest, _ := io.ReadAll(c)
		got <- string(req[:n]) + "|" + string(rest)
	}).Addr
}

// TestServerFinLeavesWithItsLastBytes: a server's last bytes and its FIN
// read together (EPOLLRDHUP with a short read) reach the client in one
// segment, as HAProxy sends them (MSG_MORE, then the shutdown): the
// tunnel takes the end of stream without a read(2) for it and corks the
// last bytes, so the client gets no separate FIN segment (one packet and
// one ACK less per connection). The client counts the segments it
// received: the SYN-ACK, the ACK of its request and the answer with the
// FIN; a fourth is the FIN sent apart. The half-close stays: the client
// still sends after the server's FIN and the server gets it.
func TestServerFinLeavesWithItsLastBytes(t *testing.T) {
	e := newEnv(t, defaultTuning())
	got := make(chan string, 1)
	addr := answerThenFin(t, "the answer", got)
	c := e.dial(frontend(t, SpliceOff, addr))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte("question")); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(c)
	if err != nil || string(resp) != "the answer" {
		t.Fatalf("response %q, %v", resp, err)
	}
	wantOneSegmentWithTheFin(t, c, "answer")
	c.Write([]byte(" more"))
	c.CloseWrite()
	select {
	case s := <-got:
		if s != "question| more" {
			t.Fatalf("server got %q", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("server did not get the client's bytes after its own FIN")
	}
	e.waitIdle()
}

// TestHTTPLastResponseLeavesWithTheFin: the response after which an
// http connection closes (the client asked Connection: close) reaches the
// client in one segment with the FIN (MSG_MORE before the close): the
// client receives the SYN-ACK, the ACK of its request and the response
// with the FIN; a fourth segment is the FIN sent apart.
func TestHTTPLastResponseLeavesWithTheFin(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	c := e.dialHTTP(httpFrontend(t, nil, o.addr))
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := io.ReadAll(c)
	if err != nil || !strings.HasSuffix(string(resp), "\r\n\r\nhello") || !strings.Contains(string(resp), "Connection: close\r\n") {
		t.Fatalf("response %q, %v", resp, err)
	}
	wantOneSegmentWithTheFin(t, c, "response")
	e.waitIdle()
}

// TestTunnelClientWokenOnlyByItsBytes: a tunnel's client socket wakes the
// loop for what it brings (its request, its FIN), not for the state
// changes of its send side: registered edge-triggered with EPOLLOUT, the
// client's ACK of the tunnel's FIN (FIN_WAIT1 -> FIN_WAIT2) and the
// registration itself were EPOLLOUT edges that nothing waited for. A
// connection whose server answers and closes first then costs the loop
// four socket events: the client's request and FIN, the server's connect
// and its answer with the FIN (six before: two EPOLLOUT edges of the
// client). A client that does not read still gets everything once it
// reads (EPOLLOUT added when a send blocks): TestSlowReaderBoundsMemory.
func TestTunnelClientWokenOnlyByItsBytes(t *testing.T) {
	e := newEnv(t, defaultTuning())
	got := make(chan string, 1)
	fe := frontend(t, SpliceOff, answerThenFin(t, "the answer", got))
	fdEvents := func() uint64 { return socketEvents(e) }
	for i := range 3 {
		before := fdEvents()
		c := e.dial(fe)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("question")); err != nil {
			t.Fatal(err)
		}
		if resp, err := io.ReadAll(c); err != nil || string(resp) != "the answer" {
			t.Fatalf("response %q, %v", resp, err)
		}
		c.Close()
		<-got
		e.waitIdle()
		if n := fdEvents() - before; n > 4 {
			t.Errorf("connection %d: %d socket events on the loop, want 4 (request, FIN; connect, answer+FIN)", i, n)
		}
	}
}

// TestHTTPClientWokenOnlyByItsBytes: as TestTunnelClientWokenOnlyByItsBytes
// for an http client connection: its registration before its request
// came was an EPOLLOUT edge nothing waited for. One Connection: close
// exchange then costs the loop three socket events: the request, the
// server's connect and its response (four before). A client that reads
// slowly still gets everything (EPOLLOUT added when a send blocks):
// TestHTTPLargeBodySplicedToASlowClient.
func TestHTTPClientWokenOnlyByItsBytes(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	fdEvents := func() uint64 { return socketEvents(e) }
	before := fdEvents()
	c := e.dialHTTP(fe)
	if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	if resp, err := io.ReadAll(c); err != nil || !strings.HasSuffix(string(resp), "hello") {
		t.Fatalf("response %q, %v", resp, err)
	}
	c.Close()
	e.waitIdle()
	if n := fdEvents() - before; n > 3 {
		t.Errorf("%d socket events on the loop, want 3 (request; connect, response)", n)
	}
}

// socketEvents is the number of socket events the loop took from epoll so
// far: its events less its wake-ups by Notify. It reads the two counters
// on the loop thread, between rounds' publications: the loop publishes
// PollIO and then Notified, so a read from another thread between the two
// stores counted a Notify's event as a socket event
// (TestTunnelClientWokenOnlyByItsBytes saw 5 events for 4 under load).
// What is read is the loop's state at the end of the round before; the
// events its last poll dispatched come in the next read.
func socketEvents(e *env) uint64 {
	a := e.l.Activity()
	var n uint64
	e.do(func() { n = a.PollIO.Load() - a.Notified.Load() })
	return n
}

// wantOneSegmentWithTheFin checks that client c, which read what to its
// end, received at most 3 segments, one of them with data: the SYN-ACK,
// the ACK of its bytes and what with the FIN.
func wantOneSegmentWithTheFin(t *testing.T, c *net.TCPConn, what string) {
	t.Helper()
	rc, _ := c.SyscallConn()
	var ti *unix.TCPInfo
	var err error
	rc.Control(func(fd uintptr) { ti, err = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) })
	if err != nil {
		t.Fatal(err)
	}
	if ti.Data_segs_in != 1 || ti.Segs_in > 3 {
		t.Errorf("client received %d segments, %d with data: want at most 3 (SYN-ACK, ACK, %s+FIN), 1 with data",
			ti.Segs_in, ti.Data_segs_in, what)
	}
}
