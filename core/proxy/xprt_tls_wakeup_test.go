package proxy

import (
	"crypto/tls"
	"math/rand/v2"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// Issue 23, item 1: TLS handshakes that got no ServerHello. The handshake
// goroutine's recv said EAGAIN, then it parked in the runtime poller
// (tlsFd.wait), whose RawRead resets the readiness before it asks: a
// ClientHello that the poller saw between the two was forgotten, and the
// handshake waited for its deadline.

// gatedConn holds the client's first write until open is closed, then
// waits until the bytes are readable on srvFd (the server's end) and
// writes one byte to sig: a goroutine blocked on sig's peer is woken by
// the same netpoll that sees the server end readable (the runtime poller
// returns the events in the order they came).
type gatedConn struct {
	*net.TCPConn
	open  chan struct{}
	srvFd func() int
	sig   net.Conn
	once  sync.Once
}

func (g *gatedConn) Write(p []byte) (int, error) {
	<-g.open
	n, err := g.TCPConn.Write(p)
	g.once.Do(func() {
		pf := []unix.PollFd{{Fd: int32(g.srvFd()), Events: unix.POLLIN}}
		for {
			if k, err := unix.Poll(pf, 10_000); err != unix.EINTR || k > 0 {
				break
			}
		}
		g.sig.Write([]byte{1})
	})
	return n, err
}

// loopbackPair is a connected pair of TCP sockets, both in the runtime
// poller.
func loopbackPair(t *testing.T) (a, b net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	a, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	b, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close(); b.Close() })
	return a, b
}

// TestTLSReadyBeforeParkIsSeen forces the race: the ClientHello arrives,
// and the runtime poller has taken its edge, after the handshake's recv
// said EAGAIN and before the goroutine parks. The handshake must go on at
// once, not wait for its deadline.
func TestTLSReadyBeforeParkIsSeen(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	sigR, sigW := loopbackPair(t)
	open := make(chan struct{})
	var once sync.Once
	h.parking = func(*tlsFd) {
		once.Do(func() {
			close(open) // the client sends its ClientHello now
			var b [1]byte
			sigR.SetReadDeadline(time.Now().Add(10 * time.Second))
			if _, err := sigR.Read(b[:]); err != nil {
				t.Errorf("signal: %v", err)
			}
		})
	}
	var fdMu sync.Mutex
	srvFd := -1
	errc := make(chan error, 1)
	c := e.connect(func(fd int) {
		fdMu.Lock()
		srvFd = fd
		fdMu.Unlock()
		h.start(newTLSServer(fd, srv), 3*time.Second, func(x *tlsSock, err error) { errc <- err })
	})
	g := &gatedConn{TCPConn: c, open: open, sig: sigW, srvFd: func() int {
		fdMu.Lock()
		defer fdMu.Unlock()
		return srvFd
	}}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	cerr := make(chan error, 1)
	go func() { cerr <- tls.Client(g, cli).Handshake() }()
	start := time.Now()
	if err := <-errc; err != nil {
		t.Fatalf("server handshake after %v: %v (the ClientHello's wake-up was lost)", time.Since(start), err)
	}
	if err := <-cerr; err != nil {
		t.Fatalf("client handshake: %v", err)
	}
}

// TestTLSManyHandshakesNoneStalls drives sequential handshakes, each
// ClientHello sent a random few microseconds after the connect (the
// client's pace decides where it falls against the server's EAGAIN and
// park), as curl and Python clients did when 1 in 1 500 to 13 % of them
// got no ServerHello. None may wait for its deadline.
func TestTLSManyHandshakesNoneStalls(t *testing.T) {
	n := 300
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	// Widen the window between the handshake's EAGAIN and its park, as a
	// loaded machine does (a preemption, the registration of the file):
	// wait there up to 1 ms for the client's bytes, then a little more
	// for the runtime poller to see them. In-process without it, about 1
	// handshake in 2 500 fell in the window.
	h.parking = func(a *tlsFd) {
		pf := []unix.PollFd{{Fd: int32(a.fd), Events: unix.POLLIN}}
		unix.Poll(pf, 1)
		for s := time.Now(); time.Since(s) < 200*time.Microsecond; {
			runtime.Gosched()
		}
	}
	srv, cli := tlsPair(t, tls.VersionTLS13)
	cli.ClientSessionCache = nil
	const timeout = 2 * time.Second
	end := time.Now().Add(60 * time.Second)
	stalls, done := 0, 0
	for i := 0; i < n && time.Now().Before(end); i++ {
		errc := make(chan error, 1)
		c := e.connect(func(fd int) {
			h.start(newTLSServer(fd, srv), timeout, func(x *tlsSock, err error) {
				if err == nil {
					rawSock{}.close(x.a.fd, true)
				}
				errc <- err
			})
		})
		if d := rand.IntN(300); d > 0 {
			time.Sleep(time.Duration(d) * time.Microsecond) // the client's pace, not a synchronisation
		}
		c.SetDeadline(time.Now().Add(timeout + 5*time.Second))
		cc := tls.Client(c, cli)
		go cc.Handshake()
		if err := <-errc; err != nil {
			stalls++
			t.Logf("handshake %d: %v", i, err)
		}
		c.Close()
		done++
	}
	if stalls > 0 {
		t.Fatalf("%d of %d handshakes got no answer within %v", stalls, done, timeout)
	}
	t.Logf("%d handshakes, none stalled", done)
}
