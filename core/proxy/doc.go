// Package proxy owns the connection state machines of the data plane: the
// tcp-mode tunnel (client fd <-> server fd), the connect path to a backend
// server with retries, the per-loop buffer pool and pipe pool, and the
// splice(2) forwarding of seed 003, and the http mode (http*.go), which
// runs on the same loops, sides, buffers and pipes (see "# HTTP mode").
//
// # Threads
//
// A Worker belongs to one loop (core/loop) and everything it owns — pools,
// tunnels, sides — is touched only from that loop's thread: tasklets,
// timers and Exec'd functions. There are no locks. NewWorker may run on
// any goroutine before the worker is used. Frontend, Backend and Counters
// are shared by all loops: Frontend and Backend are immutable once
// published, Counters are atomics (per connection, never per chunk).
//
// # What it must not do
//
// Allocate, log or lock per forwarded chunk (pinned by
// TestForwardingDoesNotAllocate and BenchmarkForward); open listening
// sockets (core/listen does); choose servers itself (core/balance's Picker
// does); know about configuration documents beyond the values handed in.
//
// # The tunnel
//
// Both fds are non-blocking, registered edge-triggered; each side has a
// tasklet that the loop wakes in class Urgent on readiness. Either tasklet
// runs the whole tunnel: each direction (client->server, server->client)
// reads its source into one buffer (bufsize, from the pool) or one pipe,
// and writes to its destination, until the source is drained (EAGAIN, or a
// short read: with edge-triggered epoll the next arrival raises a new edge,
// as HAProxy's fd_done_recv assumes), the destination blocks with no room
// left (backpressure: the source is left unread, its kernel receive buffer
// fills and TCP flow control slows the peer — memory is bounded by one
// buffer or one pipe per direction), or the direction read runCap (256 KiB)
// in this run: it then rewakes itself in class Bulk (seed 000) so that long
// transfers yield to short work. Buffers and pipes are held only while
// bytes are pending and go back to the pools when empty.
//
// Half-close: EOF from a source is passed on as shutdown(SHUT_WR) of the
// destination once the pending bytes are flushed; the other direction goes
// on. The tunnel closes when both directions are finished. ECONNRESET,
// EPIPE or any other I/O error on either side aborts the tunnel (both fds
// closed). EINTR is retried inside the syscall wrappers; EAGAIN clears the
// readiness bit it disproves.
//
// Aborts: an aborted tunnel or http connection (closeAbort: an I/O error
// that is not a clean end of stream on either side, such as ECONNRESET or
// EPIPE, a framing error after bytes went out, or the end of a stop's
// grace) closes both fds with SO_LINGER {1, 0}, i.e. an RST, as HAProxy's
// NOLINGER on an aborted stream: the peer reads ECONNRESET, never a clean
// end that would make a cut stream or close-delimited body look complete.
// The RST is sent at once: what the proxy still holds for that peer
// (buffer, pipe, socket send queue) is dropped, since the stream is
// incomplete anyway and a flush could wait on a peer that does not read.
// A clean FIN from a side stays a half-close, passed on as a FIN.
//
// # Splice (seed 003, HAProxy's raw_sock.c)
//
// Per frontend: off (always buffered), on (splice from the first byte),
// auto (a direction switches to splice after autoSpliceAfter consecutive
// reads that filled the buffer — a streamer — and back to buffers after
// autoSpliceSmall consecutive spliced reads shorter than a buffer). Socket
// to pipe uses SPLICE_F_MOVE|SPLICE_F_NONBLOCK. EAGAIN from socket->pipe
// is ambiguous (socket empty, or pipe full): a pipe holding data is taken
// as full — stop reading, flush — an empty one as a drained socket. A
// direction changes between buffer and pipe only when the one it leaves is
// empty, so bytes keep their order. No pipe available (pool at maxpipes,
// or the kernel refuses) means a buffered copy for that read. EINVAL or
// ENOSYS from splice turns splice off for that direction. A pipe that still
// holds data when released is closed, never pooled. Bytes spliced in are
// counted in loop.Activity.SpliceBytes, pipes in use in PipesUsed.
//
// The pipe pool of a loop is bounded: at most Tuning.Maxpipes pipes exist
// at once, in use and idle together (the engine gives each loop its share
// of tuning.maxpipes, so the process-wide bound is HAProxy's); pipes are
// sized with F_SETPIPE_SZ when pipesize is set (kept at the kernel default
// if refused). Changing pipesize closes idle pipes and, on release, pipes of
// the old size.
//
// # Connect and timeouts
//
// The server is chosen by the backend's per-loop Picker (a server at its
// maxconn is skipped); the socket is non-blocking, TCP_NODELAY (both sides),
// connected with EINPROGRESS; completion is the first EPOLLOUT/EPOLLERR,
// checked with SO_ERROR. A failure (refused, unreachable, connect timeout)
// retries another server (the failed one excluded) up to the backend's
// Retries, then closes the client; each failure is counted on the backend
// and the server, the final one on the frontend. No usable server closes
// the client at once (counted as NoServer); servers that are all at their
// maxconn put the tunnel in the backend's queue (see "# HTTP mode", queue).
//
// Timeouts in tcp mode, one loop timer per tunnel:
//   - connect: backend connect_ms, per attempt, from connect(2);
//   - tunnel: once the server is connected the tunnel is established and
//     the idle timeout is the shorter of the frontend's and the backend's
//     tunnel_ms: the tunnel closes when no byte moved in either direction
//     for that long (a client that never reads stalls the tunnel, so it
//     is closed after tunnel_ms at the latest);
//   - send: a side that leaves bytes pending towards it untaken closes the
//     tunnel after the frontend's client_ms (towards the client) or the
//     backend's server_ms (towards the server) without progress, as
//     HAProxy's timeout client and timeout server bound a blocked write:
//     a client that stops reading is dropped after client_ms.
//
// The timer is not re-armed per chunk: it fires at the earliest deadline
// it knew, and re-arms at the one in force if bytes moved meanwhile; a
// send that starts blocking arms it earlier when needed.
//
// # Soft stop (stop.go)
//
// Worker.SoftStop, run by the engine on SIGTERM and on a loop removed by a
// smaller nbthread: idle keep-alive http clients (no byte pending) and
// pooled server connections are closed at once; other http connections
// finish their current request with Connection: close; tcp tunnels go on
// until CloseAll, when tuning.grace_ms ends. On SIGTERM the engine runs
// its two halves on all loops in turn (BeginStop everywhere, confirmed,
// then CloseIdle), so that a client that sees its idle connection closed
// knows every request in flight ends with Connection: close. Resume undoes
// it for a draining loop taken back.
//
// # Health checks (check.go)
//
// A Checker runs one backend generation's health_check on the loops:
// server i is probed by loop i % nbthread, each loop's share through its
// own balance.Prober, which spreads that share's first checks evenly over
// one interval (1 000 servers on 4 loops: 250 per loop, 8 ms apart at a
// 2 s interval) and applies rise/fall (balance.Health, HAProxy's counter);
// the next check of a server is due one interval after its last one
// finished. Each server has one loop.Timer (next check, or the running
// probe's timeout_ms), one Side and its prebuilt request, so a probe
// cycle allocates nothing (TestCheckProbeCycleDoesNotAllocate).
//
//   - tcp: a non-blocking connect; success when connected (EPOLLOUT with
//     SO_ERROR 0) within timeout_ms.
//   - http: connect, send "METHOD PATH HTTP/1.1" with Host (the server's
//     configured address and port), Connection: close and User-Agent:
//     spliced-check, then read 13 bytes: a strict "HTTP/1.x DDD" status
//     line start, followed by SP or CR. Success when status_min <= status
//     <= status_max, all within timeout_ms. Anything else (refused, reset,
//     closed early, not a status line, timeout) is a failure. The rest of
//     the response is not read.
//
// Probe sockets are closed with SO_LINGER 0 (an RST): a check has nothing
// left to say, and one connection per server per interval must not leave
// TIME_WAIT sockets behind. A socket(2) failure (EMFILE) counts as a
// failed check, as HAProxy's socket errors do.
//
// A state change sets balance.Server's observed state (pickers skip a
// down server at once) and is logged on the loop thread (rare: allocation
// allowed there) as "server health changed" with backend, server, from,
// to, reason ("connection refused", "timeout (connect)", "timeout
// (response)", "status 503", ...), check type and thread.
//
// Across generations (core/engine/check.go): identical check settings
// over the same Server objects keep the running Checker; otherwise the old
// one is stopped (Stop waits until every loop closed its probes) and the
// new one takes over the rise/fall counters of carried-over servers when
// rise and fall did not change, so an unrelated configuration change does
// not make an up server fall at its first failure. Removing the check sets
// every server up.
//
// # HTTP mode (http.go, http_exchange.go, http_server.go, http_route.go)
//
// A frontend with HTTP set (mode http) hands each accepted fd to
// StartHTTP. An httpConn serves one request at a time: the head is parsed
// by core/http1 straight from the connection's pool buffer (the parser's
// head limit is that buffer's size minus 512, set at each parse from the
// buffer the head is in, so the rewritten head fits one buffer of the
// same size). A buffer keeps the size it was taken with; after bufsize
// changed, every head written (request head, response head, proxy
// answer) is checked against the buffer it goes into: a request head too
// large for it is answered 431, a response head 502. Pipelined requests stay in that buffer, unparsed and unread
// beyond, until the current response is complete, so answers go out in
// order. Keep-alive: HTTP/1.1 by default, 1.0 with "Connection:
// keep-alive" (answered with "Connection: keep-alive"). The state of an
// exchange (response sent, heads pending, backend, attempts, bodies) is
// cleared when it ends (endExchange), so a later request of the
// connection refused before it is routed is answered as a first one.
//
// Phases and their timers (one loop timer per connection):
//   - head: http_request_ms from the connection start, or from the first
//     byte of a later request; http_keep_alive_ms between requests. A
//     partial head at expiry is answered 408, and so is a new connection
//     that sent nothing (as HAProxy); an idle keep-alive connection
//     between requests is closed silently.
//   - queue: every usable server of the chosen backend is at its maxconn
//     (balance's Acquire fails): the request waits until queue_ms (503)
//     in the backend's FIFO, balance.Queue, one per backend shared by all
//     loops (source balancing waits in the FIFO of its server, as
//     HAProxy's server queue). Server.Release hands the slot to the oldest
//     waiter that may use it, whatever its loop, under a lock held only to
//     unlink it; the grant reaches the waiter's loop through that loop's
//     mailbox (a loop.Source woken by its eventfd, queue.go), so nothing
//     polls and a release costs O(1). A waiter that times out or closes
//     while a grant is on its way gives the slot back. Servers that come
//     up or get a larger maxconn take waiters; the waiters of a server
//     going away move to the others; with no usable server left they get
//     503. tcp tunnels use the same queue: a tunnel whose backend is full
//     waits (its client bytes held in one buffer) until a slot frees or
//     queue_ms passes, then is closed. A queued client that closes is
//     noticed when its wait ends (as HAProxy without abortonclose).
//   - connect: connect_ms per attempt, then another server (the failed one
//     excluded while another is usable) up to retries; 503 after.
//   - exchange (http_timeout.go): each side has its timeout only while the
//     exchange waits for it, restarted by every byte it moves. client_ms
//     while bytes for the client are left untaken (it stopped reading) or
//     request body bytes are still to come from it (408 before any answer,
//     else both connections cut); server_ms while request bytes for the
//     server are left untaken, the response head is awaited (504), or
//     response body bytes are still to come (cut).
//
// Generations: a connection keeps the frontend it was accepted by for its
// OnClose (the engine's maxconn accounting); each request is resolved
// against the bind's current frontend (StartHTTP's cur, an atomic pointer
// the engine swaps on Apply), loaded when the request head is complete
// and when the exchange ends (for the keep-alive and request timeouts).
// A request in flight (queued, connecting, exchanging) keeps the
// frontend and backend it started with.
//
// Routing compares byte spans (no allocation): routes in order (method
// exact; host exact or "*.suffix", case-insensitive, port and a trailing
// dot stripped; path prefix of the origin-form target or of the path of
// an absolute-form one, normalised first: unreserved %XX decoded, dot
// segments removed, RFC 3986 §6.2.2 and §5.2.4 — into the loop's scratch
// buffer when the path is not already normal, see normPath), then
// default_backend, else 503. The request is forwarded as received.
//
// Server slots are counted per request, not per connection: Acquire when
// a server is chosen, Release when its response is complete, so maxconn
// bounds concurrent requests and leastconn sees requests in flight. Idle
// server connections are pooled per loop and per server (at most
// maxIdlePerServer, and at most Tuning.MaxIdle for the whole loop, its
// share of the fd budget; 5 s; a server's entry in the loop's pool map goes
// with its last idle connection, so retired servers are not kept
// reachable; spare request and response parsers are kept up to
// maxFreeParsers each), stay registered with epoll, and are dropped as
// soon as the server closes them (EPOLLRDHUP, end of stream, or any
// unexpected byte), or when their server is retired or put in maint (the
// engine runs Worker.DropIdleUnusable on every loop after an Apply). A pooled connection is reused only for an idempotent
// request without body (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, HTTP/1.1,
// no upgrade): should it turn out closed before any response byte, the
// request is sent again on a new connection (its rewritten head is kept
// until the response starts). Other requests get a new connection.
//
// The forwarded request head is the request line and every end-to-end
// field as received, byte for byte; hop-by-hop fields are dropped
// (Connection and the fields it names, Keep-Alive, Proxy-Connection, TE,
// Trailer, Upgrade unless upgrading) and X-Forwarded-For,
// X-Forwarded-Proto and Via are appended per the frontend's http options.
// Transfer-Encoding: chunked is kept: a chunked body is forwarded as it
// came, its framing validated by http1.Chunked while it passes (the bytes
// that came with the head are checked before anything is sent, so a
// malformed body sent in one piece never reaches a server). A
// Content-Length body is counted down; once at least 64 KiB of it remain
// and the frontend's splice is not off, the rest moves through a pipe.
// While bytes of a Content-Length body are still to come, the head and
// the body go out with MSG_MORE (SPLICE_F_MORE from a pipe), as HAProxy
// does while to_forward > 0, so TCP sends whole segments rather than one
// short segment per write; when the source runs dry the held segment is
// pushed at once (pushFrames), so a slow server delays nothing it sent.
// An HTTP/1.0 client does not know chunked framing (RFC 9112 §6.1), so a
// chunked response to one is de-chunked as HAProxy's H1 mux does: the
// head goes without Transfer-Encoding and Trailer and with Connection:
// close, and body.frameIn drops the framing bytes (sizes, extensions,
// trailers) from the server buffer as Decode reports them, moving the
// chunk data already framed up over them in place (at most dechunkMove
// bytes per chunk: beyond, that data is sent first); the client
// connection closes after the last chunk. Such a body is never spliced
// (only Content-Length bodies are).
// Bodies are never buffered whole: backpressure works as in tcp mode.
//
// Expect: 100-continue is forwarded to the server and its 100 relayed
// (every 1xx is relayed to HTTP/1.1 clients, dropped for 1.0 ones); the
// proxy does not answer 100 itself, so a server that refuses the body
// can say so before the client sends it. A request with Upgrade
// (websocket) switches to the tcp Tunnel only when the server answers
// 101; bytes either side sent beyond the heads go with it. Responses to
// HEAD, 1xx, 204 and 304 have no body; other responses are framed by
// chunked, Content-Length, or the server's close (then the client
// connection closes after it).
//
// The rewritten request head (qout) lives until it is sent entirely (and
// until a response head comes, for a replay), or until the request side
// is aborted on purpose (abortRequest): a final response that comes
// before the whole request was sent, or a server that stops reading it.
// Then nothing more of the request is forwarded, the response is relayed
// with Connection: close, the server connection is not pooled and the
// backend and server count an abort. An interim response does not end
// the sending of the request.
//
// Proxy answers (http1.AppendError): 400 and 501 for malformed requests,
// 413 over http.max_body_size, 414, 431, 505, 408, 502 for a malformed or
// missing response head, 503 (no route, no usable server, queue timeout,
// connect failures), 504. All carry Connection: close; the connection is
// then closed gracefully (write side shut, input discarded for up to 1 s
// so that a RST does not destroy the answer). Once part of a response went
// to the client (respSent: a byte left for it, not a head only built), a
// failure can only cut the connection; a response head built but not sent
// (a bad chunk size in the same read as the head) is replaced by a 502.
//
// Every read loop of an http connection (request heads, response heads,
// bodies, lingering after an error answer) shares one budget of runCap
// bytes per run of the connection's tasklets; at zero the tasklet of the
// side being read is woken again in class Bulk, as a tunnel direction
// does, so a connection that floods (1xx responses to an HTTP/1.0 client,
// input after a 400, many pipelined requests) cannot hold the loop.
//
// Zero heap allocations per keep-alive request in steady state is pinned
// by TestHTTPKeepAliveRequestDoesNotAllocate (BenchmarkHTTPKeepAlive);
// httpConn and srvConn objects are recycled per loop.
package proxy
