// Package testutil holds what the module's tests share, as
// net/http/httptest does for net/http: waiting on a condition with a
// deadline (no sleep as synchronisation), listing the process's open file
// descriptors, a TCP origin server, a free port, addresses that refuse or
// never answer a connect, whether bytes written reached the peer's kernel,
// and a buffer safe for concurrent use.
//
// It is imported by _test.go files only; nothing in it runs in spliced.
package testutil

import (
	"bytes"
	"fmt"
	"net"
	"os"
	"sort"
	"sync"
	"testing"
	"time"
)

// Eventually polls cond until it holds and fails t (Fatal) when deadline,
// a duration from now, passes first. msg says what is awaited, for the
// failure message: one value is printed as is (a func() string is called
// then, to show the state at the deadline); a format string followed by
// its arguments is formatted.
//
// The first polls are 1 ms apart, then the interval doubles up to 10 ms:
// a condition that holds at once costs nothing, one that takes seconds
// does not keep a CPU of the shared test machine busy.
func Eventually(t testing.TB, deadline time.Duration, cond func() bool, msg ...any) {
	t.Helper()
	end := time.Now().Add(deadline)
	pause := time.Millisecond
	for !cond() {
		if time.Now().After(end) {
			t.Fatalf("timed out after %v waiting for %s", deadline, describe(msg))
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// EventuallyProgressing is Eventually for a condition that work gets to
// at the pace the machine allows (a thousand requests served one after
// another, a stream of messages): it fails t when progress, a count of
// the work done, has not moved for stall, not at a fixed time. A loaded
// machine is slow, and a fixed deadline on slow work fails there; what
// is wrong is work that stops. limit bounds the whole wait all the same.
func EventuallyProgressing(t testing.TB, stall, limit time.Duration, cond func() bool, progress func() int64, msg ...any) {
	t.Helper()
	start := time.Now()
	last, moved := progress(), start
	pause := time.Millisecond
	for !cond() {
		now := time.Now()
		if p := progress(); p != last {
			last, moved = p, now
		}
		if now.Sub(moved) > stall {
			t.Fatalf("no progress for %v (stuck at %d after %v) waiting for %s", stall, last, now.Sub(start).Round(time.Millisecond), describe(msg))
		}
		if now.Sub(start) > limit {
			t.Fatalf("timed out after %v (progress at %d) waiting for %s", limit, last, describe(msg))
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

func describe(msg []any) string {
	switch {
	case len(msg) == 0:
		return "the condition"
	case len(msg) == 1:
		if f, ok := msg[0].(func() string); ok {
			return f()
		}
		return fmt.Sprint(msg[0])
	}
	if format, ok := msg[0].(string); ok {
		return fmt.Sprintf(format, msg[1:]...)
	}
	return fmt.Sprint(msg...)
}

// OpenFDs lists the open file descriptors of this process: fd number to
// what it refers to (a path, "socket:[inode]", "pipe:[inode]"...).
// FDsOpenedSince compares a list with the fds open now.
func OpenFDs(t testing.TB) map[string]string {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Fatal(err)
	}
	fds := make(map[string]string, len(ents))
	for _, e := range ents {
		if target, err := os.Readlink("/proc/self/fd/" + e.Name()); err == nil {
			fds[e.Name()] = target
		}
	}
	return fds
}

// FDsOpenedSince lists the fds open now that were not open (to the same
// object) in before, an OpenFDs list, as "fd -> target", sorted. Not a
// count: fds of earlier tests may close while this one runs (Go's runtime
// pools the splice pipes of io.Copy between TCP conns and the GC closes
// them later), which would hide a leak or report a false one.
func FDsOpenedSince(t testing.TB, before map[string]string) []string {
	t.Helper()
	var out []string
	for fd, target := range OpenFDs(t) {
		if before[fd] != target {
			out = append(out, fd+" -> "+target)
		}
	}
	sort.Strings(out)
	return out
}

// Origin is a TCP server on 127.0.0.1 that runs a handler on a goroutine
// of its own for every connection, until the test's cleanup closes the
// listener and every connection it accepted.
type Origin struct {
	// Addr is the address it listens on.
	Addr *net.TCPAddr

	mu       sync.Mutex
	conns    []net.Conn
	accepted int64
}

// ServeOrigin starts an Origin on a free port.
func ServeOrigin(t testing.TB, serve func(c *net.TCPConn)) *Origin {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	o := &Origin{Addr: ln.Addr().(*net.TCPAddr)}
	t.Cleanup(func() {
		ln.Close()
		o.mu.Lock()
		for _, c := range o.conns {
			c.Close()
		}
		o.mu.Unlock()
	})
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			o.mu.Lock()
			o.conns = append(o.conns, c)
			o.accepted++
			o.mu.Unlock()
			go serve(c.(*net.TCPConn))
		}
	}()
	return o
}

// Port is the port Origin listens on.
func (o *Origin) Port() int { return o.Addr.Port }

// Accepted is the number of connections accepted so far.
func (o *Origin) Accepted() int64 {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.accepted
}

// SyncBuffer is a bytes.Buffer that a process's output and the test may
// use at once (Write from the copying goroutine, String from the test).
type SyncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *SyncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *SyncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
