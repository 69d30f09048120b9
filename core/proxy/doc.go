// Package proxy owns the connection state machines of the data plane: the
// tcp-mode tunnel (client fd <-> server fd), the http mode (http*.go),
// the connect path to a backend server with retries, the health-check
// probes, the per-loop buffer pool and pipe pool, and the splice(2)
// forwarding of seed 003. The walkthrough of each part is at the top of
// the file that implements it: tunnel.go (the tunnel, connect and tcp
// timeouts), sni.go (SNI routing: the inspect phase), xprt_tls_accept.go (TLS
// termination on binds), mover.go (splice), pipe.go (the pipe pool), http.go (http
// mode, phases and timers, proxy answers), http_route.go (generations,
// routing), http_server.go (server slots, pooled connections),
// xprt_tls_upstream.go (TLS to servers),
// http_exchange.go (what is forwarded, bodies, upgrades), http_timeout.go,
// http_log.go (byte counts and access-log entries per request),
// http_rules.go and tunnel_rules.go (request and response rules, core/rules),
// stop.go (soft stop), check.go (health checks), limits.go (limits per
// client: where connections and requests are counted and refused).
//
// # Layers of a connection
//
// As HAProxy's, from the socket up; each layer knows only the one below:
//
//   - the PROXY header (proxyhdr.go): on a bind with accept_proxy, the
//     first bytes of a connection, read on the loop before any transport
//     or mux sees it (peeked, then exactly its bytes consumed); the client
//     it names travels with the fd (an index in the worker's carried
//     table) and replaces the peer above. Towards a server with
//     send_proxy, the header is written once the TCP connect completed,
//     before the transport's afterConnect.
//   - transport (xprt.go): how the bytes of one fd get in and out —
//     receive, send (with the MSG_MORE hint and its push), splice in and
//     out when the transport allows it, shutdown, close with a FIN or an
//     RST, and which readiness the next receive or send needs. rawSock is
//     the plain socket; tlsSock (xprt_tls.go) is the TLS one, and nothing
//     above the transport knows which one it has. A frontend with TLS
//     terminates it on its connections (xprt_tls_accept.go, Worker.Accept), and
//     a server with TLS is spoken to through a TLS client
//     (xprt_tls_upstream.go, after the TCP connect, within connect_ms): the
//     handshake runs on helper goroutines of the worker (tlsHandshakes:
//     one pool for its clients' handshakes, one for its own with
//     servers), bounded per loop while they compute and parked in Go's
//     runtime poller, holding nothing, while they wait for the peer, that
//     hand the connection back with Exec;
//     established, its records are read and written on the loop thread
//     only, through a buffer that never fails a write (see the comment at
//     the top of xprt_tls.go). A transport may hold what the
//     next receive returns (rcvPending: TLS read a close_notify with the
//     last record), and then Side.shortRead keeps the read readiness.
//   - Side (side.go): one connection fd, owned from open to close, with
//     its tasklet and its transport. Side.close is the one teardown, in
//     one order: unqueue the tasklet, forget the fd in the loop (close(2)
//     takes it out of epoll), close through the transport, clear. detach
//     hands the fd over without closing it (101 upgrade). A connection to
//     a server opens one way, whoever opens it (the tunnel, an http server
//     connection, a health-check probe): Side.connect (socket, connect,
//     register, over the server's transport), Side.connectResult (the
//     outcome from the readiness), then the transport's afterConnect
//     (nothing for a raw socket; TLS runs the client handshake and hands
//     its end to the owner, a connectOwner). Above this layer no code
//     names a transport type: it asks the transport (secure, peerSubject).
//   - mover (mover.go): one direction of bytes between two sides, through
//     one buffer or one pipe, with the splice policy, the per-run byte cap
//     and the Bulk rewake. tcp tunnels and http bodies use the same one;
//     an http body plugs its framing in (body).
//   - mux: what turns bytes into streams — the tcp tunnel (one stream per
//     connection, tunnel.go) and HTTP/1.1 (http.go, http_exchange.go,
//     parsing by core/http1).
//   - stream: one request/response exchange, which routes, balances,
//     queues and retries whatever mux it came from.
//
// The close(2) of a connection or pipe fd is made in one function,
// closeFd (sys.go), reached through Side.close, Pipe.close and Refuse (an
// accepted fd that no frontend takes) only.
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
// TestForwardingDoesNotAllocate, TestMoverDoesNotAllocate and
// BenchmarkForward) or per keep-alive request in steady state
// (TestHTTPKeepAliveRequestDoesNotAllocate, BenchmarkHTTPKeepAlive;
// h1Conn, stream and srvConn objects are recycled per loop); open listening
// sockets (core/listen does); choose servers itself (core/balance's Picker
// does); know about configuration documents beyond the values handed in.
//
// # Invariants
//
//   - Readiness is edge-triggered: a side clears a readiness bit only when
//     a syscall disproves it (EAGAIN, or a short read when the peer has
//     not closed), and the next edge sets it again. EINTR is retried
//     inside the syscall wrappers and never reaches a state machine.
//   - Memory per direction is one buffer or one pipe, and at most one of
//     them holds data: a destination that blocks with no room left stops
//     the reads of its source (backpressure through TCP flow control).
//     Buffers and pipes are held only while bytes are pending; a pipe that
//     still holds data when released is closed, never pooled. A direction
//     changes between buffer and pipe only when the one it leaves is
//     empty, so bytes keep their order.
//   - One run of a tunnel direction, and one run of an http connection's
//     tasklets (request heads, response heads, bodies, lingering after an
//     error answer share it), reads at most runCap bytes; at zero the
//     tasklet of the side being read is demoted to class Bulk
//     (loop.Demote: moved out of Urgent if an fd event queued it there),
//     so a connection that floods (a fat transfer, 1xx responses to an
//     HTTP/1.0 client, input after a 400, many pipelined requests) cannot
//     hold the loop.
//   - Two tasklets per connection, one self-wake rule. Each side has its
//     own tasklet, woken by its own fd: an http server connection outlives
//     the request that uses it (it goes back to its loop's pool and serves
//     another client's), so its readiness cannot wake the client's
//     tasklet; a tcp tunnel's sides keep the same shape. Either tasklet
//     may run the byte movers of the connection, so the class of a
//     transfer is carried by its source's tasklet: while that tasklet
//     waits in Bulk, no run of the other side's tasklet reads the source
//     (mover.run, Worker.spent: it flushes what is pending, it does not
//     read with a fresh budget), and an fd event leaves it in Bulk (Wake
//     keeps the class of a queued tasklet). A transfer past its cap thus
//     runs once per round, in Bulk, as HAProxy's TASK_SELF_WAKING tasklet.
//   - A clean end of stream from a side is passed on as a FIN (half-close)
//     once the bytes before it are flushed.
//   - Aborts: an aborted tunnel or http connection (closeAbort: an I/O
//     error that is not a clean end of stream on either side, such as
//     ECONNRESET or EPIPE, a framing error after bytes went out, or the
//     end of a stop's grace; counted for the frontend and, when a server
//     connection was in use, its backend and server), and an http exchange that server_ms cuts
//     once its response started (closeCut: counted as a timeout),
//     closes both fds with SO_LINGER {1, 0}, i.e.
//     an RST, as HAProxy's NOLINGER on an aborted stream: the peer reads
//     ECONNRESET, never a clean end that would make a cut stream or
//     close-delimited body look complete. The RST is sent at once: what
//     the proxy still holds for that peer (buffer, pipe, socket send
//     queue) is dropped, since the stream is incomplete anyway and a flush
//     could wait on a peer that does not read.
//   - Timers are not re-armed per chunk: a connection's one loop timer
//     fires at the earliest deadline it knew and re-arms at the one in
//     force if bytes moved meanwhile.
package proxy
