package proxy

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strconv"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPBodyLeavesInFullSegments: while bytes of a Content-Length body
// are still to come, the relay sends with MSG_MORE (HAProxy's rule while
// to_forward > 0), so the kernel builds whole segments instead of pushing
// one short segment per write (the head, each pipe flush). Short segments
// on loopback (MSS 64 KiB) starved the client's receive-window autotuning
// of RTT samples: the window stayed small, the proxy queued the response
// unsent and the client's CPU ended up transmitting it (http 1 MiB at
// ~0.7x the req/s of splice off in make bench).
//
// The origin hands 40 000 body bytes to the kernel in one write (one skb:
// they reach the proxy together), then waits. 4 KiB pipes make the old
// behaviour visible at any speed: one short segment per 4 KiB flush. The
// relay must deliver the 40 000 bytes in one segment (two at most) and
// still deliver them while the origin waits (push when the source runs
// dry), then the rest when it comes.
func TestHTTPBodyLeavesInFullSegments(t *testing.T) {
	const size, first = 200_000, 40_000
	body := make([]byte, size)
	for i := range body {
		body[i] = byte(i * 7)
	}
	head := "HTTP/1.1 200 OK\r\nContent-Length: " + strconv.Itoa(size) + "\r\n\r\n"
	more := make(chan struct{}, 1)
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		c.SetWriteBuffer(4 << 20) // the first write goes out whole, at once
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			if _, err := c.Write(append([]byte(head), body[:first]...)); err != nil {
				return
			}
			<-more
			if _, err := c.Write(body[first:]); err != nil {
				return
			}
		}
	}).Addr
	for _, mode := range []SpliceMode{SpliceOn, SpliceAuto, SpliceOff} {
		t.Run(modeName(mode), func(t *testing.T) {
			tu := defaultTuning()
			tu.Pipesize = 4096
			e := newEnv(t, tu)
			fe := httpFrontend(t, nil, addr)
			fe.Splice = mode
			c := e.dialHTTP(fe)
			segs0 := dataSegsIn(t, c)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if _, err := readHead(br); err != nil {
				t.Fatal(err)
			}
			// The origin waits: these bytes must come without it.
			got := make([]byte, first)
			if _, err := io.ReadFull(br, got); err != nil {
				t.Fatalf("the %d bytes the origin sent before pausing did not arrive: %v", first, err)
			}
			segs := dataSegsIn(t, c) - segs0
			more <- struct{}{}
			rest := make([]byte, size-first)
			if _, err := io.ReadFull(br, rest); err != nil {
				t.Fatal(err)
			}
			if !bytes.Equal(append(got, rest...), body) {
				t.Fatal("body corrupted")
			}
			if segs > 2 {
				t.Fatalf("head and %d body bytes took %d segments, want 1 (2 at most): one short segment per write", first, segs)
			}
		})
	}
}

// dataSegsIn is the count of data segments c received (TCP_INFO).
func dataSegsIn(t *testing.T, c *net.TCPConn) uint32 {
	t.Helper()
	rc, err := c.SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var ti *unix.TCPInfo
	var gerr error
	if err := rc.Control(func(fd uintptr) { ti, gerr = unix.GetsockoptTCPInfo(int(fd), unix.IPPROTO_TCP, unix.TCP_INFO) }); err != nil {
		t.Fatal(err)
	}
	if gerr != nil {
		t.Fatal(gerr)
	}
	return ti.Data_segs_in
}
