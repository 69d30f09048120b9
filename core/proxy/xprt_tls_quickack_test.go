package proxy

import (
	"crypto/tls"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestTLSServerAcksClientFinishedAtOnce: in a TLS 1.3 handshake (and a
// resumed TLS 1.2 one) the client's Finished is the last flight and the
// server has nothing to send after it, so the kernel delays its ACK (40
// ms); a client that leaves Nagle on holds its first request until that
// ACK (issue 23, item 4: +44 ms on the first response of a Python ssl
// client). When the server's handshake ends the Finished must be acked:
// the client's socket has nothing unacknowledged left, well before the
// shortest delayed ACK (40 ms) could have fired.
func TestTLSServerAcksClientFinishedAtOnce(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	srv, cli := tlsPair(t, tls.VersionTLS13)
	for i := range 5 {
		done := make(chan error, 1)
		var est *tlsSock // closed after the check: a reset would ack all
		c := tlsAccept(e, h, 10*time.Second, srv, nil, func(x *tlsSock, err error) {
			if err == nil {
				est = x
			}
			done <- err
		})
		c.SetNoDelay(false)
		c.SetDeadline(time.Now().Add(10 * time.Second))
		cerr := make(chan error, 1)
		go func() { cerr <- tls.Client(c, cli).Handshake() }()
		if err := <-cerr; err != nil {
			t.Fatal(err)
		}
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		fd := rawFD(t, c)
		var unacked uint32
		for end := time.Now().Add(20 * time.Millisecond); ; {
			ti, err := unix.GetsockoptTCPInfo(fd, unix.IPPROTO_TCP, unix.TCP_INFO)
			if err != nil {
				t.Fatal(err)
			}
			if unacked = ti.Unacked; unacked == 0 || time.Now().After(end) {
				break
			}
		}
		unix.Close(fd)
		c.Close()
		e.do(func() { rawSock{}.close(est.a.fd, true) })
		if unacked != 0 {
			t.Fatalf("connection %d: the client's Finished is not acked 20 ms after the server's handshake ended (%d segments unacked)", i, unacked)
		}
	}
}
