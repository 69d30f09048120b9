package h2

import (
	"testing"

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
