// Package http1 owns the HTTP/1.1 wire format for the http-mode proxy: an
// incremental, allocation-free parser of request and response heads
// (RFC 9112 with the field rules of RFC 9110), a validating chunked body
// decoder, and append-style serializers for the heads the proxy writes
// (its own error responses, rewritten heads without hop-by-hop fields,
// X-Forwarded-For / X-Forwarded-Proto / Via).
//
// # What it must not do
//
// Read or write sockets, buffer bodies, allocate on any parsing path, log,
// or keep package-level mutable state (the character tables and error
// values are built once at initialisation and only read). It does not
// decide policy: routing, timeouts and what to do after an error (always
// close the connection after a framing error) belong to the proxy.
//
// # Threads
//
// A Request, Response or Chunked value belongs to one connection side,
// which lives on one loop: it is used from that loop's thread only and is
// never shared. The functions without a receiver are pure and may be
// called from any goroutine.
//
// # Invariants
//
//   - Parse is resumable and linear: each byte is searched for LF once and
//     each line parsed once (scanner, in head.go), however the head arrives.
//   - A parsed head is offsets (Span) into the caller's buffer, which starts
//     at the head's first byte; a head longer than Limits.MaxHead (set it to
//     the buffer size) is 431, so a complete head is always in one buffer.
//   - Results are sticky: after completion or an error, Parse returns the
//     same until Reset.
//   - Parse, Chunked.Decode, the accessors and the Append* functions do not
//     allocate (testing.AllocsPerRun in alloc_test.go; benchmarks with
//     -benchmem). Errors are pointers to fixed values: compare them with ==
//     or by Status. Request errors carry the client's status, every
//     Response error 502.
//
// # Strictness (each rule pinned by a row of the tests; the why is next to the code)
//
//   - Line endings: CRLF only; a bare LF or a bare CR anywhere is 400.
//     Empty lines before the request line are skipped and count against
//     MaxHead.
//   - Request line: method SP target SP version, exactly one SP. Method: a
//     token of at most MaxMethodLen bytes, else 501. Target: visible ASCII
//     without '#'; origin-form, absolute-form (http/https, non-empty
//     authority, no userinfo, equal to Host when there is one),
//     authority-form only for CONNECT, "*" only for OPTIONS. At most
//     Limits.MaxRequestLine bytes with CRLF (414, even on a partial line).
//   - Version: HTTP/1.0 or HTTP/1.1; HTTP/1.2..1.9 handled as 1.1; another
//     well-formed HTTP/d.d is 505, anything else 400.
//   - Field lines: a token name with no whitespace before the colon; no
//     obs-fold; OWS-trimmed values of HTAB, SP, VCHAR and obs-text. At most
//     Limits.MaxHeaders fields (431).
//   - Host: exactly one in HTTP/1.1, at most one in HTTP/1.0; its value
//     (like an absolute-form or CONNECT authority) host [":" port] per
//     RFC 3986 (validAuthority). An empty Host is valid.
//   - Content-Length: digits only, no overflow; a list or a repeated field
//     is 400 even with equal values; empty is 400.
//   - Transfer-Encoding: the codings of all TE lines end with exactly one
//     chunked (else 400; another coding before it is 501); not in HTTP/1.0;
//     never with Content-Length (teVerdict).
//   - Connection: tokens; close, keep-alive and upgrade set Close and
//     Upgrade; others name fields to drop (at most 16), never Host,
//     Content-Length or Transfer-Encoding.
//   - Close: HTTP/1.1 on "Connection: close"; HTTP/1.0 unless
//     "Connection: keep-alive". Upgrade: HTTP/1.1, "Connection: upgrade"
//     and Upgrade listing websocket. Expect100: HTTP/1.1 and
//     "Expect: 100-continue".
//   - Responses: "HTTP/1.x SP 3DIGIT [SP reason]", the same field rules,
//     Host not checked, framing per RFC 9112 §6.3 (Response.finish);
//     Transfer-Encoding exactly chunked.
//   - Chunked bodies: the rules are on Chunked (chunked.go).
//   - Rewriting: hop-by-hop fields are dropped (HopByHop, serialize.go);
//     the request line towards servers always says HTTP/1.1.
package http1
