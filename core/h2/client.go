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

// respBlock is the response header block being read.
type respBlock struct {
	id        uint32
	endStream bool
	deliver   bool // the stream exists: decode its fields for the handler
	trailers  bool

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
	connCore
	h      ClientHandler
	scheme string
	hb     respBlock
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
	c := &ClientConn{h: h, scheme: cfg.Scheme}
	c.init(cfg.Config, c, c.onField)
	c.client = true
	c.peerMaxStreams = initialMaxStreams
	c.nextID = 1
	// our SETTINGS_INITIAL_WINDOW_SIZE applies to our streams at once:
	// the server's first frames are its SETTINGS, then responses
	c.recvInitial = int32(cfg.Settings.InitialWindowSize)
	c.out = append(c.out, Preface...)
	s := cfg.Settings
	fr := c.framer()
	_ = fr.WriteSettings(
		http2.Setting{ID: http2.SettingEnablePush, Val: 0},
		http2.Setting{ID: http2.SettingInitialWindowSize, Val: s.InitialWindowSize},
		http2.Setting{ID: http2.SettingMaxFrameSize, Val: s.MaxFrameSize},
		http2.Setting{ID: http2.SettingMaxHeaderListSize, Val: s.MaxHeaderListSize},
	)
	c.openConnWindow()
	return c
}

// CanOpen reports that a stream may be opened now: the connection is
// sound, no GOAWAY went either way, the server's
// SETTINGS_MAX_CONCURRENT_STREAMS (100 until its SETTINGS) is not
// reached and stream ids are left.
func (c *ClientConn) CanOpen() bool {
	return c.err == nil && !c.peerGoAway && !c.goAway &&
		uint32(len(c.streams)) < c.peerMaxStreams && c.nextID < 1<<31
}

// ReleaseBuffers gives back what an idle connection does not need (as
// Conn.ReleaseBuffers); a no-op when not Idle.
func (c *ClientConn) ReleaseBuffers() {
	if c.release(c.hb.fields) {
		c.hb.fields = nil
	}
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
	if len(p) > 0 {
		c.busy(&c.hb.fields)
	}
	return c.feedFrames(p, 0)
}

// Heard reports that the server sent a HEADERS frame on stream id, still
// open: it began to answer, even when the block then failed (too large,
// malformed, undecodable: a connection error leaves the streams in the
// table for this question). Such a request must not be sent again.
func (c *ClientConn) Heard(id uint32) bool {
	st := c.stream(id)
	return st != nil && st.heard
}

func (c *ClientConn) data(id uint32, p []byte, end bool)  { c.h.Data(id, p, end) }
func (c *ClientConn) reset(id uint32, code http2.ErrCode) { c.h.Reset(id, code) }
func (c *ClientConn) windowOpened(id uint32)              { c.h.WindowOpened(id) }

// onGoAway: the server stops; streams above lastID were not processed.
func (c *ClientConn) onGoAway(lastID uint32, code http2.ErrCode) {
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

// onHeaders: a response head (interim or final), or trailers.
func (c *ClientConn) onHeaders(id uint32, flags http2.Flags, p []byte) {
	frag, _, ok := c.headersFragment(id, flags, p)
	if !ok {
		return
	}
	if c.idle(id) {
		c.connError(http2.ErrCodeProtocol, "HEADERS on an idle stream")
		return
	}
	hb := &c.hb
	*hb = respBlock{fields: hb.fields[:0], id: id,
		endStream: flags.Has(http2.FlagHeadersEndStream), cl: -1}
	st := c.stream(id)
	switch {
	case st == nil:
		c.onClosedStreamFrame(id, true)
		if c.err != nil {
			return
		}
	case st.remoteClosed:
		hb.deliver = false
	default:
		hb.deliver = true
		hb.trailers = st.gotHead
	}
	if st != nil {
		st.heard = true
	}
	c.gather(id, flags, frag)
}

func (c *ClientConn) decode(block []byte) {
	hb := &c.hb
	clear(hb.fields)
	hb.fields = hb.fields[:0]
	if !c.decodeBlock(block) {
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
	st.gotHead = true
	if st.noBody || status == 204 || status == 304 {
		// no content (RFC 9110 §6.4.1): DATA bytes are malformed
		// (RFC 9113 §8.1.1), and forwarded they would read as the next
		// response on an HTTP/1.1 client; a content-length says what a
		// GET would have got
		st.contentLength = 0
	} else {
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
	if !hb.deliver || c.muted {
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
		n, ok := contentLength(f.Value, hb.trailers, hb.cl)
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

func (c *ClientConn) pseudo(name string, value []byte) {
	c.writeField(name, stringOf(value))
}

// openStream puts the next stream id in the table.
func (c *ClientConn) openStream(endStream, noBody bool) *stream {
	st := c.newStream(c.nextID)
	c.nextID += 2
	st.localClosed = endStream
	st.noBody = noBody
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
	c.busy(&c.hb.fields)
	c.eblock = c.eblock[:0]
	c.pseudo(":method", bytesOf(method))
	c.pseudo(":scheme", bytesOf(c.scheme))
	c.pseudo(":authority", bytesOf(authority))
	c.pseudo(":path", bytesOf(path))
	for i := range fields {
		if http1.EqualFold(fields[i].Name, "te") {
			if http1.HasToken(fields[i].Value, "trailers") {
				c.pseudo("te", bytesOf("trailers"))
			}
			continue
		}
		c.encodeField(fields[i].Name, fields[i].Value, true)
	}
	st := c.openStream(endStream, method == "HEAD")
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
	c.pseudo(":scheme", bytesOf(c.scheme))
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
		c.encodeField(r.Name(buf, i), r.Value(buf, i), true)
	}
	st := c.openStream(endStream, r.MethodID == http1.MethodHEAD)
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
	n, done := c.sendData(st, p, endStream)
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
		c.encodeField(fields[i].Name, fields[i].Value, true)
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
// "content-length: 0". A 1xx, a 204 and a 304 get no framing.
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
		case status == 204 || status == 304:
			// no body, whatever follows on the stream (the ClientConn
			// lets no DATA byte through)
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
