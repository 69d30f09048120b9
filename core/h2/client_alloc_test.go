package h2

import (
	"runtime"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/net/http2"
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
		if err := s.feed(); err != nil {
			t.Fatal(err)
		}
		// The HPACK decoder keeps a slice of the last header block's
		// input buffer (x/net's Decoder.buf): the trailers come in a
		// buffer of their own, as a loop's small read would, so that
		// what is measured is the ClientConn, not the fake server's
		// buffer. A loop's input buffer is pinned the same way.
		s.headers(id, true, "grpc-status", "0")
		tr := append([]byte(nil), s.buf.Bytes()...)
		s.buf.Reset()
		if n, err := s.c.Feed(tr); err != nil || n != len(tr) {
			t.Fatal(n, err)
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
