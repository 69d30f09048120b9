package h2

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// TestClientDataPathAllocs: response DATA (fed, delivered, consumed,
// its WINDOW_UPDATEs queued and drained) and request DATA (SendData)
// allocate nothing once the buffers have grown; so does a request head
// from an HTTP/1.1 head (RequestHTTP1) on a reused stream.
func TestClientDataPathAllocs(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	id := s.open()
	s.headers(id, false, ":status", "200")
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	s.buf.Reset()
	s.fr.WriteData(id, false, make([]byte, 16384))
	frame := append([]byte(nil), s.buf.Bytes()...)
	s.buf.Reset()
	feed := func() {
		if n, err := s.c.Feed(frame); err != nil || n != len(frame) {
			t.Fatalf("feed: %d %v", n, err)
		}
		s.c.Drained(len(s.c.Output()))
	}
	feed()
	if a := ownAllocs(1000, feed); a != 0 {
		t.Errorf("response DATA: %v allocations per frame", a)
	}

	up, _ := s.c.OpenStream("POST", "x", "/", nil, false)
	s.c.Drained(len(s.c.Output()))
	p := make([]byte, 1000)
	send := func() {
		if s.c.SendData(up, p, false) != len(p) {
			// give the windows back as a server would
			st := s.c.stream(up)
			st.sendWindow += 1 << 20
			s.c.sendWindow += 1 << 20
		}
		s.c.Drained(len(s.c.Output()))
	}
	send()
	if a := ownAllocs(1000, send); a != 0 {
		t.Errorf("request DATA: %v allocations per SendData", a)
	}

	r, buf := parseHTTP1Req(t, "GET /a?b=c HTTP/1.1\r\nHost: example.com\r\nAccept: */*\r\nUser-Agent: test\r\nTE: trailers\r\n\r\n")
	req := func() {
		id, err := s.c.RequestHTTP1(r, buf, true)
		if err != nil {
			t.Fatal(err)
		}
		s.c.ResetStream(id, http2.ErrCodeCancel)
		s.c.Drained(len(s.c.Output()))
	}
	req()
	if a := ownAllocs(100, req); a != 0 {
		t.Errorf("RequestHTTP1: %v allocations per request", a)
	}
}

// TestIdleClientConnMemory: what an idle pooled ClientConn holds after
// ReleaseBuffers, once a response filled the HPACK table a little.
func TestIdleClientConnMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 1000 connections")
	}
	per := int64(1 << 62)
	for try := 0; try < 3 && per > 4<<10; try++ {
		per = min(per, idleClientBytes(t))
	}
	t.Logf("idle ClientConn: %d bytes each (the struct alone: %d)", per, unsafe.Sizeof(ClientConn{}))
	if per > 4<<10 {
		t.Fatalf("an idle ClientConn holds %d bytes", per)
	}
}

func idleClientBytes(t *testing.T) int64 {
	const n = 1000
	conns := make([]*ClientConn, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range conns {
		s := newFakeServer(t, ClientConfig{})
		id := s.open()
		s.headers(id, false, ":status", "200", "content-type", "application/grpc", "server", "test")
		s.fr.WriteData(id, false, make([]byte, 10000))
		// the trailers in the same buffer as the 10 KB of DATA: the
		// HPACK decoder must not keep it alive (ReleaseBuffers)
		s.headers(id, true, "grpc-status", "0")
		if err := s.feed(); err != nil {
			t.Fatal(err)
		}
		s.c.Drained(len(s.c.Output()))
		if !s.c.Idle() {
			t.Fatal("not idle")
		}
		s.c.ReleaseBuffers()
		s.c.h = nil
		s.c.cfg.Now = time.Now
		conns[i] = s.c
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(conns)
	return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
}

// benchHandler consumes what it is given and keeps nothing.
type benchHandler struct{ c *ClientConn }

func (h benchHandler) Response(uint32, int, []hpack.HeaderField, bool) {}
func (h benchHandler) Data(id uint32, p []byte, end bool)              { h.c.Consumed(id, len(p)) }
func (h benchHandler) Trailers(uint32, []hpack.HeaderField)            {}
func (h benchHandler) Reset(uint32, http2.ErrCode)                     {}
func (h benchHandler) GoAway(uint32, http2.ErrCode)                    {}
func (h benchHandler) WindowOpened(uint32)                             {}

// BenchmarkClientData: response DATA frames of 16 KiB through Feed, Data
// and Consumed (WINDOW_UPDATEs queued and drained).
func BenchmarkClientData(b *testing.B) {
	s := newFakeServer(b, ClientConfig{})
	s.c.h = benchHandler{s.c}
	id := s.open()
	s.headers(id, false, ":status", "200")
	if err := s.feed(); err != nil {
		b.Fatal(err)
	}
	s.buf.Reset()
	s.fr.WriteData(id, false, make([]byte, 16384))
	frame := append([]byte(nil), s.buf.Bytes()...)
	b.SetBytes(16384)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := s.c.Feed(frame); err != nil {
			b.Fatal(err)
		}
		s.c.Drained(len(s.c.Output()))
	}
}

// BenchmarkClientRequest: a request head from HTTP/1.1 (RequestHTTP1)
// and its response head decoded (fields indexed in the server's table,
// as a server's encoder does after the first response).
func BenchmarkClientRequest(b *testing.B) {
	s := newFakeServer(b, ClientConfig{})
	s.c.h = benchHandler{s.c}
	r := &http1.Request{}
	buf := []byte("GET /api/items?id=1 HTTP/1.1\r\nHost: example.com\r\nAccept: application/json\r\nUser-Agent: bench\r\n\r\n")
	if _, err := r.Parse(buf); err != nil {
		b.Fatal(err)
	}
	fields := []string{":status", "200", "content-type", "application/json", "server", "bench"}
	first, err := s.c.RequestHTTP1(r, buf, true)
	if err != nil {
		b.Fatal(err)
	}
	s.headers(first, true, fields...) // fills both tables
	if err := s.feed(); err != nil {
		b.Fatal(err)
	}
	block := s.block(fields...) // indexed now
	frame := make([]byte, frameHeaderLen+len(block))
	copy(frame[frameHeaderLen:], block)
	b.ReportAllocs()
	for b.Loop() {
		id, err := s.c.RequestHTTP1(r, buf, true)
		if err != nil {
			b.Fatal(err)
		}
		frame[0], frame[1], frame[2] = 0, 0, byte(len(block))
		frame[3] = byte(http2.FrameHeaders)
		frame[4] = byte(http2.FlagHeadersEndHeaders | http2.FlagHeadersEndStream)
		frame[5], frame[6], frame[7], frame[8] = byte(id>>24), byte(id>>16), byte(id>>8), byte(id)
		if _, err := s.c.Feed(frame); err != nil {
			b.Fatal(err)
		}
		s.c.Drained(len(s.c.Output()))
	}
}
