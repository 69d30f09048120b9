package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// rawOrigin is an HTTP/1.1 origin written on raw sockets: it reads request
// heads (and Content-Length bodies) with a minimal reader and answers each
// with answer(head). It counts connections and records every byte.
type rawOrigin struct {
	addr   *net.TCPAddr
	conns  atomic.Int64
	mu     sync.Mutex
	got    bytes.Buffer
	answer func(head string) string
}

func newRawOrigin(t testing.TB, answer func(head string) string) *rawOrigin {
	o := &rawOrigin{answer: answer}
	o.addr = testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		o.conns.Add(1)
		br := bufio.NewReader(c)
		for {
			head, err := readHead(br)
			if err != nil {
				return
			}
			o.mu.Lock()
			o.got.WriteString(head)
			o.mu.Unlock()
			if i := strings.Index(strings.ToLower(head), "\r\ncontent-length: "); i >= 0 {
				v := head[i+18:]
				v = v[:strings.Index(v, "\r\n")]
				n, _ := strconv.Atoi(v)
				b := make([]byte, n)
				if _, err := io.ReadFull(br, b); err != nil {
					return
				}
				o.mu.Lock()
				o.got.Write(b)
				o.mu.Unlock()
			}
			resp := o.answer(head)
			if resp == "" {
				return
			}
			if _, err := c.Write([]byte(resp)); err != nil {
				return
			}
		}
	}).Addr
	return o
}

func (o *rawOrigin) received() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got.String()
}

func readHead(br *bufio.Reader) (string, error) {
	var sb strings.Builder
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			return "", err
		}
		sb.WriteString(line)
		if line == "\r\n" {
			return sb.String(), nil
		}
	}
}

func okAnswer(body string) func(string) string {
	r := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
	return func(string) string { return r }
}

// httpFrontend builds an http frontend whose default backend has one
// server per address.
func httpFrontend(t testing.TB, opts func(*config.Backend), addrs ...*net.TCPAddr) *Frontend {
	t.Helper()
	fe := frontend(t, SpliceAuto, addrs...)
	if opts != nil {
		cfg := config.Backend{Name: "be"}
		for i, a := range addrs {
			cfg.Servers = append(cfg.Servers, &config.Server{Name: "s" + strconv.Itoa(i), Address: a.IP.String(), Port: a.Port})
		}
		opts(&cfg)
		cfg.Normalize()
		b, err := balance.Build(&cfg, nil, nil)
		if err != nil {
			t.Fatal(err)
		}
		fe.Backend = NewBackend(b, 1, new(Counters))
	}
	fe.HTTP = &HTTPFront{
		Default: fe.Backend, XForwardedFor: true,
		RequestTimeout: 5 * time.Second, KeepAliveTimeout: 5 * time.Second, ClientTimeout: 5 * time.Second,
	}
	return fe
}

// dialHTTP is env.dial for http mode.
func (e *env) dialHTTP(fe *Frontend) *net.TCPConn {
	e.t.Helper()
	c := e.connect(func(fd int) { e.w.StartHTTP(fd, fe, nil) })
	c.SetDeadline(time.Now().Add(10 * time.Second))
	return c
}

func TestHTTPKeepAliveReusesOneServerConnection(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 5; i++ {
		if _, err := c.Write([]byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != 200 || string(b) != "hello" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, b)
		}
	}
	if n := o.conns.Load(); n != 1 {
		t.Fatalf("server connections: %d, want 1", n)
	}
	if got := o.received(); !strings.Contains(got, "X-Forwarded-For: 127.0.0.1\r\n") {
		t.Fatalf("no X-Forwarded-For in %q", got)
	}
	c.Close()
	e.waitIdle()
}

func TestHTTPPipelinedRequestsAnsweredInOrder(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, func(head string) string {
		path := strings.Fields(head)[1]
		return "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(len(path)) + "\r\n\r\n" + path
	})
	fe := httpFrontend(t, nil, o.addr)
	c := e.dialHTTP(fe)
	var all strings.Builder
	for i := 0; i < 10; i++ {
		all.WriteString("GET /p" + strconv.Itoa(i) + " HTTP/1.1\r\nHost: a\r\n\r\n")
	}
	if _, err := c.Write([]byte(all.String())); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(c)
	for i := 0; i < 10; i++ {
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatalf("response %d: %v", i, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if want := "/p" + strconv.Itoa(i); string(b) != want {
			t.Fatalf("response %d: %q, want %q", i, b, want)
		}
	}
}

func TestHTTPRejectsHostileRequestsBeforeTheServer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("x"))
	fe := httpFrontend(t, nil, o.addr)
	fe.HTTP.MaxBody = 100
	for _, tc := range []struct {
		name, req string
		status    int
	}{
		{"cl and te", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"bad chunk size", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nabc\r\n0\r\n\r\n", 400},
		{"body over max", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 101\r\n\r\n", 413},
		{"chunked over max", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n65\r\n", 413},
		{"no host", "GET / HTTP/1.1\r\n\r\n", 400},
		{"content-length list", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 3, 3\r\n\r\nabc", 400},
		{"gzip coding", "POST / HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c := e.dialHTTP(fe)
			if _, err := c.Write([]byte(tc.req)); err != nil {
				t.Fatal(err)
			}
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status {
				t.Fatalf("status %d, want %d", resp.StatusCode, tc.status)
			}
		})
	}
	if got := o.received(); got != "" {
		t.Fatalf("server received %q", got)
	}
	e.waitIdle()
}

// TestHTTPKeepAliveRequestDoesNotAllocate pins zero heap allocations per
// request in steady state: request and response through the proxy on a
// kept-alive client connection and a pooled server connection.
func TestHTTPKeepAliveRequestDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	o := newRawServer(t)
	fe := httpFrontend(t, nil, o)
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 4096)
	want := len(rawResponse) + 0
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
	if a := testing.AllocsPerRun(200, one); a > 0.05 {
		t.Fatalf("%.2f allocations per request, want 0", a)
	}
	if !bytes.HasPrefix(buf, []byte("HTTP/1.1 200 OK\r\n")) {
		t.Fatalf("response %q", buf[:want])
	}
}

const rawResponse = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello"

// newRawServer answers every request head (no body) with rawResponse.
func newRawServer(t testing.TB) *net.TCPAddr {
	return headServer(t, []byte(rawResponse))
}

// headServer answers every request head (no body) with resp, on raw reads:
// allocation-free in steady state, so that AllocsPerRun and the benchmarks
// measure the proxy.
func headServer(t testing.TB, resp []byte) *net.TCPAddr {
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		answerHeads(c, resp)
	}).Addr
}

// answerHeads writes resp for every request head (no body) read from c,
// until c fails or ends.
func answerHeads(c io.ReadWriter, resp []byte) {
	buf := make([]byte, 8192)
	have := 0
	for {
		n, err := c.Read(buf[have:])
		if err != nil {
			return
		}
		have += n
		for {
			i := bytes.Index(buf[:have], []byte("\r\n\r\n"))
			if i < 0 {
				break
			}
			if _, err := c.Write(resp); err != nil {
				return
			}
			copy(buf, buf[i+4:have])
			have -= i + 4
		}
	}
}

// BenchmarkHTTPKeepAlive measures one keep-alive request/response through
// the proxy on loopback (client, proxy loop and origin in one process).
func BenchmarkHTTPKeepAlive(b *testing.B) {
	e := newEnv(b, defaultTuning())
	o := newRawServer(b)
	fe := httpFrontend(b, nil, o)
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
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

var _ = http1.StatusText

func TestHostNoPortAndRouteMatch(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"example.com", "example.com"},
		{"example.com:8080", "example.com"},
		{"example.com.", "example.com"},
		{"[::1]:80", "[::1]"},
		{"[::1]", "[::1]"},
		{"a:b", "a:b"},
		{"", ""},
	} {
		if got := string(hostNoPort([]byte(tc.in))); got != tc.want {
			t.Errorf("hostNoPort(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
	be := &Backend{Name: "x"}
	for _, tc := range []struct {
		route              Route
		host, path, method string
		want               bool
	}{
		{NewRoute("Example.com", "", "", be), "EXAMPLE.COM", "/", "GET", true},
		{NewRoute("example.com", "", "", be), "www.example.com", "/", "GET", false},
		{NewRoute("*.example.com", "", "", be), "a.b.Example.com", "/", "GET", true},
		{NewRoute("*.example.com", "", "", be), "example.com", "/", "GET", false},
		{NewRoute("*.example.com", "", "", be), "badexample.com", "/", "GET", false},
		{NewRoute("", "/api/", "", be), "h", "/api/v1", "GET", true},
		{NewRoute("", "/api/", "", be), "h", "/api", "GET", false},
		{NewRoute("", "/API/", "", be), "h", "/api/v1", "GET", false},
		{NewRoute("", "", "POST", be), "h", "/", "POST", true},
		{NewRoute("", "", "POST", be), "h", "/", "post", false},
		{NewRoute("h", "/a", "GET", be), "h", "/a", "GET", true},
		{NewRoute("h", "/a", "GET", be), "h", "/a", "PUT", false},
	} {
		if got := tc.route.match([]byte(tc.host), []byte(tc.path), []byte(tc.method)); got != tc.want {
			t.Errorf("route %+v on %s %s %s: %v, want %v", tc.route, tc.method, tc.host, tc.path, got, tc.want)
		}
	}
}

// TestNormPath pins the path routes compare against: RFC 3986 §5.2.4
// dot-segment removal (its examples), percent-encoded unreserved
// characters decoded (so "%2e" is a dot), other escapes upper-cased, the
// query untouched.
func TestNormPath(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"/", "/"},
		{"/api/v1", "/api/v1"},
		{"/api/../admin", "/admin"},
		{"/api/./v1", "/api/v1"},
		{"/a/b/c/./../../g", "/a/g"},
		{"/a/b/..", "/a/"},
		{"/a/.", "/a/"},
		{"/..", "/"},
		{"/../../x", "/x"},
		{"/.", "/"},
		{"/api/%2e%2e/admin", "/admin"},
		{"/api/%2E./admin", "/admin"},
		{"/api/.%2e", "/"},
		{"/%61pi/v1", "/api/v1"},
		{"/a%2fb", "/a%2Fb"},
		{"/a%zz", "/a%zz"},
		{"/a%2", "/a%2"},
		{"/.well-known/x", "/.well-known/x"},
		{"/a/...", "/a/..."},
		{"/a//../b", "/a/b"},
		{"/api/../admin?x=/../y", "/admin?x=/../y"},
		{"/api?%2e", "/api?%2e"},
		{"*", "*"},
		{"", ""},
	} {
		var scratch []byte
		if got := string(normPath([]byte(tc.in), &scratch)); got != tc.want {
			t.Errorf("normPath(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// TestRouteMatchesTheNormalisedPath: "/api/../admin" must not take the
// /api/ route (nor its percent-encoded spellings), and the configured
// prefix is normalised too.
func TestRouteMatchesTheNormalisedPath(t *testing.T) {
	api, admin := &Backend{Name: "api"}, &Backend{Name: "admin"}
	h := &HTTPFront{Routes: []Route{NewRoute("", "/api/", "", api)}, Default: admin}
	var scratch []byte
	for _, tc := range []struct {
		target string
		want   *Backend
	}{
		{"/api/v1", api},
		{"/api/../admin", admin},
		{"/api/%2e%2e/admin", admin},
		{"/api/v1/../../admin", admin},
		{"/x/../api/v1", api},
		{"/%61pi/v1", api},
		{"http://h/api/../admin", admin},
	} {
		buf := []byte("GET " + tc.target + " HTTP/1.1\r\nHost: h\r\n\r\n")
		var r http1.Request
		r.Reset()
		if n, err := r.Parse(buf); n == 0 || err != nil {
			t.Fatal(tc.target, n, err)
		}
		if be, _ := h.route(buf, &r, &scratch); be != tc.want {
			t.Errorf("%s routed to %s, want %s", tc.target, be.Name, tc.want.Name)
		}
	}
}

// TestRoutedRequestForwardedAsReceived: routing looks at the normalised
// path, the server gets the request-target as the client sent it.
func TestRoutedRequestForwardedAsReceived(t *testing.T) {
	e := newEnv(t, defaultTuning())
	api := newRawOrigin(t, okAnswer("api"))
	other := newRawOrigin(t, okAnswer("other"))
	fe := httpFrontend(t, nil, other.addr)
	fe.HTTP.Routes = []Route{NewRoute("", "/admin/", "", httpFrontend(t, nil, api.addr).Backend)}
	c := e.dialHTTP(fe)
	resp, body := exchangeOn(t, c, bufio.NewReader(c), "GET /x/%2E%2e/admin/./y HTTP/1.1\r\nHost: h\r\n\r\n", "GET")
	if resp.StatusCode != 200 || body != "api" {
		t.Fatalf("status %d body %q, want 200 from the /admin/ route", resp.StatusCode, body)
	}
	if got := api.received(); !strings.HasPrefix(got, "GET /x/%2E%2e/admin/./y HTTP/1.1\r\n") {
		t.Fatalf("server received %q", got)
	}
}

func TestRoutingDoesNotAllocate(t *testing.T) {
	h := &HTTPFront{Routes: []Route{
		NewRoute("*.img.example.com", "", "", &Backend{}),
		NewRoute("api.example.com", "/v1/", "GET", &Backend{}),
	}}
	buf := []byte("GET http://API.example.com:80/v1/x HTTP/1.1\r\nHost: api.example.com:80\r\n\r\n")
	var r http1.Request
	r.Reset()
	if n, err := r.Parse(buf); n == 0 || err != nil {
		t.Fatal(n, err)
	}
	var scratch []byte
	if be, ok := h.route(buf, &r, &scratch); !ok || be != h.Routes[1].Backend {
		t.Fatal("request not routed to the second route")
	}
	if a := testing.AllocsPerRun(100, func() { h.route(buf, &r, &scratch) }); a != 0 {
		t.Fatalf("%v allocations per routing decision", a)
	}
	// A path that needs normalising uses the loop's scratch buffer: no
	// allocation either once it exists.
	buf = []byte("GET /x/%2E%2e/v1/./y?a=/../b HTTP/1.1\r\nHost: api.example.com\r\n\r\n")
	r.Reset()
	if n, err := r.Parse(buf); n == 0 || err != nil {
		t.Fatal(n, err)
	}
	if be, ok := h.route(buf, &r, &scratch); !ok || be != h.Routes[1].Backend {
		t.Fatal("dot-segment request not routed to the second route")
	}
	if a := testing.AllocsPerRun(100, func() { h.route(buf, &r, &scratch) }); a != 0 {
		t.Fatalf("%v allocations per routing decision with dot segments", a)
	}
}

// exchangeOn sends raw on c and reads one response.
func exchangeOn(t *testing.T, c net.Conn, br *bufio.Reader, raw, method string) (*http.Response, string) {
	t.Helper()
	if _, err := io.WriteString(c, raw); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, &http.Request{Method: method})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestHTTPExpectContinueRelaysTheServers100(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		head, err := readHead(br)
		if err != nil || !strings.Contains(head, "Expect: 100-continue\r\n") {
			return
		}
		io.WriteString(c, "HTTP/1.1 100 Continue\r\n\r\n")
		b := make([]byte, 5)
		if _, err := io.ReadFull(br, b); err != nil {
			return
		}
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n"+strings.ToUpper(string(b)))
	}).Addr
	fe := httpFrontend(t, nil, addr)
	c := e.dialHTTP(fe)
	io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n")
	br := bufio.NewReader(c)
	line, err := br.ReadString('\n')
	if err != nil || line != "HTTP/1.1 100 Continue\r\n" {
		t.Fatalf("first line %q, %v", line, err)
	}
	if l, _ := br.ReadString('\n'); l != "\r\n" {
		t.Fatalf("100 Continue head continues with %q", l)
	}
	resp, body := exchangeOn(t, c, br, "hello", "POST")
	if resp.StatusCode != 200 || body != "HELLO" {
		t.Fatalf("%d %q", resp.StatusCode, body)
	}
}

// TestHTTPPooledConnectionClosedByServer: the server closes its idle
// connection; the pool notices (EPOLLRDHUP) and the next request gets a
// new connection.
func TestHTTPPooledConnectionClosedByServer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var conns atomic.Int64
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		conns.Add(1)
		if _, err := readHead(bufio.NewReader(c)); err != nil {
			return
		}
		io.WriteString(c, rawResponse) // keep-alive by default, then close
	}).Addr
	fe := httpFrontend(t, nil, addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		if resp, body := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
		testutil.Eventually(t, 5*time.Second, func() bool {
			n := -1
			e.do(func() { n = e.w.h.nidle })
			return n == 0
		}, "the closed idle connection to leave the pool")
	}
	if n := conns.Load(); n != 3 {
		t.Fatalf("%d server connections, want 3", n)
	}
}

// TestHTTPReplaysOnAPooledConnectionThatDies: the server reads a second
// request on a kept-alive connection and closes without answering (the
// keep-alive race); the proxy sends the request again on a new
// connection.
func TestHTTPReplaysOnAPooledConnectionThatDies(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var conns atomic.Int64
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		n := conns.Add(1)
		br := bufio.NewReader(c)
		for i := 0; ; i++ {
			if _, err := readHead(br); err != nil {
				return
			}
			if n == 1 && i == 1 {
				return // dies with the request unanswered
			}
			io.WriteString(c, rawResponse)
		}
	}).Addr
	fe := httpFrontend(t, nil, addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		if resp, body := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET"); resp.StatusCode != 200 || body != "hello" {
			t.Fatalf("request %d: %d %q", i, resp.StatusCode, body)
		}
	}
	if n := conns.Load(); n != 2 {
		t.Fatalf("%d server connections, want 2", n)
	}
}

// TestHTTPProxyAnswers: each answer the proxy makes itself has its status,
// "Connection: close" and "Cache-Control: no-cache", and nothing of the
// server's after it.
func TestHTTPProxyAnswers(t *testing.T) {
	e := newEnv(t, defaultTuning())
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(io.Discard, c)
	}).Addr
	garbage := newRawOrigin(t, func(string) string { return "HTTP/1.1 2x0 OK\r\n\r\n" })
	// Framing errors in the same read as a valid head: nothing went to
	// the client yet, so it gets a 502 rather than an empty close.
	badChunk := newRawOrigin(t, func(string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\nMARK\r\n0\r\n\r\n"
	})
	longExt := newRawOrigin(t, func(string) string {
		return "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n4;x=" + strings.Repeat("e", 100<<10) + "\r\nMARK\r\n0\r\n\r\n"
	})
	refused := closedPort(t)
	short := func(cfg *config.Backend) {
		cfg.Timeouts.ServerMs = 200
		cfg.Timeouts.ConnectMs = 200
		r := 1
		cfg.Retries = &r
	}
	for _, tc := range []struct {
		name   string
		addr   *net.TCPAddr
		req    string
		status int
	}{
		{"server silent: 504", silent, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 504},
		{"bad status line: 502", garbage.addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 502},
		{"bad chunk size with the head: 502", badChunk.addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 502},
		{"100 KB chunk extension with the head: 502", longExt.addr, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 502},
		{"connection refused: 503", refused, "GET / HTTP/1.1\r\nHost: a\r\n\r\n", 503},
		{"partial head: 408", silent, "GET / HTTP/1.1\r\nHost", 408},
		{"no Host: 400", silent, "GET / HTTP/1.1\r\n\r\n", 400},
		{"request line over 8 KiB: 414", silent, "GET /" + strings.Repeat("a", 9<<10) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := httpFrontend(t, short, tc.addr)
			fe.HTTP.RequestTimeout = 200 * time.Millisecond
			c := e.dialHTTP(fe)
			io.WriteString(c, tc.req)
			br := bufio.NewReader(c)
			resp, err := http.ReadResponse(br, nil)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("status %d close %v, want %d and close", resp.StatusCode, resp.Close, tc.status)
			}
			// A cache in front must not keep the proxy's answer (HAProxy's
			// error answers say the same).
			if cc := resp.Header.Values("Cache-Control"); len(cc) != 1 || cc[0] != "no-cache" {
				t.Errorf("Cache-Control %q, want no-cache", cc)
			}
			if b, _ := io.ReadAll(br); bytes.Contains(b, []byte("MARK")) {
				t.Fatalf("server bytes after the answer: %q", b)
			}
		})
	}
	e.waitIdle()
}

// TestHTTPProxyAnswersOnAKeptAliveConnection: after a complete exchange,
// a request refused before it reaches a server gets its answer as the
// first request of a connection does (the previous response's state must
// not make the proxy think part of a response already went out).
func TestHTTPProxyAnswersOnAKeptAliveConnection(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("first"))
	for _, tc := range []struct {
		name   string
		second string
		status int
	}{
		{"missing Host: 400", "GET / HTTP/1.1\r\n\r\n", 400},
		{"CL and TE: 400", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", 400},
		{"partial head: 408", "GET / HTTP/1.1\r\nHost", 408},
		{"body over max_body_size: 413", "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 100\r\n\r\n", 413},
		{"request line over 8 KiB: 414", "GET /" + strings.Repeat("a", 9000) + " HTTP/1.1\r\nHost: a\r\n\r\n", 414},
		{"head over the buffer: 431", "GET / HTTP/1.1\r\nHost: a\r\nX: " + strings.Repeat("v", 20000) + "\r\n\r\n", 431},
		{"CONNECT: 501", "CONNECT a:443 HTTP/1.1\r\nHost: a:443\r\n\r\n", 501},
		{"HTTP/2.0: 505", "GET / HTTP/2.0\r\nHost: a\r\n\r\n", 505},
		{"no route: 503", "GET /none HTTP/1.1\r\nHost: a\r\n\r\n", 503},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := httpFrontend(t, nil, o.addr)
			fe.HTTP.RequestTimeout = 200 * time.Millisecond
			fe.HTTP.MaxBody = 10
			if tc.status == 503 {
				fe.HTTP.Routes = []Route{NewRoute("", "/first", "", fe.Backend)}
				fe.HTTP.Default = nil
			}
			c := e.dialHTTP(fe)
			br := bufio.NewReader(c)
			io.WriteString(c, "GET /first HTTP/1.1\r\nHost: a\r\n\r\n")
			resp, err := http.ReadResponse(br, nil)
			if err != nil || resp.StatusCode != 200 {
				t.Fatalf("first request: %v %v", resp, err)
			}
			if b, err := io.ReadAll(resp.Body); err != nil || string(b) != "first" {
				t.Fatalf("first body %q %v", b, err)
			}
			io.WriteString(c, tc.second)
			resp, err = http.ReadResponse(br, nil)
			if err != nil {
				t.Fatalf("second request: %v, want %d", err, tc.status)
			}
			if resp.StatusCode != tc.status || !resp.Close {
				t.Fatalf("status %d close %v, want %d and close", resp.StatusCode, resp.Close, tc.status)
			}
		})
	}
	e.waitIdle()
}

func TestHTTPHopByHopFieldsStrippedBothWays(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, func(string) string {
		return "HTTP/1.1 200 OK\r\nConnection: X-Srv\r\nX-Srv: 1\r\nKeep-Alive: timeout=5\r\nX-End: 2\r\nContent-Length: 2\r\n\r\nok"
	})
	fe := httpFrontend(t, nil, o.addr)
	fe.HTTP.Via, fe.HTTP.XForwardedProto = true, true
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	resp, _ := exchangeOn(t, c, br, "GET / HTTP/1.1\r\nHost: a\r\nConnection: X-Cli, keep-alive\r\nX-Cli: 1\r\nKeep-Alive: 300\r\nTE: trailers\r\nProxy-Connection: x\r\nX-Keep: yes\r\n\r\n", "GET")
	got := o.received()
	for _, bad := range []string{"X-Cli", "Keep-Alive", "TE:", "Proxy-Connection", "Connection"} {
		if strings.Contains(got, bad) {
			t.Errorf("%s reached the server: %q", bad, got)
		}
	}
	for _, want := range []string{"GET / HTTP/1.1\r\nHost: a\r\n", "X-Keep: yes\r\n", "X-Forwarded-Proto: http\r\n", "Via: 1.1 spliced\r\n"} {
		if !strings.Contains(got, want) {
			t.Errorf("%q missing at the server: %q", want, got)
		}
	}
	if resp.Header.Get("X-Srv") != "" || resp.Header.Get("Keep-Alive") != "" || resp.Header.Get("X-End") != "2" || resp.Header.Get("Via") != "1.1 spliced" {
		t.Errorf("response fields %v", resp.Header)
	}
}

func TestHTTP10KeepAlive(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		resp, body := exchangeOn(t, c, br, "GET / HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", "GET")
		if body != "hi" || resp.Header.Get("Connection") != "keep-alive" {
			t.Fatalf("1.0 keep-alive: %q %v", body, resp.Header)
		}
	}
	resp, _ := exchangeOn(t, c, br, "GET / HTTP/1.0\r\n\r\n", "GET")
	if !resp.Close {
		t.Fatal("1.0 request without keep-alive: connection not closed")
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("after a 1.0 response: %v, want EOF", err)
	}
}

// TestTCPQueueWaitsForASlot: tcp mode shares the http queue: with server
// maxconn 1, a second tunnel waits until the first closes, or is closed
// at queue_ms.
func TestTCPQueueWaitsForASlot(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	}).Addr
	for _, tc := range []struct {
		name    string
		queue   time.Duration
		through bool
	}{
		{"waits", 5 * time.Second, true},
		{"times out", 150 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fe := frontend(t, SpliceOff, addr)
			fe.Backend.B.Servers[0].SetMaxconn(1)
			fe.Backend.B.QueueTimeout = tc.queue
			first := e.dial(fe)
			echo(t, first, "one")
			second := e.dial(fe)
			second.SetDeadline(time.Now().Add(10 * time.Second))
			second.Write([]byte("two"))
			time.AfterFunc(400*time.Millisecond, func() { first.Close() })
			b := make([]byte, 3)
			_, err := io.ReadFull(second, b)
			if tc.through && (err != nil || string(b) != "two") {
				t.Fatalf("queued tunnel: %q %v", b, err)
			}
			if !tc.through && err == nil {
				t.Fatalf("queued tunnel past queue_ms got %q", b)
			}
			second.Close()
			e.waitIdle()
		})
	}
}

func echo(t *testing.T, c net.Conn, msg string) {
	t.Helper()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(msg)); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, len(msg))
	if _, err := io.ReadFull(c, b); err != nil || string(b) != msg {
		t.Fatalf("echo %q: %q %v", msg, b, err)
	}
}

// BenchmarkHTTPLargeResponse relays 1 MiB Content-Length responses on a
// keep-alive connection, spliced past the first 64 KiB (splice on).
func BenchmarkHTTPLargeResponse(b *testing.B) {
	const size = 1 << 20
	resp := append([]byte("HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n"), bytes.Repeat([]byte("x"), size)...)
	e := newEnv(b, defaultTuning())
	addr := headServer(b, resp)
	fe := httpFrontend(b, nil, addr)
	fe.Splice = SpliceOn
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")
	buf := make([]byte, 256<<10)
	b.SetBytes(size)
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := c.Write(req); err != nil {
			b.Fatal(err)
		}
		n := 0
		for n < len(resp) {
			m, err := c.Read(buf)
			if err != nil {
				b.Fatal(err)
			}
			n += m
		}
	}
}

// TestHTTPLargeBodySplicedToASlowClient: 1 MiB Content-Length responses,
// written by the server in small segments, reach a client that starts
// reading late whole, spliced and buffered, three times on one
// connection (backpressure both ways, pool reuse after a long body).
func TestHTTPLargeBodySplicedToASlowClient(t *testing.T) {
	const size = 1 << 20
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n")
			// Small writes make small segments: a pipe (16 slots) then
			// fills with much less than its 64 KiB.
			for off := 0; off < size; off += 1000 {
				if _, err := c.Write(body[off:min(off+1000, size)]); err != nil {
					return
				}
			}
		}
	}).Addr
	for _, mode := range []SpliceMode{SpliceOn, SpliceOff} {
		t.Run(modeName(mode), func(t *testing.T) {
			fe := httpFrontend(t, nil, addr)
			fe.Splice = mode
			c := e.dialHTTP(fe)
			br := bufio.NewReader(c)
			for i := 0; i < 3; i++ {
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
				time.Sleep(100 * time.Millisecond) // let every buffer on the way fill
				resp, err := http.ReadResponse(br, nil)
				if err != nil {
					t.Fatal(err)
				}
				got, err := io.ReadAll(io.LimitReader(resp.Body, size))
				if err != nil || !bytes.Equal(got, body) {
					t.Fatalf("response %d: %d bytes, %v", i, len(got), err)
				}
			}
		})
	}
}

// TestHTTPForwardedProtoReplacesTheClients: with x_forwarded_proto on, the
// client's own X-Forwarded-Proto fields (any case, '_' for '-' as CGI
// servers read it) are dropped and only the proxy's value reaches the
// server: a framework that reads the first value must not believe a clear
// request came over HTTPS. With the option off the client's field is
// forwarded as any other. X-Forwarded-For is appended after the client's.
func TestHTTPForwardedProtoReplacesTheClients(t *testing.T) {
	e := newEnv(t, defaultTuning())
	const forged = "GET / HTTP/1.1\r\nHost: a\r\nX-Forwarded-Proto: https\r\nx-forwarded-proto: wss\r\nX_Forwarded_Proto: https\r\nX-Forwarded-Protocol: keep\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n"
	for _, tc := range []struct {
		name string
		on   bool
		want []string // lines in order at the server
		not  []string
	}{
		{"on", true,
			[]string{"X-Forwarded-Protocol: keep\r\n", "X-Forwarded-For: 198.51.100.7\r\n", "X-Forwarded-For: 127.0.0.1\r\n", "X-Forwarded-Proto: http\r\n"},
			[]string{"X-Forwarded-Proto: https", "x-forwarded-proto", "X_Forwarded_Proto", "wss"}},
		{"off", false,
			[]string{"X-Forwarded-Proto: https\r\n", "x-forwarded-proto: wss\r\n", "X_Forwarded_Proto: https\r\n", "X-Forwarded-For: 198.51.100.7\r\n"},
			[]string{"X-Forwarded-Proto: http\r\n"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := newRawOrigin(t, okAnswer("ok"))
			fe := httpFrontend(t, nil, o.addr)
			fe.HTTP.XForwardedProto, fe.HTTP.XForwardedFor = tc.on, true
			c := e.dialHTTP(fe)
			br := bufio.NewReader(c)
			exchangeOn(t, c, br, forged, "GET")
			got := o.received()
			at := 0
			for _, w := range tc.want {
				i := strings.Index(got[at:], w)
				if i < 0 {
					t.Fatalf("%q missing (or out of order) at the server: %q", w, got)
				}
				at += i + len(w)
			}
			for _, bad := range tc.not {
				if strings.Contains(got, bad) {
					t.Errorf("%q reached the server: %q", bad, got)
				}
			}
		})
	}
}

// TestHTTPIdleKeptAliveConnectionHoldsNoBuffer: once its response is
// complete, a kept-alive connection waits for its next request with no
// buffer, no stream and no parser (the idle row of make bench: 5 000 such
// connections).
func TestHTTPIdleKeptAliveConnectionHoldsNoBuffer(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 2; i++ {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
	}
	var bufs int
	var st *stream
	testutil.Eventually(t, 3*time.Second, func() bool { // within the 5 s keep-alive
		e.do(func() {
			bufs = e.w.Bufs.InUse()
			if c := e.w.h.live.Front(); c != nil {
				st = c.st
			} else {
				t.Errorf("the connection is not live (%d live)", e.w.Live())
			}
		})
		return bufs == 0 && st == nil
	}, "the idle connection to hold no buffer and no stream (", &bufs, "buffers)")
}

// TestHTTPRequestsStartInClassNormal: the I/O run that completes a
// request head ends there, and the request (routing, the server attempt)
// starts in a run of class Normal, the seed's request processing: every
// request is one Normal run at least.
func TestHTTPRequestsStartInClassNormal(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	act := e.l.Activity()
	before := act.Tasklets[loop.Normal].Load()
	const n = 20
	for i := 0; i < n; i++ {
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
	}
	if got := act.Tasklets[loop.Normal].Load() - before; got < n {
		t.Fatalf("%d Normal runs for %d requests", got, n)
	}
}
