package http1

import "bytes"

// MaxHeaders is the capacity of a Head's header array; Limits.MaxHeaders may
// lower it, never raise it. A head with more fields is refused with 431.
const MaxHeaders = 100

// Default limits, used when the corresponding Limits field is zero.
const (
	DefaultMaxRequestLine = 8192
	DefaultMaxHead        = 16384
	// MaxMethodLen bounds a method token: longer than any registered method
	// (the longest, UPDATEREDIRECTREF, has 17 bytes), so a longer one is one
	// we cannot implement: 501 as RFC 9112 §3 suggests.
	MaxMethodLen = 32
	// maxConnectionOptions bounds the field names listed in Connection
	// fields (close, keep-alive and upgrade not counted).
	maxConnectionOptions = 16
)

// Limits bound what a parser accepts. The zero value means the defaults.
type Limits struct {
	MaxRequestLine int // request line (status line) length with CRLF; 414 beyond
	MaxHead        int // whole head with CRLFs; 431 beyond. Set it to the buffer size.
	MaxHeaders     int // header field count; 431 beyond; capped at MaxHeaders
}

func (l Limits) requestLine() int {
	if l.MaxRequestLine > 0 {
		return l.MaxRequestLine
	}
	return DefaultMaxRequestLine
}

func (l Limits) head() int {
	if l.MaxHead > 0 {
		return min(l.MaxHead, 1<<30) // spans are int32
	}
	return DefaultMaxHead
}

func (l Limits) headers() int {
	if l.MaxHeaders > 0 && l.MaxHeaders < MaxHeaders {
		return l.MaxHeaders
	}
	return MaxHeaders
}

// Span locates bytes in the buffer the head was parsed from: buf[Off:Off+Len].
type Span struct {
	Off, Len int32
}

// Bytes returns the spanned bytes of buf (the same buffer given to Parse),
// without copying.
func (s Span) Bytes(buf []byte) []byte { return buf[s.Off : s.Off+s.Len : s.Off+s.Len] }

func span(off, n int) Span { return Span{Off: int32(off), Len: int32(n)} }

// Kind identifies the header fields the parser and the proxy act on.
type Kind uint8

const (
	KindOther Kind = iota
	KindHost
	KindContentLength
	KindTransferEncoding
	KindConnection
	KindUpgrade
	KindExpect
	KindKeepAlive
	KindProxyConnection
	KindTE
	KindTrailer
)

func kindOf(name []byte) Kind {
	switch len(name) {
	case 2:
		if EqualFold(name, "te") {
			return KindTE
		}
	case 4:
		if EqualFold(name, "host") {
			return KindHost
		}
	case 6:
		if EqualFold(name, "expect") {
			return KindExpect
		}
	case 7:
		if EqualFold(name, "upgrade") {
			return KindUpgrade
		}
		if EqualFold(name, "trailer") {
			return KindTrailer
		}
	case 10:
		if EqualFold(name, "connection") {
			return KindConnection
		}
		if EqualFold(name, "keep-alive") {
			return KindKeepAlive
		}
	case 14:
		if EqualFold(name, "content-length") {
			return KindContentLength
		}
	case 16:
		if EqualFold(name, "proxy-connection") {
			return KindProxyConnection
		}
	case 17:
		if EqualFold(name, "transfer-encoding") {
			return KindTransferEncoding
		}
	}
	return KindOther
}

// Header is one field line: name and OWS-trimmed value spans.
type Header struct {
	Name, Value Span
	Kind        Kind
}

// Body says how the message body is delimited (RFC 9112 §6.3).
type Body uint8

const (
	BodyNone       Body = iota // no body (or Content-Length: 0 is BodyLength with 0)
	BodyLength                 // ContentLength bytes
	BodyChunked                // chunked transfer coding; decode with Chunked
	BodyUntilClose             // response read until the server closes
)

func (b Body) String() string {
	switch b {
	case BodyNone:
		return "none"
	case BodyLength:
		return "length"
	case BodyChunked:
		return "chunked"
	case BodyUntilClose:
		return "until-close"
	}
	return "invalid"
}

// Head is what Request and Response share: the field lines and the framing
// facts derived from them. All spans refer to the buffer given to Parse.
type Head struct {
	Headers [MaxHeaders]Header
	N       int // number of valid entries in Headers

	Minor         int   // HTTP/1.Minor: 0 or 1
	Len           int   // bytes of the head including the final empty line, once complete
	ContentLength int64 // -1 when absent (always -1 when chunked)
	Body          Body
	// Close is true when the connection must close after this message:
	// "Connection: close", HTTP/1.0 without "Connection: keep-alive", or a
	// response body delimited by close.
	Close bool
	// Upgrade: in a request, HTTP/1.1 with "Connection: upgrade" and an
	// Upgrade field listing websocket; in a response, status 101 or a 2xx
	// to CONNECT: the connection becomes a tunnel after this head.
	Upgrade bool
	// Expect100: HTTP/1.1 request with "Expect: 100-continue".
	Expect100 bool

	exp100     bool
	connTokens int // Connection options naming fields to drop (not close/keep-alive/upgrade)
	connClose  bool
	connKeep   bool
	connUpg    bool
	upgWS      bool
	clSeen     bool
	teSeen     bool
	teChunked  int  // "chunked" occurrences
	teLast     bool // last coding seen is chunked
	teOther    bool // a coding other than chunked was seen
}

func (h *Head) reset() {
	h.N = 0
	h.Minor = 0
	h.Len = 0
	h.ContentLength = -1
	h.Body = BodyNone
	h.Close = false
	h.Upgrade = false
	h.Expect100 = false
	h.connTokens = 0
	h.connClose, h.connKeep, h.connUpg, h.upgWS = false, false, false, false
	h.clSeen, h.teSeen, h.teLast, h.teOther = false, false, false, false
	h.teChunked = 0
	h.exp100 = false
}

// Name returns the name of header i.
func (h *Head) Name(buf []byte, i int) []byte { return h.Headers[i].Name.Bytes(buf) }

// Value returns the value of header i.
func (h *Head) Value(buf []byte, i int) []byte { return h.Headers[i].Value.Bytes(buf) }

// Index returns the index of the first header named name (ASCII
// case-insensitive) at or after from, or -1.
func (h *Head) Index(buf []byte, name string, from int) int {
	for i := from; i < h.N; i++ {
		if EqualFold(h.Headers[i].Name.Bytes(buf), name) {
			return i
		}
	}
	return -1
}

// Get returns the value of the first header named name and whether there
// is one.
func (h *Head) Get(buf []byte, name string) ([]byte, bool) {
	if i := h.Index(buf, name, 0); i >= 0 {
		return h.Headers[i].Value.Bytes(buf), true
	}
	return nil, false
}

// field parses one header line buf[start:end] (CRLF excluded) into
// h.Headers[h.N] and applies the framing rules that need only this field.
// It returns the kind of the field or an error code.
func (h *Head) field(buf []byte, start, end int) (Kind, errCode, bool) {
	line := buf[start:end]
	if line[0] == ' ' || line[0] == '\t' {
		return 0, eObsFold, false
	}
	colon := -1
	for i, c := range line {
		if c == ':' {
			colon = i
			break
		}
		if !isToken(c) {
			if isOWS(c) {
				// "Name :" or "Na me:"; both make names ambiguous between
				// parsers (a classic smuggling vector), RFC 9112 §5.1.
				if j := bytes.IndexByte(line[i:], ':'); j >= 0 && len(trimOWS(line[i:i+j])) == 0 {
					return 0, eSpaceBeforeColon, false
				}
			}
			if c == '\r' {
				return 0, eBareCR, false
			}
			return 0, eFieldName, false
		}
	}
	if colon < 0 {
		return 0, eNoColon, false
	}
	if colon == 0 {
		return 0, eFieldName, false
	}
	vs, ve := colon+1, len(line)
	for vs < ve && isOWS(line[vs]) {
		vs++
	}
	for ve > vs && isOWS(line[ve-1]) {
		ve--
	}
	if !validValue(line[vs:ve]) {
		if bytes.IndexByte(line[vs:ve], '\r') >= 0 {
			return 0, eBareCR, false
		}
		return 0, eFieldValue, false
	}
	name := line[:colon]
	value := line[vs:ve]
	k := kindOf(name)
	hd := &h.Headers[h.N]
	hd.Name = span(start, colon)
	hd.Value = span(start+vs, ve-vs)
	hd.Kind = k
	h.N++
	switch k {
	case KindContentLength:
		if e, ok := h.contentLength(value); !ok {
			return 0, e, false
		}
	case KindTransferEncoding:
		if e, ok := h.transferEncoding(value); !ok {
			return 0, e, false
		}
	case KindConnection:
		l := list{s: value}
		for t, ok := l.next(); ok; t, ok = l.next() {
			switch {
			case len(t) == 0:
				// empty list elements are allowed (RFC 9110 §5.6.1)
			case !IsToken(t):
				return 0, eFieldValue, false
			case EqualFold(t, "close"):
				h.connClose = true
			case EqualFold(t, "keep-alive"):
				h.connKeep = true
			case EqualFold(t, "upgrade"):
				h.connUpg = true
			default:
				// Each named field costs a scan of the Connection values
				// per forwarded field (HopByHop): bound the options so a
				// large head cannot make rewriting quadratic.
				h.connTokens++
				if h.connTokens > maxConnectionOptions {
					return 0, eConnOptions, false
				}
			}
		}
	case KindExpect:
		if EqualFold(value, "100-continue") {
			h.exp100 = true
		}
	case KindUpgrade:
		l := list{s: value}
		for t, ok := l.next(); ok; t, ok = l.next() {
			if i := bytes.IndexByte(t, '/'); i >= 0 {
				t = t[:i]
			}
			if EqualFold(t, "websocket") {
				h.upgWS = true
			}
		}
	}
	return k, 0, true
}

// contentLength applies RFC 9110 §8.6 and RFC 9112 §6.3: digits only, no
// sign, no inner whitespace, no overflow. A list ("5, 5") or a repeated
// field is refused even when every value is the same number: RFC 9110 §8.6
// lets a recipient take it as one value, but we forward the head as
// received, and a server or cache behind us that reads it otherwise (the
// first value, the last, or an error) would frame the body differently
// (DESIGN.md: duplicate Content-Length is refused).
func (h *Head) contentLength(v []byte) (errCode, bool) {
	if h.clSeen {
		return eCLDup, false
	}
	if len(v) == 0 {
		return eCL, false
	}
	var n int64
	for _, c := range v {
		d := int64(c) - '0'
		if d < 0 || d > 9 {
			if c == ',' {
				return eCLDup, false
			}
			return eCL, false
		}
		if n > (1<<63-1-d)/10 {
			return eCL, false
		}
		n = n*10 + d
	}
	h.clSeen = true
	h.ContentLength = n
	return 0, true
}

// transferEncoding records the codings of one Transfer-Encoding field; the
// verdict (chunked must be final and only once) is given at end of head by
// teVerdict, since codings may be spread over several field lines.
func (h *Head) transferEncoding(v []byte) (errCode, bool) {
	h.teSeen = true
	l := list{s: v}
	for e, ok := l.next(); ok; e, ok = l.next() {
		if !IsToken(e) {
			// empty element, parameters (";q=..."), or garbage
			return eTEInvalid, false
		}
		if EqualFold(e, "chunked") {
			h.teChunked++
			h.teLast = true
		} else {
			h.teOther = true
			h.teLast = false
		}
	}
	return 0, true
}

// teVerdict: chunked missing, repeated or not final -> 400; chunked final
// and once but preceded by another coding (gzip, chunked) -> 501, since we
// do not implement that coding.
func (h *Head) teVerdict() (errCode, bool) {
	switch {
	case h.teChunked > 1:
		return eTEDup, false
	case h.teChunked == 0 || !h.teLast:
		return eTEFinal, false
	case h.teOther:
		return eTEUnknown, false
	}
	return 0, true
}

// scanner finds the lines of a head incrementally: it remembers how far it
// has searched for LF, so a head fed in many pieces is still searched once;
// each complete line is then parsed once, when its LF arrives. Nothing is
// ever re-parsed, so the total work is linear in the head size.
type scanner struct {
	scanned   int // bytes of buf already searched for LF
	lineStart int // offset of the line being received
	start     int // offset of the start line (after skipped empty lines)
	lines     int // complete lines, start line included
	err       *Error
	done      bool
}

const (
	lineMore = iota
	lineOK
	lineBad
	lineLong
)

// next returns the next complete line buf[start:end] (CRLF excluded).
// Only the first maxHead bytes of buf are looked at.
func (s *scanner) next(buf []byte, maxLine, maxHead int) (start, end, st int) {
	lim := len(buf)
	if lim > maxHead {
		lim = maxHead
	}
	if s.scanned >= lim {
		return 0, 0, lineMore
	}
	j := bytes.IndexByte(buf[s.scanned:lim], '\n')
	if j < 0 {
		s.scanned = lim
		return 0, 0, lineMore
	}
	lf := s.scanned + j
	if s.lines == 0 && lf-s.lineStart > maxLine {
		// what a piecewise feed would have refused before this LF came
		return 0, 0, lineLong
	}
	if lf == s.lineStart || buf[lf-1] != '\r' {
		return 0, 0, lineBad
	}
	start, end = s.lineStart, lf-1
	s.scanned = lf + 1
	s.lineStart = lf + 1
	return start, end, lineOK
}

// incomplete decides, when no complete head is in buf yet, whether more
// bytes can still help: a start line already longer than its limit is 414,
// a head filling maxHead without its end is 431.
func (s *scanner) incomplete(buf []byte, maxLine, maxHead int) errCode {
	lim := len(buf)
	if lim > maxHead {
		lim = maxHead
	}
	if s.lines == 0 && lim-s.start > maxLine {
		return eRequestLineLong
	}
	if len(buf) >= maxHead {
		return eHeadTooLarge
	}
	return numErrCodes
}

func (s *scanner) reset() { *s = scanner{} }
