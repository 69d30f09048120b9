package proxy

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// noSpliceIn is a raw socket whose splice into a pipe is refused, as
// splice(2) refuses a socket that cannot splice (EINVAL).
type noSpliceIn struct{ rawSock }

func (noSpliceIn) rcvPipe(int, *Pipe, int) (int, unix.Errno) { return 0, unix.EINVAL }

// TestHTTPSpliceRefusalDoesNotOutliveItsConnection: a client fd that
// refuses splice (EINVAL) turns splice off for the body it sends (the
// mover's noSplice: the body goes through buffers and arrives intact), and
// for nothing else: the next client connection, served by the same
// recycled h1Conn, splices its long Content-Length body again (splice
// on). The bodies' movers are per exchange (endExchange clears them);
// kept, the refusal would make every later connection of that h1Conn
// copy through buffers.
func TestHTTPSpliceRefusalDoesNotOutliveItsConnection(t *testing.T) {
	const size = 256 << 10
	body := bytes.Repeat([]byte("0123456789abcdef"), size/16)
	e := newEnv(t, defaultTuning())
	addr := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		br := bufio.NewReader(c)
		for {
			if _, err := readHead(br); err != nil {
				return
			}
			got, n, err := drain(io.LimitReader(br, size))
			if err != nil || n != size || got != sha256.Sum256(body) {
				return
			}
			io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
		}
	}).Addr
	fe := httpFrontend(t, nil, addr)
	fe.Splice = SpliceOn
	var first *h1Conn
	post := func(refuse bool) uint64 {
		t.Helper()
		c := e.dialHTTP(fe)
		var before uint64
		e.do(func() {
			hc := e.w.h.live.Front()
			if first == nil {
				first = hc
			} else if hc != first {
				t.Fatal("the second connection did not reuse the recycled h1Conn")
			}
			if refuse {
				hc.cli.xp = noSpliceIn{}
			}
			before = e.w.act.SpliceBytes.Load()
		})
		io.WriteString(c, "POST /up HTTP/1.1\r\nHost: a\r\nConnection: close\r\nContent-Length: "+strconv.Itoa(size)+"\r\n\r\n")
		c.Write(body)
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil || resp.StatusCode != 200 {
			t.Fatalf("upload: %v %v", resp, err)
		}
		b, _ := io.ReadAll(resp.Body)
		if !strings.HasPrefix(string(b), "ok") {
			t.Fatalf("upload answered %q", b)
		}
		e.waitIdle()
		var after uint64
		e.do(func() { after = e.w.act.SpliceBytes.Load() })
		return after - before
	}
	if n := post(true); n != 0 {
		t.Fatalf("%d bytes spliced from a client whose splice is refused", n)
	}
	if n := post(false); n == 0 {
		t.Fatal("the next connection's 256 KiB body was not spliced (splice on): the refusal outlived its connection")
	}
}
