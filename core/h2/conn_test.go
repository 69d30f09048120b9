package h2

import (
	"bytes"
	"strings"
	"testing"

	"golang.org/x/net/http2"

	"github.com/spliced-proxy/spliced/core/http1"
)

func TestServerSettingsFirst(t *testing.T) {
	cl := newConnClient(t, Config{Settings: Settings{MaxConcurrentStreams: 7, InitialWindowSize: 1 << 20, MaxFrameSize: 32768}})
	f := cl.next()
	sf, ok := f.(*http2.SettingsFrame)
	if !ok || sf.IsAck() {
		t.Fatalf("first output frame %v, want SETTINGS", f)
	}
	want := map[http2.SettingID]uint32{
		http2.SettingMaxConcurrentStreams: 7,
		http2.SettingInitialWindowSize:    1 << 20,
		http2.SettingMaxFrameSize:         32768,
		http2.SettingMaxHeaderListSize:    DefaultMaxHeaderListSize,
	}
	for id, v := range want {
		if got, ok := sf.Value(id); !ok || got != v {
			t.Errorf("%v = %d, %v; want %d", id, got, ok, v)
		}
	}
	if f := cl.next(); summary(f) != "WINDOW_UPDATE 0 983041" {
		t.Fatalf("second frame %s, want the connection window raised to 1 MiB", summary(f))
	}
}

func TestHandshake(t *testing.T) {
	for _, step := range []int{0, 1, 7} {
		cl := newConnClient(t, Config{})
		cl.step = step
		cl.in.WriteString(Preface)
		cl.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1000})
		cl.fr.WritePing(false, [8]byte{1, 2, 3})
		if err := cl.feed(); err != nil {
			t.Fatal(err)
		}
		wantFrames(t, cl.frames(), "SETTINGS", "WINDOW_UPDATE 0 983041", "SETTINGS ACK", "PING ACK")
		if cl.c.peerInitialWindow != 1000 {
			t.Fatalf("peer initial window %d", cl.c.peerInitialWindow)
		}
	}
}

func TestBadPreface(t *testing.T) {
	for _, in := range []string{"GET / HTTP/1.1\r\n", "PRI * HTTP/2.0\r\n\r\nXX"} {
		cl := newConnClient(t, Config{})
		cl.in.WriteString(in)
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeProtocol)
	}
}

func TestFirstFrameMustBeSettings(t *testing.T) {
	cl := newConnClient(t, Config{})
	cl.in.WriteString(Preface)
	cl.fr.WritePing(false, [8]byte{})
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeProtocol)
}

func TestPartialFrameLeftUnconsumed(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	b := append([]byte(nil), cl.in.Bytes()...)
	cl.in.Reset()
	for i := 0; i < len(b); i++ {
		n, err := cl.c.Feed(b[:i])
		if n != 0 || err != nil {
			t.Fatalf("Feed(%d of %d bytes) = %d, %v; want 0, nil", i, len(b), n, err)
		}
	}
	if n, err := cl.c.Feed(b); n != len(b) || err != nil {
		t.Fatalf("Feed(all) = %d, %v", n, err)
	}
	if len(cl.h.events) != 1 || cl.h.events[0] != "headers 1 GET / end=true" {
		t.Fatalf("events %q", cl.h.events)
	}
}

func TestGetRequest(t *testing.T) {
	cl := newClient(t, Config{})
	cl.step = 5
	cl.headers(1, true, ":method", "GET", ":scheme", "https", ":path", "/a?b=c", ":authority", "example.com:8443",
		"user-agent", "t", "cookie", "a=1", "accept", "*/*", "cookie", "b=2")
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	r := cl.h.reqs[1]
	if r == nil || r.Method != "GET" || r.Scheme != "https" || r.Path != "/a?b=c" || r.Authority != "example.com:8443" ||
		r.ContentLength != -1 || len(r.Fields) != 4 || r.cookies != 2 {
		t.Fatalf("request %+v", r)
	}
	if cl.c.Streams() != 1 {
		t.Fatalf("streams %d", cl.c.Streams())
	}
	if err := cl.c.Respond(1, 200, []Field{{[]byte("Content-Type"), []byte("text/plain")}, {[]byte("Connection"), []byte("close")}}, false); err != nil {
		t.Fatal(err)
	}
	if n := cl.c.SendData(1, []byte("hello"), true); n != 5 {
		t.Fatalf("SendData took %d", n)
	}
	wantFrames(t, cl.frames(), "HEADERS 1 :status=200 content-type=text/plain", "DATA 1 5 END_STREAM")
	if cl.c.Streams() != 0 || !cl.c.Idle() {
		t.Fatalf("stream not closed after END_STREAM both ways: %d streams", cl.c.Streams())
	}
	if err := cl.c.Respond(1, 200, nil, true); err != ErrStreamClosed {
		t.Fatalf("Respond on a closed stream: %v", err)
	}
}

func TestPostBodyAndTrailers(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/up", "content-length", "10")
	cl.fr.WriteData(1, false, []byte("01234"))
	cl.fr.WriteDataPadded(1, false, []byte("567"), make([]byte, 20))
	cl.fr.WriteData(1, false, []byte("89"))
	cl.headers(1, true, "x-checksum", "abc")
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	want := []string{"headers 1 POST /up end=false", "data 1 5 end=false", "data 1 3 end=false", "data 1 2 end=false", "trailers 1 1"}
	if strings.Join(cl.h.events, ";") != strings.Join(want, ";") {
		t.Fatalf("events %q", cl.h.events)
	}
	if string(cl.h.body[1]) != "0123456789" || cl.h.reqs[1].ContentLength != 10 {
		t.Fatalf("body %q", cl.h.body[1])
	}
	// The padding went back to the connection's account at once, the
	// data only when consumed.
	if cl.c.recvCredit != 21 {
		t.Fatalf("credit owed %d, want the 21 padding bytes", cl.c.recvCredit)
	}
	cl.c.Consumed(1, 10)
	if cl.c.recvCredit != 31 {
		t.Fatalf("credit owed %d", cl.c.recvCredit)
	}
	cl.c.Respond(1, 204, nil, true)
	wantFrames(t, cl.frames(), "HEADERS 1 END_STREAM :status=204")
}

func TestContentLengthMismatch(t *testing.T) {
	for name, send := range map[string]func(cl *client){
		"shorter": func(cl *client) { cl.fr.WriteData(1, true, []byte("abc")) },
		"longer":  func(cl *client) { cl.fr.WriteData(1, false, []byte("abcdef")) },
		"trailers early": func(cl *client) {
			cl.fr.WriteData(1, false, []byte("ab"))
			cl.headers(1, true, "x", "y")
		},
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.post(1, "/", "content-length", "5")
			send(cl)
			if err := cl.feed(); err != nil {
				t.Fatal(err)
			}
			fs := cl.frames()
			if len(fs) == 0 || fs[len(fs)-1] != "RST_STREAM 1 PROTOCOL_ERROR" {
				t.Fatalf("frames %q", fs)
			}
			if cl.h.resets[1] != http2.ErrCodeProtocol {
				t.Fatalf("handler not told: %q", cl.h.events)
			}
		})
	}
}

func TestResponseHeadersSplitAtPeerMaxFrameSize(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.feed()
	big := bytes.Repeat([]byte("x"), 40000)
	if err := cl.c.Respond(1, 200, []Field{{[]byte("x-big"), big}}, true); err != nil {
		t.Fatal(err)
	}
	// read raw frames: HEADERS then CONTINUATIONs, each at most 16384
	cl.drain()
	raw := cl.out.Bytes()
	var types []http2.FrameType
	for len(raw) > 0 {
		n := int(raw[0])<<16 | int(raw[1])<<8 | int(raw[2])
		if n > 16384 {
			t.Fatalf("frame of %d bytes", n)
		}
		types = append(types, http2.FrameType(raw[3]))
		raw = raw[9+n:]
	}
	if len(types) < 3 || types[0] != http2.FrameHeaders || types[1] != http2.FrameContinuation {
		t.Fatalf("frame types %v", types)
	}
	f := cl.next().(*http2.MetaHeadersFrame)
	if f.PseudoValue("status") != "200" || len(f.RegularFields()) != 1 || len(f.RegularFields()[0].Value) != 40000 || !f.StreamEnded() {
		t.Fatalf("decoded %v", f)
	}
}

func TestInformationalThenFinal(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/", "expect", "100-continue")
	cl.feed()
	if err := cl.c.Respond(1, 100, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Respond(1, 101, nil, false); err != ErrResponseState {
		t.Fatalf("101: %v", err)
	}
	if n := cl.c.SendData(1, []byte("x"), false); n != 0 {
		t.Fatal("DATA before the final head")
	}
	if err := cl.c.Respond(1, 200, nil, false); err != nil {
		t.Fatal(err)
	}
	if err := cl.c.Respond(1, 200, nil, false); err != ErrResponseState {
		t.Fatalf("second final head: %v", err)
	}
	cl.c.SendData(1, []byte("ok"), false)
	if err := cl.c.SendTrailers(1, []Field{{[]byte("grpc-status"), []byte("0")}}); err != nil {
		t.Fatal(err)
	}
	// the request body never ended: stopped once the response did
	wantFrames(t, cl.frames(), "HEADERS 1 :status=100", "HEADERS 1 :status=200", "DATA 1 2", "HEADERS 1 END_STREAM grpc-status=0", "RST_STREAM 1 NO_ERROR")
}

func TestReceiveFlowControl(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/")
	chunk := make([]byte, 16384)
	for i := 0; i < 3; i++ {
		cl.fr.WriteData(1, false, chunk)
	}
	cl.fr.WriteData(1, false, chunk[:16383]) // the whole 65535 window
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	if fs := cl.frames(); len(fs) != 0 {
		t.Fatalf("window given back before Consumed: %q", fs)
	}
	cl.c.Consumed(1, 20000)
	wantFrames(t, cl.frames(), "WINDOW_UPDATE 1 20000")
	// the client may now send 20000 more on the stream, not one byte past
	cl.fr.WriteData(1, false, make([]byte, 16384))
	cl.fr.WriteData(1, false, make([]byte, 3617))
	cl.feed()
	wantFrames(t, cl.frames(), "RST_STREAM 1 FLOW_CONTROL_ERROR")
	if cl.h.resets[1] != http2.ErrCodeFlowControl {
		t.Fatalf("events %q", cl.h.events)
	}
	// the stream's unconsumed bytes went back to the connection
	if cl.c.recvWindow+cl.c.recvCredit != int64(DefaultConnWindowSize) {
		t.Fatalf("connection window %d + owed %d, want it all back", cl.c.recvWindow, cl.c.recvCredit)
	}
}

func TestConnectionWindowExceeded(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{InitialWindowSize: 1 << 20}, Limits: Limits{ConnWindowSize: 65535}})
	for id := uint32(1); id <= 5; id += 2 {
		cl.post(id, "/")
	}
	big := make([]byte, 16384)
	for i := 0; i < 4; i++ {
		cl.fr.WriteData(uint32(1+2*(i%3)), false, big)
	}
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeFlowControl)
}

func TestSendFlowControl(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.get(3, "/")
	cl.feed()
	cl.c.Respond(1, 200, nil, false)
	cl.c.Respond(3, 200, nil, false)
	body := make([]byte, 100000)
	if n := cl.c.SendData(1, body, true); n != 65535 {
		t.Fatalf("took %d, want the 65535 window", n)
	}
	if n := cl.c.SendData(3, body, true); n != 0 {
		t.Fatalf("took %d with the connection window spent", n)
	}
	if cl.c.SendStalledSince(1) != cl.now || cl.c.ConnStalledSince() != cl.now {
		t.Fatal("stall times not set")
	}
	fs := cl.frames()
	if len(fs) != 6 || fs[5] != "DATA 1 16383" {
		t.Fatalf("frames %q", fs)
	}
	// stream window opens, connection window still 0: nothing yet
	cl.fr.WriteWindowUpdate(1, 1000)
	cl.feed()
	if len(cl.h.opened) != 0 {
		t.Fatalf("WindowOpened with a closed connection window: %v", cl.h.opened)
	}
	cl.fr.WriteWindowUpdate(0, 500)
	cl.feed()
	if len(cl.h.opened) != 2 {
		t.Fatalf("opened %v, want streams 1 and 3 (both blocked, both with a stream window)", cl.h.opened)
	}
	if n := cl.c.SendData(1, body[65535:], true); n != 500 {
		t.Fatalf("took %d, want the 500 of the connection window", n)
	}
	// SETTINGS_INITIAL_WINDOW_SIZE lowers every stream window (§6.9.2)
	cl.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	cl.fr.WriteWindowUpdate(0, 100000)
	cl.feed()
	if n := cl.c.SendData(3, body, true); n != 0 {
		t.Fatalf("took %d with a window of 0", n)
	}
	if cl.c.ConnStalledSince() != (cl.c.ConnStalledSince()) || !cl.c.SendStalledSince(3).Equal(cl.now) {
		t.Fatal("stream 3 not stalled")
	}
}

func TestSendDataSplitsAtPeerMaxFrameSize(t *testing.T) {
	cl := newClient(t, Config{}, http2.Setting{ID: http2.SettingMaxFrameSize, Val: 20000}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 20})
	cl.fr.WriteWindowUpdate(0, 1<<20)
	cl.get(1, "/")
	cl.feed()
	cl.c.Respond(1, 200, nil, false)
	if n := cl.c.SendData(1, make([]byte, 50000), true); n != 50000 {
		t.Fatalf("took %d", n)
	}
	wantFrames(t, cl.frames(), "HEADERS 1 :status=200", "DATA 1 20000", "DATA 1 20000", "DATA 1 10000 END_STREAM")
}

func TestGoAwayGraceful(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.get(3, "/")
	cl.feed()
	cl.c.GoAway()
	cl.get(5, "/") // past the GOAWAY: ignored
	cl.feed()
	wantFrames(t, cl.frames(), "GOAWAY 3 NO_ERROR")
	if _, ok := cl.h.reqs[5]; ok || cl.c.Done() {
		t.Fatalf("stream 5 served or Done with 2 streams open: %q", cl.h.events)
	}
	cl.c.Respond(1, 200, nil, true)
	cl.c.Respond(3, 200, nil, true)
	if !cl.c.Done() {
		t.Fatal("not Done once the streams finished")
	}
}

func TestClientResetStream(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/")
	cl.fr.WriteData(1, false, []byte("abc"))
	cl.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	cl.feed()
	if cl.h.resets[1] != http2.ErrCodeCancel || cl.c.Streams() != 0 {
		t.Fatalf("events %q", cl.h.events)
	}
	if n := cl.c.SendData(1, []byte("x"), true); n != 0 {
		t.Fatal("SendData on a reset stream")
	}
	if cl.c.recvCredit != 3 {
		t.Fatalf("the reset stream's 3 bytes not given back: %d", cl.c.recvCredit)
	}
	// frames on it now: RST_STREAM STREAM_CLOSED
	cl.fr.WriteData(1, false, []byte("x"))
	cl.feed()
	wantFrames(t, cl.frames(), "RST_STREAM 1 STREAM_CLOSED")
}

func TestServerResetThenLateFramesIgnored(t *testing.T) {
	cl := newClient(t, Config{})
	cl.post(1, "/")
	cl.feed()
	cl.c.ResetStream(1, http2.ErrCodeInternal)
	cl.fr.WriteData(1, false, []byte("late"))
	cl.headers(1, true, "x", "y")
	cl.fr.WriteWindowUpdate(1, 10)
	cl.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	wantFrames(t, cl.frames(), "RST_STREAM 1 INTERNAL_ERROR")
	if _, told := cl.h.resets[1]; told {
		t.Fatal("Reset called for a reset the caller asked for")
	}
}

func TestReleaseBuffersWhenIdle(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.feed()
	cl.c.ReleaseBuffers() // not idle: no-op
	if cl.c.fr == nil {
		t.Fatal("released with a stream open")
	}
	cl.c.Respond(1, 200, nil, true)
	cl.frames()
	if !cl.c.Idle() {
		t.Fatal("not idle")
	}
	cl.c.ReleaseBuffers()
	if cl.c.out != nil || cl.c.fr != nil || cl.c.blk.buf != nil || cl.c.streams != nil || cl.c.free != nil {
		t.Fatal("an idle Conn still holds buffers")
	}
	// and it works again afterwards, with the HPACK table it kept
	cl.fr.WritePing(false, [8]byte{})
	cl.get(3, "/again")
	cl.feed()
	cl.c.Respond(3, 200, nil, true)
	wantFrames(t, cl.frames(), "PING ACK", "HEADERS 3 END_STREAM :status=200")
}

func TestRespondHTTP1DropsHopByHop(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.feed()
	buf := []byte("HTTP/1.1 200 OK\r\nContent-Type: text/html\r\nConnection: x-hop, keep-alive\r\nX-Hop: 1\r\nKeep-Alive: timeout=5\r\nTransfer-Encoding: chunked\r\nSet-Cookie: a=1\r\nSet-Cookie: b=2\r\n\r\n")
	r := &http1.Response{}
	r.Reset()
	if n, err := r.Parse(buf, http1.MethodGET); err != nil || n != len(buf) {
		t.Fatalf("parse: %d %v", n, err)
	}
	if err := cl.c.RespondHTTP1(1, r, buf, false); err != nil {
		t.Fatal(err)
	}
	cl.c.SendData(1, nil, true)
	wantFrames(t, cl.frames(), "HEADERS 1 :status=200 content-type=text/html set-cookie=a=1 set-cookie=b=2", "DATA 1 0 END_STREAM")
}

func TestCounts(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{MaxConcurrentStreams: 2, MaxHeaderListSize: 300}})
	cl.get(1, "/")                                               // opened, then closed by our response
	cl.post(3, "/")                                              // opened, then reset by the client
	cl.post(5, "/")                                              // refused: 2 streams open
	cl.fr.WriteRSTStream(3, http2.ErrCodeCancel)                 // closed
	cl.headers(7, true, with("x", "1\x00")...)                   // malformed: RST_STREAM
	cl.headers(9, true, with("x", string(make([]byte, 280)))...) // 431
	cl.feed()
	cl.c.Respond(1, 200, nil, true)
	got := cl.c.Counts()
	want := Counts{StreamsOpened: 2, StreamsClosed: 2, StreamsRefused: 2, ResetsSent: 2, ResetsReceived: 1}
	if got != want {
		t.Fatalf("counts %+v, want %+v", got, want)
	}
}

func TestEarlyResponseStopsRequestBody(t *testing.T) {
	// the server answered before the upload ended (a 413, a redirect):
	// RST_STREAM NO_ERROR stops the body (RFC 9113 §8.1), what the
	// Handler had not consumed and what is still in flight go back to
	// the connection, and the Handler hears nothing more of the stream
	cl := newClient(t, Config{})
	cl.post(1, "/up")
	cl.fr.WriteData(1, false, make([]byte, 1000))
	cl.feed()
	if err := cl.c.Respond(1, 413, nil, true); err != nil {
		t.Fatal(err)
	}
	wantFrames(t, cl.frames(), "HEADERS 1 END_STREAM :status=413", "RST_STREAM 1 NO_ERROR")
	cl.fr.WriteData(1, true, make([]byte, 500))
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	if fs := cl.frames(); len(fs) != 0 || len(cl.h.events) != 2 || cl.c.Streams() != 0 {
		t.Fatalf("frames %q, events %q", fs, cl.h.events)
	}
	if cl.c.recvCredit != 1500 {
		t.Fatalf("connection credit %d, want the 1500 bytes back", cl.c.recvCredit)
	}
}

func TestMaxFrameLen(t *testing.T) {
	cl := newClient(t, Config{})
	if n := cl.c.MaxFrameLen(); n != 16393 {
		t.Fatalf("MaxFrameLen %d", n)
	}
	// a full-size DATA frame fits exactly
	cl.post(1, "/")
	cl.fr.WriteData(1, false, make([]byte, 16384))
	cl.feed()
	if len(cl.h.body[1]) != 16384 {
		t.Fatalf("body %d", len(cl.h.body[1]))
	}
}
