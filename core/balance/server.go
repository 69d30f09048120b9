package balance

import (
	"crypto/tls"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// MaxWeight is the largest server weight (config allows 0..256).
const MaxWeight = 256

// The balancing-relevant state of a server lives in one 32-bit word so that
// a picker decides "usable, and with which weight" with a single atomic load:
//
//	bits  0..15  weight (0..MaxWeight)
//	bits 16..17  admin state (ready, drain, maint)
//	bit  20      down (observed health)
//	bit  21      retired (removed from the configuration, see Backend.Retire)
//
// A server is usable when the admin state is ready, it is neither down nor
// retired, and its weight is above zero: that is exactly (st &^ weightMask)
// == 0 with a non-zero weight.
const (
	stWeightMask = 0xffff
	stAdminShift = 16
	stAdminMask  = 3 << stAdminShift
	stDown       = 1 << 20
	stRetired    = 1 << 21
)

const (
	adminReady uint32 = 0
	adminDrain uint32 = 1
	adminMaint uint32 = 2
)

func usableState(st uint32) bool {
	return st&^stWeightMask == 0 && st&stWeightMask != 0
}

// Server is the runtime object of one configured server. It is shared by all
// loops (read-mostly, atomics only) and carried over from one Backend
// generation to the next as long as its name, address:port and tls stay the
// same.
type Server struct {
	// The fields a pick reads come first: leastconn touches Cur, st and
	// maxconn of every usable server, so they share the object's first
	// cache line (objects of this size class never straddle it there).

	// Cur counts live connections; the proxy maintains it through Acquire
	// and Release.
	Cur     atomic.Int64
	maxconn atomic.Int64 // 0 = unlimited
	st      atomic.Uint32
	// peak is the most slots held at once (conn_max): beside Cur, whose
	// line Acquire writes anyway; written only when it rises.
	peak atomic.Int64

	Name string
	// Host is the configured address: an IP literal or a host name.
	Host string
	// Addr is the resolved address and port.
	Addr netip.AddrPort
	// Sockaddr is prebuilt for connect(2). It is a template: copy it with
	// SockaddrInto before passing it to unix.Connect (see the package doc).
	Sockaddr unix.Sockaddr
	// Counters are the server's per-loop traffic counters (bytes, aborts,
	// timings). The engine sets them once, before the server is published,
	// when they are nil; a server carried over to a new generation keeps
	// them. Nil in tests that build backends directly.
	Counters *stats.Counters
	// TLS, when the server has a tls section (TLSSpec), is the client
	// configuration the proxy speaks TLS to it with (core/tlsconf.Client).
	// Like Counters, the engine sets it once before the server is
	// published, when it is nil: a server whose tls changes is a new
	// Server (Build), so it never changes under a connection.
	TLS *tls.Config
	// TLSSpec is the server's tls section as configured (nil: plain TCP).
	TLSSpec *config.ServerTLS
	// SendProxy is the PROXY protocol version sent at the start of each
	// connection to the server (send_proxy: 1 or 2; 0 none). Part of the
	// server's identity as tls is: a change makes a new Server, so that no
	// pooled connection opened under the other setting is reused.
	SendProxy uint8
	// H2 says the proxy speaks HTTP/2 to the server (config proto "h2"):
	// h2c with prior knowledge on a plain connection, h2 over TLS (TLS
	// then offers only "h2" by ALPN and refuses a server that does not
	// select it: core/tlsconf.Client). False: HTTP/1.1. Part of the
	// server's identity as tls is: a change makes a new Server, so no
	// pooled connection of the other version is reused.
	H2 bool

	// addrCfg is the configured address the last Build that kept this
	// server was given, addrLit that it is an IP address (Host stays the
	// first one: a server reused under another spelling of its address
	// keeps it). Written and read by Build only, which the engine runs
	// one at a time.
	addrCfg string
	addrLit bool

	lastChange atomic.Int64 // unix ns of the last up/down transition
	total      atomic.Uint64
	connFails  atomic.Uint64

	// changes is the change counter of the backend lineage this server
	// belongs to (shared with Backend.changes); every setter that changes
	// st bumps it so pickers rebuild their cached views.
	changes *atomic.Uint64
	// q is the wait queue of the lineage (nil for servers made outside
	// Build); own and listed are guarded by q.mu: own holds the waiters
	// for this server only, listed says the server is in q's committed
	// server list and may take waiters.
	q      *Queue
	own    ilist.List[Waiter]
	listed bool
}

// SendProxyVersion maps send_proxy to Server.SendProxy.
func SendProxyVersion(v string) uint8 {
	switch v {
	case config.ProxyV1:
		return 1
	case config.ProxyV2:
		return 2
	}
	return 0
}

// newServer makes a server that is not yet published (no atomics needed, but
// they are used for uniformity).
func newServer(name, host string, ap netip.AddrPort, sa unix.Sockaddr, changes *atomic.Uint64, q *Queue) *Server {
	s := &Server{Name: name, Host: host, Addr: ap, Sockaddr: sa, changes: changes, q: q}
	s.lastChange.Store(time.Now().UnixNano())
	return s
}

// Weight is the current weight (0..MaxWeight).
func (s *Server) Weight() int { return int(s.st.Load() & stWeightMask) }

// Maxconn is the connection limit (0 = unlimited).
func (s *Server) Maxconn() int { return int(s.maxconn.Load()) }

// AdminState is config.AdminReady, AdminDrain or AdminMaint.
func (s *Server) AdminState() string {
	switch (s.st.Load() & stAdminMask) >> stAdminShift {
	case adminDrain:
		return config.AdminDrain
	case adminMaint:
		return config.AdminMaint
	default:
		return config.AdminReady
	}
}

// Up reports the observed health: false after the health check took the
// server down.
func (s *Server) Up() bool { return s.st.Load()&stDown == 0 }

// Retired reports whether the server was removed from the configuration;
// a retired server is never picked again, its live connections finish.
func (s *Server) Retired() bool { return s.st.Load()&stRetired != 0 }

// LastChange is the time of the last up/down transition (or creation).
func (s *Server) LastChange() time.Time { return time.Unix(0, s.lastChange.Load()) }

// Usable reports whether the server may receive new connections: admin
// state ready, observed up, not retired, weight above zero.
func (s *Server) Usable() bool { return usableState(s.st.Load()) }

// Full reports whether the server is at its maxconn.
func (s *Server) Full() bool {
	m := s.maxconn.Load()
	return m > 0 && s.Cur.Load() >= m
}

// Acquire takes a connection slot: when maxconn is 0 or Cur is below it, Cur
// is incremented and true returned; otherwise false (the caller queues or
// tries another server). Safe from any goroutine; never exceeds maxconn.
func (s *Server) Acquire() bool {
	m := s.maxconn.Load()
	if m <= 0 {
		s.acquired(s.Cur.Add(1))
		return true
	}
	for {
		c := s.Cur.Load()
		if c >= m {
			return false
		}
		if s.Cur.CompareAndSwap(c, c+1) {
			s.acquired(c + 1)
			return true
		}
	}
}

// acquired counts a slot taken, cur being the server's count with it: the
// server's and its backend's peaks (HAProxy's smax of srv and be).
func (s *Server) acquired(cur int64) {
	s.total.Add(1)
	if cur > s.peak.Load() {
		stats.RaiseMax(&s.peak, cur)
	}
	if q := s.q; q != nil {
		n := q.cur.Add(1)
		if n > q.peak.Load() {
			stats.RaiseMax(&q.peak, n)
		}
	}
}

// Peak is the most slots held at once since the server was made (it is
// carried over with the server from one generation to the next).
func (s *Server) Peak() int64 { return s.peak.Load() }

// Release gives back a slot taken by Acquire. When connections wait for
// a slot of this server's backend, the oldest one that s may serve gets it
// at once (Queue); with nobody waiting this costs one atomic load more.
func (s *Server) Release() {
	q := s.q
	if q != nil && q.n.Load() > 0 && q.handoff(s) {
		return
	}
	s.Cur.Add(-1)
	if q != nil {
		q.cur.Add(-1)
	}
	// A Wait that began before the decrement may have missed the slot:
	// see Queue.Wait.
	if q != nil && q.n.Load() > 0 {
		q.released(s)
	}
}

// ConnectFailed counts a failed connect attempt to this server.
func (s *Server) ConnectFailed() { s.connFails.Add(1) }

// ServerStats is a snapshot of a server's counters and state.
type ServerStats struct {
	Cur        int64     `json:"cur"`
	Total      uint64    `json:"total"`
	ConnFails  uint64    `json:"connect_failures"`
	Weight     int       `json:"weight"`
	Maxconn    int       `json:"maxconn"`
	AdminState string    `json:"admin_state"`
	Up         bool      `json:"up"`
	LastChange time.Time `json:"last_change"`
}

// Stats returns a snapshot of the counters (any goroutine).
func (s *Server) Stats() ServerStats {
	return ServerStats{
		Cur:        s.Cur.Load(),
		Total:      s.total.Load(),
		ConnFails:  s.connFails.Load(),
		Weight:     s.Weight(),
		Maxconn:    s.Maxconn(),
		AdminState: s.AdminState(),
		Up:         s.Up(),
		LastChange: s.LastChange(),
	}
}

// update applies fn to the state word with a CAS loop and bumps the change
// counter when the word changed. It returns whether it changed.
func (s *Server) update(fn func(st uint32) uint32) bool {
	for {
		old := s.st.Load()
		nst := fn(old)
		if nst == old {
			return false
		}
		if s.st.CompareAndSwap(old, nst) {
			if s.changes != nil {
				s.changes.Add(1)
			}
			if s.q != nil {
				// The queue follows usability: a server that comes up
				// takes waiters, one that goes away hands its own on.
				switch was, is := usableState(old), usableState(nst); {
				case !was && is:
					s.q.grab(s)
				case was && !is:
					s.q.lost(s)
				}
			}
			return true
		}
	}
}

// SetWeight sets the weight, clamped to 0..MaxWeight.
func (s *Server) SetWeight(w int) {
	w = min(max(w, 0), MaxWeight)
	s.update(func(st uint32) uint32 { return st&^stWeightMask | uint32(w) })
}

// SetMaxconn sets the connection limit (0 = unlimited). Connections above a
// lowered limit live on; Acquire refuses new ones until Cur drops below. A
// raised limit lets the server take queued connections at once.
func (s *Server) SetMaxconn(n int) {
	s.maxconn.Store(int64(max(n, 0)))
	if s.q != nil {
		s.q.grab(s)
	}
}

// SetAdminState sets ready, drain or maint. Drain and maint both stop new
// connections; live connections are never cut by this package.
func (s *Server) SetAdminState(state string) error {
	var a uint32
	switch state {
	case config.AdminReady:
		a = adminReady
	case config.AdminDrain:
		a = adminDrain
	case config.AdminMaint:
		a = adminMaint
	default:
		return fmt.Errorf("server %q: admin state %q: %w", s.Name, state, config.ErrInvalid)
	}
	s.update(func(st uint32) uint32 { return st&^stAdminMask | a<<stAdminShift })
	return nil
}

// SetUp records the observed health and returns whether it changed; the
// time of a change is kept for LastChange.
func (s *Server) SetUp(up bool, now time.Time) bool {
	changed := s.update(func(st uint32) uint32 {
		if up {
			return st &^ stDown
		}
		return st | stDown
	})
	if changed {
		s.lastChange.Store(now.UnixNano())
	}
	return changed
}

func (s *Server) retire() {
	s.update(func(st uint32) uint32 { return st | stRetired })
}

// SockaddrBuf is caller-owned storage for a copy of a server's sockaddr.
type SockaddrBuf struct {
	v4 unix.SockaddrInet4
	v6 unix.SockaddrInet6
}

// SockaddrInto copies the server's sockaddr into buf and returns it as a
// unix.Sockaddr pointing into buf: no allocation, and safe to hand to
// unix.Connect while another loop connects to the same server.
func (s *Server) SockaddrInto(buf *SockaddrBuf) unix.Sockaddr {
	switch sa := s.Sockaddr.(type) {
	case *unix.SockaddrInet4:
		buf.v4 = unix.SockaddrInet4{Port: sa.Port, Addr: sa.Addr}
		return &buf.v4
	case *unix.SockaddrInet6:
		buf.v6 = unix.SockaddrInet6{Port: sa.Port, ZoneId: sa.ZoneId, Addr: sa.Addr}
		return &buf.v6
	}
	return nil
}
