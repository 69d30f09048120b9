package proxy

import (
	"errors"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestSideCloseEndsWithFINOrRST: Side.close, the one close of a
// connection fd, ends it with a FIN, or with an RST on an abort, and
// leaves the side closed (fd -1, not registered, no readiness).
func TestSideCloseEndsWithFINOrRST(t *testing.T) {
	for _, tc := range []struct {
		name    string
		reset   bool
		wantErr error // what the peer reads after the bytes sent
	}{
		{"fin", false, io.EOF},
		{"rst", true, syscall.ECONNRESET},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			var s Side
			s.Task.Run = func(*loop.Tasklet) {}
			c := e.connect(func(fd int) {
				if err := s.open(e.l, fd, rawSock{}); err != nil {
					t.Error(err)
				}
			})
			e.do(func() {
				if n, err := s.send([]byte("bye"), false); err != 0 || n != 3 {
					t.Errorf("send = %d, %v", n, err)
				}
			})
			if !tc.reset {
				buf := make([]byte, 3)
				if _, err := io.ReadFull(c, buf); err != nil {
					t.Fatal(err)
				}
			}
			var reg bool
			e.do(func() {
				s.close(e.l, tc.reset)
				reg = s.reg
			})
			if s.FD.Fd != -1 || reg || s.FD.Ready != 0 || s.Connected {
				t.Fatalf("after close: fd %d reg %v ready %#x connected %v", s.FD.Fd, reg, s.FD.Ready, s.Connected)
			}
			c.SetReadDeadline(time.Now().Add(10 * time.Second))
			_, err := io.ReadAll(c)
			if err == nil {
				err = io.EOF
			}
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("peer read %v, want %v", err, tc.wantErr)
			}
		})
	}
}

// TestSideDetachKeepsFDOpen: detach (the 101 upgrade's handoff) gives the
// fd up without closing it.
func TestSideDetachKeepsFDOpen(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var s Side
	s.Task.Run = func(*loop.Tasklet) {}
	var fd int
	c := e.connect(func(f int) {
		if err := s.open(e.l, f, rawSock{}); err != nil {
			t.Error(err)
		}
		fd, _ = s.detach(e.l)
	})
	if s.FD.Fd != -1 || s.reg {
		t.Fatalf("after detach: fd %d reg %v", s.FD.Fd, s.reg)
	}
	if _, err := unix.Write(fd, []byte("x")); err != nil {
		t.Fatalf("detached fd: %v", err)
	}
	buf := make([]byte, 1)
	if _, err := io.ReadFull(c, buf); err != nil {
		t.Fatal(err)
	}
	var t2 Side
	t2.adopt(fd, rawSock{})
	e.do(func() { t2.close(e.l, false) })
}

// TestRawTransportDoesNotAllocate: the raw transport is a zero-size value,
// so adopting a side over it and calling through the interface allocates
// nothing.
func TestRawTransportDoesNotAllocate(t *testing.T) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fds[1])
	var s Side
	p := make([]byte, 16)
	allocs := testing.AllocsPerRun(100, func() {
		s.adopt(fds[0], rawSock{})
		s.FD.Ready = evIn
		if s.canRecv() {
			s.recv(p)
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per adopt+recv, want 0", allocs)
	}
	unix.Close(fds[0])
}

// BenchmarkSideRecv compares a receive through the transport interface
// with the direct syscall wrapper (both on an empty socket: EAGAIN), to
// show what the indirect call costs next to the syscall.
func BenchmarkSideRecv(b *testing.B) {
	fds, err := unix.Socketpair(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		b.Fatal(err)
	}
	defer unix.Close(fds[0])
	defer unix.Close(fds[1])
	p := make([]byte, 16)
	b.Run("direct", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			recv(fds[0], p)
		}
	})
	b.Run("transport", func(b *testing.B) {
		var s Side
		s.adopt(fds[0], rawSock{})
		for i := 0; i < b.N; i++ {
			s.recv(p)
		}
	})
}

// wantWriteToRead is a transport in the middle of a handshake: its next
// receive needs the socket writable (as a TLS read may).
type wantWriteToRead struct{ rawSock }

func (wantWriteToRead) rcvEvents() uint32 { return evOut | evErr | evHup }

// TestSideReadinessFollowsTheTransport: canRecv/canSend and the bits a
// drained receive or a blocked send clear are the transport's, so a
// transport that must write to read is woken by EPOLLOUT, and an EAGAIN
// clears what it waited for (and never the error bits).
func TestSideReadinessFollowsTheTransport(t *testing.T) {
	const all = evIn | evOut | evRdHup | evErr | evHup
	for _, tc := range []struct {
		name                       string
		xp                         transport
		ready                      uint32
		canRecv, canSend           bool
		afterDrained, afterBlocked uint32 // Ready after drained, after blocked (from all)
	}{
		{"raw/in", rawSock{}, evIn, true, false, evOut | evErr | evHup, evIn | evRdHup | evErr | evHup},
		{"raw/out", rawSock{}, evOut, false, true, evOut | evErr | evHup, evIn | evRdHup | evErr | evHup},
		{"raw/rdhup", rawSock{}, evRdHup, true, false, evOut | evErr | evHup, evIn | evRdHup | evErr | evHup},
		{"write-to-read/in", wantWriteToRead{}, evIn, false, false, evIn | evRdHup | evErr | evHup, evIn | evRdHup | evErr | evHup},
		{"write-to-read/out", wantWriteToRead{}, evOut, true, true, evIn | evRdHup | evErr | evHup, evIn | evRdHup | evErr | evHup},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var s Side
			s.adopt(-1, tc.xp)
			s.FD.Ready = tc.ready
			if s.canRecv() != tc.canRecv || s.canSend() != tc.canSend {
				t.Errorf("ready %#x: canRecv %v canSend %v, want %v %v", tc.ready, s.canRecv(), s.canSend(), tc.canRecv, tc.canSend)
			}
			s.FD.Ready = all
			s.drained()
			if s.FD.Ready != tc.afterDrained {
				t.Errorf("after drained: %#x, want %#x", s.FD.Ready, tc.afterDrained)
			}
			s.FD.Ready = all
			s.blocked()
			if s.FD.Ready != tc.afterBlocked {
				t.Errorf("after blocked: %#x, want %#x", s.FD.Ready, tc.afterBlocked)
			}
		})
	}
}

// TestSideConnectResult: Side.connect opens a connection to a server, and
// connectResult reads its outcome from the readiness the loop reported:
// connected to a listening port, ECONNREFUSED from a closed one.
func TestSideConnectResult(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	open := ln.Addr().(*net.TCPAddr)
	closed := testutil.RefusedAddr(t)
	t.Cleanup(func() { ln.Close() })
	for _, tc := range []struct {
		name string
		addr *net.TCPAddr
		want unix.Errno
	}{
		{"listening", open, 0},
		{"closed port", closed, unix.ECONNREFUSED},
	} {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			srv := frontend(t, SpliceOff, tc.addr).Backend.B.Servers[0]
			var s Side
			var sa balance.SockaddrBuf
			s.Task.Run = func(*loop.Tasklet) {}
			e.do(func() {
				if stage, e := s.connect(e.l, srv, &sa); stage != connOK {
					t.Errorf("connect: stage %d, %v", stage, e)
				}
			})
			var pending bool
			var got unix.Errno
			testutil.Eventually(t, 10*time.Second, func() bool {
				e.do(func() { pending, got = s.connectResult() })
				return !pending
			}, "the connect's outcome")
			e.do(func() { s.close(e.l, true) })
			if got != tc.want {
				t.Errorf("connectResult = %v, want %v", got, tc.want)
			}
		})
	}
}
