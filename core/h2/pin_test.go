package h2

import (
	"runtime"
	"testing"
	"weak"
)

// TestReleaseBuffersUnpinsInput: an idle Conn keeps nothing of the
// caller's input buffer once ReleaseBuffers ran (x/net's HPACK decoder
// keeps a slice of the last block it read, which lies in that buffer), so
// a loop's big buffer, given back, is freed.
func TestReleaseBuffersUnpinsInput(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	buf := make([]byte, 1<<20)
	n := copy(buf, cl.in.Bytes())
	cl.in.Reset()
	if k, err := cl.c.Feed(buf[:n]); err != nil || k != n {
		t.Fatal(k, err)
	}
	if err := cl.c.Respond(1, 204, nil, true); err != nil {
		t.Fatal(err)
	}
	cl.drain()
	if !cl.c.Idle() {
		t.Fatal("not idle")
	}
	cl.c.ReleaseBuffers()
	wp := weak.Make(&buf[0])
	buf = nil
	runtime.GC()
	runtime.GC()
	if wp.Value() != nil {
		t.Fatal("the idle Conn still holds the caller's input buffer")
	}
	// and the next request decodes with the dynamic table intact
	cl.get(3, "/again")
	if err := cl.feed(); err != nil || cl.h.reqs[3] == nil || cl.h.reqs[3].Path != "/again" {
		t.Fatalf("%v %q", err, cl.h.events)
	}
}

// TestClientReleaseBuffersUnpinsInput: the same for the ClientConn.
func TestClientReleaseBuffersUnpinsInput(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	id := s.open()
	s.headers(id, true, ":status", "204")
	buf := make([]byte, 1<<20)
	n := copy(buf, s.buf.Bytes())
	s.buf.Reset()
	if k, err := s.c.Feed(buf[:n]); err != nil || k != n {
		t.Fatal(k, err)
	}
	s.c.Drained(len(s.c.Output()))
	if !s.c.Idle() {
		t.Fatal("not idle")
	}
	s.c.ReleaseBuffers()
	wp := weak.Make(&buf[0])
	buf = nil
	runtime.GC()
	runtime.GC()
	if wp.Value() != nil {
		t.Fatal("the idle ClientConn still holds the caller's input buffer")
	}
}
