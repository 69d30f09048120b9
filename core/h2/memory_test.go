package h2

import (
	"runtime"
	"testing"
	"time"
	"unsafe"
)

// TestIdleConnMemory measures what an idle Conn holds after
// ReleaseBuffers: the Conn, its HPACK decoder (with the fields a browser-
// like request left in the dynamic table) and encoder, and no buffer.
func TestIdleConnMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("allocates 1000 connections")
	}
	// the least of three tries: the heap counts every goroutine's
	// allocations, and the interop tests' clients may still be winding down
	per := int64(1 << 62)
	for try := 0; try < 3 && per > 4<<10; try++ {
		per = min(per, idleConnBytes(t))
	}
	t.Logf("idle Conn: %d bytes each (the Conn struct alone: %d)", per, unsafe.Sizeof(Conn{}))
	if per > 4<<10 {
		t.Fatalf("an idle Conn holds %d bytes", per)
	}
}

func idleConnBytes(t *testing.T) int64 {
	const n = 1000
	conns := make([]*Conn, n)
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	for i := range conns {
		cl := newClient(t, Config{})
		cl.headers(1, true, ":method", "GET", ":scheme", "https", ":path", "/index.html", ":authority", "example.com",
			"user-agent", "Mozilla/5.0 (X11; Linux x86_64; rv:120.0) Gecko/20100101 Firefox/120.0",
			"accept", "text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8",
			"accept-language", "en-US,en;q=0.5", "accept-encoding", "gzip, deflate, br")
		cl.feed()
		cl.c.Respond(1, 200, []Field{{[]byte("content-type"), []byte("text/html")}}, false)
		cl.c.SendData(1, make([]byte, 10000), true)
		cl.drain()
		if !cl.c.Idle() {
			t.Fatal("not idle")
		}
		cl.c.ReleaseBuffers()
		// the test's recorder and clock (which holds the client) are
		// not the Conn's to count
		cl.c.h = nil
		cl.c.cfg.Now = time.Now
		conns[i] = cl.c
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	runtime.KeepAlive(conns)
	return (int64(after.HeapAlloc) - int64(before.HeapAlloc)) / n
}
