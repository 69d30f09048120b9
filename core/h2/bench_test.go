package h2

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// nopHandler consumes bodies as they come, as a proxy that forwards at
// once would, and answers each request head with 200 and a small body.
type nopHandler struct {
	c       *Conn
	respond bool
	body    []byte
	fields  []Field
	head    []byte
}

func (h *nopHandler) Headers(id uint32, r *Request, end bool) {
	h.head = AppendHTTP1(h.head[:0], r, !end)
	if h.respond {
		h.c.Respond(id, 200, h.fields, false)
		h.c.SendData(id, h.body, true)
	}
}
func (h *nopHandler) Data(id uint32, p []byte, end bool)   { h.c.Consumed(id, len(p)) }
func (h *nopHandler) Trailers(uint32, []hpack.HeaderField) {}
func (h *nopHandler) Reset(uint32, http2.ErrCode)          {}
func (h *nopHandler) WindowOpened(uint32)                  {}

func handshake(tb testing.TB, h *nopHandler, cfg Config) *Conn {
	c := NewConn(cfg, h)
	h.c = c
	var b bytes.Buffer
	b.WriteString(Preface)
	fr := http2.NewFramer(&b, nil)
	fr.WriteSettings()
	fr.WriteSettingsAck()
	if n, err := c.Feed(b.Bytes()); err != nil || n != b.Len() {
		tb.Fatal(n, err)
	}
	c.Drained(len(c.Output()))
	return c
}

// TestDataPathAllocs pins the body path at zero allocations: DATA frames
// in, Data, Consumed with its WINDOW_UPDATEs, and DATA frames out.
func TestDataPathAllocs(t *testing.T) {
	h := &nopHandler{}
	c := handshake(t, h, Config{Now: func() time.Time { return time.Time{} }})
	var b bytes.Buffer
	fr := http2.NewFramer(&b, nil)
	var eb bytes.Buffer
	e := hpack.NewEncoder(&eb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/"}, {":authority", "a"}} {
		e.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: eb.Bytes(), EndHeaders: true})
	fr.WriteWindowUpdate(0, 1<<30)
	fr.WriteWindowUpdate(1, 1<<30)
	c.Feed(b.Bytes())
	c.Respond(1, 200, nil, false)
	c.Drained(len(c.Output()))
	b.Reset()
	fr.WriteData(1, false, make([]byte, 16384))
	fr.WriteWindowUpdate(1, 16384)
	fr.WriteWindowUpdate(0, 16384)
	frames := append([]byte(nil), b.Bytes()...)
	body := make([]byte, 16384)
	allocs := ownAllocs(1000, func() {
		if n, err := c.Feed(frames); err != nil || n != len(frames) {
			t.Fatal(n, err)
		}
		c.SendData(1, body, false)
		c.Drained(len(c.Output()))
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per DATA in, DATA out", allocs)
	}
}

func BenchmarkDataIn(b *testing.B) {
	h := &nopHandler{}
	c := handshake(b, h, Config{})
	var buf bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	var eb bytes.Buffer
	e := hpack.NewEncoder(&eb)
	for _, kv := range [][2]string{{":method", "POST"}, {":scheme", "https"}, {":path", "/"}, {":authority", "a"}} {
		e.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: eb.Bytes(), EndHeaders: true})
	c.Feed(buf.Bytes())
	buf.Reset()
	fr.WriteData(1, false, make([]byte, 16384))
	frame := append([]byte(nil), buf.Bytes()...)
	b.SetBytes(int64(len(frame)))
	b.ReportAllocs()
	for b.Loop() {
		c.Feed(frame)
		c.Drained(len(c.Output()))
	}
}

// BenchmarkRequest is one GET with browser-like fields in, 200 with a
// small body out, over one connection (the HPACK table warm).
func BenchmarkRequest(b *testing.B) {
	h := &nopHandler{respond: true, body: make([]byte, 100),
		fields: []Field{{[]byte("Content-Type"), []byte("text/plain")}, {[]byte("Content-Length"), []byte("100")}}}
	c := handshake(b, h, Config{Settings: Settings{MaxConcurrentStreams: 1 << 30}})
	var buf, eb bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	e := hpack.NewEncoder(&eb)
	kv := []string{":method", "GET", ":scheme", "https", ":path", "/index.html", ":authority", "example.com",
		"user-agent", "Mozilla/5.0 (X11; Linux x86_64) Gecko/20100101 Firefox/120.0",
		"accept", "text/html,application/xhtml+xml", "accept-language", "en-US,en;q=0.5",
		"accept-encoding", "gzip, deflate, br", "cookie", "session=abcdef0123456789"}
	id := uint32(1)
	b.ReportAllocs()
	for b.Loop() {
		buf.Reset()
		eb.Reset()
		for i := 0; i < len(kv); i += 2 {
			e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: eb.Bytes(), EndStream: true, EndHeaders: true})
		fr.WriteWindowUpdate(0, 100)
		id += 2
		if _, err := c.Feed(buf.Bytes()); err != nil {
			b.Fatal(err)
		}
		c.Drained(len(c.Output()))
	}
	if c.Streams() != 0 {
		b.Fatalf("%d streams left open", c.Streams())
	}
}

// TestRequestAllocs pins a request with an indexed (warm HPACK table)
// head, its 200 and a small body at zero allocations.
func TestRequestAllocs(t *testing.T) {
	h := &nopHandler{respond: true, body: make([]byte, 100),
		fields: []Field{{[]byte("Content-Type"), []byte("text/plain")}}}
	c := handshake(t, h, Config{Now: func() time.Time { return time.Time{} }})
	var buf, eb bytes.Buffer
	fr := http2.NewFramer(&buf, nil)
	e := hpack.NewEncoder(&eb)
	kv := []string{":method", "GET", ":scheme", "https", ":path", "/", ":authority", "example.com", "accept", "*/*"}
	id := uint32(1)
	allocs := ownAllocs(1000, func() {
		buf.Reset()
		eb.Reset()
		for i := 0; i < len(kv); i += 2 {
			e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: eb.Bytes(), EndStream: true, EndHeaders: true})
		fr.WriteWindowUpdate(0, 100)
		id += 2
		if _, err := c.Feed(buf.Bytes()); err != nil {
			t.Fatal(err)
		}
		c.Drained(len(c.Output()))
	})
	if allocs != 0 {
		t.Fatalf("%.1f allocations per request", allocs)
	}
}

// ownAllocs is testing.AllocsPerRun, the least of three tries: it counts
// every goroutine's allocations, and the interop tests' clients (grpc-go
// closes its connections asynchronously) may still be winding down.
func ownAllocs(runs int, f func()) float64 {
	least := testing.AllocsPerRun(runs, f)
	for i := 0; i < 2 && least > 0; i++ {
		least = min(least, testing.AllocsPerRun(runs, f))
	}
	return least
}
