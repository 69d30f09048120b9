package http1

// Response is a parsed response head, owned by the server side of one
// connection and reused: Reset, then Parse as bytes arrive.
type Response struct {
	Head
	Limits Limits

	Status int
	Reason Span
	// Interim is true for a 1xx response other than 101 (100 Continue,
	// 103 Early Hints...): it is forwarded and the final response follows.
	Interim bool

	s scanner
}

// Reset prepares r for the next response; Limits are kept.
func (r *Response) Reset() {
	r.Head.reset()
	r.Status = 0
	r.Reason = Span{}
	r.Interim = false
	r.s.reset()
}

// Parse parses the response head at the start of buf, with the same
// contract as Request.Parse. req is the method of the request this response
// answers: a response to HEAD has no body, and a 2xx to CONNECT becomes a
// tunnel (Upgrade true, no body). Every error carries status 502.
func (r *Response) Parse(buf []byte, req Method) (int, error) {
	s := &r.s
	for {
		start, end, ev := s.scan(&r.Head, buf, &r.Limits, false)
		switch ev {
		case headStart:
			s.check(r.statusLine(buf, start, end))
		case headEnd:
			s.end(&r.Head, r.finish(req))
			fallthrough
		default:
			return s.result(&r.Head, &responseErrors)
		}
	}
}

// statusLine parses HTTP-version SP 3DIGIT SP reason-phrase. The SP and
// reason after the code may be missing ("HTTP/1.1 200"), which servers do
// send and which is unambiguous.
func (r *Response) statusLine(buf []byte, start, end int) errCode {
	line := buf[start:end]
	if len(line) < 12 || line[8] != ' ' {
		return eStatusLine
	}
	switch string(line[:8]) {
	case "HTTP/1.1":
		r.Minor = 1
	case "HTTP/1.0":
		r.Minor = 0
	default:
		if string(line[:7]) != "HTTP/1." || !isDigit(line[7]) {
			return eVersion // HTTP/2.0, other majors, malformed
		}
		// HTTP/1.2 to HTTP/1.9: a higher minor version of the major we
		// implement is handled as the highest we support (RFC 9110 §2.5),
		// as in requests; the proxy relays the status line with HTTP/1.1.
		r.Minor = 1
	}
	c := line[9:12]
	if !isDigit(c[0]) || !isDigit(c[1]) || !isDigit(c[2]) || c[0] == '0' {
		return eStatusCode
	}
	r.Status = int(c[0]-'0')*100 + int(c[1]-'0')*10 + int(c[2]-'0')
	if len(line) == 12 {
		r.Reason = span(end, 0)
		return numErrCodes
	}
	if line[12] != ' ' {
		return eStatusCode
	}
	reason := line[13:]
	if !allClass(reason, cReason) {
		return eReason
	}
	r.Reason = span(start+13, len(reason))
	return numErrCodes
}

// finish decides the body length per RFC 9112 §6.3: 1xx, 204, 304 and
// responses to HEAD have no body; 101 sets Upgrade, other 1xx Interim; a
// 2xx to CONNECT sets Upgrade; then chunked, then Content-Length, else the
// body runs until close (Close set). Transfer-Encoding must be exactly
// chunked, in HTTP/1.1, without Content-Length: anything else is a 502
// rather than a guess.
func (r *Response) finish(req Method) errCode {
	if r.teSeen {
		// Codings other than a lone chunked would force us to read until
		// close and pass an encoding we cannot check: 502.
		if e := r.teVerdict(); e != numErrCodes {
			return e
		}
	}
	r.Close = r.connClose || (r.Minor == 0 && !r.connKeep)
	switch {
	case r.Status < 200:
		r.Body = BodyNone
		r.ContentLength = -1
		if r.Status == 101 {
			r.Upgrade = true
			r.Close = false
		} else {
			r.Interim = true
			r.Close = false // interim responses do not end the exchange
		}
		return numErrCodes
	case req == MethodCONNECT && r.Status < 300:
		r.Body = BodyNone
		r.ContentLength = -1
		r.Upgrade = true
		return numErrCodes
	case req == MethodHEAD || r.Status == 204 || r.Status == 304:
		// Content-Length, if any, describes the would-be body; keep its
		// value but there are no body bytes.
		r.Body = BodyNone
		if !r.clSeen {
			r.ContentLength = -1
		}
		return numErrCodes
	case r.teSeen:
		r.Body = BodyChunked
		r.ContentLength = -1
	case r.clSeen:
		r.Body = BodyLength
	default:
		r.Body = BodyUntilClose
		r.ContentLength = -1
		r.Close = true
	}
	return numErrCodes
}
