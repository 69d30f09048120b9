// Package h2 is the server side of an HTTP/2 connection (RFC 9113) as a
// state machine: the second mux of the http-mode proxy beside HTTP/1.1;
// and the client side (ClientConn, see "The client side" below), for
// HTTP/2 to servers (gRPC).
// Bytes read from the client go in (Conn.Feed), bytes to write come out
// (Conn.Output, Conn.Drained), requests go to a Handler, responses come
// back through the stream methods (Respond, RespondHTTP1, SendData,
// SendTrailers, ResetStream) and request body memory is given back by
// Consumed. Framing and HPACK decoding are golang.org/x/net/http2's
// Framer and hpack, used without their I/O; HPACK encoding is ours
// (hpackenc.go).
//
// # What it must not do
//
// Read or write sockets, start goroutines, sleep, route, or time anything
// out: it says since when a stream or the connection has waited for the
// client's window (SendStalledSince, ConnStalledSince) and the caller's
// timers decide. It keeps no package-level mutable state.
//
// # Threads
//
// A Conn belongs to one loop and is used from that loop's thread only;
// the Handler is called from inside Feed, synchronously. AppendHTTP1,
// AppendHTTP1Trailers and SniffPreface are pure.
//
// # How a loop drives it
//
//	clear bind:   h2, more := h2.SniffPreface(in[:n]) decides HTTP/2 or 1.1
//	c := h2.NewConn(cfg, handler)          // SETTINGS queued in Output
//	on readable:  n += read(fd, in[n:]); k, err := c.Feed(in[:n]); copy(in, in[k:n]); n -= k
//	              (Handler.Headers/Data/Trailers/Reset/WindowOpened run inside Feed;
//	              Headers: h2.AppendHTTP1 to the server; Data: forward, then c.Consumed)
//	on response:  c.RespondHTTP1(id, resp, buf, end); taken := c.SendData(id, body, end)
//	              (offer body only while Output is short; the rest on WindowOpened)
//	on writable / after Feed or a response: w := write(fd, c.Output()); c.Drained(w)
//	timers:       HeadersPendingSince, SendStalledSince(id), ConnStalledSince → ResetStream / close
//	stop, drain:  c.GoAway(); close once c.Done() and Output is drained
//	after err != nil: drain Output, close, end every stream (no Reset comes)
//	when c.Idle(): c.ReleaseBuffers() and give the input buffer back
//	stats:        c.Counts() differences into the frontend's counters
//
// # Frames
//
// Feed parses only frames complete in p: it reads the 9-byte header, and
// refuses a length above our SETTINGS_MAX_FRAME_SIZE at once
// (FRAME_SIZE_ERROR) rather than waiting for it; a partial frame is left
// unconsumed. DATA, WINDOW_UPDATE, HEADERS and CONTINUATION, the frames of
// every request and transfer, are parsed here (DATA without the Framer's
// payload copy, the others without its allocation of a frame value); the
// rest (SETTINGS, PING, RST_STREAM, PRIORITY, GOAWAY, PUSH_PROMISE) go
// through a Framer reading exactly one frame. The HEADERS/CONTINUATION
// order is checked before any of them.
// DATA and HEADERS/CONTINUATION are written here (one copy into Output);
// control frames through the Framer's writers.
//
// # Streams (RFC 9113 §5.1)
//
// Idle is any odd id above the last one opened; HEADERS opens (open, or
// half-closed (remote) with END_STREAM); END_STREAM each way half-closes;
// both, or RST_STREAM either way, close and forget the stream. The last
// 32 closed ids are remembered with how they closed: DATA or HEADERS on
// one we reset are ignored (they may be in flight), on one closed by
// END_STREAM both ways are a connection error STREAM_CLOSED, on one the
// client reset get RST_STREAM STREAM_CLOSED. On an older id, DATA gets
// RST_STREAM STREAM_CLOSED and HEADERS is PROTOCOL_ERROR (a reused id).
// DATA or HEADERS on a half-closed (remote) stream: RST_STREAM
// STREAM_CLOSED. Even ids, frames other than HEADERS and PRIORITY on
// idle streams, PUSH_PROMISE: PROTOCOL_ERROR. h2spec 2.2.1 passes its 145
// tests against a Conn (TestH2Spec, when h2spec is installed).
// PRIORITY and the priority in HEADERS are accepted and ignored (§5.3.2),
// except a stream depending on itself.
//
// # Flow control
//
// Receiving: our SETTINGS_INITIAL_WINDOW_SIZE applies to streams once the
// client ACKs it (before, 65535), the connection window is
// Limits.ConnWindowSize. DATA (padding included) shrinks both; Data hands
// the payload to the Handler, and only Consumed gives it back, by
// WINDOW_UPDATE once a quarter of the window is owed. A stream thus holds
// at most its window of unforwarded body, a connection at most its
// window. Padding and DATA not delivered (closed streams) are given back
// at once; a stream's unconsumed bytes when it ends go back to the
// connection. Sending: SendData takes what both the stream's and the
// connection's send windows allow, in frames of at most the peer's
// SETTINGS_MAX_FRAME_SIZE; SETTINGS_INITIAL_WINDOW_SIZE changes shift
// every stream window (§6.9.2).
//
// # Requests (RFC 9113 §8)
//
// Each field is checked as HPACK decodes it: pseudo-header fields first,
// only :method :scheme :path :authority, once each, none in trailers;
// names lowercase tokens; no Connection, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, Upgrade, and TE only "trailers"; values without
// CR, LF, NUL or other controls and without leading or trailing
// whitespace; one content-length of digits, which the DATA must add up
// to (§8.1.1); at most one host, equal (ASCII case-insensitively) to
// :authority when both are there (§8.3.1); CONNECT with :authority only,
// a port required (§8.5); :path starting with '/' ("*" for OPTIONS),
// visible ASCII without '#'. A malformed request is RST_STREAM
// PROTOCOL_ERROR and never reaches the Handler. A request whose list
// passes SETTINGS_MAX_HEADER_LIST_SIZE (or Limits.MaxFields) is answered
// 431 here. Trailers are HEADERS with END_STREAM after the head.
// AppendHTTP1 writes a request as an HTTP/1.1 head that core/http1
// parses back.
//
// # Responses
//
// Respond / RespondHTTP1 encode :status and the fields (connection-
// specific ones dropped, names lowercased) with HPACK without a dynamic
// table and without Huffman coding (as HAProxy does: nothing of the
// caller's buffer is kept, no per-connection table to hold, and no table
// lookup by hash nor Huffman pass per field: hpackenc.go), split into
// HEADERS and CONTINUATION at
// the peer's SETTINGS_MAX_FRAME_SIZE; then SendData, then SendTrailers or
// an END_STREAM. Our END_STREAM ends the stream for the Handler: a request
// body still coming is stopped with RST_STREAM NO_ERROR (§8.1), so a
// stream's life for the caller is Headers to its own END_STREAM or Reset.
//
// # Hostile clients
//
//   - Rapid reset (CVE-2023-44487) and other cheap-for-them,
//     costly-for-us frames: client RST_STREAMs, streams refused for
//     concurrency, HEADERS or DATA on closed streams and empty DATA frames
//     are glitches; more than Limits.MaxGlitches in Limits.GlitchWindow is
//     GOAWAY ENHANCE_YOUR_CALM.
//   - CONTINUATION flood (CVE-2024-27316): at most Limits.MaxContinuations
//     CONTINUATION frames and 2×MaxHeaderListSize+MaxFrameSize encoded
//     bytes per block, else GOAWAY ENHANCE_YOUR_CALM. A block split over
//     frames is gathered here (bounded) and decoded once complete.
//   - HPACK bomb: the decoded list is counted as it is decoded (fields
//     past the limit are not kept) and answered 431; the dynamic table is
//     4096 bytes; a single string longer than the list limit is
//     COMPRESSION_ERROR.
//   - SETTINGS, PING and RST_STREAM floods: at most
//     Limits.MaxQueuedControl answers offered by Output and not yet
//     drained, else GOAWAY ENHANCE_YOUR_CALM. A burst fed before the
//     caller could write (a loop reads until EAGAIN, then writes) is
//     not held against a peer that then reads it, up to 10 times the
//     limit.
//   - Zero-window stalls: SendStalledSince / ConnStalledSince for the
//     caller's timeout.
//   - Too many streams: RST_STREAM REFUSED_STREAM past
//     SETTINGS_MAX_CONCURRENT_STREAMS (§5.1.2).
//   - Oversized frames: FRAME_SIZE_ERROR as soon as the header is read.
//
// # Memory
//
// Per connection: the Conn, the output buffer (grows with what is queued
// and not drained), the Framer's read buffer (largest non-DATA frame) and
// write buffer (largest control frame), a gathered header block (at most
// the bound above), the HPACK decoder and its table (≤ 4096 bytes of
// fields), the stream table (≤ MaxConcurrentStreams) and its free list.
// An idle Conn (Idle: no stream, no block half read, Output drained)
// gives all of it back on ReleaseBuffers except the Conn and HPACK state:
// 2.1 KB per idle connection after a browser-like request
// (TestIdleConnMemory; the Conn struct is 1040 bytes), at most the Conn,
// the decoder and 4096 bytes of table entries; nothing of the caller's
// input buffer (the HPACK decoder's last-block slice is moved off it).
// Per request: nothing allocated when the client's HPACK table holds its
// fields (TestRequestAllocs; browsers and h2load index them), the
// strings of literal fields otherwise; DATA and WINDOW_UPDATE allocate
// nothing (TestDataPathAllocs); the Framer allocates one small frame value
// for the control frames it reads.
//
// # The client side
//
// A ClientConn is the same machine turned around (both embed connCore:
// frames, flow control, the stream table, CONTINUATION gathering and the
// flood limits are one code), for a pooled,
// multiplexed connection to a server: it writes the preface, its
// SETTINGS (ENABLE_PUSH 0, our window, frame and list sizes) and the
// connection WINDOW_UPDATE at once, and requests may follow before the
// server's SETTINGS arrive. Its Feed takes the server's bytes with the
// contract of Conn.Feed (complete frames only, an input buffer of
// MaxFrameLen bytes); the first frame must be SETTINGS.
//
// How a loop drives it (the server-side transport of an HTTP/1.1 stream):
//
//	c := h2.NewClientConn(h2.ClientConfig{Scheme: "http"}, handler)  // preface queued
//	pick:         a pooled c with c.CanOpen() (the server's
//	              SETTINGS_MAX_CONCURRENT_STREAMS, 100 until it speaks; no GOAWAY)
//	on request:   id, err := c.RequestHTTP1(req, buf, endStream)   // the parsed head
//	              (ErrNoStream: open another connection; ErrRequest: CONNECT/upgrade)
//	request body: taken := c.SendData(id, body, end) (a chunked body decoded
//	              first; its trailers by c.SendTrailers(id, fields)); the rest on
//	              WindowOpened(id)
//	on readable:  n += read(fd, in[n:]); k, err := c.Feed(in[:n]); copy(in, in[k:n]); n -= k
//	              ClientHandler calls come from inside Feed:
//	              Response(id, status, fields, end): out, chunked :=
//	                h2.AppendHTTP1Response(out, status, fields, !end) and the
//	                stream's http1.Response parser reads it (1xx: more heads follow)
//	              Data(id, p, end): chunked ? h2.AppendChunk(out, p) : p; then
//	                c.Consumed(id, len(p)) once forwarded; at end of a chunked
//	                body h2.AppendHTTP1Trailers(out, nil)
//	              Trailers(id, fields): h2.AppendHTTP1Trailers(out, fields)
//	                (the body was chunked: no content-length)
//	              Reset(id, code): the stream failed; REFUSED_STREAM (or a
//	                stream above a GOAWAY's last id) was not processed: retry
//	                on another connection; NO_ERROR after a complete response:
//	                the server needs no more request body
//	              GoAway(lastID, code): take c out of the pool; Resets follow
//	                for the streams above lastID
//	on writable / after Feed or a request: w := write(fd, c.Output()); c.Drained(w)
//	client gone:  c.ResetStream(id, http2.ErrCodeCancel)
//	timers:       HeadersPendingSince, SendStalledSince(id), ConnStalledSince,
//	              PingPendingSince (after c.Ping() on a connection idle a while)
//	pool idle:    c.Idle() → c.ReleaseBuffers(); close: c.GoAway(), close once Done()
//	after err != nil: drain Output, close, fail every stream (no Reset comes)
//
// RequestHTTP1 writes :method, :scheme (the ClientConfig's), :authority
// (Host, or an absolute-form target's authority), :path (the target's
// path and query, "/" when empty) and the end-to-end fields lowercased
// (Connection and what it names, Keep-Alive, Proxy-Connection,
// Transfer-Encoding, Upgrade, Trailer and Host dropped), "te: trailers"
// when TE lists trailers; Content-Length is kept. Requests use no HPACK
// dynamic table (nothing of the caller's buffer is kept); a request head
// allocates nothing (TestClientDataPathAllocs).
//
// Responses are validated as requests are on the server side: :status
// first, once, three digits, no other pseudo-header field, fields as
// §8.2 says, one content-length that the DATA adds up to (a HEAD, 204
// or 304 response carries no DATA bytes, whatever it says), 101 and a 1xx with END_STREAM refused, DATA only after the
// final head, trailers only with END_STREAM. A malformed response is
// RST_STREAM PROTOCOL_ERROR and Reset; it never reaches Response. What a
// hostile server can do is bounded by the same Limits: CONTINUATION
// floods and oversized blocks end the connection (ENHANCE_YOUR_CALM), a
// list past MaxHeaderListSize or MaxFields resets the stream (fields not
// kept), SETTINGS and PING floods past MaxQueuedControl end it, stream
// errors and frames on streams it reset are glitches; DATA in flight on
// a stream we reset is ignored and given back to the connection window.
// PUSH_PROMISE and ENABLE_PUSH from a server are PROTOCOL_ERROR.
// FuzzClientFeed checks that every response head the handler gets makes
// an HTTP/1.1 head core/http1 parses back.
//
// Memory and cost: an idle pooled ClientConn holds 1.7 KB after
// ReleaseBuffers (TestIdleClientConnMemory), which also moves the HPACK
// decoder's last-block slice off the caller's input buffer. Response DATA
// is delivered from the caller's buffer, no copy and no allocation (69 ns
// a 16 KiB frame, BenchmarkClientData); a request head and an indexed
// response head allocate nothing (BenchmarkClientRequest, 1.6 µs).
package h2
