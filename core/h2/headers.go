package h2

import (
	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"

	"github.com/spliced-proxy/spliced/core/http1"
)

type blockKind uint8

const (
	blockIgnore   blockKind = iota // decoded for HPACK's sake only, nothing sent
	blockRefuse                    // decoded, then RST_STREAM refuseCode
	blockRequest                   // a new stream's request head
	blockTrailers                  // an open stream's trailers
)

// headerBlock is the header block being read: one HEADERS frame and its
// CONTINUATIONs (RFC 9113 §4.3). Every block is decoded, even one whose
// stream is refused, since HPACK's table is the connection's.
type headerBlock struct {
	id         uint32
	endStream  bool
	kind       blockKind
	refuseCode http2.ErrCode
	glitch     bool // count the refusal as a glitch
	selfDep    bool

	listSize    uint32
	tooLarge    bool // past MaxHeaderListSize or MaxFields: 431
	malformed   bool // RFC 9113 §8.1.1: PROTOCOL_ERROR
	regularSeen bool
}

// Request is a validated request head (RFC 9113 §8.3.1). The strings are
// the HPACK decoder's; the struct is reused for the next request, so it
// is valid only during Handler.Headers.
type Request struct {
	Method, Scheme, Authority, Path string
	// Fields are the regular fields in the order received, names
	// lowercase, host, cookie and content-length included.
	Fields []hpack.HeaderField
	// ContentLength is the content-length field's value, -1 when absent.
	ContentLength int64
	// Host is the host field's value when HasHost.
	Host    string
	HasHost bool

	pseudo  uint8 // pseudoX bits seen
	cookies int
}

const (
	pseudoMethod uint8 = 1 << iota
	pseudoScheme
	pseudoPath
	pseudoAuthority
)

func (r *Request) reset() {
	r.Method, r.Scheme, r.Authority, r.Path = "", "", "", ""
	clear(r.Fields)
	r.Fields = r.Fields[:0]
	r.ContentLength = -1
	r.Host, r.HasHost = "", false
	r.pseudo, r.cookies = 0, 0
}

// IsConnect reports a CONNECT request (authority only, a tunnel).
func (r *Request) IsConnect() bool { return r.Method == "CONNECT" }

// onHeaders: a request head, or trailers, or a refused stream's head
// decoded for HPACK's sake.
func (c *Conn) onHeaders(id uint32, flags http2.Flags, p []byte) {
	frag, selfDep, ok := c.headersFragment(id, flags, p)
	if !ok {
		return
	}
	if id&1 == 0 {
		c.connError(http2.ErrCodeProtocol, "even stream id from a client")
		return
	}
	hb := &c.hb
	*hb = headerBlock{id: id, endStream: flags.Has(http2.FlagHeadersEndStream)}
	hb.selfDep = selfDep
	st := c.stream(id)
	switch {
	case st != nil && st.remoteClosed:
		hb.kind, hb.refuseCode = blockRefuse, http2.ErrCodeStreamClosed
	case st != nil && !hb.endStream:
		// a second HEADERS is trailers, which end the stream
		hb.kind, hb.refuseCode = blockRefuse, http2.ErrCodeProtocol
	case st != nil:
		hb.kind = blockTrailers
	case id > c.lastID:
		c.lastID = id
		switch {
		case c.goAway:
			// RFC 9113 §6.8: past GOAWAY, ignored, and so are its
			// DATA frames in flight
			hb.kind = blockIgnore
			c.remember(id, closedByUs)
		case len(c.streams) >= int(c.cfg.Settings.MaxConcurrentStreams):
			hb.kind, hb.refuseCode, hb.glitch = blockRefuse, http2.ErrCodeRefusedStream, true
		default:
			hb.kind = blockRequest
		}
	default:
		how, ok := c.closedHow(id)
		switch {
		case !ok:
			c.connError(http2.ErrCodeProtocol, "stream id reused")
			return
		case how == closedByUs:
			hb.kind = blockIgnore
		case how == closedNormally:
			c.connError(http2.ErrCodeStreamClosed, "HEADERS after END_STREAM")
			return
		default:
			hb.kind, hb.refuseCode, hb.glitch = blockRefuse, http2.ErrCodeStreamClosed, true
		}
	}
	c.gather(id, flags, frag)
}

// decode runs the complete block through HPACK (onField sees each field)
// and acts on the result.
func (c *Conn) decode(block []byte) {
	hb := &c.hb
	c.req.reset()
	if !c.decodeBlock(block) {
		return
	}
	id := hb.id
	switch hb.kind {
	case blockIgnore:
	case blockRefuse:
		if hb.glitch && !c.glitch("refused streams") {
			return
		}
		if hb.refuseCode == http2.ErrCodeRefusedStream {
			c.counts.StreamsRefused++
		}
		if st := c.stream(id); st != nil {
			c.streamError(id, hb.refuseCode)
		} else {
			c.sendRST(id, hb.refuseCode)
		}
	case blockRequest:
		switch {
		case hb.selfDep || hb.malformed || !c.req.valid(hb.endStream):
			// A stream error (RFC 9113 §8.1.1), the client's doing: a
			// glitch, as streamError counts one.
			if c.glitch("malformed requests") {
				c.sendRST(id, http2.ErrCodeProtocol)
			}
		case hb.tooLarge:
			c.refuse431(id, hb.endStream)
		default:
			c.counts.StreamsOpened++
			st := c.newStream(id)
			st.gotHead = true
			st.contentLength = c.req.ContentLength
			st.remoteClosed = hb.endStream
			c.h.Headers(id, &c.req, hb.endStream)
		}
	case blockTrailers:
		st := c.stream(id)
		if st == nil {
			return // ResetStream was called while the block was being read
		}
		if hb.selfDep || hb.malformed || hb.tooLarge ||
			st.contentLength >= 0 && st.received != st.contentLength {
			c.streamError(id, http2.ErrCodeProtocol)
			return
		}
		st.remoteClosed = true
		c.h.Trailers(id, c.req.Fields)
		c.maybeClose(id)
	}
}

// refuse431 answers a request whose head is too large with 431 (as Go's
// and nginx's servers do), then asks the client to stop sending its body.
func (c *Conn) refuse431(id uint32, endStream bool) {
	c.counts.StreamsRefused++
	c.eblock = c.eblock[:0]
	c.encodeStatus(431)
	c.writeBlock(id, true)
	if !endStream {
		if !c.control() {
			return
		}
		_ = c.framer().WriteRSTStream(id, http2.ErrCodeNo)
		c.counts.ResetsSent++
		c.ctrl.mark = len(c.out)
	}
	c.remember(id, closedByUs)
}

// onField is the HPACK decoder's emit function: it checks each field of
// the block as it is decoded (RFC 9113 §8.2, §8.3).
func (c *Conn) onField(f hpack.HeaderField) {
	hb := &c.hb
	if hb.kind < blockRequest || c.muted {
		return
	}
	hb.listSize += f.Size()
	if hb.listSize > c.cfg.Settings.MaxHeaderListSize {
		hb.tooLarge = true
	}
	if hb.tooLarge || hb.malformed {
		return
	}
	r := &c.req
	if f.IsPseudo() {
		if hb.kind == blockTrailers || hb.regularSeen || !r.pseudoField(f) {
			hb.malformed = true
		}
		return
	}
	hb.regularSeen = true
	if !validField(f) {
		hb.malformed = true
		return
	}
	switch f.Name {
	case "content-length":
		n, ok := contentLength(f.Value, hb.kind == blockTrailers, r.ContentLength)
		if !ok {
			hb.malformed = true
			return
		}
		r.ContentLength = n
	case "host":
		if hb.kind == blockTrailers || r.HasHost || !http1.ValidAuthority(bytesOf(f.Value), false) {
			hb.malformed = true
			return
		}
		r.Host, r.HasHost = f.Value, true
	case "cookie":
		r.cookies++
	}
	if len(r.Fields) >= c.cfg.Limits.MaxFields {
		hb.tooLarge = true
		return
	}
	r.Fields = append(r.Fields, hpack.HeaderField{Name: f.Name, Value: f.Value})
}

// pseudoField records one request pseudo-header field; false when it is
// unknown, repeated, response-only or badly formed.
func (r *Request) pseudoField(f hpack.HeaderField) bool {
	var bit uint8
	v := f.Value
	switch f.Name {
	case ":method":
		bit = pseudoMethod
		if !http1.IsToken(bytesOf(v)) {
			return false
		}
		r.Method = v
	case ":scheme":
		bit = pseudoScheme
		if !validScheme(v) {
			return false
		}
		r.Scheme = v
	case ":path":
		bit = pseudoPath
		if !validPath(v) {
			return false
		}
		r.Path = v
	case ":authority":
		bit = pseudoAuthority
		if v == "" || !http1.ValidAuthority(bytesOf(v), false) {
			return false
		}
		r.Authority = v
	default: // :status is a response's; :protocol needs ENABLE_CONNECT_PROTOCOL, not offered
		return false
	}
	if r.pseudo&bit != 0 {
		return false
	}
	r.pseudo |= bit
	return true
}

// valid applies the rules on the whole head (RFC 9113 §8.3.1, §8.5,
// §8.1.1).
func (r *Request) valid(endStream bool) bool {
	if r.pseudo&pseudoMethod == 0 {
		return false
	}
	if r.IsConnect() {
		// §8.5: :authority with a port, no :scheme, no :path
		if r.pseudo != pseudoMethod|pseudoAuthority || !http1.ValidAuthority(bytesOf(r.Authority), true) {
			return false
		}
	} else {
		if r.pseudo&(pseudoScheme|pseudoPath) != pseudoScheme|pseudoPath {
			return false
		}
		if r.Path == "*" {
			if r.Method != "OPTIONS" {
				return false
			}
		} else if r.Path[0] != '/' {
			return false
		}
	}
	// §8.3.1: a Host that names another entity than :authority.
	if r.HasHost && r.Authority != "" && !http1.EqualFoldBytes(bytesOf(r.Host), bytesOf(r.Authority)) {
		return false
	}
	// §8.1.1: no DATA follows, so the length must be 0.
	if endStream && r.ContentLength > 0 {
		return false
	}
	return true
}

// validField checks a regular field (RFC 9113 §8.2): a lowercase token
// name, not connection-specific, a value without CR, LF, NUL or other
// controls and without leading or trailing whitespace; TE only
// "trailers".
func validField(f hpack.HeaderField) bool {
	name := f.Name
	if name == "" {
		return false
	}
	for i := 0; i < len(name); i++ {
		if c := name[i]; c >= 'A' && c <= 'Z' {
			return false
		}
	}
	if !http1.IsToken(bytesOf(name)) {
		return false
	}
	v := f.Value
	if v != "" && (isWS(v[0]) || isWS(v[len(v)-1])) {
		return false
	}
	if !http1.ValidFieldValue(bytesOf(v)) {
		return false
	}
	switch name {
	case "connection", "keep-alive", "proxy-connection", "transfer-encoding", "upgrade":
		return false
	case "te":
		return v == "trailers"
	}
	return true
}

func isWS(b byte) bool { return b == ' ' || b == '\t' }

// validScheme: ALPHA *( ALPHA / DIGIT / "+" / "-" / "." ) (RFC 3986 §3.1).
func validScheme(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z':
		case i > 0 && (c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.'):
		default:
			return false
		}
	}
	return true
}

// validPath: what the HTTP/1.1 parser takes as a request-target, visible
// ASCII without '#' (a fragment is never sent).
func validPath(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; c <= ' ' || c >= 0x7f || c == '#' {
			return false
		}
	}
	return true
}

// contentLength reads a content-length field's value; false when it is
// malformed: in trailers, a second one (have is not -1), not 1*DIGIT.
func contentLength(v string, trailers bool, have int64) (int64, bool) {
	if trailers || have >= 0 {
		return 0, false
	}
	return parseLength(v)
}

// parseLength: 1*DIGIT without overflow (at most 18 digits: below 2^63).
func parseLength(s string) (int64, bool) {
	if s == "" || len(s) > 18 {
		return 0, false
	}
	var n int64
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + int64(c-'0')
	}
	return n, true
}
