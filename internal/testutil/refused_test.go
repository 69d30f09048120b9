package testutil

import (
	"errors"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// TestRefusedAddrStaysRefused: a connect to the address is refused, and
// nothing else can take its port while the test runs, neither a listener
// on that port nor one on port 0 (which is how the tests' own servers and
// client listeners get theirs).
func TestRefusedAddrStaysRefused(t *testing.T) {
	a := RefusedAddr(t)
	if _, err := net.DialTCP("tcp", nil, a); !errors.Is(err, syscall.ECONNREFUSED) {
		t.Fatalf("dial %v: %v, want ECONNREFUSED", a, err)
	}
	if ln, err := net.Listen("tcp", a.String()); err == nil {
		ln.Close()
		t.Fatalf("a listener took the refused port %d", a.Port)
	}
	for i := 0; i < 200; i++ {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		p := ln.Addr().(*net.TCPAddr).Port
		ln.Close()
		if p == a.Port {
			t.Fatalf("listen on port 0 got the refused port %s", strconv.Itoa(p))
		}
	}
}

// TestBlackholeAddrNeverCompletes: a connect neither succeeds nor is
// refused; it times out.
func TestBlackholeAddrNeverCompletes(t *testing.T) {
	a := BlackholeAddr(t)
	c, err := net.DialTimeout("tcp", a.String(), 200*time.Millisecond)
	if err == nil {
		c.Close()
		t.Fatal("connect to the blackhole completed")
	}
	if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
		t.Fatalf("dial %v: %v, want a timeout", a, err)
	}
}
