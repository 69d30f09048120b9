package proxy

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
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
	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// h2cOrigin is an HTTP/2 (h2c, prior knowledge) origin with h2Origin's
// paths, plus /grpcish (a body without length and trailers, as gRPC) and
// /slow (a body that never ends, whose cancellation is reported on
// cancelled). conns counts its connections.
type h2cOrigin struct {
	addr      *net.TCPAddr
	conns     atomic.Int32
	cancelled chan struct{}
	proto     chan string
}

func newH2cOrigin(t *testing.T) *h2cOrigin { return newH2Origin(t, nil) }

// newH2Origin is newH2cOrigin, over TLS with cert (h2 by ALPN) when cert
// is not nil.
func newH2Origin(t *testing.T, cert *testutil.Cert) *h2cOrigin {
	t.Helper()
	o := &h2cOrigin{cancelled: make(chan struct{}, 16), proto: make(chan string, 64)}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case o.proto <- r.Proto + " te=" + r.Header.Get("Te"):
		default:
		}
		if originCommon(w, r) {
			return
		}
		switch r.URL.Path {
		case "/grpcish":
			w.Header().Set("Trailer", "Grpc-Status, Grpc-Message")
			w.Header().Set("Content-Type", "application/grpc")
			w.WriteHeader(200)
			io.WriteString(w, "part1")
			w.(http.Flusher).Flush()
			io.WriteString(w, "part2")
			w.Header().Set("Grpc-Status", "0")
			w.Header().Set("Grpc-Message", "fine")
		case "/slow":
			w.WriteHeader(200)
			io.WriteString(w, "start")
			w.(http.Flusher).Flush()
			select {
			case <-r.Context().Done():
				o.cancelled <- struct{}{}
			case <-time.After(10 * time.Second):
			}
		default:
			w.WriteHeader(404)
		}
	}))
	srv.Config.ConnState = func(_ net.Conn, s http.ConnState) {
		if s == http.StateNew {
			o.conns.Add(1)
		}
	}
	if cert != nil {
		srv.EnableHTTP2 = true
		srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert.TLS()}}
		srv.StartTLS()
	} else {
		var p http.Protocols
		p.SetUnencryptedHTTP2(true)
		srv.Config.Protocols = &p
		srv.Start()
	}
	t.Cleanup(srv.Close)
	o.addr = srv.Listener.Addr().(*net.TCPAddr)
	return o
}

// h2ServerFrontend is an http frontend speaking HTTP/1.1 and HTTP/2 to
// clients, whose servers at addrs speak HTTP/2.
func h2ServerFrontend(t *testing.T, addrs ...*net.TCPAddr) *Frontend {
	fe := httpFrontend(t, func(b *config.Backend) {
		for i := range b.Servers {
			b.Servers[i].Proto = config.ProtoH2
		}
	}, addrs...)
	fe.HTTP.Versions = HTTPVersion1 | HTTPVersion2
	return fe
}

func getBody(t *testing.T, cl *http.Client, url string) (*http.Response, string) {
	t.Helper()
	resp, err := cl.Get(url)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	b, err := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err != nil {
		t.Fatalf("GET %s: body: %v", url, err)
	}
	return resp, string(b)
}

// TestH2ServerRequests: requests of HTTP/1.1 and HTTP/2 clients reach an
// HTTP/2 server over shared connections: small and large bodies, request
// bodies with and without a length (trailers included), a response
// without length ending with trailers (gRPC's shape) reaching an HTTP/2
// client as trailers and an HTTP/1.1 one in its chunked body, te:
// trailers sent, and fifty concurrent streams over few connections.
func TestH2ServerRequests(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newH2cOrigin(t)
	fe := h2ServerFrontend(t, o.addr)
	for _, name := range []string{"h1", "h2"} {
		t.Run(name, func(t *testing.T) {
			var cl *http.Client
			if name == "h2" {
				cl = e.h2Client(fe)
			} else {
				tr := &http.Transport{DialContext: func(context.Context, string, string) (net.Conn, error) {
					return e.dialHTTP(fe), nil
				}}
				t.Cleanup(tr.CloseIdleConnections)
				cl = &http.Client{Transport: tr, Timeout: 10 * time.Second}
			}
			if resp, b := getBody(t, cl, "http://a/small"); resp.StatusCode != 200 || b != "hello" {
				t.Fatalf("small: %d %q", resp.StatusCode, b)
			}
			if got := <-o.proto; got != "HTTP/2.0 te=trailers" {
				t.Errorf("the server saw %q, want HTTP/2.0 with te: trailers", got)
			}
			if _, b := getBody(t, cl, "http://a/big"); len(b) != 1<<20 {
				t.Fatalf("big: %d bytes", len(b))
			}
			pr, pw := io.Pipe()
			req, _ := http.NewRequest("POST", "http://a/echo", pr)
			req.Trailer = http.Header{"X-Check": nil}
			go func() {
				pw.Write(bytes.Repeat([]byte("x"), 100000))
				req.Trailer.Set("X-Check", "yes")
				pw.Close()
			}()
			resp, err := cl.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			// (Go's HTTP/2 server keeps only the request trailers a
			// Trailer field declared, and Trailer is not forwarded: the
			// trailers are not checked here.)
			if len(b) != 100000 || resp.Header.Get("X-Sum") != "100000" {
				t.Fatalf("echo: %d bytes, sum %q", len(b), resp.Header.Get("X-Sum"))
			}
			resp, err = cl.Post("http://a/echo", "text/plain", strings.NewReader("abc"))
			if err != nil {
				t.Fatal(err)
			}
			b, _ = io.ReadAll(resp.Body)
			resp.Body.Close()
			if string(b) != "abc" {
				t.Fatalf("echo with length: %q", b)
			}
			resp, body := getBody(t, cl, "http://a/grpcish")
			if body != "part1part2" || resp.Trailer.Get("Grpc-Status") != "0" || resp.Trailer.Get("Grpc-Message") != "fine" {
				t.Fatalf("trailers: %q %v", body, resp.Trailer)
			}
			var wg sync.WaitGroup
			errs := make(chan string, 50)
			for i := 0; i < 50; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					resp, err := cl.Get("http://a/small")
					if err != nil {
						errs <- err.Error()
						return
					}
					b, _ := io.ReadAll(resp.Body)
					resp.Body.Close()
					if string(b) != "hello" {
						errs <- "body " + string(b)
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
	// One loop, 50 streams at most at once: one or two connections (a
	// second only while the first's SETTINGS were not in), not one per
	// request.
	if n := o.conns.Load(); n > 3 {
		t.Errorf("the server saw %d connections: streams were not multiplexed", n)
	}
}

// TestH2ServerCancelPassesThrough: an HTTP/2 client that resets its
// stream in the middle of a response cancels the server's stream.
func TestH2ServerCancelPassesThrough(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newH2cOrigin(t)
	fe := h2ServerFrontend(t, o.addr)
	cl := e.h2Client(fe)
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", "http://a/slow", nil)
	resp, err := cl.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := io.ReadFull(resp.Body, b); err != nil || string(b) != "start" {
		t.Fatalf("start: %q %v", b, err)
	}
	cancel()
	resp.Body.Close()
	select {
	case <-o.cancelled:
	case <-time.After(5 * time.Second):
		t.Fatal("the server's stream was not cancelled")
	}
}

// refusingOrigin is an HTTP/2 server (scriptedH2Origin) whose first
// connection answers the first request with GOAWAY (last stream 0: not
// processed) and closes; later ones answer 200 "ok" with the request
// body's length. It counts connections and the requests it processed.
func refusingOrigin(t *testing.T) (addr *net.TCPAddr, conns, served *atomic.Int32) {
	t.Helper()
	served = new(atomic.Int32)
	var mu sync.Mutex
	bodies := map[uint32]int{}
	addr, conns = scriptedH2Origin(t, func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, f http2.Frame, n int32) bool {
		var id uint32
		end := false
		switch f := f.(type) {
		case *http2.HeadersFrame:
			id, end = f.StreamID, f.StreamEnded()
			if n == 1 {
				fr.WriteGoAway(0, http2.ErrCodeNo, nil)
				return false
			}
		case *http2.DataFrame:
			id, end = f.StreamID, f.StreamEnded()
			mu.Lock()
			bodies[id] += len(f.Data())
			mu.Unlock()
			if len(f.Data()) > 0 {
				fr.WriteWindowUpdate(0, uint32(len(f.Data())))
			}
		default:
			return true
		}
		if !end {
			return true
		}
		served.Add(1)
		mu.Lock()
		body := bodies[id]
		mu.Unlock()
		hb.Reset()
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "x-body", Value: strconv.Itoa(body)})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: hb.Bytes(), EndHeaders: true})
		fr.WriteData(id, true, []byte("ok"))
		return true
	})
	return addr, conns, served
}

// TestH2ServerGoAwayRetriesUnprocessedStreams: a stream a server's GOAWAY
// says it did not process is sent again on a new connection — a POST
// with its body too (the whole request was still held) — and the client
// never sees the refusal.
func TestH2ServerGoAwayRetriesUnprocessedStreams(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr, conns, served := refusingOrigin(t)
	fe := h2ServerFrontend(t, addr)
	c := e.dialHTTP(fe)
	defer c.Close()
	io.WriteString(c, "POST /x HTTP/1.1\r\nHost: a\r\nContent-Length: 7\r\n\r\npayload")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 100))
	if resp.StatusCode != 200 || string(b) != "ok" || resp.Header.Get("X-Body") != "7" {
		t.Fatalf("got %d %q x-body=%q, want 200 \"ok\" with the 7-byte body", resp.StatusCode, b, resp.Header.Get("X-Body"))
	}
	if conns.Load() != 2 || served.Load() != 1 {
		t.Fatalf("connections %d, served %d: want the refused stream sent again on a second connection", conns.Load(), served.Load())
	}
}

// TestH2ServerThatSpeaksOnlyHTTP1: a server configured as HTTP/2 that
// answers the preface as HTTP/1.1 gives the client a 502 at once, not a
// hang.
func TestH2ServerThatSpeaksOnlyHTTP1(t *testing.T) {
	e := newEnv(t, defaultTuning())
	fe := h2ServerFrontend(t, h2Origin(t))
	c := e.dialHTTP(fe)
	defer c.Close()
	io.WriteString(c, "GET /small HTTP/1.1\r\nHost: a\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 502 && resp.StatusCode != 503 {
		t.Fatalf("status %d, want 502 or 503", resp.StatusCode)
	}
	c.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { st := e.state(); return st.live == 0 && st.bufs == 0 },
		"the connection and its buffers are released")
}

// TestH2ServerOverTLS: a server of proto h2 with tls is reached by ALPN
// h2, trailers and all; one that does not offer h2 by ALPN fails the
// connect (503 after the retries), it is never sent HTTP/1.1 or the
// preface in the clear.
func TestH2ServerOverTLS(t *testing.T) {
	e := newEnv(t, defaultTuning())
	certs := newUpstreamCerts(t)
	o := newH2Origin(t, certs.leaf)
	h2only := func(b *config.Backend) {
		for i := range b.Servers {
			b.Servers[i].Proto = config.ProtoH2
		}
	}
	tl := config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}
	fe := tlsHTTPFrontend(t, tlsBackend(t, tl, h2only, o.addr))
	fe.HTTP.Versions = HTTPVersion1 | HTTPVersion2
	cl := e.h2Client(fe)
	resp, body := getBody(t, cl, "http://a/grpcish")
	if resp.StatusCode != 200 || body != "part1part2" || resp.Trailer.Get("Grpc-Status") != "0" {
		t.Fatalf("over TLS: %d %q %v", resp.StatusCode, body, resp.Trailer)
	}
	if got := <-o.proto; got != "HTTP/2.0 te=trailers" {
		t.Errorf("the server saw %q", got)
	}

	// An https server that speaks HTTP/1.1 only.
	h1 := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) {
		io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nh1")
	})
	fe1 := tlsHTTPFrontend(t, tlsBackend(t, tl, h2only, h1.Addr))
	c := e.dialHTTP(fe1)
	defer c.Close()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	r, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != 503 {
		t.Fatalf("status %d from a server without h2, want 503 (connect failed)", r.StatusCode)
	}
}

// scriptedH2Origin is an HTTP/2 server written with the Framer whose
// behaviour is onFrame's: it is called for each frame (after the
// preface and SETTINGS exchange) with the connection's number from 1,
// and returns false to close the connection.
func scriptedH2Origin(t *testing.T, onFrame func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, f http2.Frame, conn int32) bool) (addr *net.TCPAddr, conns *atomic.Int32) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	conns = new(atomic.Int32)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			n := conns.Add(1)
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(20 * time.Second))
				br := bufio.NewReader(c)
				pre := make([]byte, len(http2.ClientPreface))
				if _, err := io.ReadFull(br, pre); err != nil {
					return
				}
				fr := http2.NewFramer(c, br)
				fr.WriteSettings()
				var hb bytes.Buffer
				enc := hpack.NewEncoder(&hb)
				for {
					f, err := fr.ReadFrame()
					if err != nil {
						return
					}
					if s, ok := f.(*http2.SettingsFrame); ok {
						if !s.IsAck() {
							fr.WriteSettingsAck()
						}
						continue
					}
					if !onFrame(fr, enc, &hb, f, n) {
						return
					}
				}
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr), conns
}

func askStatus(t *testing.T, e *env, fe *Frontend, req string) int {
	t.Helper()
	c := e.dialHTTP(fe)
	defer c.Close()
	io.WriteString(c, req)
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		t.Fatalf("%q: %v", req, err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode
}

// TestH2ServerHostile: servers that refuse every stream, never open their
// window, or break the protocol end the request with an answer in
// bounded time, retries included, and leave nothing behind.
func TestH2ServerHostile(t *testing.T) {
	e := newEnv(t, defaultTuning())
	t.Run("refuses every stream", func(t *testing.T) {
		addr, conns := scriptedH2Origin(t, func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, f http2.Frame, _ int32) bool {
			if h, ok := f.(*http2.HeadersFrame); ok {
				fr.WriteRSTStream(h.StreamID, http2.ErrCodeRefusedStream)
			}
			return true
		})
		fe := h2ServerFrontend(t, addr)
		if st := askStatus(t, e, fe, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); st != 502 {
			t.Fatalf("status %d, want 502 once the retries are spent", st)
		}
		if n := conns.Load(); n > int32(fe.Backend.B.Retries)+1 {
			t.Fatalf("%d connections for one request with %d retries", n, fe.Backend.B.Retries)
		}
	})
	t.Run("goes away at once", func(t *testing.T) {
		addr, _ := scriptedH2Origin(t, func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, f http2.Frame, _ int32) bool {
			fr.WriteGoAway(0, http2.ErrCodeNo, nil)
			return false
		})
		fe := h2ServerFrontend(t, addr)
		if st := askStatus(t, e, fe, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); st != 502 && st != 503 {
			t.Fatalf("status %d, want 502 or 503", st)
		}
	})
	t.Run("never opens its window", func(t *testing.T) {
		addr, _ := scriptedH2Origin(t, func(*http2.Framer, *hpack.Encoder, *bytes.Buffer, http2.Frame, int32) bool { return true })
		fe := h2ServerFrontend(t, addr)
		fe.Backend.B.ServerTimeout = 300 * time.Millisecond
		body := strings.Repeat("x", 200000) // past the 64 KiB window
		c := e.dialHTTP(fe)
		defer c.Close()
		go io.WriteString(c, "POST / HTTP/1.1\r\nHost: a\r\nContent-Length: 200000\r\n\r\n"+body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 504 {
			t.Fatalf("status %d, want 504 (server_ms)", resp.StatusCode)
		}
	})
	t.Run("data past the window", func(t *testing.T) {
		// The proxy gives window back as it relays (Consumed), so data
		// past the first 64 KiB is legal while the client reads. Here the
		// client reads nothing until the server has written 4 MiB, and
		// both socket buffers between them are small and fixed (loopback's
		// autotuning took all 4 MiB otherwise): the proxy can relay (and
		// give back) about 100 KiB at most, so the server overruns what it
		// was granted, whatever the timing.
		sent := make(chan struct{})
		addr, _ := scriptedH2Origin(t, func(fr *http2.Framer, enc *hpack.Encoder, hb *bytes.Buffer, f http2.Frame, _ int32) bool {
			h, ok := f.(*http2.HeadersFrame)
			if !ok {
				return true
			}
			defer close(sent)
			hb.Reset()
			enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
			fr.WriteHeaders(http2.HeadersFrameParam{StreamID: h.StreamID, BlockFragment: hb.Bytes(), EndHeaders: true})
			chunk := make([]byte, 16384)
			for i := 0; i < 256; i++ { // 4 MiB on a 64 KiB stream window
				if fr.WriteData(h.StreamID, false, chunk) != nil {
					break // the proxy cut the connection
				}
			}
			return true
		})
		fe := h2ServerFrontend(t, addr)
		c := e.connect(func(fd int) {
			if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_SNDBUF, 4096); err != nil {
				t.Error(err)
			}
			e.w.StartHTTP(fd, fe, nil)
		})
		defer c.Close()
		if err := c.SetReadBuffer(4096); err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		select {
		case <-sent:
		case <-time.After(10 * time.Second):
			t.Fatal("the server could not write its 4 MiB in 10 s")
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err == nil {
			_, err = io.Copy(io.Discard, resp.Body) // the head came; the body is cut
			resp.Body.Close()
		}
		if err == nil {
			t.Fatal("a response whose server broke flow control was relayed whole")
		}
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("the response was neither cut nor ended: %v", err)
		}
	})
	c := e.dialHTTP(h2ServerFrontend(t, newH2cOrigin(t).addr))
	c.Close()
	var st state
	for end := time.Now().Add(5 * time.Second); ; time.Sleep(10 * time.Millisecond) {
		if st = e.state(); st.live == 0 && st.bufs == 0 {
			break
		}
		if time.Now().After(end) {
			var idle, up int
			var d string // what the live connections are at, for the failure's reader
			e.do(func() {
				idle, up = e.w.h.nidle, len(e.w.h.up)
				for c := e.w.h.live.Front(); c != nil; c = c.link.Next() {
					d += fmt.Sprintf(" [conn phase %d, %d requests", c.phase, c.nreq)
					if s := c.st; s != nil {
						d += fmt.Sprintf(", stream phase %d, response body %d bytes out", s.phase, s.respBody.bytes)
					}
					d += "]"
				}
			})
			t.Fatalf("connections and buffers not released in 5 s: %+v, idle server conns %d, h2 server lists %d, live:%s", st, idle, up, d)
		}
	}
}

// TestH2ServerResetPassesToHTTP2Clients: a server that resets a stream
// before any response head (grpc-go's CANCEL when its deadline fires)
// resets the HTTP/2 client's stream with the same code; an HTTP/1.1
// client gets a 502.
func TestH2ServerResetPassesToHTTP2Clients(t *testing.T) {
	e := newEnv(t, defaultTuning())
	addr, _ := scriptedH2Origin(t, func(fr *http2.Framer, _ *hpack.Encoder, _ *bytes.Buffer, f http2.Frame, _ int32) bool {
		if h, ok := f.(*http2.HeadersFrame); ok {
			fr.WriteRSTStream(h.StreamID, http2.ErrCodeCancel)
		}
		return true
	})
	fe := h2ServerFrontend(t, addr)
	_, err := e.h2Client(fe).Get("http://a/x")
	var se http2.StreamError
	if !errors.As(err, &se) || se.Code != http2.ErrCodeCancel {
		t.Fatalf("HTTP/2 client: %v, want the stream reset with CANCEL", err)
	}
	if st := askStatus(t, e, fe, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); st != 502 {
		t.Fatalf("HTTP/1.1 client: %d, want 502", st)
	}
}
