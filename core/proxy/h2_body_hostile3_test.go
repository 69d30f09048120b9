package proxy

import "testing"

// TestH2InBodyBoundedWhenNeverDrained: a stream's received body (h2In)
// whose reader always lags (some bytes pending at every read: a client
// that takes a response exactly as fast as its server sends it) holds at
// most about its window, not everything it ever received: the read part
// is reclaimed even when the buffer never empties.
func TestH2InBodyBoundedWhenNeverDrained(t *testing.T) {
	var b h2In
	chunk := make([]byte, 16<<10)
	p := make([]byte, 16<<10)
	b.body = append(b.body, chunk...) // one frame ahead from the start
	for i := 0; i < 4096; i++ {       // 64 MiB through
		b.body = append(b.body, chunk...) // as upConn.Data does
		if n, _ := b.read(p); n != len(p) {
			t.Fatalf("read %d bytes, want %d", n, len(p))
		}
		if b.pending() != len(chunk) {
			t.Fatalf("%d pending, want %d", b.pending(), len(chunk))
		}
	}
	if c := cap(b.body); c > 256<<10 {
		t.Fatalf("the body buffer grew to %d KiB for 16 KiB pending", c>>10)
	}
}
