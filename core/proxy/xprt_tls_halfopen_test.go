package proxy

import (
	"crypto/tls"
	"io"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// muteConn passes a TLS client's writes and never gives it a byte: the
// client sends its whole ClientHello, then waits in silence.
type muteConn struct {
	net.Conn
	stop chan struct{}
}

func (m muteConn) Read([]byte) (int, error) { <-m.stop; return 0, io.EOF }

// halfOpen starts n handshakes on h (timeout each) whose clients stall:
// even ones after half a ClientHello, odd ones after a whole ClientHello
// (the server signs its flight, then waits for the client's). It returns
// the clients and a stop for the muted TLS clients.
func halfOpen(t *testing.T, e *env, h *tlsHandshakes, n int, timeout time.Duration, srv, cli *tls.Config, done func(*tlsSock, error)) ([]*net.TCPConn, chan struct{}) {
	stop := make(chan struct{})
	var conns []*net.TCPConn
	for i := range n {
		c := tlsAccept(e, h, timeout, srv, nil, done)
		if i%2 == 0 {
			c.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00})
		} else {
			go tls.Client(muteConn{c, stop}, cli).Handshake()
		}
		conns = append(conns, c)
	}
	return conns, stop
}

// TestTLSHalfOpenHandshakesDoNotQueue: 4 × max clients that stall their
// handshake (half a ClientHello, or a whole one and then silence) with a
// 10 s handshake timeout do not delay a fresh client: its handshakes
// complete one after the other long before the stalled ones' deadline,
// because a handshake waiting for its peer holds no slot (it is parked in
// the runtime poller). Before, they held every slot until their timeout.
func TestTLSHalfOpenHandshakesDoNotQueue(t *testing.T) {
	const max, k = 4, 5
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, max)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	conns, stop := halfOpen(t, e, h, 4*max, 10*time.Second, srv, cli, func(*tlsSock, error) {})
	defer close(stop)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	testutil.Eventually(t, 5*time.Second, func() bool { _, p, _, _ := hsState(e, h); return p >= 4*max },
		"the stalled handshakes parked")
	start := time.Now()
	var est []*tlsSock
	for i := range k {
		c := tlsAccept(e, h, 10*time.Second, srv, nil, func(x *tlsSock, err error) {
			if err == nil {
				est = append(est, x)
			}
		})
		c.SetDeadline(start.Add(5 * time.Second)) // half the stalled ones' timeout
		if err := tls.Client(c, cli).Handshake(); err != nil {
			t.Fatalf("fresh handshake %d behind %d stalled ones, after %v: %v", i, 4*max, time.Since(start), err)
		}
		c.Close()
	}
	t.Logf("%d fresh handshakes in %v beside %d stalled ones", k, time.Since(start), 4*max)
	e.do(func() {
		for _, x := range est {
			x.close(x.a.fd, true)
		}
	})
}

// threads is the number of OS threads of the process.
func threads(t *testing.T) int {
	ents, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// TestTLSHalfOpenHandshakesLeaveNothing: 4 × max stalled handshakes take
// no OS thread while they wait, and once they time out no fd (socket or
// netpoller dup), goroutine or thread is left.
func TestTLSHalfOpenHandshakesLeaveNothing(t *testing.T) {
	const max, n = 16, 64
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, max)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	fds, goroutines, ths := countFDs(t), runtime.NumGoroutine(), threads(t)
	failed := 0
	conns, stop := halfOpen(t, e, h, n, 2*time.Second, srv, cli, func(_ *tlsSock, err error) {
		if err != nil {
			failed++
		}
	})
	testutil.Eventually(t, 5*time.Second, func() bool { _, p, _, _ := hsState(e, h); return p == n }, "the stalled handshakes parked")
	if d := threads(t) - ths; d > 8 {
		t.Errorf("%d more OS threads with %d parked handshakes", d, n)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		var f int
		e.do(func() { f = failed })
		return f == n
	}, "every stalled handshake timed out")
	close(stop)
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return countFDs(t) <= fds }, "fds closed")
	testutil.Eventually(t, 5*time.Second, func() bool { return runtime.NumGoroutine() <= goroutines }, "goroutines gone")
	if a, q, p := h.state(); a != 0 || q != 0 || p != 0 {
		t.Errorf("pool: %d slots, %d waiting, %d files", a, q, p)
	}
	if d := threads(t) - ths; d > 8 {
		t.Errorf("%d more OS threads after the handshakes", d)
	}
}

// TestTLSStopEndsParkedHandshakesAtOnce: CloseAll with 100 stalled
// handshakes (30 s timeout) ends every one of them at once: done told,
// fd closed, without waiting for their deadline.
func TestTLSStopEndsParkedHandshakesAtOnce(t *testing.T) {
	const n = 100
	e := newEnv(t, defaultTuning())
	srv, cli := tlsPair(t, tls.VersionTLS13)
	stopped := 0
	conns, stop := halfOpen(t, e, e.w.tls, n, 30*time.Second, srv, cli, func(_ *tlsSock, err error) {
		if err == errTLSStopped {
			stopped++
		}
	})
	defer close(stop)
	testutil.Eventually(t, 10*time.Second, func() bool { _, p, _, _ := hsState(e, e.w.tls); return p == n }, "the stalled handshakes parked")
	start := time.Now()
	e.do(e.w.CloseAll)
	testutil.Eventually(t, 10*time.Second, func() bool {
		var s int
		e.do(func() { s = stopped })
		return s == n
	}, "every handshake told the pool stopped")
	for _, c := range conns {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
			t.Fatal("a stalled handshake's fd stays open after the stop")
		}
		c.Close()
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Errorf("stop ended %d stalled handshakes in %v (timeout 30 s)", n, d)
	}
}
