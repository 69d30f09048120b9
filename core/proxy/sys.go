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

// send writes p with MSG_NOSIGNAL: a peer that went away must give EPIPE, not
// a SIGPIPE delivered to the loop thread.
func send(fd int, p []byte) (int, unix.Errno) {
	for {
		n, _, e := unix.RawSyscall6(unix.SYS_SENDTO, uintptr(fd), uintptr(unsafe.Pointer(&p[0])), uintptr(len(p)),
			unix.MSG_NOSIGNAL|unix.MSG_DONTWAIT, 0, 0)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(n), 0
	}
}

// splice moves up to n bytes from rfd to wfd (one of them a pipe) without
// copying through user space. SPLICE_F_MOVE asks the kernel to move pages
// rather than copy them; SPLICE_F_NONBLOCK makes the pipe end non-blocking
// whatever the pipe's own flags (the socket end is non-blocking already).
func splice(rfd, wfd, n int) (int, unix.Errno) {
	for {
		r, _, e := unix.RawSyscall6(unix.SYS_SPLICE, uintptr(rfd), 0, uintptr(wfd), 0, uintptr(n),
			unix.SPLICE_F_MOVE|unix.SPLICE_F_NONBLOCK)
		if e == unix.EINTR {
			continue
		}
		if e != 0 {
			return 0, e
		}
		return int(r), 0
	}
}

// shutWrite sends FIN after the last byte. ENOTCONN (the peer already reset)
// is not an error for the caller: the direction is finished either way.
func shutWrite(fd int) unix.Errno {
	_, _, e := unix.Syscall(unix.SYS_SHUTDOWN, uintptr(fd), unix.SHUT_WR, 0)
	if e == unix.ENOTCONN {
		return 0
	}
	return e
}

// setNoDelay disables Nagle: a proxy forwards what it got immediately, the
// endpoints decide about coalescing. Errors are ignored on purpose: a socket
// that is not TCP (tests use unix socket pairs) simply keeps its behaviour.
func setNoDelay(fd int) {
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
}

// sockError reads and clears SO_ERROR, the outcome of a non-blocking connect.
func sockError(fd int) unix.Errno {
	v, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err != nil {
		if e, ok := err.(unix.Errno); ok {
			return e
		}
		return unix.EINVAL
	}
	return unix.Errno(v)
}
