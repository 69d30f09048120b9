package proxy

import (
	"net/netip"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/proxyproto"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// The PROXY protocol on binds (accept_proxy) and towards servers
// (send_proxy)
//
// A frontend generation with AcceptProxy set (the engine sets it on the
// copy of the frontend it gives each bind with accept_proxy, as it does
// for tls) reads a PROXY header at the start of every connection accepted
// through it (Worker.Accept), before anything else — TLS, the first
// request, the SNI inspection — as HAProxy's accept-proxy:
//
//   - the peer (the load balancer) must be in the bind's trusted prefixes,
//     or the connection is reset at once (counted: ProxyRefused);
//   - the header is peeked (MSG_PEEK into the loop's buffer) and parsed by
//     core/proxyproto, which waits only while the bytes are a valid prefix
//     of one; the exact header is then consumed, so the next layer (TLS,
//     http, a tunnel) reads its own bytes from the socket as if nothing
//     came before them. One try runs at accept: a balancer sends the header
//     with its first segment, so most connections never wait in epoll;
//   - a malformed, truncated (the peer closed before its end) or oversized
//     header, or bytes that are no header, reset the connection (counted:
//     ProxyInvalid); none within Timeout (the frontend's handshake_ms)
//     too (ProxyTimeouts). A connection waiting for its header holds its
//     maxconn slots (OnClose gives them back) and counts in the loop's
//     connections, not in the frontend's until it starts;
//   - accepted (ProxyAccepted): a header naming a client (not LOCAL or
//     UNKNOWN) is kept in the worker's carried table and its index goes
//     with the fd to the connection started over it (pp): the client's
//     address replaces the peer's for routing (balance=source),
//     X-Forwarded-For and the access log, which also records the peer
//     (LogEntry.Peer); a v2 AUTHORITY routes a tcp frontend's SNI routes
//     when the bind does not terminate TLS (no ClientHello is inspected
//     then: the balancer terminated TLS and said which name it served);
//     and a server with send_proxy is told the client and the address it
//     connected to.
//
// Nothing here allocates per connection: the reading objects and the
// carried entries come from per-loop free lists, the header from the
// loop's buffer (TestProxyHeaderAllocatesNothing).
//
// A server's SendProxy writes a header (v1 or v2, v2 with an AUTHORITY
// when the client's name is known: the one its own header carried, else
// the SNI it sent to a bind that terminates TLS, as the transport says:
// serverName) on each new connection once its TCP
// connect completed and before the transport's step (TLS starts after
// it): srvAttempt.checkConnect for tunnels and http requests, probe.process
// for health checks (v2 LOCAL, v1 UNKNOWN: the check is the proxy's own
// connection). The header is at most a few hundred bytes on a socket
// whose send buffer is empty: a send that does not take it whole fails
// the connect. An http server connection that carried a header names one
// client, so it is not pooled for others (poolSrv).

// AcceptProxy is what a bind with accept_proxy asks: the peers trusted to
// send a PROXY header and how long to wait for it. Immutable once
// published.
type AcceptProxy struct {
	Trusted []netip.Prefix // unmapped addresses
	Timeout time.Duration  // handshake_ms; 0 = defaultHandshakeTimeout
}

// trusts: peer (unmapped) is in one of the trusted prefixes.
func (a *AcceptProxy) trusts(peer netip.Addr) bool {
	for _, p := range a.Trusted {
		if p.Contains(peer) {
			return true
		}
	}
	return false
}

// carried is what a PROXY header said about a connection that named a
// client: kept in the worker's table (proxyState.carried) for as long as
// the connection lives, found by its index (a connection's pp field,
// 0 = none: the peer is the client).
type carried struct {
	src, dst netip.AddrPort // the client, the address it connected to
	peer     netip.AddrPort // the balancer that sent the header
	next     uint32         // free list: index of the next free entry
	alen     uint8
	auth     [proxyproto.MaxAuthority]byte
}

// proxyState is a worker's PROXY protocol state.
type proxyState struct {
	live    ilist.List[proxyHdr] // connections reading their header
	free    []*proxyHdr
	buf     []byte    // MaxHeader bytes: the header, peeked
	carried []carried // [0] unused: index 0 means none
	freeC   uint32    // first free entry of carried, 0 = none
}

// proxyHdr is a connection reading its PROXY header.
type proxyHdr struct {
	link  ilist.Link[proxyHdr] // in proxyState.live; first: ilist finds the proxyHdr from it
	w     *Worker
	side  Side
	timer loop.Timer
	fe    *Frontend
	cur   *atomic.Pointer[Frontend]
	peer  netip.AddrPort
}

var _ = [1]struct{}{}[unsafe.Offsetof(proxyHdr{}.link)] // link first (ilist)

func runProxyHdrTask(tk *loop.Tasklet) { tk.Owner.(*proxyHdr).read() }
func runProxyHdrTimer(tm *loop.Timer) {
	h := tm.Owner.(*proxyHdr)
	h.fe.Stats.Loop(h.w.id).ProxyTimeouts.Add(1)
	h.end(false)
}

// readProxy starts the header phase of a connection accepted on a bind
// with accept_proxy (see the top of this file).
func (w *Worker) readProxy(fd int, fe *Frontend, cur *atomic.Pointer[Frontend]) {
	ap := fe.AcceptProxy
	fs := fe.Stats.Loop(w.id)
	peer := peerAddrPort(fd)
	peer = netip.AddrPortFrom(peer.Addr().Unmap(), peer.Port())
	if !ap.trusts(peer.Addr()) {
		fs.ProxyRefused.Add(1)
		plainTransport().close(fd, true)
		if fe.OnClose != nil {
			fe.OnClose(w.id)
		}
		return
	}
	var h proxyproto.Header
	switch st := w.peekProxy(fd, &h); st {
	case peekDone:
		fs.ProxyAccepted.Add(1)
		w.accepted(fd, fe, cur, w.carry(&h, peer))
		return
	case peekFailed:
		fs.ProxyInvalid.Add(1)
		plainTransport().close(fd, true)
		if fe.OnClose != nil {
			fe.OnClose(w.id)
		}
		return
	}
	// Not all there yet: wait for it in epoll, within the deadline.
	ph := popFree(&w.pp.free)
	if ph == nil {
		ph = &proxyHdr{w: w}
		ph.side.Task.Run, ph.side.Task.Owner = runProxyHdrTask, ph
		ph.timer.Run, ph.timer.Owner = runProxyHdrTimer, ph
	}
	ph.fe, ph.cur, ph.peer = fe, cur, peer
	ph.side.adopt(fd, plainTransport())
	ph.side.Connected = true
	w.pp.live.PushFront(&ph.link)
	w.act.Conns.Add(1)
	if err := ph.side.register(w.L); err != nil {
		fs.ProxyInvalid.Add(1)
		ph.end(false)
		return
	}
	timeout := ap.Timeout
	if timeout <= 0 {
		timeout = defaultHandshakeTimeout
	}
	w.L.Arm(&ph.timer, w.L.Now()+int64(timeout))
}

// read runs when the connection is readable: the whole header hands the
// fd on, a refusal or the peer's end closes it, a prefix waits on.
func (ph *proxyHdr) read() {
	if ph.side.FD.Fd < 0 {
		return
	}
	w := ph.w
	fs := ph.fe.Stats.Loop(w.id)
	var h proxyproto.Header
	switch w.peekProxy(ph.side.FD.Fd, &h) {
	case peekDone:
		fs.ProxyAccepted.Add(1)
		fe, cur, peer := ph.fe, ph.cur, ph.peer
		fd, _ := ph.side.detach(w.L)
		ph.end(true)
		w.accepted(fd, fe, cur, w.carry(&h, peer))
	case peekFailed:
		fs.ProxyInvalid.Add(1)
		ph.end(false)
	default:
		// A prefix: the next bytes raise a new edge. A peer that already
		// closed or failed sends none: the header is truncated.
		if ph.side.closedByPeer() {
			fs.ProxyInvalid.Add(1)
			ph.end(false)
			return
		}
		ph.side.FD.Ready &^= evIn
	}
}

// end leaves the header phase: handed on (the fd is someone else's now)
// or closed with a reset, the maxconn slots given back.
func (ph *proxyHdr) end(handedOn bool) {
	w := ph.w
	w.L.Disarm(&ph.timer)
	if !handedOn {
		ph.side.close(w.L, true)
		if ph.fe.OnClose != nil {
			ph.fe.OnClose(w.id)
		}
	}
	w.L.Unqueue(&ph.side.Task)
	w.pp.live.Remove(&ph.link)
	w.act.Conns.Add(-1)
	ph.fe, ph.cur = nil, nil
	if len(w.pp.free) < maxFreeConns {
		w.pp.free = append(w.pp.free, ph)
	}
}

// closeProxyHdrs closes the connections still reading their header (the
// worker's CloseAll).
func (w *Worker) closeProxyHdrs() {
	for ph := w.pp.live.Front(); ph != nil; ph = w.pp.live.Front() {
		ph.end(false)
	}
}

// Outcomes of peekProxy.
const (
	peekMore   = iota // a valid prefix: wait for more
	peekDone          // the header was read and consumed
	peekFailed        // refused, or the socket failed
)

// peekProxy peeks at what fd received, parses it into h and, when it is a
// whole header, consumes exactly the header's bytes.
func (w *Worker) peekProxy(fd int, h *proxyproto.Header) int {
	if w.pp.buf == nil {
		w.pp.buf = make([]byte, proxyproto.MaxHeader)
	}
	b := w.pp.buf
	n, e := peek(fd, b)
	switch {
	case e == unix.EAGAIN:
		return peekMore
	case e != 0 || n == 0:
		return peekFailed // an error, or the end of stream before any byte
	}
	switch err := proxyproto.Parse(b[:n], h); err {
	case nil:
	case proxyproto.ErrIncomplete:
		return peekMore
	default:
		return peekFailed
	}
	// The bytes peeked are there: this read takes exactly them.
	if m, e := recv(fd, b[:h.Len]); e != 0 || m != h.Len {
		return peekFailed
	}
	return peekDone
}

// peek is recv(2) with MSG_PEEK: the bytes stay in the socket.
func peek(fd int, p []byte) (int, unix.Errno) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)),
			unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// carry keeps what h says about the client of a connection from peer and
// returns its index (0 when h names no client: the peer is the client).
func (w *Worker) carry(h *proxyproto.Header, peer netip.AddrPort) uint32 {
	if h.Local {
		return 0
	}
	s := &w.pp
	if len(s.carried) == 0 {
		s.carried = make([]carried, 1, 64)
	}
	i := s.freeC
	if i != 0 {
		s.freeC = s.carried[i].next
	} else {
		s.carried = append(s.carried, carried{})
		i = uint32(len(s.carried) - 1)
	}
	c := &s.carried[i]
	c.src = netip.AddrPortFrom(h.Src.Addr().Unmap(), h.Src.Port())
	c.dst = netip.AddrPortFrom(h.Dst.Addr().Unmap(), h.Dst.Port())
	c.peer = peer
	c.alen = uint8(copy(c.auth[:], h.Authority()))
	c.next = 0
	return i
}

// dropCarried gives entry pp back (0: nothing to give).
func (w *Worker) dropCarried(pp uint32) {
	if pp == 0 {
		return
	}
	s := &w.pp
	s.carried[pp] = carried{next: s.freeC}
	s.freeC = pp
}

// clientAddr is the client of a connection accepted on fd: the one its
// PROXY header named (pp, unmapped), else its peer (as getpeername says).
func (w *Worker) clientAddr(fd int, pp uint32) netip.AddrPort {
	if pp != 0 {
		return w.pp.carried[pp].src
	}
	if fd == w.accFd {
		return w.accPeer // from accept4 (AcceptFrom)
	}
	return peerAddrPort(fd)
}

// authority is the server name the client of a connection asked for: the
// AUTHORITY of its PROXY header (pp), else the SNI it sent to a bind that
// terminates TLS (xp), nil when none. The slice is valid until the next
// carry and must not be written: use it at once.
func (w *Worker) authority(pp uint32, xp transport) []byte {
	if pp != 0 {
		if c := &w.pp.carried[pp]; c.alen > 0 {
			return c.auth[:c.alen]
		}
	}
	if n := xp.serverName(); n != "" {
		return unsafe.Slice(unsafe.StringData(n), len(n)) // read only: no copy per connection
	}
	return nil
}

// localAddr is the address the client of fd connected to: the one its
// PROXY header named, else the socket's own.
func (w *Worker) localAddr(fd int, pp uint32) netip.AddrPort {
	if pp != 0 {
		return w.pp.carried[pp].dst
	}
	var rsa unix.RawSockaddrAny
	l := uint32(unsafe.Sizeof(rsa))
	_, _, e := unix.RawSyscall(unix.SYS_GETSOCKNAME, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), uintptr(unsafe.Pointer(&l)))
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

// sendProxy writes server srv's PROXY header on s, whose connect just
// completed, for a client src that connected to dst (authority: the name
// it asked for, nil when unknown); src invalid: the proxy's own
// connection (a health check), LOCAL. false when the socket did not take
// it whole: the connect failed.
func sendProxy(s *Side, srv *balance.Server, src, dst netip.AddrPort, authority []byte) bool {
	if srv.SendProxy == 0 {
		return true
	}
	var out [320]byte // v2 with an authority: at most 16+36+3+255 bytes
	b := out[:0]
	switch {
	case srv.SendProxy == 1:
		b = proxyproto.AppendV1(b, src, dst)
	case !src.IsValid():
		b = proxyproto.AppendV2Local(b)
	default:
		b = proxyproto.AppendV2(b, src, dst, authority)
	}
	n, e := sendMore(s.FD.Fd, b, false)
	return e == 0 && n == len(b)
}

// proxyAddrs are the addresses a server's PROXY header names for tunnel
// t (attemptOwner).
func (t *Tunnel) proxyAddrs() (src, dst netip.AddrPort, authority []byte) {
	fd := t.cli.FD.Fd
	return t.w.clientAddr(fd, t.pp), t.w.localAddr(fd, t.pp), t.w.authority(t.pp, t.cli.xp)
}

// proxyAddrs are the addresses a server's PROXY header names for the
// request s carries (attemptOwner).
func (s *stream) proxyAddrs() (src, dst netip.AddrPort, authority []byte) {
	cl := s.cl
	return netip.AddrPortFrom(cl.peer.Unmap(), cl.port), s.w.localAddr(s.mux.clientFd(), cl.pp), s.w.authority(cl.pp, s.cli.xp)
}

// clientFd is the HTTP/1.1 connection's socket (streamMux).
func (c *h1Conn) clientFd() int { return c.cli.FD.Fd }

// clientFd is the HTTP/2 connection's socket (streamMux); its streams'
// sides have none.
func (c *h2Conn) clientFd() int { return c.cli.FD.Fd }

// sniFromAuthority routes tunnel t of a tcp frontend with SNI routes on
// the AUTHORITY its PROXY header carried, if any, instead of inspecting a
// ClientHello: true when it did (t.be set, nil for no server).
func (t *Tunnel) sniFromAuthority() bool {
	a := t.w.authority(t.pp, plainTransport()) // a clear connection: only the header names a server
	if len(a) == 0 {
		return false
	}
	t.be = sniBackend(t.fe, a)
	return true
}

// logCarried records the client a PROXY header named, if any, in the
// entry, and the peer that sent it.
func (w *Worker) logCarried(lg *stats.LogEntry, pp uint32) {
	if pp != 0 {
		c := &w.pp.carried[pp]
		lg.Client, lg.Peer = c.src, c.peer
	}
}
