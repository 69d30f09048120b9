package h2

import (
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
// its cached clock. Pool, when not nil, is the loop's: the connections of
// one loop share it (see Pool).
type Config struct {
	Settings Settings
	Limits   Limits
	Now      func() time.Time
	Pool     *Pool
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

// Conn is the server side of one HTTP/2 connection: bytes in (Feed),
// bytes out (Output, Drained), requests to a Handler, responses from the
// stream methods. It does no I/O, starts no goroutine, and belongs to one
// loop's thread.
type Conn struct {
	connCore
	h Handler

	prefaceN int // bytes of the client preface read

	hb  headerBlock
	req Request
}

// NewConn returns a connection that has queued its SETTINGS (and the
// connection WINDOW_UPDATE): drain Output once the socket is writable.
func NewConn(cfg Config, h Handler) *Conn {
	cfg.resolve()
	c := &Conn{h: h}
	c.init(cfg, c, c.onField)
	s := cfg.Settings
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
	_ = c.framer().WriteSettings(set[:n]...)
	c.openConnWindow()
	return c
}

// ReleaseBuffers gives back what an idle connection does not need: the
// output buffer, the Framer (its read and write buffers), the header block
// scratch and the free streams; nor does it keep the caller's input
// buffer. An idle Conn then holds only itself, the HPACK decoder with its
// dynamic table (at most 4096 bytes of fields, the table size the RFC
// grants by default) and the encoder (no table). It is a no-op on a
// connection that is not Idle.
func (c *Conn) ReleaseBuffers() {
	if c.release(c.req.Fields) {
		c.req.Fields = nil
	}
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
	if c.prefaceN < len(Preface) {
		k := min(len(p), len(Preface)-c.prefaceN)
		if string(p[:k]) != Preface[c.prefaceN:c.prefaceN+k] {
			return k, c.connError(http2.ErrCodeProtocol, "bad connection preface")
		}
		c.prefaceN += k
		n = k
		if c.prefaceN < len(Preface) {
			return n, nil
		}
	}
	if len(p) > n {
		c.busy(&c.req.Fields)
	}
	return c.feedFrames(p, n)
}

// onGoAway: the client stops; streams under way finish.
func (c *Conn) onGoAway(uint32, http2.ErrCode) {}

func (c *Conn) data(id uint32, p []byte, end bool)  { c.h.Data(id, p, end) }
func (c *Conn) reset(id uint32, code http2.ErrCode) { c.h.Reset(id, code) }
func (c *Conn) windowOpened(id uint32)              { c.h.WindowOpened(id) }
