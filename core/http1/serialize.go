package http1

import (
	"net/netip"
	"strconv"
)

// Continue100 is the interim response the proxy sends itself when it
// accepts an "Expect: 100-continue" request body.
const Continue100 = "HTTP/1.1 100 Continue\r\n\r\n"

// LastChunk ends a chunked body without trailers.
const LastChunk = "0\r\n\r\n"

// StatusText returns the reason phrase of the statuses the proxy produces
// or commonly relays, "" for others.
func StatusText(status int) string {
	switch status {
	case 100:
		return "Continue"
	case 101:
		return "Switching Protocols"
	case 200:
		return "OK"
	case 204:
		return "No Content"
	case 301:
		return "Moved Permanently"
	case 302:
		return "Found"
	case 303:
		return "See Other"
	case 304:
		return "Not Modified"
	case 307:
		return "Temporary Redirect"
	case 308:
		return "Permanent Redirect"
	case 400:
		return "Bad Request"
	case 401:
		return "Unauthorized"
	case 403:
		return "Forbidden"
	case 404:
		return "Not Found"
	case 405:
		return "Method Not Allowed"
	case 408:
		return "Request Timeout"
	case 409:
		return "Conflict"
	case 410:
		return "Gone"
	case 413:
		return "Content Too Large"
	case 414:
		return "URI Too Long"
	case 417:
		return "Expectation Failed"
	case 421:
		return "Misdirected Request"
	case 429:
		return "Too Many Requests"
	case 431:
		return "Request Header Fields Too Large"
	case 451:
		return "Unavailable For Legal Reasons"
	case 500:
		return "Internal Server Error"
	case 501:
		return "Not Implemented"
	case 502:
		return "Bad Gateway"
	case 503:
		return "Service Unavailable"
	case 504:
		return "Gateway Timeout"
	case 505:
		return "HTTP Version Not Supported"
	}
	return ""
}

// errorResponse returns the complete response the proxy sends for status:
// a constant string (so appending it costs no allocation), with
// Connection: close, since after any of these errors the request framing
// can no longer be trusted or the exchange is over, and Cache-Control:
// no-cache, so that a cache in front does not keep a passing 503 for the
// resource (HAProxy's error answers carry it too).
func errorResponse(status int) string {
	switch status {
	case 400:
		return "HTTP/1.1 400 Bad Request\r\nContent-Type: text/plain\r\nContent-Length: 16\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n400 Bad Request\n"
	case 403:
		return "HTTP/1.1 403 Forbidden\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n403 Forbidden\n"
	case 404:
		return "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain\r\nContent-Length: 14\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n404 Not Found\n"
	case 405:
		return "HTTP/1.1 405 Method Not Allowed\r\nContent-Type: text/plain\r\nContent-Length: 23\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n405 Method Not Allowed\n"
	case 408:
		return "HTTP/1.1 408 Request Timeout\r\nContent-Type: text/plain\r\nContent-Length: 20\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n408 Request Timeout\n"
	case 413:
		return "HTTP/1.1 413 Content Too Large\r\nContent-Type: text/plain\r\nContent-Length: 22\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n413 Content Too Large\n"
	case 414:
		return "HTTP/1.1 414 URI Too Long\r\nContent-Type: text/plain\r\nContent-Length: 17\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n414 URI Too Long\n"
	case 417:
		return "HTTP/1.1 417 Expectation Failed\r\nContent-Type: text/plain\r\nContent-Length: 23\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n417 Expectation Failed\n"
	case 431:
		return "HTTP/1.1 431 Request Header Fields Too Large\r\nContent-Type: text/plain\r\nContent-Length: 36\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n431 Request Header Fields Too Large\n"
	case 501:
		return "HTTP/1.1 501 Not Implemented\r\nContent-Type: text/plain\r\nContent-Length: 20\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n501 Not Implemented\n"
	case 502:
		return "HTTP/1.1 502 Bad Gateway\r\nContent-Type: text/plain\r\nContent-Length: 16\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n502 Bad Gateway\n"
	case 503:
		return "HTTP/1.1 503 Service Unavailable\r\nContent-Type: text/plain\r\nContent-Length: 24\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n503 Service Unavailable\n"
	case 504:
		return "HTTP/1.1 504 Gateway Timeout\r\nContent-Type: text/plain\r\nContent-Length: 20\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n504 Gateway Timeout\n"
	case 505:
		return "HTTP/1.1 505 HTTP Version Not Supported\r\nContent-Type: text/plain\r\nContent-Length: 31\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n505 HTTP Version Not Supported\n"
	}
	return "HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: 26\r\nCache-Control: no-cache\r\nConnection: close\r\n\r\n500 Internal Server Error\n"
}

// AppendError appends the complete proxy-generated response for status
// (400, 403, 404, 405, 408, 413, 414, 417, 431, 501, 502, 503, 504, 505;
// any other status gives a 500) with a short text body,
// "Cache-Control: no-cache" and "Connection: close".
func AppendError(dst []byte, status int) []byte {
	return append(dst, errorResponse(status)...)
}

// The proxy copies a head field by field: AppendRequestLine (always
// HTTP/1.1 towards servers), Head.AppendEndToEnd, which drops the
// hop-by-hop fields (HopByHop), then AppendXForwardedFor (a new field
// line; an existing one is kept before it, as HAProxy's option
// forwardfor does), AppendXForwardedProto (which replaces the client's:
// DropXForwardedProto) and AppendVia.

// AppendRequestLine appends "method SP target SP HTTP/1.1 CRLF": the proxy
// speaks HTTP/1.1 to servers whatever the client spoke.
func AppendRequestLine(dst, method, target []byte) []byte {
	dst = append(dst, method...)
	dst = append(dst, ' ')
	dst = append(dst, target...)
	return append(dst, " HTTP/1.1\r\n"...)
}

// AppendStatusLine appends "HTTP/1.1 status reason CRLF"; an empty reason
// is replaced by StatusText(status).
func AppendStatusLine(dst []byte, status int, reason []byte) []byte {
	dst = append(dst, "HTTP/1.1 "...)
	dst = strconv.AppendInt(dst, int64(status), 10)
	dst = append(dst, ' ')
	if len(reason) == 0 {
		return append(append(dst, StatusText(status)...), "\r\n"...)
	}
	dst = append(dst, reason...)
	return append(dst, "\r\n"...)
}

// AppendHeader appends "name: value CRLF". The caller guarantees both are
// valid (constants, or spans of a parsed head).
func AppendHeader(dst []byte, name string, value []byte) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendHeaderString is AppendHeader with a string value.
func AppendHeaderString(dst []byte, name, value string) []byte {
	dst = append(dst, name...)
	dst = append(dst, ": "...)
	dst = append(dst, value...)
	return append(dst, "\r\n"...)
}

// AppendContentLength appends "Content-Length: n CRLF".
func AppendContentLength(dst []byte, n int64) []byte {
	dst = append(dst, "Content-Length: "...)
	dst = strconv.AppendInt(dst, n, 10)
	return append(dst, "\r\n"...)
}

// AppendChunkSize appends a chunk-size line "hex CRLF" for n > 0 payload
// bytes (re-framing); end the body with LastChunk.
func AppendChunkSize(dst []byte, n int) []byte {
	dst = strconv.AppendUint(dst, uint64(n), 16)
	return append(dst, "\r\n"...)
}

// AppendXForwardedFor appends "X-Forwarded-For: client CRLF". A value the
// client sent is kept as its own field line before this one, which RFC 9110
// §5.3 makes equivalent to one comma-joined list (HAProxy's behaviour).
func AppendXForwardedFor(dst []byte, client netip.Addr) []byte {
	dst = append(dst, "X-Forwarded-For: "...)
	dst = client.Unmap().AppendTo(dst)
	return append(dst, "\r\n"...)
}

// AppendXForwardedProto appends "X-Forwarded-Proto: http|https CRLF".
func AppendXForwardedProto(dst []byte, tls bool) []byte {
	if tls {
		return append(dst, "X-Forwarded-Proto: https\r\n"...)
	}
	return append(dst, "X-Forwarded-Proto: http\r\n"...)
}

// AppendVia appends "Via: 1.minor by CRLF" (RFC 9110 §7.6.3), minor being
// the version the message was received with; by is the proxy's pseudonym.
func AppendVia(dst []byte, minor int, by string) []byte {
	if minor == 0 {
		dst = append(dst, "Via: 1.0 "...)
	} else {
		dst = append(dst, "Via: 1.1 "...)
	}
	dst = append(dst, by...)
	return append(dst, "\r\n"...)
}

// Keep selects hop-by-hop fields that HopByHop and AppendEndToEnd keep,
// and end-to-end fields that AppendEndToEnd drops because the proxy
// replaces them.
type Keep uint8

const (
	// KeepTransferEncoding keeps Transfer-Encoding: when the chunked body
	// is forwarded as it arrived (framing validated, not re-framed).
	KeepTransferEncoding Keep = 1 << iota
	// KeepUpgrade keeps Upgrade when the exchange is being upgraded; the
	// caller then appends "Connection: upgrade" itself.
	KeepUpgrade
	// DropXForwardedProto drops the client's X-Forwarded-Proto fields
	// (KindXForwardedProto: any case, '_' for '-') when the proxy
	// appends its own: a value the client sent first would be the one
	// most frameworks read, so a clear request could pass for HTTPS.
	// The proxy's value replaces it, as nginx's proxy_set_header and
	// HAProxy's http-request set-header do.
	DropXForwardedProto
)

// HopByHop reports whether header i of h must not be forwarded (RFC 9110
// §7.6.1): Connection, Keep-Alive, Proxy-Connection, TE; Transfer-Encoding
// and Trailer unless KeepTransferEncoding; Upgrade unless KeepUpgrade; and
// any field named in a Connection field. Framing and routing fields (Host, Content-Length,
// Transfer-Encoding) are never dropped because a Connection field names
// them: "Connection: content-length" would otherwise let a client strip
// the length the server needs to frame the body (a smuggling trick).
func (h *Head) HopByHop(buf []byte, i int, keep Keep) bool {
	switch h.Headers[i].Kind {
	case KindConnection, KindKeepAlive, KindProxyConnection, KindTE:
		return true
	case KindTransferEncoding, KindTrailer:
		// Trailer announces trailer fields: they pass through only when
		// the chunked framing (trailers included) is forwarded as is.
		return keep&KeepTransferEncoding == 0
	case KindUpgrade:
		return keep&KeepUpgrade == 0
	case KindOther, KindExpect, KindXForwardedProto:
		if h.connTokens == 0 {
			return false
		}
		name := h.Headers[i].Name.Bytes(buf)
		for j := 0; j < h.N; j++ {
			if h.Headers[j].Kind == KindConnection && hasTokenBytes(h.Headers[j].Value.Bytes(buf), name) {
				return true
			}
		}
	}
	return false
}

// AppendEndToEnd appends every header line of h that is not hop-by-hop,
// as "Name: value CRLF" with the name and value as received.
func (h *Head) AppendEndToEnd(dst, buf []byte, keep Keep) []byte {
	return h.AppendEndToEndStrip(dst, buf, keep, nil)
}

// AppendEndToEndStrip is AppendEndToEnd without the fields whose name
// starts with strip (compared ASCII case-insensitively, '_' standing for
// '-': CGI-style servers read both as '_'): fields the proxy adds itself,
// which a client must not forge (a TLS client's certificate fields).
func (h *Head) AppendEndToEndStrip(dst, buf []byte, keep Keep, strip []byte) []byte {
	for i := 0; i < h.N; i++ {
		if h.forwarded(buf, i, keep, strip) {
			dst = h.appendField(dst, buf, i)
		}
	}
	return dst
}

// FieldFilter drops more fields from a head being copied: the fields a
// rule removes or replaces (core/rules).
type FieldFilter interface {
	DropField(name []byte) bool
}

// AppendEndToEndFilter is AppendEndToEndStrip without, too, the fields
// drop drops (nil: none). buf escapes through drop: the proxy's buffers
// are on the heap already; AppendEndToEndStrip keeps a caller's on its
// stack.
func (h *Head) AppendEndToEndFilter(dst, buf []byte, keep Keep, strip []byte, drop FieldFilter) []byte {
	for i := 0; i < h.N; i++ {
		if h.forwarded(buf, i, keep, strip) && (drop == nil || !drop.DropField(h.Headers[i].Name.Bytes(buf))) {
			dst = h.appendField(dst, buf, i)
		}
	}
	return dst
}

// forwarded: field i is copied by AppendEndToEndStrip.
func (h *Head) forwarded(buf []byte, i int, keep Keep, strip []byte) bool {
	if h.HopByHop(buf, i, keep) {
		return false
	}
	if keep&DropXForwardedProto != 0 && h.Headers[i].Kind == KindXForwardedProto {
		return false
	}
	return len(strip) == 0 || !hasFieldPrefix(h.Headers[i].Name.Bytes(buf), strip)
}

func (h *Head) appendField(dst, buf []byte, i int) []byte {
	dst = append(dst, h.Headers[i].Name.Bytes(buf)...)
	dst = append(dst, ": "...)
	dst = append(dst, h.Headers[i].Value.Bytes(buf)...)
	return append(dst, "\r\n"...)
}

// hasFieldPrefix: name starts with prefix, ASCII case-insensitively and
// with '_' and '-' alike.
func hasFieldPrefix(name, prefix []byte) bool {
	if len(name) < len(prefix) {
		return false
	}
	for i, b := range prefix {
		c := name[i]
		if c == '_' {
			c = '-'
		}
		if b == '_' {
			b = '-'
		}
		if lower(c) != lower(b) {
			return false
		}
	}
	return true
}
