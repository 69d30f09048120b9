package proxy

import (
	"crypto/tls"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/rules"
	"github.com/spliced-proxy/spliced/core/stats"
)

// SpliceMode is a frontend's splice policy (seed 003).
type SpliceMode uint8

const (
	SpliceOff  SpliceMode = iota // always copy through a buffer
	SpliceAuto                   // splice a direction once it behaves as a streamer
	SpliceOn                     // splice from the first byte when a pipe is available
)

// ParseSplice maps the config value; unknown values mean auto, the default.
func ParseSplice(s string) SpliceMode {
	switch s {
	case config.SpliceOff:
		return SpliceOff
	case config.SpliceOn:
		return SpliceOn
	}
	return SpliceAuto
}

// Counters are the totals kept per frontend, backend and server: one
// cache-line padded slot per loop (stats.Counters). A tunnel adds to its
// own loop's slot only (Counters.Loop(worker id)), so no counter line is
// written by two loops; readers sum the slots.
type Counters = stats.Counters

// Frontend is what a tunnel needs of its frontend. It is immutable once
// published: a config change builds a new one, and connections keep the
// one they started with.
type Frontend struct {
	Name          string
	Splice        SpliceMode
	TunnelTimeout time.Duration // idle timeout once both sides are connected
	// ClientTimeout bounds how long a tcp tunnel waits for its client to
	// take pending bytes (client_ms; http mode uses HTTPFront's).
	ClientTimeout time.Duration
	Backend       *Backend   // nil: connections are closed at once
	HTTP          *HTTPFront // http mode when set (see StartHTTP)
	// SNI routes of a tcp frontend (sni.go): when set, the tunnel reads
	// the client's ClientHello before it connects, routes on its server
	// name and falls back to Backend. InspectTimeout bounds that wait
	// (handshake_ms; 0 = none).
	SNI            []SNIRoute
	InspectTimeout time.Duration
	Stats          *Counters // carried over across snapshots (same name)
	// OnClose, when set, runs each time a connection accepted with this
	// frontend ends, with the ID of the loop that owns it (the engine's
	// maxconn accounting, and the bind's per-loop connection count the
	// accept distribution weighs: listen.LoopConns). It runs on that
	// loop's thread, except for a TLS handshake a stop cut short
	// (xprt_tls_accept.go): only atomics may be touched.
	OnClose func(loop int)
	// AccessLog: each connection that ends is pushed to the worker's
	// access-log ring (one compact line, formatted off the loop).
	AccessLog bool
	// TLS terminates TLS on the connections accepted with this frontend
	// generation (xprt_tls_accept.go; nil = plain): the engine sets it on the
	// copy of the frontend it gives each bind with a tls section.
	// HandshakeTimeout bounds each handshake (handshake_ms; 0 = 5 s).
	// CertHeader (http mode) is the prefix of the client-certificate
	// fields added to each request ("" = none).
	TLS              *tls.Config
	HandshakeTimeout time.Duration
	CertHeader       string
	// ACME answers http-01 challenges (acme.go): set by the engine on the
	// clear binds of http frontends; nil on TLS binds.
	ACME HTTPChallenges
	// CertStrip (http mode): the fields whose name starts with it are
	// dropped from every request of every bind, plain ones included, when
	// some bind of the frontend verifies client certificates: the
	// servers cannot tell the binds apart, so a client of another bind
	// must not be able to forge those fields (xprt_tls_accept.go).
	CertStrip []byte
	// CertStripName is CertStrip as a string: the request trailers whose
	// name starts with it are refused (http1.Chunked.RefusePrefix).
	CertStripName string
	// AcceptProxy reads a PROXY protocol header first (proxyhdr.go; nil =
	// none): the engine sets it on the copy of the frontend it gives each
	// bind with accept_proxy.
	AcceptProxy *AcceptProxy
	// Limits are the per-client limits of this generation (limits.go;
	// nil = none).
	Limits *LimitSet
	// Rules are a tcp frontend's request rules (tunnel_rules.go; nil =
	// none): src and sni conditions, deny closes the connection. An http
	// frontend's are HTTPFront.Rules.
	Rules *rules.Set
}

// Backend pairs a balance.Backend with one Picker per loop (pickers are not
// safe for concurrent use) and its counters. Immutable once published.
// Per-server totals (connections, connect failures) are kept by
// balance.Server itself.
type Backend struct {
	Name    string
	B       *balance.Backend
	Stats   *Counters
	pickers []*balance.Picker
	source  bool
}

// NewBackend builds the per-loop pickers for nloops loops (any goroutine,
// before the Backend is published).
func NewBackend(b *balance.Backend, nloops int, stats *Counters) *Backend {
	be := &Backend{Name: b.Name, B: b, Stats: stats, source: b.Algo == config.BalanceSource}
	for i := 0; i < nloops; i++ {
		be.pickers = append(be.pickers, b.NewPicker(uint64(i)*0x9E3779B97F4A7C15+1))
	}
	return be
}
