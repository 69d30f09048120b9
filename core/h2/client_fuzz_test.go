package h2

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// clientFuzzHandler does what the proxy's server-side transport will:
// each response head written as HTTP/1.1 and parsed back by core/http1,
// each DATA chunked and consumed, trailers written as the last chunk,
// request bodies offered again when the window opens.
type clientFuzzHandler struct {
	t    *testing.T
	c    *ClientConn
	buf  []byte
	resp http1.Response
}

func (h *clientFuzzHandler) Response(id uint32, status int, f []hpack.HeaderField, end bool) {
	var chunked bool
	h.buf, chunked = AppendHTTP1Response(h.buf[:0], status, f, !end)
	h.resp.Reset()
	h.resp.Limits.MaxHead = 1 << 20
	n, err := h.resp.Parse(h.buf, http1.MethodGET)
	if err != nil || n != len(h.buf) || h.resp.Status != status || h.resp.N != len(f)+btoi(status >= 200 && status != 204 && status != 304 && !hasName(f, "content-length")) {
		h.t.Fatalf("http1 refuses (%v, %d of %d, %d fields) the head of an accepted response:\n%q", err, n, len(h.buf), h.resp.N, h.buf)
	}
	if chunked != (h.resp.Body == http1.BodyChunked) {
		h.t.Fatalf("chunked %v, parsed %v", chunked, h.resp.Body)
	}
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

func hasName(f []hpack.HeaderField, name string) bool {
	for i := range f {
		if f[i].Name == name {
			return true
		}
	}
	return false
}

func (h *clientFuzzHandler) Data(id uint32, p []byte, end bool) {
	h.buf = AppendChunk(h.buf[:0], p)
	h.c.Consumed(id, len(p))
}

func (h *clientFuzzHandler) Trailers(id uint32, f []hpack.HeaderField) {
	h.buf = AppendHTTP1Trailers(h.buf[:0], f)
	var ch http1.Chunked
	if n, _, err := ch.Decode(h.buf); err != nil || n != len(h.buf) || !ch.Done() {
		h.t.Fatalf("trailers do not decode (%v, %d of %d): %q", err, n, len(h.buf), h.buf)
	}
}

func (h *clientFuzzHandler) Reset(id uint32, code http2.ErrCode)    {}
func (h *clientFuzzHandler) GoAway(last uint32, code http2.ErrCode) {}
func (h *clientFuzzHandler) WindowOpened(id uint32)                 { h.c.SendData(id, make([]byte, 1000), false) }

// clientFuzzConn opens the streams the fuzz inputs answer: 1 a GET, 3 a
// POST with a body larger than the window, 5 a HEAD.
func clientFuzzConn(t *testing.T) *ClientConn {
	h := &clientFuzzHandler{t: t}
	c := NewClientConn(ClientConfig{}, h)
	h.c = c
	c.OpenStream("GET", "example.com", "/", nil, true)
	id, _ := c.OpenStream("POST", "example.com", "/up", []Field{{[]byte("Content-Type"), []byte("text/plain")}}, false)
	c.SendData(id, make([]byte, 70000), true)
	c.OpenStream("HEAD", "example.com", "/", nil, true)
	return c
}

// clientSeeds are server conversations for the streams of
// clientFuzzConn.
func clientSeeds() map[string][]byte {
	seeds := map[string][]byte{}
	mk := func(name string, f func(fr *http2.Framer, enc func(...string) []byte)) {
		var buf, hb bytes.Buffer
		fr := http2.NewFramer(&buf, nil)
		fr.AllowIllegalWrites = true
		e := hpack.NewEncoder(&hb)
		enc := func(kv ...string) []byte {
			hb.Reset()
			for i := 0; i+1 < len(kv); i += 2 {
				e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return append([]byte(nil), hb.Bytes()...)
		}
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 10},
			http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
		f(fr, enc)
		seeds[name] = buf.Bytes()
	}
	mk("responses", func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteSettingsAck()
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200", "content-type", "text/html", "content-length", "5"), EndHeaders: true})
		fr.WriteData(1, true, []byte("hello"))
		fr.WriteWindowUpdate(0, 100000)
		fr.WriteWindowUpdate(3, 100000)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(":status", "100"), EndHeaders: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(":status", "201", "location", "/x"), EndHeaders: true})
		fr.WriteDataPadded(3, false, []byte("ok"), make([]byte, 5))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc("grpc-status", "0", "grpc-message", "fine"), EndHeaders: true, EndStream: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 5, BlockFragment: enc(":status", "200", "content-length", "1000"), EndHeaders: true, EndStream: true})
		fr.WritePing(false, [8]byte{1})
		fr.WriteGoAway(5, http2.ErrCodeNo, nil)
	})
	mk("continuation", func(fr *http2.Framer, enc func(...string) []byte) {
		b := enc(":status", "404", "x-long", string(bytes.Repeat([]byte("a"), 300)), "x-b", "c")
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: b[:100]})
		fr.WriteContinuation(1, false, b[100:200])
		fr.WriteContinuation(1, true, b[200:])
		fr.WriteData(1, false, []byte("not found"))
		fr.WriteData(1, true, nil)
		fr.WriteRSTStream(3, http2.ErrCodeRefusedStream)
	})
	mk("malformed", func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "200", "connection", "close"), EndHeaders: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(":status", "200", "content-length", "3"), EndHeaders: true})
		fr.WriteData(3, true, []byte("abcd"))
		fr.WriteData(1, true, []byte("late"))
		fr.WritePushPromise(http2.PushPromiseParam{StreamID: 5, PromiseID: 2, BlockFragment: enc(":method", "GET"), EndHeaders: true})
	})
	mk("goaway", func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteGoAway(1, http2.ErrCodeEnhanceYourCalm, []byte("bye"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(":status", "503"), EndHeaders: true, EndStream: true})
	})
	return seeds
}

// FuzzClientFeed: any bytes from a server, fed in two pieces, never
// panic, never give the handler a response head that does not make a
// valid HTTP/1.1 head, and after an error Feed returns it again.
func FuzzClientFeed(f *testing.F) {
	for _, s := range clientSeeds() {
		f.Add(s, uint16(len(s)/2))
	}
	f.Fuzz(func(t *testing.T, p []byte, split uint16) {
		c := clientFuzzConn(t)
		k := min(int(split), len(p))
		in := append([]byte(nil), p[:k]...)
		n, err := c.Feed(in)
		if err == nil {
			in = append(in[n:], p[k:]...)
			n, err = c.Feed(in)
		}
		if err != nil {
			if _, err2 := c.Feed(in[n:]); err2 == nil {
				t.Fatal("Feed after an error succeeded")
			}
			return
		}
		if c.sendWindow > maxWindow || c.recvWindow < 0 {
			t.Fatalf("windows: send %d recv %d", c.sendWindow, c.recvWindow)
		}
		for _, st := range c.streams {
			if st.recvWindow < 0 || st.sendWindow > maxWindow {
				t.Fatalf("stream %d windows: recv %d send %d", st.id, st.recvWindow, st.sendWindow)
			}
		}
	})
}

// TestWriteClientCorpus writes the seeds as the committed corpus of
// FuzzClientFeed (SPLICED_WRITE_CORPUS=1).
func TestWriteClientCorpus(t *testing.T) {
	if os.Getenv("SPLICED_WRITE_CORPUS") == "" {
		t.Skip("SPLICED_WRITE_CORPUS not set")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzClientFeed")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, s := range clientSeeds() {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\nuint16(%d)\n", s, len(s)/2)
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
