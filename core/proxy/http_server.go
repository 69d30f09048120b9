package proxy

import (
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/h2"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

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
// unexpected byte; one already queued behind the response keeps the
// connection out of the pool: srvConn.quiet), or when their server is
// retired or put in maint (the engine runs Worker.DropIdleUnusable on every loop after an Apply). A pooled connection is reused only for an idempotent
// request without body (GET, HEAD, OPTIONS, TRACE, PUT, DELETE, HTTP/1.1,
// no upgrade): should it turn out closed before any response byte, the
// request is sent again on a new connection (its rewritten head is kept
// until the response starts). Other requests get a new connection.

// maxIdlePerServer bounds the idle connections a loop keeps to one server;
// a connection released beyond it is closed. One HTTP/2 client connection
// alone may hold max_concurrent_streams (up to 1000) server connections at
// once, each to be opened again for the next stream when its release
// closed it (64 here cost the h2 bench row a connect every other
// request); the loop's share of the fd budget (Tuning.MaxIdle) is what
// bounds them all.
const maxIdlePerServer = 1024

// serverIdleTimeout is how long an idle server connection stays pooled.
// Servers commonly keep idle connections 5 s (Apache) to 75 s (nginx); a
// connection the server closes earlier is noticed by its EPOLLRDHUP and
// dropped at once, so this only bounds the fds a quiet loop keeps open.
const serverIdleTimeout = 5 * 1e9

// maxFreeConns bounds the recycled connection objects a loop keeps.
const maxFreeConns = 256

// maxFreeParsers bounds the request parsers, and the response parsers, a
// loop keeps for reuse (~2 KiB each): steady traffic whose requests in
// flight vary by less than this allocates none, and a burst does not pin
// its peak for the life of the process.
const maxFreeParsers = 256

// srvConn is one connection to a server. It is either attached to the
// stream whose request it carries (owner != nil) or idle in its loop's
// pool for that server, registered with epoll all along so that a close
// by the server is seen while idle.
type srvConn struct {
	link   ilist.Link[srvConn] // in pool; first: ilist finds the srvConn from it
	w      *Worker
	side   Side
	server *balance.Server
	in     *Buffer         // bytes from the server not yet relayed
	resp   *http1.Response // while attached (getResp); nil while pooled
	timer  loop.Timer      // idle expiry while pooled
	owner  *stream
	up     *upStream // a stream on an HTTP/2 server connection (h2_server.go): the side's transport
	reused bool      // has carried a request before the current one
	hs     uint8     // TLS handshake state (xprt_tls_upstream.go)
	pool   *srvPool
}

var _ = [1]struct{}{}[unsafe.Offsetof(srvConn{}.link)] // link first (ilist)

// srvPool is a loop's idle connections to one server, most recent first
// (the most recently used is the most likely to be alive).
type srvPool struct {
	l ilist.List[srvConn]
	n int
}

// httpState is the http-mode state of a Worker.
type httpState struct {
	live ilist.List[h1Conn] // live HTTP/1.1 client connections
	// idle holds the pools of the servers that have idle connections on
	// this loop: an entry is removed when its pool empties, so a retired
	// server is not kept reachable once its last pooled connection ends.
	idle      map[*balance.Server]*srvPool
	freePools []*srvPool // emptied pools, reused without allocating
	nidle     int
	maxIdle   int // Tuning.MaxIdle: bound of nidle, 0 = none
	freeConn  []*h1Conn
	// freeStream: ended streams, taken by the next request head.
	freeStream []*stream
	// live2: live HTTP/2 client connections (h2.go); freeH2 their
	// streams' client ends, recycled.
	live2   ilist.List[h2Conn]
	freeH2  []*h2Stream
	h2mem   h2.Pool // what idle HTTP/2 connections gave back, both ways
	freeSrv []*srvConn
	// up: the HTTP/2 connections to servers (h2_server.go); freeUp their
	// streams' ends, recycled; upHead the scratch a request head is
	// rewritten into for one.
	up     map[*balance.Server]*upList
	freeUp []*upStream
	upHead []byte
	// Parsers of the requests and responses in flight are taken from
	// these while an exchange needs them, so that idle connections (client
	// between requests, server in the pool) do not carry ~2 KiB of header
	// spans each. Each keeps at most maxFreeParsers.
	freeReq  []*http1.Request
	freeResp []*http1.Response
	// Objects of the free lists in use, for the memory report (memory.go).
	nstream, nreq, nresp int
	// path is the scratch buffer routing normalises an unusual request
	// path into (normPath).
	path []byte
}

func runSrvTask(tk *loop.Tasklet) {
	sc := tk.Owner.(*srvConn)
	if s := sc.owner; s != nil {
		s.w.budget = runCap
		s.mux.run(s)
		return
	}
	sc.idleCheck()
}

func runSrvTimer(tm *loop.Timer) {
	sc := tm.Owner.(*srvConn)
	if sc.owner == nil && sc.pool != nil {
		sc.w.closeSrv(sc)
	}
}

// newSrv returns a clean connection object (recycled when possible).
func (w *Worker) newSrv() *srvConn {
	h := &w.h
	var sc *srvConn
	if n := len(h.freeSrv); n > 0 {
		sc = h.freeSrv[n-1]
		h.freeSrv[n-1] = nil
		h.freeSrv = h.freeSrv[:n-1]
	} else {
		sc = &srvConn{w: w}
		sc.side.Task.Run, sc.side.Task.Owner = runSrvTask, sc
		sc.timer.Run, sc.timer.Owner = runSrvTimer, sc
	}
	sc.side.FD = loop.FD{Fd: -1, T: &sc.side.Task}
	return sc
}

// headLimit leaves room in a buffer for what the proxy adds to a head
// (X-Forwarded-For, X-Forwarded-Proto, Via, Connection), so the rewritten
// head of any accepted head fits one buffer.
func headLimit(bufsize int) int {
	return max(bufsize-headSlack, 1024)
}

const headSlack = 512

// dial opens a non-blocking connection to s. ok is false when the socket
// could not even be created or the connect was refused at once.
func (w *Worker) dial(s *balance.Server) (*srvConn, bool) {
	sc := w.newSrv()
	sc.server = s
	if stage, _ := sc.side.connect(w.L, s, &w.sa); stage != connOK {
		w.closeSrv(sc) // a side without fd (connSocket) only recycles sc
		return nil, false
	}
	return sc, true
}

// closeSrv closes a server connection, attached or pooled.
func (w *Worker) closeSrv(sc *srvConn) { w.endSrv(sc, false) }

// endSrv closes a server connection, with an RST when reset is set (an
// aborted exchange).
func (w *Worker) endSrv(sc *srvConn, reset bool) {
	if sc.up != nil {
		w.endUp(sc, reset)
		return
	}
	if sc.hs == hsActive {
		// The handshake owns the fd (xprt_tls_upstream.go): its end closes
		// it and recycles sc.
		sc.hs = hsOrphan
		sc.owner = nil
		return
	}
	if sc.pool != nil {
		w.unpool(sc)
	}
	w.L.Disarm(&sc.timer)
	sc.side.close(w.L, reset)
	if sc.in != nil {
		sc.in.head, sc.in.tail = 0, 0
		w.Bufs.Put(sc.in)
		sc.in = nil
	}
	w.recycleSrv(sc)
}

// getResp returns a response parser from the loop's free list (see getReq).
func (w *Worker) getResp() *http1.Response {
	w.h.nresp++
	if r := popFree(&w.h.freeResp); r != nil {
		return r
	}
	return &http1.Response{} // limits: set per head from its buffer (readResponse)
}

// putResp gives sc's response parser back; sc.resp is nil afterwards.
func (w *Worker) putResp(sc *srvConn) {
	if r := sc.resp; r != nil {
		sc.resp = nil
		w.putRespParser(r)
	}
}

// putReqParser gives a request parser back to the loop's free list.
func (w *Worker) putReqParser(r *http1.Request) {
	w.h.nreq--
	if len(w.h.freeReq) < maxFreeParsers {
		r.Reset()
		w.h.freeReq = append(w.h.freeReq, r)
	}
}

// putRespParser gives a response parser back to the loop's free list.
func (w *Worker) putRespParser(r *http1.Response) {
	w.h.nresp--
	if len(w.h.freeResp) < maxFreeParsers {
		r.Reset()
		w.h.freeResp = append(w.h.freeResp, r)
	}
}

func (w *Worker) recycleSrv(sc *srvConn) {
	w.putResp(sc)
	sc.side.FD.Ready = 0
	sc.side.Connected = false
	sc.owner, sc.server, sc.reused = nil, nil, false
	if len(w.h.freeSrv) < maxFreeConns {
		w.h.freeSrv = append(w.h.freeSrv, sc)
	}
}

// pool parks an attached connection whose exchange ended cleanly. It
// returns false (and the caller closes sc) when the pool is full.
func (w *Worker) poolSrv(sc *srvConn) bool {
	h := &w.h
	if sc.up != nil || sc.server.Retired() || w.stopping || sc.side.closedByPeer() || sc.server.SendProxy != 0 {
		// a stream of an HTTP/2 connection (which stays with its server),
		// retired, or the server closed (its FIN came with the response),
		// or its PROXY header named one client (proxyhdr.go)
		return false
	}
	if h.maxIdle > 0 && h.nidle >= h.maxIdle {
		return false // the loop's share of the fd budget for idle connections
	}
	if !sc.quiet() {
		return false // the server sent more than its response
	}
	if h.idle == nil {
		h.idle = make(map[*balance.Server]*srvPool)
	}
	p := h.idle[sc.server]
	if p == nil {
		p = popFree(&h.freePools)
		if p == nil {
			p = &srvPool{}
		}
		h.idle[sc.server] = p
	}
	if p.n >= maxIdlePerServer {
		return false
	}
	sc.owner = nil
	w.putResp(sc)
	sc.reused = true
	sc.pool = p
	p.l.PushFront(&sc.link)
	p.n++
	h.nidle++
	w.L.Arm(&sc.timer, w.L.Now()+serverIdleTimeout)
	return true
}

func (w *Worker) unpool(sc *srvConn) {
	p := sc.pool
	p.l.Remove(&sc.link)
	sc.pool = nil
	p.n--
	w.h.nidle--
	if p.n == 0 {
		// No idle connection to this server left: drop its entry, so
		// that the map does not keep every server ever pooled (retired
		// ones included) reachable.
		delete(w.h.idle, sc.server)
		if len(w.h.freePools) < maxFreeConns {
			w.h.freePools = append(w.h.freePools, p)
		}
	}
}

// takeIdle returns a pooled connection to s that shows no sign of having
// been closed, or nil. Connections found dead are closed on the way.
func (w *Worker) takeIdle(s *balance.Server) *srvConn {
	p := w.h.idle[s]
	if p == nil {
		return nil
	}
	for sc := p.l.Front(); sc != nil; sc = p.l.Front() {
		w.unpool(sc)
		w.L.Disarm(&sc.timer)
		if !sc.quiet() {
			// Its server closed it or sent bytes unasked, reported by a
			// poll whose idle check has not run yet (its tasklet waits in
			// class Urgent past the round's offer while this request is
			// routed in Normal).
			w.closeSrv(sc)
			continue
		}
		return sc
	}
	return nil
}

// idleCheck runs when a pooled connection becomes readable: a server
// sends nothing unasked, so end of stream, an error or unexpected bytes
// all mean the connection is of no further use.
func (sc *srvConn) idleCheck() {
	if sc.pool != nil && !sc.quiet() {
		sc.w.closeSrv(sc)
	}
}

// quiet: the server sent nothing since its response ended, so the
// connection may carry another request. A server sends nothing unasked:
// end of stream, an error or a byte (HTTP response splitting: a response
// of its own behind the one asked for) mean the connection is of no
// further use, and its bytes must never be read as the next request's
// answer (HAProxy closes a server connection that has data with no
// request pending). The readiness says when a receive is needed: a read
// that stopped at the response's end without finding the socket empty
// (a spliced body, whose last splice takes only what is left of it; a
// buffered read that filled the buffer exactly) leaves evIn set, and no
// edge comes for bytes already queued behind it, so they are looked for
// here, with one receive: EAGAIN means none. Loop thread.
func (sc *srvConn) quiet() bool {
	if sc.side.closedByPeer() || (sc.in != nil && sc.in.Len() > 0) {
		return false
	}
	if sc.side.FD.Ready&evIn == 0 && !sc.side.xp.rcvPending() {
		return true // the last receive found the socket empty; no edge since
	}
	var b [1]byte
	if _, e := sc.side.recv(b[:]); e == unix.EAGAIN {
		sc.side.FD.Ready &^= evIn
		return true
	}
	return false
}

// DropIdleUnusable closes the pooled idle connections to servers that
// were retired or put in maint (loop thread): the engine runs it on every
// loop after an Apply, so that they do not hold fds until their idle
// expiry. It walks the loop's pools, never a request's path.
func (w *Worker) DropIdleUnusable() {
	for s, p := range w.h.idle {
		if !s.Retired() && s.AdminState() != config.AdminMaint {
			continue
		}
		for sc := p.l.Front(); sc != nil; sc = p.l.Front() {
			w.closeSrv(sc) // the last one deletes s from the map
		}
	}
	w.closeUp(true)
}

// closeHTTP closes every http connection and pooled server connection of
// the worker (shutdown after the grace period).
func (w *Worker) closeHTTP() {
	for c := w.h.live.Front(); c != nil; c = w.h.live.Front() {
		if s := c.st; s != nil {
			s.blame('K', s.phaseByte()) // the access log's "killed" (end of a stop's grace)
		}
		c.close(closeAbort)
	}
	for c := w.h.live2.Front(); c != nil; c = w.h.live2.Front() {
		for _, hs := range c.streams {
			if s := hs.st; s != nil && s.phase != phDone {
				s.blame('K', s.phaseByte())
			}
		}
		c.close(closeAbort)
	}
	for _, p := range w.h.idle {
		for sc := p.l.Front(); sc != nil; sc = p.l.Front() {
			w.closeSrv(sc)
		}
	}
	w.closeUp(false)
}
