package proxy

import (
	"errors"
	"os"
	"time"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// TLS to servers (config.ServerTLS)
//
// A server whose balance.Server.TLS is set (the engine builds it once per
// Server with core/tlsconf.Client) is spoken to through a tlsSock client.
// The transport is chosen at the dial (srvTransport), before the TCP
// connect completes, so that a mover which reads the client meanwhile
// (splice "on" in tcp mode) already sees a destination that cannot splice
// and keeps the bytes in a buffer. Once the connect completes (the usual
// EPOLLOUT check), the fd leaves the loop (detach: the side owns no fd
// while the handshake runs, so nothing closes it under the helper
// goroutine) and the handshake runs on the worker's pool of outgoing
// handshakes (Worker.tlsOut, xprt_tls.go)
// within what is left of the backend's connect_ms: connect and handshake
// together fit connect_ms, and the connect time counted in the stats is
// the time to an established TLS session. Established, the fd is adopted
// and registered again with the same tlsSock, with evIn and evOut set
// (crypto/tls may have read past the handshake), and the connection goes
// on as a plain one would: tcp tunnel established, http exchange started.
//
// A handshake that fails (a certificate refused, a name that does not
// match, no common version or cipher, a reset, the deadline) is a failed
// connect: counted on the backend and the server as one, retried on
// another server up to the backend's retries, then the client gets what
// any connect failure gives it (tcp: the connection closed; http: 503).
// The phase's own timer (connect_ms) may give the attempt up first: the
// attempt is then stale, and its handshake's end, whenever it comes, only
// closes the fd (Tunnel: attempt number; srvConn: hsOrphan keeps the
// object out of the free list until then). errTLSStopped (the worker's
// CloseAll stopped the pool) touches nothing: CloseAll closes the
// connections, and that done may run off the loop thread.
//
// Every server handshake that ends (errTLSStopped aside) is counted in the
// server's counters (balance.Server.Counters, this loop's slot): full,
// resumed, failed, and timeouts among the failed (the handshake's
// deadline passed), given up or not: what the server did, whatever the
// connection became. Health checks' handshakes are not counted there
// (their outcome is the server's health).
//
// Established, a server connection over TLS is an ordinary side: pooled
// http connections keep their tlsSock (a server's close_notify and FIN,
// or any unexpected record, drop them as for a raw socket; TLS 1.3
// session tickets are consumed by crypto/tls and never look like
// unexpected bytes), and the session cache of the server's tls.Config
// lets the next connect resume.

// srvTransport is the transport a new connection (fd) to s starts with.
func srvTransport(s *balance.Server, fd int) transport {
	if s.TLS == nil {
		return rawSock{}
	}
	return newTLSClient(fd, s.TLS)
}

// handshakeWithin is how long a server handshake may take: what is left
// until deadline (loop.Now units), at least a millisecond (the connect
// completed just before it, so the bound is never meant to be zero).
func handshakeWithin(l *loop.Loop, deadline int64) time.Duration {
	return max(time.Duration(deadline-l.Now()), time.Millisecond)
}

// afterConnect: the TCP connect to a TLS server completed; the handshake
// takes the fd until it ends (see the top of this file): the side leaves
// the loop, and the end goes to st.owner, which says first whether it
// still wants the attempt (a stale one's established fd is closed here).
func (x *tlsSock) afterConnect(s *Side, st connectStep) bool {
	s.detach(st.l)
	st.owner.stepStarted()
	st.pool.start(x, st.within, func(x *tlsSock, err error) {
		if err == errTLSStopped {
			return // CloseAll closes the owner; maybe not on the loop thread
		}
		if st.ss != nil {
			countServerTLS(st.ss, x, err)
		}
		if !st.owner.stepCurrent(st.attempt) {
			// Given up meanwhile: the fd is nobody's but ours.
			if err == nil {
				x.close(x.a.fd, true)
			}
			return
		}
		if err == nil { // else the pool closed the fd
			s.adopt(x.a.fd, x)
			if e := s.register(st.l); e != nil {
				err = &registerError{e}
			} else {
				s.FD.Ready = evIn | evOut
			}
		}
		st.owner.stepDone(err)
	})
	return true
}

// countServerTLS counts the end of a handshake with a server in its slot
// ss (loop thread).
func countServerTLS(ss *stats.Slot, x *tlsSock, err error) {
	switch {
	case err == nil && x.c.ConnectionState().DidResume:
		ss.TLSResumed.Add(1)
	case err == nil:
		ss.TLSFull.Add(1)
	default:
		ss.TLSFailed.Add(1)
		if errors.Is(err, os.ErrDeadlineExceeded) {
			ss.TLSTimeouts.Add(1)
		}
	}
}

// Handshake state of a srvConn (srvConn.hs).
const (
	hsNone   uint8 = iota
	hsActive       // the handshake owns the fd; sc is attached
	hsOrphan       // given up while the handshake runs: its end recycles sc
)

// stepStarted: sc's handshake owns its fd until it ends.
func (sc *srvConn) stepStarted() { sc.hs = hsActive }

// stepCurrent: sc's handshake ended; given up meanwhile (hsOrphan), sc
// goes back to the free list.
func (sc *srvConn) stepCurrent(uint32) bool {
	orphan := sc.hs == hsOrphan
	sc.hs = hsNone
	if orphan {
		sc.w.recycleSrv(sc)
	}
	return !orphan
}

// stepDone: sc's handshake ended, for its connection.
func (sc *srvConn) stepDone(err error) {
	c := sc.owner
	if err != nil {
		c.connectFailed()
		return
	}
	sc.side.Connected = true
	c.startExchange()
	c.w.budget = runCap
	c.mux.run(c)
}
