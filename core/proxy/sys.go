package proxy

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Thin syscall wrappers for the forwarding hot path. They return the raw
// errno (0 = success) instead of an error interface so that the caller can
// switch on it without boxing, and they retry EINTR themselves: a signal
// landing on a loop thread (the Go runtime preempts with SIGURG) must never
// look like an I/O event to the state machine.
//
// read, sendto and splice go through RawSyscall: every fd here is
// non-blocking (splice with SPLICE_F_NONBLOCK), so the call never sleeps and
// telling the Go scheduler about it (entersyscall/exitsyscall, P hand-off by
// sysmon) is pure overhead. The loop's epoll_wait, which does sleep, is raw
// as well when GOMAXPROCS leaves a spare P (see core/loop's epollWait).

// recv reads into p. n == 0 with errno 0 is end of stream.
func recv(fd int, p []byte) (int, unix.Errno) {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)))
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// sendMore writes p with MSG_NOSIGNAL: a peer that went away must give
// EPIPE, not a SIGPIPE delivered to the loop thread. With more, MSG_MORE:
// more bytes follow at once, so TCP keeps a partial last segment to fill
// it (see pushFrames).
func sendMore(fd int, p []byte, more bool) (int, unix.Errno) {
	fl := uintptr(unix.MSG_NOSIGNAL | unix.MSG_DONTWAIT)
	if more {
		fl |= unix.MSG_MORE
	}
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)),
			fl, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// spliceMore moves up to n bytes from rfd to wfd (one of them a pipe)
// without copying through user space. SPLICE_F_MOVE asks the kernel to
// move pages rather than copy them; SPLICE_F_NONBLOCK makes the pipe end
// non-blocking whatever the pipe's own flags (the socket end is
// non-blocking already). With more, SPLICE_F_MORE: for a socket
// destination it is MSG_MORE (sendMore).
func spliceMore(rfd, wfd, n int, more bool) (int, unix.Errno) {
	fl := uintptr(unix.SPLICE_F_MOVE | unix.SPLICE_F_NONBLOCK)
	if more {
		fl |= unix.SPLICE_F_MORE
	}
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(rfd), 0, uintptr(wfd), 0, uintptr(n), fl)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), 0
	}
}

// The per-connection calls below are raw too: on a non-blocking socket
// none of them sleeps, and through Syscall each one marks the loop's P "in
// a syscall". sysmon, which sees a locked loop goroutine as a 10 ms-long
// runner (it never passes through schedule()), retakes a P it catches
// there, then polls again 20 us later: with ~8 such calls per tcp
// connection it caught the loop often enough to wake ~950 times a second
// in make bench's close row (perf record -e raw_syscalls:sys_enter).

// shutWrite sends FIN after the last byte. ENOTCONN (the peer already reset)
// is not an error for the caller: the direction is finished either way.
func shutWrite(fd int) unix.Errno {
	_, _, e := unix.RawSyscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
	if e == unix.ENOTCONN {
		return 0
	}
	return e
}

// closeFd closes fd. EINTR is not retried: Linux releases the fd anyway.
// It is the one close(2) of the data plane's connection and pipe fds: a
// Side closes through its transport (Side.close), a pipe through
// Pipe.close, and both end here.
func closeFd(fd int) {
	_, _, _ = unix.RawSyscall(unix.SYS_CLOSE, uintptr(fd), 0, 0)
}

// connectTo starts a non-blocking connect to sa (IPv4 or IPv6). The raw
// address is built on the stack, so sa is only read: loops may share it.
func connectTo(fd int, sa unix.Sockaddr) unix.Errno {
	var rsa unix.RawSockaddrAny
	var l uintptr
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		p := (*unix.RawSockaddrInet4)(unsafe.Pointer(&rsa))
		p.Family = unix.AF_INET
		p.Port = ntohs(uint16(a.Port))
		p.Addr = a.Addr
		l = unix.SizeofSockaddrInet4
	case *unix.SockaddrInet6:
		p := (*unix.RawSockaddrInet6)(unsafe.Pointer(&rsa))
		p.Family = unix.AF_INET6
		p.Port = ntohs(uint16(a.Port))
		p.Scope_id = a.ZoneId
		p.Addr = a.Addr
		l = unix.SizeofSockaddrInet6
	default:
		return unix.EAFNOSUPPORT
	}
	// EINTR is returned as is: the connect goes on asynchronously (POSIX),
	// the caller treats it like EINPROGRESS.
	_, _, e := unix.RawSyscall(unix.SYS_CONNECT, uintptr(fd), uintptr(unsafe.Pointer(&rsa)), l)
	return e
}

// setNoDelay disables Nagle: a proxy forwards what it got immediately, the
// endpoints decide about coalescing. Errors are ignored on purpose: a socket
// that is not TCP (tests use unix socket pairs) simply keeps its behaviour.
func setNoDelay(fd int) {
	one := int32(1)
	_, _, _ = unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_NODELAY,
		uintptr(unsafe.Pointer(&one)), 4, 0)
}

// quickAck sends at once the ACK the kernel holds back for fd (a delayed
// ACK), if any: TCP_QUICKACK set while an ACK is scheduled pushes it
// (tcp(7); the flag itself does not last). Errors are ignored as in
// setNoDelay.
func quickAck(fd int) {
	one := int32(1)
	_, _, _ = unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.IPPROTO_TCP, unix.TCP_QUICKACK,
		uintptr(unsafe.Pointer(&one)), 4, 0)
}

// pushFrames sends at once what MSG_MORE left in fd's send queue: setting
// TCP_NODELAY (already set) pushes the pending frames (tcp(7)). Errors are
// ignored as in setNoDelay.
func pushFrames(fd int) { setNoDelay(fd) }

// sockError reads and clears SO_ERROR, the outcome of a non-blocking connect.
func sockError(fd int) unix.Errno {
	var v int32
	l := uint32(4)
	_, _, e := unix.RawSyscall6(unix.SYS_GETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_ERROR,
		uintptr(unsafe.Pointer(&v)), uintptr(unsafe.Pointer(&l)), 0)
	if e != 0 {
		return e
	}
	return unix.Errno(v)
}
