package proxy

import (
	"net/netip"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// The tunnel
//
// Both fds are non-blocking, registered edge-triggered; each side has a
// tasklet that the loop wakes in class Urgent on readiness. Either tasklet
// runs the whole tunnel: each direction (client->server, server->client)
// is a mover (mover.go) that reads its source into one buffer (bufsize, from the pool) or one pipe,
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

// Connect and timeouts
//
// The server, its slot, the queue, the connect, its outcome and the
// retries are the server attempt's (attempt.go), the same as an http
// request's: the tunnel only opens the connection (useServer, through
// Side.connect) and decides what its end means (noServer, gaveUp: the
// client closed; established). The attempt starts in the tunnel's first
// run, which the accept wakes in class Normal (stStart: connection
// processing, seed 000), not inside the accept's urgent unit. Each failure is counted on the backend and
// the server, the final one on the frontend; no usable server closes the
// client at once (counted as NoServer).
//
// Timeouts in tcp mode, one loop timer per tunnel:
//   - inspect (frontends with SNI routes only, sni.go): the frontend's
//     InspectTimeout (handshake_ms) from accept to a complete ClientHello;
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

// dir is one direction of a tunnel: bytes read from src, written to dst
// by its mover, through buf (its own, nil unless bytes are pending) or the
// mover's pipe.
type dir struct {
	mover
	src, dst *Side
	other    *dir    // the opposite direction
	buf      *Buffer // nil unless bytes are pending in it
	// to bounds how long dst may leave pending bytes untaken (client_ms
	// towards the client, server_ms towards the server; 0 = none); since
	// is when the current such wait started or last moved a byte (0 = no
	// byte pending).
	to, since int64
}

func (d *dir) pending() int { return d.mover.pending(d.buf, nil) }

// done: nothing more will ever move in this direction.
func (d *dir) done() bool { return d.eof && d.shut }

// Tunnel states.
const (
	stConnecting uint8 = iota
	stEstablished
	stClosed
	stQueued    // waiting for a server slot (queue.go)
	stInspect   // reading the ClientHello of an SNI-routed frontend (sni.go)
	stHandshake // TLS handshake with the server after its connect (xprt_tls_upstream.go)
	stStart     // accepted: the server attempt starts in the tunnel's first run, class Normal
)

// Reasons a tunnel closes, for the counters.
const (
	closeNormal uint8 = iota
	closeAbort
	closeTimeout
	closeNoServer
	closeConnect
)

// Tunnel is a tcp-mode connection: a client fd and a server fd with a
// direction each way. It is owned by one loop and touched only from its
// thread. A Tunnel is never reused after it closes, so a tasklet still
// queued for it finds it closed and does nothing.
type Tunnel struct {
	link ilist.Link[Tunnel] // in Worker.live; first: ilist finds the Tunnel from it
	// The server attempt (attempt.go): the worker, the backend, the server
	// and its slot, the queue, the deadline, the termination (access log:
	// who ended the tunnel, in which phase; 0: derived at close).
	srvAttempt
	fe       *Frontend
	cli, srv Side
	c2s, s2c dir
	timer    loop.Timer
	state    uint8
	moved    bool   // bytes moved during the current run
	pp       uint32 // what the PROXY header carried (proxyhdr.go), 0 = none
	idle     int64  // tunnel idle timeout, ns
	lastIO   int64
	// This loop's counter slot of the frontend (the backend's and the
	// server's are the attempt's).
	fs *stats.Slot
	// lg is the access-log entry being filled (frontend access_log on and
	// a ring to push to; nil otherwise): the client, read at accept (a
	// client that resets has no peer address at close), and the times of
	// the phases (logEntry). From the worker's free list, back to it at
	// close.
	lg *stats.LogEntry
}

var _ = [1]struct{}{}[unsafe.Offsetof(Tunnel{}.link)] // link first (ilist)

func runTunnelTask(tk *loop.Tasklet) { tk.Owner.(*Tunnel).process() }

func (t *Tunnel) loopOf() *loop.Loop { return t.w.L } // loopOwner (Side.registerNoOut)
func runTunnelTimer(tm *loop.Timer)  { tm.Owner.(*Tunnel).onTimer() }

// StartTCP takes ownership of the accepted client fd (non-blocking) and
// starts a tcp tunnel to fe's backend. Loop thread only.
func (w *Worker) StartTCP(fd int, fe *Frontend) { w.startTCP(fd, plainTransport(), fe, 0) }

// startTCP is StartTCP over the client transport xp (a TLS one is
// established: xprt_tls_accept.go), for the client a PROXY header named
// (pp, proxyhdr.go; 0: the peer).
func (w *Worker) startTCP(fd int, xp transport, fe *Frontend, pp uint32) {
	t := &Tunnel{fe: fe, pp: pp}
	t.w, t.be = w, fe.Backend
	t.cli.adopt(fd, xp)
	t.cli.Connected = true
	t.srv.FD.Fd = -1
	t.cli.Task.Run, t.cli.Task.Owner = runTunnelTask, t
	t.srv.Task.Run, t.srv.Task.Owner = runTunnelTask, t
	t.timer.Run, t.timer.Owner = runTunnelTimer, t
	w.initWaiter(t)
	t.c2s = dir{src: &t.cli, dst: &t.srv, other: &t.s2c, mover: mover{mode: fe.Splice}}
	t.s2c = dir{src: &t.srv, dst: &t.cli, other: &t.c2s, mover: mover{mode: fe.Splice}, to: int64(fe.ClientTimeout)}
	t.idle = int64(fe.TunnelTimeout)
	w.link(t)
	sec := stats.Sec(w.L.Now())
	t.fs = fe.Stats.Loop(w.id)
	t.fs.ConnTotal.Add(1)
	t.fs.ConnCur.Add(1)
	t.fs.ConnStarted(sec)
	if fe.AccessLog && w.AccessLog != nil {
		t.lg = w.getLog()
		t.lg.Start = w.L.Now()
		t.lg.Client = clientAddrPort(fd)
		w.logCarried(t.lg, pp)
	}
	// TCP_NODELAY: inherited from the listening socket (core/listen).
	if t.inspects() && !t.sniFromAuthority() {
		t.be = nil // chosen by the ClientHello (sni.go)
		if err := t.cli.registerNoOut(w.L); err != nil {
			t.close(closeAbort)
			return
		}
		t.state = stInspect
		if fe.InspectTimeout > 0 {
			t.armAt(w.L.Now() + int64(fe.InspectTimeout))
		}
		return
	}
	if t.rulesDeny(nil) {
		return // a rule denied the connection (tunnel_rules.go)
	}
	if t.be == nil {
		t.close(closeNoServer)
		return
	}
	t.useBackend(sec)
	if err := t.cli.registerNoOut(w.L); err != nil {
		t.term = stats.Termination{'R', 'C'}
		t.close(closeAbort)
		return
	}
	// The server attempt (balance, queue, connect) is connection
	// processing, class Normal (seed 000), as an http request's start:
	// the accept (urgent: a ring's hand-off or the acceptor) only queues
	// it. A client byte that comes first finds the tasklet queued and
	// leaves it there (Wake keeps the class).
	t.state = stStart
	w.L.Wake(&t.cli.Task, loop.Normal)
}

// useBackend takes t.be's timeouts and counters (and the client's hash
// for balance=source) before the first connect. The backend's current
// connections count the tunnels holding a server slot (attempt.go).
func (t *Tunnel) useBackend(sec uint32) {
	w := t.w
	if bt := int64(t.be.B.TunnelTimeout); bt > 0 && (t.idle <= 0 || bt < t.idle) {
		t.idle = bt
	}
	t.c2s.to = int64(t.be.B.ServerTimeout)
	t.bs = t.be.Stats.Loop(w.id)
	t.bs.ConnTotal.Add(1)
	t.bs.ConnStarted(sec)
	if t.be.source && t.pp != 0 {
		t.hash = balance.HashAddr(t.w.clientAddr(t.cli.FD.Fd, t.pp).Addr())
	} else if t.be.source {
		t.hash = peerHash(t.cli.FD.Fd)
	}
}

// peerHash is balance.HashAddr of the client's IP address, for
// balance=source. getpeername into a stack buffer: no allocation.
func peerHash(fd int) uint64 {
	var rsa unix.RawSockaddrAny
	l := uint32(unsafe.Sizeof(rsa))
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
	if e != 0 {
		return 0
	}
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		return balance.HashAddr(netip.AddrFrom4(p.Addr))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		return balance.HashAddr(netip.AddrFrom16(p.Addr))
	}
	return 0
}

// useServer opens the connection to the server whose slot the tunnel
// holds (attemptOwner).
func (t *Tunnel) useServer() {
	w := t.w
	s := t.server
	t.ss.ConnStarted(stats.Sec(w.L.Now()))
	t.countAttempt()
	if lg := t.lg; lg != nil && lg.ConnStart == 0 {
		lg.Granted = w.L.Now()
		lg.ConnStart = lg.Granted
	}
	t.state = stConnecting
	switch stage, _ := t.srv.connect(w.L, s, &w.sa); stage {
	case connOK:
	case connSocket:
		// EMFILE/ENFILE/ENOBUFS: no other server would do better.
		t.attempts = 1 << 30
		t.term = stats.Termination{'R', 'C'}
		t.connectFailed()
		return
	default:
		t.connectFailed()
		return
	}
	t.deadline = w.L.Now() + int64(t.be.B.ConnectTimeout)
	w.L.Arm(&t.timer, t.deadline)
}

// waitQueue: the tunnel waits for a server slot until t.deadline.
func (t *Tunnel) waitQueue() {
	t.state = stQueued
	t.w.L.Arm(&t.timer, t.deadline)
}

// noServer closes a tunnel no server can take.
func (t *Tunnel) noServer() { t.close(closeNoServer) }

// dropConn closes the server side of a failed connect.
func (t *Tunnel) dropConn() { t.srv.close(t.w.L, false) }

// gaveUp closes a tunnel whose last connect failed.
func (t *Tunnel) gaveUp() { t.close(closeConnect) }

// stepStarted: the server's TLS handshake runs (xprt_tls_upstream.go).
func (t *Tunnel) stepStarted() { t.state = stHandshake }

// stepCurrent: the transport's step of connect attempt number attempt
// ended; the tunnel still waits for it unless a timeout, a retry or the
// client ended it meanwhile.
func (t *Tunnel) stepCurrent(attempt uint32) bool {
	return t.state == stHandshake && uint32(t.attempts) == attempt
}

// stepDone: the step of the current attempt ended (connectOwner).
func (t *Tunnel) stepDone(err error) {
	if err != nil {
		t.connectFailed()
		return
	}
	t.established()
	t.w.L.Wake(&t.srv.Task, loop.Urgent)
}

// established: the server side is ready for bytes (TCP connected, and the
// TLS handshake done for a TLS server): the tunnel is established.
func (t *Tunnel) established() {
	t.srv.Connected = true
	t.state = stEstablished
	t.lastIO = t.w.L.Now()
	t.countConnect(t.lastIO)
	if t.lg != nil {
		t.lg.Connected = t.lastIO
	}
	t.deadline = 0
	if t.idle > 0 {
		t.armAt(t.lastIO + t.idle)
	} else {
		t.w.L.Disarm(&t.timer)
	}
}

// armAt arms the tunnel's timer at at (loop.Now units).
func (t *Tunnel) armAt(at int64) {
	t.deadline = at
	t.w.L.Arm(&t.timer, at)
}

// process runs whenever either side's tasklet runs: it moves what can be
// moved in both directions without blocking and closes the tunnel when
// both directions are finished.
func (t *Tunnel) process() {
	if t.state == stClosed {
		return
	}
	if t.state == stStart {
		t.state = stConnecting
		if t.acquire(nil); t.state == stClosed {
			return
		}
	}
	if t.state == stInspect {
		if t.inspect(); t.state != stConnecting {
			return
		}
	}
	if t.state == stConnecting {
		// The outcome, once there, is decided in class Normal.
		if !t.srv.connectPending() && !decideInNormal(t.w.L, &t.srv.Task) {
			return
		}
		t.checkConnect(&t.srv, t)
		if t.state == stClosed {
			return
		}
	}
	if t.state == stQueued && t.cli.FD.Ready&evErr != 0 {
		// A client that resets while queued gives its place up (CQ),
		// whether or not its direction has a read to fail.
		t.queued()
		t.term = stats.Termination{'C', 'Q'}
		t.close(closeAbort)
		return
	}
	t.moved = false
	if !t.pump(&t.c2s) || !t.pump(&t.s2c) {
		t.close(closeAbort) // pump set who failed
		return
	}
	if t.c2s.done() && t.s2c.done() {
		t.close(closeNormal)
		return
	}
	if t.moved && t.state == stEstablished {
		t.lastIO = t.w.L.Now()
	}
}

// onTimer: connect timeout while connecting; once established, the idle
// timeout (no byte moved either way for tunnel_ms) and the send timeouts
// (a side that leaves pending bytes untaken: client_ms towards the client,
// server_ms towards the server, as HAProxy's timeout client and timeout
// server bound a blocked write). The timer is not re-armed on every chunk:
// it fires at the earliest deadline it knew and re-arms itself at the one
// in force if bytes moved meanwhile; pump arms it earlier when a send
// starts to block.
func (t *Tunnel) onTimer() {
	now := t.w.L.Now()
	switch t.state {
	case stInspect:
		if now >= t.deadline {
			t.fs.Timeouts.Add(1)
			t.term = stats.Termination{'c', 'R'}
			t.close(closeTimeout)
		} else {
			t.w.L.Arm(&t.timer, t.deadline)
		}
	case stQueued:
		if now >= t.deadline {
			t.queueTimeout()
			t.fs.Timeouts.Add(1)
			t.term = stats.Termination{'s', 'Q'}
			t.close(closeNoServer)
		} else {
			t.w.L.Arm(&t.timer, t.deadline)
		}
	case stConnecting, stHandshake:
		if now >= t.deadline {
			t.fs.Timeouts.Add(1)
			t.term = stats.Termination{'s', 'C'}
			t.connectFailed()
		} else {
			t.w.L.Arm(&t.timer, t.deadline)
		}
	case stEstablished:
		t.deadline = 0
		next := int64(noDeadline)
		who := byte('c') // the idle timeout: HAProxy's cD
		if t.idle > 0 {
			next = t.lastIO + t.idle
		}
		for _, d := range [2]*dir{&t.c2s, &t.s2c} {
			if d.since != 0 && d.to > 0 && d.since+d.to < next {
				next = d.since + d.to
				who = 'c'
				if d == &t.c2s {
					who = 's' // the server does not take what is sent to it
				}
			}
		}
		if now >= next {
			t.term = stats.Termination{who, 'D'}
			t.fs.Timeouts.Add(1)
			t.bs.Timeouts.Add(1)
			t.ss.Timeouts.Add(1)
			t.close(closeTimeout)
			return
		}
		if next != noDeadline {
			t.armAt(next)
		}
	}
}

// sendWait notes, after a pump of d, whether d.dst leaves bytes untaken
// and since when, and arms the timer when that wait ends before the armed
// deadline (see onTimer).
func (t *Tunnel) sendWait(d *dir, moved bool) {
	if !d.dst.Connected || d.pending() == 0 {
		d.since = 0
		return
	}
	if d.since != 0 && !moved {
		return
	}
	now := t.w.L.Now()
	d.since = now
	if d.to > 0 && t.state == stEstablished && (t.deadline == 0 || now+d.to < t.deadline) {
		t.armAt(now + d.to)
	}
}

// pump moves bytes from d.src to d.dst (mover.run, with runCap for this
// run of the direction) and passes an end of stream on as a FIN once the
// pending bytes are flushed. It returns false when the tunnel must be
// aborted.
func (t *Tunnel) pump(d *dir) bool {
	if !d.src.Connected || d.done() {
		return true
	}
	budget := runCap
	sent := d.bytes
	if res := d.run(t.w, d.src, d.dst, &d.buf, &budget, nil); res != 0 {
		// Who failed, for the access log: the client is the source of
		// c2s and the destination of s2c; in the phase the tunnel is in
		// (a client read while queued or connecting fails there too).
		who := byte('S')
		if (d == &t.c2s) == (res == relSrc) {
			who = 'C'
		}
		t.term = stats.Termination{who, t.phaseByte()}
		return false
	}
	moved := d.bytes != sent
	if moved {
		t.moved = true
	}
	if d.eof && !d.shut && d.dst.Connected && d.pending() == 0 {
		// When the other direction is finished too the tunnel closes
		// right after, and close(2) sends the FIN: no shutdown needed
		// (one syscall less per connection). Otherwise best effort:
		// ENOTCONN or a reset peer end the direction all the same, but
		// EAGAIN (a TLS side whose close_notify found the socket full)
		// is tried again when the side can send.
		if !d.other.done() && d.dst.shutw() == unix.EAGAIN {
			d.dst.blocked()
			t.sendWait(d, moved)
			return true
		}
		d.shut = true
	}
	t.sendWait(d, moved)
	return true
}

func (t *Tunnel) releaseDir(d *dir) {
	if d.buf != nil {
		t.w.Bufs.Put(d.buf)
		d.buf = nil
	}
	d.release(t.w) // the pipe: closed, not pooled, if it still holds data
}

// close ends the tunnel: both fds closed, pools refilled, counters updated.
func (t *Tunnel) close(why uint8) {
	if t.state == stClosed {
		return
	}
	if t.lg != nil {
		t.lg.Term = t.termination(why) // from the state it ends in
	}
	t.state = stClosed
	w := t.w
	w.dequeue(&t.wait)
	w.L.Disarm(&t.timer)
	// An aborted tunnel resets both sides (see "Aborts" in the package doc).
	w.limitConnEnd(t.cli.FD.Fd) // limits.go
	t.cli.close(w.L, why == closeAbort)
	t.srv.close(w.L, why == closeAbort)
	t.releaseDir(&t.c2s)
	t.releaseDir(&t.s2c)
	fs := t.fs
	fs.ConnCur.Add(-1)
	fs.BytesIn.Add(t.c2s.bytes)
	fs.BytesOut.Add(t.s2c.bytes)
	switch why {
	case closeAbort:
		fs.Aborts.Add(1)
	case closeNoServer:
		fs.NoServer.Add(1)
	case closeConnect:
		fs.ConnectErrors.Add(1)
	}
	var srvName string
	if bs := t.bs; bs != nil {
		bs.BytesIn.Add(t.c2s.bytes)
		bs.BytesOut.Add(t.s2c.bytes)
		if why == closeAbort {
			bs.Aborts.Add(1)
		}
		if s := t.server; s != nil {
			ss := t.ss
			ss.BytesIn.Add(t.c2s.bytes)
			ss.BytesOut.Add(t.s2c.bytes)
			if why == closeAbort {
				ss.Aborts.Add(1)
			}
			srvName = s.Name
			t.releaseServer()
		}
	}
	if t.lg != nil {
		t.logAccess(srvName)
	}
	w.unlink(t)
	w.dropCarried(t.pp)
	t.pp = 0
	if t.fe.OnClose != nil {
		t.fe.OnClose(w.id)
	}
}

// termination is the access log's termination state of a tunnel closed
// for why, when the place that closed it did not say (t.term).
func (t *Tunnel) termination(why uint8) stats.Termination {
	if t.term[0] != 0 {
		return t.term
	}
	phase := t.phaseByte()
	switch why {
	case closeNormal:
		return stats.TermNormal
	case closeTimeout:
		return stats.Termination{'c', phase}
	case closeNoServer, closeConnect:
		return stats.Termination{'S', 'C'}
	}
	return stats.Termination{'C', phase} // closeAbort
}

// phaseByte is the termination phase of the tunnel's state.
func (t *Tunnel) phaseByte() byte {
	switch t.state {
	case stInspect:
		return 'R'
	case stQueued:
		return 'Q'
	case stConnecting, stHandshake, stStart:
		return 'C'
	}
	return 'D'
}

// logAccess pushes the tunnel's access-log entry to the worker's ring and
// gives the entry back to the free list. A full ring drops the entry
// (counted by the ring).
func (t *Tunnel) logAccess(server string) {
	e := t.lg
	t.lg = nil
	e.Frontend = t.fe.Name
	e.Server = server
	e.BytesIn, e.BytesOut = t.c2s.bytes, t.s2c.bytes
	if t.be != nil {
		e.Backend = t.be.Name
	}
	if t.attempts > 1 {
		e.Retries = t.attempts - 1
	}
	e.End = t.w.L.Now()
	if t.cli.xp != nil {
		e.ClientCert = t.cli.xp.peerSubject()
	}
	t.w.AccessLog.Push(e)
	t.w.putLog(e)
}

// getLog returns a cleared access-log entry from the worker's free list
// (at most maxFreeConns are kept), so that steady-state logging does not
// allocate.
func (w *Worker) getLog() *stats.LogEntry {
	if e := popFree(&w.freeLog); e != nil {
		return e
	}
	return new(stats.LogEntry)
}

// putLog clears e and keeps it for getLog.
func (w *Worker) putLog(e *stats.LogEntry) {
	if len(w.freeLog) < maxFreeConns {
		*e = stats.LogEntry{}
		w.freeLog = append(w.freeLog, e)
	}
}

// clientAddrPort is the client's address and port (access log only).
func clientAddrPort(fd int) netip.AddrPort {
	var rsa unix.RawSockaddrAny
	l := uint32(unsafe.Sizeof(rsa))
	_, _, e := unix.RawSyscall(unix.SYS_GETPEERNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
	if e != 0 {
		return netip.AddrPort{}
	}
	switch rsa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), ntohs(p.Port))
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr).Unmap(), ntohs(p.Port))
	}
	return netip.AddrPort{}
}

func ntohs(p uint16) uint16 { return p>>8 | p<<8 }
