package proxy

import (
	"net/netip"

	"github.com/spliced-proxy/spliced/core/balance"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/ilist"
)

// Tuning is the part of the tuning section a worker applies.
type Tuning struct {
	Bufsize  int // bytes per buffer, for buffers taken from now on
	Maxpipes int // pipes this loop may hold at once (its share of tuning.maxpipes)
	Pipesize int // F_SETPIPE_SZ, 0 = automatic (autoPipeSize)
	// MaxIdle bounds the idle server connections this loop's http pools
	// keep, all servers together (its share of config.IdleFor); 0 = no
	// bound beyond maxIdlePerServer. Lowering it closes none: the excess
	// ends with the pool's idle timeout or the next reuse.
	MaxIdle int
	// TLSMaxHandshakes bounds the TLS handshakes of this loop that compute
	// at once on helper goroutines (tuning.tls.max_handshakes, per loop;
	// the others wait in FIFO order, and one waiting for its peer holds
	// no slot: xprt_tls.go), once for its clients' and once for its own
	// with servers (Worker.tlsOut); at least 1.
	TLSMaxHandshakes int
}

// Worker is the proxy state of one loop: its buffer and pipe pools and the
// list of the connections it owns. Everything in it is used from that
// loop's thread only.
type Worker struct {
	L     *loop.Loop
	Bufs  *BufPool
	Pipes *PipePool
	act   *loop.Activity
	id    int
	live  ilist.List[Tunnel] // live tunnels
	nlive int
	sa    balance.SockaddrBuf // connect(2) address storage owned by this loop
	h     httpState           // http mode: client connections, server pools
	tls   *tlsHandshakes      // TLS handshakes of this loop's clients on TLS binds (xprt_tls.go)
	pp    proxyState          // PROXY headers read and carried (proxyhdr.go)
	// accFd and accPeer: during AcceptFrom, the fd being accepted and its
	// client's address from accept4, for clientAddr (no getpeername);
	// accFd is -1 otherwise.
	accFd   int
	accPeer netip.AddrPort
	lim     limitState // what client connections hold in their limits (limits.go)
	// acmeAnswer is the http-01 key authorization a stream's fail(200)
	// answers with, set only during that call (acme.go).
	acmeAnswer string
	// tlsOut: the TLS handshakes this loop makes as a client (servers
	// with tls, their health checks), in a pool of their own: a client
	// of a bind can stall its handshake until handshake_ms, so clients
	// that hold every slot of tls must not delay them (a 503 at
	// connect_ms, a server marked down).
	tlsOut *tlsHandshakes
	// grants receives this loop's queue outcomes (queue.go); a loop.Source.
	grants grants
	// budget is what the tasklet running now may still read (runCap per
	// run of an http connection's tasklet, shared by every read of the
	// run: heads, responses, bodies, lingering); at zero the reader wakes
	// its tasklet again in class Bulk (Worker.spent), so that one
	// connection that floods (1xx responses to an HTTP/1.0 client, input
	// after an error answer, pipelined heads) cannot hold the loop thread.
	budget int
	// stopping: SoftStop was called (stop.go): no keep-alive, no pooling.
	stopping bool
	// AccessLog receives one entry per connection of a frontend with
	// access_log on; set by the engine before the loop runs (nil: none).
	AccessLog *stats.LogRing
	freeLog   []*stats.LogEntry // cleared entries for the connections being logged (getLog)
	// noCounters stands in for the counters of a server that has none
	// (backends built without the engine, in tests).
	noCounters stats.Slot
}

// NewWorker returns the worker of l. It may be called from any goroutine
// before the worker is used; afterwards only l's thread touches it.
func NewWorker(l *loop.Loop, t Tuning) *Worker {
	act := l.Activity()
	w := &Worker{
		L:     l,
		id:    l.ID(),
		act:   act,
		Bufs:  NewBufPool(t.Bufsize),
		Pipes: NewPipePool(t.Maxpipes, t.Pipesize, &act.PipesUsed),
		accFd: -1,
	}
	w.Bufs.used = &act.BufsUsed
	w.Bufs.trimOn(l)
	w.h.maxIdle = t.MaxIdle
	w.tls = newTLSHandshakes(l, t.TLSMaxHandshakes)
	w.tlsOut = newTLSHandshakes(l, t.TLSMaxHandshakes)
	w.tlsOut.out = w.tls.out // one pool of record buffers per loop
	if st, err := newHSStarter(); err == nil {
		// Without one (no eventfd left), the loop starts them itself.
		w.tls.st, w.tlsOut.st = st, st
	}
	w.grants.Notify = l.Notify
	l.AddSource(&w.grants)
	return w
}

// SetTuning applies new pool limits (loop thread).
func (w *Worker) SetTuning(t Tuning) {
	w.Bufs.SetSize(t.Bufsize)
	w.Pipes.SetLimits(t.Maxpipes, t.Pipesize)
	w.h.maxIdle = t.MaxIdle
	w.tls.setMax(t.TLSMaxHandshakes)
	w.tlsOut.setMax(t.TLSMaxHandshakes)
}

// Live is the number of tunnels this worker owns (loop thread).
func (w *Worker) Live() int { return w.nlive }

// CloseAll closes every connection of this worker at once (loop thread);
// used when a shutdown's grace period is over, and before the loop stops.
// TLS handshakes in flight end with it (tlsHandshakes.stop).
func (w *Worker) CloseAll() {
	w.tls.stop()
	w.tlsOut.stop()
	w.tls.st.close() // after the pools' stop: nothing is pushed any more
	w.closeProxyHdrs()
	for t := w.live.Front(); t != nil; t = w.live.Front() {
		t.term = stats.Termination{'K', t.phaseByte()}
		t.close(closeAbort)
	}
	w.closeHTTP()
	w.Pipes.Close()
}

func (w *Worker) link(t *Tunnel) {
	w.live.PushFront(&t.link)
	w.nlive++
	w.act.Conns.Add(1)
}

func (w *Worker) unlink(t *Tunnel) {
	w.live.Remove(&t.link)
	w.nlive--
	w.act.Conns.Add(-1)
}

// ID is the index of the worker's loop, the slot its counters add to.
func (w *Worker) ID() int { return w.id }

// ServerSlot is this loop's counter slot of server s (loop thread).
func (w *Worker) ServerSlot(s *balance.Server) *stats.Slot {
	if s.Counters == nil {
		return &w.noCounters
	}
	return s.Counters.Loop(w.id)
}
