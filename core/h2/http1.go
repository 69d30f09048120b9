package h2

import (
	"strconv"

	"golang.org/x/net/http2/hpack"
)

// AppendHTTP1 appends r as an HTTP/1.1 request head without its final
// empty line, so the caller can add its own fields (X-Forwarded-For, Via)
// before it appends "\r\n": the request line from :method and :path
// (CONNECT: :authority), Host from :authority (else the host field, else
// empty), the regular fields except host, cookie, te and content-length,
// the cookie crumbs joined with "; " in one Cookie field (RFC 9113
// §8.2.3), then the framing: Content-Length when the request had one,
// else "Transfer-Encoding: chunked" when body says DATA follows, else
// "Content-Length: 0" for POST, PUT and PATCH (servers may want a length
// for them). CONNECT gets no framing: a tunnel follows.
//
// r must come from Handler.Headers (validated: tokens, values without
// CR/LF/NUL, one length, a valid authority), which is what makes the head
// safe: nothing in it can end a line, add a field or set the framing
// except what is written here. The result parses with core/http1's
// Request (pinned by TestHTTP1RoundTrip and FuzzHTTP1).
func AppendHTTP1(dst []byte, r *Request, body bool) []byte {
	target := r.Path
	if r.IsConnect() {
		target = r.Authority
	}
	dst = append(dst, r.Method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	dst = append(dst, " HTTP/1.1\r\nhost: "...)
	if r.Authority != "" {
		dst = append(dst, r.Authority...)
	} else {
		dst = append(dst, r.Host...)
	}
	dst = append(dst, "\r\n"...)
	for i := range r.Fields {
		f := &r.Fields[i]
		switch f.Name {
		case "host", "cookie", "te", "content-length":
			continue
		}
		dst = appendField(dst, f)
	}
	if r.cookies > 0 {
		dst = append(dst, "cookie: "...)
		first := true
		for i := range r.Fields {
			if r.Fields[i].Name != "cookie" {
				continue
			}
			if !first {
				dst = append(dst, "; "...)
			}
			first = false
			dst = append(dst, r.Fields[i].Value...)
		}
		dst = append(dst, "\r\n"...)
	}
	if r.IsConnect() {
		return dst
	}
	switch {
	case r.ContentLength >= 0:
		dst = append(dst, "content-length: "...)
		dst = strconv.AppendInt(dst, r.ContentLength, 10)
		dst = append(dst, "\r\n"...)
	case body:
		dst = append(dst, "transfer-encoding: chunked\r\n"...)
	case r.Method == "POST" || r.Method == "PUT" || r.Method == "PATCH":
		dst = append(dst, "content-length: 0\r\n"...)
	}
	return dst
}

func appendField(dst []byte, f *hpack.HeaderField) []byte {
	dst = append(dst, f.Name...)
	dst = append(dst, ": "...)
	dst = append(dst, f.Value...)
	return append(dst, "\r\n"...)
}

// AppendHTTP1Trailers ends a chunked HTTP/1.1 body with the last chunk,
// the trailer fields (as Handler.Trailers gave them: validated, no
// pseudo-header fields, no content-length or host) and the final empty
// line. A body framed by Content-Length has nowhere to carry trailers:
// the caller drops them.
func AppendHTTP1Trailers(dst []byte, fields []hpack.HeaderField) []byte {
	dst = append(dst, "0\r\n"...)
	for i := range fields {
		if fields[i].Name == "te" {
			continue
		}
		dst = appendField(dst, &fields[i])
	}
	return append(dst, "\r\n"...)
}
