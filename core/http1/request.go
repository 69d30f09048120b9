package http1

// Method identifies the request methods the proxy treats specially; any
// other token is MethodOther (and still forwarded).
type Method uint8

const (
	MethodOther Method = iota
	MethodGET
	MethodHEAD
	MethodPOST
	MethodPUT
	MethodDELETE
	MethodCONNECT
	MethodOPTIONS
	MethodTRACE
	MethodPATCH
)

// methodOf is case-sensitive: methods are (RFC 9110 §9.1).
func methodOf(m []byte) Method {
	switch string(m) { // no allocation: the compiler compares in place
	case "GET":
		return MethodGET
	case "HEAD":
		return MethodHEAD
	case "POST":
		return MethodPOST
	case "PUT":
		return MethodPUT
	case "DELETE":
		return MethodDELETE
	case "CONNECT":
		return MethodCONNECT
	case "OPTIONS":
		return MethodOPTIONS
	case "TRACE":
		return MethodTRACE
	case "PATCH":
		return MethodPATCH
	}
	return MethodOther
}

// Safe reports whether the method is safe (RFC 9110 §9.2.1): such a request
// may be retried on another server connection.
func (m Method) Safe() bool {
	return m == MethodGET || m == MethodHEAD || m == MethodOPTIONS || m == MethodTRACE
}

// Form is the form of a request-target (RFC 9112 §3.2).
type Form uint8

const (
	FormOrigin    Form = iota // "/path?query"
	FormAbsolute              // "http://host/path"
	FormAuthority             // "host:port", CONNECT only
	FormAsterisk              // "*", OPTIONS only
)

// Request is a parsed request head. It belongs to one connection and is
// reused for each request on it: Reset, then Parse as bytes arrive.
type Request struct {
	Head
	Limits Limits

	// Method starts the request line; empty lines skipped before it are
	// counted in the head length, so Method.Off is where the head begins.
	Method   Span
	MethodID Method
	Target   Span
	Form     Form
	// Authority is the authority of an absolute-form or authority-form
	// target; empty otherwise.
	Authority Span
	// Host is the Host field value; for an absolute-form target without a
	// Host field (HTTP/1.0) it is the target's authority.
	Host    Span
	HasHost bool

	hostN int
	s     scanner
}

// Reset prepares r for the next request; Limits are kept.
func (r *Request) Reset() {
	r.Head.reset()
	r.Method, r.Target, r.Authority, r.Host = Span{}, Span{}, Span{}, Span{}
	r.MethodID, r.Form = MethodOther, FormOrigin
	r.HasHost = false
	r.hostN = 0
	r.s.reset()
}

// Parse parses the request head at the start of buf. buf must begin where
// the previous call's buf began and hold at least the bytes it held (a
// growing prefix of the connection's input): Parse resumes where it stopped.
// It returns (n, nil) once the head is complete, n being its length (the
// body, if any, starts at buf[n]); (0, nil) when more bytes are needed; or
// (0, err) with err an *Error. After an error or completion further calls
// return the same result until Reset. The zero Request is ready to parse.
func (r *Request) Parse(buf []byte) (int, error) {
	s := &r.s
	for {
		start, end, ev := s.scan(&r.Head, buf, &r.Limits, true)
		switch ev {
		case headStart:
			s.check(r.requestLine(buf, start, end))
		case headHost:
			s.check(r.host(buf))
		case headEnd:
			s.end(&r.Head, r.finish(buf))
			fallthrough
		default:
			return s.result(&r.Head, &requestErrors)
		}
	}
}

// host checks the Host field just parsed (the last of r.Headers): one per
// head (RFC 9112 §3.2), and a valid authority.
func (r *Request) host(buf []byte) errCode {
	r.hostN++
	if r.hostN > 1 {
		return eHostDup
	}
	hd := &r.Headers[r.N-1]
	if !validAuthority(hd.Value.Bytes(buf), false) {
		return eHostInvalid
	}
	r.Host, r.HasHost = hd.Value, true
	return numErrCodes
}

// requestLine parses method SP request-target SP HTTP-version: exactly one
// SP between the parts (RFC 9112 §3), no other whitespace.
func (r *Request) requestLine(buf []byte, start, end int) errCode {
	line := buf[start:end]
	i := 0
	for i < len(line) && isToken(line[i]) {
		i++
	}
	switch {
	case i == 0:
		if line[0] == '\r' {
			return eBareCR
		}
		return eMethod
	case i == len(line):
		return eRequestLine
	case line[i] != ' ':
		if line[i] == '\r' {
			return eBareCR
		}
		return eMethod
	case i > MaxMethodLen:
		return eMethodLong
	}
	r.Method = span(start, i)
	r.MethodID = methodOf(line[:i])
	j := i + 1
	k := j
	for k < len(line) && charClass[line[k]]&cTarget != 0 {
		k++
	}
	switch {
	case k == j || k == len(line):
		return eRequestLine
	case line[k] != ' ':
		if line[k] == '\r' {
			return eBareCR
		}
		return eTarget
	}
	r.Target = span(start+j, k-j)
	v := line[k+1:]
	switch {
	case string(v) == "HTTP/1.1":
		r.Minor = 1
	case string(v) == "HTTP/1.0":
		r.Minor = 0
	case len(v) == 8 && string(v[:7]) == "HTTP/1." && isDigit(v[7]):
		// HTTP/1.2 to HTTP/1.9: a higher minor version of the major we
		// implement is handled as the highest we support (RFC 9110 §2.5);
		// the request line sent to the server says HTTP/1.1
		// (AppendRequestLine).
		r.Minor = 1
	case len(v) == 8 && string(v[:5]) == "HTTP/" && isDigit(v[5]) && v[6] == '.' && isDigit(v[7]):
		// well-formed but another major version (HTTP/2.0, HTTP/0.9...):
		// 505 as nginx answers (HTTP/2 prior knowledge does not come this
		// way); anything else, HTTP/0.9 without a version included, is 400.
		return eVersionUnsupported
	default:
		return eVersion
	}
	return r.targetForm(buf, start+j, line[j:k])
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func (r *Request) targetForm(buf []byte, off int, t []byte) errCode {
	if r.MethodID == MethodCONNECT {
		// authority-form, RFC 9112 §3.2.3: host ":" port, port mandatory
		// (RFC 9110 §9.3.6).
		if !validAuthority(t, true) {
			return eAuthority
		}
		r.Form = FormAuthority
		r.Authority = span(off, len(t))
		return numErrCodes
	}
	if t[0] == '/' {
		r.Form = FormOrigin
		return numErrCodes
	}
	if len(t) == 1 && t[0] == '*' {
		if r.MethodID != MethodOPTIONS {
			return eTargetForm
		}
		r.Form = FormAsterisk
		return numErrCodes
	}
	// absolute-form: only http and https make sense to a reverse proxy.
	var rest int
	switch {
	case len(t) > 7 && EqualFold(t[:7], "http://"):
		rest = 7
	case len(t) > 8 && EqualFold(t[:8], "https://"):
		rest = 8
	default:
		return eTargetForm
	}
	a := rest
	for a < len(t) && t[a] != '/' && t[a] != '?' {
		a++
	}
	auth := t[rest:a]
	// no userinfo: '@' is not a host character (RFC 9110 §4.2.4)
	if len(auth) == 0 || !validAuthority(auth, false) {
		return eAuthority
	}
	r.Form = FormAbsolute
	r.Authority = span(off+rest, len(auth))
	return numErrCodes
}

func lastIndexByte(s []byte, c byte) int {
	for i := len(s) - 1; i >= 0; i-- {
		if s[i] == c {
			return i
		}
	}
	return -1
}

// finish applies the rules that need the whole head. An absolute-form
// authority must equal the Host field (case-insensitive), so the proxy and
// the server cannot route on different hosts. Expect: 100-continue is
// ignored in HTTP/1.0 (RFC 9110 §10.1.1); other expectations are left to
// the server.
func (r *Request) finish(buf []byte) errCode {
	if r.Minor == 1 && r.hostN == 0 {
		return eHostMissing
	}
	if r.Form == FormAbsolute {
		auth := r.Authority.Bytes(buf)
		if r.HasHost {
			if !EqualFoldBytes(r.Host.Bytes(buf), auth) {
				return eHostMismatch
			}
		} else {
			r.Host, r.HasHost = r.Authority, true
		}
	}
	if e := r.framing(); e != numErrCodes {
		return e
	}
	if r.Minor == 1 {
		r.Close = r.connClose
		r.Upgrade = r.connUpg && r.upgWS
		r.Expect100 = r.exp100
	} else {
		r.Close = r.connClose || !r.connKeep
	}
	return numErrCodes
}

// framing decides the request body length, RFC 9112 §6.3 items 3-7, with
// the stricter choices documented in doc.go.
func (h *Head) framing() errCode {
	if h.teSeen {
		if e := h.teVerdict(); e != numErrCodes {
			return e
		}
		h.Body = BodyChunked
		h.ContentLength = -1
		return numErrCodes
	}
	if h.clSeen {
		h.Body = BodyLength
	} else {
		h.Body = BodyNone
		h.ContentLength = -1
	}
	return numErrCodes
}
