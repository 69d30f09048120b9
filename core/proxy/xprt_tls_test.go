package proxy

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"io"
	"math/big"
	"net"
	"runtime"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsPair is a self-signed ECDSA P-256 certificate for "localhost" as a
// server config (pinned to version) and a client config that trusts it.
func tlsPair(t testing.TB, version uint16) (srv, cli *tls.Config) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		DNSNames: []string{"localhost"}, NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AddCert(leaf)
	srv = &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key, Leaf: leaf}},
		MinVersion: version, MaxVersion: version}
	cli = &tls.Config{RootCAs: roots, ServerName: "localhost", MinVersion: version, MaxVersion: version}
	return srv, cli
}

var tlsVersions = []struct {
	name string
	v    uint16
}{{"1.2", tls.VersionTLS12}, {"1.3", tls.VersionTLS13}}

// tlsAccept makes a client connection whose accepted end starts a server
// handshake on h; done runs on the loop thread when it ends. side, when
// not nil, gets the transport at once, as an accept path knows it: a mover
// that reads the other side before the handshake ends must not splice
// towards it.
func tlsAccept(e *env, h *tlsHandshakes, timeout time.Duration, cfg *tls.Config, side *Side, done func(x *tlsSock, err error)) *net.TCPConn {
	return e.connect(func(fd int) {
		x := newTLSServer(fd, cfg)
		if side != nil {
			side.xp = x
		}
		h.start(x, timeout, done)
	})
}

// hsState reads h's counters on the loop thread: handshakes in flight
// (started, not ended), those parked in the runtime poller at least once
// (they have a file), done and failed.
func hsState(e *env, h *tlsHandshakes) (inflight, parked int, ok, failed uint64) {
	e.do(func() { inflight, ok, failed = h.inflight, h.ok, h.failed })
	_, _, parked = h.state()
	return
}

// holdCerts makes srv's handshakes block while they compute (in
// GetCertificate, holding their slot) until release is closed; entered
// receives one value per handshake that got there.
// The CPU tokens are raised for the test: a held handshake keeps its token.
func holdCerts(t *testing.T, srv *tls.Config) (cfg *tls.Config, entered chan struct{}, release chan struct{}) {
	SetHandshakeCPUs(64)
	t.Cleanup(func() { hsCPU.Store(nil) })
	cfg = srv.Clone()
	cert := &cfg.Certificates[0]
	cfg.Certificates = nil
	entered, release = make(chan struct{}, 64), make(chan struct{})
	cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
		entered <- struct{}{}
		<-release
		return cert, nil
	}
	return cfg, entered, release
}

// startClient starts a TLS client on c (its handshake fails or succeeds
// later: the caller closes c).
func startClient(c *net.TCPConn, cli *tls.Config) {
	c.SetDeadline(time.Now().Add(30 * time.Second))
	go tls.Client(c, cli).Handshake()
}

// slots reads h's gate: slots held, handshakes waiting for one.
func slots(h *tlsHandshakes) (active, queued int) {
	active, queued, _ = h.state()
	return
}

// openTLSSide makes the established x side s of rig r.
func openTLSSide(t testing.TB, e *env, r *moverRig, s *Side, x *tlsSock) {
	s.Task.Run, s.Task.Owner = runRig, r
	s.Connected = true
	if err := s.open(e.l, x.a.fd, x); err != nil {
		t.Error(err)
	}
	s.FD.Ready |= evIn // crypto/tls may have read past the handshake
	e.l.Wake(&s.Task, loop.Urgent)
}

// newTLSMoverRig is newMoverRig whose side a is TLS: it returns the TLS
// client over a's peer (handshake under way) and b's raw peer.
func newTLSMoverRig(t testing.TB, e *env, h *tlsHandshakes, version uint16) (*moverRig, *tls.Conn, *net.TCPConn) {
	srv, cli := tlsPair(t, version)
	r := &moverRig{w: e.w, done: make(chan struct{})}
	r.ab.m.mode, r.ba.m.mode = SpliceOn, SpliceOn // TLS must refuse it
	pa := tlsAccept(e, h, 10*time.Second, srv, &r.a, func(x *tlsSock, err error) {
		if err != nil {
			t.Errorf("handshake: %v", err)
			return
		}
		openTLSSide(t, e, r, &r.a, x)
	})
	pb := e.connect(func(fd int) {
		r.b.Task.Run, r.b.Task.Owner = runRig, r
		r.b.Connected = true
		if err := r.b.open(e.l, fd, rawSock{}); err != nil {
			t.Error(err)
		}
	})
	return r, tls.Client(pa, cli), pb
}

// TestTLSTransportPassesBytesUnchanged: a handshake through the pool, then
// 16 MiB each way at once between a TLS side and a raw side through the
// byte mover (sha256 compared), in TLS 1.2 and 1.3; nothing spliced, the
// ends passed on as close_notify / FIN, and the pool empty afterwards.
func TestTLSTransportPassesBytesUnchanged(t *testing.T) {
	size := int64(16 << 20)
	if testing.Short() {
		size = 4 << 20
	}
	for _, tv := range tlsVersions {
		t.Run(tv.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			h := newTLSHandshakes(e.l, 4)
			r, ca, cb := newTLSMoverRig(t, e, h, tv.v)
			var ra, rb transfer
			var wg sync.WaitGroup
			ca.SetDeadline(time.Now().Add(60 * time.Second))
			cb.SetDeadline(time.Now().Add(60 * time.Second))
			wg.Add(4)
			go func() { defer wg.Done(); ra.got, ra.n, ra.err = drain(ca) }()
			go func() {
				defer wg.Done()
				var err error
				if ra.sent, err = sendPattern(ca, 1, size); err == nil {
					err = ca.CloseWrite()
				}
				if err != nil {
					t.Errorf("tls client send: %v", err)
				}
			}()
			go func() { defer wg.Done(); rb.got, rb.n, rb.err = drain(cb) }()
			go func() {
				defer wg.Done()
				var err error
				if rb.sent, err = sendPattern(cb, 2, size); err == nil {
					err = cb.CloseWrite()
				}
				if err != nil {
					t.Errorf("raw client send: %v", err)
				}
			}()
			t.Cleanup(func() {
				if t.Failed() {
					e.do(func() {
						x := r.a.xp.(*tlsSock)
						t.Logf("eof %v %v ab %d ba %d aReady %#x bReady %#x out %d held %d shut %v %v abuf %v bbuf %v closed %v", r.ab.m.eof, r.ba.m.eof, r.ab.m.bytes, r.ba.m.bytes, r.a.FD.Ready, r.b.FD.Ready, len(x.a.out)-x.a.off, x.held, r.ab.shut, r.ba.shut, r.ab.buf != nil, r.ba.buf != nil, r.closed)
					})
				}
			})
			waitDone(t, &wg, 20*time.Second)
			if ra.err != nil || rb.err != nil {
				t.Fatalf("receive: %v, %v", ra.err, rb.err)
			}
			sameBytes(t, "tls->raw", size, rb.n, rb.got, ra.sent)
			sameBytes(t, "raw->tls", size, ra.n, ra.got, rb.sent)
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
				t.Fatal("rig did not close")
			}
			var res int
			var spliced int64
			e.do(func() { res, spliced = r.res, r.ab.m.spliced+r.ba.m.spliced })
			if res != 0 || spliced != 0 {
				t.Errorf("mover result %d, %d bytes spliced", res, spliced)
			}
			if active, parked, ok, failed := hsState(e, h); active != 0 || parked != 0 || ok != 1 || failed != 0 {
				t.Errorf("pool: %d active, %d parked, %d ok, %d failed", active, parked, ok, failed)
			}
			e.waitIdle()
		})
	}
}

// handshakeFailure starts one handshake, lets peer misbehave on the
// client end and checks that the handshake fails, the fd is closed (the
// peer reads an end) and the helper goroutine is gone.
func handshakeFailure(t *testing.T, timeout time.Duration, peer func(c *net.TCPConn)) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	srv, _ := tlsPair(t, tls.VersionTLS13)
	before := runtime.NumGoroutine()
	errc := make(chan error, 1)
	c := tlsAccept(e, h, timeout, srv, nil, func(x *tlsSock, err error) { errc <- err })
	peer(c)
	select {
	case err := <-errc:
		if err == nil {
			t.Fatal("handshake succeeded")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("handshake did not end")
	}
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
		t.Fatalf("the server end stays open: %v", err)
	}
	if active, _, ok, failed := hsState(e, h); active != 0 || ok != 0 || failed != 1 {
		t.Errorf("pool: %d active, %d ok, %d failed", active, ok, failed)
	}
	testutil.Eventually(t, 10*time.Second, func() bool { return runtime.NumGoroutine() <= before },
		"the handshake goroutine exits")
}

func isTimeout(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) && ne.Timeout()
}

// TestTLSHandshakeGarbageIsClosed: plain HTTP instead of a ClientHello.
func TestTLSHandshakeGarbageIsClosed(t *testing.T) {
	handshakeFailure(t, 10*time.Second, func(c *net.TCPConn) {
		c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	})
}

// TestTLSHandshakeStallTimesOut: half a ClientHello, then nothing: the
// slot is released at the handshake timeout.
func TestTLSHandshakeStallTimesOut(t *testing.T) {
	start := time.Now()
	handshakeFailure(t, 300*time.Millisecond, func(c *net.TCPConn) {
		c.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00})
	})
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("stalled handshake ended after %v", d)
	}
}

// TestTLSHandshakesAreBounded: with a pool of 2, two handshakes that
// compute (blocked in GetCertificate) hold both slots and a third waits
// for one; it completes once they go on. Clients that stall before that
// (parked in the poller) hold none: see TestTLSHalfOpenHandshakesDoNotQueue.
func TestTLSHandshakesAreBounded(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	srv0, cli := tlsPair(t, tls.VersionTLS13)
	srv, entered, release := holdCerts(t, srv0)
	var est []*tlsSock
	var conns []*net.TCPConn
	for range 3 {
		c := tlsAccept(e, h, 30*time.Second, srv, nil, func(x *tlsSock, err error) {
			if err == nil {
				est = append(est, x)
			}
		})
		conns = append(conns, c)
	}
	t.Cleanup(func() {
		e.do(func() {
			for _, x := range est {
				x.close(x.a.fd, true)
			}
		})
	})
	done := make(chan error, 3)
	for _, c := range conns {
		tc := tls.Client(c, cli)
		c.SetDeadline(time.Now().Add(20 * time.Second))
		go func() { done <- tc.Handshake() }()
	}
	<-entered
	<-entered
	testutil.Eventually(t, 10*time.Second, func() bool { a, q := slots(h); return a == 2 && q == 1 },
		"two handshakes computing, the third waiting for a slot")
	select {
	case <-entered:
		t.Fatal("a third handshake computes on a pool of 2")
	default:
	}
	close(release)
	for range 3 {
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		inflight, _, ok, failed := hsState(e, h)
		a, q := slots(h)
		return inflight == 0 && a == 0 && q == 0 && ok == 3 && failed == 0
	}, "three handshakes done, every slot free")
}

// recorder counts the bytes a TLS client receives from the wire.
type recorder struct {
	net.Conn
	n     int
	first byte
}

func (r *recorder) Read(p []byte) (int, error) {
	n, err := r.Conn.Read(p)
	if r.n == 0 && n > 0 {
		r.first = p[0]
	}
	r.n += n
	return n, err
}

// TestTLSShutwSendsCloseNotify: shutw on an established side sends a
// close_notify record, then the FIN.
func TestTLSShutwSendsCloseNotify(t *testing.T) {
	for _, tv := range tlsVersions {
		t.Run(tv.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			h := newTLSHandshakes(e.l, 1)
			srv, cli := tlsPair(t, tv.v)
			srv.SessionTicketsDisabled = true // nothing follows the handshake
			xc := make(chan *tlsSock, 1)
			c := tlsAccept(e, h, 10*time.Second, srv, nil, func(x *tlsSock, err error) {
				if err != nil {
					t.Error(err)
				}
				xc <- x
			})
			rec := &recorder{Conn: c}
			tc := tls.Client(rec, cli)
			c.SetDeadline(time.Now().Add(10 * time.Second))
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			x := <-xc
			rec.n = 0
			e.do(func() {
				if en := x.shutw(x.a.fd); en != 0 {
					t.Errorf("shutw: %v", en)
				}
			})
			if n, err := tc.Read(make([]byte, 10)); n != 0 || err != io.EOF {
				t.Fatalf("after shutw the client read %d, %v", n, err)
			}
			if rec.n < 5+2 || (rec.first != 0x15 && rec.first != 0x17) {
				t.Errorf("no alert record before the end: %d bytes, type %#x", rec.n, rec.first)
			}
			if n, err := c.Read(make([]byte, 1)); n != 0 || err != io.EOF {
				t.Errorf("no FIN after close_notify: %d, %v", n, err)
			}
			e.do(func() { x.close(x.a.fd, false) })
		})
	}
}

// TestTLSTransportAllocations measures heap allocations per 16 KiB round
// trip (TLS client -> TLS side -> mover -> raw side -> raw peer, and back)
// in steady state, the crypto/tls client in the test included. The
// transport and the mover allocate nothing; crypto/tls does, once each time
// its record layer needs the socket (readFromUntil's atLeastReader escapes
// through bytes.Buffer.ReadFrom, 24 bytes), on the client and on the
// server: 3 per round trip measured with go1.26 (-memprofilerate=1 puts
// them all there). More than that is a regression of ours.
func TestTLSTransportAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	for _, tv := range tlsVersions {
		t.Run(tv.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			h := newTLSHandshakes(e.l, 1)
			_, ca, cb := newTLSMoverRig(t, e, h, tv.v)
			ca.SetDeadline(time.Now().Add(60 * time.Second))
			if err := ca.Handshake(); err != nil {
				t.Fatal(err)
			}
			pb := blockingFD(t, cb)
			out := bytes.Repeat([]byte("x"), 16<<10)
			in := make([]byte, len(out))
			var ferr error
			round := func() {
				if _, err := ca.Write(out); err != nil {
					ferr = err
				}
				if err := readFull(pb, in); err != nil {
					ferr = err
				}
				if err := writeFull(pb, out); err != nil {
					ferr = err
				}
				if _, err := io.ReadFull(ca, in); err != nil {
					ferr = err
				}
			}
			for range 100 { // past crypto/tls's small first records
				round()
			}
			allocs := testing.AllocsPerRun(200, round)
			if ferr != nil {
				t.Fatal(ferr)
			}
			t.Logf("TLS %s: %v allocations per 16 KiB round trip", tv.name, allocs)
			if allocs > 3 {
				t.Fatalf("%v allocations per 16 KiB round trip, want at most crypto/tls's 3", allocs)
			}
		})
	}
}

// TestTLSBackpressureHoldsRecords: a TLS client that does not read while
// 8 MiB come its way. Records wait in the transport's queue, bounded by one
// write, and the mover keeps the held byte (so it stops reading the raw
// side); once the client reads, every byte arrives, then the close_notify.
func TestTLSBackpressureHoldsRecords(t *testing.T) {
	size := int64(8 << 20)
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 1)
	r, ca, cb := newTLSMoverRig(t, e, h, tls.VersionTLS13)
	ca.SetDeadline(time.Now().Add(60 * time.Second))
	cb.SetDeadline(time.Now().Add(60 * time.Second))
	if err := ca.Handshake(); err != nil {
		t.Fatal(err)
	}
	sent := make(chan transfer, 1)
	go func() {
		var res transfer
		res.sent, res.err = sendPattern(cb, 3, size)
		cb.CloseWrite()
		sent <- res
	}()
	var queued, held int
	testutil.Eventually(t, 10*time.Second, func() bool {
		e.do(func() {
			x := r.a.xp.(*tlsSock)
			queued, held = len(x.a.out)-x.a.off, x.held
		})
		return held == 1 && queued > 0
	}, "records queued behind a client that does not read")
	if max := defaultTuning().Bufsize + 1024; queued > max {
		t.Errorf("%d bytes of records queued, want at most one write's (%d)", queued, max)
	}
	got, n, err := drain(ca)
	if err != nil {
		t.Fatal(err)
	}
	res := awaitTransfer(t, sent)
	sameBytes(t, "raw->tls", size, n, got, res.sent)
	if err := ca.CloseWrite(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-r.done:
	case <-time.After(10 * time.Second):
		t.Fatal("rig did not close")
	}
	e.waitIdle()
}

// TestTLSHandshakesStop: stopping the pool closes the waiting handshakes'
// fds at once and a running one's when it ends; each owner is told once,
// TestTLSHandshakesStop: stop ends a handshake waiting for a slot and a
// parked one at once (their fds closed, the clients doing nothing), the
// one computing as soon as it goes on; each done is told errTLSStopped,
// and a handshake started afterwards fails at once.
func TestTLSHandshakesStop(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 1)
	srv0, cli := tlsPair(t, tls.VersionTLS13)
	srv, entered, release := holdCerts(t, srv0)
	told, stopped := 0, 0
	done := func(_ *tlsSock, err error) {
		told++
		if err == errTLSStopped {
			stopped++
		}
	}
	parked := tlsAccept(e, h, 30*time.Second, srv, nil, done) // says nothing
	testutil.Eventually(t, 10*time.Second, func() bool { _, p, _, _ := hsState(e, h); return p == 1 },
		"the silent client's handshake parked")
	running := tlsAccept(e, h, 30*time.Second, srv, nil, done)
	startClient(running, cli)
	<-entered
	queued := tlsAccept(e, h, 30*time.Second, srv, nil, done)
	startClient(queued, cli)
	testutil.Eventually(t, 10*time.Second, func() bool {
		a, q := slots(h)
		_, p, _, _ := hsState(e, h)
		return a == 1 && q == 1 && p >= 1 // the others may have parked before their ClientHello came
	}, func() string {
		a, q, p := h.state()
		return fmt.Sprintf("one handshake computing, one waiting for its slot, one parked: %d, %d, %d", a, q, p)
	})
	e.do(h.stop)
	for _, c := range []*net.TCPConn{parked, queued} {
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.Copy(io.Discard, c); err != nil && isTimeout(err) {
			t.Fatal("a parked or queued handshake's fd stays open after stop")
		}
	}
	close(release) // the computing one goes on, and ends at its next wait
	testutil.Eventually(t, 10*time.Second, func() bool {
		inflight, p, _, _ := hsState(e, h)
		a, q := slots(h)
		return inflight == 0 && p == 0 && a == 0 && q == 0
	}, "the computing handshake ends")
	late := tlsAccept(e, h, 30*time.Second, srv, nil, done)
	late.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.Copy(io.Discard, late); err != nil && isTimeout(err) {
		t.Fatal("a handshake started after stop stays open")
	}
	e.do(func() {
		if told != 4 || stopped != 4 {
			t.Errorf("done ran %d times, %d with errTLSStopped; want 4, 4", told, stopped)
		}
	})
}

// TestTLSHandshakeTimeoutPerStart: each start carries its own timeout (a
// frontend's handshake_ms, a backend's connect_ms): in one pool, a stalled
// handshake with a short timeout fails while one with a long timeout,
// started first, still runs.
func TestTLSHandshakeTimeoutPerStart(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	srv, _ := tlsPair(t, tls.VersionTLS13)
	var longErr, shortErr error
	longDone, shortDone := false, false
	long := tlsAccept(e, h, 30*time.Second, srv, nil, func(_ *tlsSock, err error) { longErr, longDone = err, true })
	short := tlsAccept(e, h, 200*time.Millisecond, srv, nil, func(_ *tlsSock, err error) { shortErr, shortDone = err, true })
	defer long.Close()
	defer short.Close()
	testutil.Eventually(t, 10*time.Second, func() bool {
		var d bool
		e.do(func() { d = shortDone })
		return d
	}, "the short handshake times out")
	e.do(func() {
		if !isTimeout(shortErr) {
			t.Errorf("short handshake: %v, want a timeout", shortErr)
		}
		if longDone {
			t.Errorf("long handshake ended too: %v", longErr)
		}
	})
	if inflight, _, _, failed := hsState(e, h); inflight != 1 || failed != 1 {
		t.Errorf("pool: %d in flight, %d failed; want 1, 1", inflight, failed)
	}
	e.do(h.stop)
}

// TestTLSHandshakesSetMax: raising the bound starts waiting handshakes at
// TestTLSHandshakesSetMax: raising the bound grants waiting handshakes a
// slot at once.
func TestTLSHandshakesSetMax(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 1)
	srv0, cli := tlsPair(t, tls.VersionTLS13)
	srv, entered, release := holdCerts(t, srv0)
	var conns []*net.TCPConn
	for range 3 {
		c := tlsAccept(e, h, 30*time.Second, srv, nil, func(*tlsSock, error) {})
		startClient(c, cli)
		conns = append(conns, c)
	}
	<-entered
	testutil.Eventually(t, 10*time.Second, func() bool { a, q := slots(h); return a == 1 && q == 2 },
		"one handshake computing, two waiting")
	e.do(func() { h.setMax(3) })
	if a, q := slots(h); a != 3 || q != 0 {
		t.Errorf("after setMax(3): %d slots held, %d waiting; want 3, 0", a, q)
	}
	<-entered
	<-entered
	e.do(h.stop)
	close(release)
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		inflight, _, _, _ := hsState(e, h)
		return inflight == 0
	}, "the handshakes end")
}

// TestWorkerCloseAllStopsHandshakes: the worker's own pool follows its
// tuning and ends with CloseAll.
func TestWorkerCloseAllStopsHandshakes(t *testing.T) {
	tu := defaultTuning()
	tu.TLSMaxHandshakes = 2
	e := newEnv(t, tu)
	h := e.w.tls
	if h.gate.max != 2 {
		t.Fatalf("worker pool bound %d, want 2", h.gate.max)
	}
	srv, _ := tlsPair(t, tls.VersionTLS13)
	stopped := 0
	var conns []*net.TCPConn
	for range 3 {
		conns = append(conns, tlsAccept(e, h, 30*time.Second, srv, nil, func(_ *tlsSock, err error) {
			if err == errTLSStopped {
				stopped++
			}
		}))
	}
	e.do(e.w.CloseAll)
	for _, c := range conns {
		c.Close()
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		var n int
		e.do(func() { n = stopped })
		return n == 3
	}, "every handshake is told the pool stopped")
}

// tlsClientOnLoop makes a TLS client x on e's loop (the worker's pool runs
// its handshake) and the server sc at the other end; then runs on the
// loop thread once x is established.
func tlsClientOnLoop(t *testing.T, e *env, then func(x *tlsSock) error) (*tlsSock, *tls.Conn) {
	srv, cli := tlsPair(t, tls.VersionTLS13)
	errc := make(chan error, 1)
	var x *tlsSock
	c := e.connect(func(fd int) {
		x = newTLSClient(fd, cli)
		e.w.tls.start(x, 10*time.Second, func(x *tlsSock, err error) {
			if err == nil {
				err = then(x)
			}
			errc <- err
		})
	})
	sc := tls.Server(c, srv)
	sc.SetDeadline(time.Now().Add(10 * time.Second))
	if err := sc.Handshake(); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	return x, sc
}

// TestTLSClientHandshake: the client side (newTLSClient) through the same
// pool: the handshake verifies the server, then the loop writes records.
func TestTLSClientHandshake(t *testing.T) {
	e := newEnv(t, defaultTuning())
	x, sc := tlsClientOnLoop(t, e, func(x *tlsSock) error {
		if _, e := x.sndBuf(x.a.fd, []byte("hello"), false); e != 0 {
			return e
		}
		return nil
	})
	got := make([]byte, 5)
	if _, err := io.ReadFull(sc, got); err != nil || string(got) != "hello" {
		t.Fatalf("read %q, %v", got, err)
	}
	e.do(func() { x.close(x.a.fd, false) })
}

// TestTLSHandshakeCPUTokens: with one CPU token for all handshakes, two
// clients that stall after connecting do not hold it while they wait for
// the network (a third handshake completes), and every token is given back
// once the handshakes end.
func TestTLSHandshakeCPUTokens(t *testing.T) {
	SetHandshakeCPUs(1)
	t.Cleanup(func() { hsCPU.Store(nil) })
	tokens := *hsCPU.Load()
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 4)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	var stalled []*net.TCPConn
	for range 2 {
		stalled = append(stalled, tlsAccept(e, h, 30*time.Second, srv, nil, func(*tlsSock, error) {}))
	}
	var est *tlsSock
	c := tlsAccept(e, h, 30*time.Second, srv, nil, func(x *tlsSock, err error) {
		if err == nil {
			est = x
		}
	})
	tc := tls.Client(c, cli)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if err := tc.Handshake(); err != nil {
		t.Fatalf("a handshake with the one token free: %v", err)
	}
	for _, s := range stalled {
		s.Close()
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		active, _, ok, failed := hsState(e, h)
		return active == 0 && ok == 1 && failed == 2
	}, "one handshake done, two failed")
	if n := len(tokens); n != 0 {
		t.Errorf("%d tokens still held", n)
	}
	e.do(func() { est.close(est.a.fd, true) })
}

// TestTLSIdleHoldsNoOutBuffer: a record the socket takes whole goes from
// crypto/tls's buffer to the socket, without a copy into a record buffer
// of the loop's pool; records the socket does not take wait in one, in
// order, which goes back to the pool once they left (an idle connection
// holds none), and the next write takes it from there.
func TestTLSIdleHoldsNoOutBuffer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	x, sc := tlsClientOnLoop(t, e, func(*tlsSock) error { return nil })
	msg := bytes.Repeat([]byte("x"), 16<<10)
	state := func() (held, free int) {
		e.do(func() { held, free = cap(x.a.out), len(e.w.tls.out.free) })
		return
	}
	for range 2 {
		e.do(func() {
			if n, err := x.sndBuf(x.a.fd, msg, false); n != len(msg) || err != 0 {
				t.Errorf("sndBuf: %d, %v", n, err)
			}
		})
		if held, free := state(); held != 0 || free != 0 {
			t.Fatalf("after a write the socket took: %d bytes of out held, %d buffers in the pool; want 0, 0 (no copy)", held, free)
		}
		if _, err := io.ReadFull(sc, make([]byte, len(msg))); err != nil {
			t.Fatal(err)
		}
	}
	// The peer reads nothing: write until the socket refuses (bounded).
	sent, full := 0, false
	for i := 0; i < 4096 && !full; i++ {
		e.do(func() {
			n, err := x.sndBuf(x.a.fd, msg, false)
			sent += n
			full = err == unix.EAGAIN || n < len(msg)
		})
	}
	if !full {
		t.Fatal("the socket took 64 MiB from a peer that reads nothing")
	}
	if held, _ := state(); held == 0 {
		t.Fatal("records the socket refused are not queued")
	}
	got := make(chan error, 1)
	go func() {
		_, err := io.ReadFull(sc, make([]byte, sent))
		got <- err
	}()
	testutil.Eventually(t, 10*time.Second, func() bool {
		var n int
		e.do(func() {
			n, _ = x.sndBuf(x.a.fd, msg[len(msg)-1:], false) // the held byte: flushes the queue first
		})
		return n == 1
	}, "the queued records leave once the peer reads")
	if err := <-got; err != nil {
		t.Fatalf("the peer read: %v", err)
	}
	if held, free := state(); held != 0 || free != 1 {
		t.Fatalf("after the queue left: %d bytes of out held, %d buffers in the pool; want 0, 1", held, free)
	}
	e.do(func() { x.close(x.a.fd, false) })
}
