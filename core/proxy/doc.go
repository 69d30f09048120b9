// Package proxy owns the connection state machines of the data plane: the
// tcp-mode tunnel (client fd <-> server fd), the connect path to a backend
// server with retries, the per-loop buffer pool and pipe pool, and the
// splice(2) forwarding of seed 003. The http mode (a later package user)
// reuses Side, Buffer/BufPool, Pipe/PipePool and the Worker's connect path.
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
// the client at once (counted as NoServer; server queues are not
// implemented).
//
// Timeouts in tcp mode, one loop timer per tunnel:
//   - connect: backend connect_ms, per attempt, from connect(2);
//   - tunnel: once the server is connected the tunnel is established and
//     the idle timeout is the shorter of the frontend's and the backend's
//     tunnel_ms: the tunnel closes when no byte moved in either direction
//     for that long (a client that never reads stalls the tunnel, so it
//     is closed after tunnel_ms). The timer is not re-armed per chunk: it
//     fires at its deadline and re-arms at last-activity+timeout.
//
// client_ms and server_ms are http-mode timeouts; in tcp mode the tunnel
// timeout covers idle connections from the moment the server answers, and
// connect_ms (with retries) the time before.
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
// Across generations (core/engine_check.go): identical check settings
// over the same Server objects keep the running Checker; otherwise the old
// one is stopped (Stop waits until every loop closed its probes) and the
// new one takes over the rise/fall counters of carried-over servers when
// rise and fall did not change, so an unrelated configuration change does
// not make an up server fall at its first failure. Removing the check sets
// every server up.
package proxy
