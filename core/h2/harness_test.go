package h2

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// recorder is a Handler that writes down what it is told.
type recorder struct {
	events []string
	reqs   map[uint32]*Request // copies
	body   map[uint32][]byte
	trail  map[uint32][]hpack.HeaderField
	resets map[uint32]http2.ErrCode
	opened []uint32

	onHeaders func(id uint32, r *Request, end bool)
	onData    func(id uint32, p []byte, end bool)
	onWindow  func(id uint32)
}

func newRecorder() *recorder {
	return &recorder{
		reqs:   map[uint32]*Request{},
		body:   map[uint32][]byte{},
		trail:  map[uint32][]hpack.HeaderField{},
		resets: map[uint32]http2.ErrCode{},
	}
}

func (r *recorder) Headers(id uint32, req *Request, end bool) {
	cp := *req
	cp.Fields = append([]hpack.HeaderField(nil), req.Fields...)
	r.reqs[id] = &cp
	r.events = append(r.events, fmt.Sprintf("headers %d %s %s end=%v", id, req.Method, req.Path, end))
	if r.onHeaders != nil {
		r.onHeaders(id, req, end)
	}
}

func (r *recorder) Data(id uint32, p []byte, end bool) {
	r.body[id] = append(r.body[id], p...)
	r.events = append(r.events, fmt.Sprintf("data %d %d end=%v", id, len(p), end))
	if r.onData != nil {
		r.onData(id, p, end)
	}
}

func (r *recorder) Trailers(id uint32, f []hpack.HeaderField) {
	r.trail[id] = append([]hpack.HeaderField(nil), f...)
	r.events = append(r.events, fmt.Sprintf("trailers %d %d", id, len(f)))
}

func (r *recorder) Reset(id uint32, code http2.ErrCode) {
	r.resets[id] = code
	r.events = append(r.events, fmt.Sprintf("reset %d %v", id, code))
}

func (r *recorder) WindowOpened(id uint32) {
	r.opened = append(r.opened, id)
	r.events = append(r.events, fmt.Sprintf("window %d", id))
	if r.onWindow != nil {
		r.onWindow(id)
	}
}

// client is the test's HTTP/2 client: a real x/net Framer and HPACK
// encoder writing into in, fed to the Conn; the Conn's output read back
// by another Framer (with a decoder for our header blocks).
type client struct {
	t    *testing.T
	c    *Conn
	h    *recorder
	now  time.Time
	in   bytes.Buffer // client → server, not yet fed
	fr   *http2.Framer
	enc  *hpack.Encoder
	eb   bytes.Buffer
	out  bytes.Buffer // server → client, not yet read
	rfr  *http2.Framer
	err  error
	step int // feed in pieces of this size (0: all at once)
}

func newConnClient(t *testing.T, cfg Config) *client {
	t.Helper()
	cl := &client{t: t, h: newRecorder(), now: time.Unix(1_000_000, 0)}
	if cfg.Now == nil {
		cfg.Now = func() time.Time { return cl.now }
	}
	cl.c = NewConn(cfg, cl.h)
	cl.fr = http2.NewFramer(&cl.in, nil)
	cl.fr.AllowIllegalWrites = true
	cl.enc = hpack.NewEncoder(&cl.eb)
	cl.rfr = http2.NewFramer(nil, &cl.out)
	cl.rfr.ReadMetaHeaders = hpack.NewDecoder(65536, nil)
	cl.rfr.MaxHeaderListSize = 1 << 20
	return cl
}

// newClient does the handshake: preface and SETTINGS, the server's
// SETTINGS and ACK read, our ACK of its SETTINGS sent.
func newClient(t *testing.T, cfg Config, settings ...http2.Setting) *client {
	t.Helper()
	cl := newConnClient(t, cfg)
	cl.in.WriteString(Preface)
	cl.fr.WriteSettings(settings...)
	cl.feed()
	if f := cl.next(); f == nil || f.Header().Type != http2.FrameSettings {
		t.Fatalf("first frame %v, want SETTINGS", f)
	}
	if cl.c.cfg.Limits.ConnWindowSize > rfcInitialWindow {
		if f := cl.next(); f == nil || f.Header().Type != http2.FrameWindowUpdate {
			t.Fatalf("want connection WINDOW_UPDATE, got %v", f)
		}
	}
	if f := cl.next(); f == nil || f.Header().Type != http2.FrameSettings || !f.(*http2.SettingsFrame).IsAck() {
		t.Fatalf("want SETTINGS ACK, got %v", f)
	}
	cl.fr.WriteSettingsAck()
	cl.feed()
	return cl
}

// feed gives the Conn everything written so far, in pieces of cl.step
// bytes when set, keeping the unconsumed tail as a loop would.
func (cl *client) feed() error {
	cl.t.Helper()
	data := cl.in.Bytes()
	var pending []byte
	for len(data) > 0 || len(pending) > 0 {
		k := len(data)
		if cl.step > 0 {
			k = min(k, cl.step)
		}
		pending = append(pending, data[:k]...)
		data = data[k:]
		n, err := cl.c.Feed(pending)
		pending = pending[n:]
		if err != nil {
			cl.err = err
			break
		}
		if k == 0 {
			break
		}
	}
	cl.in.Reset()
	cl.drain()
	return cl.err
}

func (cl *client) drain() {
	o := cl.c.Output()
	cl.out.Write(o)
	cl.c.Drained(len(o))
}

// next reads the next server frame, nil when there is none.
func (cl *client) next() http2.Frame {
	cl.t.Helper()
	cl.drain()
	if cl.out.Len() == 0 {
		return nil
	}
	f, err := cl.rfr.ReadFrame()
	if err != nil {
		cl.t.Fatalf("reading server frames: %v", err)
	}
	return f
}

// frames reads every server frame left, summarised.
func (cl *client) frames() []string {
	cl.t.Helper()
	var s []string
	for f := cl.next(); f != nil; f = cl.next() {
		s = append(s, summary(f))
	}
	return s
}

func summary(f http2.Frame) string {
	h := f.Header()
	switch f := f.(type) {
	case *http2.MetaHeadersFrame:
		var b strings.Builder
		fmt.Fprintf(&b, "HEADERS %d", h.StreamID)
		if f.StreamEnded() {
			b.WriteString(" END_STREAM")
		}
		for _, hf := range f.Fields {
			fmt.Fprintf(&b, " %s=%s", hf.Name, hf.Value)
		}
		return b.String()
	case *http2.DataFrame:
		end := ""
		if f.StreamEnded() {
			end = " END_STREAM"
		}
		return fmt.Sprintf("DATA %d %d%s", h.StreamID, len(f.Data()), end)
	case *http2.RSTStreamFrame:
		return fmt.Sprintf("RST_STREAM %d %v", h.StreamID, f.ErrCode)
	case *http2.GoAwayFrame:
		return fmt.Sprintf("GOAWAY %d %v", f.LastStreamID, f.ErrCode)
	case *http2.WindowUpdateFrame:
		return fmt.Sprintf("WINDOW_UPDATE %d %d", h.StreamID, f.Increment)
	case *http2.SettingsFrame:
		if f.IsAck() {
			return "SETTINGS ACK"
		}
		return "SETTINGS"
	case *http2.PingFrame:
		if f.IsAck() {
			return "PING ACK"
		}
		return "PING"
	}
	return h.Type.String()
}

// block HPACK-encodes fields given as name, value pairs.
func (cl *client) block(kv ...string) []byte {
	cl.eb.Reset()
	for i := 0; i+1 < len(kv); i += 2 {
		cl.enc.WriteField(hpack.HeaderField{Name: kv[i], Value: kv[i+1]})
	}
	return append([]byte(nil), cl.eb.Bytes()...)
}

func (cl *client) headers(id uint32, end bool, kv ...string) {
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: cl.block(kv...), EndStream: end, EndHeaders: true})
}

// get sends a GET on id with END_STREAM.
func (cl *client) get(id uint32, path string) {
	cl.headers(id, true, ":method", "GET", ":scheme", "https", ":path", path, ":authority", "example.com")
}

func (cl *client) post(id uint32, path string, extra ...string) {
	kv := append([]string{":method", "POST", ":scheme", "https", ":path", path, ":authority", "example.com"}, extra...)
	cl.headers(id, false, kv...)
}

func wantFrames(t *testing.T, got []string, want ...string) {
	t.Helper()
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("frames:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
}

func wantConnError(t *testing.T, cl *client, code http2.ErrCode) {
	t.Helper()
	var e *Error
	if !errors.As(cl.err, &e) || e.Code != code {
		t.Fatalf("Feed error %v, want connection error %v", cl.err, code)
	}
	fs := cl.frames()
	if len(fs) == 0 || !strings.HasPrefix(fs[len(fs)-1], "GOAWAY ") || !strings.HasSuffix(fs[len(fs)-1], " "+code.String()) {
		t.Fatalf("last frames %q, want GOAWAY %v", fs, code)
	}
	if !cl.c.Done() {
		t.Fatal("Done false after a connection error")
	}
}

var _ io.Writer = (*bytes.Buffer)(nil)
