package testutil

import (
	"net"
	"strconv"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// RefusedAddr is a 127.0.0.1 address whose connects are refused (RST,
// ECONNREFUSED) until the test ends: a socket bound to it, never listening,
// holds the port. Listening on a free port and closing it does not do
// this: the next bind to port 0 or ephemeral port of a connect, in this
// test or in another process, may take the freed port, and a server that
// should refuse then accepts (the harness's own client listener took it in
// TestConnectFailureRetriesAnotherServer). The bound socket keeps the port
// out of both allocations, and, without SO_REUSEADDR, out of an explicit
// bind.
func RefusedAddr(t testing.TB) *net.TCPAddr {
	t.Helper()
	_, a := boundLoopback(t)
	return a
}

// BlackholeAddr is a 127.0.0.1 address whose connects never complete
// until the test ends: a listener with a backlog of 0 whose accept queue
// is filled and never accepted, so the kernel drops further SYNs.
func BlackholeAddr(t testing.TB) *net.TCPAddr {
	t.Helper()
	fd, a := boundLoopback(t)
	if err := unix.Listen(fd, 0); err != nil {
		t.Fatal(err)
	}
	// Fill the queue: connects that complete at once while there is room.
	for i := 0; i < 8; i++ {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(a.Port), 100*time.Millisecond)
		if err != nil {
			return a
		}
		t.Cleanup(func() { c.Close() })
	}
	t.Fatal("accept queue of a backlog-0 listener never filled")
	return nil
}

// boundLoopback is a TCP socket bound to a free 127.0.0.1 port, closed
// when the test ends.
func boundLoopback(t testing.TB) (int, *net.TCPAddr) {
	t.Helper()
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(fd) })
	if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := unix.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fd, &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1), Port: sa.(*unix.SockaddrInet4).Port}
}

// Delivered waits, up to 10 s, until the peer's kernel acknowledged every
// byte written to c (SIOCOUTQ is 0), or closed the connection (a peer that
// resets with bytes unread never acknowledges them): from then on those
// bytes are in the proxy's receive queue (or gone with its connection),
// ahead of anything the test sends next. Any goroutine (it reports instead
// of failing a test).
func Delivered(c *net.TCPConn) bool {
	rc, err := c.SyscallConn()
	if err != nil {
		return false
	}
	end := time.Now().Add(10 * time.Second)
	for pause := time.Millisecond; ; pause = min(2*pause, 10*time.Millisecond) {
		var outq int
		var info *unix.TCPInfo
		var e1, e2 error
		if err := rc.Control(func(fd uintptr) {
			outq, e1 = unix.IoctlGetInt(int(fd), unix.SIOCOUTQ)
			info, e2 = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO)
		}); err != nil || e1 != nil || e2 != nil {
			return false
		}
		if outq == 0 || info.State != unix.BPF_TCP_ESTABLISHED {
			return true
		}
		if time.Now().After(end) {
			return false
		}
		time.Sleep(pause)
	}
}
