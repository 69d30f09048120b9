package h2

import (
	"encoding/binary"
	"errors"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// Preface is the client connection preface (RFC 9113 §3.4). A loop that
// sniffs h2c prior knowledge on a clear bind compares its first bytes
// with it.
const Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

const (
	frameHeaderLen = 9
	// rfcInitialWindow is the initial window of every stream and of the
	// connection until SETTINGS say otherwise (RFC 9113 §6.9.2).
	rfcInitialWindow = 65535
	rfcMinFrameSize  = 16384
	rfcMaxFrameSize  = 1<<24 - 1
	maxWindow        = 1<<31 - 1
	// headerTableSize is the HPACK dynamic table we let the client use
	// (the RFC default, not advertised): it bounds what the decoder keeps
	// per connection, idle or not.
	headerTableSize = 4096
	closedRingLen   = 32
)

// Defaults of Settings and Limits: each says what it buys.
const (
	// DefaultMaxConcurrentStreams: HAProxy's and nginx's order (100 and
	// 128); the RFC's default is unlimited, which no server advertises.
	DefaultMaxConcurrentStreams = 100
	// DefaultInitialWindowSize is the RFC's: 64 KiB - 1 per stream, so a
	// stream holds at most that much request body not yet forwarded.
	DefaultInitialWindowSize = rfcInitialWindow
	// DefaultMaxFrameSize is the RFC's minimum: a DATA frame fits a
	// 16 KiB buffer.
	DefaultMaxFrameSize = rfcMinFrameSize
	// DefaultMaxHeaderListSize is the proxy's default bufsize: the
	// HTTP/1.1 head written from a list this size fits one buffer
	// (the list counts 32 bytes per field on top of name and value,
	// more than the 4 of ": " and CRLF).
	DefaultMaxHeaderListSize = 16384
	// DefaultConnWindowSize (1 MiB) lets a connection carry 16 streams'
	// default windows at once; it bounds the request body a connection
	// holds that its streams have not forwarded.
	DefaultConnWindowSize = 1 << 20
	// DefaultMaxGlitches per DefaultGlitchWindow: a browser cancels a
	// few streams when the user navigates; the rapid-reset attack
	// (CVE-2023-44487) resets thousands per second.
	DefaultMaxGlitches  = 100
	DefaultGlitchWindow = time.Second
	// DefaultMaxContinuations per header block: a 16 KiB list sent in
	// 1 KiB frames needs 16; the CONTINUATION flood (CVE-2024-27316)
	// sends them without end.
	DefaultMaxContinuations = 32
	// DefaultMaxQueuedControl frames (SETTINGS and PING ACKs, RST_STREAM)
	// offered by Output and not yet drained: a peer that sends them
	// faster than it reads our answers is a flood (CVE-2019-9512, -9515). Go's server
	// allows 10000; 1000 is 9-17 KiB of output.
	DefaultMaxQueuedControl = 1000
	// maxControlBurst times MaxQueuedControl bounds the control frames
	// queued between two Output calls: 10000 by default, Go's server's
	// limit (90-170 KB of ACKs).
	maxControlBurst = 10
	// DefaultMaxFields bounds the regular fields of a request as
	// http1.MaxHeaders does for HTTP/1.1: the head written from it
	// parses back.
	DefaultMaxFields = 100
)

// Settings are the values advertised in our SETTINGS frame; zero fields
// mean the defaults above.
type Settings struct {
	MaxConcurrentStreams uint32
	InitialWindowSize    uint32 // at most 2^31-1
	MaxFrameSize         uint32 // 16384 to 2^24-1
	MaxHeaderListSize    uint32
}

// Limits bound what a hostile client can make a connection do; zero
// fields mean the defaults above.
type Limits struct {
	// ConnWindowSize is the connection receive window (WINDOW_UPDATE on
	// stream 0 right after our SETTINGS when above 65535).
	ConnWindowSize uint32
	// MaxGlitches client RST_STREAMs, refused streams, frames on closed
	// streams and empty DATA frames per GlitchWindow; one more is
	// GOAWAY ENHANCE_YOUR_CALM.
	MaxGlitches  int
	GlitchWindow time.Duration
	// MaxContinuations per header block; one more is GOAWAY
	// ENHANCE_YOUR_CALM. The block's encoded size is bounded too, to
	// twice MaxHeaderListSize plus one frame.
	MaxContinuations int
	// MaxQueuedControl ACKs and RST_STREAMs offered by Output and not
	// yet drained (a burst fed before the caller could write is not held
	// against the peer, up to 10 times as many); one more is GOAWAY
	// ENHANCE_YOUR_CALM.
	MaxQueuedControl int
	// MaxFields regular fields per request; more is a 431 response.
	MaxFields int
}

// Config is what NewConn needs. Now, when nil, is time.Now; a loop passes
// its cached clock.
type Config struct {
	Settings Settings
	Limits   Limits
	Now      func() time.Time
}

func (c *Config) resolve() {
	s := &c.Settings
	if s.MaxConcurrentStreams == 0 {
		s.MaxConcurrentStreams = DefaultMaxConcurrentStreams
	}
	if s.InitialWindowSize == 0 {
		s.InitialWindowSize = DefaultInitialWindowSize
	}
	s.InitialWindowSize = min(s.InitialWindowSize, maxWindow)
	if s.MaxFrameSize == 0 {
		s.MaxFrameSize = DefaultMaxFrameSize
	}
	s.MaxFrameSize = min(max(s.MaxFrameSize, rfcMinFrameSize), rfcMaxFrameSize)
	if s.MaxHeaderListSize == 0 {
		s.MaxHeaderListSize = DefaultMaxHeaderListSize
	}
	l := &c.Limits
	if l.ConnWindowSize == 0 {
		l.ConnWindowSize = DefaultConnWindowSize
	}
	l.ConnWindowSize = min(max(l.ConnWindowSize, rfcInitialWindow), maxWindow)
	if l.MaxGlitches == 0 {
		l.MaxGlitches = DefaultMaxGlitches
	}
	if l.GlitchWindow == 0 {
		l.GlitchWindow = DefaultGlitchWindow
	}
	if l.MaxContinuations == 0 {
		l.MaxContinuations = DefaultMaxContinuations
	}
	if l.MaxQueuedControl == 0 {
		l.MaxQueuedControl = DefaultMaxQueuedControl
	}
	if l.MaxFields == 0 {
		l.MaxFields = DefaultMaxFields
	}
	if c.Now == nil {
		c.Now = time.Now
	}
}

// Handler receives a connection's requests. Every call comes from inside
// Feed, on the loop's thread. The *Request, its Fields slice and p are
// valid only during the call (the field strings themselves are immutable
// and may be kept). A Handler may call the Conn's stream methods
// (Respond, SendData, Consumed, ResetStream...) from inside a callback.
type Handler interface {
	// Headers opens stream id with a validated request; endStream says
	// no body follows.
	Headers(id uint32, req *Request, endStream bool)
	// Data delivers request body bytes (possibly none when endStream).
	// The client's window shrinks by len(p) until Consumed gives it back.
	// Once the response ended (our END_STREAM) no call names the stream:
	// a body still coming is stopped with RST_STREAM NO_ERROR.
	Data(id uint32, p []byte, endStream bool)
	// Trailers ends the request body with trailer fields (no pseudo-
	// header fields, names lowercase, validated as request fields).
	Trailers(id uint32, fields []hpack.HeaderField)
	// Reset says stream id ended abnormally: the client reset it
	// (code is the client's) or it broke a rule (code is the one we
	// sent). No further call names id; what the stream held (request
	// body not consumed) is already given back to the connection.
	Reset(id uint32, code http2.ErrCode)
	// WindowOpened says a stream whose SendData took less than offered
	// may send again.
	WindowOpened(id uint32)
}

// Error is a connection error: Feed returns it after queueing GOAWAY
// with Code, and every later Feed returns it too.
type Error struct {
	Code   http2.ErrCode
	Reason string
}

func (e *Error) Error() string { return "h2: " + e.Code.String() + ": " + e.Reason }

// Errors of the stream methods.
var (
	// ErrStreamClosed: the stream does not exist (never opened, closed,
	// or reset) or may not send what was asked (after END_STREAM).
	ErrStreamClosed = errors.New("h2: stream closed")
	// ErrResponseState: a response head was already sent, or none yet
	// before SendData/SendTrailers, or status is not valid for HTTP/2.
	ErrResponseState = errors.New("h2: response out of order")
)

type connState uint8

const (
	statePreface  connState = iota // reading the client preface
	stateSettings                  // preface read, waiting for the client's first SETTINGS
	stateOpen
	stateFailed // connection error queued; nothing more is read
)

// Conn is the server side of one HTTP/2 connection: bytes in (Feed),
// bytes out (Output, Drained), requests to a Handler, responses from the
// stream methods. It does no I/O, starts no goroutine, and belongs to one
// loop's thread.
type Conn struct {
	cfg Config
	h   Handler

	state    connState
	prefaceN int
	err      *Error

	fr *http2.Framer // nil while idle after ReleaseBuffers; see framer()
	rd frameReader
	wr outWriter

	out    []byte
	outOff int

	dec *hpack.Decoder
	enc *hpack.Encoder
	hb  headerBlock
	req Request

	// outgoing header block being built by the encoder
	eblock []byte
	lname  []byte // lowercase name scratch
	status [3]byte

	// peer's settings
	peerMaxFrame      uint32
	peerInitialWindow int32
	peerGoAway        bool

	sendWindow       int64 // connection: what we may still send
	recvWindow       int64 // connection: what the client may still send
	recvCredit       int64 // consumed, not yet given back by WINDOW_UPDATE
	recvInitial      int32 // stream initial receive window in effect
	settingsAcked    bool
	connStalledSince time.Time

	streams  []*stream
	free     []*stream
	lastID   uint32 // highest client stream id seen
	goAway   bool   // GOAWAY sent
	goAwayID uint32

	closed  [closedRingLen]closedStream
	closedN int

	glitches    int
	glitchStart time.Time
	queuedCtrl  int
	offeredCtrl int  // of queuedCtrl, those Output returned
	feeding     bool // inside Feed: Output offers nothing
	counts      Counts
	ctrlMark    int     // end of the last control frame in out
	muted       bool    // the decoder's output is nobody's (ReleaseBuffers)
	unpin       [1]byte // see ReleaseBuffers
}

// NewConn returns a connection that has queued its SETTINGS (and the
// connection WINDOW_UPDATE): drain Output once the socket is writable.
func NewConn(cfg Config, h Handler) *Conn {
	cfg.resolve()
	c := &Conn{
		cfg:               cfg,
		h:                 h,
		peerMaxFrame:      rfcMinFrameSize,
		peerInitialWindow: rfcInitialWindow,
		sendWindow:        rfcInitialWindow,
		recvWindow:        rfcInitialWindow,
		recvInitial:       rfcInitialWindow,
	}
	c.wr.c = c
	c.dec = hpack.NewDecoder(headerTableSize, c.onField)
	// A string longer than the list limit can only be refused; the
	// decoder then stops (COMPRESSION_ERROR) instead of buffering it.
	c.dec.SetMaxStringLength(int(cfg.Settings.MaxHeaderListSize))
	c.enc = hpack.NewEncoder(blockWriter{c})
	// No dynamic table for what we send (HAProxy's choice too): a
	// field's strings may alias the caller's buffer, and the first block
	// tells the client its table is 0.
	c.enc.SetMaxDynamicTableSizeLimit(0)
	s := cfg.Settings
	fr := c.framer()
	var set [4]http2.Setting
	n := 0
	set[n] = http2.Setting{ID: http2.SettingMaxConcurrentStreams, Val: s.MaxConcurrentStreams}
	n++
	if s.InitialWindowSize != rfcInitialWindow {
		set[n] = http2.Setting{ID: http2.SettingInitialWindowSize, Val: s.InitialWindowSize}
		n++
	}
	if s.MaxFrameSize != rfcMinFrameSize {
		set[n] = http2.Setting{ID: http2.SettingMaxFrameSize, Val: s.MaxFrameSize}
		n++
	}
	set[n] = http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: s.MaxHeaderListSize}
	n++
	_ = fr.WriteSettings(set[:n]...)
	if w := cfg.Limits.ConnWindowSize; w > rfcInitialWindow {
		_ = fr.WriteWindowUpdate(0, w-rfcInitialWindow)
		c.recvWindow = int64(w)
	}
	return c
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
type outWriter struct{ c *Conn }

func (w outWriter) Write(p []byte) (int, error) {
	w.c.out = append(w.c.out, p...)
	return len(p), nil
}

// blockWriter collects the encoder's output into the header block.
type blockWriter struct{ c *Conn }

func (w blockWriter) Write(p []byte) (int, error) {
	w.c.eblock = append(w.c.eblock, p...)
	return len(p), nil
}

// framer returns the Framer, making it again after ReleaseBuffers: between
// frames it keeps nothing we need (we check the HEADERS/CONTINUATION order
// ourselves, before it does), only its read and write buffers.
func (c *Conn) framer() *http2.Framer {
	if c.fr == nil {
		c.fr = http2.NewFramer(&c.wr, &c.rd)
		c.fr.SetReuseFrames()
		c.fr.SetMaxReadFrameSize(c.cfg.Settings.MaxFrameSize)
	}
	return c.fr
}

// Output is what the Conn has to send, in order; write it to the socket
// and call Drained with what was written.
func (c *Conn) Output() []byte {
	if !c.feeding {
		c.offeredCtrl = c.queuedCtrl
	}
	return c.out[c.outOff:]
}

// Drained says the first n bytes of Output were written.
func (c *Conn) Drained(n int) {
	c.outOff += n
	if c.outOff >= c.ctrlMark {
		// every control frame queued so far is written
		c.queuedCtrl, c.offeredCtrl = 0, 0
	}
	if c.outOff >= len(c.out) {
		c.out = c.out[:0]
		c.outOff = 0
		c.ctrlMark = 0
	}
}

// Err is the connection error, nil while the connection is sound.
func (c *Conn) Err() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

// Done reports that the connection has nothing left to do once Output is
// drained: a connection error was queued, or a GOAWAY was sent or received
// and no stream is left.
func (c *Conn) Done() bool {
	return c.state == stateFailed || ((c.goAway || c.peerGoAway) && len(c.streams) == 0 && !c.hb.active)
}

// Idle reports that no stream is open, no header block is half read and
// nothing waits in Output: the moment to ReleaseBuffers.
func (c *Conn) Idle() bool {
	return len(c.streams) == 0 && !c.hb.active && c.outOff == len(c.out)
}

// ReleaseBuffers gives back what an idle connection does not need: the
// output buffer, the Framer (its read and write buffers), the header block
// scratch and the free streams; nor does it keep the caller's input
// buffer. An idle Conn then holds only itself, the
// HPACK decoder with its dynamic table (at most 4096 bytes of fields, the
// table size the RFC grants by default) and the encoder (no table). It is a
// no-op on a connection that is not Idle.
func (c *Conn) ReleaseBuffers() {
	if !c.Idle() {
		return
	}
	// x/net's HPACK Decoder keeps a slice of the last block it read
	// (Decoder.buf), which pins the caller's input buffer: a one-byte
	// block of a static-table field, given to nobody (muted), moves it
	// onto the Conn itself.
	c.muted = true
	c.unpin[0] = 0x82 // indexed :method GET
	_, _ = c.dec.Write(c.unpin[:])
	_ = c.dec.Close()
	c.muted = false
	c.out, c.outOff = nil, 0
	c.fr = nil
	c.hb.buf = nil
	c.eblock = nil
	c.lname = nil
	c.req.Fields = nil
	clear(c.free)
	c.free = nil
	c.streams = nil
}

// Feed reads the complete frames at the start of p and returns how many
// bytes it consumed: a frame not complete in p is left for the next call
// (keep the unconsumed bytes at the start of the next p). A frame longer
// than our SETTINGS_MAX_FRAME_SIZE is refused as soon as its header is in.
// The caller's input buffer must hold MaxFrameLen bytes (16393 with the
// default MaxFrameSize: 9 more than a 16 KiB buffer), or a full-size
// frame never fits. On a connection error Feed queues GOAWAY and returns
// an *Error: drain Output, then close. No Handler call follows a connection error: the
// caller ends every stream it holds.
func (c *Conn) Feed(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := 0
	if c.state == statePreface {
		k := min(len(p), len(Preface)-c.prefaceN)
		if string(p[:k]) != Preface[c.prefaceN:c.prefaceN+k] {
			return k, c.connError(http2.ErrCodeProtocol, "bad connection preface")
		}
		c.prefaceN += k
		n = k
		if c.prefaceN < len(Preface) {
			return n, nil
		}
		c.state = stateSettings
	}
	c.feeding = true
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
	c.feeding = false
	if c.err != nil {
		return n, c.err
	}
	return n, nil
}

// MaxFrameLen is the longest frame Feed accepts, header included: the
// least input buffer a connection needs.
func (c *Conn) MaxFrameLen() int { return frameHeaderLen + int(c.cfg.Settings.MaxFrameSize) }

// connError queues GOAWAY with code and fails the connection.
func (c *Conn) connError(code http2.ErrCode, reason string) error {
	if c.err == nil {
		c.err = &Error{Code: code, Reason: reason}
		c.state = stateFailed
		_ = c.framer().WriteGoAway(c.lastID, code, nil)
		c.goAway = true
		c.goAwayID = c.lastID
	}
	return c.err
}

// GoAway starts a graceful stop (stop, drain, frontend removed): GOAWAY
// NO_ERROR with the last stream id seen; streams up to it finish, later
// ones are ignored. Done says when the connection may close.
func (c *Conn) GoAway() {
	if c.goAway || c.state == stateFailed {
		return
	}
	c.goAway = true
	c.goAwayID = c.lastID
	_ = c.framer().WriteGoAway(c.lastID, http2.ErrCodeNo, nil)
}

// glitch counts one suspicious event (HAProxy's word): past MaxGlitches in
// one GlitchWindow the connection ends with ENHANCE_YOUR_CALM.
func (c *Conn) glitch(what string) bool {
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

// control counts one queued control frame (an ACK or a RST_STREAM); the
// count goes back to 0 once Output is drained past the last one
// (ctrlMark), so a long download always queued behind does not add up
// the pings of its whole life. A frame counts against MaxQueuedControl
// once Output offered it to the caller: a loop reads its socket until
// EAGAIN (up to its run's budget) before it writes, so a client that
// sends a burst of PINGs and reads the ACKs promptly had no chance to
// read any while the burst was fed. As HAProxy and nginx do, what is
// held against a peer is what it was sent and did not read. A burst is
// bounded too, at maxControlBurst times the limit, for a caller that
// feeds without asking for Output.
func (c *Conn) control() bool {
	c.queuedCtrl++
	if c.offeredCtrl > c.cfg.Limits.MaxQueuedControl || c.queuedCtrl > maxControlBurst*c.cfg.Limits.MaxQueuedControl {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many control frames queued")
		return false
	}
	return true
}

// frame handles one complete frame f (header included).
func (c *Conn) frame(f []byte) {
	typ := http2.FrameType(f[3])
	flags := http2.Flags(f[4])
	id := binary.BigEndian.Uint32(f[5:9]) & (1<<31 - 1)

	// RFC 9113 §6.10: a header block is a contiguous run of frames.
	if c.hb.active {
		if typ != http2.FrameContinuation || id != c.hb.id {
			c.connError(http2.ErrCodeProtocol, "header block interrupted")
			return
		}
	} else if typ == http2.FrameContinuation {
		c.connError(http2.ErrCodeProtocol, "CONTINUATION without a header block")
		return
	}
	if c.state == stateSettings {
		if typ != http2.FrameSettings || flags.Has(http2.FlagSettingsAck) {
			c.connError(http2.ErrCodeProtocol, "first frame is not SETTINGS")
			return
		}
		c.state = stateOpen
	}

	switch typ {
	case http2.FrameData:
		c.onData(id, flags, f[frameHeaderLen:])
		return
	case http2.FrameWindowUpdate:
		c.onWindowUpdate(id, f[frameHeaderLen:])
		return
	case http2.FrameHeaders:
		c.onHeaders(id, flags, f[frameHeaderLen:])
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
		c.onRSTStream(fr)
	case *http2.SettingsFrame:
		c.onSettings(fr)
	case *http2.PushPromiseFrame:
		c.connError(http2.ErrCodeProtocol, "PUSH_PROMISE from a client")
	case *http2.PingFrame:
		if fr.IsAck() {
			return
		}
		if c.control() {
			_ = c.fr.WritePing(true, fr.Data)
			c.ctrlMark = len(c.out)
		}
	case *http2.GoAwayFrame:
		c.peerGoAway = true
	}
}

func frameErrorReason(fr *http2.Framer, typ http2.FrameType) string {
	if d := fr.ErrorDetail(); d != nil {
		return d.Error()
	}
	return "bad " + typ.String() + " frame"
}

func (c *Conn) onSettings(f *http2.SettingsFrame) {
	if f.IsAck() {
		if !c.settingsAcked {
			c.settingsAcked = true
			// Our SETTINGS_INITIAL_WINDOW_SIZE applies from the ACK on:
			// streams opened before it got the RFC's 65535.
			delta := int32(c.cfg.Settings.InitialWindowSize) - c.recvInitial
			c.recvInitial = int32(c.cfg.Settings.InitialWindowSize)
			for _, st := range c.streams {
				st.recvWindow += int64(delta)
			}
		}
		return
	}
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
			if delta > 0 {
				defer c.windowsOpened()
			}
		case http2.SettingMaxFrameSize:
			c.peerMaxFrame = s.Val
		}
		// HEADER_TABLE_SIZE: our encoder uses no dynamic table, any
		// size suits it. MAX_HEADER_LIST_SIZE is advisory. ENABLE_PUSH:
		// we never push. MAX_CONCURRENT_STREAMS: we open none.
	}
	if c.control() {
		_ = c.fr.WriteSettingsAck()
		c.ctrlMark = len(c.out)
	}
}

func (c *Conn) onRSTStream(f *http2.RSTStreamFrame) {
	id := f.StreamID
	st := c.stream(id)
	if st == nil {
		if id > c.lastID {
			c.connError(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
			return
		}
		c.counts.ResetsReceived++
		return // closed: RFC 9113 §5.1 allows it
	}
	c.counts.ResetsReceived++
	c.remove(st, closedByPeerReset)
	c.h.Reset(id, f.ErrCode)
	c.glitch("too many streams reset")
}

// onWindowUpdate is parsed here, not by the Framer: it is the frame a
// downloading client sends most, and the Framer allocates one per read.
func (c *Conn) onWindowUpdate(id uint32, p []byte) {
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
		if id > c.lastID {
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
		c.h.WindowOpened(id)
	}
}

// windowsOpened calls WindowOpened for the blocked streams that can send
// again. A callback may end streams: the table is walked by index from
// the end, each stream checked as it is reached.
func (c *Conn) windowsOpened() {
	if c.sendWindow <= 0 {
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
			c.h.WindowOpened(st.id)
			if c.sendWindow <= 0 || c.err != nil {
				return
			}
		}
	}
}

// onData is parsed here, not by the Framer: the payload is delivered from
// the caller's buffer without the Framer's copy.
func (c *Conn) onData(id uint32, flags http2.Flags, payload []byte) {
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
	if st == nil || st.remoteClosed {
		// Not delivered: the connection window gets it back at once.
		c.credit(size)
		if st != nil {
			c.streamError(id, http2.ErrCodeStreamClosed)
			return
		}
		c.onClosedStreamFrame(id, false)
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
	c.h.Data(id, data, end)
	if end {
		c.maybeClose(id)
	}
}

// onClosedStreamFrame answers DATA or HEADERS on a stream that is not in
// the table (RFC 9113 §5.1): idle (above lastID) is a connection error
// PROTOCOL_ERROR; one we reset is ignored (frames may still be in
// flight); one closed by END_STREAM both ways is a connection error
// STREAM_CLOSED; one the client reset, or one too old to be remembered,
// gets RST_STREAM STREAM_CLOSED, except HEADERS on an id we no longer
// remember: PROTOCOL_ERROR, a reused id (§5.1.1).
func (c *Conn) onClosedStreamFrame(id uint32, headers bool) {
	if id > c.lastID {
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
	if !c.glitch("frames on closed streams") {
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
func (c *Conn) credit(n int64) {
	c.recvCredit += n
	if c.recvCredit >= int64(c.cfg.Limits.ConnWindowSize)/4 {
		c.recvWindow += c.recvCredit
		_ = c.framer().WriteWindowUpdate(0, uint32(c.recvCredit))
		c.recvCredit = 0
	}
}

// Consumed says n bytes of stream id's request body were forwarded (or
// dropped): they are given back to the client's stream and connection
// windows. Memory per stream is thus bounded by its window. Unknown ids
// are ignored (a stream's unconsumed bytes go back when it ends).
func (c *Conn) Consumed(id uint32, n int) {
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

// ResetStream ends stream id with RST_STREAM code (the server gave up, a
// timeout): no Handler call follows for it.
func (c *Conn) ResetStream(id uint32, code http2.ErrCode) {
	if c.stream(id) == nil || c.state == stateFailed {
		return
	}
	c.sendRST(id, code)
}

// streamError answers a stream error (RFC 9113 §5.4.2): RST_STREAM, and
// Reset for the Handler when it knew the stream. Every stream error is the
// client's doing, so it counts as a glitch, as the client's own RST_STREAM
// does: else a client that makes us reset its streams (a WINDOW_UPDATE of
// 0 on each once its request reached the server: MadeYouReset,
// CVE-2025-8671) opens and cancels server requests without bound.
func (c *Conn) streamError(id uint32, code http2.ErrCode) {
	if !c.glitch("too many stream errors") {
		return
	}
	st := c.stream(id)
	if !c.sendRST(id, code) || st == nil {
		return
	}
	c.h.Reset(id, code)
}

// sendRST queues RST_STREAM and forgets the stream; false when that
// failed the connection (too many queued).
func (c *Conn) sendRST(id uint32, code http2.ErrCode) bool {
	if !c.control() {
		return false
	}
	_ = c.framer().WriteRSTStream(id, code)
	c.counts.ResetsSent++
	c.ctrlMark = len(c.out)
	if st := c.stream(id); st != nil {
		c.remove(st, closedByUs)
	} else {
		c.remember(id, closedByUs)
	}
	return true
}
