package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"crypto/tls"
	"encoding/hex"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsFront makes fe terminate TLS with srv and counts its OnClose calls
// (which may run on a helper goroutine after a stop: atomic).
func tlsFront(fe *Frontend, srv *tls.Config, timeout time.Duration) *atomic.Int64 {
	var closed atomic.Int64
	fe.TLS = srv
	fe.HandshakeTimeout = timeout
	fe.OnClose = func(int) { closed.Add(1) }
	return &closed
}

// dialTLS connects a client to the proxy through Accept (as the engine
// does) and returns the raw client end.
func (e *env) dialTLS(fe *Frontend) *net.TCPConn {
	e.t.Helper()
	c := e.connect(func(fd int) { e.w.Accept(fd, fe, nil) })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// tlsCounts reads fe's TLS handshake counters.
func tlsCounts(fe *Frontend) (full, resumed, failed, timeouts int64) {
	t := fe.Stats.Total(0)
	return t.TLSFull, t.TLSResumed, t.TLSFailed, t.TLSTimeouts
}

// TestTLSHTTPTermination: an http frontend terminates TLS (1.2 and 1.3):
// keep-alive requests over one TLS connection reach the origin in clear
// with X-Forwarded-Proto: https, the handshake is counted, and the
// connection's slots are given back once when it ends.
func TestTLSHTTPTermination(t *testing.T) {
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			o := newRawOrigin(t, okAnswer("hello"))
			fe := httpFrontend(t, nil, o.addr)
			fe.HTTP.XForwardedProto = true
			srv, cli := tlsPair(t, v.v)
			closed := tlsFront(fe, srv, 5*time.Second)
			tc := tls.Client(e.dialTLS(fe), cli)
			br := bufio.NewReader(tc)
			for i := range 3 {
				if _, err := tc.Write([]byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatalf("request %d: %v", i, err)
				}
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != 200 || string(body) != "hello" {
					t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
				}
			}
			if got := o.received(); strings.Count(got, "X-Forwarded-Proto: https\r\n") != 3 {
				t.Errorf("origin received %q", got)
			}
			if full, resumed, failed, _ := tlsCounts(fe); full != 1 || resumed != 0 || failed != 0 {
				t.Errorf("handshakes: %d full, %d resumed, %d failed", full, resumed, failed)
			}
			tc.Close()
			testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 1 }, "OnClose runs once")
			e.waitIdle()
		})
	}
}

// TestTLSTCPTermination: a tcp frontend terminates TLS and tunnels the
// clear bytes to its server both ways (sha256 compared), nothing spliced.
func TestTLSTCPTermination(t *testing.T) {
	e := newEnv(t, defaultTuning())
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	})
	fe := frontend(t, SpliceOn, origin.Addr)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	closed := tlsFront(fe, srv, 5*time.Second)
	raw := e.dialTLS(fe)
	raw.SetDeadline(time.Now().Add(30 * time.Second))
	tc := tls.Client(raw, cli)
	const size = 4 << 20
	sent := make(chan []byte, 1)
	go func() {
		h := sha256.New()
		buf := make([]byte, 64<<10)
		for n := 0; n < size; n += len(buf) {
			for i := range buf {
				buf[i] = byte(n + i*7)
			}
			h.Write(buf)
			if _, err := tc.Write(buf); err != nil {
				sent <- nil
				return
			}
		}
		sent <- h.Sum(nil)
	}()
	h := sha256.New()
	if n, err := io.CopyN(h, tc, size); err != nil {
		t.Fatalf("read %d: %v", n, err)
	}
	want := <-sent
	if !bytes.Equal(h.Sum(nil), want) {
		t.Fatal("bytes changed on the way")
	}
	tc.Close()
	testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 1 }, "OnClose runs once")
	e.waitIdle()
	if full, _, _, _ := tlsCounts(fe); full != 1 {
		t.Errorf("%d full handshakes, want 1", full)
	}
}

// TestTLSResumedHandshakeCounted: a client with a session cache resumes
// its second connection (a session ticket), counted apart.
func TestTLSResumedHandshakeCounted(t *testing.T) {
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			o := newRawOrigin(t, okAnswer("hello"))
			fe := httpFrontend(t, nil, o.addr)
			srv, cli := tlsPair(t, v.v)
			closed := tlsFront(fe, srv, 5*time.Second)
			cli.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			for i := range 2 {
				tc := tls.Client(e.dialTLS(fe), cli)
				if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
					t.Fatal(err)
				}
				// Reading the response also reads a TLS 1.3 ticket.
				if _, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil {
					t.Fatal(err)
				}
				if got := tc.ConnectionState().DidResume; got != (i == 1) {
					t.Errorf("connection %d resumed: %v", i, got)
				}
				tc.Close()
			}
			testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 2 }, "both connections end")
			if full, resumed, failed, _ := tlsCounts(fe); full != 1 || resumed != 1 || failed != 0 {
				t.Errorf("handshakes: %d full, %d resumed, %d failed; want 1, 1, 0", full, resumed, failed)
			}
		})
	}
}

// tlsRefused runs peer on a connection to a TLS frontend (mode http when
// http) and checks that the handshake fails, the client reads an end (and
// what the proxy answered, returned), and the connection's slots are given
// back; failed and timeouts are the counts expected.
func tlsRefused(t *testing.T, http bool, timeout time.Duration, peer func(c *net.TCPConn), timeouts int64) string {
	t.Helper()
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := frontend(t, SpliceAuto, o.addr)
	if http {
		fe = httpFrontend(t, nil, o.addr)
	}
	srv, _ := tlsPair(t, tls.VersionTLS13)
	closed := tlsFront(fe, srv, timeout)
	c := e.dialTLS(fe)
	peer(c)
	got, err := io.ReadAll(c)
	if err != nil && isTimeout(err) {
		t.Fatalf("the connection stays open: %v", err)
	}
	c.Close() // as curl does once it has the answer
	testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 1 }, "OnClose runs once")
	if full, _, failed, to := tlsCounts(fe); full != 0 || failed != 1 || to != timeouts {
		t.Errorf("handshakes: %d full, %d failed, %d timeouts; want 0, 1, %d", full, failed, to, timeouts)
	}
	if n := o.conns.Load(); n != 0 {
		t.Errorf("%d connections reached the origin", n)
	}
	e.waitIdle()
	return string(got)
}

// TestTLSPlainHTTPAnswered400: plain HTTP sent to a TLS bind of an http
// frontend gets nginx's 497 as a 400 (not cacheable), then the connection
// closes.
func TestTLSPlainHTTPAnswered400(t *testing.T) {
	got := tlsRefused(t, true, 5*time.Second, func(c *net.TCPConn) {
		c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	}, 0)
	resp, err := http.ReadResponse(bufio.NewReader(strings.NewReader(got)), nil)
	if err != nil {
		t.Fatalf("answer %q: %v", got, err)
	}
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != 400 || !strings.Contains(string(body), "plain HTTP request was sent to HTTPS port") {
		t.Errorf("answer %d %q", resp.StatusCode, body)
	}
	if cc := resp.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", cc)
	}
}

// TestTLSPlainHTTPCounted: the 400 answered to plain HTTP counts as a 4xx
// response of the frontend.
func TestTLSPlainHTTPCounted(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	srv, _ := tlsPair(t, tls.VersionTLS13)
	closed := tlsFront(fe, srv, 5*time.Second)
	c := e.dialTLS(fe)
	c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	if got, _ := io.ReadAll(c); !bytes.HasPrefix(got, []byte("HTTP/1.1 400 ")) {
		t.Fatalf("answer %q", got)
	}
	c.Close() // as curl does once it has the answer
	testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 1 }, "OnClose runs once")
	if n := fe.Stats.Total(0).Status[4]; n != 1 {
		t.Errorf("%d 4xx responses counted, want 1", n)
	}
}

// TestTLSPlainHTTPClosedInTCPMode: a tcp frontend answers nothing.
func TestTLSPlainHTTPClosedInTCPMode(t *testing.T) {
	if got := tlsRefused(t, false, 5*time.Second, func(c *net.TCPConn) {
		c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	}, 0); got != "" {
		t.Errorf("answer %q", got)
	}
}

// TestTLSGarbageClosed: bytes that are neither TLS nor HTTP are not
// answered, even in http mode.
func TestTLSGarbageClosed(t *testing.T) {
	if got := tlsRefused(t, true, 5*time.Second, func(c *net.TCPConn) {
		c.Write([]byte("\x00\x01\x02\x03\x04garbage\r\n\r\n"))
	}, 0); got != "" {
		t.Errorf("answer %q", got)
	}
}

// TestTLSHalfHelloTimesOut: half a ClientHello, then silence: closed at
// the frontend's handshake timeout, counted as a timeout.
func TestTLSHalfHelloTimesOut(t *testing.T) {
	start := time.Now()
	tlsRefused(t, true, 300*time.Millisecond, func(c *net.TCPConn) {
		c.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00})
	}, 1)
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("closed after %v", d)
	}
}

// TestTLSStopReleasesHandshakes: CloseAll while handshakes wait for their
// clients (parked: they hold no pool slot) gives every connection's slots
// back at once, the clients doing nothing.
func TestTLSStopReleasesHandshakes(t *testing.T) {
	tu := defaultTuning()
	tu.TLSMaxHandshakes = 1
	e := newEnv(t, tu)
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	srv, _ := tlsPair(t, tls.VersionTLS13)
	closed := tlsFront(fe, srv, 30*time.Second)
	var conns []*net.TCPConn
	for range 3 {
		conns = append(conns, e.dialTLS(fe))
	}
	testutil.Eventually(t, 10*time.Second, func() bool { _, _, p := e.w.tls.state(); return p == 3 }, "three parked handshakes")
	start := time.Now()
	e.do(e.w.CloseAll)
	testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 3 }, "every slot given back")
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("slots given back %v after the stop, the handshake timeout is 30 s", d)
	}
	for _, c := range conns {
		c.Close()
	}
	if _, _, failed, _ := tlsCounts(fe); failed != 0 {
		t.Errorf("%d handshakes counted failed by a stop", failed)
	}
}

// TestTLSClientCertFields: with CertHeader, the client certificate's
// fields reach the origin with every request of the connection, and the
// client's own fields with that prefix are dropped; without a
// certificate, Verified says NONE.
func TestTLSClientCertFields(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	client := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"alice"}})
	for _, withCert := range []bool{true, false} {
		e := newEnv(t, defaultTuning())
		o := newRawOrigin(t, okAnswer("hello"))
		fe := httpFrontend(t, nil, o.addr)
		srv, cli := tlsPair(t, tls.VersionTLS13)
		srv.ClientCAs = ca.Pool()
		srv.ClientAuth = tls.VerifyClientCertIfGiven
		tlsFront(fe, srv, 5*time.Second)
		fe.CertHeader = "X-Client-Cert-"
		if withCert {
			cli.Certificates = []tls.Certificate{client.TLS()}
		}
		tc := tls.Client(e.dialTLS(fe), cli)
		br := bufio.NewReader(tc)
		for range 2 {
			if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nx-client-cert-verified: SUCCESS\r\nX-Client-Cert-Subject: CN=mallory\r\nX-Other: 1\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			io.ReadAll(resp.Body)
		}
		tc.Close()
		got := o.received()
		if strings.Contains(got, "mallory") || strings.Contains(strings.ToLower(got), "x-client-cert-verified: success\r\nx-client-cert-subject") {
			t.Errorf("forged fields reached the origin: %q", got)
		}
		if strings.Count(got, "X-Other: 1\r\n") != 2 {
			t.Errorf("other fields lost: %q", got)
		}
		if !withCert {
			if strings.Count(got, "X-Client-Cert-Verified: NONE\r\n") != 2 || strings.Contains(got, "X-Client-Cert-Subject") {
				t.Errorf("without a certificate: %q", got)
			}
			continue
		}
		sum := sha256.Sum256(client.X509.Raw)
		for _, f := range []string{
			"X-Client-Cert-Subject: " + client.X509.Subject.String() + "\r\n",
			"X-Client-Cert-Issuer: " + ca.X509.Subject.String() + "\r\n",
			"X-Client-Cert-SHA256: " + hex.EncodeToString(sum[:]) + "\r\n",
			"X-Client-Cert-Verified: SUCCESS\r\n",
		} {
			if strings.Count(got, f) != 2 {
				t.Errorf("field %q not in both requests: %q", f, got)
			}
		}
	}
}

// TestTLSHTTPShortWrites: a response head and body larger than what the
// client's socket takes, over TLS to a client that reads slowly through
// small socket buffers: every send path (head, body) resumes its short
// writes and the bytes arrive intact. (Loopback with 4 KiB buffers moves
// about 64 KiB/s whatever the transport: the body is kept small.)
func TestTLSHTTPShortWrites(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var head strings.Builder
	head.WriteString("HTTP/1.1 200 OK\r\n")
	for i := 0; head.Len() < 12<<10; i++ {
		head.WriteString("X-Filler-" + strings.Repeat("f", 8) + ": " + strings.Repeat("v", 1000) + "\r\n")
	}
	body := bytes.Repeat([]byte("0123456789abcdef"), 1<<12) // 64 KiB
	head.WriteString("Content-Length: 65536\r\n\r\n")
	resp := head.String() + string(body)
	o := newRawOrigin(t, func(string) string { return resp })
	fe := httpFrontend(t, nil, o.addr)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	tlsFront(fe, srv, 5*time.Second)
	raw := e.connect(func(fd int) {
		unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096)
		e.w.Accept(fd, fe, nil)
	})
	raw.SetReadBuffer(4096)
	raw.SetDeadline(time.Now().Add(60 * time.Second))
	tc := tls.Client(raw, cli)
	if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	// Let the proxy fill the socket before reading, then read in small
	// pieces so that its sends keep finding it full.
	testutil.Eventually(t, 10*time.Second, func() bool { return o.conns.Load() == 1 }, "the request reached the origin")
	var got bytes.Buffer
	buf := make([]byte, 1024)
	for got.Len() < len(resp) {
		n, err := tc.Read(buf)
		got.Write(buf[:n])
		if err != nil {
			t.Fatalf("after %d bytes (%q): %v", got.Len(), got.Bytes()[:min(got.Len(), 200)], err)
		}
	}
	if got.String() != resp {
		t.Fatal("the response changed on the way")
	}
	tc.Close()
	e.waitIdle()
}

// TestTLSKeepAliveRequestAllocations is
// TestHTTPKeepAliveRequestDoesNotAllocate over TLS: once established, a
// keep-alive request allocates nothing in the proxy itself. crypto/tls
// allocates one 16-byte object per call that reads the socket
// (Conn.readFromUntil's &atLeastReader{}, escaping through io.Reader):
// the proxy's read of the request record (its record count spares the
// read that would find the socket empty: rcvBuf) and the client's read of
// the response, so 2 per request for the whole process (this count is the
// process's); anything above is an allocation of ours.
func TestTLSKeepAliveRequestAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	o := newRawServer(t)
	fe := httpFrontend(t, nil, o)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	tlsFront(fe, srv, 5*time.Second)
	raw := e.dialTLS(fe)
	raw.SetDeadline(time.Time{})
	c := tls.Client(raw, cli)
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	want := len(rawResponse)
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < want {
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
	}
	for i := 0; i < 50; i++ {
		one()
	}
	if a := testing.AllocsPerRun(200, one); a > 2.05 {
		t.Fatalf("%.2f allocations per request, want crypto/tls's 2", a)
	}
	if !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("response %q", buf[:want])
	}
}

// wire records every byte a client receives from the socket.
type wire struct {
	net.Conn
	got []byte
}

func (w *wire) Read(p []byte) (int, error) {
	n, err := w.Conn.Read(p)
	w.got = append(w.got, p[:n]...)
	return n, err
}

// lastRecordType is the content type of the last whole TLS record in b.
func lastRecordType(b []byte) byte {
	var typ byte
	for len(b) >= 5 {
		n := 5 + (int(b[3])<<8 | int(b[4]))
		if len(b) < n {
			break
		}
		typ, b = b[0], b[n:]
	}
	return typ
}

// TestTLSCloseSendsCloseNotify: an http connection that ends after its
// response (Connection: close) sends a close_notify before the FIN, so
// the client sees a clean end of the TLS stream (TLS 1.2: the alert
// record's type is visible on the wire).
func TestTLSCloseSendsCloseNotify(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	srv, cli := tlsPair(t, tls.VersionTLS12)
	srv.SessionTicketsDisabled = true
	tlsFront(fe, srv, 5*time.Second)
	w := &wire{Conn: e.dialTLS(fe)}
	tc := tls.Client(w, cli)
	if _, err := tc.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(tc)
	if err != nil || !strings.HasSuffix(string(got), "hello") {
		t.Fatalf("read %q, %v", got, err)
	}
	if typ := lastRecordType(w.got); typ != 0x15 {
		t.Errorf("the last record is of type %#x, want an alert (close_notify, 0x15)", typ)
	}
	e.waitIdle()
}

// BenchmarkTLSKeepAlive is BenchmarkHTTPKeepAlive over TLS 1.3 (the TLS
// client in the same process).
func BenchmarkTLSKeepAlive(b *testing.B) {
	e := newEnv(b, defaultTuning())
	o := newRawServer(b)
	fe := httpFrontend(b, nil, o)
	srv, cli := tlsPair(b, tls.VersionTLS13)
	tlsFront(fe, srv, 5*time.Second)
	raw := e.dialTLS(fe)
	raw.SetDeadline(time.Time{})
	c := tls.Client(raw, cli)
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < len(rawResponse) {
			m, err := c.Read(buf[n:])
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}

// coalescer, once hold is set, keeps a client's writes until flush, then
// sends them in one write(2): several TLS records reach the proxy in one
// segment.
type coalescer struct {
	net.Conn
	hold bool
	held []byte
}

func (c *coalescer) Write(p []byte) (int, error) {
	if !c.hold {
		return c.Conn.Write(p)
	}
	c.held = append(c.held, p...)
	return len(p), nil
}

func (c *coalescer) flush() error {
	_, err := c.Conn.Write(c.held)
	c.held = c.held[:0]
	return err
}

// TestTLSRecordsInOneSegment: the proxy must not take a read that ended on
// a record boundary for "nothing buffered" when that read brought several
// records: two pipelined requests, each its own record, in one segment,
// then one request split inside its record header and body across
// segments; every request is answered.
func TestTLSRecordsInOneSegment(t *testing.T) {
	for _, v := range tlsVersions {
		t.Run(v.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			o := newRawServer(t)
			fe := httpFrontend(t, nil, o)
			srv, cli := tlsPair(t, v.v)
			srv.SessionTicketsDisabled = true
			tlsFront(fe, srv, 5*time.Second)
			raw := e.dialTLS(fe)
			co := &coalescer{Conn: raw}
			tc := tls.Client(co, cli)
			if err := tc.Handshake(); err != nil {
				t.Fatal(err)
			}
			co.hold = true
			readN := func(n int) {
				t.Helper()
				buf := make([]byte, n)
				if _, err := io.ReadFull(tc, buf); err != nil || !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 OK")) {
					t.Fatalf("response %q: %v", buf, err)
				}
			}
			req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
			for round := range 3 {
				tc.Write(req)
				tc.Write(req) // a second record, same segment
				if err := co.flush(); err != nil {
					t.Fatal(err)
				}
				readN(2 * len(rawResponse))
				// One record in three segments: part of its header, the
				// rest of the header and part of the body, the rest.
				tc.Write(req)
				rec := append([]byte(nil), co.held...)
				co.held = co.held[:0]
				for _, cut := range [][2]int{{0, 3}, {3, 9}, {9, len(rec)}} {
					if _, err := raw.Write(rec[cut[0]:cut[1]]); err != nil {
						t.Fatal(err)
					}
					time.Sleep(time.Duration(round) * 5 * time.Millisecond) // pace, not synchronisation: any delay must work
				}
				readN(len(rawResponse))
			}
		})
	}
}

// TestTLSClientCertInAccessLog: a tcp tunnel over a TLS bind with client
// certificates logs the client's subject with its access-log entry.
func TestTLSClientCertInAccessLog(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	client := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"alice"}})
	e := newEnv(t, defaultTuning())
	ring := stats.NewLogRing(16)
	e.do(func() { e.w.AccessLog = ring })
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	})
	fe := frontend(t, SpliceAuto, origin.Addr)
	fe.AccessLog = true
	srv, cli := tlsPair(t, tls.VersionTLS13)
	srv.ClientCAs = ca.Pool()
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	closed := tlsFront(fe, srv, 5*time.Second)
	cli.Certificates = []tls.Certificate{client.TLS()}
	tc := tls.Client(e.dialTLS(fe), cli)
	tc.Write([]byte("x"))
	if _, err := io.ReadFull(tc, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	tc.Close()
	testutil.Eventually(t, 10*time.Second, func() bool { return closed.Load() == 1 }, "the tunnel ends")
	var got []string
	e.do(func() { ring.Drain(func(le *stats.LogEntry) { got = append(got, le.ClientCert) }) })
	if len(got) != 1 || got[0] != client.X509.Subject.String() {
		t.Errorf("access log client_cert %q, want [%q]", got, client.X509.Subject.String())
	}
}

// TestTLSTinyRecordsYield: a client sending one-byte records cannot make
// one run of the loop decrypt them all: each record costs at least
// minRecordCost of the run's read budget (the cap counts that cost, not
// plaintext bytes), so 4096 of them in one segment take several runs,
// each past the first in class Bulk (Loop.Demote: neither the fd event
// that queued the tasklet as Urgent nor a run of the server side's
// tasklet reads them with a fresh budget), and every byte arrives.
func TestTLSTinyRecordsYield(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var got atomic.Int64
	origin := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		n, _ := io.Copy(io.Discard, c)
		got.Store(n)
	})
	fe := frontend(t, SpliceAuto, origin.Addr)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	srv.SessionTicketsDisabled = true
	tlsFront(fe, srv, 5*time.Second)
	raw := e.dialTLS(fe)
	co := &coalescer{Conn: raw}
	tc := tls.Client(co, cli)
	if err := tc.Handshake(); err != nil {
		t.Fatal(err)
	}
	co.hold = true
	const records = 4096
	for range records {
		tc.Write([]byte{'x'})
	}
	// The server's end of the handshake first (its helper goroutine reads
	// the client's Finished): records it would read ahead with it are
	// charged at once after it, not per run.
	testutil.Eventually(t, 10*time.Second, func() bool { full, _, _, _ := tlsCounts(fe); return full == 1 },
		"the server's handshake done")
	bulk := func() uint64 { return e.l.Activity().Tasklets[loop.Bulk].Load() }
	before := bulk()
	if err := co.flush(); err != nil {
		t.Fatal(err)
	}
	raw.CloseWrite()
	testutil.Eventually(t, 10*time.Second, func() bool { return got.Load() == records }, "every byte at the origin")
	// The loop publishes its counters at the end of a round, and on an
	// idle loop the whole transfer (one Urgent run, then Bulk runs that
	// re-queue themselves at the tail of Bulk) fits in one round, which
	// may not have ended yet: wait for a later one.
	e.do(func() {})
	// 4096 records at 512 bytes each against 256 KiB per run: 8 runs, the
	// first one Urgent.
	if n := bulk() - before; n < records*minRecordCost/runCap-1 {
		t.Errorf("%d Bulk runs for %d one-byte records, want %d at least", n, records, records*minRecordCost/runCap-1)
	}
}
