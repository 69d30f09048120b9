package stats

import (
	"net/netip"
	"sync/atomic"
)

// Termination says how a logged connection ended.
type Termination uint8

const (
	TermNormal   Termination = iota // both sides closed cleanly
	TermAbort                       // reset or I/O error
	TermTimeout                     // idle or connect timeout
	TermNoServer                    // no usable server
	TermConnect                     // every connect attempt failed
)

var termNames = [...]string{"normal", "abort", "timeout", "no_server", "connect_failed"}

func (t Termination) String() string {
	if int(t) < len(termNames) {
		return termNames[t]
	}
	return "unknown"
}

// LogEntry is one access-log record, fixed size: the strings point at the
// names of immutable runtime objects (no copy, no allocation).
type LogEntry struct {
	Frontend   string
	Backend    string
	Server     string
	Client     netip.AddrPort
	DurationNs int64
	BytesIn    int64 // client -> server
	BytesOut   int64 // server -> client
	Status     int   // HTTP status, 0 in tcp mode
	Term       Termination
	// ClientCert is the subject of the client's certificate on a TLS bind
	// with client_ca ("" without one).
	ClientCert string
}

// LogRing is a bounded single-producer single-consumer ring of access-log
// entries: the loop pushes (never blocks: a full ring drops the entry and
// counts it), one goroutine drains and writes the lines.
type LogRing struct {
	head    atomic.Uint64 // next entry to read (consumer)
	_       [56]byte
	tail    atomic.Uint64 // next entry to write (producer)
	dropped atomic.Uint64
	_       [48]byte
	buf     []LogEntry
	mask    uint64
}

// NewLogRing returns a ring of size entries rounded up to a power of two.
func NewLogRing(size int) *LogRing {
	n := 1
	for n < size {
		n <<= 1
	}
	return &LogRing{buf: make([]LogEntry, n), mask: uint64(n - 1)}
}

// Push appends e, or drops it when the ring is full (producer only).
func (r *LogRing) Push(e *LogEntry) bool {
	t := r.tail.Load()
	if t-r.head.Load() >= uint64(len(r.buf)) {
		r.dropped.Add(1)
		return false
	}
	r.buf[t&r.mask] = *e
	r.tail.Store(t + 1)
	return true
}

// Drain calls fn for every entry pushed so far and frees their places
// (consumer only). fn must not keep the pointer.
func (r *LogRing) Drain(fn func(e *LogEntry)) int {
	h, t := r.head.Load(), r.tail.Load()
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
