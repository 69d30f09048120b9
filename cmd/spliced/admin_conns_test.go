package main

import (
	"net"
	"net/http"
	"testing"
	"time"
)

// The eviction order of connTable, and that a connection serving an
// admitted request is never evicted: a new one waits for a slot then.
func TestConnTableEvictsAnonymousFirstAndNeverBusy(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tab := newConnTable(ln, 3, time.Hour)
	defer tab.Close()
	accepted := make(chan *adminConn, 8)
	go func() {
		for {
			c, err := tab.Accept()
			if err != nil {
				close(accepted)
				return
			}
			accepted <- c.(*adminConn)
		}
	}()
	var clients []net.Conn
	defer func() {
		for _, c := range clients {
			c.Close()
		}
	}()
	dial := func() {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		clients = append(clients, c)
	}
	next := func() *adminConn {
		t.Helper()
		select {
		case c := <-accepted:
			return c
		case <-time.After(5 * time.Second):
			t.Fatal("no connection accepted")
			return nil
		}
	}
	open := func(c *adminConn) bool {
		tab.mu.Lock()
		defer tab.mu.Unlock()
		_, ok := tab.conns[c]
		return ok
	}
	dial()
	known := next() // admitted, then idle: evicted last
	known.admitted()
	connState(known, http.StateIdle)
	dial()
	busy := next() // serving an admitted request: never evicted
	connState(busy, http.StateActive)
	busy.admitted()
	dial()
	slow := next() // anonymous, sending its request
	connState(slow, http.StateActive)

	dial()
	fresh := next() // evicts the anonymous one
	if open(slow) || !open(known) || !open(busy) {
		t.Fatalf("first eviction: slow %v known %v busy %v, want only slow closed", open(slow), open(known), open(busy))
	}
	dial()
	anon := next() // evicts fresh: anonymous and idle (nothing read yet)
	if open(fresh) || !open(known) {
		t.Fatalf("second eviction: fresh %v known %v", open(fresh), open(known))
	}
	connState(anon, http.StateActive)
	anon.admitted() // now busy too
	dial()
	next() // only the idle known connection may go
	if open(known) || !open(busy) || !open(anon) {
		t.Fatalf("third eviction: known %v busy %v anon %v, want only known closed", open(known), open(busy), open(anon))
	}
	// All three busy: the next connection waits for a slot.
	tab.mu.Lock()
	for c := range tab.conns {
		c.known, c.busy, c.idle = true, true, false
	}
	tab.mu.Unlock()
	dial()
	select {
	case c := <-accepted:
		t.Fatalf("a connection was accepted (%p) while every slot served an admitted request", c)
	case <-time.After(200 * time.Millisecond):
	}
	connState(busy, http.StateIdle) // its request ended: now evictable
	c := next()
	if open(busy) || !open(c) {
		t.Fatalf("after the busy one went idle: busy open %v", open(busy))
	}
}
