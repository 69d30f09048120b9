package stats

import (
	"net/netip"
	"sync/atomic"
)

// Termination is how a logged request or connection ended, as HAProxy's
// two-letter termination state: the first byte says who or what ended it
// ('-' normal, 'C' client abort, 'S' server abort or refusal, 'P' the
// proxy (an error it answered), 'R' a resource of the proxy ran out, 'K'
// killed by the end of a stop's grace, 'c' client timeout, 's' server
// timeout), the second in which phase ('R' waiting for the request, 'Q'
// queue, 'C' connect, 'H' response headers, 'D' data, 'L' last data to
// the client, 'T' held by a tarpit, '-' normal end). A limit per client
// that denies a request logs PR, one that tarpits it PT, as HAProxy.
type Termination [2]byte

// TermNormal is a request or connection that ended normally.
var TermNormal = Termination{'-', '-'}

func (t Termination) String() string {
	if t[0] == 0 {
		return "--"
	}
	return string(t[:])
}

// LineMax is how many bytes of a request line an entry keeps (the rest is
// cut, and LineCut set).
const LineMax = 256

// LogEntry is one access-log record, fixed size, filled on the loop thread
// without allocating: the strings point at the names of immutable runtime
// objects (no copy), the request line is copied into Line. Times are
// loop.Now values (monotonic ns); 0 means the phase was not reached. The
// writer derives HAProxy's timers from them off the loop.
type LogEntry struct {
	Frontend string
	Backend  string
	Server   string
	// ClientCert is the subject of the client's certificate on a TLS bind
	// with client_ca ("" without one).
	ClientCert string
	// Client is the client: the peer, or the address a PROXY header
	// named; then Peer is the peer that sent it (the load balancer),
	// invalid otherwise.
	Client netip.AddrPort
	Peer   netip.AddrPort
	// Start: accept, or for a later request of a kept-alive connection
	// the end of the previous one. Head: the request head was complete.
	// Granted: a server slot was granted (after a queue, if any).
	// ConnStart, Connected: the first connect attempt, and the connection
	// established (TLS included); both 0 for a reused connection.
	// Resp: the response head was received. End: the log point.
	Start, Head, Granted, ConnStart, Connected, Resp, End int64
	BytesIn                                               int64 // from the client (request heads included)
	BytesOut                                              int64 // to the client (response heads included)
	Status                                                int32 // HTTP status, 0 in tcp mode or without one
	Retries                                               int32
	HTTP                                                  bool // an http request (else a tcp connection)
	LineCut                                               bool // Line was cut at LineMax
	// Proto is the client\'s HTTP version: 10, 11 or 20 (HTTP/2); 0 in tcp mode.
	Proto   uint8
	Term    Termination
	LineLen uint16
	Line    [LineMax]byte // "METHOD target HTTP/1.x", raw (redacted by the writer)
}

// SetLine copies the request line p into e (cut at LineMax).
func (e *LogEntry) SetLine(p []byte) {
	n := copy(e.Line[:], p)
	e.LineLen = uint16(n)
	e.LineCut = n < len(p)
}

// RequestLine is the request line copied by SetLine.
func (e *LogEntry) RequestLine() []byte { return e.Line[:e.LineLen] }

// LogRing is a bounded single-producer single-consumer ring of access-log
// entries: the loop pushes (never blocks: a full ring drops the entry and
// counts it), one goroutine drains and writes the lines. Its last eighth
// is kept for abnormal entries (LogEntry.Abnormal): when the writer falls
// behind the traffic (tens of thousands of requests per second into a
// slow sink), normal entries are dropped first and an incident's 502s
// still reach the log and GET /api/v1/logs, up to that reserve per drain.
type LogRing struct {
	head    atomic.Uint64 // next entry to read (consumer)
	_       [56]byte
	tail    atomic.Uint64 // next entry to write (producer)
	dropped atomic.Uint64
	_       [48]byte
	buf     []LogEntry
	mask    uint64
	normal  uint64 // how many entries a normal entry may find before it: len(buf) less the reserve
}

// NewLogRing returns a ring of size entries rounded up to a power of two.
func NewLogRing(size int) *LogRing {
	n := 1
	for n < size {
		n <<= 1
	}
	return &LogRing{buf: make([]LogEntry, n), mask: uint64(n - 1), normal: uint64(n - n/8)}
}

// Abnormal says whether e is an entry an operator looks for after an
// incident: a status of 400 or more, or a termination other than the
// normal one (accesslog.Record.Abnormal, on the entry).
func (e *LogEntry) Abnormal() bool {
	return e.Status >= 400 || e.Term[0] != 0 && e.Term != TermNormal
}

// Push appends e, or drops it when the ring is full (producer only): a
// normal entry when all but the reserve is taken, an abnormal one when
// all is. Below the reserve it costs what it did without one: one
// comparison; the entry is looked at only above it.
func (r *LogRing) Push(e *LogEntry) bool {
	t := r.tail.Load()
	if n := t - r.head.Load(); n >= r.normal && (n >= uint64(len(r.buf)) || !e.Abnormal()) {
		r.dropped.Add(1)
		return false
	}
	r.buf[t&r.mask] = *e
	r.tail.Store(t + 1)
	return true
}

// Drain calls fn for every entry pushed so far and frees their places
// (consumer only). fn must not keep the pointer.
func (r *LogRing) Drain(fn func(e *LogEntry)) int { return r.DrainTo(r.tail.Load(), fn) }

// Tail is the position after the last entry pushed so far: what DrainTo
// drains up to (any goroutine).
func (r *LogRing) Tail() uint64 { return r.tail.Load() }

// DrainTo is Drain of the entries before position t (a Tail read
// earlier), not of those pushed since (consumer only): a writer that reads
// the tails of all the loops' rings first, then drains each up to its own,
// takes one instant's entries from every loop, whatever the time the
// draining itself takes.
func (r *LogRing) DrainTo(t uint64, fn func(e *LogEntry)) int {
	h := r.head.Load()
	for i := h; i < t; i++ {
		e := &r.buf[i&r.mask]
		fn(e)
		*e = LogEntry{}
	}
	r.head.Store(t)
	return int(t - h)
}

// Dropped is the number of entries dropped because the ring was full.
func (r *LogRing) Dropped() uint64 { return r.dropped.Load() }
