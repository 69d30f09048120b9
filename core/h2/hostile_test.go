package h2

import (
	"strings"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Each known HTTP/2 attack gets the RFC's error (or the one the
// mitigation chose) and leaves the connection's memory bounded.

func TestRapidReset(t *testing.T) {
	// CVE-2023-44487: HEADERS then RST_STREAM, as fast as possible.
	cl := newClient(t, Config{})
	id := uint32(1)
	for i := 0; i < DefaultMaxGlitches; i++ {
		cl.get(id, "/")
		cl.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		id += 2
	}
	if err := cl.feed(); err != nil {
		t.Fatalf("%d resets in a window refused: %v", DefaultMaxGlitches, err)
	}
	cl.frames()
	cl.get(id, "/")
	cl.fr.WriteRSTStream(id, http2.ErrCodeCancel)
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
	if cl.c.Streams() != 0 {
		t.Fatalf("%d streams left", cl.c.Streams())
	}
	// the Handler heard of every reset, the last one included: it may
	// hold a server attempt for it
	if len(cl.h.resets) != DefaultMaxGlitches+1 {
		t.Fatalf("%d resets told, want %d", len(cl.h.resets), DefaultMaxGlitches+1)
	}
}

func TestRapidResetWindowSlides(t *testing.T) {
	// a client that resets at a browser's pace is never cut off
	cl := newClient(t, Config{Limits: Limits{MaxGlitches: 10, GlitchWindow: time.Second}})
	id := uint32(1)
	for round := 0; round < 20; round++ {
		for i := 0; i < 10; i++ {
			cl.get(id, "/")
			cl.fr.WriteRSTStream(id, http2.ErrCodeCancel)
			id += 2
		}
		if err := cl.feed(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		cl.frames()
		cl.now = cl.now.Add(1100 * time.Millisecond)
	}
}

func TestServerProvokedResets(t *testing.T) {
	// MadeYouReset (CVE-2025-8671): the client makes the server reset
	// each stream (here a WINDOW_UPDATE of 0 on it) instead of resetting
	// it itself; the stream errors count as its resets do.
	cl := newClient(t, Config{})
	id := uint32(1)
	for i := 0; i < DefaultMaxGlitches; i++ {
		cl.get(id, "/")
		cl.fr.WriteWindowUpdate(id, 0)
		id += 2
	}
	if err := cl.feed(); err != nil {
		t.Fatalf("%d stream errors in a window refused: %v", DefaultMaxGlitches, err)
	}
	cl.frames()
	if len(cl.h.resets) != DefaultMaxGlitches {
		t.Fatalf("%d resets told, want %d", len(cl.h.resets), DefaultMaxGlitches)
	}
	cl.get(id, "/")
	cl.fr.WriteWindowUpdate(id, 0)
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
}

func TestMalformedRequestFlood(t *testing.T) {
	// each malformed request is a stream error the client chose: a
	// flood of them is cut off as a flood of resets is
	cl := newClient(t, Config{})
	id := uint32(1)
	for i := 0; i < DefaultMaxGlitches; i++ {
		cl.headers(id, true, ":method", "GET", ":scheme", "http", ":path", "/", "X-Upper", "1")
		id += 2
	}
	if err := cl.feed(); err != nil {
		t.Fatalf("%d malformed requests in a window refused: %v", DefaultMaxGlitches, err)
	}
	cl.frames()
	cl.headers(id, true, ":method", "GET", ":scheme", "http", ":path", "/", "X-Upper", "1")
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
}

func TestContinuationFloodByCount(t *testing.T) {
	// CVE-2024-27316: CONTINUATION frames without END_HEADERS, forever.
	cl := newClient(t, Config{})
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(base...)})
	for i := 0; i < 10000; i++ {
		cl.fr.WriteContinuation(1, false, nil) // empty fragments cost nothing to send
	}
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
	if len(cl.h.events) != 0 {
		t.Fatalf("events %q", cl.h.events)
	}
}

func TestContinuationFloodBySize(t *testing.T) {
	cl := newClient(t, Config{Limits: Limits{MaxContinuations: 1000}})
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(base...)})
	// a literal never finished: each fragment is just more of its value
	lit := make([]byte, 16384)
	for i := 0; i < 100; i++ {
		cl.fr.WriteContinuation(1, false, lit)
	}
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
	if c := cap(cl.c.blk.buf); c > 2*cl.c.maxBlock() {
		t.Fatalf("header block buffer grew to %d bytes, bound %d", c, cl.c.maxBlock())
	}
}

func TestHPACKBomb(t *testing.T) {
	// One 4000-byte field in the dynamic table, referenced by its 1-byte
	// index many times: a few hundred bytes on the wire, megabytes decoded.
	cl := newClient(t, Config{})
	cl.eb.Reset()
	for _, kv := range [][2]string{{":method", "GET"}, {":scheme", "https"}, {":path", "/"}, {":authority", "a"}} {
		cl.enc.WriteField(hpack.HeaderField{Name: kv[0], Value: kv[1]})
	}
	cl.enc.WriteField(hpack.HeaderField{Name: "x-bomb", Value: strings.Repeat("b", 4000)})
	block := append([]byte(nil), cl.eb.Bytes()...)
	for i := 0; i < 1000; i++ {
		block = append(block, 0x80|62) // indexed: the newest dynamic entry
	}
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	wantFrames(t, cl.frames(), "HEADERS 1 END_STREAM :status=431")
	if len(cl.h.events) != 0 {
		t.Fatalf("events %q", cl.h.events)
	}
	if n := cap(cl.c.req.Fields); n > 16 {
		t.Fatalf("kept %d fields of a list past the limit", n)
	}
	// the decoder stayed in step: the table still holds x-bomb
	cl.get(3, "/after")
	if err := cl.feed(); err != nil || cl.h.reqs[3] == nil {
		t.Fatalf("next request: %v %q", err, cl.h.events)
	}
}

func TestHeaderListTooLargeWithBody(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{MaxHeaderListSize: 1000}})
	cl.post(1, "/", "x-big", strings.Repeat("v", 1000))
	cl.fr.WriteData(1, true, []byte("late body"))
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	// 431, then RST_STREAM NO_ERROR asks the client to stop its body
	// (RFC 9113 §8.1); the body that was in flight is ignored.
	wantFrames(t, cl.frames(), "HEADERS 1 END_STREAM :status=431", "RST_STREAM 1 NO_ERROR")
}

func TestTooManyFields(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{MaxHeaderListSize: 1 << 20}, Limits: Limits{MaxFields: 5}})
	cl.get(1, "/") // 4 pseudo-header fields are not counted
	kv := append([]string(nil), base...)
	for i := 0; i < 6; i++ {
		kv = append(kv, "x", "y")
	}
	cl.headers(3, true, kv...)
	cl.feed()
	wantFrames(t, cl.frames(), "HEADERS 3 END_STREAM :status=431")
}

func TestHPACKTableSizeBounded(t *testing.T) {
	// a table size update above the 4096 the RFC grants is a
	// COMPRESSION_ERROR: the decoder's table never grows past it
	cl := newClient(t, Config{})
	block := []byte{0x3f, 0xe2, 0x1f} // size update to 31+98+31*128 = 4097
	block = append(block, cl.block(base...)...)
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: block, EndStream: true, EndHeaders: true})
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeCompression)
}

func TestHPACKStringPastListLimit(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{MaxHeaderListSize: 4096}})
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(with("x", strings.Repeat("a", 12000))...), EndStream: true, EndHeaders: true})
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeCompression)
}

// TestSettingsFlood and TestPingFlood are TestControlFloodNotRead and
// TestControlBurstBounded (flood_test.go): ACKs offered and not read.

func TestPingsAnsweredWhenDrained(t *testing.T) {
	// the cap is on answers not yet written, not on pings: a client that
	// reads its ACKs may ping as it likes
	cl := newClient(t, Config{})
	for round := 0; round < 5; round++ {
		for i := 0; i < DefaultMaxQueuedControl; i++ {
			cl.fr.WritePing(false, [8]byte{byte(i)})
		}
		if err := cl.feed(); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		if fs := cl.frames(); len(fs) != DefaultMaxQueuedControl {
			t.Fatalf("%d answers", len(fs))
		}
	}
}

func TestZeroWindowStall(t *testing.T) {
	// A client that never opens its window: the stream takes nothing, and
	// says since when, so the caller can time it out and reset it.
	cl := newClient(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 0})
	cl.get(1, "/")
	cl.feed()
	cl.c.Respond(1, 200, nil, false)
	start := cl.now
	if n := cl.c.SendData(1, make([]byte, 1000), true); n != 0 {
		t.Fatalf("took %d with a zero window", n)
	}
	cl.now = cl.now.Add(time.Minute)
	cl.c.SendData(1, make([]byte, 1000), true)
	if got := cl.c.SendStalledSince(1); !got.Equal(start) {
		t.Fatalf("stalled since %v, want %v", got, start)
	}
	if !cl.c.ConnStalledSince().IsZero() {
		t.Fatal("the connection window is open")
	}
	cl.c.ResetStream(1, http2.ErrCodeCancel)
	if cl.c.Streams() != 0 || !cl.c.SendStalledSince(1).IsZero() {
		t.Fatal("stream kept")
	}
	wantFrames(t, cl.frames(), "HEADERS 1 :status=200", "RST_STREAM 1 CANCEL")
}

func TestStreamIDRules(t *testing.T) {
	t.Run("even id", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(2, "/")
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeProtocol)
	})
	t.Run("decreasing id", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(5, "/")
		cl.get(3, "/")
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeProtocol)
	})
	t.Run("reuse of an old id", func(t *testing.T) {
		cl := newClient(t, Config{})
		id := uint32(1)
		for ; id < 2*closedRingLen+10; id += 2 {
			cl.get(id, "/")
			cl.fr.WriteRSTStream(id, http2.ErrCodeCancel)
		}
		cl.get(1, "/")
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeProtocol)
	})
	t.Run("reuse of a just closed id", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(1, "/")
		cl.feed()
		cl.c.Respond(1, 200, nil, true)
		cl.frames()
		cl.get(1, "/")
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeStreamClosed)
	})
	t.Run("reuse of an id the client reset", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.post(1, "/")
		cl.fr.WriteRSTStream(1, http2.ErrCodeCancel)
		cl.get(1, "/")
		cl.feed()
		wantFrames(t, cl.frames(), "RST_STREAM 1 STREAM_CLOSED")
	})
}

func TestFramesOnIdleStreams(t *testing.T) {
	for name, send := range map[string]func(cl *client){
		"DATA":          func(cl *client) { cl.fr.WriteData(1, true, []byte("x")) },
		"WINDOW_UPDATE": func(cl *client) { cl.fr.WriteWindowUpdate(1, 10) },
		"RST_STREAM":    func(cl *client) { cl.fr.WriteRSTStream(1, http2.ErrCodeCancel) },
		"CONTINUATION":  func(cl *client) { cl.fr.WriteContinuation(1, true, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			send(cl)
			cl.feed()
			wantConnError(t, cl, http2.ErrCodeProtocol)
		})
	}
	t.Run("PRIORITY is allowed", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.fr.WritePriority(9, http2.PriorityParam{StreamDep: 1, Weight: 10})
		cl.get(1, "/") // 9 stays idle: 1 is a valid new id
		if err := cl.feed(); err != nil || cl.h.reqs[1] == nil {
			t.Fatalf("%v %q", err, cl.frames())
		}
	})
}

func TestFramesOnHalfClosedStream(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/") // END_STREAM: half-closed (remote)
	cl.fr.WriteData(1, false, []byte("x"))
	cl.feed()
	wantFrames(t, cl.frames(), "RST_STREAM 1 STREAM_CLOSED")
	if cl.h.resets[1] != http2.ErrCodeStreamClosed {
		t.Fatalf("events %q", cl.h.events)
	}
}

func TestFramesOnClosedStreamsFlood(t *testing.T) {
	// each DATA on a closed stream too old to be remembered costs a
	// RST_STREAM answer (after it, more frames on that stream are
	// ignored, RFC 9113 §5.1): one per closed stream, many closed streams
	cl := newClient(t, Config{})
	n := uint32(DefaultMaxGlitches + 1)
	for id := uint32(1); id < 2*(n+closedRingLen); id += 2 {
		cl.get(id, "/")
		cl.feed()
		cl.c.Respond(id, 200, nil, true)
	}
	cl.frames()
	for id := uint32(1); id < 2*n; id += 2 {
		cl.fr.WriteData(id, false, []byte("x"))
	}
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
}

func TestEmptyDataFlood(t *testing.T) {
	// CVE-2019-9518: empty DATA frames cost the server a frame each
	cl := newClient(t, Config{})
	cl.post(1, "/")
	for i := 0; i <= DefaultMaxGlitches; i++ {
		cl.fr.WriteData(1, false, nil)
	}
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
}

func TestOversizedFrame(t *testing.T) {
	cl := newClient(t, Config{})
	// only the header of a 1 MiB frame: refused without waiting for it
	cl.in.Write([]byte{0x10, 0, 0, byte(http2.FrameData), 0, 0, 0, 0, 1})
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeFrameSize)

	cl = newClient(t, Config{Settings: Settings{MaxFrameSize: 1 << 20}})
	cl.post(1, "/")
	cl.fr.WriteData(1, false, make([]byte, 40000))
	if err := cl.feed(); err != nil || len(cl.h.body[1]) != 40000 {
		t.Fatalf("a frame within our MAX_FRAME_SIZE refused: %v", err)
	}
}

func TestBadFrameSizes(t *testing.T) {
	for name, raw := range map[string][]byte{
		"PING of 7":          {0, 0, 7, byte(http2.FramePing), 0, 0, 0, 0, 0, 1, 2, 3, 4, 5, 6, 7},
		"SETTINGS of 5":      {0, 0, 5, byte(http2.FrameSettings), 0, 0, 0, 0, 0, 0, 1, 0, 0, 0},
		"WINDOW_UPDATE of 3": {0, 0, 3, byte(http2.FrameWindowUpdate), 0, 0, 0, 0, 0, 0, 0, 1},
		"SETTINGS ACK of 6":  {0, 0, 6, byte(http2.FrameSettings), 1, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0},
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.in.Write(raw)
			cl.feed()
			wantConnError(t, cl, http2.ErrCodeFrameSize)
		})
	}
}

func TestTooManyConcurrentStreams(t *testing.T) {
	cl := newClient(t, Config{Settings: Settings{MaxConcurrentStreams: 2}})
	cl.post(1, "/")
	cl.post(3, "/")
	cl.post(5, "/")
	cl.fr.WriteData(5, true, []byte("x")) // in flight when refused: ignored
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	wantFrames(t, cl.frames(), "RST_STREAM 5 REFUSED_STREAM")
	if _, ok := cl.h.reqs[5]; ok {
		t.Fatal("refused stream reached the handler")
	}
	// once one ends, a new one is accepted
	cl.fr.WriteRSTStream(1, http2.ErrCodeCancel)
	cl.post(7, "/")
	if err := cl.feed(); err != nil || cl.h.reqs[7] == nil {
		t.Fatalf("%v %q", err, cl.h.events)
	}
}

func TestPrioritySelfDependency(t *testing.T) {
	cl := newClient(t, Config{})
	cl.fr.WritePriority(1, http2.PriorityParam{StreamDep: 1})
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 3, BlockFragment: cl.block(base...), EndStream: true, EndHeaders: true,
		Priority: http2.PriorityParam{StreamDep: 3, Weight: 1}})
	cl.feed()
	wantFrames(t, cl.frames(), "RST_STREAM 1 PROTOCOL_ERROR", "RST_STREAM 3 PROTOCOL_ERROR")
}

func TestHeaderBlockInterrupted(t *testing.T) {
	for name, send := range map[string]func(cl *client){
		"by PING":                  func(cl *client) { cl.fr.WritePing(false, [8]byte{}) },
		"by DATA":                  func(cl *client) { cl.fr.WriteData(1, true, nil) },
		"by an unknown frame":      func(cl *client) { cl.fr.WriteRawFrame(0x42, 0, 0, nil) },
		"by another stream's CONT": func(cl *client) { cl.fr.WriteContinuation(3, true, nil) },
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(base...)})
			send(cl)
			cl.feed()
			wantConnError(t, cl, http2.ErrCodeProtocol)
		})
	}
}

func TestUnknownFramesIgnored(t *testing.T) {
	cl := newClient(t, Config{})
	cl.fr.WriteRawFrame(0x42, 0xff, 0, []byte("whatever"))
	cl.fr.WriteRawFrame(0x10, 0, 1, []byte("u=1")) // PRIORITY_UPDATE (RFC 9218)
	cl.get(1, "/")
	if err := cl.feed(); err != nil || cl.h.reqs[1] == nil {
		t.Fatalf("%v %q", err, cl.frames())
	}
}

func TestPushPromiseFromClient(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.fr.WritePushPromise(http2.PushPromiseParam{StreamID: 1, PromiseID: 2, BlockFragment: cl.block(base...), EndHeaders: true})
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeProtocol)
}

func TestWindowOverflow(t *testing.T) {
	t.Run("connection", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.fr.WriteWindowUpdate(0, 1<<31-1)
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeFlowControl)
	})
	t.Run("stream", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(1, "/")
		cl.fr.WriteWindowUpdate(1, 1<<31-1)
		cl.feed()
		wantFrames(t, cl.frames(), "RST_STREAM 1 FLOW_CONTROL_ERROR")
	})
	t.Run("by SETTINGS", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(1, "/")
		cl.fr.WriteWindowUpdate(1, 1<<31-1-65535)
		cl.fr.WriteSettings(http2.Setting{ID: http2.SettingInitialWindowSize, Val: 65536})
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeFlowControl)
	})
	t.Run("zero increment", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.get(1, "/")
		cl.fr.WriteWindowUpdate(1, 0)
		cl.feed()
		wantFrames(t, cl.frames(), "RST_STREAM 1 PROTOCOL_ERROR")
		cl.fr.WriteWindowUpdate(0, 0)
		cl.feed()
		wantConnError(t, cl, http2.ErrCodeProtocol)
	})
}

func TestBadSettingsValues(t *testing.T) {
	for name, tc := range map[string]struct {
		s    http2.Setting
		code http2.ErrCode
	}{
		"ENABLE_PUSH 2":            {http2.Setting{ID: http2.SettingEnablePush, Val: 2}, http2.ErrCodeProtocol},
		"INITIAL_WINDOW_SIZE 2^31": {http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 31}, http2.ErrCodeFlowControl},
		"MAX_FRAME_SIZE 16383":     {http2.Setting{ID: http2.SettingMaxFrameSize, Val: 16383}, http2.ErrCodeProtocol},
		"MAX_FRAME_SIZE 2^24":      {http2.Setting{ID: http2.SettingMaxFrameSize, Val: 1 << 24}, http2.ErrCodeProtocol},
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.fr.WriteSettings(tc.s)
			cl.feed()
			wantConnError(t, cl, tc.code)
		})
	}
}

func TestResetStreamWhileTrailersArrive(t *testing.T) {
	// the caller resets a stream between two Feeds, in the middle of the
	// client's trailer block: the block is still decoded, then dropped
	cl := newClient(t, Config{})
	cl.post(1, "/")
	cl.fr.WriteData(1, false, []byte("abc"))
	blk := cl.block("x-a", strings.Repeat("a", 100), "x-b", "b")
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:50], EndStream: true})
	cl.feed()
	cl.c.ResetStream(1, http2.ErrCodeCancel)
	cl.fr.WriteContinuation(1, true, blk[50:])
	cl.get(3, "/next")
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	if len(cl.h.trail) != 0 || cl.h.reqs[3] == nil {
		t.Fatalf("events %q", cl.h.events)
	}
}

func TestGoAwayWhileHeaderBlockArrives(t *testing.T) {
	// GOAWAY names the stream whose HEADERS came: it is served
	cl := newClient(t, Config{})
	blk := cl.block(base...)
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:3], EndStream: true})
	cl.feed()
	cl.c.GoAway()
	cl.fr.WriteContinuation(1, true, blk[3:])
	cl.feed()
	wantFrames(t, cl.frames(), "GOAWAY 1 NO_ERROR")
	if cl.h.reqs[1] == nil || cl.c.Done() {
		t.Fatalf("events %q", cl.h.events)
	}
}

func TestDataPastGoAwayIgnored(t *testing.T) {
	cl := newClient(t, Config{})
	cl.get(1, "/")
	cl.feed()
	cl.c.GoAway()
	cl.post(3, "/")
	cl.fr.WriteData(3, true, []byte("in flight"))
	if err := cl.feed(); err != nil {
		t.Fatal(err)
	}
	wantFrames(t, cl.frames(), "GOAWAY 1 NO_ERROR")
	if cl.c.recvCredit != 9 {
		t.Fatalf("the ignored DATA's 9 bytes not given back: %d", cl.c.recvCredit)
	}
}

func TestSlowContinuation(t *testing.T) {
	// a header block trickled in: the caller sees since when it waits
	cl := newClient(t, Config{})
	blk := cl.block(base...)
	start := cl.now
	cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: blk[:1], EndStream: true})
	cl.feed()
	for i := 1; i < len(blk)-1; i++ {
		cl.now = cl.now.Add(10 * time.Second)
		cl.fr.WriteContinuation(1, false, blk[i:i+1])
		cl.feed()
	}
	if got := cl.c.HeadersPendingSince(); !got.Equal(start) {
		t.Fatalf("pending since %v, want %v", got, start)
	}
	cl.fr.WriteContinuation(1, true, blk[len(blk)-1:])
	cl.feed()
	if !cl.c.HeadersPendingSince().IsZero() || cl.h.reqs[1] == nil {
		t.Fatalf("block not finished: %q", cl.h.events)
	}
}

func TestPingsDuringLongDownload(t *testing.T) {
	// Output never empties (a download always queued behind), but the
	// ACKs are written as they come: they never add up to a flood
	cl := newClient(t, Config{}, http2.Setting{ID: http2.SettingInitialWindowSize, Val: 1 << 30})
	cl.fr.WriteWindowUpdate(0, 1<<30)
	cl.get(1, "/")
	cl.feed()
	cl.c.Respond(1, 200, nil, false)
	chunk := make([]byte, 1000)
	for i := 0; i < 3*DefaultMaxQueuedControl; i++ {
		cl.fr.WritePing(false, [8]byte{byte(i)})
		data := cl.in.Bytes()
		if n, err := cl.c.Feed(data); err != nil || n != len(data) {
			t.Fatalf("ping %d: %v", i, err)
		}
		cl.in.Reset()
		cl.c.SendData(1, chunk, false)
		// write all but the last 100 bytes, as a socket would
		cl.c.Drained(len(cl.c.Output()) - 100)
	}
}

func TestHeadersFrameLayout(t *testing.T) {
	t.Run("padded, with priority", func(t *testing.T) {
		cl := newClient(t, Config{})
		cl.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: cl.block(base...), EndStream: true, EndHeaders: true,
			PadLength: 17, Priority: http2.PriorityParam{StreamDep: 0, Weight: 200, Exclusive: true}})
		if err := cl.feed(); err != nil || cl.h.reqs[1] == nil {
			t.Fatalf("%v %q", err, cl.frames())
		}
	})
	for name, tc := range map[string]struct {
		raw  []byte
		code http2.ErrCode
	}{
		"stream 0":                  {[]byte{0, 0, 1, 1, 0x5, 0, 0, 0, 0, 0x82}, http2.ErrCodeProtocol},
		"pad length past the end":   {[]byte{0, 0, 2, 1, 0x5 | 0x8, 0, 0, 0, 1, 5, 0x82}, http2.ErrCodeProtocol},
		"pad length, no payload":    {[]byte{0, 0, 0, 1, 0x5 | 0x8, 0, 0, 0, 1}, http2.ErrCodeFrameSize},
		"priority fields cut":       {[]byte{0, 0, 3, 1, 0x5 | 0x20, 0, 0, 0, 1, 0, 0, 0}, http2.ErrCodeFrameSize},
		"padding eats the priority": {[]byte{0, 0, 7, 1, 0x5 | 0x20 | 0x8, 0, 0, 0, 1, 3, 0, 0, 0, 0, 16, 0x82}, http2.ErrCodeProtocol},
	} {
		t.Run(name, func(t *testing.T) {
			cl := newClient(t, Config{})
			cl.in.Write(tc.raw)
			cl.feed()
			wantConnError(t, cl, tc.code)
		})
	}
}
