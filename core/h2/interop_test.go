package h2

import (
	"bytes"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// echoHandler is a proxy in miniature: GET /big?n= answers n bytes; any
// request with a body gets it echoed, each byte consumed (its window
// given back) only once SendData took it, so what it holds per stream
// stays within the stream's receive window.
type echoHandler struct {
	c          *Conn
	pending    map[uint32][]byte
	ended      map[uint32]bool
	big        map[uint32]int
	grpc       map[uint32]bool
	maxPending int
	resets     atomic.Int32 // read by the test goroutine
}

func newEchoHandler() *echoHandler {
	return &echoHandler{pending: map[uint32][]byte{}, ended: map[uint32]bool{}, big: map[uint32]int{}, grpc: map[uint32]bool{}}
}

var bigChunk = bytes.Repeat([]byte("0123456789abcdef"), 1024)

func (h *echoHandler) Headers(id uint32, r *Request, end bool) {
	if n, ok := strings.CutPrefix(r.Path, "/big?n="); ok {
		size, _ := strconv.Atoi(n)
		h.c.Respond(id, 200, []Field{{[]byte("Content-Length"), []byte(n)}}, false)
		h.big[id] = size
		h.flushBig(id)
		return
	}
	if strings.HasPrefix(r.Path, "/echo.") {
		// gRPC: the messages echoed as they come, then grpc-status in
		// trailers
		h.grpc[id] = true
		h.c.Respond(id, 200, []Field{{[]byte("content-type"), []byte("application/grpc")}}, false)
		return
	}
	h.c.Respond(id, 200, []Field{{[]byte("X-Method"), []byte(r.Method)}}, end)
}

func (h *echoHandler) flushBig(id uint32) {
	for h.big[id] > 0 {
		k := min(h.big[id], len(bigChunk))
		n := h.c.SendData(id, bigChunk[:k], k == h.big[id])
		h.big[id] -= n
		if n < k {
			return
		}
	}
	delete(h.big, id)
}

func (h *echoHandler) flush(id uint32) {
	p := h.pending[id]
	n := h.c.SendData(id, p, h.ended[id] && !h.grpc[id])
	h.c.Consumed(id, n)
	h.pending[id] = p[n:]
	if n == len(p) && h.ended[id] {
		if h.grpc[id] {
			h.c.SendTrailers(id, []Field{{[]byte("grpc-status"), []byte("0")}})
		}
		delete(h.pending, id)
		delete(h.ended, id)
		delete(h.grpc, id)
	}
}

func (h *echoHandler) Data(id uint32, p []byte, end bool) {
	h.pending[id] = append(h.pending[id], p...)
	h.maxPending = max(h.maxPending, len(h.pending[id]))
	h.ended[id] = end
	h.flush(id)
}

func (h *echoHandler) Trailers(id uint32, f []hpack.HeaderField) {
	h.ended[id] = true
	h.flush(id)
}

func (h *echoHandler) Reset(id uint32, code http2.ErrCode) {
	delete(h.pending, id)
	delete(h.ended, id)
	delete(h.big, id)
	delete(h.grpc, id)
	h.resets.Add(1)
}

func (h *echoHandler) WindowOpened(id uint32) {
	if _, ok := h.big[id]; ok {
		h.flushBig(id)
		return
	}
	if _, ok := h.pending[id]; ok {
		h.flush(id)
	}
}

// testServer serves Conns on a loopback listener, one test goroutine per
// connection standing in for a loop.
type testServer struct {
	ln   net.Listener
	wg   sync.WaitGroup
	mu   sync.Mutex
	hs   []*echoHandler
	addr string
}

func startServer(t *testing.T) *testServer {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{ln: ln, addr: ln.Addr().String()}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := ln.Accept()
			if err != nil {
				return
			}
			h := newEchoHandler()
			s.mu.Lock()
			s.hs = append(s.hs, h)
			s.mu.Unlock()
			s.wg.Add(1)
			go func() { defer s.wg.Done(); serveConn(nc, h) }()
		}
	}()
	t.Cleanup(func() { ln.Close(); s.wg.Wait() })
	return s
}

func serveConn(nc net.Conn, h *echoHandler) {
	defer nc.Close()
	c := NewConn(Config{}, h)
	h.c = c
	in := make([]byte, 0, 1<<17)
	buf := make([]byte, 1<<16)
	for {
		for len(c.Output()) > 0 {
			n, err := nc.Write(c.Output())
			c.Drained(n)
			if err != nil {
				return
			}
		}
		if c.Err() != nil || c.Done() {
			return
		}
		if c.Idle() {
			c.ReleaseBuffers()
		}
		nc.SetReadDeadline(time.Now().Add(10 * time.Second))
		n, err := nc.Read(buf)
		if err != nil {
			return
		}
		in = append(in, buf[:n]...)
		k, _ := c.Feed(in)
		in = in[:copy(in, in[k:])]
	}
}

func h2cClient() *http.Client {
	var p http.Protocols
	p.SetUnencryptedHTTP2(true) // h2c with prior knowledge
	return &http.Client{Transport: &http.Transport{Protocols: &p}, Timeout: 20 * time.Second}
}

// TestGoClient drives a Conn with Go's own HTTP/2 client: a large
// download (our send side against its windows), a large upload echoed
// back (our receive windows, given back only as the echo is sent), and
// concurrent streams on one connection.
func TestGoClient(t *testing.T) {
	s := startServer(t)
	cl := h2cClient()
	base := "http://" + s.addr

	resp, err := cl.Get(base + "/big?n=3000000")
	if err != nil {
		t.Fatal(err)
	}
	body, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || len(body) != 3000000 || resp.Proto != "HTTP/2.0" || resp.ContentLength != 3000000 {
		t.Fatalf("download: %v, %d bytes, %s", err, len(body), resp.Proto)
	}

	up := bytes.Repeat([]byte("upload."), 300000) // 2.1 MB
	resp, err = cl.Post(base+"/echo", "application/octet-stream", bytes.NewReader(up))
	if err != nil {
		t.Fatal(err)
	}
	body, err = io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil || !bytes.Equal(body, up) || resp.Header.Get("X-Method") != "POST" {
		t.Fatalf("echo: %v, %d of %d bytes", err, len(body), len(up))
	}

	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for i := 0; i < 20; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			msg := bytes.Repeat([]byte{byte('a' + i)}, 100000+i)
			resp, err := cl.Post(base+"/echo", "text/plain", bytes.NewReader(msg))
			if err != nil {
				errs <- err
				return
			}
			defer resp.Body.Close()
			b, err := io.ReadAll(resp.Body)
			if err != nil || !bytes.Equal(b, msg) {
				errs <- io.ErrUnexpectedEOF
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	cl.CloseIdleConnections()

	s.mu.Lock()
	defer s.mu.Unlock()
	for _, h := range s.hs {
		if h.maxPending > DefaultInitialWindowSize {
			t.Fatalf("a stream held %d bytes, more than its window", h.maxPending)
		}
	}
}

// TestCurl checks curl's HTTP/2 (nghttp2) with prior knowledge, when
// curl is installed.
func TestCurl(t *testing.T) {
	curl, err := exec.LookPath("curl")
	if err != nil {
		t.Skip("no curl")
	}
	s := startServer(t)
	out, err := exec.Command(curl, "-sS", "--http2-prior-knowledge", "-o", "/dev/null",
		"-w", "%{http_version} %{http_code} %{size_download}",
		"http://"+s.addr+"/big?n=200000").CombinedOutput()
	if err != nil || string(out) != "2 200 200000" {
		t.Fatalf("curl: %v: %q", err, out)
	}
	out, err = exec.Command(curl, "-sS", "--http2-prior-knowledge", "--data-binary", "hello h2",
		"-H", "Cookie: a=1", "-H", "Cookie: b=2", "http://"+s.addr+"/echo").CombinedOutput()
	if err != nil || string(out) != "hello h2" {
		t.Fatalf("curl echo: %v: %q", err, out)
	}
}
