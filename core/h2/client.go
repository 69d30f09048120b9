package h2

import (
	"encoding/binary"
	"errors"
	"net/http"
	"strconv"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

// ClientConfig is what NewClientConn needs: the Config of the server
// side (our SETTINGS, the hostile-peer Limits, the clock) and the scheme
// of the requests (:scheme), "http" when empty.
type ClientConfig struct {
	Config
	Scheme string
}

// ClientHandler receives a server connection's responses. Every call
// comes from inside Feed, on the loop's thread. fields and p are valid
// only during the call (the field strings themselves are immutable and
// may be kept). A ClientHandler may call the ClientConn's methods from
// inside a callback.
type ClientHandler interface {
	// Response delivers a validated response head on stream id: an
	// interim 1xx (more heads follow) or the final one; endStream says
	// no body follows. fields are the regular fields, names lowercase.
	Response(id uint32, status int, fields []hpack.HeaderField, endStream bool)
	// Data delivers response body bytes (possibly none when endStream).
	// The server's window shrinks by len(p) until Consumed gives it back.
	Data(id uint32, p []byte, endStream bool)
	// Trailers ends the response body with trailer fields (grpc-status).
	Trailers(id uint32, fields []hpack.HeaderField)
	// Reset says stream id ended abnormally: the server reset it (code
	// is the server's: REFUSED_STREAM means not processed, safe to
	// retry), the response broke a rule (code is the one we sent), or a
	// GOAWAY left it unprocessed (REFUSED_STREAM). No further call names
	// id.
	Reset(id uint32, code http2.ErrCode)
	// GoAway says the server stops: streams above lastID were not
	// processed (each also gets Reset REFUSED_STREAM, after this call)
	// and may be retried on another connection; no stream may be opened
	// any more.
	GoAway(lastID uint32, code http2.ErrCode)
	// WindowOpened says a stream whose SendData took less than offered
	// may send again.
	WindowOpened(id uint32)
}

// Errors of OpenStream and RequestHTTP1.
var (
	// ErrNoStream: no stream may be opened now (CanOpen is false).
	ErrNoStream = errors.New("h2: no stream can be opened")
	// ErrRequest: the request cannot be sent over HTTP/2 (CONNECT, an
	// upgrade, no authority).
	ErrRequest = errors.New("h2: request not expressible in HTTP/2")
)

// cstream is one request/response exchange of a ClientConn.
type cstream struct {
	id           uint32
	localClosed  bool // END_STREAM sent
	remoteClosed bool // END_STREAM received
	final        bool // final response head received
	noBody       bool // HEAD request: content-length says nothing of DATA
	blocked      bool
	stalledSince time.Time

	sendWindow int64
	recvWindow int64
	recvCredit int64
	unconsumed int64

	contentLength int64
	received      int64
}

// respBlock is the response header block being read.
type respBlock struct {
	active    bool
	id        uint32
	endStream bool
	deliver   bool // the stream exists: decode its fields for the handler
	trailers  bool
	buf       []byte
	conts     int
	since     time.Time

	listSize  uint32
	tooLarge  bool
	malformed bool
	regular   bool
	status    int
	cl        int64
	fields    []hpack.HeaderField
}

// ClientConn is the client side of one HTTP/2 connection to a server:
// requests in (RequestHTTP1, OpenStream, SendData, SendTrailers), bytes
// out (Output, Drained), bytes read from the server in (Feed), responses
// to a ClientHandler. It does no I/O, starts no goroutine, and belongs to
// one loop's thread.
type ClientConn struct {
	cfg ClientConfig
	h   ClientHandler

	gotSettings bool
	err         *Error

	fr *http2.Framer
	rd frameReader

	out    []byte
	outOff int

	dec *hpack.Decoder
	enc *hpack.Encoder
	hb  respBlock

	eblock []byte
	lname  []byte

	peerMaxFrame      uint32
	peerInitialWindow int32
	peerMaxStreams    uint32
	peerGoAway        bool
	goAway            bool

	sendWindow       int64
	recvWindow       int64
	recvCredit       int64
	connStalledSince time.Time

	streams []*cstream
	free    []*cstream
	nextID  uint32
	closed  [closedRingLen]closedStream
	closedN int

	glitches    int
	glitchStart time.Time
	queuedCtrl  int
	offeredCtrl int  // of queuedCtrl, those Output returned
	feeding     bool // inside Feed: Output offers nothing
	ctrlMark    int

	pingData  [8]byte
	pingSince time.Time
	unpin     [1]byte // see ReleaseBuffers
}

// Ping sends a PING to check that an idle pooled connection is alive;
// PingPendingSince says since when its ACK is awaited. A PING already
// pending is not sent again.
func (c *ClientConn) Ping() {
	if c.err != nil || !c.pingSince.IsZero() {
		return
	}
	c.pingSince = c.cfg.Now()
	binary.BigEndian.PutUint64(c.pingData[:], uint64(c.pingSince.UnixNano()))
	_ = c.framer().WritePing(false, c.pingData)
}

// PingPendingSince is when the PING still unanswered was sent, zero when
// none is: a server silent past the caller's timeout is dead.
func (c *ClientConn) PingPendingSince() time.Time { return c.pingSince }

// clientOut appends the Framer's frames to the output.
type clientOut struct{ c *ClientConn }

func (w clientOut) Write(p []byte) (int, error) {
	w.c.out = append(w.c.out, p...)
	return len(p), nil
}

type clientBlock struct{ c *ClientConn }

func (w clientBlock) Write(p []byte) (int, error) {
	w.c.eblock = append(w.c.eblock, p...)
	return len(p), nil
}

// initialMaxStreams bounds OpenStream until the server's SETTINGS say
// otherwise (the RFC's default is unlimited; Go's client assumes 100).
const initialMaxStreams = 100

// NewClientConn returns a connection that has queued the client preface,
// its SETTINGS (ENABLE_PUSH 0) and the connection WINDOW_UPDATE: drain
// Output once the socket is writable. Requests may be sent at once,
// before the server's SETTINGS arrive.
func NewClientConn(cfg ClientConfig, h ClientHandler) *ClientConn {
	cfg.resolve()
	if cfg.Scheme == "" {
		cfg.Scheme = "http"
	}
	c := &ClientConn{
		cfg:               cfg,
		h:                 h,
		peerMaxFrame:      rfcMinFrameSize,
		peerInitialWindow: rfcInitialWindow,
		peerMaxStreams:    initialMaxStreams,
		sendWindow:        rfcInitialWindow,
		recvWindow:        rfcInitialWindow,
		nextID:            1,
	}
	c.dec = hpack.NewDecoder(headerTableSize, c.onField)
	c.dec.SetMaxStringLength(int(cfg.Settings.MaxHeaderListSize))
	c.enc = hpack.NewEncoder(clientBlock{c})
	c.enc.SetMaxDynamicTableSizeLimit(0)
	c.out = append(c.out, Preface...)
	s := cfg.Settings
	fr := c.framer()
	_ = fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: s.InitialWindowSize},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: s.MaxFrameSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: s.MaxHeaderListSize},
	)
	if w := cfg.Limits.ConnWindowSize; w > rfcInitialWindow {
		_ = fr.WriteWindowUpdate(0, w-rfcInitialWindow)
		c.recvWindow = int64(w)
	}
	return c
}

func (c *ClientConn) framer() *http2.Framer {
	if c.fr == nil {
		c.fr = http2.NewFramer(clientOut{c}, &c.rd)
		c.fr.SetReuseFrames()
		c.fr.SetMaxReadFrameSize(c.cfg.Settings.MaxFrameSize)
	}
	return c.fr
}

// Output is what the ClientConn has to send, in order; write it to the
// socket and call Drained with what was written.
func (c *ClientConn) Output() []byte {
	if !c.feeding {
		c.offeredCtrl = c.queuedCtrl
	}
	return c.out[c.outOff:]
}

// Drained says the first n bytes of Output were written.
func (c *ClientConn) Drained(n int) {
	c.outOff += n
	if c.outOff >= c.ctrlMark {
		c.queuedCtrl, c.offeredCtrl = 0, 0
	}
	if c.outOff >= len(c.out) {
		c.out = c.out[:0]
		c.outOff = 0
		c.ctrlMark = 0
	}
}

// Err is the connection error, nil while the connection is sound.
func (c *ClientConn) Err() error {
	if c.err == nil {
		return nil
	}
	return c.err
}

// CanOpen reports that a stream may be opened now: the connection is
// sound, no GOAWAY went either way, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS) is not
// reached and stream ids are left.
func (c *ClientConn) CanOpen() bool {
	return c.err == nil && !c.peerGoAway && !c.goAway &&
		uint32(len(c.streams)) < c.peerMaxStreams && c.nextID < 1<<31
}

// Streams is the number of open streams.
func (c *ClientConn) Streams() int { return len(c.streams) }

// Done reports that the connection has nothing left to do once Output is
// drained: a connection error, or a GOAWAY either way and no stream left.
func (c *ClientConn) Done() bool {
	return c.err != nil || (c.goAway || c.peerGoAway) && len(c.streams) == 0 && !c.hb.active
}

// Idle reports that no stream is open, no header block is half read and
// nothing waits in Output: a pooled connection the pool may reuse or
// ReleaseBuffers.
func (c *ClientConn) Idle() bool {
	return len(c.streams) == 0 && !c.hb.active && c.outOff == len(c.out)
}

// ReleaseBuffers gives back what an idle connection does not need (as
// Conn.ReleaseBuffers); a no-op when not Idle.
func (c *ClientConn) ReleaseBuffers() {
	if !c.Idle() {
		return
	}
	// x/net's HPACK Decoder keeps a slice of the last block it read
	// (Decoder.buf), which pins the caller's input buffer: a one-byte
	// block of a static-table field (not delivered: hb.deliver is false)
	// moves it onto the ClientConn itself.
	c.hb.deliver = false
	c.unpin[0] = 0x82 // indexed :method GET
	_, _ = c.dec.Write(c.unpin[:])
	_ = c.dec.Close()
	c.out, c.outOff = nil, 0
	c.fr = nil
	c.hb.buf = nil
	c.hb.fields = nil
	c.eblock = nil
	c.lname = nil
	clear(c.free)
	c.free = nil
	c.streams = nil
}

// HeadersPendingSince is when the response header block being read
// began, zero when none is half read.
func (c *ClientConn) HeadersPendingSince() time.Time {
	if !c.hb.active {
		return time.Time{}
	}
	return c.hb.since
}

// SendStalledSince is when stream id last wanted to send with no window,
// zero when it is not stalled.
func (c *ClientConn) SendStalledSince(id uint32) time.Time {
	if st := c.stream(id); st != nil {
		return st.stalledSince
	}
	return time.Time{}
}

// ConnStalledSince is when the connection send window reached zero with
// a stream wanting to send, zero when it is not stalled.
func (c *ClientConn) ConnStalledSince() time.Time { return c.connStalledSince }

// MaxFrameLen is the longest frame Feed accepts, header included: the
// least input buffer a connection needs.
func (c *ClientConn) MaxFrameLen() int { return frameHeaderLen + int(c.cfg.Settings.MaxFrameSize) }

// GoAway stops the connection gracefully: GOAWAY NO_ERROR (last stream
// 0: the server opens none), no stream opens any more; Done says when to
// close.
func (c *ClientConn) GoAway() {
	if c.goAway || c.err != nil {
		return
	}
	c.goAway = true
	_ = c.framer().WriteGoAway(0, http2.ErrCodeNo, nil)
}

func (c *ClientConn) connError(code http2.ErrCode, reason string) {
	if c.err == nil {
		c.err = &Error{Code: code, Reason: reason}
		_ = c.framer().WriteGoAway(0, code, nil)
		c.goAway = true
	}
}

func (c *ClientConn) glitch(what string) bool {
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

func (c *ClientConn) control() bool {
	c.queuedCtrl++
	if c.offeredCtrl > c.cfg.Limits.MaxQueuedControl || c.queuedCtrl > maxControlBurst*c.cfg.Limits.MaxQueuedControl {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many control frames queued")
		return false
	}
	return true
}

// Feed reads the complete frames at the start of p and returns how many
// bytes it consumed, with Conn.Feed's contract: a partial frame is left
// for the next call, a frame above our SETTINGS_MAX_FRAME_SIZE is refused
// at its header, the input buffer must hold MaxFrameLen bytes. On a
// connection error Feed queues GOAWAY and returns an *Error: drain
// Output, close, and end every stream (no Reset comes).
func (c *ClientConn) Feed(p []byte) (int, error) {
	if c.err != nil {
		return 0, c.err
	}
	n := 0
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

func (c *ClientConn) frame(f []byte) {
	typ := http2.FrameType(f[3])
	flags := http2.Flags(f[4])
	id := binary.BigEndian.Uint32(f[5:9]) & (1<<31 - 1)
	if c.hb.active {
		if typ != http2.FrameContinuation || id != c.hb.id {
			c.connError(http2.ErrCodeProtocol, "header block interrupted")
			return
		}
	} else if typ == http2.FrameContinuation {
		c.connError(http2.ErrCodeProtocol, "CONTINUATION without a header block")
		return
	}
	if !c.gotSettings {
		// RFC 9113 §3.4: the server preface is a SETTINGS frame.
		if typ != http2.FrameSettings || flags.Has(http2.FlagSettingsAck) {
			c.connError(http2.ErrCodeProtocol, "server preface is not SETTINGS")
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
		c.onHeaders(id, flags, f[frameHeaderLen:])
		return
	case http2.FrameContinuation:
		c.onContinuation(flags, f[frameHeaderLen:])
		return
	case http2.FramePriority, http2.FrameRSTStream,
		http2.FrameSettings, http2.FramePushPromise, http2.FramePing, http2.FrameGoAway:
	default:
		return
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
	case *http2.RSTStreamFrame:
		st := c.stream(fr.StreamID)
		if st == nil {
			if fr.StreamID >= c.nextID {
				c.connError(http2.ErrCodeProtocol, "RST_STREAM on an idle stream")
			}
			return
		}
		c.remove(st, closedByPeerReset)
		c.h.Reset(fr.StreamID, fr.ErrCode)
	case *http2.SettingsFrame:
		c.onSettings(fr)
	case *http2.PushPromiseFrame:
		c.connError(http2.ErrCodeProtocol, "PUSH_PROMISE with push disabled")
	case *http2.PingFrame:
		if fr.IsAck() {
			if fr.Data == c.pingData {
				c.pingSince = time.Time{}
			}
			return
		}
		if c.control() {
			_ = c.fr.WritePing(true, fr.Data)
			c.ctrlMark = len(c.out)
		}
	case *http2.GoAwayFrame:
		c.onGoAway(fr.LastStreamID, fr.ErrCode)
	}
}

func (c *ClientConn) onGoAway(lastID uint32, code http2.ErrCode) {
	c.peerGoAway = true
	c.h.GoAway(lastID, code)
	for i := len(c.streams) - 1; i >= 0; i-- {
		if i >= len(c.streams) {
			continue
		}
		st := c.streams[i]
		if st.id > lastID {
			id := st.id
			c.remove(st, closedByUs)
			c.h.Reset(id, http2.ErrCodeRefusedStream)
		}
	}
}

func (c *ClientConn) onSettings(f *http2.SettingsFrame) {
	if f.IsAck() {
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
		case http2.SettingMaxConcurrentStreams:
			c.peerMaxStreams = s.Val
		case http2.SettingEnablePush:
			if s.Val != 0 {
				// RFC 9113 §6.5.2: a server must not send 1
				c.connError(http2.ErrCodeProtocol, "SETTINGS_ENABLE_PUSH from a server")
				return
			}
		}
	}
	if c.control() {
		_ = c.fr.WriteSettingsAck()
		c.ctrlMark = len(c.out)
	}
}

func (c *ClientConn) onWindowUpdate(id uint32, p []byte) {
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
		if id >= c.nextID {
			c.connError(http2.ErrCodeProtocol, "WINDOW_UPDATE on an idle stream")
		}
		return
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

func (c *ClientConn) windowsOpened() {
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

func (c *ClientConn) onData(id uint32, flags http2.Flags, payload []byte) {
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
	if st == nil || st.remoteClosed || !st.final {
		c.credit(size)
		switch {
		case st != nil:
			// DATA before the final head, or after END_STREAM
			c.streamError(id, http2.ErrCodeProtocol)
		case id >= c.nextID || id&1 == 0:
			c.connError(http2.ErrCodeProtocol, "DATA on an idle stream")
		default:
			c.onClosedStreamFrame(id)
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
		c.credit(pad)
		st.recvCredit += pad
	}
	if len(data) == 0 && !end && !c.glitch("empty DATA frames") {
		return
	}
	st.received += int64(len(data))
	if st.contentLength >= 0 && (st.received > st.contentLength || end && st.received != st.contentLength) {
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

// onClosedStreamFrame: DATA or HEADERS on one of our ids no longer open.
// One we reset is ignored (frames may be in flight); one closed both
// ways by END_STREAM is a connection error STREAM_CLOSED; one the server
// reset, or one too old to remember, is ignored as a glitch.
func (c *ClientConn) onClosedStreamFrame(id uint32) {
	how, ok := c.closedHow(id)
	switch {
	case ok && how == closedByUs:
		return // in flight when we reset it (a cancelled download)
	case ok && how == closedNormally:
		c.connError(http2.ErrCodeStreamClosed, "frame after END_STREAM")
		return
	}
	c.glitch("frames on closed streams")
}

func (c *ClientConn) credit(n int64) {
	c.recvCredit += n
	if c.recvCredit >= int64(c.cfg.Limits.ConnWindowSize)/4 {
		c.recvWindow += c.recvCredit
		_ = c.framer().WriteWindowUpdate(0, uint32(c.recvCredit))
		c.recvCredit = 0
	}
}

// Consumed says n bytes of stream id's response body were forwarded (or
// dropped): they are given back to the server's stream and connection
// windows, by WINDOW_UPDATE once a quarter of a window is owed.
func (c *ClientConn) Consumed(id uint32, n int) {
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
	if st.recvCredit >= int64(c.cfg.Settings.InitialWindowSize)/4 && st.recvCredit > 0 {
		st.recvWindow += st.recvCredit
		_ = c.framer().WriteWindowUpdate(id, uint32(st.recvCredit))
		st.recvCredit = 0
	}
}

// ResetStream ends stream id with RST_STREAM code (the client went away,
// a timeout): no handler call follows for it, late frames are ignored.
func (c *ClientConn) ResetStream(id uint32, code http2.ErrCode) {
	if c.stream(id) == nil || c.err != nil {
		return
	}
	c.sendRST(id, code)
}

func (c *ClientConn) streamError(id uint32, code http2.ErrCode) {
	if !c.glitch("too many stream errors") {
		return
	}
	st := c.stream(id)
	if !c.sendRST(id, code) || st == nil {
		return
	}
	c.h.Reset(id, code)
}

func (c *ClientConn) sendRST(id uint32, code http2.ErrCode) bool {
	if !c.control() {
		return false
	}
	_ = c.framer().WriteRSTStream(id, code)
	c.ctrlMark = len(c.out)
	if st := c.stream(id); st != nil {
		c.remove(st, closedByUs)
	} else {
		c.remember(id, closedByUs)
	}
	return true
}

func (c *ClientConn) stream(id uint32) *cstream {
	for i := len(c.streams) - 1; i >= 0; i-- {
		if c.streams[i].id == id {
			return c.streams[i]
		}
	}
	return nil
}

func (c *ClientConn) remove(st *cstream, how closedHow) {
	if st.unconsumed > 0 {
		c.credit(st.unconsumed)
		st.unconsumed = 0
	}
	for i, s := range c.streams {
		if s == st {
			last := len(c.streams) - 1
			copy(c.streams[i:], c.streams[i+1:])
			c.streams[last] = nil
			c.streams = c.streams[:last]
			break
		}
	}
	c.remember(st.id, how)
	st.id = 0
	c.free = append(c.free, st)
}

func (c *ClientConn) remember(id uint32, how closedHow) {
	c.closed[c.closedN%closedRingLen] = closedStream{id: id, how: how}
	c.closedN++
}

func (c *ClientConn) closedHow(id uint32) (closedHow, bool) {
	for i := range c.closed {
		if c.closed[i].id == id {
			return c.closed[i].how, true
		}
	}
	return 0, false
}

func (c *ClientConn) maybeClose(id uint32) {
	if st := c.stream(id); st != nil && st.remoteClosed && st.localClosed {
		c.remove(st, closedNormally)
	}
}

func (c *ClientConn) maxBlock() int {
	return 2*int(c.cfg.Settings.MaxHeaderListSize) + int(c.cfg.Settings.MaxFrameSize)
}

func (c *ClientConn) onHeaders(id uint32, flags http2.Flags, p []byte) {
	if id == 0 {
		c.connError(http2.ErrCodeProtocol, "HEADERS on stream 0")
		return
	}
	pad := 0
	if flags.Has(http2.FlagHeadersPadded) {
		if len(p) == 0 {
			c.connError(http2.ErrCodeFrameSize, "HEADERS too short for its pad length")
			return
		}
		pad = int(p[0])
		p = p[1:]
	}
	if flags.Has(http2.FlagHeadersPriority) {
		if len(p) < 5 {
			c.connError(http2.ErrCodeFrameSize, "HEADERS too short for its priority")
			return
		}
		p = p[5:]
	}
	if pad > len(p) {
		c.connError(http2.ErrCodeProtocol, "HEADERS padding too long")
		return
	}
	frag := p[:len(p)-pad]
	if id&1 == 0 || id >= c.nextID {
		c.connError(http2.ErrCodeProtocol, "HEADERS on an idle stream")
		return
	}
	hb := &c.hb
	*hb = respBlock{buf: hb.buf[:0], fields: hb.fields[:0], id: id,
		endStream: flags.Has(http2.FlagHeadersEndStream), cl: -1}
	st := c.stream(id)
	switch {
	case st == nil:
		c.onClosedStreamFrame(id)
		if c.err != nil {
			return
		}
	case st.remoteClosed:
		hb.deliver = false
	default:
		hb.deliver = true
		hb.trailers = st.final
	}
	if flags.Has(http2.FlagHeadersEndHeaders) {
		c.decode(frag)
		return
	}
	hb.active = true
	hb.since = c.cfg.Now()
	hb.buf = append(hb.buf, frag...)
}

func (c *ClientConn) onContinuation(flags http2.Flags, frag []byte) {
	hb := &c.hb
	hb.conts++
	if hb.conts > c.cfg.Limits.MaxContinuations {
		c.connError(http2.ErrCodeEnhanceYourCalm, "too many CONTINUATION frames")
		return
	}
	if len(hb.buf)+len(frag) > c.maxBlock() {
		c.connError(http2.ErrCodeEnhanceYourCalm, "header block too large")
		return
	}
	hb.buf = append(hb.buf, frag...)
	if flags.Has(http2.FlagContinuationEndHeaders) {
		hb.active = false
		c.decode(hb.buf)
	}
}

func (c *ClientConn) decode(block []byte) {
	hb := &c.hb
	hb.active = false
	clear(hb.fields)
	hb.fields = hb.fields[:0]
	if len(block) > 0 {
		if _, err := c.dec.Write(block); err != nil {
			c.connError(http2.ErrCodeCompression, "HPACK: "+err.Error())
			return
		}
	}
	if err := c.dec.Close(); err != nil {
		c.connError(http2.ErrCodeCompression, "HPACK: "+err.Error())
		return
	}
	id := hb.id
	st := c.stream(id)
	if !hb.deliver || st == nil {
		if st != nil && st.remoteClosed {
			c.streamError(id, http2.ErrCodeStreamClosed)
		}
		return
	}
	if hb.malformed || hb.tooLarge {
		c.streamError(id, http2.ErrCodeProtocol)
		return
	}
	if hb.trailers {
		// RFC 9113 §8.1: trailers end the stream
		if !hb.endStream || st.contentLength >= 0 && st.received != st.contentLength {
			c.streamError(id, http2.ErrCodeProtocol)
			return
		}
		st.remoteClosed = true
		c.h.Trailers(id, hb.fields)
		c.maybeClose(id)
		return
	}
	status := hb.status
	switch {
	case status == 0, status == 101, status < 200 && hb.endStream:
		c.streamError(id, http2.ErrCodeProtocol)
		return
	case status < 200:
		c.h.Response(id, status, hb.fields, false)
		return
	}
	st.final = true
	if !st.noBody && status != 204 && status != 304 {
		st.contentLength = hb.cl
	}
	if hb.endStream && st.contentLength > 0 {
		c.streamError(id, http2.ErrCodeProtocol)
		return
	}
	if hb.endStream {
		st.remoteClosed = true
	}
	c.h.Response(id, status, hb.fields, hb.endStream)
	if hb.endStream {
		c.maybeClose(id)
	}
}

// onField checks each response field as HPACK decodes it (RFC 9113
// §8.3.2, §8.2): :status first and once, three digits; no other
// pseudo-header field; regular fields as for requests (lowercase tokens,
// no connection-specific field, clean values), one valid content-length.
func (c *ClientConn) onField(f hpack.HeaderField) {
	hb := &c.hb
	if !hb.deliver {
		return
	}
	hb.listSize += f.Size()
	if hb.listSize > c.cfg.Settings.MaxHeaderListSize {
		hb.tooLarge = true
	}
	if hb.tooLarge || hb.malformed {
		return
	}
	if f.IsPseudo() {
		if hb.trailers || hb.regular || hb.status != 0 || f.Name != ":status" || !validStatus(f.Value) {
			hb.malformed = true
			return
		}
		hb.status = int(f.Value[0]-'0')*100 + int(f.Value[1]-'0')*10 + int(f.Value[2]-'0')
		return
	}
	hb.regular = true
	if !validField(f) {
		hb.malformed = true
		return
	}
	if f.Name == "content-length" {
		if hb.trailers || hb.cl >= 0 {
			hb.malformed = true
			return
		}
		n, ok := parseLength(f.Value)
		if !ok {
			hb.malformed = true
			return
		}
		hb.cl = n
	}
	if len(hb.fields) >= c.cfg.Limits.MaxFields {
		hb.tooLarge = true
		return
	}
	hb.fields = append(hb.fields, f)
}

func validStatus(v string) bool {
	return len(v) == 3 && v[0] >= '1' && v[0] <= '9' && v[1] >= '0' && v[1] <= '9' && v[2] >= '0' && v[2] <= '9'
}

// encodeField lowercases name and adds the field to the block, unless it
// is connection-specific (te is handled by the caller) or invalid.
func (c *ClientConn) encodeField(name, value []byte) {
	c.lname = c.lname[:0]
	for _, b := range name {
		if b >= 'A' && b <= 'Z' {
			b += 'a' - 'A'
		}
		c.lname = append(c.lname, b)
	}
	if len(c.lname) == 0 || c.lname[0] == ':' || connectionSpecific(c.lname) || string(c.lname) == "host" ||
		!http1.IsToken(c.lname) || !http1.ValidFieldValue(value) {
		return
	}
	_ = c.enc.WriteField(hpack.HeaderField{Name: stringOf(c.lname), Value: stringOf(value)})
}

func (c *ClientConn) pseudo(name string, value []byte) {
	_ = c.enc.WriteField(hpack.HeaderField{Name: name, Value: stringOf(value)})
}

func (c *ClientConn) appendFrameHeader(length int, typ http2.FrameType, flags http2.Flags, id uint32) {
	c.out = append(c.out, byte(length>>16), byte(length>>8), byte(length), byte(typ), byte(flags),
		byte(id>>24), byte(id>>16), byte(id>>8), byte(id))
}

func (c *ClientConn) writeBlock(id uint32, endStream bool) {
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

func (c *ClientConn) newStream(endStream, noBody bool) *cstream {
	var st *cstream
	if n := len(c.free); n > 0 {
		st = c.free[n-1]
		c.free[n-1] = nil
		c.free = c.free[:n-1]
		*st = cstream{}
	} else {
		st = &cstream{}
	}
	st.id = c.nextID
	c.nextID += 2
	st.recvWindow = int64(c.cfg.Settings.InitialWindowSize)
	st.sendWindow = int64(c.peerInitialWindow)
	st.contentLength = -1
	st.localClosed = endStream
	st.noBody = noBody
	c.streams = append(c.streams, st)
	return st
}

// OpenStream sends a request head: method, :authority, path (:scheme is
// the ClientConfig's) and fields (connection-specific ones and host
// dropped, names lowercased), and returns the new stream's id;
// endStream says no body follows. CONNECT is refused (ErrRequest).
func (c *ClientConn) OpenStream(method, authority, path string, fields []Field, endStream bool) (uint32, error) {
	if !c.CanOpen() {
		return 0, ErrNoStream
	}
	if method == "CONNECT" || authority == "" || path == "" {
		return 0, ErrRequest
	}
	c.eblock = c.eblock[:0]
	c.pseudo(":method", bytesOf(method))
	c.pseudo(":scheme", bytesOf(c.cfg.Scheme))
	c.pseudo(":authority", bytesOf(authority))
	c.pseudo(":path", bytesOf(path))
	for i := range fields {
		if http1.EqualFold(fields[i].Name, "te") {
			if http1.HasToken(fields[i].Value, "trailers") {
				c.pseudo("te", bytesOf("trailers"))
			}
			continue
		}
		c.encodeField(fields[i].Name, fields[i].Value)
	}
	st := c.newStream(endStream, method == "HEAD")
	c.writeBlock(st.id, endStream)
	return st.id, nil
}

// RequestHTTP1 sends the head of an HTTP/1.1 request r parsed from buf as
// HEADERS (RFC 9113 §8.3.1): :method; :scheme from the ClientConfig;
// :authority from Host (or an absolute-form target's authority); :path
// from the target (an absolute-form target's path, "/" when empty; "*"
// for OPTIONS *); then the end-to-end fields (r.HopByHop ones dropped:
// Connection and what it names, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, Upgrade, Trailer), except host, and "te: trailers"
// when the TE field lists trailers (gRPC needs it). Content-Length is
// kept. The caller sends the body as SendData (a chunked body decoded
// first), its trailers with SendTrailers. CONNECT and upgrade requests
// are refused (ErrRequest): they have no HTTP/2 stream form here.
func (c *ClientConn) RequestHTTP1(r *http1.Request, buf []byte, endStream bool) (uint32, error) {
	if !c.CanOpen() {
		return 0, ErrNoStream
	}
	if r.MethodID == http1.MethodCONNECT || r.Form == http1.FormAuthority || r.Upgrade {
		return 0, ErrRequest
	}
	authority := r.Host.Bytes(buf)
	if r.Form == http1.FormAbsolute && r.Authority.Len > 0 {
		authority = r.Authority.Bytes(buf)
	}
	if len(authority) == 0 {
		return 0, ErrRequest
	}
	path := r.Target.Bytes(buf)
	if r.Form == http1.FormAbsolute {
		// scheme "://" authority path-abempty [ "?" query ]
		t := path
		path = bytesOf("/")
		if i := indexOf(t, "://"); i >= 0 {
			rest := t[i+3:]
			for j, b := range rest {
				if b == '/' {
					path = rest[j:]
					break
				}
				if b == '?' {
					// an empty path before a query is "/" (RFC 9113 §8.3.1)
					c.lname = append(append(c.lname[:0], '/'), rest[j:]...)
					path = c.lname
					break
				}
			}
		}
	}
	c.eblock = c.eblock[:0]
	method := r.Method.Bytes(buf)
	c.pseudo(":method", method)
	c.pseudo(":scheme", bytesOf(c.cfg.Scheme))
	c.pseudo(":authority", authority)
	c.pseudo(":path", path)
	for i := 0; i < r.N; i++ {
		if r.Headers[i].Kind == http1.KindTE {
			if http1.HasToken(r.Value(buf, i), "trailers") {
				c.pseudo("te", bytesOf("trailers"))
			}
			continue
		}
		if r.Headers[i].Kind == http1.KindHost || r.HopByHop(buf, i, 0) {
			continue
		}
		c.encodeField(r.Name(buf, i), r.Value(buf, i))
	}
	st := c.newStream(endStream, r.MethodID == http1.MethodHEAD)
	c.writeBlock(st.id, endStream)
	return st.id, nil
}

func indexOf(b []byte, s string) int {
	for i := 0; i+len(s) <= len(b); i++ {
		if string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

// SendData sends up to len(p) bytes of request body on stream id as DATA
// frames no larger than the server's SETTINGS_MAX_FRAME_SIZE, within the
// stream's and the connection's send windows, and returns how many it
// took (copied into Output), as Conn.SendData: endStream ends the stream
// once all of p is taken; less than len(p) blocks the stream until
// WindowOpened.
func (c *ClientConn) SendData(id uint32, p []byte, endStream bool) int {
	if c.err != nil {
		return 0
	}
	st := c.stream(id)
	if st == nil || st.localClosed {
		return 0
	}
	w := min(st.sendWindow, c.sendWindow)
	n := int(min(int64(len(p)), max(w, 0)))
	maxF := int(c.peerMaxFrame)
	done := endStream && n == len(p)
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
	if done {
		st.localClosed = true
		c.maybeClose(id)
	}
	return n
}

// SendTrailers ends a request body with trailer fields (connection-
// specific ones dropped).
func (c *ClientConn) SendTrailers(id uint32, fields []Field) error {
	if c.err != nil {
		return c.err
	}
	st := c.stream(id)
	if st == nil || st.localClosed {
		return ErrStreamClosed
	}
	c.eblock = c.eblock[:0]
	for i := range fields {
		c.encodeField(fields[i].Name, fields[i].Value)
	}
	c.writeBlock(id, true)
	st.localClosed = true
	c.maybeClose(id)
	return nil
}

// AppendHTTP1Response appends a response head (as ClientHandler.Response
// gave it) as HTTP/1.1, final empty line included, that core/http1's
// Response parses back: the status line with the standard reason, the
// fields (validated by the ClientConn: nothing in them can end a line),
// and the framing: when body is true (DATA follows) and the server gave
// no content-length, "transfer-encoding: chunked" and chunked is true:
// the caller frames each DATA with AppendChunk and ends with
// AppendHTTP1Trailers (trailers or none). When body is false and there is
// no content-length, a final status other than 204 and 304 gets
// "content-length: 0". A 1xx gets no framing.
func AppendHTTP1Response(dst []byte, status int, fields []hpack.HeaderField, body bool) (out []byte, chunked bool) {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	dst = append(dst, http.StatusText(status)...)
	dst = append(dst, "\r\n"...)
	hasCL := false
	for i := range fields {
		if fields[i].Name == "content-length" {
			hasCL = true
		}
		dst = appendField(dst, &fields[i])
	}
	if status >= 200 && !hasCL {
		switch {
		case body:
			dst = append(dst, "transfer-encoding: chunked\r\n"...)
			chunked = true
		case status != 204 && status != 304:
			dst = append(dst, "content-length: 0\r\n"...)
		}
	}
	return append(dst, "\r\n"...), chunked
}

// AppendChunk appends p as one chunk of a chunked body (nothing for an
// empty p: an empty chunk would end the body).
func AppendChunk(dst, p []byte) []byte {
	if len(p) == 0 {
		return dst
	}
	dst = strconv.AppendUint(dst, uint64(len(p)), 16)
	dst = append(dst, "\r\n"...)
	dst = append(dst, p...)
	return append(dst, "\r\n"...)
}
