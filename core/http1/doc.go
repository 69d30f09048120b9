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
// # How parsing works
//
// The proxy reads into fixed-size buffers (core/proxy.Buffer, bufsize,
// 16 KiB by default) and passes the pending bytes, always starting at the
// first byte of the head. Parse searches for LF only in bytes it has not
// searched yet and parses each line once when its LF arrives (resumable,
// not re-parsing from the start), so a head delivered one byte at a time
// still costs one pass. The parsed head holds offsets (Span) into that
// buffer, up to MaxHeaders (100) field lines in a fixed array, plus the
// framing facts: ContentLength (-1 when absent), Body (none, length,
// chunked, until-close), Close, Upgrade, Expect100, Host. A head that does
// not fit in Limits.MaxHead (set it to the buffer size) is refused with
// 431, so the whole head is always in one buffer when Parse completes.
// Parse results are sticky: after completion or an error, Parse returns
// the same until Reset.
//
// # Strictness decisions (each pinned by a row of the tests)
//
//   - Line endings: CRLF only. A bare LF is allowed by RFC 9112 §2.2 for
//     lenient recipients but we refuse it (400): a proxy that accepts what
//     the server may split differently is a request-smuggling vector. A bare
//     CR anywhere in the head is 400 (RFC 9112 §2.2 MUST).
//   - Empty lines before the request line are skipped (RFC 9112 §2.2
//     SHOULD); they count against MaxHead.
//   - Request line: method SP target SP version with exactly one SP (no
//     tabs, no runs). The method is a token of at most MaxMethodLen (32)
//     bytes; longer is 501 (RFC 9112 §3: a method longer than any we
//     implement). The target is visible ASCII without '#' (no CTL, SP,
//     DEL, non-ASCII, fragment: 400, as HAProxy does without its
//     accept-unsafe option): origin-form; absolute-form with scheme http or
//     https, a non-empty authority and no userinfo, whose authority must
//     equal the Host field when there is one (case-insensitive; otherwise
//     400, so the proxy and the server cannot route on different hosts);
//     authority-form host:port only for CONNECT; "*" only for OPTIONS.
//     The request line including CRLF is limited by Limits.MaxRequestLine
//     (8 KiB): 414, detected as soon as the partial line is too long.
//   - Version: "HTTP/1.1" or "HTTP/1.0"; "HTTP/1.2" to "HTTP/1.9" are
//     handled as 1.1 (RFC 9110 §2.5: a higher minor version of a major we
//     implement is processed as the highest we support; the server is sent
//     HTTP/1.1). A well-formed "HTTP/d.d" naming another major version
//     (HTTP/2.0, HTTP/0.9) is 505 (as nginx answers; HTTP/2 prior knowledge
//     does not come this way); anything else, including HTTP/0.9 requests
//     without a version, is 400.
//   - Field lines: the name is a token; whitespace between name and colon
//     is 400 (RFC 9112 §5.1 MUST); a line starting with SP/HTAB (obs-fold,
//     or whitespace before the first field) is 400; values are OWS-trimmed
//     and may hold HTAB, SP, visible ASCII and obs-text only (CR, LF, NUL,
//     other CTLs and DEL: 400). More than Limits.MaxHeaders (100) fields is
//     431, a head longer than Limits.MaxHead (16 KiB) is 431.
//   - Host: an HTTP/1.1 request needs exactly one (missing or duplicate:
//     400, RFC 9112 §3.2); an HTTP/1.0 request at most one. Its value, like
//     an absolute-form or CONNECT authority, must be host [":" port] per
//     RFC 3986: a bracketed IP-literal or a reg-name of unreserved,
//     sub-delims and well-formed %XX bytes (no space, '/', '@'), port
//     digits only (required for CONNECT). An empty Host is valid.
//   - Content-Length: digits only (no sign, no inner whitespace, no hex),
//     overflow-checked against int64; a list ("5, 5") or a repeated field
//     is 400 (502 in a response) even when every value is the same number:
//     RFC 9110 §8.6 lets a recipient take it as one value, but the head is
//     forwarded as received and what is behind us may read it otherwise
//     (net/http refuses it too); an empty value is 400.
//   - Transfer-Encoding (requests): the codings of all TE lines together
//     must end with exactly one "chunked" (case-insensitive, no parameters).
//     chunked missing, repeated ("chunked, chunked") or not final
//     ("chunked, gzip", "gzip") is 400 (RFC 9112 §6.3: the length cannot be
//     determined); chunked final but preceded by another coding ("gzip,
//     chunked") is 501, since we do not implement that coding (RFC 9112
//     §6.1). Empty or non-token elements are 400. TE in an HTTP/1.0
//     request is 400.
//   - Content-Length with Transfer-Encoding: 400. RFC 9112 §6.3 lets an
//     intermediary drop Content-Length and close after the response; we
//     reject instead, because such a request is either an attack or a
//     broken client, and rejecting leaves no interpretation for a server
//     behind us to disagree with (dropping CL still forwards a body whose
//     framing was ambiguous on the wire).
//   - Connection: comma-separated tokens (a non-token element is 400):
//     close, keep-alive and upgrade set Close/Upgrade; other tokens name
//     fields the proxy drops (HopByHop), except Host, Content-Length and
//     Transfer-Encoding, which a Connection field can never remove. At most
//     16 such options per head (400 beyond), which keeps rewriting linear.
//   - Close: HTTP/1.1 closes on "Connection: close"; HTTP/1.0 closes unless
//     "Connection: keep-alive". Upgrade needs HTTP/1.1, "Connection:
//     upgrade" and an Upgrade field listing websocket. Expect100 needs
//     HTTP/1.1 and "Expect: 100-continue" (RFC 9110 §10.1.1: ignored for
//     HTTP/1.0); other expectations are left to the server.
//   - Responses: status line "HTTP/1.x SP 3DIGIT [SP reason]" (reason
//     without CTLs other than HTAB; a missing reason is tolerated;
//     HTTP/1.2 to HTTP/1.9 are handled as 1.1 as in requests, other
//     versions are a 502), the
//     same field rules, Host not checked. Framing per RFC 9112 §6.3: 1xx,
//     204, 304 and responses to HEAD have no body; 101 sets Upgrade; other
//     1xx set Interim; a 2xx to CONNECT sets Upgrade; then chunked, then
//     Content-Length, else the body runs until close (Close set).
//     Transfer-Encoding in a response must be exactly chunked, HTTP/1.1,
//     without Content-Length; anything else is a 502 rather than a guess.
//     Every response error has status 502.
//
// # Chunked bodies
//
// Chunked checks a chunked body byte by byte without copying: chunk-size is
// HEXDIG only (no sign, no "0x", no leading whitespace), at most 16 digits
// counting leading zeros (as net/http) and below 2^62;
// right after the size comes ';' or CRLF: the BWS that RFC 9112 §7.1.1
// allows before ';' is refused (400), as net/http does, because parsers
// disagree on it and no client needs it; extensions may hold HTAB, SP, visible ASCII and obs-text and the
// size line is limited (4 KiB); chunk data must be followed by CRLF;
// trailer fields follow the header field rules; the body ends at the empty
// line after the last chunk. The proxy forwards the validated bytes as they
// arrived (framing included), which is simplest and what HAProxy's legacy
// mode did; Decode also reports which bytes are payload for a caller that
// re-frames, and MaxBody enforces a per-frontend body limit (413) before
// any byte of an oversized chunk is accepted.
//
// # Rewriting heads
//
// The proxy copies a head field by field: AppendRequestLine (always
// HTTP/1.1 towards servers), Head.AppendEndToEnd, which drops hop-by-hop
// fields (RFC 9110 §7.6.1: Connection, Keep-Alive, Proxy-Connection, TE,
// Upgrade unless KeepUpgrade, Transfer-Encoding and Trailer unless
// KeepTransferEncoding, and fields named in Connection — never Host,
// Content-Length or Transfer-Encoding, so "Connection: content-length"
// cannot strip framing), then AppendXForwardedFor (a new field line; an
// existing one is kept before it, as HAProxy does), AppendXForwardedProto
// and AppendVia. AppendError writes the proxy's own responses (400, 408,
// 413, 414, 431, 501, 502, 503, 504, 505 and a few more), each a constant
// with a short text body and "Connection: close".
//
// # Zero allocation
//
// Parse, Chunked.Decode, the accessors and the Append* functions do not
// allocate (pinned with testing.AllocsPerRun; benchmarks with -benchmem).
// Errors are pointers to fixed values; compare them with == or by Status.
package http1
