package testutil

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"slices"
	"sync/atomic"
	"testing"
	"time"
)

// fakeT records a Fatalf instead of failing the test, so that the
// failure path of Eventually can be checked; like testing's Fatalf, it
// ends the goroutine that calls it.
type fakeT struct {
	testing.TB
	failed string
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// eventually runs Eventually on a goroutine of its own, as a test would,
// and reports whether it failed.
func eventually(d time.Duration, cond func() bool, msg ...any) (failed bool) {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(f, d, cond, msg...)
	}()
	<-done
	return f.failed != ""
}

func TestEventuallyReturnsOnceTheConditionHolds(t *testing.T) {
	var n atomic.Int32
	if eventually(5*time.Second, func() bool { return n.Add(1) >= 3 }) {
		t.Fatal("failed although the condition held at the third poll")
	}
	if n.Load() != 3 {
		t.Fatalf("condition polled %d times, want 3", n.Load())
	}
}

func TestEventuallyFailsAtTheDeadline(t *testing.T) {
	start := time.Now()
	if !eventually(30*time.Millisecond, func() bool { return false }, "never") {
		t.Fatal("did not fail")
	}
	if d := time.Since(start); d < 30*time.Millisecond {
		t.Fatalf("failed after %v, before the deadline", d)
	}
}

// progressing runs EventuallyProgressing as eventually runs Eventually
// and returns its failure message ("": none).
func progressing(stall, limit time.Duration, cond func() bool, progress func() int64) string {
	f := &fakeT{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		EventuallyProgressing(f, stall, limit, cond, progress, "the work")
	}()
	<-done
	return f.failed
}

func TestEventuallyProgressingWaitsWhileWorkMoves(t *testing.T) {
	// Slow work: the condition holds after 150 ms, well past stall (20
	// ms), but the count moves every 5 ms or so.
	start := time.Now()
	var n atomic.Int64
	slow := func() int64 { return int64(time.Since(start) / (5 * time.Millisecond)) }
	if msg := progressing(20*time.Millisecond, 5*time.Second, func() bool { n.Store(slow()); return n.Load() >= 30 }, n.Load); msg != "" {
		t.Fatalf("failed slow work that kept moving: %s", msg)
	}
}

func TestEventuallyProgressingFailsWhenWorkStops(t *testing.T) {
	start := time.Now()
	stuck := func() int64 { return min(int64(time.Since(start)/time.Millisecond), 10) } // moves 10 ms, then stops
	msg := progressing(30*time.Millisecond, 5*time.Second, func() bool { return false }, stuck)
	if msg == "" || time.Since(start) < 40*time.Millisecond || time.Since(start) > 4*time.Second {
		t.Fatalf("failed after %v with %q, want a failure for no progress after 40 ms or more", time.Since(start), msg)
	}
	if want := "no progress for 30ms (stuck at 10"; len(msg) < len(want) || msg[:len(want)] != want {
		t.Fatalf("message %q, want it to start with %q", msg, want)
	}
	// Moving all the time but never there: limit.
	var n atomic.Int64
	if msg := progressing(time.Second, 30*time.Millisecond, func() bool { return false }, func() int64 { return n.Add(1) }); msg == "" {
		t.Fatal("did not fail at limit")
	}
}

func TestDescribeSaysWhatWasAwaited(t *testing.T) {
	for _, tc := range []struct {
		msg  []any
		want string
	}{
		{nil, "the condition"},
		{[]any{"a 100% literal"}, "a 100% literal"},
		{[]any{"%d conns", 3}, "3 conns"},
		{[]any{func() string { return "late state" }}, "late state"},
		{[]any{42}, "42"},
	} {
		if got := describe(tc.msg); got != tc.want {
			t.Errorf("describe(%v) = %q, want %q", tc.msg, got, tc.want)
		}
	}
}

func TestFDsOpenedSinceListsOnlyNewFDs(t *testing.T) {
	before := OpenFDs(t)
	if len(FDsOpenedSince(t, before)) != 0 {
		t.Skip("fds of other goroutines come and go") // cannot be judged
	}
	f, err := os.Open(os.DevNull)
	if err != nil {
		t.Fatal(err)
	}
	got := FDsOpenedSince(t, before)
	f.Close()
	if !slices.ContainsFunc(got, func(s string) bool { return len(s) > 0 && s[len(s)-len(os.DevNull):] == os.DevNull }) {
		t.Fatalf("opened %s, FDsOpenedSince = %v", os.DevNull, got)
	}
}

func TestOriginServesCountsAndClosesAtCleanup(t *testing.T) {
	var o *Origin
	var conn net.Conn
	t.Run("serve", func(t *testing.T) {
		o = ServeOrigin(t, func(c *net.TCPConn) { io.Copy(c, c) })
		var err error
		if conn, err = net.Dial("tcp", o.Addr.String()); err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte("ping"))
		buf := make([]byte, 4)
		if _, err := io.ReadFull(conn, buf); err != nil || string(buf) != "ping" {
			t.Fatalf("echo %q %v", buf, err)
		}
		if o.Accepted() != 1 || o.Port() != o.Addr.Port {
			t.Fatalf("accepted %d, port %d", o.Accepted(), o.Port())
		}
	})
	// the subtest's cleanup closed the origin's side of the connection
	defer conn.Close()
	conn.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := conn.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("read after cleanup: %d %v, want EOF", n, err)
	}
}

func TestCertsVerifyAlongTheirChain(t *testing.T) {
	ca := NewCert(t, CertSpec{Names: []string{"test CA"}, CA: true})
	leaf := NewCert(t, CertSpec{Names: []string{"a.example", "127.0.0.1"}, Parent: ca})
	if _, err := leaf.X509.Verify(x509.VerifyOptions{DNSName: "a.example", Roots: leaf.Pool()}); err != nil {
		t.Fatalf("leaf signed by the CA does not verify: %v", err)
	}
	if _, err := leaf.X509.Verify(x509.VerifyOptions{DNSName: "b.example", Roots: leaf.Pool()}); err == nil {
		t.Fatal("a name not in the SANs verified")
	}
	if got := len(leaf.TLS().Certificate); got != 1 {
		t.Fatalf("served chain has %d certificates, want the leaf only (the root is not sent)", got)
	}
	rsaSelf := NewCert(t, CertSpec{RSABits: 2048})
	if _, err := rsaSelf.X509.Verify(x509.VerifyOptions{DNSName: "localhost", Roots: rsaSelf.Pool()}); err != nil {
		t.Fatalf("self-signed RSA does not verify against itself: %v", err)
	}
	if _, err := tls.X509KeyPair([]byte(leaf.ChainPEM), []byte(leaf.KeyPEM)); err != nil {
		t.Fatalf("PEM forms do not load: %v", err)
	}
}
