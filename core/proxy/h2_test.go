package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// h2Origin is an HTTP/1.1 origin for the HTTP/2 tests: /small, /big (1
// MiB), /echo (the request body back, chunked), /trailers (a chunked body
// with trailer fields), /head-info (the request's framing as seen by the
// server).
func h2Origin(t *testing.T) *net.TCPAddr {
	t.Helper()
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if originCommon(w, r) {
			return
		}
		switch r.URL.Path {
		case "/trailers":
			w.Header().Set("Trailer", "X-Result")
			w.WriteHeader(200)
			io.WriteString(w, "part1")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
			w.Header().Set("X-Result", "ok")
		case "/head-info":
			io.WriteString(w, r.Method+" "+r.Host+" cl="+strconv.FormatInt(r.ContentLength, 10)+
				" te="+strings.Join(r.TransferEncoding, ",")+" cookie="+r.Header.Get("Cookie")+" xff="+r.Header.Get("X-Forwarded-For"))
		default:
			w.WriteHeader(404)
		}
	}))
	srv.EnableHTTP2 = false
	srv.Start()
	t.Cleanup(srv.Close)
	return srv.Listener.Addr().(*net.TCPAddr)
}

// bigBody is the 1 MiB object of the HTTP/2 tests' origins.
var bigBody = bytes.Repeat([]byte("0123456789abcdef"), 1<<16)

// originCommon answers the paths every HTTP/2 test origin serves: /small
// (5 bytes), /big (1 MiB), /echo (the request body back, with X-Sum and
// the X-Check trailer as X-Trailer-In); false for another path.
func originCommon(w http.ResponseWriter, r *http.Request) bool {
	switch r.URL.Path {
	case "/small":
		w.Header().Set("Content-Length", "5")
		io.WriteString(w, "hello")
	case "/big":
		w.Header().Set("Content-Length", strconv.Itoa(len(bigBody)))
		w.Write(bigBody)
	case "/echo":
		b, err := io.ReadAll(r.Body)
		if err != nil {
			w.WriteHeader(500)
			return true
		}
		w.Header().Set("X-Sum", strconv.Itoa(len(b)))
		w.Header().Set("X-Trailer-In", r.Trailer.Get("X-Check"))
		w.Write(b)
	default:
		return false
	}
	return true
}

// h2Client is an HTTP/2 client with prior knowledge whose connections go
// through e's worker.
func (e *env) h2Client(fe *Frontend) *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true)
	tr := &http.Transport{
		Protocols: &p,
		DialContext: func(context.Context, string, string) (net.Conn, error) {
			c := e.dialHTTP(fe)
			c.SetDeadline(time.Time{})
			return c, nil
		},
	}
	e.t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr, Timeout: 10 * time.Second}
}

func h2Frontend(t *testing.T, o *net.TCPAddr) *Frontend {
	fe := httpFrontend(t, nil, o)
	fe.HTTP.Versions = HTTPVersion1 | HTTPVersion2
	return fe
}

// TestH2PriorKnowledgeRequests: an HTTP/2 client with prior knowledge on a
// clear connection gets its responses through HTTP/1.1 servers: small and
// large bodies, request bodies with and without a length, trailers both
// ways, many streams at once on one connection.
func TestH2PriorKnowledgeRequests(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := h2Frontend(t, h2Origin(t))
	cl := e.h2Client(fe)

	resp, err := cl.Get("http://a/small")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.ProtoMajor != 2 || resp.StatusCode != 200 || string(b) != "hello" {
		t.Fatalf("small: %s %d %q", resp.Proto, resp.StatusCode, b)
	}

	resp, err = cl.Get("http://a/big")
	if err != nil {
		t.Fatal(err)
	}
	h := sha256.New()
	n, err := io.Copy(h, resp.Body)
	resp.Body.Close()
	if err != nil || n != 1<<20 {
		t.Fatalf("big: %d bytes, %v", n, err)
	}

	// A body without a length (chunked to the server) with trailers.
	pr, pw := io.Pipe()
	req, _ := http.NewRequest("POST", "http://a/echo", pr)
	req.Trailer = http.Header{"X-Check": nil}
	go func() {
		pw.Write(bytes.Repeat([]byte("x"), 100000))
		req.Trailer.Set("X-Check", "yes")
		pw.Close()
	}()
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if len(b) != 100000 || resp.Header.Get("X-Sum") != "100000" || resp.Header.Get("X-Trailer-In") != "yes" {
		t.Fatalf("echo: %d bytes, sum %q, trailer %q", len(b), resp.Header.Get("X-Sum"), resp.Header.Get("X-Trailer-In"))
	}

	// A body with a length.
	resp, err = cl.Post("http://a/echo", "text/plain", strings.NewReader("abc"))
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "abc" {
		t.Fatalf("echo with length: %q", b)
	}

	// Trailers from the server.
	resp, err = cl.Get("http://a/trailers")
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if string(b) != "part1part2" || resp.Trailer.Get("X-Result") != "ok" {
		t.Fatalf("trailers: %q %v", b, resp.Trailer)
	}

	// What the server sees.
	req, _ = http.NewRequest("GET", "http://example.com:8080/head-info", nil)
	req.Header.Add("Cookie", "a=1")
	req.Header.Add("Cookie", "b=2")
	resp, err = cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b, _ = io.ReadAll(resp.Body)
	resp.Body.Close()
	if !strings.HasPrefix(string(b), "GET example.com:8080 cl=0 te= cookie=a=1; b=2 xff=127.0.0.1") {
		t.Fatalf("server saw %q", b)
	}

	// Many streams at once.
	var wg sync.WaitGroup
	errs := make(chan error, 50)
	for i := 0; i < 50; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			resp, err := cl.Get("http://a/small")
			if err != nil {
				errs <- err
				return
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "hello" {
				errs <- io.ErrUnexpectedEOF
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl.CloseIdleConnections()
	e.waitIdle()
}

// TestH2StatsAndAccessLog: each HTTP/2 request is logged with its request
// line as HTTP/2.0, and the frontend counts its HTTP/2 connections and
// streams (open now, and in all).
func TestH2StatsAndAccessLog(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := h2Frontend(t, h2Origin(t))
	entries := logged(t, e, fe)
	cl := e.h2Client(fe)
	for _, path := range []string{"/small", "/small", "/trailers"} {
		resp, err := cl.Get("http://a" + path)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		resp.Body.Close()
	}
	got := entries(3)
	for i, want := range []string{"GET /small HTTP/2.0", "GET /small HTTP/2.0", "GET /trailers HTTP/2.0"} {
		if line := string(got[i].RequestLine()); line != want || got[i].Status != 200 || got[i].Proto != 20 {
			t.Errorf("entry %d: %q %d proto %d, want %q 200 proto 20", i, line, got[i].Status, got[i].Proto, want)
		}
	}
	tot := func() stats.Totals { return fe.Stats.Total(loop.Mono()) }
	if tt := tot(); tt.H2ConnCur != 1 || tt.H2Streams != 3 || tt.H2StreamsCur != 0 || tt.Requests != 3 {
		t.Errorf("while open: h2 conns %d, streams %d (open %d), requests %d; want 1, 3 (0), 3",
			tt.H2ConnCur, tt.H2Streams, tt.H2StreamsCur, tt.Requests)
	}
	// Idle, the connection holds no buffer (its codec gave its own back).
	testutil.Eventually(t, 5*time.Second, func() bool {
		var n int
		e.do(func() { n = e.w.Bufs.InUse() })
		return n == 0
	}, "the idle HTTP/2 connection to hold no buffer")
	cl.CloseIdleConnections()
	testutil.Eventually(t, 5*time.Second, func() bool { return tot().H2ConnCur == 0 }, "the HTTP/2 connection counted closed")
	e.waitIdle()
}

// TestH2HalfHeaderBlockTimesOut: a client that begins a header block and
// never ends it (no CONTINUATION) holds the whole connection; the
// frontend's http_request_ms closes it, as an HTTP/1.1 head's, also after
// a first request (then only the keep-alive timeout was armed).
func TestH2HalfHeaderBlockTimesOut(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := h2Frontend(t, h2Origin(t))
	fe.HTTP.RequestTimeout = 300 * time.Millisecond
	fe.HTTP.KeepAliveTimeout = 10 * time.Second
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Now().Add(8 * time.Second))
	fr := http2.NewFramer(c, c)
	io.WriteString(c, http2.ClientPreface)
	fr.WriteSettings()
	block := func() []byte {
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", "/small"}, {":authority", "a"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return hb.Bytes()
	}
	// A first request, whole, and its response.
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block(), EndStream: true, EndHeaders: true})
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("first response: %v", err)
		}
		if f.Header().StreamID == 1 && f.Header().Flags.Has(http2.FlagDataEndStream) {
			break
		}
		if s, ok := f.(*http2.SettingsFrame); ok && !s.IsAck() {
			fr.WriteSettingsAck()
		}
	}
	// Half a block, END_HEADERS unset, and then nothing more.
	b := block()
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: b[:len(b)/2], EndStream: true})
	start := time.Now()
	if _, err := io.Copy(io.Discard, c); err != nil {
		t.Fatalf("the connection was not closed: %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Fatalf("closed after %v, want about http_request_ms (300ms)", d)
	}
	e.waitIdle()
	if n := fe.Stats.Total(loop.Mono()).Timeouts; n != 1 {
		t.Fatalf("%d timeouts counted, want 1", n)
	}
}

// TestConnectionsOfARemovedBindWindDown: once the engine marks a bind
// removed (Removed in its current frontend), an idle HTTP/1.1 connection
// of it is closed, a busy one answers with Connection: close, and an
// HTTP/2 connection gets GOAWAY (Worker.EndRemoved).
func TestConnectionsOfARemovedBindWindDown(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := h2Frontend(t, h2Origin(t))
	var cur atomic.Pointer[Frontend]
	cur.Store(fe)
	dial := func() *net.TCPConn {
		c := e.connect(func(fd int) { e.w.StartHTTP(fd, fe, &cur) })
		c.SetDeadline(time.Now().Add(10 * time.Second))
		return c
	}
	get := func(c net.Conn, br *bufio.Reader) *http.Response {
		t.Helper()
		io.WriteString(c, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n")
		resp, err := http.ReadResponse(br, nil)
		if err != nil {
			t.Fatal(err)
		}
		io.ReadAll(resp.Body)
		return resp
	}
	idle, busy := dial(), dial()
	ibr, bbr := bufio.NewReader(idle), bufio.NewReader(busy)
	get(idle, ibr)
	get(busy, bbr)
	h2c := dial()
	fr := http2.NewFramer(h2c, h2c)
	io.WriteString(h2c, http2.ClientPreface)
	fr.WriteSettings()
	testutil.Eventually(t, 5*time.Second, func() bool {
		var up bool
		e.do(func() { up = !e.w.h.live2.Empty() })
		return up
	}, "the HTTP/2 connection")

	// A request begun on the busy one: not idle.
	io.WriteString(busy, "GET /small HTTP/1.1\r\n")
	testutil.Eventually(t, 5*time.Second, func() bool {
		var reading bool
		e.do(func() {
			for c := e.w.h.live.Front(); c != nil; c = c.link.Next() {
				reading = reading || c.st != nil
			}
		})
		return reading
	}, "the busy connection's head begun")

	cur.Store(Removed)
	e.do(func() { e.w.EndRemoved() })

	// The idle HTTP/1.1 connection is closed.
	if _, err := ibr.ReadByte(); err != io.EOF {
		t.Errorf("idle HTTP/1.1 connection: %v, want EOF", err)
	}
	// The busy one's request is its last.
	io.WriteString(busy, "Host: a\r\n\r\n")
	resp, err := http.ReadResponse(bbr, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.ReadAll(resp.Body)
	if !resp.Close || resp.StatusCode != 200 {
		t.Errorf("the request under way: %d, close %v; want 200 with Connection: close", resp.StatusCode, resp.Close)
	}
	// The HTTP/2 connection gets GOAWAY.
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			t.Fatalf("no GOAWAY: %v", err)
		}
		if g, ok := f.(*http2.GoAwayFrame); ok {
			if g.ErrCode != http2.ErrCodeNo {
				t.Errorf("GOAWAY %v, want NO_ERROR", g.ErrCode)
			}
			break
		}
	}
}

// TestH2StreamBodyReadStaysWithinTheSliceGiven: the chunked request body
// an HTTP/2 stream's client end gives fits the slice it is read into, not
// the array behind it (a reader's slice may be shorter than its
// capacity), and the body reads back whole, framed.
func TestH2StreamBodyReadStaysWithinTheSliceGiven(t *testing.T) {
	hs := &h2Stream{c: &h2Conn{}, req: h2In{chunked: true, body: bytes.Repeat([]byte("b"), 100), end: true}}
	backing := make([]byte, 64)
	var got []byte
	for i := 0; i < 100 && !hs.req.lastSent; i++ {
		p := backing[:24] // capacity 64
		for j := range backing {
			backing[j] = '#'
		}
		n, e := hs.rcvBuf(-1, p)
		if e != 0 {
			t.Fatalf("read %d: errno %v", i, e)
		}
		if n > len(p) || backing[len(p)] != '#' {
			t.Fatalf("read %d: %d bytes into a slice of %d, past it: %q", i, n, len(p), backing)
		}
		got = append(got, p[:n]...)
	}
	var d http1.Chunked
	d.Reset()
	var payload []byte
	for off := 0; off < len(got) && !d.Done(); {
		k, data, err := d.Decode(got[off:])
		if err != nil || k == 0 {
			t.Fatalf("chunked body %q: %v", got, err)
		}
		payload = append(payload, got[off+k-data:off+k]...)
		off += k
	}
	if !d.Done() || string(payload) != strings.Repeat("b", 100) {
		t.Fatalf("body %q decodes to %q (done %v)", got, payload, d.Done())
	}
}

// TestH2StreamsKeepTheirServerConnections: the server connections of an
// HTTP/2 client's streams in flight at once are all pooled when the
// streams end, so that the next burst of streams reuses them. One client
// connection may carry max_concurrent_streams (up to 1000) requests at
// once, each over its own HTTP/1.1 server connection: a pool that kept
// fewer closed the rest, and the h2 bench row opened a server connection
// for every other request.
func TestH2StreamsKeepTheirServerConnections(t *testing.T) {
	const streams = 100 // above the per-server bound the pool had (64)
	var accepted atomic.Int64
	var arrived atomic.Int64
	release := make(chan struct{})
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/hold" && arrived.Add(1) <= streams {
			// the first burst: every request on its own connection at once
			select {
			case <-release:
			case <-time.After(10 * time.Second):
			}
		}
		w.Header().Set("Content-Length", "2")
		io.WriteString(w, "ok")
	}))
	srv.EnableHTTP2 = false
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			accepted.Add(1)
		}
	}
	srv.Start()
	t.Cleanup(srv.Close)

	e := newEnv(t, defaultTuning())
	fe := h2Frontend(t, srv.Listener.Addr().(*net.TCPAddr))
	fe.HTTP.H2.MaxConcurrentStreams = streams
	cl := e.h2Client(fe)
	burst := func() {
		t.Helper()
		var wg sync.WaitGroup
		errs := make(chan error, streams)
		for range streams {
			wg.Add(1)
			go func() {
				defer wg.Done()
				resp, err := cl.Get("http://a/hold")
				if err != nil {
					errs <- err
					return
				}
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "ok" {
					errs <- io.ErrUnexpectedEOF
				}
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	go func() {
		// every stream at the server at once, then all answered (the
		// origin's own 10 s bound covers a proxy that never gets there)
		for end := time.Now().Add(10 * time.Second); arrived.Load() < streams && time.Now().Before(end); {
			time.Sleep(time.Millisecond)
		}
		close(release)
	}()
	burst()
	if n := accepted.Load(); n != streams {
		t.Fatalf("%d server connections for %d streams held at once, want %d", n, streams, streams)
	}
	idle := func() (n int) { e.do(func() { n = e.w.h.nidle }); return }
	testutil.Eventually(t, 10*time.Second, func() bool { return idle() == streams },
		"every server connection pooled when its stream ended")
	burst() // answered at once now: the pooled connections serve it
	if n := accepted.Load(); n != streams {
		t.Fatalf("%d server connections after a second burst, want the %d pooled ones reused", n, streams)
	}
}

// TestH2RequestDoesNotAllocate pins zero heap allocations per HTTP/2
// request in steady state: a stream's HEADERS in, its start, the request
// to a pooled HTTP/1.1 server connection, the response head encoded as
// HEADERS and its body as DATA, the write to the client, the stream given
// back. A first stream stays open (its server holds it), as a busy
// connection's do: an idle one gives its buffers back (ReleaseBuffers).
// The client frames by hand (the Framer allocates) and its header block
// is all indexed after the first (x/net's decoder allocates the strings
// of literal fields).
func TestH2RequestDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	resp := []byte("HTTP/1.1 200 OK\r\nContent-Length: 5\r\nServer: raw\r\nX-Origin: a\r\n\r\nhello")
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		b := make([]byte, 4096)
		n, err := c.Read(b) // a new connection's first head, whole
		if err != nil {
			return
		}
		if bytes.Contains(b[:n], []byte(" /hold ")) {
			io.Copy(io.Discard, c) // never answered
			return
		}
		if _, err := c.Write(resp); err != nil {
			return
		}
		answerHeads(c, resp)
	}).Addr
	fe := h2Frontend(t, o)
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	fr := http2.NewFramer(c, nil)
	io.WriteString(c, http2.ClientPreface)
	fr.WriteSettings()
	fr.WriteSettingsAck()
	fr.WriteWindowUpdate(0, 1<<30) // room for every response body
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	fields := func(path string) []byte {
		hb.Reset()
		for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":path", path}, {":authority", "a"}, {"user-agent", "t"}} {
			enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		return bytes.Clone(hb.Bytes())
	}
	headers := func(id uint32, block []byte) []byte {
		f := make([]byte, 9+len(block))
		f[2] = byte(len(block))
		f[3] = byte(http2.FrameHeaders)
		f[4] = byte(http2.FlagHeadersEndHeaders | http2.FlagHeadersEndStream)
		binary.BigEndian.PutUint32(f[5:9], id)
		copy(f[9:], block)
		return f
	}
	if _, err := c.Write(headers(1, fields("/hold"))); err != nil {
		t.Fatal(err)
	}
	frame := headers(0, fields("/x")) // its literals enter both tables
	buf := make([]byte, 1<<16)
	have := 0
	id := uint32(3)
	one := func() {
		binary.BigEndian.PutUint32(frame[5:9], id)
		if _, err := c.Write(frame); err != nil {
			t.Fatal(err)
		}
		for {
			// frames until our stream's END_STREAM
			for have >= 9 {
				n := 9 + (int(buf[0])<<16 | int(buf[1])<<8 | int(buf[2]))
				if have < n {
					break
				}
				end := buf[4]&byte(http2.FlagDataEndStream) != 0 && binary.BigEndian.Uint32(buf[5:9]) == id
				copy(buf, buf[n:have])
				have -= n
				if end {
					id += 2
					return
				}
			}
			m, err := c.Read(buf[have:])
			if err != nil {
				t.Fatal(err)
			}
			have += m
		}
	}
	one()
	frame = headers(0, fields("/x")) // all indexed now
	for range 50 {
		one()
	}
	if a := testing.AllocsPerRun(200, one); a > 0.05 {
		t.Fatalf("%.2f allocations per request, want 0", a)
	}
}
