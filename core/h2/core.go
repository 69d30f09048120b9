package h2

import (
	"encoding/binary"
	"errors"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// connCore is what both ends of a connection do alike: frames in and out,
// flow control both ways, the stream table and the memory of closed
// streams, header blocks gathered over CONTINUATION frames, the limits
// on a hostile peer. Conn (the server side) and ClientConn embed it; what
// differs between them (the head a header block carries, who opens
// streams, the peer's GOAWAY) goes through side.
type connCore struct {
	cfg    Config
	side   side
	client bool // the ClientConn's: we open the (odd) streams

	gotSettings bool // the peer's first frame, its SETTINGS, came
	err         *Error

	fr *http2.Framer // nil while idle after ReleaseBuffers; see framer()
	rd frameReader
	wr outWriter

	out    []byte
	outOff int

	dec    *hpack.Decoder
	henc   hpackEncoder
	blk    blockGather
	muted  bool // the decoder's output is nobody's (ReleaseBuffers)
	unpin  [1]byte
	eblock []byte // outgoing header block being built by the encoder
	lname  []byte // lowercase name scratch

	// peer's settings
	peerMaxFrame      uint32
	peerInitialWindow int32
	peerMaxStreams    uint32
	peerGoAway        bool
	goAway            bool // GOAWAY sent
	settingsAcked     bool

	sendWindow       int64 // connection: what we may still send
	recvWindow       int64 // connection: what the peer may still send
	recvCredit       int64 // consumed, not yet given back by WINDOW_UPDATE
	recvInitial      int32 // stream initial receive window in effect
	connStalledSince time.Time

	streams []*stream
	free    []*stream
	lastID  uint32 // server: highest client stream id seen
	nextID  uint32 // client: the id of the next stream we open
	closed  [closedRingLen]closedStream
	closedN int
	counts  Counts

	glitches    int
	glitchStart time.Time
	ctrl        ctrlQueue

	pingData  [8]byte   // client: our PING's payload
	pingSince time.Time // client: when it was sent, zero when answered
}

// side is what differs between the two ends: what a header block means,
// what the peer's GOAWAY does, and the handler (a Handler or a
// ClientHandler: both have Data, Reset and WindowOpened).
type side interface {
	onHeaders(id uint32, flags http2.Flags, p []byte)
	decode(block []byte)
	onGoAway(lastID uint32, code http2.ErrCode)
	data(id uint32, p []byte, endStream bool)
	reset(id uint32, code http2.ErrCode)
	windowOpened(id uint32)
}

// ctrlQueue counts the control frames (SETTINGS and PING ACKs,
// RST_STREAM) queued and not yet drained: a peer that sends them faster
// than it reads the answers is a flood (CVE-2019-9512, -9515). A frame
// counts against MaxQueuedControl once Output offered it to the caller:
// a loop reads its socket until EAGAIN (up to its run's budget) before
// it writes, so a peer that sends a burst of PINGs and reads the ACKs
// promptly had no chance to read any while the burst was fed. As HAProxy
// and nginx do, what is held against a peer is what it was sent and did
// not read. A burst is bounded too, at maxControlBurst times the limit,
// for a caller that feeds without asking for Output.
type ctrlQueue struct {
	queued  int  // queued since Output was last drained past mark
	offered int  // of those, the ones Output returned
	mark    int  // end of the last control frame in out
	feeding bool // inside Feed: Output calls there offer nothing
}

// maxControlBurst: 10 × DefaultMaxQueuedControl is Go's server's limit
// (10000 frames, 90-170 KB of ACKs).
const maxControlBurst = 10

// blockGather is the header block being received: a HEADERS frame
// without END_HEADERS and its CONTINUATIONs (RFC 9113 §4.3, §6.10).
type blockGather struct {
	active bool // CONTINUATION expected
	id     uint32
	buf    []byte // fragments so far
	conts  int
	since  time.Time // when the block began
}

func (c *connCore) init(cfg Config, s side, onField func(hpack.HeaderField)) {
	c.cfg = cfg
	c.side = s
	c.peerMaxFrame = rfcMinFrameSize
	c.peerInitialWindow = rfcInitialWindow
	c.sendWindow = rfcInitialWindow
	c.recvWindow = rfcInitialWindow
	c.recvInitial = rfcInitialWindow
	c.wr.c = c
	c.dec = hpack.NewDecoder(headerTableSize, onField)
	// A string longer than the list limit can only be refused; the
	// decoder then stops (COMPRESSION_ERROR) instead of buffering it.
	c.dec.SetMaxStringLength(int(cfg.Settings.MaxHeaderListSize))
	// No dynamic table for what we send (HAProxy's choice too): a
	// field's strings may alias the caller's buffer, and the first block
	// tells the peer its table is 0 (hpackenc.go).
}

// openConnWindow queues the WINDOW_UPDATE that takes the connection
// receive window from the RFC's 65535 to Limits.ConnWindowSize.
func (c *connCore) openConnWindow() {
	if w := c.cfg.Limits.ConnWindowSize; w > rfcInitialWindow {
		_ = c.framer().WriteWindowUpdate(0, w-rfcInitialWindow)
		c.recvWindow = int64(w)
	}
}

// frameReader hands the Framer exactly one complete frame.
type frameReader struct{ p []byte }

func (r *frameReader) Read(b []byte) (int, error) {
	n := copy(b, r.p)
	r.p = r.p[n:]
	if n == 0 && len(b) > 0 {
		return 0, errShortFrame
	}
	return n, nil
}

var errShortFrame = errors.New("h2: frame shorter than its header says")

// outWriter appends the Framer's frames to the output.
type outWriter struct{ c *connCore }

func (w *outWriter) Write(p []byte) (int, error) {
	w.c.out = append(w.c.out, p...)
	return len(p), nil
}

// framer returns the Framer, making it again after ReleaseBuffers: between
// frames it keeps nothing we need (we check the HEADERS/CONTINUATION order
// ourselves, before it does), only its read and write buffers.
func (c *connCore) framer() *http2.Framer {
	if c.fr == nil {
		c.fr = http2.NewFramer(&c.wr, &c.rd)
		c.fr.SetReuseFrames()
		c.fr.SetMaxReadFrameSize(c.cfg.Settings.MaxFrameSize)
	}
	return c.fr
}

// Output is what the connection has to send, in order; write it to the
// socket and call Drained with what was written.
func (c *connCore) Output() []byte {
	if !c.ctrl.feeding {
		c.ctrl.offered = c.ctrl.queued
	}
	return c.out[c.outOff:]
}

// Drained says the first n bytes of Output were written.
func (c *connCore) Drained(n int) {
	c.outOff += n
	if c.outOff >= c.ctrl.mark {
		// every control frame queued so far is written
		c.ctrl.queued, c.ctrl.offered = 0, 0
	}
	if c.outOff >= len(c.out) {
		c.out = c.out[:0]
		c.outOff = 0
		c.ctrl.mark = 0
	}
}

// Err is the connection error, nil while the connection is sound.
func (c *connCore) Err() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

// Done reports that the connection has nothing left to do once Output is
// drained: a connection error was queued, or a GOAWAY was sent or received
// and no stream is left.
func (c *connCore) Done() bool {
	return c.err != nil || (c.goAway || c.peerGoAway) && len(c.streams) == 0 && !c.blk.active
}

// Idle reports that no stream is open, no header block is half read and
// nothing waits in Output: the moment to ReleaseBuffers (and, for a
// pooled ClientConn, to reuse it).
func (c *connCore) Idle() bool {
	return len(c.streams) == 0 && !c.blk.active && c.outOff == len(c.out)
}

// release gives back what an idle connection does not need, false when
// it is not Idle: the output buffer, the Framer (its read and write
// buffers), the header block scratch and the free streams. What is left
// is the struct, the HPACK decoder with its dynamic table (at most 4096
// bytes of fields, the table size the RFC grants by default) and the
// encoder (no table).
func (c *connCore) release(fields []hpack.HeaderField) bool {
	if !c.Idle() {
		return false
	}
	// x/net's HPACK Decoder keeps a slice of the last block it read
	// (Decoder.buf), which pins the caller's input buffer: a one-byte
	// block of a static-table field, given to nobody (muted), moves it
	// onto the connection itself.
	c.muted = true
	c.unpin[0] = 0x82 // indexed :method GET
	_, _ = c.dec.Write(c.unpin[:])
	_ = c.dec.Close()
	c.muted = false
	if c.cfg.Pool != nil {
		c.cfg.Pool.put(busyMem{out: c.out, eblock: c.eblock, lname: c.lname, blk: c.blk.buf,
			streams: c.streams, free: c.free, fields: fields})
	} else {
		clear(c.free)
	}
	c.out, c.outOff = nil, 0
	c.fr = nil
	c.blk.buf = nil
	c.eblock = nil
	c.lname = nil
	c.free = nil
	c.streams = nil
	return true
}

// busy takes a set of busy-connection memory from the loop's Pool for a
// connection that gave its own back (release) and has work again; fields
// is the side's field list. Without a set, or for a connection that
// holds memory, it does nothing: appends grow what is needed.
func (c *connCore) busy(fields *[]hpack.HeaderField) {
	if c.out != nil || c.streams != nil || c.free != nil || c.cfg.Pool == nil {
		return
	}
	m, ok := c.cfg.Pool.take()
	if !ok {
		return
	}
	c.out, c.eblock, c.lname, c.blk.buf = m.out, m.eblock, m.lname, m.blk
	c.streams, c.free = m.streams, m.free
	if *fields == nil {
		*fields = m.fields
	}
}

// HeadersPendingSince is when the header block being read began, zero
// when none is half read: a peer that sends a CONTINUATION now and then
// holds the whole connection (no other frame may come between), so the
// caller bounds it as it bounds a head's arrival.
func (c *connCore) HeadersPendingSince() time.Time {
	if !c.blk.active {
		return time.Time{}
	}
	return c.blk.since
}

// SendStalledSince is when stream id last wanted to send (SendData took
// less than offered) with no window, zero when it is not stalled: a peer
// that never opens its window must not hold a connection forever, so the
// caller times the stream out from this. A window update ends the stall:
// a peer that opens its window a byte at a time is a slow reader, for a
// send-rate timeout of the caller's.
func (c *connCore) SendStalledSince(id uint32) time.Time {
	if st := c.stream(id); st != nil {
		return st.stalledSince
	}
	return time.Time{}
}

// ConnStalledSince is when the connection send window reached zero with a
// stream wanting to send, zero when it is not stalled.
func (c *connCore) ConnStalledSince() time.Time { return c.connStalledSince }

// Streams is the number of open streams.
func (c *connCore) Streams() int { return len(c.streams) }

// MaxFrameLen is the longest frame Feed accepts, header included: the
// least input buffer a connection needs.
func (c *connCore) MaxFrameLen() int { return frameHeaderLen + int(c.cfg.Settings.MaxFrameSize) }

// GoAway starts a graceful stop (stop, drain, frontend removed, a pooled
// connection retired): GOAWAY NO_ERROR with the last stream id the peer
// opened (none for a ClientConn: servers open no stream); streams up to
// it finish, later ones are ignored, no stream opens any more. Done says
// when the connection may close.
func (c *connCore) GoAway() {
	if c.goAway || c.err != nil {
		return
	}
	c.goAway = true
	_ = c.framer().WriteGoAway(c.lastID, http2.ErrCodeNo, nil)
}

// connError queues GOAWAY with code and fails the connection.
func (c *connCore) connError(code http2.ErrCode, reason string) error {
	if c.err == nil {
		c.err = &Error{Code: code, Reason: reason}
		_ = c.framer().WriteGoAway(c.lastID, code, nil)
		c.goAway = true
	}
	return c.err
}

// glitch counts one suspicious event (HAProxy's word): past MaxGlitches in
// one GlitchWindow the connection ends with ENHANCE_YOUR_CALM.
func (c *connCore) glitch(what string) bool {
	now := c.cfg.Now()
	if c.glitches == 0 || now.Sub(c.glitchStart) > c.cfg.Limits.GlitchWindow {
		c.glitchStart = now
		c.glitches = 0
	}
	c.glitches++
	if c.glitches > c.cfg.Limits.MaxGlitches {
		c.connError(http2.ErrCodeEnhanceYourCalm, what)
		return false
	}
	return true
}

// control counts one control frame about to be queued (see ctrlQueue);
// false when that failed the connection. The caller sets ctrl.mark once
// the frame is in out: the count goes back to 0 once Output is drained
// past it, so a long download always queued behind does not add up the
// pings of its whole life.
func (c *connCore) control() bool {
	c.ctrl.queued++
	if c.ctrl.offered > c.cfg.Limits.MaxQueuedControl || c.ctrl.queued > maxControlBurst*c.cfg.Limits.MaxQueuedControl {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many control frames queued")
		return false
	}
	return true
}

// feedFrames reads the complete frames of p from n on and returns where
// it stopped: at a frame not complete in p, or at a connection error
// (returned).
func (c *connCore) feedFrames(p []byte, n int) (int, error) {
	c.ctrl.feeding = true
	for c.err == nil {
		rest := p[n:]
		if len(rest) < frameHeaderLen {
			break
		}
		length := uint32(rest[0])<<16 | uint32(rest[1])<<8 | uint32(rest[2])
		if length > c.cfg.Settings.MaxFrameSize {
			c.connError(http2.ErrCodeFrameSize, "frame larger than SETTINGS_MAX_FRAME_SIZE")
			break
		}
		size := frameHeaderLen + int(length)
		if len(rest) < size {
			break
		}
		n += size
		c.frame(rest[:size])
	}
	c.ctrl.feeding = false
	if c.err != nil {
		return n, c.err
	}
	return n, nil
}

// frame handles one complete frame f (header included).
func (c *connCore) frame(f []byte) {
	typ := http2.FrameType(f[3])
	flags := http2.Flags(f[4])
	id := binary.BigEndian.Uint32(f[5:9]) & (1<<31 - 1)

	// RFC 9113 §6.10: a header block is a contiguous run of frames.
	if c.blk.active {
		if typ != http2.FrameContinuation || id != c.blk.id {
			c.connError(http2.ErrCodeProtocol, "header block interrupted")
			return
		}
	} else if typ == http2.FrameContinuation {
		c.connError(http2.ErrCodeProtocol, "CONTINUATION without a header block")
		return
	}
	if !c.gotSettings {
		// RFC 9113 §3.4: either side's preface ends with SETTINGS.
		if typ != http2.FrameSettings || flags.Has(http2.FlagSettingsAck) {
			c.connError(http2.ErrCodeProtocol, "first frame is not SETTINGS")
			return
		}
		c.gotSettings = true
	}

	switch typ {
	case http2.FrameData:
		c.onData(id, flags, f[frameHeaderLen:])
		return
	case http2.FrameWindowUpdate:
		c.onWindowUpdate(id, f[frameHeaderLen:])
		return
	case http2.FrameHeaders:
		c.side.onHeaders(id, flags, f[frameHeaderLen:])
		return
	case http2.FrameContinuation:
		c.onContinuation(flags, f[frameHeaderLen:])
		return
	case http2.FramePriority, http2.FrameRSTStream,
		http2.FrameSettings, http2.FramePushPromise, http2.FramePing, http2.FrameGoAway:
	default:
		return // extension frames are ignored (RFC 9113 §5.5)
	}
	c.rd.p = f
	fr, err := c.framer().ReadFrame()
	c.rd.p = nil
	if err != nil {
		var se http2.StreamError
		var ce http2.ConnectionError
		switch {
		case errors.As(err, &se):
			c.streamError(se.StreamID, se.Code)
		case errors.As(err, &ce):
			c.connError(http2.ErrCode(ce), frameErrorReason(c.fr, typ))
		default:
			c.connError(http2.ErrCodeProtocol, "bad "+typ.String()+" frame")
		}
		return
	}
	switch fr := fr.(type) {
	case *http2.PriorityFrame:
		// RFC 9113 §5.3.2 deprecates the priority signal; only the rule
		// that a stream cannot depend on itself is kept.
		if fr.StreamDep == fr.StreamID {
			c.streamError(fr.StreamID, http2.ErrCodeProtocol)
		}
	case *http2.RSTStreamFrame:
		c.onRSTStream(fr.StreamID, fr.ErrCode)
	case *http2.SettingsFrame:
		c.onSettings(fr)
	case *http2.PushPromiseFrame:
		// a client never receives one with ENABLE_PUSH 0, a server never
		c.connError(http2.ErrCodeProtocol, "PUSH_PROMISE")
	case *http2.PingFrame:
		if fr.IsAck() {
			if !c.pingSince.IsZero() && fr.Data == c.pingData {
				c.pingSince = time.Time{}
			}
			return
		}
		if c.control() {
			_ = c.fr.WritePing(true, fr.Data)
			c.ctrl.mark = len(c.out)
		}
	case *http2.GoAwayFrame:
		c.peerGoAway = true
		c.side.onGoAway(fr.LastStreamID, fr.ErrCode)
	}
}

func frameErrorReason(fr *http2.Framer, typ http2.FrameType) string {
	if d := fr.ErrorDetail(); d != nil {
		return d.Error()
	}
	return "bad " + typ.String() + " frame"
}

// idle reports a stream id not opened yet (RFC 9113 §5.1): above the
// last the client opened, for a server; not below the next we open, or
// even (servers open none: push is off), for a client.
func (c *connCore) idle(id uint32) bool {
	if c.client {
		return id >= c.nextID || id&1 == 0
	}
	return id > c.lastID
}

func (c *connCore) onSettings(f *http2.SettingsFrame) {
	if f.IsAck() {
		if !c.settingsAcked {
			c.settingsAcked = true
			// A server's SETTINGS_INITIAL_WINDOW_SIZE applies from the
			// ACK on: streams opened before it got the RFC's 65535. (A
			// client's streams get it at once: recvInitial is it.)
			delta := int32(c.cfg.Settings.InitialWindowSize) - c.recvInitial
			c.recvInitial = int32(c.cfg.Settings.InitialWindowSize)
			for _, st := range c.streams {
				st.recvWindow += int64(delta)
			}
		}
		return
	}
	opened := false
	for i := 0; i < f.NumSettings(); i++ {
		s := f.Setting(i)
		if err := s.Valid(); err != nil {
			var ce http2.ConnectionError
			if errors.As(err, &ce) {
				c.connError(http2.ErrCode(ce), "bad "+s.ID.String())
			} else {
				c.connError(http2.ErrCodeProtocol, "bad "+s.ID.String())
			}
			return
		}
		switch s.ID {
		case http2.SettingInitialWindowSize:
			delta := int64(s.Val) - int64(c.peerInitialWindow)
			c.peerInitialWindow = int32(s.Val)
			for _, st := range c.streams {
				st.sendWindow += delta
				if st.sendWindow > maxWindow {
					c.connError(http2.ErrCodeFlowControl, "SETTINGS_INITIAL_WINDOW_SIZE overflows a stream window")
					return
				}
			}
			opened = opened || delta > 0
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		case http2.SettingMaxConcurrentStreams:
			// bounds the streams a client opens; a server opens none
			c.peerMaxStreams = s.Val
		case http2.SettingEnablePush:
			if c.client && s.Val != 0 {
				// RFC 9113 §6.5.2: a server must not send 1
				c.connError(http2.ErrCodeProtocol, "SETTINGS_ENABLE_PUSH from a server")
				return
			}
		}
		// HEADER_TABLE_SIZE: our encoder uses no dynamic table, any
		// size suits it. MAX_HEADER_LIST_SIZE is advisory. ENABLE_PUSH
		// to a server: it never pushes.
	}
	if c.control() {
		_ = c.fr.WriteSettingsAck()
		c.ctrl.mark = len(c.out)
	}
	if opened {
		c.windowsOpened()
	}
}

// onRSTStream: the peer ended stream id. A client that resets streams
// counts glitches (rapid reset, CVE-2023-44487); a server resetting a
// request refuses or cancels it, its right.
func (c *connCore) onRSTStream(id uint32, code http2.ErrCode) {
	st := c.stream(id)
	if st == nil {
		if c.idle(id) {
			c.connError(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
			return
		}
		c.counts.ResetsReceived++
		return // closed: RFC 9113 §5.1 allows it
	}
	c.counts.ResetsReceived++
	c.remove(st, closedByPeerReset)
	c.side.reset(id, code)
	if !c.client {
		c.glitch("too many streams reset")
	}
}

// onWindowUpdate is parsed here, not by the Framer: it is the frame a
// downloading peer sends most, and the Framer allocates one per read.
func (c *connCore) onWindowUpdate(id uint32, p []byte) {
	if len(p) != 4 {
		c.connError(http2.ErrCodeFrameSize, "WINDOW_UPDATE length is not 4")
		return
	}
	incr := int64(binary.BigEndian.Uint32(p) & (1<<31 - 1))
	if id == 0 {
		if incr == 0 {
			c.connError(http2.ErrCodeProtocol, "WINDOW_UPDATE of 0")
			return
		}
		c.sendWindow += incr
		if c.sendWindow > maxWindow {
			c.connError(http2.ErrCodeFlowControl, "connection window above 2^31-1")
			return
		}
		c.connStalledSince = time.Time{}
		c.windowsOpened()
		return
	}
	st := c.stream(id)
	if st == nil {
		if c.idle(id) {
			c.connError(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
		}
		return // closed streams: allowed, ignored
	}
	if incr == 0 {
		c.streamError(id, http2.ErrCodeProtocol)
		return
	}
	st.sendWindow += incr
	if st.sendWindow > maxWindow {
		c.streamError(id, http2.ErrCodeFlowControl)
		return
	}
	if st.sendWindow > 0 && c.sendWindow > 0 && st.blocked {
		st.blocked = false
		st.stalledSince = time.Time{}
		c.side.windowOpened(id)
	}
}

// windowsOpened calls WindowOpened for the blocked streams that can send
// again. A callback may end streams: the table is walked by index from
// the end, each stream checked as it is reached.
func (c *connCore) windowsOpened() {
	if c.sendWindow <= 0 || c.err != nil {
		return
	}
	for i := len(c.streams) - 1; i >= 0; i-- {
		if i >= len(c.streams) {
			continue
		}
		st := c.streams[i]
		if st.blocked && st.sendWindow > 0 {
			st.blocked = false
			st.stalledSince = time.Time{}
			c.side.windowOpened(st.id)
			if c.sendWindow <= 0 || c.err != nil {
				return
			}
		}
	}
}

// onData is parsed here, not by the Framer: the payload is delivered from
// the caller's buffer without the Framer's copy.
func (c *connCore) onData(id uint32, flags http2.Flags, payload []byte) {
	if id == 0 {
		c.connError(http2.ErrCodeProtocol, "DATA on stream 0")
		return
	}
	data := payload
	if flags.Has(http2.FlagDataPadded) {
		if len(payload) == 0 || int(payload[0]) >= len(payload) {
			c.connError(http2.ErrCodeProtocol, "DATA padding too long")
			return
		}
		data = payload[1 : len(payload)-int(payload[0])]
	}
	size := int64(len(payload))
	if size > c.recvWindow {
		c.connError(http2.ErrCodeFlowControl, "DATA past the connection window")
		return
	}
	c.recvWindow -= size
	end := flags.Has(http2.FlagDataEndStream)
	st := c.stream(id)
	if st == nil || st.remoteClosed || !st.gotHead {
		// Not delivered: the connection window gets it back at once.
		c.credit(size)
		switch {
		case st != nil && c.client:
			// DATA before the final response head, or after END_STREAM
			c.streamError(id, http2.ErrCodeProtocol)
		case st != nil:
			c.streamError(id, http2.ErrCodeStreamClosed)
		default:
			c.onClosedStreamFrame(id, false)
		}
		return
	}
	if size > st.recvWindow {
		c.credit(size)
		c.streamError(id, http2.ErrCodeFlowControl)
		return
	}
	st.recvWindow -= size
	if pad := size - int64(len(data)); pad > 0 {
		// Padding is flow controlled but never delivered.
		c.credit(pad)
		st.recvCredit += pad
	}
	if len(data) == 0 && !end && !c.glitch("empty DATA frames") {
		return
	}
	st.received += int64(len(data))
	if st.contentLength >= 0 && (st.received > st.contentLength || end && st.received != st.contentLength) {
		// RFC 9113 §8.1.1: a body that disagrees with content-length
		// is malformed.
		c.credit(int64(len(data)))
		c.streamError(id, http2.ErrCodeProtocol)
		return
	}
	st.unconsumed += int64(len(data))
	if end {
		st.remoteClosed = true
	}
	c.side.data(id, data, end)
	if end {
		c.maybeClose(id)
	}
}

// onClosedStreamFrame answers DATA or HEADERS on a stream that is not in
// the table (RFC 9113 §5.1): idle is a connection error PROTOCOL_ERROR;
// one we reset is ignored (frames may still be in flight); one closed by
// END_STREAM both ways is a connection error STREAM_CLOSED; one the peer
// reset, or one too old to be remembered, is a glitch, and a server
// answers it with RST_STREAM STREAM_CLOSED, except HEADERS on an id it
// no longer remembers: PROTOCOL_ERROR, a reused id (§5.1.1).
func (c *connCore) onClosedStreamFrame(id uint32, headers bool) {
	if c.idle(id) {
		c.connError(http2.ErrCodeProtocol, "frame on an idle stream")
		return
	}
	how, ok := c.closedHow(id)
	switch {
	case ok && how == closedByUs:
		return
	case ok && how == closedNormally:
		c.connError(http2.ErrCodeStreamClosed, "frame after END_STREAM")
		return
	}
	if !c.glitch("frames on closed streams") || c.client {
		return
	}
	if !ok && headers {
		c.connError(http2.ErrCodeProtocol, "stream id reused")
		return
	}
	c.sendRST(id, http2.ErrCodeStreamClosed)
}

// credit gives n bytes back to the connection receive window, by a
// WINDOW_UPDATE once a quarter of the window is owed.
func (c *connCore) credit(n int64) {
	c.recvCredit += n
	if c.recvCredit >= int64(c.cfg.Limits.ConnWindowSize)/4 {
		c.recvWindow += c.recvCredit
		_ = c.framer().WriteWindowUpdate(0, uint32(c.recvCredit))
		c.recvCredit = 0
	}
}

// Consumed says n bytes of stream id's body (a request's for a Conn, a
// response's for a ClientConn) were forwarded (or dropped): they are
// given back to the peer's stream and connection windows, by
// WINDOW_UPDATE once a quarter of a window is owed. Memory per stream is
// thus bounded by its window. Unknown ids are ignored (a stream's
// unconsumed bytes go back when it ends).
func (c *connCore) Consumed(id uint32, n int) {
	st := c.stream(id)
	if st == nil || n <= 0 {
		return
	}
	k := min(int64(n), st.unconsumed)
	st.unconsumed -= k
	c.credit(k)
	if st.remoteClosed {
		return
	}
	st.recvCredit += k
	if st.recvCredit >= int64(c.recvInitial)/4 && st.recvCredit > 0 {
		st.recvWindow += st.recvCredit
		_ = c.framer().WriteWindowUpdate(id, uint32(st.recvCredit))
		st.recvCredit = 0
	}
}

// ResetStream ends stream id with RST_STREAM code (the other side gave
// up, a timeout): no handler call follows for it, late frames are
// ignored.
func (c *connCore) ResetStream(id uint32, code http2.ErrCode) {
	if c.stream(id) == nil || c.err != nil {
		return
	}
	c.sendRST(id, code)
}

// streamError answers a stream error (RFC 9113 §5.4.2): RST_STREAM, and
// Reset for the handler when it knew the stream. Every stream error is
// the peer's doing, so it counts as a glitch, as a client's own
// RST_STREAM does: else a client that makes us reset its streams (a
// WINDOW_UPDATE of 0 on each once its request reached the server:
// MadeYouReset, CVE-2025-8671) opens and cancels server requests without
// bound.
func (c *connCore) streamError(id uint32, code http2.ErrCode) {
	if !c.glitch("too many stream errors") {
		return
	}
	st := c.stream(id)
	if !c.sendRST(id, code) || st == nil {
		return
	}
	c.side.reset(id, code)
}

// sendRST queues RST_STREAM and forgets the stream; false when that
// failed the connection (too many queued).
func (c *connCore) sendRST(id uint32, code http2.ErrCode) bool {
	if !c.control() {
		return false
	}
	_ = c.framer().WriteRSTStream(id, code)
	c.counts.ResetsSent++
	c.ctrl.mark = len(c.out)
	if st := c.stream(id); st != nil {
		c.remove(st, closedByUs)
	} else {
		c.remember(id, closedByUs)
	}
	return true
}

// maxBlock bounds a header block's encoded size: an honest encoder never
// makes a block larger than the list it carries, so twice the list limit
// and a frame is room for a list we refuse as too large, and a
// CONTINUATION flood ends there.
func (c *connCore) maxBlock() int {
	return 2*int(c.cfg.Settings.MaxHeaderListSize) + int(c.cfg.Settings.MaxFrameSize)
}

// headersFragment reads a HEADERS frame's payload p (RFC 9113 §6.2)
// here, not by the Framer (which allocates a frame value per HEADERS: one
// per request): the padding and the deprecated priority fields skipped,
// selfDep when the stream depends on itself. false when that failed the
// connection.
func (c *connCore) headersFragment(id uint32, flags http2.Flags, p []byte) (frag []byte, selfDep, ok bool) {
	if id == 0 {
		c.connError(http2.ErrCodeProtocol, "HEADERS on stream 0")
		return nil, false, false
	}
	pad := 0
	if flags.Has(http2.FlagHeadersPadded) {
		if len(p) == 0 {
			c.connError(http2.ErrCodeFrameSize, "HEADERS too short for its pad length")
			return nil, false, false
		}
		pad = int(p[0])
		p = p[1:]
	}
	if flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			c.connError(http2.ErrCodeFrameSize, "HEADERS too short for its priority")
			return nil, false, false
		}
		selfDep = binary.BigEndian.Uint32(p)&(1<<31-1) == id
		p = p[5:]
	}
	if pad > len(p) {
		c.connError(http2.ErrCodeProtocol, "HEADERS padding too long")
		return nil, false, false
	}
	return p[:len(p)-pad], selfDep, true
}

// gather takes a HEADERS frame's fragment: decoded at once with
// END_HEADERS, else kept until the CONTINUATION with it.
func (c *connCore) gather(id uint32, flags http2.Flags, frag []byte) {
	if flags.Has(http2.FlagHeadersEndHeaders) {
		c.side.decode(frag)
		return
	}
	b := &c.blk
	b.active = true
	b.id = id
	b.conts = 0
	b.since = c.cfg.Now()
	b.buf = append(b.buf[:0], frag...)
}

// onContinuation: RFC 9113 §6.10, a fragment and END_HEADERS; the
// order (same stream, nothing between) is checked in frame.
func (c *connCore) onContinuation(flags http2.Flags, frag []byte) {
	b := &c.blk
	b.conts++
	if b.conts > c.cfg.Limits.MaxContinuations {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many CONTINUATION frames")
		return
	}
	if len(b.buf)+len(frag) > c.maxBlock() {
		c.connError(http2.ErrCodeEnhanceYourCalm, "header block too large")
		return
	}
	b.buf = append(b.buf, frag...)
	if flags.Has(http2.FlagContinuationEndHeaders) {
		b.active = false
		c.side.decode(b.buf)
	}
}

// decodeBlock runs a complete block through HPACK (the side's onField
// sees each field); false when that failed the connection.
func (c *connCore) decodeBlock(block []byte) bool {
	c.blk.active = false
	if len(block) > 0 {
		if _, err := c.dec.Write(block); err != nil {
			c.connError(http2.ErrCodeCompression, "HPACK: "+err.Error())
			return false
		}
	}
	if err := c.dec.Close(); err != nil {
		c.connError(http2.ErrCodeCompression, "HPACK: "+err.Error())
		return false
	}
	return true
}

// encodeField lowercases name and adds the field to the block being
// built, unless it is connection-specific, not a valid field, or (in a
// request, whose :authority carries it) host.
func (c *connCore) encodeField(name, value []byte, request bool) {
	n := append(c.lname[:0], name...)
	c.lname = n
	for i, b := range n {
		// lowercased and checked in one pass: not a token (':' of a
		// pseudo-header field included) maps to 0
		if n[i] = lowerToken[b]; n[i] == 0 {
			return
		}
	}
	if len(n) == 0 || connectionSpecific(n) || request && string(n) == "host" ||
		!http1.ValidFieldValue(value) {
		return
	}
	c.writeField(stringOf(n), stringOf(value))
}

// lowerToken maps a token character (RFC 9110 tchar) to its lowercase,
// every other byte to 0. Filled once at init, read only after.
var lowerToken = func() (t [256]byte) {
	for b := range 256 {
		if http1.IsToken([]byte{byte(b)}) {
			t[b] = byte(b)
			if b >= 'A' && b <= 'Z' {
				t[b] += 'a' - 'A'
			}
		}
	}
	return t
}()

// appendFrameHeader appends a frame header to the output.
func (c *connCore) appendFrameHeader(length int, typ http2.FrameType, flags http2.Flags, id uint32) {
	c.out = append(c.out, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

// writeBlock sends the block built in eblock as HEADERS and as many
// CONTINUATION frames as the peer's SETTINGS_MAX_FRAME_SIZE requires.
// Written here rather than by the Framer: it copies once, into Output.
func (c *connCore) writeBlock(id uint32, endStream bool) {
	block := c.eblock
	maxF := int(c.peerMaxFrame)
	typ := http2.FrameHeaders
	for {
		n := min(len(block), maxF)
		var flags http2.Flags
		if n == len(block) {
			flags |= http2.FlagHeadersEndHeaders
		}
		if typ == http2.FrameHeaders && endStream {
			flags |= http2.FlagHeadersEndStream
		}
		c.appendFrameHeader(n, typ, flags, id)
		c.out = append(c.out, block[:n]...)
		block = block[n:]
		if len(block) == 0 {
			break
		}
		typ = http2.FrameContinuation
	}
	c.eblock = c.eblock[:0]
}

// sendData queues up to len(p) bytes of st's body as DATA frames no
// larger than the peer's SETTINGS_MAX_FRAME_SIZE, within the stream's and
// the connection's send windows, and returns how many it took and whether
// that ended the stream (endStream and all of p taken: the caller closes
// its side). Taking less than len(p) blocks the stream until
// WindowOpened, and notes since when it (and the connection) stalled.
func (c *connCore) sendData(st *stream, p []byte, endStream bool) (n int, done bool) {
	id := st.id
	w := min(st.sendWindow, c.sendWindow)
	n = int(min(int64(len(p)), max(w, 0)))
	maxF := int(c.peerMaxFrame)
	done = endStream && n == len(p)
	if n == 0 && done {
		c.appendFrameHeader(0, http2.FrameData, http2.FlagDataEndStream, id)
	}
	for off := 0; off < n; {
		k := min(n-off, maxF)
		var flags http2.Flags
		if done && off+k == n {
			flags = http2.FlagDataEndStream
		}
		c.appendFrameHeader(k, http2.FrameData, flags, id)
		c.out = append(c.out, p[off:off+k]...)
		off += k
	}
	st.sendWindow -= int64(n)
	c.sendWindow -= int64(n)
	if n < len(p) {
		st.blocked = true
		now := time.Time{}
		if st.stalledSince.IsZero() {
			now = c.cfg.Now()
			st.stalledSince = now
		}
		if c.sendWindow <= 0 && c.connStalledSince.IsZero() {
			if now.IsZero() {
				now = c.cfg.Now()
			}
			c.connStalledSince = now
		}
	}
	return n, done
}
