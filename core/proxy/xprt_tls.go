package proxy

import (
	"crypto/tls"
	"errors"
	"io"
	"net"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
)

// TLS transport: binds terminate TLS over it (xprt_tls_accept.go),
// and the proxy speaks it to servers with tls (xprt_tls_upstream.go).
//
// No goroutine per established connection. crypto/tls cannot pause a
// handshake, so the handshake runs on a helper goroutine (tlsHandshakes:
// at most `tuning.tls.max_handshakes` of them computing per loop), over
// tlsFd in blocking mode: when the non-blocking fd says EAGAIN, its Read
// and Write give the slot and the CPU token back and park the goroutine
// in Go's runtime poller until the socket is ready or the handshake
// deadline passes (tlsFd.wait). The goroutine then hands the connection
// back to its loop with Exec (the inbox publishes every write it made to
// the tls.Conn), and exits: from then on the tls.Conn is used from the loop
// thread only, and tlsFd is in loop mode:
//
//   - Read receives straight into crypto/tls's record buffer; when the
//     socket is empty it returns os.ErrDeadlineExceeded, a net.Error whose
//     Temporary() is true, which crypto/tls's readRecordOrCCS returns
//     without storing it: the partial record stays in its buffer and the
//     next Read resumes it.
//   - Write never fails (crypto/tls stores ANY write error for good): when
//     no record waits it sends the record with send(2) straight from
//     crypto/tls's buffer, and appends to tlsFd.out only what the socket
//     did not take (or every record, while some wait); the transport sends
//     out when the socket is writable again (EPOLLOUT) and reports a send
//     error from there.
//
// Backpressure without a mover change: sndBuf encrypts p only when out is
// empty, and when records remain queued after the send it reports all of
// p but one byte as written (held = 1). The caller keeps that byte pending,
// so it stops reading its source and waits for EPOLLOUT, then calls sndBuf
// again from that byte (write(2)'s contract): sndBuf flushes out, takes the
// held byte without encrypting it again, and goes on. So "the mover holds
// bytes" is exactly "records wait for the socket", and a direction's end
// (shutw) comes only after its records left. Records crypto/tls writes
// while reading (the answer to a TLS 1.3 KeyUpdate that requests one) are
// held the same way: rcvBuf reads no further while such answers wait for
// the socket (tlsFd.answers), so a peer that keeps asking and never reads
// cannot grow out.
//
// Every caller of sndBuf must call again with p[n:] after a short write
// (the mover does, and so does write(2)'s every user): the held byte is
// taken from there. out (the records the socket refused, about a buffer)
// comes from the loop's outPool when the first one is queued and goes back
// to it once flushed empty: no allocation per record nor per write, no
// copy while the socket keeps up, and an idle connection holds no out
// buffer.
//
// A handshake goroutine waits for its peer parked in the runtime poller
// (no OS thread, no slot, no token), never past its deadline: the
// handshake timeout, counted from start, waiting in the queue included.
// While it computes it holds a slot of its pool and one of the process's
// handshake CPU tokens (takeCPU, below), so that a handshake flood cannot
// take the loops' Ps. When the loop has stopped by the time a handshake
// ends, the goroutine closes the fd.
//
// Buffered plaintext: crypto/tls may hold decrypted bytes, or whole
// records, that the socket no longer signals. rcvBuf therefore reads until
// p is full or it knows that nothing is buffered: crypto/tls asked the
// socket for more and got EAGAIN, or (the common case, without that extra
// recv(2), and crypto/tls's allocation per socket read) tlsFd's record
// count proves it: a recv of this call found the socket drained, the bytes
// received end on a record boundary, and exactly one record completed
// since crypto/tls last held none, which the Read that returned data (and
// drained its plaintext) consumed. A short read thus always means "socket
// drained and nothing buffered", so the Side's shortRead is right to clear
// evIn, and a full read leaves evIn set for the next one. The handshake may have read ahead as well: an
// established tlsSock reports rcvPending until its first read, so the
// Side that registers it starts readable (Side.register).
type tlsSock struct {
	c    *tls.Conn
	a    tlsFd
	held int  // bytes of the caller's next p already encrypted (see above)
	shut bool // close_notify queued
	eof  bool // end of stream read with the last bytes, not reported yet
	more bool // rcvBuf stopped at maxReadsPerCall: crypto/tls may hold more
	// plainHTTP: a failed handshake whose client spoke plain HTTP is
	// answered 400 (http frontends: xprt_tls_accept.go, answerPlain).
	plainHTTP bool
	answered  bool // the 400 went out (helper goroutine, read after Exec)
	server    bool // newTLSServer: the handshake ends on the client's flight
	// sni: the server name the client asked for (server side, set on the
	// loop when the handshake ended: startTLS).
	sni string
}

// tlsFd is the net.Conn crypto/tls reads and writes: the socket of one
// connection, blocking with a deadline during the handshake (helper
// goroutine), non-blocking and buffered once on the loop.
type tlsFd struct {
	fd       int
	loop     bool      // established: loop mode (see tlsSock)
	deadline time.Time // handshake mode only
	out      []byte    // loop mode: records not sent yet, from off
	off      int
	rerr     unix.Errno // loop mode: the socket's read error, if any
	pool     *outPool   // loop mode: where out comes from and goes back
	// Handshake mode (helper goroutine, tlsHandshakes): the pool, the CPU
	// token and the slot held, the channel a slot is granted on, and the
	// netpoller file the handshake waits on (f, its RawConn rc, its index
	// fi in the pool's files).
	hs    *tlsHandshakes
	cpu   chan struct{}
	since time.Time // when the CPU token was taken (Activity.HandshakeNs)
	// handed: when the handshake was handed over, to its goroutine
	// (start) or back to the loop (run's end): Activity.HandshakeHandoffNs.
	handed time.Time
	slot   bool
	grant  chan bool
	f      *os.File
	rc     syscall.RawConn
	fi     int
	// Record boundaries of the bytes received (scan), for rcvBuf's
	// short-read proof: hdr/hdrN is the header being received, left the
	// body bytes of the current record still to come; recs counts the
	// records completed since crypto/tls last held no complete record and
	// no plaintext (recsUnknown after the handshake); drained: a recv of
	// the current rcvBuf call returned less than asked.
	hdr     [5]byte
	hdrN    int
	left    int
	recs    int
	drained bool
	// seen counts every record received; charged is seen at the last
	// rcvCost.
	seen, charged int
	// answers: out holds records crypto/tls wrote while reading (a
	// KeyUpdate's answer) that the socket did not take: rcvBuf reads no
	// further until they left (flush clears it).
	answers bool
}

// minRecordCost is what a record received costs against a run's read
// budget at least (rcvCost): runCap (256 KiB) then allows 512 records per
// run, whatever their size.
const minRecordCost = 512

// maxReadsPerCall bounds the crypto/tls reads (a record each at least) of
// one rcvBuf, so that the budget is charged between them.
const maxReadsPerCall = 64

// recsUnknown: what crypto/tls holds is not known (it may have read
// records past the handshake).
const recsUnknown = 1 << 30

// scan follows the record boundaries of b, the next bytes received.
func (a *tlsFd) scan(b []byte) {
	for len(b) > 0 {
		if a.left > 0 {
			k := min(a.left, len(b))
			a.left -= k
			b = b[k:]
			if a.left == 0 {
				a.recs++
				a.seen++
			}
			continue
		}
		k := copy(a.hdr[a.hdrN:], b)
		a.hdrN += k
		b = b[k:]
		if a.hdrN == len(a.hdr) {
			a.hdrN = 0
			if a.left = int(a.hdr[3])<<8 | int(a.hdr[4]); a.left == 0 {
				a.recs++
				a.seen++
			}
		}
	}
}

// aligned: the bytes received end on a record boundary.
func (a *tlsFd) aligned() bool { return a.hdrN == 0 && a.left == 0 }

var tlsNoAddr net.Addr = &net.TCPAddr{}

func (a *tlsFd) Read(p []byte) (int, error) {
	for {
		n, e := recv(a.fd, p)
		if e == 0 {
			if n == 0 {
				return 0, io.EOF
			}
			a.scan(p[:n])
			if n < len(p) {
				a.drained = true
			}
			return n, nil
		}
		if e != unix.EAGAIN {
			a.rerr = e
			return 0, e
		}
		if a.loop {
			return 0, os.ErrDeadlineExceeded // resumable: see tlsSock
		}
		if err := a.wait(unix.POLLIN); err != nil {
			return 0, err
		}
	}
}

func (a *tlsFd) Write(p []byte) (int, error) {
	if a.loop {
		if a.off == len(a.out) && len(p) > 0 {
			// Nothing queued: the socket takes the record from
			// crypto/tls's buffer, without the copy into out (a MiB of
			// memcpy per MiB sent). Only what it does not take is queued;
			// an error is left for flush to report, as before.
			if n, e := sendMore(a.fd, p, false); e == 0 {
				if n == len(p) {
					return n, nil
				}
				p = p[n:]
			}
		}
		if a.out == nil && a.pool != nil {
			a.out = a.pool.get()
		}
		a.out = append(a.out, p...)
		return len(p), nil
	}
	for k := 0; k < len(p); {
		n, e := sendMore(a.fd, p[k:], false)
		switch e {
		case 0:
			k += n
		case unix.EAGAIN:
			if err := a.wait(unix.POLLOUT); err != nil {
				return k, err
			}
		default:
			return k, e
		}
	}
	return len(p), nil
}

// wait parks the handshake until its socket is ready for ev (POLLIN or
// POLLOUT) or its deadline passes (helper goroutine; see tlsHandshakes):
// it gives its slot and CPU token back, sleeps in the runtime poller, and
// takes a slot and a token again before it returns, whatever the outcome.
func (a *tlsFd) wait(ev int16) error {
	h := a.hs
	if a.f == nil {
		if err := h.pollFile(a); err != nil {
			return err
		}
	}
	h.release(a)
	h.l.Activity().HandshakeParks.Add(1)
	if h.parking != nil {
		h.parking(a)
	}
	// RawRead and RawWrite reset the poller's readiness (prepareRead,
	// prepareWrite) before their first call of ready: an edge the runtime
	// poller took between the caller's EAGAIN and that reset (the
	// ClientHello arriving then, or while pollFile registered the dup,
	// whose EPOLL_CTL_ADD reports data already there) is dropped, and the
	// socket will not signal it again. So the first call asks the socket
	// itself (poll(2), no timeout); a later call comes from a wake-up,
	// which means an edge after the reset: the caller's recv or send finds
	// out, and waits again on EAGAIN (a spurious wake-up costs a loop).
	first := true
	ready := func(uintptr) bool {
		if first {
			first = false
			return pollNow(a.fd, ev)
		}
		return true
	}
	var err error
	if ev == unix.POLLIN {
		err = a.rc.Read(ready)
	} else {
		err = a.rc.Write(ready)
	}
	if e := h.acquire(a); e != nil {
		return e
	}
	return err
}

// pollNow says whether fd is ready for ev (POLLIN or POLLOUT) now, or in
// error, which the caller's next recv or send reports. EINTR is asked
// again; any other poll(2) failure answers "ready" so that the caller's
// syscall reports the socket's state rather than a park that may not end
// before the deadline.
func pollNow(fd int, ev int16) bool {
	p := [1]unix.PollFd{{Fd: int32(fd), Events: ev}}
	for {
		n, err := unix.Poll(p[:], 0)
		switch {
		case err == unix.EINTR:
			continue
		case err != nil:
			return true
		}
		return n > 0
	}
}

// Handshake CPU tokens. The loops keep their Ps while they sleep in
// epoll_wait (core/loop: a raw syscall when a spare P exists), but the Go
// scheduler preempts a loop goroutine every 10 ms, and a preempted loop
// gives its P to whatever goroutine is runnable: under a flood, a handshake
// goroutine about to sign, which then keeps it for its whole computation
// (an RSA-2048 signature is over a millisecond) or until its own 10 ms
// preemption, while the loop waits. So at most SetHandshakeCPUs goroutines
// of the pools (all loops together) compute at once — the Ps the loops
// leave — and a handshake goroutine holds its token whenever it runs, not
// while it waits for the network (parked): the others wait for a token
// without being runnable, and a preempted loop finds no one to give its P
// to. Measured in make bench's flood row (keep-alive probe p99 under an
// RSA-2048 handshake flood): see the commit that added them. The loops
// never touch the tokens; a handshake takes its token after its slot
// (tlsHandshakes.acquire) and gives both back while it waits.
var hsCPU atomic.Pointer[chan struct{}]

// SetHandshakeCPUs sets how many TLS handshakes may compute at once,
// process-wide (at least 1): the engine gives GOMAXPROCS less its loops.
// Holders of a token of the previous setting give it back there.
func SetHandshakeCPUs(n int) {
	ch := make(chan struct{}, max(n, 1))
	hsCPU.Store(&ch)
}

// HandshakeCPUs is how many TLS handshakes may compute at once (the last
// SetHandshakeCPUs; 0 before any).
func HandshakeCPUs() int {
	if p := hsCPU.Load(); p != nil {
		return cap(*p)
	}
	return 0
}

// takeCPU waits for a handshake token (helper goroutine), adding the time
// it waited to waited. Without SetHandshakeCPUs (tests), GOMAXPROCS less
// one loop.
func takeCPU(waited *atomic.Uint64) chan struct{} {
	p := hsCPU.Load()
	if p == nil {
		ch := make(chan struct{}, max(runtime.GOMAXPROCS(0)-1, 1))
		hsCPU.CompareAndSwap(nil, &ch)
		p = hsCPU.Load()
	}
	ch := *p
	select {
	case ch <- struct{}{}:
	default:
		t0 := time.Now()
		ch <- struct{}{}
		waited.Add(uint64(time.Since(t0)))
	}
	return ch
}

// giveCPU gives a token back (nil: none held).
func giveCPU(ch chan struct{}) {
	if ch != nil {
		<-ch
	}
}

// flush sends the queued records: 0 when none is left, EAGAIN when the
// socket is full, or the socket's error.
func (a *tlsFd) flush() unix.Errno {
	for a.off < len(a.out) {
		n, e := sendMore(a.fd, a.out[a.off:], false)
		if e != 0 {
			return e
		}
		if n == 0 {
			return unix.EAGAIN
		}
		a.off += n
	}
	a.off = 0
	if a.pool != nil {
		a.pool.put(a.out) // an idle connection holds no out buffer
		a.out = nil
	} else {
		a.out = a.out[:0]
	}
	a.answers = false
	return 0
}

// outPool keeps the record buffers (tlsFd.out) of one loop's established
// TLS connections between their writes: a connection takes one when it
// writes and gives it back once the socket took every record, so an idle
// connection holds none (crypto/tls keeps its own input buffers). Loop
// thread only; at most maxOutFree kept.
type outPool struct{ free [][]byte }

const maxOutFree = 64

func (p *outPool) get() []byte {
	n := len(p.free)
	if n == 0 {
		return nil
	}
	b := p.free[n-1]
	p.free[n-1] = nil
	p.free = p.free[:n-1]
	return b
}

func (p *outPool) put(b []byte) {
	if cap(b) > 0 && len(p.free) < maxOutFree {
		p.free = append(p.free, b[:0])
	}
}

func (a *tlsFd) pending() bool { return a.off < len(a.out) }

// Close is a no-op: the transport closes the fd (tlsSock.close); crypto/tls
// only calls it from Conn.Close, which the transport never calls.
func (a *tlsFd) Close() error                     { return nil }
func (a *tlsFd) LocalAddr() net.Addr              { return tlsNoAddr }
func (a *tlsFd) RemoteAddr() net.Addr             { return tlsNoAddr }
func (a *tlsFd) SetDeadline(time.Time) error      { return nil }
func (a *tlsFd) SetReadDeadline(time.Time) error  { return nil }
func (a *tlsFd) SetWriteDeadline(time.Time) error { return nil }

// newTLSServer makes the server side of a TLS connection on fd
// (non-blocking, open), handshake not started.
func newTLSServer(fd int, cfg *tls.Config) *tlsSock {
	x := &tlsSock{a: tlsFd{fd: fd}, server: true}
	x.c = tls.Server(&x.a, cfg)
	return x
}

// newTLSClient makes the client side of a TLS connection on fd
// (non-blocking, connected), handshake not started; cfg names the server
// (ServerName) unless it skips verification.
func newTLSClient(fd int, cfg *tls.Config) *tlsSock {
	x := &tlsSock{a: tlsFd{fd: fd}}
	x.c = tls.Client(&x.a, cfg)
	return x
}

// tlsErrno maps a crypto/tls read or write error to the errno a transport
// returns: the socket's own error when it had one, end of stream for a
// close_notify (or a clean end at a record boundary), EPROTO otherwise (bad
// record, alert, unexpected end inside a record).
func (x *tlsSock) tlsErrno(err error) unix.Errno {
	if x.a.rerr != 0 {
		return x.a.rerr
	}
	if err == io.EOF {
		return 0
	}
	return unix.EPROTO
}

func (x *tlsSock) rcvBuf(fd int, p []byte) (int, unix.Errno) {
	if x.a.pending() { // a post-handshake answer (KeyUpdate) waits
		if e := x.a.flush(); e != 0 && e != unix.EAGAIN {
			return 0, e
		}
		if x.a.answers && x.a.pending() {
			// Answers to the peer's earlier records wait for the socket:
			// no reading (and answering) more until they left, or a peer
			// that asks for answers and reads none would grow out without
			// bound. rcvEvents asks for EPOLLOUT meanwhile.
			return 0, unix.EAGAIN
		}
	}
	a := &x.a
	a.drained = false
	x.more = false
	n := 0
	for reads := 1; n < len(p); reads++ {
		q := len(a.out)
		k, err := x.c.Read(p[n:])
		n += k
		if len(a.out) > q && a.flush() != 0 {
			// crypto/tls answered (KeyUpdate) and the socket did not take
			// all of it: stop here (see above); crypto/tls may hold more.
			a.answers = true
			if err == nil {
				if n == 0 {
					return 0, unix.EAGAIN
				}
				x.more = true
				break
			}
		}
		if err == nil {
			if n < len(p) && a.drained && a.recs == 1 && a.aligned() {
				// The one record received since crypto/tls held nothing
				// was consumed by this Read, its plaintext taken, and the
				// socket was empty after it: nothing is buffered (see
				// above).
				a.recs = 0
				break
			}
			if reads == maxReadsPerCall {
				// Tiny records: stop here, the caller charges them
				// (rcvCost) and reads on within its budget.
				x.more = true
				break
			}
			continue
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			// crypto/tls holds no plaintext and no whole record (it
			// asked the socket for more).
			a.recs = 0
			if n == 0 {
				return 0, unix.EAGAIN
			}
			break // short: the socket is drained, nothing is buffered
		}
		if n > 0 && err == io.EOF {
			x.eof = true // close_notify right behind the data: next call
			break
		}
		if e := x.tlsErrno(err); e != 0 || n == 0 {
			return 0, e
		}
		break
	}
	if x.a.pending() {
		_ = x.a.flush() // an error comes back from the next send
	}
	return n, 0
}

func (x *tlsSock) sndBuf(fd int, p []byte, more bool) (int, unix.Errno) {
	if e := x.a.flush(); e != 0 {
		return 0, e
	}
	n := min(x.held, len(p))
	x.held = 0
	if n < len(p) {
		if _, err := x.c.Write(p[n:]); err != nil {
			return n, unix.EPIPE // after close_notify (errShutdown)
		}
		n = len(p)
		switch e := x.a.flush(); e {
		case 0:
		case unix.EAGAIN:
			x.held = 1
			if n == 1 {
				return 0, unix.EAGAIN
			}
			return n - 1, 0
		default:
			return 0, e
		}
	}
	return n, 0
}

// rcvPending: the end of stream came with the last bytes (crypto/tls reads
// a close_notify behind the last record), or rcvBuf stopped at
// maxReadsPerCall with records maybe left in crypto/tls: the socket will
// not signal them again, so the read readiness must stay.
func (x *tlsSock) rcvPending() bool { return x.eof || x.more }

func (x *tlsSock) push(int) {}

func (x *tlsSock) rcvCost(n int) int {
	r := x.a.seen - x.a.charged
	x.a.charged = x.a.seen
	return max(n, r*minRecordCost)
}

func (x *tlsSock) canSplice() bool { return false }

func (x *tlsSock) secure() bool { return true }

func (x *tlsSock) rcvPipe(int, *Pipe, int) (int, unix.Errno) { return 0, unix.EINVAL }

func (x *tlsSock) sndPipe(int, *Pipe, int, bool) (int, unix.Errno) { return 0, unix.EINVAL }

// shutw queues a close_notify after the last record, then sends the FIN
// once every record left: EAGAIN means records wait for EPOLLOUT, and the
// caller calls shutw again when the side can send (the alert is queued
// once).
func (x *tlsSock) shutw(fd int) unix.Errno {
	if !x.shut {
		x.shut = true
		_ = x.c.CloseWrite() // into out: cannot fail
	}
	if e := x.a.flush(); e != 0 {
		return e
	}
	return shutWrite(fd)
}

// close ends an established connection with a close_notify after the
// queued records (not on an abort, which resets) and sends what the socket
// takes of them, then closes as a raw socket does: a client reading a
// close-delimited body, or any TLS stack that insists (OpenSSL 3: "unexpected
// eof while reading"), sees a clean end rather than a truncation.
func (x *tlsSock) close(fd int, reset bool) {
	if !reset {
		if !x.shut && x.a.loop {
			x.shut = true
			_ = x.c.CloseWrite() // into out: cannot fail
		}
		if x.a.pending() {
			_ = x.a.flush()
		}
	}
	rawSock{}.close(fd, reset)
	if x.a.pool != nil {
		x.a.pool.put(x.a.out)
	}
	x.a.out, x.a.off = nil, 0
}

// rcvEvents: a read may need to send first (a KeyUpdate answer queued).
func (x *tlsSock) rcvEvents() uint32 {
	ev := uint32(evIn | evRdHup | evErr | evHup)
	if x.a.pending() {
		ev |= evOut
	}
	return ev
}

func (x *tlsSock) sndEvents() uint32 { return evOut | evErr | evHup }

// tlsHandshakes runs the TLS handshakes of one loop's connections (the
// Worker makes two: its clients' on TLS binds, and its own with servers
// and their checks, so that clients stalling theirs cannot delay those),
// each on a helper goroutine started at once (start, through the starter
// goroutine: xprt_tls_start.go). A handshake has two states, as an
// HAProxy handshake that is a non-blocking state machine:
//
//   - computing: crypto/tls has bytes to process or to produce (parse a
//     ClientHello, sign, verify). It then holds one of max slots
//     (tuning.tls.max_handshakes, per loop; the others wait for one in
//     FIFO order, acquire) and one of the process's CPU tokens (takeCPU),
//     so that a handshake flood cannot take more than max threads per
//     loop, nor the loops' Ps.
//   - waiting for its peer (the socket said EAGAIN): it gives both back
//     and parks in Go's runtime poller (tlsFd.wait: a dup of the fd as a
//     non-blocking os.File, the goroutine asleep in its SyscallConn's Read
//     or Write with the handshake deadline), holding no slot, no token and
//     no OS thread, only its goroutine's stack; when the socket is ready
//     it queues for a slot again.
//
// So clients that send half a ClientHello, or a whole one and then
// nothing, cost a parked goroutine each until their deadline and never
// delay another handshake. Each handshake has the timeout its start gives
// (a frontend's handshake_ms for a client handshake, a backend's
// connect_ms for a server one), counted from the start, waiting for a
// slot included. Loop thread only, except run and the gate (the helper
// goroutines).
type tlsHandshakes struct {
	l       *loop.Loop
	stopped bool // loop thread; gate.stopped follows
	gate    hsGate
	// counters (loop thread): inflight is started less ended
	started, ok, failed uint64
	inflight            int
	out                 *outPool // given to the established connections
	// st starts the handshakes' goroutines off the loop's P
	// (xprt_tls_start.go; the Worker's); nil: start does.
	st *hsStarter
	// parking, when set (tests), runs on the helper goroutine in each
	// wait, after the slot is given back and before the goroutine parks:
	// where a peer's bytes must not be lost (TestTLSReadyBeforeParkIsSeen).
	parking func(a *tlsFd)
}

// hsGate is the state the helper goroutines share with the loop: the
// slots of the computing handshakes and the parked handshakes' files.
// Taken by the loop only in setMax and stop, never per event.
type hsGate struct {
	mu      sync.Mutex
	max     int
	active  int         // slots held (handshakes computing)
	queue   []chan bool // handshakes waiting for a slot, FIFO: true = granted
	files   []*tlsFd    // handshakes with a netpoller file (wait), for stop
	stopped bool
}

// tlsJob is one handshake handed to its goroutine (through the starter:
// xprt_tls_start.go) and back to the loop.
type tlsJob struct {
	h    *tlsHandshakes
	x    *tlsSock
	done func(x *tlsSock, err error)
	next *tlsJob // the starter's stack
}

// errTLSStopped is what done gets for a handshake the pool's stop ended.
var errTLSStopped = errors.New("tls: handshake pool stopped")

func newTLSHandshakes(l *loop.Loop, n int) *tlsHandshakes {
	h := &tlsHandshakes{l: l, out: new(outPool)}
	h.gate.max = max(n, 1)
	return h
}

// setMax changes the bound (loop thread): a larger one grants waiting
// handshakes a slot at once, a smaller one lets the computing ones finish.
func (h *tlsHandshakes) setMax(n int) {
	g := &h.gate
	g.mu.Lock()
	g.max = max(n, 1)
	for g.active < g.max && len(g.queue) > 0 {
		g.active++
		g.pop() <- true
	}
	g.mu.Unlock()
}

// pop takes the first waiter of the queue (mu held).
func (g *hsGate) pop() chan bool {
	ch := g.queue[0]
	g.queue[0] = nil
	g.queue = g.queue[1:]
	return ch
}

// state is the gate's picture: slots held, handshakes waiting for one,
// handshakes parked with a file (tests, any goroutine).
func (h *tlsHandshakes) state() (active, queued, files int) {
	g := &h.gate
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.active, len(g.queue), len(g.files)
}

// acquire takes a slot, in FIFO order after the handshakes that wait for
// one, then a CPU token (helper goroutine). After stop it takes nothing
// and says errTLSStopped.
func (h *tlsHandshakes) acquire(a *tlsFd) error {
	g := &h.gate
	g.mu.Lock()
	if g.stopped {
		g.mu.Unlock()
		return errTLSStopped
	}
	if g.active < g.max && len(g.queue) == 0 {
		g.active++
		g.mu.Unlock()
	} else {
		if a.grant == nil {
			a.grant = make(chan bool, 1)
		}
		g.queue = append(g.queue, a.grant)
		g.mu.Unlock()
		t0 := time.Now()
		ok := <-a.grant
		h.l.Activity().HandshakeSlotWaitNs.Add(uint64(time.Since(t0)))
		if !ok {
			return errTLSStopped
		}
	}
	a.slot = true
	a.cpu = takeCPU(&h.l.Activity().HandshakeCPUWaitNs)
	a.since = time.Now()
	return nil
}

// release gives back what acquire took (helper goroutine): the CPU token,
// and the slot to the first waiter, if any.
func (h *tlsHandshakes) release(a *tlsFd) {
	if a.cpu != nil {
		// The time it computed: the loop's handshake CPU, beside its
		// classes' (core/loop Activity.HandshakeNs).
		h.l.Activity().HandshakeNs.Add(uint64(time.Since(a.since)))
	}
	giveCPU(a.cpu)
	a.cpu = nil
	if !a.slot {
		return
	}
	a.slot = false
	g := &h.gate
	g.mu.Lock()
	if len(g.queue) > 0 && g.active <= g.max {
		g.pop() <- true // the slot passes on
	} else {
		g.active--
	}
	g.mu.Unlock()
}

// pollFile gives a its netpoller file, made on its first wait (helper
// goroutine): a dup of the fd, non-blocking as the fd is (they share the
// open file description), which os.NewFile registers with the runtime
// poller (an epoll instance of its own, not the loop's), with the
// handshake deadline, or one in the past after stop.
func (h *tlsHandshakes) pollFile(a *tlsFd) error {
	nfd, err := unix.FcntlInt(uintptr(a.fd), unix.F_DUPFD_CLOEXEC, 0)
	if err != nil {
		return err
	}
	f := os.NewFile(uintptr(nfd), "tls")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return err
	}
	g := &h.gate
	g.mu.Lock()
	d := a.deadline
	if g.stopped {
		d = time.Unix(1, 0)
	}
	if err = f.SetDeadline(d); err != nil {
		g.mu.Unlock()
		f.Close() // not pollable: never for a socket
		return err
	}
	a.f, a.rc, a.fi = f, rc, len(g.files)
	g.files = append(g.files, a)
	g.mu.Unlock()
	return nil
}

// closeFile closes a's netpoller file, if it has one (helper goroutine):
// Close takes the dup out of the runtime poller's epoll (EPOLL_CTL_DEL)
// and closes it; the socket stays open on a.fd.
func (h *tlsHandshakes) closeFile(a *tlsFd) {
	if a.f == nil {
		return
	}
	g := &h.gate
	g.mu.Lock()
	last := g.files[len(g.files)-1]
	g.files[a.fi], last.fi = last, a.fi
	g.files[len(g.files)-1] = nil
	g.files = g.files[:len(g.files)-1]
	g.mu.Unlock()
	a.f.Close()
	a.f, a.rc = nil, nil
}

// start begins x's handshake, which must end within timeout from now.
// done runs exactly once:
//   - nil: x is established and every later use of it is the loop's
//     (register its fd with x as the Side's transport: the side starts
//     readable, crypto/tls may have read past the handshake). Loop thread.
//   - an error: x's fd is closed already (an RST). Loop thread, except
//     after stop (errTLSStopped): when the loop itself has stopped by the
//     time a handshake ends, done runs on the helper goroutine, so on
//     errTLSStopped done may only release what is safe from any goroutine
//     (atomics: counters, maxconn slots), never loop state.
func (h *tlsHandshakes) start(x *tlsSock, timeout time.Duration, done func(x *tlsSock, err error)) {
	x.a.handed = time.Now()
	x.a.deadline = x.a.handed.Add(timeout)
	if h.stopped {
		rawSock{}.close(x.a.fd, true)
		done(x, errTLSStopped)
		return
	}
	h.started++
	h.inflight++
	j := &tlsJob{h: h, x: x, done: done}
	if h.st != nil {
		h.st.push(j)
	} else {
		go h.run(j)
	}
}

// run is the helper goroutine: the handshake, then the hand-over.
func (h *tlsHandshakes) run(j *tlsJob) {
	a := &j.x.a
	a.hs = h
	h.l.Activity().HandshakeHandoffNs.Add(uint64(time.Since(a.handed)))
	err := h.acquire(a)
	if err == nil && !time.Now().Before(a.deadline) {
		err = os.ErrDeadlineExceeded // waited past it for a slot
	}
	if err == nil {
		if err = j.x.c.Handshake(); err == nil {
			if j.x.server {
				// The client spoke last (its Finished: TLS 1.3, and a
				// resumed TLS 1.2 handshake), and crypto/tls sent its
				// session tickets before it, so the server sends
				// nothing now: the kernel delays the ACK of the
				// Finished, and a client that leaves Nagle on holds its
				// request until that ACK, 40 ms
				// (TestTLSServerAcksClientFinishedAtOnce). Ack now.
				quickAck(a.fd)
			}
			a.loop = true
			a.recs = recsUnknown
			// crypto/tls may have read past the handshake (the client's
			// first bytes with its Finished): the socket will not signal
			// them again, so the first read is due whatever it says.
			j.x.more = true
		} else if j.x.plainHTTP {
			j.x.answerPlain(err)
		}
	}
	h.release(a)
	h.closeFile(a)
	a.hs, a.grant = nil, nil
	a.handed = time.Now()
	if !h.l.Exec(func(*loop.Loop) { h.finish(j, err) }) {
		// The loop has stopped: nobody owns the connection any more.
		rawSock{}.close(a.fd, true)
		j.done(j.x, errTLSStopped)
	}
}

// stop ends the pool with its owner (Worker.CloseAll, loop thread): the
// handshakes waiting for a slot are refused it, the parked ones' files get
// a deadline in the past, which wakes them at once, and a handshake that
// computes fails at its next wait; each one's fd is closed as it ends
// (finish), never under its goroutine, and each done gets errTLSStopped.
// A handshake started afterwards fails at once.
func (h *tlsHandshakes) stop() {
	h.stopped = true
	g := &h.gate
	g.mu.Lock()
	g.stopped = true
	for len(g.queue) > 0 {
		g.pop() <- false
	}
	for _, a := range g.files {
		a.f.SetDeadline(time.Unix(1, 0))
	}
	g.mu.Unlock()
}

// finish tells the owner (loop thread).
func (h *tlsHandshakes) finish(j *tlsJob, err error) {
	h.inflight--
	h.l.Activity().HandshakeHandoffNs.Add(uint64(time.Since(j.x.a.handed)))
	if h.stopped {
		rawSock{}.close(j.x.a.fd, true)
		j.done(j.x, errTLSStopped)
		return
	}
	if err != nil {
		h.failed++
		rawSock{}.close(j.x.a.fd, true)
	} else {
		h.ok++
		j.x.a.pool = h.out
	}
	j.done(j.x, err)
}
