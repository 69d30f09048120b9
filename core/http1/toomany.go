package http1

import "strconv"

// tooMany is the head of the answer to a client over a per-client limit
// (429, RFC 6585 §4), up to its Retry-After value.
const tooMany = "HTTP/1.1 429 Too Many Requests\r\nContent-Type: text/plain\r\nContent-Length: 22\r\nCache-Control: no-cache\r\nConnection: close\r\nRetry-After: "

// AppendTooManyRequests appends the proxy's 429 answer with "Retry-After:
// seconds" (RFC 9110 §10.2.3), a short text body, "Cache-Control:
// no-cache" and "Connection: close", as AppendError's answers. No
// allocation.
func AppendTooManyRequests(dst []byte, seconds int) []byte {
	dst = append(dst, tooMany...)
	dst = strconv.AppendInt(dst, int64(seconds), 10)
	return append(dst, "\r\n\r\n429 Too Many Requests\n"...)
}
