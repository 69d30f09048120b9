package h2

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// fakeServer writes server frames with x/net's Framer and HPACK encoder
// for a ClientConn to Feed, and reads the ClientConn's output back.
type fakeServer struct {
	t   testing.TB
	c   *ClientConn
	rec *clientRec
	buf bytes.Buffer
	fr  *http2.Framer
	hb  bytes.Buffer
	enc *hpack.Encoder
}

func newFakeServer(t testing.TB, cfg ClientConfig) *fakeServer {
	s := &fakeServer{t: t, rec: newClientRec()}
	s.c = NewClientConn(cfg, s.rec)
	s.rec.c = s.c
	s.fr = http2.NewFramer(&s.buf, nil)
	s.fr.AllowIllegalWrites = true
	s.enc = hpack.NewEncoder(&s.hb)
	s.fr.WriteSettings(http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: 100})
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	return s
}

// feed gives the ClientConn what was written, frame by frame as a
// socket might, and returns its error.
func (s *fakeServer) feed() error {
	p := s.buf.Bytes()
	n, err := s.c.Feed(p)
	s.buf.Next(n)
	if err == nil && s.buf.Len() > 0 && s.buf.Len() >= frameHeaderLen {
		s.t.Logf("%d bytes left unfed", s.buf.Len())
	}
	return err
}

func (s *fakeServer) block(fields ...string) []byte {
	s.hb.Reset()
	for i := 0; i+1 < len(fields); i += 2 {
		s.enc.WriteField(hpack.HeaderField{Name: fields[i], Value: fields[i+1]})
	}
	return append([]byte(nil), s.hb.Bytes()...)
}

func (s *fakeServer) headers(id uint32, end bool, fields ...string) {
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.block(fields...), EndHeaders: true, EndStream: end})
}

// open opens a GET stream.
func (s *fakeServer) open() uint32 {
	id, err := s.c.OpenStream("GET", "example.com", "/", nil, true)
	if err != nil {
		s.t.Fatal(err)
	}
	return id
}

// sent lists the frames the ClientConn queued, as "TYPE id code".
func (s *fakeServer) sent() string {
	fr := http2.NewFramer(nil, bytes.NewReader(bytes.TrimPrefix(s.c.Output(), []byte(Preface))))
	var out []string
	for {
		f, err := fr.ReadFrame()
		if err != nil {
			break
		}
		switch f := f.(type) {
		case *http2.RSTStreamFrame:
			out = append(out, "RST_STREAM "+f.ErrCode.String())
		case *http2.GoAwayFrame:
			out = append(out, "GOAWAY "+f.ErrCode.String())
		default:
			out = append(out, f.Header().Type.String())
		}
	}
	return strings.Join(out, ",")
}

func wantCode(t *testing.T, err error, code http2.ErrCode) {
	t.Helper()
	var e *Error
	if !errors.As(err, &e) || e.Code != code {
		t.Fatalf("error %v, want %v", err, code)
	}
}

// TestClientMalformedResponses: each response that breaks RFC 9113 §8
// resets its stream with PROTOCOL_ERROR; the Handler hears Reset, never
// Response, and the connection stays up.
func TestClientMalformedResponses(t *testing.T) {
	for _, tc := range []struct {
		name string
		do   func(s *fakeServer, id uint32)
	}{
		{"no status", func(s *fakeServer, id uint32) { s.headers(id, true, "x-a", "1") }},
		{"short status", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "20") }},
		{"two statuses", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", ":status", "204") }},
		{"request pseudo", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", ":path", "/") }},
		{"pseudo after regular", func(s *fakeServer, id uint32) { s.headers(id, true, "x-a", "1", ":status", "200") }},
		{"connection field", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", "connection", "close") }},
		{"transfer-encoding", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", "transfer-encoding", "chunked") }},
		{"uppercase name", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", "X-A", "1") }},
		{"CR in value", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "200", "x-a", "1\r\nx-b: 2") }},
		{"101", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "101") }},
		{"1xx with END_STREAM", func(s *fakeServer, id uint32) { s.headers(id, true, ":status", "103") }},
		{"two content-lengths", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200", "content-length", "1", "content-length", "1")
		}},
		{"content-length longer than DATA", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200", "content-length", "5")
			s.fr.WriteData(id, true, []byte("abc"))
		}},
		{"content-length shorter than DATA", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200", "content-length", "2")
			s.fr.WriteData(id, false, []byte("abc"))
		}},
		{"content-length and END_STREAM on HEADERS", func(s *fakeServer, id uint32) {
			s.headers(id, true, ":status", "200", "content-length", "2")
		}},
		{"DATA before the head", func(s *fakeServer, id uint32) { s.fr.WriteData(id, true, []byte("abc")) }},
		// §8.1.1: a response with no content has no DATA bytes; forwarded,
		// they would read as the next response on an HTTP/1.1 client
		{"DATA on a 304", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "304")
			s.fr.WriteData(id, true, []byte("HTTP/1.1 200 OK\r\n"))
		}},
		{"DATA on a 204", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "204", "content-length", "0")
			s.fr.WriteData(id, true, []byte("abc"))
		}},
		{"DATA on a HEAD response", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200", "content-length", "3")
			s.fr.WriteData(id, true, []byte("abc"))
		}},
		{"DATA after a 1xx", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "100")
			s.fr.WriteData(id, true, []byte("abc"))
		}},
		{"trailers without END_STREAM", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200")
			s.headers(id, false, "grpc-status", "0")
		}},
		{"pseudo in trailers", func(s *fakeServer, id uint32) {
			s.headers(id, false, ":status", "200")
			s.headers(id, true, ":status", "200")
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, ClientConfig{})
			var id uint32
			if strings.HasSuffix(tc.name, "HEAD response") {
				id, _ = s.c.OpenStream("HEAD", "example.com", "/", nil, true)
			} else {
				id = s.open()
			}
			s.c.Drained(len(s.c.Output()))
			tc.do(s, id)
			if err := s.feed(); err != nil {
				t.Fatal(err)
			}
			r := s.rec.s[id]
			if r == nil || !r.reset || r.code != http2.ErrCodeProtocol {
				t.Fatalf("stream: %+v", r)
			}
			for _, h := range r.heads {
				if h >= 200 && !strings.Contains(tc.name, "DATA") && !strings.Contains(tc.name, "trailers") {
					t.Fatalf("final response delivered: %v", r.heads)
				}
			}
			if got := s.sent(); !strings.Contains(got, "RST_STREAM PROTOCOL_ERROR") {
				t.Fatalf("sent %s", got)
			}
			if s.c.Err() != nil || s.c.Streams() != 0 {
				t.Fatalf("conn: %v, %d streams", s.c.Err(), s.c.Streams())
			}
		})
	}
}

// TestClientValidResponses: what §8 allows passes: a HEAD response's
// content-length without DATA, a 304's, a 1xx then the final head,
// trailers, padding.
func TestClientValidResponses(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	head, _ := s.c.OpenStream("HEAD", "example.com", "/", nil, true)
	s.headers(head, true, ":status", "200", "content-length", "1000")
	get := s.open()
	s.headers(get, false, ":status", "100")
	s.headers(get, false, ":status", "200", "content-length", "3")
	s.fr.WriteDataPadded(get, false, []byte("ab"), make([]byte, 10))
	s.fr.WriteData(get, false, []byte("c"))
	s.headers(get, true, "grpc-status", "0")
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if r := s.rec.s[head]; r.reset || !r.ended || r.heads[0] != 200 {
		t.Fatalf("head: %+v", r)
	}
	if r := s.rec.s[get]; r.reset || string(r.body) != "abc" || len(r.heads) != 2 || field(r.trail, "grpc-status") != "0" {
		t.Fatalf("get: %+v", r)
	}
	if s.c.Streams() != 0 {
		t.Fatal("streams left")
	}
}

// TestClientContinuationFlood: a header block that never ends
// (CVE-2024-27316) is a connection error at MaxContinuations frames.
func TestClientContinuationFlood(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	id := s.open()
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: s.block(":status", "200")})
	for i := 0; i < 1000; i++ {
		s.fr.WriteContinuation(id, false, []byte{0x40, 1, 'a', 1, 'b'}[:1])
	}
	wantCode(t, s.feed(), http2.ErrCodeEnhanceYourCalm)
	if !strings.Contains(s.sent(), "GOAWAY ENHANCE_YOUR_CALM") {
		t.Fatalf("sent %s", s.sent())
	}
}

// TestClientHPACKBomb: a field put in the dynamic table once and
// referenced by one byte thousands of times: the decoded list passes
// MaxHeaderListSize and the stream is reset without keeping the fields.
func TestClientHPACKBomb(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	id := s.open()
	big := strings.Repeat("v", 3000)
	fields := []string{":status", "200"}
	for i := 0; i < 2000; i++ {
		fields = append(fields, "x-bomb", big)
	}
	blk := s.block(fields...)
	if len(blk) > 16384 {
		t.Fatalf("block %d bytes", len(blk))
	}
	s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: blk, EndHeaders: true, EndStream: true})
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if r := s.rec.s[id]; r == nil || !r.reset || len(r.heads) != 0 {
		t.Fatalf("stream: %+v", r)
	}
	if cap(s.c.hb.fields) > DefaultMaxFields {
		t.Fatalf("kept %d fields", cap(s.c.hb.fields))
	}
}

// TestClientControlFloods: SETTINGS and PINGs sent while the ACKs
// offered are not read end the connection with ENHANCE_YOUR_CALM;
// drained ACKs reset the count.
func TestClientControlFloods(t *testing.T) {
	for _, name := range []string{"SETTINGS", "PING"} {
		t.Run(name, func(t *testing.T) {
			s := newFakeServer(t, ClientConfig{})
			s.c.Drained(len(s.c.Output()))
			write := func(n int) {
				for i := 0; i < n; i++ {
					if name == "PING" {
						s.fr.WritePing(false, [8]byte{byte(i)})
					} else {
						s.fr.WriteSettings()
					}
				}
			}
			// drained as they come: no limit
			for i := 0; i < 3; i++ {
				write(DefaultMaxQueuedControl)
				if err := s.feed(); err != nil {
					t.Fatal(err)
				}
				s.c.Drained(len(s.c.Output()))
			}
			// offered (Output) and never read: a flood
			var err error
			for i := 0; i < 8 && err == nil; i++ {
				write(DefaultMaxQueuedControl / 2)
				err = s.feed()
				_ = s.c.Output()
			}
			wantCode(t, err, http2.ErrCodeEnhanceYourCalm)
		})
	}
}

// TestClientGoAway: streams above the GOAWAY's last id are reset
// REFUSED_STREAM (safe to retry), those below finish, nothing opens.
func TestClientGoAway(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	a, b, c := s.open(), s.open(), s.open()
	s.fr.WriteGoAway(a, http2.ErrCodeNo, nil)
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if len(s.rec.goAways) != 1 || s.rec.goAways[0] != "1 NO_ERROR" {
		t.Fatalf("goaways %v", s.rec.goAways)
	}
	for _, id := range []uint32{b, c} {
		if r := s.rec.s[id]; r == nil || r.code != http2.ErrCodeRefusedStream {
			t.Fatalf("stream %d: %+v", id, r)
		}
	}
	if s.c.CanOpen() || s.c.Done() {
		t.Fatalf("CanOpen %v Done %v", s.c.CanOpen(), s.c.Done())
	}
	if _, err := s.c.OpenStream("GET", "x", "/", nil, true); err != ErrNoStream {
		t.Fatal(err)
	}
	s.headers(a, true, ":status", "200")
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if !s.rec.done(a) || !s.c.Done() {
		t.Fatal("stream a not done or conn not done")
	}
}

// TestClientConnErrors: what only a broken or hostile server sends is a
// connection error.
func TestClientConnErrors(t *testing.T) {
	for _, tc := range []struct {
		name string
		code http2.ErrCode
		do   func(s *fakeServer)
	}{
		{"HEADERS on an idle stream", http2.ErrCodeProtocol, func(s *fakeServer) { s.headers(7, true, ":status", "200") }},
		{"HEADERS on an even stream", http2.ErrCodeProtocol, func(s *fakeServer) { s.headers(2, true, ":status", "200") }},
		{"PUSH_PROMISE", http2.ErrCodeProtocol, func(s *fakeServer) {
			s.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: s.block(":method", "GET"), EndHeaders: true})
		}},
		{"ENABLE_PUSH", http2.ErrCodeProtocol, func(s *fakeServer) {
			s.fr.WriteSettings(http2.Setting{ID: http2.SettingEnablePush, Val: 1})
		}},
		{"frame too large", http2.ErrCodeFrameSize, func(s *fakeServer) { s.fr.WriteData(1, false, make([]byte, 20000)) }},
		{"connection window", http2.ErrCodeFlowControl, func(s *fakeServer) {
			s.c.recvInitial = 1 << 20 // the stream's is not the limit
			s.c.streams[0].recvWindow = 1 << 20
			s.rec.noConsume = true
			s.headers(1, false, ":status", "200")
			for i := 0; i < 70; i++ {
				s.fr.WriteData(1, false, make([]byte, 16384))
			}
		}},
		{"bad HPACK", http2.ErrCodeCompression, func(s *fakeServer) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: []byte{0xff, 0xff, 0xff, 0xff}, EndHeaders: true})
		}},
		{"interrupted block", http2.ErrCodeProtocol, func(s *fakeServer) {
			s.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: s.block(":status", "200")})
			s.fr.WritePing(false, [8]byte{})
		}},
		{"frame after END_STREAM", http2.ErrCodeStreamClosed, func(s *fakeServer) {
			s.headers(1, true, ":status", "200")
			s.fr.WriteData(1, true, []byte("x"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newFakeServer(t, ClientConfig{Config: Config{Limits: Limits{ConnWindowSize: 65535}}})
			s.open()
			tc.do(s)
			wantCode(t, s.feed(), tc.code)
			if _, err := s.c.Feed([]byte{0}); err == nil {
				t.Fatal("Feed after the error succeeded")
			}
		})
	}
	t.Run("first frame not SETTINGS", func(t *testing.T) {
		rec := newClientRec()
		c := NewClientConn(ClientConfig{}, rec)
		var buf bytes.Buffer
		http2.NewFramer(&buf, nil).WritePing(false, [8]byte{})
		_, err := c.Feed(buf.Bytes())
		wantCode(t, err, http2.ErrCodeProtocol)
	})
}

// TestClientStreamWindow: DATA past the stream's window is a stream
// error FLOW_CONTROL_ERROR; the Consumed bytes are given back by
// WINDOW_UPDATE.
func TestClientStreamWindow(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	s.rec.noConsume = true
	id := s.open()
	s.headers(id, false, ":status", "200")
	for i := 0; i < 4; i++ {
		s.fr.WriteData(id, false, make([]byte, 16383))
	}
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	s.c.Drained(len(s.c.Output()))
	s.c.Consumed(id, 4*16383)
	if got := s.sent(); got != "WINDOW_UPDATE" { // the stream's; the connection's waits for a quarter of 1 MiB
		t.Fatalf("sent %s", got)
	}
	s.c.Drained(len(s.c.Output()))
	for i := 0; i < 5; i++ {
		s.fr.WriteData(id, false, make([]byte, 16383))
	}
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if r := s.rec.s[id]; !r.reset || r.code != http2.ErrCodeFlowControl {
		t.Fatalf("stream: %+v", r)
	}
}

// TestClientSendWindow: SendData takes what the server's windows allow,
// in frames of its SETTINGS_MAX_FRAME_SIZE, and WindowOpened follows its
// WINDOW_UPDATE.
func TestClientSendWindow(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	id, _ := s.c.OpenStream("POST", "x", "/", nil, false)
	s.c.Drained(len(s.c.Output()))
	body := make([]byte, 100000)
	s.rec.send(id, body, true)
	if got := len(s.rec.s[id].pending); got != 100000-65535 {
		t.Fatalf("pending %d", got)
	}
	if got := s.sent(); got != "DATA,DATA,DATA,DATA" {
		t.Fatalf("sent %s", got)
	}
	if s.c.SendStalledSince(id).IsZero() || s.c.ConnStalledSince().IsZero() {
		t.Fatal("not stalled")
	}
	s.fr.WriteWindowUpdate(0, 50000)
	s.fr.WriteWindowUpdate(id, 50000)
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if len(s.rec.s[id].pending) != 0 || !s.c.SendStalledSince(id).IsZero() {
		t.Fatalf("pending %d after the window opened", len(s.rec.s[id].pending))
	}
}

// TestClientCancelledDownload: the DATA in flight after we reset a
// stream is ignored without counting as glitches, however much of it
// comes, and its bytes go back to the connection window.
func TestClientCancelledDownload(t *testing.T) {
	s := newFakeServer(t, ClientConfig{Config: Config{Limits: Limits{MaxGlitches: 5}}})
	id := s.open()
	s.headers(id, false, ":status", "200")
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	s.c.ResetStream(id, http2.ErrCodeCancel)
	for i := 0; i < 50; i++ {
		s.fr.WriteData(id, false, make([]byte, 16384))
	}
	if err := s.feed(); err != nil {
		t.Fatal(err)
	}
	if s.c.recvWindow < DefaultConnWindowSize-DefaultConnWindowSize/4 {
		t.Fatalf("connection window %d", s.c.recvWindow)
	}
}

// TestClientPing: Ping waits for its own ACK; another ACK does not end
// the wait.
func TestClientPing(t *testing.T) {
	s := newFakeServer(t, ClientConfig{})
	s.c.Drained(len(s.c.Output()))
	s.c.Ping()
	s.c.Ping()
	if s.c.PingPendingSince().IsZero() || s.sent() != "PING" {
		t.Fatalf("sent %s", s.sent())
	}
	fr := http2.NewFramer(nil, bytes.NewReader(s.c.Output()))
	f, err := fr.ReadFrame()
	if err != nil {
		t.Fatal(err)
	}
	data := f.(*http2.PingFrame).Data
	s.fr.WritePing(true, [8]byte{9})
	if err := s.feed(); err != nil || s.c.PingPendingSince().IsZero() {
		t.Fatalf("another ACK ended the wait: %v", err)
	}
	s.fr.WritePing(true, data)
	if err := s.feed(); err != nil || !s.c.PingPendingSince().IsZero() {
		t.Fatalf("ACK not seen: %v", err)
	}
}

// TestClientRequestHead: the HEADERS RequestHTTP1 writes, decoded.
func TestClientRequestHead(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"GET /a?b HTTP/1.1\r\nHost: Example.com:8080\r\nX-A: 1\r\nConnection: x-b, keep-alive\r\nX-B: 2\r\nTE: gzip\r\nUpgrade-Insecure-Requests: 1\r\n\r\n",
			":method=GET :scheme=http :authority=Example.com:8080 :path=/a?b x-a=1 upgrade-insecure-requests=1"},
		{"POST http://h.example?q=1 HTTP/1.1\r\nHost: h.example\r\nTransfer-Encoding: chunked\r\nTE: trailers\r\nTrailer: grpc-status\r\n\r\n",
			":method=POST :scheme=http :authority=h.example :path=/?q=1 te=trailers"},
		{"OPTIONS * HTTP/1.1\r\nHost: h\r\nContent-Length: 0\r\n\r\n",
			":method=OPTIONS :scheme=http :authority=h :path=* content-length=0"},
	} {
		s := newFakeServer(t, ClientConfig{})
		s.c.Drained(len(s.c.Output()))
		r, buf := parseHTTP1Req(t, tc.in)
		if _, err := s.c.RequestHTTP1(r, buf, true); err != nil {
			t.Fatal(err)
		}
		var got []string
		dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) { got = append(got, f.Name+"="+f.Value) })
		out := s.c.Output()
		if _, err := dec.Write(out[frameHeaderLen:]); err != nil {
			t.Fatal(err)
		}
		if g := strings.Join(got, " "); g != tc.want {
			t.Errorf("%q:\n got %s\nwant %s", tc.in, g, tc.want)
		}
	}
	s := newFakeServer(t, ClientConfig{})
	for _, in := range []string{"CONNECT h:443 HTTP/1.1\r\nHost: h:443\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: h\r\nConnection: upgrade\r\nUpgrade: websocket\r\n\r\n"} {
		r, buf := parseHTTP1Req(t, in)
		if _, err := s.c.RequestHTTP1(r, buf, true); err != ErrRequest {
			t.Errorf("%q: %v", in, err)
		}
	}
}
