package proxy

import (
	"bufio"
	"io"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPBodySplicedToItsEnd: once a Content-Length body moves through
// the pipe, its last bytes do too, as HAProxy splices to the end of
// to_forward. Before, a body switched back to buffers for its last
// spliceMin (64 KiB): on make bench's http 1m row 48-64 KiB of every MiB
// were read and written through user space, 3-4 reads and sends more per
// response. The server sends the head first and the body only once the
// client has it, so that no body byte comes with the head (bytes read with
// the head are copied, rightly): every body byte is then spliced.
func TestHTTPBodySplicedToItsEnd(t *testing.T) {
	for _, size := range []int{spliceMin + 10<<10, 1<<20 + 5} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			headSeen := make(chan struct{})
			addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
				defer c.Close()
				if _, err := readHead(bufio.NewReader(c)); err != nil {
					return
				}
				io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n")
				select {
				case <-headSeen:
				case <-time.After(10 * time.Second):
					return
				}
				sendPattern(c, 3, int64(size))
				io.Copy(io.Discard, c) // until the proxy closes
			}).Addr
			fe := httpFrontend(t, nil, addr)
			fe.Splice = SpliceOn
			c := e.dialHTTP(fe)
			if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(c)
			if _, err := readHead(br); err != nil {
				t.Fatal(err)
			}
			close(headSeen)
			if _, n, err := drain(io.LimitReader(br, int64(size))); err != nil || n != int64(size) {
				t.Fatalf("body: %d bytes, %v", n, err)
			}
			c.Close()
			e.waitIdle()
			if got := e.l.Activity().SpliceBytes.Load(); got != uint64(size) {
				t.Errorf("%d of the body's %d bytes went through the pipe, want all", got, size)
			}
		})
	}
}
