package proxy

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/proxyproto"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// acceptProxy makes fe read a PROXY header from peers in trusted, within
// timeout, and returns the count of its connections' OnClose.
func acceptProxy(fe *Frontend, timeout time.Duration, trusted ...string) *atomic.Int64 {
	ap := &AcceptProxy{Timeout: timeout}
	for _, t := range trusted {
		p, err := config.ParseTrusted(t)
		if err != nil {
			panic(err)
		}
		ap.Trusted = append(ap.Trusted, p)
	}
	fe.AcceptProxy = ap
	var closed atomic.Int64
	fe.OnClose = func(int) { closed.Add(1) }
	return &closed
}

// dialAccept connects a client whose accepted end goes through
// Worker.Accept, as the engine's accept does.
func (e *env) dialAccept(fe *Frontend) *net.TCPConn {
	e.t.Helper()
	c := e.connect(func(fd int) { e.w.Accept(fd, fe, nil) })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

// inHeaderPhase is the number of connections reading their PROXY header.
func (e *env) inHeaderPhase() int {
	n := 0
	e.do(func() {
		for ph := e.w.pp.live.Front(); ph != nil; ph = ph.link.Next() {
			n++
		}
	})
	return n
}

const v1Client = "PROXY TCP4 203.0.113.9 198.51.100.1 4242 443\r\n"

func v2Client(authority string) []byte {
	return proxyproto.AppendV2(nil, netip.MustParseAddrPort("203.0.113.9:4242"), netip.MustParseAddrPort("198.51.100.1:443"), []byte(authority))
}

// TestProxyHeaderReplacesThePeerInHTTP: the client a header names is the
// one X-Forwarded-For and the access log show, the peer is logged apart,
// and the request after the header is served as sent; whether the header
// came whole with the accept (v1) or in pieces the loop waits for (v2).
func TestProxyHeaderReplacesThePeerInHTTP(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	closed := acceptProxy(fe, 5*time.Second, "127.0.0.0/8")
	ring := stats.NewLogRing(64)
	e.do(func() { e.w.AccessLog = ring })
	fe.AccessLog = true
	for _, tc := range []struct {
		name  string
		parts [][]byte
	}{
		{"v1 with the request", [][]byte{[]byte(v1Client + "GET /a HTTP/1.1\r\nHost: a\r\n\r\n")}},
		{"v2 in pieces", [][]byte{v2Client("")[:10], v2Client("")[10:20], append(v2Client("")[20:], "GET /a HTTP/1.1\r\nHost: a\r\n\r\n"...)}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dialAccept(fe)
			for i, p := range tc.parts {
				if i > 0 && e.inHeaderPhase() != 1 {
					t.Fatal("the connection does not wait for the rest of its header")
				}
				if _, err := c.Write(p); err != nil {
					t.Fatal(err)
				}
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("response %v %v", resp, err)
			}
			c.Close()
		})
	}
	if got := o.received(); strings.Count(got, "X-Forwarded-For: 203.0.113.9\r\n") != 2 || strings.Contains(got, "127.0.0.1") {
		t.Fatalf("origin received %q", got)
	}
	testutil.Eventually(t, 5*time.Second, func() bool { return closed.Load() == 2 }, "both connections closed")
	var got []stats.LogEntry
	e.do(func() { ring.Drain(func(le *stats.LogEntry) { got = append(got, *le) }) })
	if len(got) != 2 {
		t.Fatalf("%d log entries", len(got))
	}
	for _, le := range got {
		if le.Client != netip.MustParseAddrPort("203.0.113.9:4242") || le.Peer.Addr() != netip.MustParseAddr("127.0.0.1") {
			t.Fatalf("logged client %v peer %v", le.Client, le.Peer)
		}
	}
	tot := fe.Stats.Total(0)
	if tot.ProxyAccepted != 2 || tot.ProxyRefused+tot.ProxyInvalid+tot.ProxyTimeouts != 0 {
		t.Fatalf("counts %+v", tot.Proxy())
	}
	e.waitIdle()
}

// proxyOrigin reads a PROXY header then one line from each connection and
// reports both.
type proxyOrigin struct {
	addr *net.TCPAddr
	got  chan proxyGot
}

type proxyGot struct {
	h    proxyproto.Header
	err  error
	line string
}

func newProxyOrigin(t *testing.T) *proxyOrigin {
	o := &proxyOrigin{got: make(chan proxyGot, 16)}
	o.addr = testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var buf []byte
		tmp := make([]byte, 512)
		var g proxyGot
		for {
			n, err := c.Read(tmp)
			buf = append(buf, tmp[:n]...)
			if g.err = proxyproto.Parse(buf, &g.h); g.err != proxyproto.ErrIncomplete || err != nil {
				break
			}
		}
		if g.err == nil {
			rest := buf[g.h.Len:]
			for !strings.Contains(string(rest), "\n") {
				n, err := c.Read(tmp)
				if err != nil {
					break
				}
				rest = append(rest, tmp[:n]...)
			}
			g.line = string(rest)
		}
		o.got <- g
		c.Write([]byte("ok\n"))
	}).Addr
	return o
}

// TestSendProxyToServers: a server with send_proxy gets the header first,
// naming the client the bind's own header named (and its authority, v2),
// then the client's bytes unchanged.
func TestSendProxyToServers(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newProxyOrigin(t)
	for _, version := range []string{config.ProxyV1, config.ProxyV2} {
		t.Run(version, func(t *testing.T) {
			fe := frontend(t, SpliceAuto, o.addr)
			fe.Backend.B.Servers[0].SendProxy = balance.SendProxyVersion(version)
			acceptProxy(fe, 5*time.Second, "127.0.0.1")
			c := e.dialAccept(fe)
			if _, err := c.Write(append(v2Client("www.example.com"), "hello\n"...)); err != nil {
				t.Fatal(err)
			}
			if l, err := bufio.NewReader(c).ReadString('\n'); err != nil || l != "ok\n" {
				t.Fatalf("client read %q %v", l, err)
			}
			g := <-o.got
			if g.err != nil || g.h.Src != netip.MustParseAddrPort("203.0.113.9:4242") || g.h.Dst != netip.MustParseAddrPort("198.51.100.1:443") || g.line != "hello\n" {
				t.Fatalf("server got %+v", g)
			}
			if want := map[string]string{"v1": "", "v2": "www.example.com"}[version]; string(g.h.Authority()) != want {
				t.Fatalf("authority %q, want %q", g.h.Authority(), want)
			}
			c.Close()
		})
	}
	// Without a header of its own the client is the peer, and the address
	// it connected to the bind's.
	fe := httpFrontend(t, func(b *config.Backend) { b.Servers[0].SendProxy = config.ProxyV1 }, o.addr)
	c := e.dialHTTP(fe)
	c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	g := <-o.got
	if g.err != nil || g.h.Src.Addr() != netip.MustParseAddr("127.0.0.1") || !g.h.Dst.IsValid() || !strings.HasPrefix(g.line, "GET / HTTP/1.1\r\n") {
		t.Fatalf("server got %+v", g)
	}
}

// TestProxyAuthorityRoutesSNI: on a tcp frontend with SNI routes, a v2
// AUTHORITY picks the route (no ClientHello to inspect: the balancer
// terminated TLS); without one, the ClientHello still does.
func TestProxyAuthorityRoutesSNI(t *testing.T) {
	e := newEnv(t, defaultTuning())
	tag := func(s string) *net.TCPAddr {
		return testutil.ServeOrigin(t, func(c *net.TCPConn) { c.Write([]byte(s)); c.Close() }).Addr
	}
	fe := frontend(t, SpliceAuto, tag("D"))
	fe.SNI = []SNIRoute{NewSNIRoute("a.example.com", frontend(t, SpliceAuto, tag("A")).Backend)}
	fe.InspectTimeout = 5 * time.Second
	acceptProxy(fe, 5*time.Second, "127.0.0.1")
	for auth, want := range map[string]string{"a.example.com": "A", "A.EXAMPLE.COM": "A", "other.example.com": "D"} {
		c := e.dialAccept(fe)
		c.Write(v2Client(auth))
		got, err := io.ReadAll(c)
		if err != nil || string(got) != want {
			t.Fatalf("authority %q: got %q %v, want %q", auth, got, err, want)
		}
		c.Close()
	}
}

// TestProxyHeaderHostile: whatever is not a whole header from a trusted
// peer within the deadline closes the connection before any server hears
// of it, is counted, and gives the connection's slots back.
func TestProxyHeaderHostile(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var origin atomic.Int64
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) { origin.Add(1); c.Close() }).Addr
	big := v2Client("")
	big[14], big[15] = 0xff, 0x00 // 65 280 bytes announced
	for _, tc := range []struct {
		name    string
		trusted string
		timeout time.Duration
		send    func(c *net.TCPConn)
		counter func(t *stats.Totals) int64
	}{
		{"untrusted peer", "10.0.0.0/8", time.Second,
			func(c *net.TCPConn) { c.Write([]byte(v1Client)) },
			func(t *stats.Totals) int64 { return t.ProxyRefused }},
		{"no header", "127.0.0.0/8", time.Second,
			func(c *net.TCPConn) { c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")) },
			func(t *stats.Totals) int64 { return t.ProxyInvalid }},
		{"malformed v1", "127.0.0.0/8", time.Second,
			func(c *net.TCPConn) { c.Write([]byte("PROXY TCP4 203.0.113.9 198.51.100.1 4242 99999\r\n")) },
			func(t *stats.Totals) int64 { return t.ProxyInvalid }},
		{"truncated", "127.0.0.0/8", time.Minute,
			func(c *net.TCPConn) { c.Write(v2Client("")[:20]); c.CloseWrite() },
			func(t *stats.Totals) int64 { return t.ProxyInvalid }},
		{"oversized v2", "127.0.0.0/8", time.Minute,
			func(c *net.TCPConn) { c.Write(big[:16]) },
			func(t *stats.Totals) int64 { return t.ProxyInvalid }},
		{"v1 line past 107 bytes", "127.0.0.0/8", time.Minute,
			func(c *net.TCPConn) { c.Write([]byte("PROXY TCP6 " + strings.Repeat("1", 100))) },
			func(t *stats.Totals) int64 { return t.ProxyInvalid }},
		{"slowloris", "127.0.0.0/8", 300 * time.Millisecond,
			func(c *net.TCPConn) {
				for _, b := range []byte(v1Client) {
					if _, err := c.Write([]byte{b}); err != nil {
						return
					}
					time.Sleep(50 * time.Millisecond) // the attack's pace, not a synchronisation
				}
			},
			func(t *stats.Totals) int64 { return t.ProxyTimeouts }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := frontend(t, SpliceAuto, o)
			closed := acceptProxy(fe, tc.timeout, tc.trusted)
			c := e.dialAccept(fe)
			start := time.Now()
			go tc.send(c)
			_, err := io.ReadAll(c)
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				t.Fatal("the connection was not closed")
			}
			if tc.name == "slowloris" && time.Since(start) > 3*time.Second {
				t.Fatalf("closed after %v, the deadline is %v", time.Since(start), tc.timeout)
			}
			tot := fe.Stats.Total(0)
			if tc.counter(&tot) != 1 || tot.ProxyAccepted != 0 || tot.ConnTotal != 0 {
				t.Fatalf("counts %+v, %d connections", tot.Proxy(), tot.ConnTotal)
			}
			testutil.Eventually(t, 5*time.Second, func() bool { return closed.Load() == 1 && e.inHeaderPhase() == 0 }, "slots given back")
			c.Close()
		})
	}
	if origin.Load() != 0 {
		t.Fatalf("the server saw %d connections", origin.Load())
	}
	e.waitIdle()
}

// TestProxyHeaderAllocatesNothing: reading a header (peek, parse,
// consume) and keeping what it carried cost no allocation.
func TestProxyHeaderAllocatesNothing(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	hdr := v2Client("www.example.com")
	peer := netip.MustParseAddrPort("10.0.0.1:1")
	w := e.w // the loop does not touch w.pp meanwhile: no connection has accept_proxy
	var h proxyproto.Header
	one := func() {
		unix.Write(fds[0], hdr)
		if w.peekProxy(fds[1], &h) != peekDone {
			t.Fatal("header not read")
		}
		pp := w.carry(&h, peer)
		if w.clientAddr(-1, pp).Port() != 4242 || len(w.authority(pp, rawSock{})) == 0 {
			t.Fatal("not carried")
		}
		w.dropCarried(pp)
	}
	one()
	if a := testing.AllocsPerRun(200, one); a != 0 {
		t.Fatalf("%v allocations per header", a)
	}
}

// TestProxyHeaderBeforeTLS: on a bind that terminates TLS the header comes
// first, then the handshake; a server's v2 header names the client the
// bind's header named, with the SNI the client sent as AUTHORITY (the
// bind's header's own AUTHORITY when it has one), in tcp and http mode.
func TestProxyHeaderBeforeTLS(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newProxyOrigin(t)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	for _, tc := range []struct {
		name, header, want string
		http               bool
	}{
		{"tcp, v1 header: the SNI", v1Client, "localhost", false},
		{"tcp, v2 header with authority", string(v2Client("www.example.com")), "www.example.com", false},
		{"http, v1 header: the SNI", v1Client, "localhost", true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := frontend(t, SpliceAuto, o.addr)
			if tc.http {
				fe = httpFrontend(t, nil, o.addr)
			}
			fe.Backend.B.Servers[0].SendProxy = 2
			tlsFront(fe, srv, 5*time.Second)
			acceptProxy(fe, 5*time.Second, "127.0.0.1")
			raw := e.dialAccept(fe)
			if _, err := raw.Write([]byte(tc.header)); err != nil {
				t.Fatal(err)
			}
			c := tls.Client(raw, cli)
			if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
				t.Fatal(err)
			}
			g := <-o.got
			if g.err != nil || g.h.Src != netip.MustParseAddrPort("203.0.113.9:4242") || string(g.h.Authority()) != tc.want ||
				!strings.HasPrefix(g.line, "GET / HTTP/1.1\r\n") {
				t.Fatalf("server got %v %v authority %q line %q", g.err, g.h.Src, g.h.Authority(), g.line)
			}
			c.Close()
		})
	}
	e.waitIdle()
}

// TestProxyHeaderH2: an HTTP/2 connection (prior knowledge): its streams'
// server connections name its client — the one its own header named, or
// its peer without one — and the address it connected to (the
// connection's socket's: a stream's side has none).
func TestProxyHeaderH2(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newProxyOrigin(t)
	for _, header := range []bool{true, false} {
		fe := h2Frontend(t, o.addr)
		fe.Backend.B.Servers[0].SendProxy = 1
		if header {
			acceptProxy(fe, 5*time.Second, "127.0.0.1")
		}
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		tr := &http.Transport{Protocols: &p, DialContext: func(context.Context, string, string) (net.Conn, error) {
			c := e.dialAccept(fe)
			c.SetDeadline(time.Time{})
			if !header {
				return c, nil
			}
			_, err := c.Write([]byte(v1Client))
			return c, err
		}}
		cl := &http.Client{Transport: tr, Timeout: 10 * time.Second}
		if resp, err := cl.Get("http://a/"); err == nil {
			resp.Body.Close() // the origin's answer is no HTTP: a 502 is fine
		}
		tr.CloseIdleConnections()
		g := <-o.got
		src, dst := netip.MustParseAddrPort("203.0.113.9:4242"), netip.MustParseAddrPort("198.51.100.1:443")
		if !header {
			src, dst = netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), g.h.Src.Port()), netip.AddrPortFrom(netip.MustParseAddr("127.0.0.1"), g.h.Dst.Port())
		}
		if g.err != nil || g.h.Local || g.h.Src != src || g.h.Dst != dst || g.h.Dst.Port() == 0 || !strings.HasPrefix(g.line, "GET / HTTP/1.1\r\n") {
			t.Fatalf("header %v: server got %v local %v %v -> %v line %q", header, g.err, g.h.Local, g.h.Src, g.h.Dst, g.line)
		}
	}
}

// BenchmarkProxyHeaderRead is what reading a header adds to a connection
// on the loop: the peer's write aside, a MSG_PEEK, the parse, the read
// that consumes it, and the carried entry taken and given back.
func BenchmarkProxyHeaderRead(b *testing.B) {
	e := newEnv(b, defaultTuning())
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	for _, bc := range []struct {
		name string
		hdr  []byte
	}{{"v1", []byte(v1Client)}, {"v2", v2Client("www.example.com")}} {
		b.Run(bc.name, func(b *testing.B) {
			w := e.w
			peer := netip.MustParseAddrPort("10.0.0.1:1")
			var h proxyproto.Header
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				unix.Write(fds[0], bc.hdr)
				if w.peekProxy(fds[1], &h) != peekDone {
					b.Fatal("header not read")
				}
				w.dropCarried(w.carry(&h, peer))
			}
		})
	}
}
