package listen

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/loop"
)

// FdLimitBackoff is how long a loop stops accepting on a listener after
// accept4 failed for lack of fds or memory (EMFILE, ENFILE, ENOBUFS, ENOMEM):
// retrying at once would spin on a backlog it cannot drain.
const FdLimitBackoff = 100 * time.Millisecond

// BindSpec is one bind of a frontend as the data plane needs it.
type BindSpec struct {
	Address string // IP literal, "*" or "" = 0.0.0.0; IPv6 with optional %zone
	Port    int    // 0 = kernel-chosen (tests), see Listener.Addr
	Backlog int    // listen(2) backlog, > 0 (bind.backlog, set by config.Normalize); the kernel caps it at net.core.somaxconn
	Shards  int    // > 0: that many SO_REUSEPORT sockets, one per loop in turn
	Threads []int  // loop indexes allowed to accept; empty = all
	// Limits are reserved, in order, before each accept4 (limit.go): a
	// frontend's, then the process's. Nil: unlimited.
	Limits []*Limit
	// Conns counts the bind's live connections per loop (conns.go): the
	// load the distribution compares. The caller that ends connections
	// calls Conns.Done; nil: the Listener makes its own (Listener.Conns).
	Conns *LoopConns
}

// AcceptFunc runs on the loop thread that was picked for the connection; it
// owns fd from then on (non-blocking, close-on-exec, TCP_NODELAY on: it
// inherits it from the listening socket; other socket options are the
// callee's business), and the slot the acceptor
// reserved on each of BindSpec.Limits: the connection gives them back when
// it ends (Limit.Release; ln.Release for a fd dropped unserved). The
// connection counts in ln.Conns() for loop l from the hand-off on: when it
// ends (or the fd is dropped unserved), ln.Conns().Done(l.ID()), so that
// the distribution sees the bind's load on each loop (HAProxy's thr_conn).
// peer is the client's address as accept4 returned it (the zero AddrPort
// when the kernel gave none), so that the callee needs no getpeername.
type AcceptFunc func(l *loop.Loop, fd int, peer netip.AddrPort, ln *Listener)

// Listener is one bind: its socket(s) and the acceptors that serve them on
// the loops.
type Listener struct {
	Owner any // set by the caller (e.g. the frontend); read by AcceptFunc

	g       *Group
	fn      AcceptFunc
	addr    netip.AddrPort
	socks   []int
	acc     []*acceptor
	targets []int // loop indexes the distribution may pick (shards == 0)
	sharded bool  // BindSpec.Shards > 0: one SO_REUSEPORT socket per acceptor (Adopt keeps the layout)
	limits  []*Limit
	conns   *LoopConns // the bind's live connections per loop (thr_conn)

	idx       atomic.Uint32 // rotating index for p2c-rr and round-robin (seed 001)
	paused    atomic.Bool
	moved     atomic.Bool // Adopt handed the socket(s) to another Listener: never registered again
	closed    atomic.Bool
	closeOnce sync.Once
}

// acceptor serves one listening socket on one loop. All its fields but the
// immutable ones are owned by that loop.
type acceptor struct {
	ln     *Listener
	l      *loop.Loop
	li     int // loop index in the group
	sock   int
	events uint32
	keep   bool // reuseport shard: connections stay on this loop

	fd         loop.FD
	task       loop.Tasklet
	backoff    loop.Timer
	recheck    loop.Timer // while limited (limit.go)
	registered bool
	backingOff bool
	limitedBy  *Limit // the full Limit this acceptor waits for (limit.go)
	rng        uint64
	sa         unix.RawSockaddrAny // the last accept4's peer address
	syncFn     func(*loop.Loop)
	resumeFn   func(*loop.Loop)

	nextWait *acceptor // in limitedBy's wait list, guarded by its mu
}

// Open creates, binds and listens synchronously, so that EADDRINUSE, EACCES
// or EADDRNOTAVAIL come back here as *os.SyscallError wrapping the errno,
// with every socket already closed. It then registers the socket(s) on their
// loops; for loops that are running it waits until they did, so that a
// returned Listener accepts. Control goroutine only (never a loop thread).
func (g *Group) Open(spec BindSpec, owner any, fn AcceptFunc) (*Listener, error) {
	if fn == nil {
		return nil, fmt.Errorf("listen: nil AcceptFunc: %w", config.ErrInvalid)
	}
	threads, err := g.checkThreads(spec.Threads)
	if err != nil {
		return nil, err
	}
	sa, family, err := sockaddr(spec.Address, spec.Port)
	if err != nil {
		return nil, err
	}
	if spec.Backlog <= 0 {
		// listen(2) would take 0 as a queue of one: a bind that skipped
		// config.Normalize, not a choice.
		return nil, fmt.Errorf("listen: backlog %d: must be > 0 (config.Normalize sets it): %w", spec.Backlog, config.ErrInvalid)
	}
	backlog := spec.Backlog
	ln := &Listener{Owner: owner, g: g, fn: fn, targets: threads, sharded: spec.Shards > 0,
		limits: slices.Clone(spec.Limits), conns: spec.Conns}
	if ln.conns == nil {
		ln.conns = NewLoopConns()
	}
	ln.conns.prealloc(g)
	nsock := max(spec.Shards, 1)
	for i := range nsock {
		fd, err := openSocket(sa, family, backlog, spec.Shards > 0)
		if err != nil {
			ln.closeSockets()
			return nil, err
		}
		ln.socks = append(ln.socks, fd)
		if i == 0 {
			ln.addr, err = boundAddr(fd)
			if err != nil {
				ln.closeSockets()
				return nil, err
			}
			sa = withPort(sa, int(ln.addr.Port())) // port 0: later shards share the chosen one
		}
	}
	ln.addAcceptors()
	if err := ln.start(); err != nil {
		ln.Close()
		return nil, err
	}
	return ln, nil
}

// addAcceptors makes the acceptors of ln.socks on the loops of ln.targets
// (Open and Adopt): with shards, socket i on loop targets[i % n], which
// keeps what it accepts; else the one socket on every target loop, with
// EPOLLEXCLUSIVE when there are several, so that a connection wakes one
// loop instead of all (thundering herd). Adopt relies on an order for
// that flag: see there.
func (ln *Listener) addAcceptors() {
	ts := ln.targets
	if ln.sharded {
		for i, s := range ln.socks {
			ln.addAcceptor(ts[i%len(ts)], s, unix.EPOLLIN, true)
		}
		return
	}
	ev := uint32(unix.EPOLLIN)
	if len(ts) > 1 {
		ev |= unix.EPOLLEXCLUSIVE
	}
	for _, t := range ts {
		ln.addAcceptor(t, ln.socks[0], ev, len(ts) == 1)
	}
}

func (ln *Listener) addAcceptor(li, sock int, events uint32, keep bool) {
	a := &acceptor{ln: ln, l: ln.g.loops[li], li: li, sock: sock, events: events, keep: keep}
	a.fd = loop.FD{Fd: sock, T: &a.task}
	a.task = loop.Tasklet{Run: a.run, Owner: a}
	a.backoff = loop.Timer{Run: a.endBackoff, Owner: a}
	a.recheck = loop.Timer{Run: a.onRecheck, Owner: a}
	a.rng = uint64(time.Now().UnixNano()) ^ uint64(li+1)*0x9E3779B97F4A7C15 ^ uint64(sock)<<32
	if a.rng == 0 {
		a.rng = 1
	}
	a.syncFn = a.sync
	a.resumeFn = a.resume
	ln.acc = append(ln.acc, a)
}

// start registers every acceptor on its loop and waits for the loops that run.
func (ln *Listener) start() error {
	var wg sync.WaitGroup
	errs := make([]error, len(ln.acc))
	for i, a := range ln.acc {
		running := a.l.Running()
		if running {
			wg.Add(1)
		}
		ok := a.l.Exec(func(l *loop.Loop) {
			err := a.syncErr(l)
			if running { // else nobody waits, nor reads errs
				errs[i] = err
				wg.Done()
			}
		})
		if !ok && running {
			wg.Done()
		}
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Conns is the bind's count of live connections per loop (BindSpec.Conns,
// or the Listener's own): each connection its AcceptFunc took on loop l
// counts until Conns().Done(l.ID()). Any goroutine.
func (ln *Listener) Conns() *LoopConns { return ln.conns }

// Addr is the address the listener is bound to (the kernel's port if
// BindSpec.Port was 0). Any goroutine.
func (ln *Listener) Addr() netip.AddrPort { return ln.addr }

// Close stops accepting on every loop, then closes the socket(s). It returns
// when no loop uses them any more, so the port can be bound again at once.
// Connections already accepted, including those still in accept rings, live
// on. Idempotent. Control goroutine only: it waits for the loops (a loop
// that has not started yet delays it until it starts).
func (ln *Listener) Close() {
	ln.closeOnce.Do(func() {
		ln.closed.Store(true)
		ln.onLoops(func(a *acceptor, l *loop.Loop) {
			a.sync(l)
			l.Disarm(&a.backoff)
			l.Disarm(&a.recheck)
		})
		ln.closeSockets()
	})
}

// onLoops runs fn for each acceptor on its loop and waits for all of them;
// a loop that stopped polls nothing any more and is skipped. Control
// goroutine only.
func (ln *Listener) onLoops(fn func(a *acceptor, l *loop.Loop)) {
	var wg sync.WaitGroup
	for _, a := range ln.acc {
		wg.Add(1)
		if !a.l.Exec(func(l *loop.Loop) {
			fn(a, l)
			wg.Done()
		}) {
			wg.Done()
		}
	}
	wg.Wait()
}

// Pause stops accepting until Resume: each loop unregisters the socket
// at its next round; connections stay in the kernel backlog. Resume undoes
// it. Both are idempotent and callable from any goroutine, loop threads
// included (they do not wait).
func (ln *Listener) Pause() {
	if ln.paused.CompareAndSwap(false, true) {
		ln.resync()
	}
}

// Resume restarts accepting after Pause.
func (ln *Listener) Resume() {
	if ln.paused.CompareAndSwap(true, false) {
		ln.resync()
	}
}

// Paused reports whether Pause is in force.
func (ln *Listener) Paused() bool { return ln.paused.Load() }

func (ln *Listener) resync() {
	for _, a := range ln.acc {
		a.l.Exec(a.syncFn)
	}
}

func (ln *Listener) closeSockets() {
	for _, s := range ln.socks {
		closeFd(s)
	}
	ln.socks = nil
}

// handOff gives fd to the AcceptFunc on loop l (l's thread): from here
// on the connection counts in the bind's load on l (HAProxy increments
// thr_conn[tid] before its accept callback too).
func (ln *Listener) handOff(l *loop.Loop, fd int, peer netip.AddrPort) {
	l.Activity().Accepted.Add(1)
	ln.conns.add(l.ID(), 1)
	ln.fn(l, fd, peer, ln)
}

// next advances the rotating index (seed 001) and returns its old value, in
// 0..n-1.
func (ln *Listener) next(n int) int {
	t1 := ln.idx.Load()
	for {
		t2 := t1 + 1
		if t2 >= uint32(n) {
			t2 = 0
		}
		if ln.idx.CompareAndSwap(t1, t2) {
			break
		}
		t1 = ln.idx.Load()
	}
	if t1 >= uint32(n) {
		t1 %= uint32(n)
	}
	return int(t1)
}

// sync makes the registration match the wanted state: registered unless the
// listener is closed, moved (Adopt) or paused or this acceptor backs off or
// is limited. Loop thread.
func (a *acceptor) sync(l *loop.Loop) { _ = a.syncErr(l) }

func (a *acceptor) syncErr(l *loop.Loop) error {
	want := !a.ln.closed.Load() && !a.ln.moved.Load() && !a.ln.paused.Load() && !a.backingOff && a.limitedBy == nil
	switch {
	case want && !a.registered:
		if err := l.RegisterEvents(&a.fd, a.events); err != nil {
			return fmt.Errorf("listen %s on loop %d: %w", a.ln.addr, a.li, err)
		}
		a.registered = true
		// Level-triggered: connections already in the backlog are reported
		// by the next epoll_wait, nothing to wake here.
	case !want && a.registered:
		l.Unregister(&a.fd)
		a.registered = false
		a.fd.Ready = 0
		l.Unqueue(&a.task)
	}
	return nil
}

func (a *acceptor) endBackoff(*loop.Timer) {
	a.backingOff = false
	a.sync(a.l)
}

// run is the acceptor's tasklet (class Urgent, woken by EPOLLIN): accept up
// to maxaccept connections and dispatch each. The socket is level-triggered,
// so connections left in the backlog after maxaccept are reported again by
// the next poll; nothing to remember here. Each accept4 is preceded by the
// reservation of its slots (limit.go), so the batch is clipped to what the
// limits leave: a full Limit ends it and limits the acceptor.
func (a *acceptor) run(*loop.Tasklet) {
	ln := a.ln
	l := a.l
	maxaccept := int(ln.g.maxaccept.Load())
	for range maxaccept {
		if ln.paused.Load() || ln.closed.Load() {
			a.sync(l)
			return
		}
		if m := ln.reserve(); m != nil {
			a.limit(m)
			return
		}
		fd, errno := a.accept4()
		if errno != 0 {
			ln.unreserve() // nothing accepted: the slots go back
		}
		switch errno {
		case 0:
			ln.accepted()
			a.dispatch(fd, sockaddrAddrPort(&a.sa))
		case unix.EAGAIN:
			a.fd.Ready = 0
			return
		case unix.EINTR, unix.ECONNABORTED, unix.EPROTO, unix.EPERM:
			// The connection died in the backlog or a firewall refused it:
			// the next one may be fine.
		case unix.EMFILE, unix.ENFILE, unix.ENOBUFS, unix.ENOMEM:
			// Out of fds or memory: stop accepting here for a while instead
			// of spinning on a backlog we cannot drain.
			l.Activity().AcceptPauses.Add(1)
			a.backingOff = true
			a.sync(l)
			l.Arm(&a.backoff, l.Now()+int64(FdLimitBackoff))
			return
		default:
			// EBADF, EINVAL (socket shut down): nothing to accept any more
			// on this loop until Close.
			a.backingOff = true
			a.sync(l)
			return
		}
	}
}

// dispatch hands a freshly accepted fd to the loop chosen by the
// distribution: directly when that is this loop, else through the target's
// accept ring (and its eventfd); a full ring makes this loop keep it.
func (a *acceptor) dispatch(fd int, peer netip.AddrPort) {
	ln, g := a.ln, a.ln.g
	t := a.li
	if !a.keep {
		t = a.pick()
	}
	if t != a.li {
		if g.rings[t].push(fd, peer, ln) {
			tl := g.loops[t]
			tl.Activity().AccqPushed.Add(1)
			tl.Notify()
			return
		}
		g.loops[t].Activity().AccqFull.Add(1)
	}
	ln.handOff(a.l, fd, peer)
}

// pick chooses the target loop index for one connection. Allocation-free.
func (a *acceptor) pick() int {
	ln, g := a.ln, a.ln.g
	n := len(ln.targets)
	if n < 2 {
		return a.li
	}
	switch g.alg.Load() {
	case distLocal:
		return a.li
	case distRoundRobin:
		return ln.targets[ln.next(n)]
	case distLeastConn:
		best, bl := a.li, g.load(ln, a.li) // ties stay local: no ring hop
		for _, t := range ln.targets {
			if q := g.load(ln, t); q < bl {
				best, bl = t, q
			}
		}
		return best
	case distP2C:
		// Pure power of two choices, as before seed 001: two distinct
		// random loops, the lower load wins, ties go to the first.
		i1 := int(a.rand() % uint64(n))
		i2 := i1 + 1 + int(a.rand()%uint64(n-1))
		if i2 >= n {
			i2 -= n
		}
		t1, t2 := ln.targets[i1], ln.targets[i2]
		if g.load(ln, t2) < g.load(ln, t1) {
			return t2
		}
		return t1
	default: // p2c-rr, seed 001
		// First candidate from the rotating index, so every loop is
		// consulted in turn; second a random other one; the lower load wins,
		// ties go to the first. Round robin gives fairness on bursts of
		// short connections, the load comparison on long ones.
		i1 := ln.next(n)
		i2 := i1 + 1 + int(a.rand()%uint64(n-1))
		if i2 >= n {
			i2 -= n
		}
		t1, t2 := ln.targets[i1], ln.targets[i2]
		if g.load(ln, t2) < g.load(ln, t1) {
			return t2
		}
		return t1
	}
}

// rand is xorshift64*, private to the acceptor (its loop thread).
func (a *acceptor) rand() uint64 {
	x := a.rng
	x ^= x >> 12
	x ^= x << 25
	x ^= x >> 27
	a.rng = x
	return x * 2685821657736338717
}

// accept4 accepts on the acceptor's socket with the client's address
// into a.sa: the connection needs it (X-Forwarded-For, logs, rules), and
// taking it here spares a getpeername per connection (nginx and HAProxy
// take it from accept4 too). a.sa is the acceptor's: no allocation.
func (a *acceptor) accept4() (int, unix.Errno) {
	a.sa.Addr.Family = 0
	l := uint32(unsafe.Sizeof(a.sa))
	r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(a.sock), uintptr(unsafe.Pointer(&a.sa)),
		uintptr(unsafe.Pointer(&l)), unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), 0
}

// sockaddrAddrPort is the address in sa (AF_INET or AF_INET6), the zero
// AddrPort for any other family.
func sockaddrAddrPort(sa *unix.RawSockaddrAny) netip.AddrPort {
	switch sa.Addr.Family {
	case unix.AF_INET:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom4(p.Addr), p.Port>>8|p.Port<<8)
	case unix.AF_INET6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(sa))
		return netip.AddrPortFrom(netip.AddrFrom16(p.Addr), p.Port>>8|p.Port<<8)
	}
	return netip.AddrPort{}
}

func accept4(sock int) (int, unix.Errno) {
	// Raw: accept4 on a non-blocking socket never blocks, and passing no
	// address avoids building a Sockaddr per connection.
	r, _, e := unix.RawSyscall6(unix.SYS_ACCEPT4, uintptr(sock), 0, 0,
		unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0, 0)
	if e != 0 {
		return -1, e
	}
	return int(r), 0
}

func closeFd(fd int) {
	// EINTR on close: the fd is released anyway on Linux; never retry.
	_ = unix.Close(fd)
}

func openSocket(sa unix.Sockaddr, family, backlog int, reuseport bool) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return -1, os.NewSyscallError("socket", err)
	}
	fail := func(op string, err error) (int, error) {
		closeFd(fd)
		return -1, os.NewSyscallError(op, err)
	}
	// SO_REUSEADDR: rebind at once after Close despite TIME_WAIT connections.
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		return fail("setsockopt", err)
	}
	if reuseport {
		if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEPORT, 1); err != nil {
			return fail("setsockopt", err)
		}
	}
	// TCP_NODELAY on the listening socket: Linux copies it into every
	// socket accepted from it (the child is a clone of the listener), so
	// each connection starts with Nagle off without a setsockopt of its
	// own (one syscall less per connection; core/proxy relies on it).
	if err := unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1); err != nil {
		return fail("setsockopt", err)
	}
	if err := unix.Bind(fd, sa); err != nil {
		return fail("bind", err)
	}
	if err := unix.Listen(fd, backlog); err != nil {
		return fail("listen", err)
	}
	return fd, nil
}

// sockaddr parses a bind address: "*" or "" is 0.0.0.0, otherwise an IP
// literal (IPv6 with an optional %zone, by interface name or index).
func sockaddr(address string, port int) (unix.Sockaddr, int, error) {
	if port < 0 || port > 65535 {
		return nil, 0, fmt.Errorf("listen: port %d: %w", port, config.ErrInvalid)
	}
	if address == "" || address == "*" {
		return &unix.SockaddrInet4{Port: port}, unix.AF_INET, nil
	}
	ip, err := netip.ParseAddr(address)
	if err != nil {
		return nil, 0, fmt.Errorf("listen: address %q is not an IP literal: %w", address, config.ErrInvalid)
	}
	if ip.Is4() {
		return &unix.SockaddrInet4{Port: port, Addr: ip.As4()}, unix.AF_INET, nil
	}
	sa := &unix.SockaddrInet6{Port: port, Addr: ip.As16()}
	if z := ip.Zone(); z != "" {
		if n, err := strconv.Atoi(z); err == nil {
			sa.ZoneId = uint32(n)
		} else if ifi, err := net.InterfaceByName(z); err == nil {
			sa.ZoneId = uint32(ifi.Index)
		} else {
			return nil, 0, fmt.Errorf("listen: address %q: zone: %w", address, err)
		}
	}
	return sa, unix.AF_INET6, nil
}

func withPort(sa unix.Sockaddr, port int) unix.Sockaddr {
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		c := *s
		c.Port = port
		return &c
	case *unix.SockaddrInet6:
		c := *s
		c.Port = port
		return &c
	}
	return sa
}

func boundAddr(fd int) (netip.AddrPort, error) {
	sa, err := unix.Getsockname(fd)
	if err != nil {
		return netip.AddrPort{}, os.NewSyscallError("getsockname", err)
	}
	switch s := sa.(type) {
	case *unix.SockaddrInet4:
		return netip.AddrPortFrom(netip.AddrFrom4(s.Addr), uint16(s.Port)), nil
	case *unix.SockaddrInet6:
		return netip.AddrPortFrom(netip.AddrFrom16(s.Addr), uint16(s.Port)), nil
	}
	return netip.AddrPort{}, fmt.Errorf("listen: unexpected socket address %T", sa)
}
