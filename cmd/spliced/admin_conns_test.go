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
	// set puts c in a state: "fresh" (nothing read yet), "slow" (reading
	// its request), "keepalive" (anonymous, idle after a request), "known"
	// (idle, a request was admitted on it), "busy" (serving an admitted
	// request), "draining" (an admitted request's handler returned, the
	// connection is still active).
	set := func(c *adminConn, state string) {
		switch state {
		case "slow":
			connState(c, http.StateActive)
		case "keepalive":
			connState(c, http.StateActive)
			connState(c, http.StateIdle)
		case "known":
			connState(c, http.StateActive)
			c.admitted()
			connState(c, http.StateIdle)
		case "busy":
			connState(c, http.StateActive)
			c.admitted()
		case "draining": // its handler returned, the server drains a body
			connState(c, http.StateActive)
			c.admitted()()
		}
	}
	for _, step := range []struct {
		states []string // of the three open connections, oldest first
		victim int      // which one a new connection evicts
	}{
		{[]string{"fresh", "keepalive", "busy"}, 1}, // an idle anonymous keep-alive before an older fresh one
		{[]string{"known", "slow", "fresh"}, 1},     // the oldest anonymous one...
		{[]string{"known", "fresh", "slow"}, 1},     // ...fresh or slow alike
		{[]string{"busy", "known", "busy"}, 1},      // a known caller's idle keep-alive last
		{[]string{"busy", "draining", "busy"}, 1},   // a known caller whose handler returned
		{[]string{"draining", "slow", "busy"}, 1},   // after the anonymous ones
	} {
		closeAllIn(tab) // the previous step's
		var cs []*adminConn
		for _, st := range step.states {
			dial()
			c := next()
			set(c, st)
			cs = append(cs, c)
		}
		dial()
		newest := next()
		for i, c := range cs {
			if open(c) == (i == step.victim) {
				t.Fatalf("states %v: connection %d (%s) open %v, want only %d evicted", step.states, i, step.states[i], open(c), step.victim)
			}
		}
		if !open(newest) {
			t.Fatalf("states %v: the new connection is not open", step.states)
		}
	}
	// All three busy: the next connection waits for a slot.
	closeAllIn(tab)
	var busy *adminConn
	for range 3 {
		dial()
		busy = next()
		set(busy, "busy")
	}
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

// closeAllIn closes the server side of every connection of tab.
func closeAllIn(tab *connTable) {
	tab.mu.Lock()
	var cs []*adminConn
	for c := range tab.conns {
		cs = append(cs, c)
	}
	tab.mu.Unlock()
	for _, c := range cs {
		c.Close()
	}
}
