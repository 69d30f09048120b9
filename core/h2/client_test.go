package h2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// cresp is what a clientRec heard of one stream.
type cresp struct {
	heads   []int
	fields  []hpack.HeaderField
	body    []byte
	trail   []hpack.HeaderField
	ended   bool
	reset   bool
	code    http2.ErrCode
	pending []byte // request body not yet taken by SendData
	endBody bool   // END_STREAM after pending
}

// clientRec is a ClientHandler that writes down what it is told and
// sends request bodies as the windows allow.
type clientRec struct {
	c         *ClientConn
	s         map[uint32]*cresp
	goAways   []string
	noConsume bool
}

func newClientRec() *clientRec { return &clientRec{s: map[uint32]*cresp{}} }

func (r *clientRec) get(id uint32) *cresp {
	if r.s[id] == nil {
		r.s[id] = &cresp{}
	}
	return r.s[id]
}

func (r *clientRec) Response(id uint32, status int, f []hpack.HeaderField, end bool) {
	s := r.get(id)
	s.heads = append(s.heads, status)
	if status >= 200 {
		s.fields = append([]hpack.HeaderField(nil), f...)
	}
	s.ended = end
}

func (r *clientRec) Data(id uint32, p []byte, end bool) {
	s := r.get(id)
	s.body = append(s.body, p...)
	s.ended = end
	if !r.noConsume {
		r.c.Consumed(id, len(p))
	}
}

func (r *clientRec) Trailers(id uint32, f []hpack.HeaderField) {
	s := r.get(id)
	s.trail = append([]hpack.HeaderField(nil), f...)
	s.ended = true
}

func (r *clientRec) Reset(id uint32, code http2.ErrCode) {
	s := r.get(id)
	s.reset, s.code = true, code
}

func (r *clientRec) GoAway(last uint32, code http2.ErrCode) {
	r.goAways = append(r.goAways, fmt.Sprintf("%d %v", last, code))
}

func (r *clientRec) WindowOpened(id uint32) { r.flush(id) }

// send queues a request body on id and offers it.
func (r *clientRec) send(id uint32, body []byte, end bool) {
	s := r.get(id)
	s.pending = append(s.pending, body...)
	s.endBody = end
	r.flush(id)
}

func (r *clientRec) flush(id uint32) {
	s := r.get(id)
	n := r.c.SendData(id, s.pending, s.endBody)
	s.pending = s.pending[n:]
}

func (r *clientRec) done(id uint32) bool {
	s := r.s[id]
	return s != nil && (s.ended || s.reset)
}

func field(fs []hpack.HeaderField, name string) string {
	for _, f := range fs {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

// pump drives c over nc until cond holds: write Output, read what the
// server sent, Feed it. Reads poll with a short deadline (no sleep).
func pump(t *testing.T, nc net.Conn, c *ClientConn, cond func() bool) {
	t.Helper()
	in := make([]byte, c.MaxFrameLen()*2)
	n := 0
	end := time.Now().Add(15 * time.Second)
	for {
		for len(c.Output()) > 0 {
			w, err := nc.Write(c.Output())
			c.Drained(w)
			if err != nil {
				t.Fatalf("write: %v", err)
			}
		}
		if cond() {
			return
		}
		if time.Now().After(end) {
			t.Fatal("pump: condition not reached")
		}
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Millisecond))
		k, err := nc.Read(in[n:])
		n += k
		if err != nil && !errors.Is(err, io.EOF) {
			var ne net.Error
			if !errors.As(err, &ne) || !ne.Timeout() {
				t.Fatalf("read: %v", err)
			}
		}
		used, ferr := c.Feed(in[:n])
		copy(in, in[used:n])
		n -= used
		if ferr != nil {
			t.Fatalf("feed: %v", ferr)
		}
		if errors.Is(err, io.EOF) && !cond() {
			t.Fatal("server closed")
		}
	}
}

// h2cServer starts net/http's server speaking HTTP/2 without TLS (prior
// knowledge) on a loopback socket.
func h2cServer(t *testing.T, h http.Handler) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: h, Protocols: new(http.Protocols)}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String()
}

func dialClient(t *testing.T, addr string) (net.Conn, *ClientConn, *clientRec) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	rec := newClientRec()
	c := NewClientConn(ClientConfig{}, rec)
	rec.c = c
	return nc, c, rec
}

func testMux() http.Handler {
	mux := http.NewServeMux()
	mux.HandleFunc("/echo", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Trailer", "X-Sum")
		w.Header().Set("X-Method", r.Method)
		w.Header().Set("X-TE", r.Header.Get("Te"))
		w.Header().Set("X-Got-Conn", r.Header.Get("Connection")+r.Header.Get("Keep-Alive"))
		w.Header().Set("X-Host", r.Host)
		w.Header().Set("X-URI", r.RequestURI)
		b, _ := io.ReadAll(r.Body)
		w.Write(b)
		w.Header().Set("X-Sum", strconv.Itoa(len(b)))
	})
	mux.HandleFunc("/big", func(w http.ResponseWriter, r *http.Request) {
		n, _ := strconv.Atoi(r.URL.Query().Get("n"))
		w.Header().Set("Content-Length", strconv.Itoa(n))
		w.Write(bytes.Repeat([]byte("x"), n))
	})
	mux.HandleFunc("/hdr", func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("X-Len", strconv.Itoa(len(r.Header.Get("X-Big"))))
	})
	mux.HandleFunc("/continue", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(103)
		w.WriteHeader(204)
	})
	return mux
}

// parseHTTP1Req parses an HTTP/1.1 request head for RequestHTTP1.
func parseHTTP1Req(t *testing.T, s string) (*http1.Request, []byte) {
	t.Helper()
	r := &http1.Request{}
	buf := []byte(s)
	n, err := r.Parse(buf)
	if err != nil || n == 0 {
		t.Fatalf("parse %q: %d %v", s, n, err)
	}
	return r, buf
}

// TestClientNetHTTP: requests from HTTP/1.1 heads to net/http's h2c
// server: a GET, a POST whose body passes the stream's initial window
// (WindowOpened), echoed with trailers, a 1 MiB download (Consumed
// gives the windows back), a 103 before a 204, concurrent streams.
func TestClientNetHTTP(t *testing.T) {
	addr := h2cServer(t, testMux())
	nc, c, rec := dialClient(t, addr)

	r, buf := parseHTTP1Req(t, "GET /echo?q=1 HTTP/1.1\r\nHost: example.com\r\nConnection: keep-alive, x-hop\r\nX-Hop: 1\r\nKeep-Alive: 5\r\nTE: trailers, deflate\r\nAccept: */*\r\n\r\n")
	get, err := c.RequestHTTP1(r, buf, true)
	if err != nil {
		t.Fatal(err)
	}
	body := bytes.Repeat([]byte("b"), 200000)
	r, buf = parseHTTP1Req(t, "POST http://example.org/echo HTTP/1.1\r\nHost: example.org\r\nContent-Length: 200000\r\n\r\n")
	post, err := c.RequestHTTP1(r, buf, false)
	if err != nil {
		t.Fatal(err)
	}
	rec.send(post, body, true)
	big, err := c.OpenStream("GET", "example.com", "/big?n=1048576", nil, true)
	if err != nil {
		t.Fatal(err)
	}
	cont, _ := c.OpenStream("GET", "example.com", "/continue", nil, true)
	pump(t, nc, c, func() bool { return rec.done(get) && rec.done(post) && rec.done(big) && rec.done(cont) })

	g := rec.s[get]
	if g.reset || g.heads[0] != 200 || field(g.fields, "x-method") != "GET" || field(g.fields, "x-te") != "trailers" ||
		field(g.fields, "x-got-conn") != "" || field(g.fields, "x-host") != "example.com" || field(g.fields, "x-uri") != "/echo?q=1" {
		t.Fatalf("get: %+v", g)
	}
	p := rec.s[post]
	if p.reset || !bytes.Equal(p.body, body) || field(p.trail, "x-sum") != "200000" || field(p.fields, "x-uri") != "/echo" {
		t.Fatalf("post: reset=%v %d bytes, trailers %v, fields %v", p.reset, len(p.body), p.trail, p.fields)
	}
	if b := rec.s[big]; b.reset || len(b.body) != 1<<20 {
		t.Fatalf("big: %d bytes", len(b.body))
	}
	if h := rec.s[cont].heads; len(h) != 2 || h[0] != 103 || h[1] != 204 {
		t.Fatalf("continue: %v", h)
	}
	if c.Streams() != 0 || !c.CanOpen() {
		t.Fatalf("streams left: %d", c.Streams())
	}
	c.GoAway()
	pump(t, nc, c, func() bool { return c.Done() })
}

// TestClientConcurrencyLimit: the server's SETTINGS_MAX_CONCURRENT_STREAMS
// bounds CanOpen and OpenStream.
func TestClientConcurrencyLimit(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		<-release
	}), Protocols: new(http.Protocols), HTTP2: &http.HTTP2Config{MaxConcurrentStreams: 3}}
	srv.Protocols.SetUnencryptedHTTP2(true)
	go srv.Serve(ln)
	defer srv.Close()
	nc, c, rec := dialClient(t, ln.Addr().String())
	pump(t, nc, c, func() bool { return c.peerMaxStreams == 3 })
	var ids []uint32
	for c.CanOpen() {
		id, err := c.OpenStream("GET", "x", "/", nil, true)
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if len(ids) != 3 {
		t.Fatalf("opened %d streams, want 3", len(ids))
	}
	if _, err := c.OpenStream("GET", "x", "/", nil, true); err != ErrNoStream {
		t.Fatalf("4th stream: %v", err)
	}
	close(release)
	pump(t, nc, c, func() bool { return rec.done(ids[0]) && rec.done(ids[1]) && rec.done(ids[2]) })
	if !c.CanOpen() {
		t.Fatal("cannot open after the streams ended")
	}
}

// TestAppendHTTP1Response: a response head written as HTTP/1.1 parses
// back with core/http1, chunked when there is a body and no length, and
// the chunks and trailers decode.
// TestAppendHTTP1ResponseNoContent: a 204 or 304 has no body in
// HTTP/1.1 whatever follows on the stream: no chunked framing (a parser
// would wait for chunks that never come), no content-length.
func TestAppendHTTP1ResponseNoContent(t *testing.T) {
	for _, status := range []int{204, 304} {
		for _, body := range []bool{false, true} {
			head, chunked := AppendHTTP1Response(nil, status, nil, body)
			if chunked || strings.Contains(string(head), "transfer-encoding") || strings.Contains(string(head), "content-length") {
				t.Fatalf("%d body=%v: chunked %v, %q", status, body, chunked, head)
			}
		}
	}
}

func TestAppendHTTP1Response(t *testing.T) {
	fields := []hpack.HeaderField{{Name: "content-type", Value: "application/grpc"}, {Name: "x-a", Value: "1"}}
	head, chunked := AppendHTTP1Response(nil, 200, fields, true)
	if !chunked {
		t.Fatal("not chunked")
	}
	msg := append(AppendChunk(append([]byte(nil), head...), []byte("hello")), AppendChunk(nil, nil)...)
	msg = AppendHTTP1Trailers(msg, []hpack.HeaderField{{Name: "grpc-status", Value: "0"}})
	var r http1.Response
	n, err := r.Parse(msg, http1.MethodPOST)
	if err != nil || n != len(head) || r.Status != 200 || r.Body != http1.BodyChunked {
		t.Fatalf("parse: %d %v %+v", n, err, r.Status)
	}
	if v, _ := r.Get(msg, "x-a"); string(v) != "1" {
		t.Fatalf("x-a %q", v)
	}
	var ch http1.Chunked
	rest := msg[n:]
	var data []byte
	for len(rest) > 0 && !ch.Done() {
		k, d, err := ch.Decode(rest)
		if err != nil {
			t.Fatal(err)
		}
		if d > 0 {
			data = append(data, rest[k-d:k]...)
		}
		if k == 0 {
			break
		}
		rest = rest[k:]
	}
	if !ch.Done() || string(data) != "hello" {
		t.Fatalf("chunked: done=%v %q", ch.Done(), data)
	}

	for _, tc := range []struct {
		status int
		fields []hpack.HeaderField
		body   bool
		want   http1.Body
		cl     int64
	}{
		{200, nil, false, http1.BodyLength, 0},
		{204, nil, false, http1.BodyNone, -1},
		{200, []hpack.HeaderField{{Name: "content-length", Value: "7"}}, true, http1.BodyLength, 7},
		{103, []hpack.HeaderField{{Name: "link", Value: "</a>"}}, false, http1.BodyNone, -1},
	} {
		head, _ := AppendHTTP1Response(nil, tc.status, tc.fields, tc.body)
		var r http1.Response
		n, err := r.Parse(head, http1.MethodGET)
		if err != nil || n != len(head) || r.Status != tc.status || r.Body != tc.want || r.ContentLength != tc.cl {
			t.Errorf("%d: %q: %d %v body %v cl %d", tc.status, head, n, err, r.Body, r.ContentLength)
		}
	}
}

// TestClientLargeHead: a request head larger than the server's frame size
// goes as HEADERS and CONTINUATION frames.
func TestClientLargeHead(t *testing.T) {
	addr := h2cServer(t, testMux())
	nc, c, rec := dialClient(t, addr)
	big := bytes.Repeat([]byte("v"), 40000)
	id, err := c.OpenStream("GET", "example.com", "/hdr", []Field{{[]byte("X-Big"), big}}, true)
	if err != nil {
		t.Fatal(err)
	}
	pump(t, nc, c, func() bool { return rec.done(id) })
	if s := rec.s[id]; s.reset || field(s.fields, "x-len") != "40000" {
		t.Fatalf("%+v", s)
	}
}
