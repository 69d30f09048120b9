package proxy

import (
	"bufio"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsOrigin is an https origin for the tests: TLS over testutil's
// ServeOrigin with cert, counting handshakes and resumed ones.
type tlsOrigin struct {
	*testutil.Origin
	handshakes, resumed atomic.Int64
}

func newTLSOrigin(t testing.TB, cert *testutil.Cert, serve func(c *tls.Conn)) *tlsOrigin {
	t.Helper()
	o := &tlsOrigin{}
	cfg := &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
	o.Origin = testutil.ServeOrigin(t, func(c *net.TCPConn) {
		tc := tls.Server(c, cfg)
		defer tc.Close()
		_ = tc.SetDeadline(time.Now().Add(30 * time.Second))
		if tc.Handshake() != nil {
			return
		}
		o.handshakes.Add(1)
		if tc.ConnectionState().DidResume {
			o.resumed.Add(1)
		}
		serve(tc)
	})
	return o
}

// upstreamCerts are a CA, a leaf it signs for "origin.test" and 127.0.0.1,
// and another CA.
type upstreamCerts struct{ ca, leaf, other *testutil.Cert }

func newUpstreamCerts(t testing.TB) upstreamCerts {
	ca := testutil.NewCert(t, testutil.CertSpec{Names: []string{"test ca"}, CA: true})
	return upstreamCerts{
		ca:    ca,
		leaf:  testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin.test", "127.0.0.1"}, Parent: ca}),
		other: testutil.NewCert(t, testutil.CertSpec{Names: []string{"other ca"}, CA: true}),
	}
}

// tlsBackend is a backend whose servers (one per address) all have tl,
// with their client configs built as the engine builds them.
func tlsBackend(t testing.TB, tl config.ServerTLS, tune func(*config.Backend), addrs ...*net.TCPAddr) *Backend {
	t.Helper()
	cfg := config.Backend{Name: "be"}
	for i, a := range addrs {
		s := tl
		cfg.Servers = append(cfg.Servers, &config.Server{Name: "s" + strconv.Itoa(i), Address: a.IP.String(), Port: a.Port, TLS: &s})
	}
	if tune != nil {
		tune(&cfg)
	}
	cfg.Normalize()
	b, err := balance.Build(&cfg, nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i, s := range b.Servers {
		if s.TLS, err = tlsconf.Client(cfg.Servers[i]); err != nil {
			t.Fatal(err)
		}
	}
	return NewBackend(b, 1, new(Counters))
}

func tlsTCPFrontend(t testing.TB, mode SpliceMode, be *Backend) *Frontend {
	return &Frontend{Name: "fe", Splice: mode, TunnelTimeout: time.Hour, Backend: be, Stats: new(Counters)}
}

func tlsHTTPFrontend(t testing.TB, be *Backend) *Frontend {
	fe := tlsTCPFrontend(t, SpliceOn, be)
	fe.HTTP = &HTTPFront{Default: be, RequestTimeout: 5 * time.Second, KeepAliveTimeout: 5 * time.Second, ClientTimeout: 5 * time.Second}
	return fe
}

// TestTLSServerTunnelPassesBytesUnchanged: a tcp tunnel to an https
// origin, with splice "on" on the frontend, carries 100 MiB each way
// unchanged and never splices (the server side is TLS: its bytes are
// records), whatever the frontend asks.
func TestTLSServerTunnelPassesBytesUnchanged(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() {
		size = 8 << 20
	}
	certs := newUpstreamCerts(t)
	e := newEnv(t, defaultTuning())
	srvRes := make(chan transfer, 1)
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { srvRes <- bothWays(c, 2, size) })
	fe := tlsTCPFrontend(t, SpliceOn, tlsBackend(t, config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}, nil, o.Addr))
	c := e.dial(fe)
	c.SetDeadline(time.Now().Add(60 * time.Second))
	cr := bothWays(c, 1, size)
	if cr.err != nil {
		t.Fatal(cr.err)
	}
	sr := awaitTransfer(t, srvRes)
	sameBytes(t, "client->server", size, sr.n, sr.got, cr.sent)
	sameBytes(t, "server->client", size, cr.n, cr.got, sr.sent)
	e.waitIdle()
	checkSpliced(t, e, "on (TLS server)", false, 0)
	if n := o.handshakes.Load(); n != 1 {
		t.Errorf("origin handshakes = %d, want 1", n)
	}
}

// TestTLSServerVerification: verify required passes with the right CA and
// name (sni, or the IP address in the SANs), fails as a connect failure
// with the wrong CA or name (tcp: the client is closed; http: 503; each
// attempt counted as a connect error, retried), and verify none passes.
func TestTLSServerVerification(t *testing.T) {
	certs := newUpstreamCerts(t)
	e := newEnv(t, defaultTuning())
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) {
		answerHeads(c, []byte("HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"))
	})
	retries := func(b *config.Backend) { r := 1; b.Retries = &r }
	for _, tc := range []struct {
		name string
		tl   config.ServerTLS
		ok   bool
	}{
		{"right CA and sni", config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}, true},
		{"right CA, IP address SAN", config.ServerTLS{CAPEM: certs.ca.CertPEM}, true},
		{"wrong CA", config.ServerTLS{CAPEM: certs.other.CertPEM, SNI: "origin.test"}, false},
		{"wrong name", config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "evil.test"}, false},
		{"verify none", config.ServerTLS{Verify: config.VerifyNone, SNI: "evil.test"}, true},
	} {
		t.Run(tc.name+"/tcp", func(t *testing.T) {
			be := tlsBackend(t, tc.tl, retries, o.Addr)
			c := e.dial(tlsTCPFrontend(t, SpliceAuto, be))
			c.SetDeadline(time.Now().Add(10 * time.Second))
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			b := make([]byte, 64)
			n, err := io.ReadAtLeast(c, b, 1)
			if tc.ok && (err != nil || string(b[:n]) != "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"[:n]) {
				t.Fatalf("read %q, %v", b[:n], err)
			}
			if !tc.ok && (err == nil || errors.Is(err, os.ErrDeadlineExceeded)) {
				t.Fatalf("client not closed after a refused handshake: %q, %v", b[:n], err)
			}
			c.Close()
			e.waitIdle()
			ce := be.Stats.Total(0).ConnectErrors
			if want := map[bool]int64{true: 0, false: 2}[tc.ok]; ce != want {
				t.Fatalf("backend connect errors = %d, want %d", ce, want)
			}
		})
		t.Run(tc.name+"/http", func(t *testing.T) {
			be := tlsBackend(t, tc.tl, retries, o.Addr)
			fe := tlsHTTPFrontend(t, be)
			c := e.dialHTTP(fe)
			resp, body := exchangeOn(t, c, bufio.NewReader(c), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
			want := map[bool]int{true: 200, false: 503}[tc.ok]
			if resp.StatusCode != want || (tc.ok && body != "ok") {
				t.Fatalf("status %d %q, want %d", resp.StatusCode, body, want)
			}
			c.Close()
			e.waitIdle()
			if ce, want := be.Stats.Total(0).ConnectErrors, map[bool]int64{true: 0, false: 2}[tc.ok]; ce != want {
				t.Fatalf("backend connect errors = %d, want %d", ce, want)
			}
			if !tc.ok && be.B.Servers[0].Stats().ConnFails == 0 {
				t.Fatal("server connect failures not counted")
			}
		})
	}
}

// TestTLSServerKeepAliveAndResumption: in http mode, requests on one
// client connection reuse one pooled TLS connection to the server (one
// origin accept), and the next server connection resumes the TLS session.
func TestTLSServerKeepAliveAndResumption(t *testing.T) {
	for _, v := range []struct {
		name string
		max  uint16
	}{{"TLS1.2", tls.VersionTLS12}, {"TLS1.3", tls.VersionTLS13}} {
		t.Run(v.name, func(t *testing.T) {
			certs := newUpstreamCerts(t)
			e := newEnv(t, defaultTuning())
			o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { answerHeads(c, []byte(rawResponse)) })
			be := tlsBackend(t, config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}, nil, o.Addr)
			be.B.Servers[0].TLS.MaxVersion = v.max // before any use
			fe := tlsHTTPFrontend(t, be)
			for conn := range 2 {
				c := e.dialHTTP(fe)
				br := bufio.NewReader(c)
				for i := range 5 {
					resp, body := exchangeOn(t, c, br, "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
					if resp.StatusCode != 200 || body != "hello" {
						t.Fatalf("connection %d request %d: %d %q", conn, i, resp.StatusCode, body)
					}
				}
				c.Close()
				if conn == 0 {
					// Drop the pooled connection: the next client needs a
					// new server connection, which resumes.
					e.do(func() {
						for _, p := range e.w.h.idle {
							for sc := p.l.Front(); sc != nil; sc = p.l.Front() {
								e.w.closeSrv(sc)
							}
						}
					})
				}
			}
			e.waitIdle()
			if n := o.Accepted(); n != 2 {
				t.Fatalf("origin accepted %d connections for 2 clients of 5 requests, want 2", n)
			}
			testutil.Eventually(t, 5*time.Second, func() bool { return o.handshakes.Load() == 2 }, "2 handshakes")
			if r := o.resumed.Load(); r != 1 {
				t.Fatalf("resumed handshakes = %d, want 1 (the second connection)", r)
			}
		})
	}
}

// TestTLSServerTunnelResumes: tcp tunnels to an https origin resume the
// TLS session on every connection after the first.
func TestTLSServerTunnelResumes(t *testing.T) {
	certs := newUpstreamCerts(t)
	e := newEnv(t, defaultTuning())
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { io.WriteString(c, "hi") })
	fe := tlsTCPFrontend(t, SpliceAuto, tlsBackend(t, config.ServerTLS{CAPEM: certs.ca.CertPEM}, nil, o.Addr))
	for i := range 3 {
		c := e.dial(fe)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if b, err := io.ReadAll(c); string(b) != "hi" {
			t.Fatalf("connection %d: %q, %v", i, b, err)
		}
		c.Close()
	}
	e.waitIdle()
	if h, r := o.handshakes.Load(), o.resumed.Load(); h != 3 || r != 2 {
		t.Fatalf("handshakes %d, resumed %d: want 3 and 2", h, r)
	}
}

// TestTLSServerSilentHandshakeIsAConnectTimeout: a server that accepts the
// TCP connection and never answers the ClientHello holds the attempt at
// most connect_ms; the client is then closed (tcp) or answered 503 (http),
// the failure counted as a connect error, and no fd stays behind once the
// handshake goroutine gave up.
func TestTLSServerSilentHandshakeIsAConnectTimeout(t *testing.T) {
	e := newEnv(t, defaultTuning())
	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) { <-hold })
	tune := func(b *config.Backend) { r := 0; b.Retries = &r; b.Timeouts.ConnectMs = 200 }
	fds := countFDs(t)
	be := tlsBackend(t, config.ServerTLS{Verify: config.VerifyNone}, tune, o.Addr)
	start := time.Now()
	c := e.dial(tlsTCPFrontend(t, SpliceAuto, be))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err == nil || errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("client not closed: %v", err)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("closed after %v, connect_ms is 200 ms", d)
	}
	c.Close()
	hc := e.dialHTTP(tlsHTTPFrontend(t, be))
	resp, _ := exchangeOn(t, hc, bufio.NewReader(hc), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
	if resp.StatusCode != 503 {
		t.Fatalf("http status %d, want 503", resp.StatusCode)
	}
	hc.Close()
	e.waitIdle()
	if ce := be.Stats.Total(0).ConnectErrors; ce != 2 {
		t.Fatalf("connect errors = %d, want 2", ce)
	}
	// The origin holds its ends until cleanup: count ours only (2 origin
	// sockets remain).
	testutil.Eventually(t, 5*time.Second, func() bool { return countFDs(t) <= fds+2 }, "proxy fds closed")
}

// TestHTTPKeepAliveOverTLSServerAllocatesOnlyInCryptoTLS: a kept-alive
// request whose pooled server connection is TLS allocates nothing of the
// proxy's own. What it does allocate is crypto/tls's: Conn.Read makes an
// atLeastReader (24 B, it escapes into bytes.Buffer.ReadFrom) each time it
// reads the socket for a record, so the proxy's rcvBuf pays one for the
// response record and one for the read that finds the socket empty, and
// the origin's crypto/tls one for the request: 3 per request, pinned here
// so that anything the proxy adds shows. (Removing crypto/tls's two would
// need to know it buffers nothing, which it does not expose.)
func TestHTTPKeepAliveOverTLSServerAllocatesOnlyInCryptoTLS(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	certs := newUpstreamCerts(t)
	e := newEnv(t, defaultTuning())
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { answerHeads(c, []byte(rawResponse)) })
	fe := tlsHTTPFrontend(t, tlsBackend(t, config.ServerTLS{CAPEM: certs.ca.CertPEM}, nil, o.Addr))
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(rawResponse); {
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
	}
	for range 50 {
		one()
	}
	if a := testing.AllocsPerRun(200, one); a > 3.05 {
		t.Fatalf("%.2f allocations per request, want 3 (crypto/tls's, see above)", a)
	}
	if n := o.Accepted(); n != 1 {
		t.Fatalf("origin accepted %d connections, want 1", n)
	}
}

// TestTLSServerHandshakeGivenUp: attempts given up while their handshake
// runs or waits for a slot of the pool — a tunnel whose client resets, an
// http request whose connect_ms ends first (503) — leave their handshake
// to end on its own: its end closes the fd (a handshake that succeeds
// after all) and recycles the server connection object, and no fd,
// handshake slot or connection stays behind.
func TestTLSServerHandshakeGivenUp(t *testing.T) {
	tu := defaultTuning()
	tu.TLSMaxHandshakes = 1 // both handshakes park: neither waits behind the other
	e := newEnv(t, tu)
	cert := testutil.SelfSigned(t, "origin.test")
	hold := make(chan struct{})
	var held sync.WaitGroup
	held.Add(2)
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer held.Done()
		defer c.Close()
		<-hold // the ClientHello waits; then a late handshake
		tc := tls.Server(c, &tls.Config{Certificates: []tls.Certificate{cert.TLS()}})
		tc.SetDeadline(time.Now().Add(5 * time.Second))
		tc.Handshake()
	})
	fds := countFDs(t)
	none := config.ServerTLS{Verify: config.VerifyNone}
	slow := tlsBackend(t, none, func(b *config.Backend) { b.Timeouts.ConnectMs = 30000 }, o.Addr)
	fast := tlsBackend(t, none, func(b *config.Backend) { r := 0; b.Retries = &r; b.Timeouts.ConnectMs = 300 }, o.Addr)
	pool := func() (inflight, parked int) {
		inflight, parked, _, _ = hsState(e, e.w.tlsOut)
		return
	}
	tc := e.dial(tlsTCPFrontend(t, SpliceOn, slow))
	testutil.Eventually(t, 5*time.Second, func() bool { a, _ := pool(); return a == 1 }, "the tunnel's handshake running")
	hc := e.dialHTTP(tlsHTTPFrontend(t, fast))
	if resp, _ := exchangeOn(t, hc, bufio.NewReader(hc), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 503 {
		t.Fatalf("http status %d, want 503 after connect_ms", resp.StatusCode)
	}
	hc.Close()
	if a, _ := pool(); a < 1 {
		t.Fatalf("pool: %d handshakes in flight, want the tunnel's at least", a)
	}
	tc.SetLinger(0)
	tc.Close() // an RST: the tunnel aborts
	testutil.Eventually(t, 5*time.Second, func() bool { return e.state().live == 0 }, "both client connections ended")
	// The http one's handshake fails at its own deadline (what was left of
	// connect_ms when it started), which the runtime poller fires a little
	// after the loop's connect timer: the origin must not answer before it
	// did (2 runs in 20 failed with "ok 2, failed 0").
	testutil.Eventually(t, 5*time.Second, func() bool {
		var failed uint64
		e.do(func() { failed = e.w.tlsOut.failed })
		return failed == 1
	}, "the http request's handshake failed at its deadline")
	close(hold)
	held.Wait()
	testutil.Eventually(t, 5*time.Second, func() bool { a, p := pool(); return a == 0 && p == 0 }, "handshakes ended")
	e.waitIdle()
	var free int
	var ok, failed uint64
	e.do(func() { free, ok, failed = len(e.w.h.freeSrv), e.w.tlsOut.ok, e.w.tlsOut.failed })
	if free != 1 {
		t.Fatalf("%d server connection objects recycled, want the orphaned one", free)
	}
	if ok != 1 || failed != 1 {
		t.Errorf("handshakes ok %d, failed %d: want the tunnel's late success and the late http one's failure", ok, failed)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return countFDs(t) <= fds }, "fds closed")
}

// TestTLSServerThatSpeaksPlainHTTP: a server given tls that answers in
// clear (a 400 to the ClientHello, as nginx's plain port does) fails the
// handshake at once: a connect error, 503.
func TestTLSServerThatSpeaksPlainHTTP(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		if _, err := c.Read(make([]byte, 512)); err == nil {
			io.WriteString(c, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
		}
	})
	r := 0
	be := tlsBackend(t, config.ServerTLS{Verify: config.VerifyNone}, func(b *config.Backend) { b.Retries = &r; b.Timeouts.ConnectMs = 30000 }, o.Addr)
	c := e.dialHTTP(tlsHTTPFrontend(t, be))
	if resp, _ := exchangeOn(t, c, bufio.NewReader(c), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 503 {
		t.Fatalf("status %d, want 503", resp.StatusCode)
	}
	c.Close()
	e.waitIdle()
	if ce := be.Stats.Total(0).ConnectErrors; ce != 1 {
		t.Fatalf("connect errors = %d, want 1", ce)
	}
}

// BenchmarkTLSServerConnect is one tcp tunnel to an https origin per
// iteration (connect, handshake, 2 bytes, close): "resumed" with the
// server's session cache as the engine builds it, "full" without one.
//
//	go test -run - -bench TLSServerConnect -benchtime 300x ./core/proxy/
func BenchmarkTLSServerConnect(b *testing.B) {
	for _, bc := range []struct {
		name  string
		cache bool
	}{{"resumed", true}, {"full", false}} {
		b.Run(bc.name, func(b *testing.B) {
			e := newEnv(b, defaultTuning())
			cert := testutil.SelfSigned(b, "origin.test")
			o := newTLSOrigin(b, cert, func(c *tls.Conn) { io.WriteString(c, "hi") })
			be := tlsBackend(b, config.ServerTLS{CAPEM: cert.CertPEM, SNI: "origin.test"}, nil, o.Addr)
			if !bc.cache {
				be.B.Servers[0].TLS.ClientSessionCache = nil
			}
			fe := tlsTCPFrontend(b, SpliceAuto, be)
			buf := make([]byte, 8)
			cpu0 := cpuTime()
			for b.Loop() {
				c := e.dial(fe)
				if n, _ := io.ReadFull(c, buf[:2]); n != 2 {
					b.Fatal("no answer")
				}
				c.Close()
			}
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(b.N)/1e3, "cpu-µs/op")
			b.ReportMetric(float64(o.resumed.Load())/float64(o.handshakes.Load()), "resumed/handshake")
		})
	}
}

// cpuTime is the CPU time the process used so far (user + system), in ns:
// the proxy, the test's client and origin together.
func cpuTime() int64 {
	var ru unix.Rusage
	_ = unix.Getrusage(unix.RUSAGE_SELF, &ru)
	return ru.Utime.Nano() + ru.Stime.Nano()
}

// TestTLSServerPooledConnectionClosedByServer: a pooled TLS connection
// the server closes (close_notify, then FIN) leaves the pool as a plain
// one does; the next request gets a new connection, which resumes.
func TestTLSServerPooledConnectionClosedByServer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	cert := testutil.SelfSigned(t, "origin.test")
	o := newTLSOrigin(t, cert, func(c *tls.Conn) {
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, rawResponse) // keep-alive by default, then close
	})
	fe := tlsHTTPFrontend(t, tlsBackend(t, config.ServerTLS{CAPEM: cert.CertPEM, SNI: "origin.test"}, nil, o.Addr))
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := range 3 {
		if resp, body := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		testutil.Eventually(t, 5*time.Second, func() bool {
			n := -1
			e.do(func() { n = e.w.h.nidle })
			return n == 0
		}, "the closed idle connection to leave the pool")
	}
	if n := o.Accepted(); n != 3 {
		t.Fatalf("%d server connections, want 3", n)
	}
	if r := o.resumed.Load(); r != 2 {
		t.Fatalf("%d resumed, want 2", r)
	}
}

// shutAgain is a transport whose first shutw finds the socket full
// (EAGAIN), as a TLS side's close_notify may.
type shutAgain struct {
	transport
	calls int
}

func (x *shutAgain) shutw(fd int) unix.Errno {
	if x.calls++; x.calls == 1 {
		return unix.EAGAIN
	}
	return x.transport.shutw(fd)
}

// TestTunnelRetriesAShutdownThatWouldBlock: a half-close towards a side
// whose shutw reports EAGAIN is passed on once the side can send again,
// not dropped (the server would wait for the end of the request for
// ever).
func TestTunnelRetriesAShutdownThatWouldBlock(t *testing.T) {
	e := newEnv(t, defaultTuning())
	got := make(chan string, 1)
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		b, _ := io.ReadAll(c) // until the FIN
		got <- string(b)
		io.WriteString(c, "bye")
	})
	fe := frontend(t, SpliceOff, o.Addr)
	c := e.dial(fe)
	c.SetDeadline(time.Now().Add(10 * time.Second))
	var tun *Tunnel
	testutil.Eventually(t, 5*time.Second, func() bool {
		e.do(func() {
			if f := e.w.live.Front(); f != nil && f.state == stEstablished {
				tun = f
			}
		})
		return tun != nil
	}, "the tunnel established")
	sa := &shutAgain{}
	e.do(func() { sa.transport = tun.srv.xp; tun.srv.xp = sa })
	io.WriteString(c, "request")
	c.CloseWrite()
	testutil.Eventually(t, 5*time.Second, func() bool {
		n := 0
		e.do(func() { n = sa.calls })
		return n == 1
	}, "the first shutdown refused")
	// The socket can send again: the edge the kernel would raise.
	e.do(func() { tun.srv.FD.Ready |= evOut; e.l.Wake(&tun.srv.Task, loop.Urgent) })
	select {
	case b := <-got:
		if b != "request" {
			t.Fatalf("origin read %q", b)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the origin never saw the end of the request")
	}
	if b, err := io.ReadAll(c); string(b) != "bye" {
		t.Fatalf("client read %q, %v", b, err)
	}
	e.waitIdle()
}
