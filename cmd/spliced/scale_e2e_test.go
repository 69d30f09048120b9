package main

// End-to-end behaviour with many servers configured: runtime server changes
// must leave the live connections of other servers alone. How fast they
// apply is measured by `make bench` (row apply, bench/applybench), never
// asserted here.

import (
	"fmt"
	"net"
	"strconv"
	"testing"
)

// TestTCPServerChangesAmong10000ServersKeepOtherConnections: a backend of
// 10 000 servers (two real origins, the rest placeholders in maint); state,
// weight, create and delete of other servers, and a drain of one origin,
// each applied while connections to both origins are open: every connection
// still echoes afterwards, and the drained origin gets no new connection.
func TestTCPServerChangesAmong10000ServersKeepOtherConnections(t *testing.T) {
	in := startSpliced(t, "")
	a, b := newTCPOrigin(t, "a"), newTCPOrigin(t, "b")
	servers := make([]map[string]any, 0, 10000)
	servers = append(servers, a.server("a"), b.server("b"))
	for i := 2; i < 10000; i++ {
		// Placeholders: distinct ports, never connected to (maint).
		servers = append(servers, map[string]any{"name": "p" + strconv.Itoa(i),
			"address": "127.0.0.1", "port": 10000 + i, "admin_state": "maint"})
	}
	port := setupTCP(t, in, servers...)

	type liveConn struct {
		c    net.Conn
		name string
	}
	var live []liveConn
	conns := map[string]int{}
	for i := range 6 {
		c, name := greet(t, port)
		if name != "a" && name != "b" {
			t.Fatalf("connection %d reached %q, want a or b", i, name)
		}
		conns[name]++
		echoes(t, c, fmt.Sprintf("before %d", i))
		live = append(live, liveConn{c, name})
	}
	if conns["a"] == 0 || conns["b"] == 0 {
		t.Fatalf("connections per origin %v, want both origins used", conns)
	}
	srv := "/api/v1/backends/web/servers/"
	in.MustDo(200, "PATCH", srv+"p500", map[string]any{"admin_state": "drain"})
	in.MustDo(200, "PATCH", srv+"p500", map[string]any{"admin_state": "maint"})
	in.MustDo(200, "PATCH", srv+"p9000", map[string]any{"weight": 7})
	in.MustDo(201, "POST", srv[:len(srv)-1], map[string]any{"name": "extra", "address": "127.0.0.1",
		"port": 9999, "admin_state": "maint"})
	in.MustDo(204, "DELETE", srv+"p7000", nil)
	in.MustDo(204, "DELETE", srv+"extra", nil)
	in.MustDo(200, "PATCH", srv+"b", map[string]any{"admin_state": "drain"})

	for i, l := range live {
		echoes(t, l.c, fmt.Sprintf("after %d (%s)", i, l.name))
	}
	// b drains: new connections all go to a.
	for i := range 4 {
		_, name := greet(t, port)
		if name != "a" {
			t.Fatalf("new connection %d after draining b reached %q, want a", i, name)
		}
	}
}
