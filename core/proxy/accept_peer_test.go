package proxy

import (
	"io"
	"net/netip"
	"strings"
	"testing"
	"time"
)

// TestAcceptFromTakesThePeerOfAccept4: a connection started by AcceptFrom
// takes the client's address the listener got from accept4 (here one no
// socket has: 192.0.2.7) instead of asking the socket (getpeername: one
// syscall less per connection), for X-Forwarded-For; Accept alone still
// asks the socket (127.0.0.1).
func TestAcceptFromTakesThePeerOfAccept4(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	given := netip.MustParseAddrPort("192.0.2.7:40000")
	for _, tc := range []struct {
		name  string
		start func(fd int)
		want  string
	}{
		{"AcceptFrom", func(fd int) { e.w.AcceptFrom(fd, given, fe, nil) }, "192.0.2.7"},
		{"Accept", func(fd int) { e.w.Accept(fd, fe, nil) }, "127.0.0.1"},
	} {
		c := e.connect(tc.start)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := c.Write([]byte("GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		if b, err := io.ReadAll(c); err != nil || !strings.HasSuffix(string(b), "hi") {
			t.Fatalf("%s: response %q, %v", tc.name, b, err)
		}
		c.Close()
		if got := o.received(); !strings.Contains(got, "X-Forwarded-For: "+tc.want+"\r\n") {
			t.Fatalf("%s: want X-Forwarded-For %s in %q", tc.name, tc.want, got)
		}
		o.mu.Lock()
		o.got.Reset()
		o.mu.Unlock()
	}
	e.waitIdle()
}
