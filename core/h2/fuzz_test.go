package h2

import (
	"bytes"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// fuzzHandler answers every request the way a proxy would: it writes
// the HTTP/1.1 head (checked by checkHTTP1), consumes the body, responds
// and sends some data. It keeps nothing between calls but counters.
type fuzzHandler struct {
	t    *testing.T
	c    *Conn
	head []byte
	n    int
}

func (h *fuzzHandler) Headers(id uint32, r *Request, end bool) {
	h.n++
	h.head = checkHTTP1(h.t, h.head[:0], r, !end)
	if h.n%3 == 0 {
		h.c.Respond(id, 200, []Field{{[]byte("X-A"), []byte("b")}}, false)
		h.c.SendData(id, make([]byte, 70000), h.n%2 == 0)
	}
}

func (h *fuzzHandler) Data(id uint32, p []byte, end bool) {
	h.c.Consumed(id, len(p))
	if end && h.n%2 == 0 {
		h.c.Respond(id, 204, nil, true)
	}
}
func (h *fuzzHandler) Trailers(id uint32, f []hpack.HeaderField) { AppendHTTP1Trailers(nil, f) }
func (h *fuzzHandler) Reset(id uint32, code http2.ErrCode)       {}
func (h *fuzzHandler) WindowOpened(id uint32)                    { h.c.SendData(id, make([]byte, 1000), false) }

// checkHTTP1 writes r as HTTP/1.1 and parses it back with core/http1: a
// request the HTTP/2 side accepted must make exactly the head it stands
// for, one field line per field, the framing it says, nothing more.
func checkHTTP1(t *testing.T, dst []byte, r *Request, body bool) []byte {
	t.Helper()
	dst = append(AppendHTTP1(dst, r, body), "\r\n"...)
	p := &http1.Request{}
	p.Reset()
	p.Limits.MaxHead = 1 << 20
	n, err := p.Parse(dst)
	if err != nil || n != len(dst) {
		t.Fatalf("http1 refuses (%v, %d of %d) the head of an accepted request %+v:\n%q", err, n, len(dst), *r, dst)
	}
	target := r.Path
	if r.IsConnect() {
		target = r.Authority
	}
	if string(p.Method.Bytes(dst)) != r.Method || string(p.Target.Bytes(dst)) != target {
		t.Fatalf("request line %q %q from %+v", p.Method.Bytes(dst), p.Target.Bytes(dst), *r)
	}
	host := r.Authority
	if host == "" {
		host = r.Host
	}
	if !p.HasHost || string(p.Host.Bytes(dst)) != host {
		t.Fatalf("host %q, want %q", p.Host.Bytes(dst), host)
	}
	// count the lines we meant to write
	want := 1 // host
	for _, f := range r.Fields {
		switch f.Name {
		case "host", "cookie", "te", "content-length":
		default:
			want++
		}
	}
	if r.cookies > 0 {
		want++
	}
	switch {
	case r.IsConnect():
		if p.Body != http1.BodyNone {
			t.Fatalf("CONNECT with a body framing %v", p.Body)
		}
	case r.ContentLength >= 0:
		want++
		if p.Body != http1.BodyLength || p.ContentLength != r.ContentLength {
			t.Fatalf("framing %v %d, want length %d", p.Body, p.ContentLength, r.ContentLength)
		}
	case body:
		want++
		if p.Body != http1.BodyChunked {
			t.Fatalf("framing %v, want chunked", p.Body)
		}
	case r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH":
		want++
		if p.Body != http1.BodyLength || p.ContentLength != 0 {
			t.Fatalf("framing %v %d, want length 0", p.Body, p.ContentLength)
		}
	default:
		if p.Body != http1.BodyNone && !(p.Body == http1.BodyLength && p.ContentLength == 0) {
			t.Fatalf("framing %v without a body", p.Body)
		}
	}
	if p.N != want {
		t.Fatalf("%d field lines, want %d: %q", p.N, want, dst)
	}
	return dst
}

// frameSeeds are client byte streams (after the preface) the tests use.
func frameSeeds(t testing.TB) [][]byte {
	var seeds [][]byte
	mk := func(write func(fr *http2.Framer, enc func(kv ...string) []byte)) {
		var b, eb bytes.Buffer
		fr := http2.NewFramer(&b, nil)
		fr.AllowIllegalWrites = true
		e := hpack.NewEncoder(&eb)
		enc := func(kv ...string) []byte {
			eb.Reset()
			for i := 0; i+1 < len(kv); i += 2 {
				e.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
			}
			return append([]byte(nil), eb.Bytes()...)
		}
		fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 100})
		write(fr, enc)
		seeds = append(seeds, b.Bytes())
	}
	mk(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(base...), EndStream: true, EndHeaders: true})
		fr.WriteWindowUpdate(1, 1000)
		fr.WriteWindowUpdate(0, 1000)
		fr.WritePing(false, [8]byte{})
	})
	mk(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(with("content-length", "3", "cookie", "a", "cookie", "b")...), EndHeaders: true})
		fr.WriteData(1, false, []byte("ab"))
		fr.WriteDataPadded(1, true, []byte("c"), []byte{0, 0})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc(with("te", "trailers")...), EndHeaders: true, Priority: http2.PriorityParam{StreamDep: 1, Weight: 3}})
		fr.WriteData(3, false, []byte("xyz"))
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: enc("x-t", "1"), EndStream: true, EndHeaders: true})
		fr.WriteRSTStream(1, http2.ErrCodeCancel)
	})
	mk(func(fr *http2.Framer, enc func(...string) []byte) {
		blk := enc([]string{":method", "CONNECT", ":authority", "a:443", "x", "y"}...)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:2]})
		fr.WriteContinuation(1, false, blk[2:4])
		fr.WriteContinuation(1, true, blk[4:])
		fr.WritePriority(5, http2.PriorityParam{StreamDep: 1})
		fr.WriteSettings(http2.Setting{ID: http2.SettingMaxFrameSize, Val: 20000})
		fr.WriteGoAway(0, http2.ErrCodeNo, nil)
	})
	mk(func(fr *http2.Framer, enc func(...string) []byte) {
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: enc(with("x-big", string(make([]byte, 3000)))...), EndStream: true, EndHeaders: true})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: []byte{0xbe, 0xbe, 0xbe, 0x82, 0x87, 0x84}, EndStream: true, EndHeaders: true})
		fr.WriteRawFrame(0x10, 0, 1, []byte("u=1"))
	})
	return seeds
}

// FuzzFeed feeds a client's bytes (after the preface) to a Conn whose
// Handler answers like a proxy: no panic, the same result whether the
// bytes come at once or in two parts, output and memory bounded, and
// every accepted request converts to a head core/http1 parses back.
func FuzzFeed(f *testing.F) {
	for _, s := range frameSeeds(f) {
		f.Add(s, uint16(7))
	}
	f.Fuzz(func(t *testing.T, data []byte, split uint16) {
		now := time.Unix(1, 0)
		cfg := Config{Settings: Settings{MaxConcurrentStreams: 8, MaxHeaderListSize: 4096}, Now: func() time.Time { return now }}
		run := func(parts ...[]byte) (out []byte, c *Conn, err error) {
			h := &fuzzHandler{t: t}
			c = NewConn(cfg, h)
			h.c = c
			in := []byte(Preface)
			for _, p := range parts {
				in = append(in, p...)
				n, e := c.Feed(in)
				in = in[n:]
				if e != nil {
					err = e
					break
				}
				out = append(out, c.Output()...)
				c.Drained(len(c.Output()))
			}
			out = append(out, c.Output()...)
			c.Drained(len(c.Output()))
			if c.Streams() > 8 {
				t.Fatalf("%d streams", c.Streams())
			}
			if cap(c.blk.buf) > 2*c.maxBlock() {
				t.Fatalf("header block buffer %d", cap(c.blk.buf))
			}
			return out, c, err
		}
		out1, _, err1 := run(data)
		k := int(split) % (len(data) + 1)
		out2, _, err2 := run(data[:k], data[k:])
		if (err1 == nil) != (err2 == nil) || !bytes.Equal(out1, out2) {
			t.Fatalf("split at %d differs: %v vs %v, %d vs %d bytes out", k, err1, err2, len(out1), len(out2))
		}
		// each frame in costs a bounded amount out: the answers (ACKs,
		// RSTs, WINDOW_UPDATEs, one 431 per request) and what the
		// handler sends (at most 70000+ bytes per request it answers)
		frames := len(data)/frameHeaderLen + 2
		if limit := frames * (100 + 71000); len(out1) > limit {
			t.Fatalf("%d bytes out for %d in", len(out1), len(data))
		}
	})
}

// encodeFields reads fuzz input as fields: a byte of name length, the
// name, a byte of value length, the value, until the input ends.
func encodeFields(data []byte) (fields []hpack.HeaderField) {
	for len(data) >= 2 {
		n := int(data[0]) % 40
		data = data[1:]
		if n > len(data) {
			n = len(data)
		}
		name := string(data[:n])
		data = data[n:]
		if len(data) == 0 {
			break
		}
		m := int(data[0]) % 60
		data = data[1:]
		if m > len(data) {
			m = len(data)
		}
		fields = append(fields, hpack.HeaderField{Name: name, Value: string(data[:m])})
		data = data[m:]
	}
	return fields
}

func fieldInput(kv ...string) []byte {
	var b []byte
	for i := 0; i+1 < len(kv); i += 2 {
		b = append(b, byte(len(kv[i])))
		b = append(b, kv[i]...)
		b = append(b, byte(len(kv[i+1])))
		b = append(b, kv[i+1]...)
	}
	return b
}

// FuzzHTTP1 sends any list of fields as a request's HEADERS and, when the
// Conn accepts it, checks the HTTP/1.1 head written from it (checkHTTP1):
// no CR/LF/NUL reaches a line, no field is added, no CL/TE confusion,
// whatever pseudo-header fields and values the client chose.
func FuzzHTTP1(f *testing.F) {
	f.Add(fieldInput(base...), false)
	f.Add(fieldInput(with("content-length", "5", "cookie", "a=b", "cookie", "c")...), true)
	f.Add(fieldInput(with("transfer-encoding", "chunked")...), true)
	f.Add(fieldInput(with("content-length", "1\r\ntransfer-encoding: chunked")...), true)
	f.Add(fieldInput(":method", "GET", ":scheme", "http", ":path", "/ HTTP/1.1\r\nHost: a\r\n\r\nGET /", ":authority", "a"), false)
	f.Add(fieldInput(":method", "CONNECT", ":authority", "a:1", "x", "y"), true)
	f.Add(fieldInput(":method", "POST", ":scheme", "http", ":path", "/", "host", "h", "x", "a\x00b"), false)
	f.Add(fieldInput(":method", "OPTIONS", ":scheme", "http", ":path", "*", "te", "trailers", "host", "[::1]:80"), true)
	f.Fuzz(func(t *testing.T, data []byte, body bool) {
		fields := encodeFields(data)
		var hb, eb bytes.Buffer
		enc := hpack.NewEncoder(&eb)
		for _, hf := range fields {
			enc.WriteField(hf)
		}
		fr := http2.NewFramer(&hb, nil)
		fr.WriteSettings()
		if eb.Len() > 16384 {
			return
		}
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: eb.Bytes(), EndStream: !body, EndHeaders: true})
		h := &fuzzHandler{t: t}
		c := NewConn(Config{}, h)
		h.c = c
		in := append([]byte(Preface), hb.Bytes()...)
		n, err := c.Feed(in)
		if err != nil || n != len(in) {
			t.Fatalf("Feed: %d of %d, %v", n, len(in), err)
		}
		if h.n == 0 {
			// refused: then something in it broke a rule of §8
			return
		}
		// accepted: no value may hold what would split a line
		for _, hf := range fields {
			if bytes.ContainsAny([]byte(hf.Value), "\r\n\x00") || bytes.ContainsAny([]byte(hf.Name), "\r\n\x00 :") && hf.Name[0] != ':' {
				t.Fatalf("accepted a field %q: %q", hf.Name, hf.Value)
			}
		}
	})
}
