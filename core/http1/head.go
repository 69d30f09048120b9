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
	// KindXForwardedProto is X-Forwarded-Proto, also spelt with '_' for
	// '-' (CGI, PHP, WSGI and Rack servers read both as
	// HTTP_X_FORWARDED_PROTO): the field the proxy replaces when it sets
	// its own (DropXForwardedProto).
	KindXForwardedProto
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
		if equalFieldName(name, "x-forwarded-proto") {
			return KindXForwardedProto
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
// (DESIGN.md: duplicate Content-Length is refused; net/http refuses it
// too). In a response the same defects are 502.
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

// teVerdict judges the Transfer-Encoding of a head that has one, at its
// end. A sender must not send it in HTTP/1.0, nor with Content-Length; we
// refuse both rather than guess (RFC 9112 §6.1, §6.3 item 3). RFC 9112
// §6.3 lets an intermediary drop Content-Length and close after the
// response; we reject instead, because such a request is either an attack
// or a broken client, and rejecting leaves no interpretation for a server
// behind us to disagree with (dropping Content-Length still forwards a
// body whose framing was ambiguous on the wire). Then chunked missing,
// repeated or not final -> 400 (RFC 9112 §6.3: the length cannot be
// determined); chunked final and once but preceded by another coding
// (gzip, chunked) -> 501, since we do not implement that coding (RFC 9112
// §6.1). numErrCodes: the body is chunked.
func (h *Head) teVerdict() errCode {
	switch {
	case h.Minor == 0:
		return eTEHTTP10
	case h.clSeen:
		return eCLandTE
	case h.teChunked > 1:
		return eTEDup
	case h.teChunked == 0 || !h.teLast:
		return eTEFinal
	case h.teOther:
		return eTEUnknown
	}
	return numErrCodes
}

// scanner finds the lines of a head incrementally: it remembers how far it
// has searched for LF, so a head fed in many pieces is still searched once;
// each complete line is then parsed once, when its LF arrives. Nothing is
// ever re-parsed, so the total work is linear in the head size.
//
// The proxy reads into fixed-size buffers (core/proxy.Buffer, bufsize, 16
// KiB by default) and passes the pending bytes, always starting at the
// first byte of the head, so a head delivered one byte at a time still
// costs one pass. The parsed head holds offsets (Span) into that buffer,
// up to MaxHeaders field lines in a fixed array. A head that does not fit
// in Limits.MaxHead (set it to the buffer size) is refused with 431, so the
// whole head is always in one buffer when Parse completes.
type scanner struct {
	scanned   int     // bytes of buf already searched for LF
	lineStart int     // offset of the line being received
	start     int     // offset of the start line (after skipped empty lines)
	lines     int     // complete lines, start line included
	failed    errCode // the error + 1; 0 while the head is not refused
	done      bool
}

// What scan stops at. The start line, a Host field and the end of the head
// are where a request and a response differ: their Parse methods handle
// these and call scan again, until headStop.
const (
	headStop  = iota // the head is complete, refused, or needs more bytes: see result
	headStart        // buf[start:end] is the start line; check its verdict
	headHost         // h.Headers[h.N-1] is a Host field (requests only); check it
	headEnd          // the empty line that ends the head was read; end it
)

// scan is the line loop of Request.Parse and Response.Parse: it runs over
// the complete lines of buf not seen yet, parses the field lines into h
// with their framing rules, and returns at the first event its caller must
// handle. For a request (RFC 9112 §2.2) empty lines before the start line
// are skipped and Host fields are reported; a response gets neither. Once
// the head is complete or refused, scan stops at once (results are sticky
// until Reset).
func (s *scanner) scan(h *Head, buf []byte, l *Limits, request bool) (start, end, ev int) {
	if s.done || s.failed != 0 {
		return 0, 0, headStop
	}
	maxHead, maxLine, maxN := l.head(), l.requestLine(), l.headers()
	for {
		start, end, st := s.next(buf, maxLine, maxHead)
		switch st {
		case lineMore:
			s.check(s.incomplete(buf, maxLine, maxHead))
			return 0, 0, headStop
		case lineBad:
			s.check(eBareLF)
			return 0, 0, headStop
		case lineLong:
			s.check(eRequestLineLong)
			return 0, 0, headStop
		}
		if s.lines == 0 {
			if start == end && request {
				// RFC 9112 §2.2: ignore empty lines before the request line
				// (browsers send a CRLF after a POST body); they count
				// against MaxHead.
				s.start = s.lineStart
				continue
			}
			if end+2-start > maxLine {
				s.check(eRequestLineLong)
				return 0, 0, headStop
			}
			s.lines++
			return start, end, headStart
		}
		if start == end {
			return 0, 0, headEnd
		}
		if h.N >= maxN {
			s.check(eTooManyHeaders)
			return 0, 0, headStop
		}
		k, e, ok := h.field(buf, start, end)
		if !ok {
			s.check(e)
			return 0, 0, headStop
		}
		s.lines++
		if k == KindHost && request {
			return 0, 0, headHost
		}
	}
}

// check records the verdict of a check on the head: numErrCodes lets it
// go on, any other code refuses it.
func (s *scanner) check(e errCode) {
	if e != numErrCodes {
		s.failed = e + 1
	}
}

// end records the verdict on a head whose last line scan just read: with
// no error, the head is complete and its length is known.
func (s *scanner) end(h *Head, e errCode) {
	if e != numErrCodes {
		s.failed = e + 1
		return
	}
	h.Len = s.lineStart
	s.done = true
}

// result is what Parse returns when scan stops: the head's length once
// complete, the error (from errs, the table of the message kind) once
// refused, else (0, nil) for more bytes.
func (s *scanner) result(h *Head, errs *[numErrCodes]Error) (int, error) {
	switch {
	case s.done:
		return h.Len, nil
	case s.failed != 0:
		return 0, &errs[s.failed-1]
	}
	return 0, nil
}

const (
	lineMore = iota
	lineOK
	lineBad
	lineLong
)

// next returns the next complete line buf[start:end] (CRLF excluded).
// Only the first maxHead bytes of buf are looked at. A line must end with
// CRLF: RFC 9112 §2.2 lets a lenient recipient accept a bare LF, but we
// refuse it (400), since a proxy that accepts what the server may split
// differently is a request-smuggling vector. A bare CR anywhere in the
// head is refused by the line parsers (RFC 9112 §2.2 MUST).
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
