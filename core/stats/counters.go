package stats

import (
	"sync/atomic"
	"unsafe"
)

// StatusClasses is the number of HTTP status classes counted: index 0 is
// "other" (below 100 or above 599), 1..5 are 1xx..5xx.
const StatusClasses = 6

// slotFields are the counters of one object on one loop.
type slotFields struct {
	ConnTotal     atomic.Int64 // connections started
	ConnCur       atomic.Int64 // connections alive (incremented and decremented by the same loop)
	BytesIn       atomic.Int64 // client -> server bytes of closed connections / finished requests
	BytesOut      atomic.Int64 // server -> client bytes
	ConnectErrors atomic.Int64 // failed connect attempts (refused, unreachable, timed out)
	// ResponseErrors are responses a server spoiled (HAProxy's eresp): a
	// bad or cut response, or none within server_ms.
	ResponseErrors atomic.Int64
	Retries        atomic.Int64 // connect attempts after the first
	NoServer       atomic.Int64 // connections closed because no server was usable
	Timeouts       atomic.Int64 // connections closed by a timeout
	Aborts         atomic.Int64 // connections closed by a reset or I/O error
	Requests       atomic.Int64 // HTTP requests (http mode)
	Denied         atomic.Int64 // connections or requests refused by a rule or a limit
	// Rules: requests (tcp: connections) a rule denied, requests a rule
	// redirected, requests and responses a rule's header or path action
	// changed (once each, however many rules acted).
	RuleDenied    atomic.Int64
	RuleRedirects atomic.Int64
	RuleRewrites  atomic.Int64
	Errors        atomic.Int64 // malformed requests (http mode)
	Queue         atomic.Int64 // connections waiting for a server slot (gauge)
	// Status counts HTTP responses by class: [0] other, [1] 1xx .. [5] 5xx.
	Status [StatusClasses]atomic.Int64
	// ConnectNs / ConnectCount: time from connect(2) to the established
	// connection, summed, and the number of connects measured.
	ConnectNs    atomic.Int64
	ConnectCount atomic.Int64
	// RespNs / RespCount: time from the request sent to the response
	// headers received (http mode), summed, and the number measured.
	RespNs    atomic.Int64
	RespCount atomic.Int64
	ConnRate  Rate // connections per second
	ReqRate   Rate // requests per second
	// TLS handshakes of a frontend's terminating binds: full, resumed
	// (from a session ticket), failed (timeouts included, also counted
	// in TLSTimeouts).
	TLSFull     atomic.Int64
	TLSResumed  atomic.Int64
	TLSFailed   atomic.Int64
	TLSTimeouts atomic.Int64
	// PROXY protocol headers on a frontend's binds with accept_proxy:
	// read and accepted, connections refused because their peer is not
	// trusted, headers refused (malformed, truncated, oversized, or not a
	// header at all), and headers that did not come within handshake_ms.
	ProxyAccepted atomic.Int64
	ProxyRefused  atomic.Int64
	ProxyInvalid  atomic.Int64
	ProxyTimeouts atomic.Int64
	// HTTP/2 client connections of a frontend: open now (gauge); streams
	// opened (requests) and open now (gauge); streams refused
	// (REFUSED_STREAM for concurrency, or a 431 for a head too large);
	// RST_STREAM frames sent and received.
	H2ConnCur        atomic.Int64
	H2Streams        atomic.Int64
	H2StreamsCur     atomic.Int64
	H2StreamsRefused atomic.Int64
	H2ResetsSent     atomic.Int64
	H2ResetsReceived atomic.Int64
}

// cacheLine is the unit of false sharing on the machines we run on.
const cacheLine = 64

// slotPad makes a Slot a whole number of cache lines with at least one
// spare line after the fields, so two slots' counters never share a line
// whatever the alignment of the slice that holds them.
const slotPad = (cacheLine-(unsafe.Sizeof(slotFields{})+unsafe.Sizeof(uintptr(0)))%cacheLine)%cacheLine + cacheLine

// Slot is one loop's share of an object's counters. Only the owning loop
// writes it.
type Slot struct {
	slotFields
	// owner is the Counters the slot belongs to (set before the slot is
	// published): ConnStarted and ReqStarted fold a finished second of
	// every loop into its peaks.
	owner *Counters
	_     [slotPad]byte
}

// Status counts one response with HTTP status code code (owning loop).
func (s *Slot) CountStatus(code int) {
	c := code / 100
	if c < 1 || c > 5 {
		c = 0
	}
	s.Status[c].Add(1)
}

// ConnStarted counts a connection in the connection rate of second sec
// (owning loop). The first event of a new second folds the second that
// ended into the object's conn_rate_max (Counters.foldSecond): at most once
// a second per loop, a few atomic loads per loop; no allocation, no lock.
func (s *Slot) ConnStarted(sec uint32) {
	if done, n, ok := s.ConnRate.add(sec); ok && s.owner != nil {
		s.owner.foldSecond(s, rateConn, done, n)
	}
}

// ReqStarted is ConnStarted for the request rate and req_rate_max.
func (s *Slot) ReqStarted(sec uint32) {
	if done, n, ok := s.ReqRate.add(sec); ok && s.owner != nil {
		s.owner.foldSecond(s, rateReq, done, n)
	}
}

const (
	rateConn = iota
	rateReq
)

func (s *Slot) rate(which int) *Rate {
	if which == rateConn {
		return &s.ConnRate
	}
	return &s.ReqRate
}

// Counters is the counter set of one object: one Slot per loop. A loop
// that did not exist when the counters were made (nbthread grew, or a zero
// Counters in tests) gets its own slot on its first Loop call: the slot
// list is copied on write and published with a CAS, and the Slots
// themselves never move, so no count is lost while it grows.
type Counters struct {
	slots   atomic.Pointer[[]*Slot]
	timings atomic.Pointer[[]*TimingSlot] // backends only (hist.go)
	// rateMax are the peaks of the connection and request rates, per
	// second, of all loops together (HAProxy's conn_rate_max and
	// req_rate_max): raised by the loops when a second ends
	// (foldSecond) and by readers (Total). Written at most once a
	// second per loop: no contention on the traffic path.
	rateMax [2]atomic.Int64
}

// New returns counters with one slot per loop.
func New(nloops int) *Counters {
	c := new(Counters)
	ss := make([]*Slot, max(nloops, 0))
	for i := range ss {
		ss[i] = &Slot{owner: c}
	}
	c.slots.Store(&ss)
	return c
}

// Loop returns the slot of loop id. The caller must be that loop's thread
// (or hold the only reference, in tests). The first call for a loop beyond
// the slots made so far allocates its slot (once per object and loop).
func (c *Counters) Loop(id int) *Slot {
	if l := c.slots.Load(); l != nil && uint(id) < uint(len(*l)) {
		return (*l)[id] // the common case first: no closure
	}
	return grow(&c.slots, id, func(s *Slot) { s.owner = c })
}

// loopSlot returns loop id's element of the list p points to, growing the
// list when id is beyond it; init prepares each new element before it is
// published.
func loopSlot[T any](p *atomic.Pointer[[]*T], id int, init func(*T)) *T {
	if l := p.Load(); l != nil && uint(id) < uint(len(*l)) {
		return (*l)[id]
	}
	return grow(p, id, init)
}

// grow publishes a list with an element for every loop up to id, keeping
// the elements already there; concurrent growers retry on the list that
// won.
func grow[T any](p *atomic.Pointer[[]*T], id int, init func(*T)) *T {
	for {
		l := p.Load()
		var old []*T
		if l != nil {
			old = *l
		}
		if id < len(old) {
			return old[id]
		}
		ss := make([]*T, id+1)
		copy(ss, old)
		for i := len(old); i < len(ss); i++ {
			ss[i] = new(T)
			if init != nil {
				init(ss[i])
			}
		}
		if p.CompareAndSwap(l, &ss) {
			return ss[id]
		}
	}
}

// Totals is the sum of an object's slots at one instant (each field read
// once; fields are individually, not mutually, consistent).
type Totals struct {
	ConnTotal      int64                `json:"conn_total"`
	ConnCur        int64                `json:"conn_cur"`
	ConnRate       float64              `json:"conn_rate"`
	Requests       int64                `json:"requests"`
	ReqRate        float64              `json:"req_rate"`
	ConnRateMax    int64                `json:"conn_rate_max"`
	ReqRateMax     int64                `json:"req_rate_max"`
	BytesIn        int64                `json:"bytes_in"`
	BytesOut       int64                `json:"bytes_out"`
	Denied         int64                `json:"denied"`
	Errors         int64                `json:"errors"`
	ConnectErrors  int64                `json:"connect_errors"`
	ResponseErrors int64                `json:"response_errors"`
	Retries        int64                `json:"retries"`
	NoServer       int64                `json:"no_server"`
	Timeouts       int64                `json:"timeouts"`
	Aborts         int64                `json:"aborts"`
	Queue          int64                `json:"queue"`
	Status         [StatusClasses]int64 `json:"-"`
	ConnectNs      int64                `json:"-"`
	ConnectCount   int64                `json:"-"`
	RespNs         int64                `json:"-"`
	RespCount      int64                `json:"-"`
	TLSFull        int64                `json:"-"`
	TLSResumed     int64                `json:"-"`
	TLSFailed      int64                `json:"-"`
	TLSTimeouts    int64                `json:"-"`
	ProxyAccepted  int64                `json:"-"`
	ProxyRefused   int64                `json:"-"`
	ProxyInvalid   int64                `json:"-"`
	ProxyTimeouts  int64                `json:"-"`
	H2ConnCur      int64                `json:"-"`
	H2Streams      int64                `json:"-"`
	H2StreamsCur   int64                `json:"-"`
	H2Refused      int64                `json:"-"`
	H2ResetsSent   int64                `json:"-"`
	H2ResetsRecv   int64                `json:"-"`
	RuleDenied     int64                `json:"-"`
	RuleRedirects  int64                `json:"-"`
	RuleRewrites   int64                `json:"-"`
}

// Total sums the slots. nowNs is the reader's clock in the loops' time base
// (loop.Mono()), for the rates.
func (c *Counters) Total(nowNs int64) Totals {
	var t Totals
	sec, frac := clock(nowNs)
	add := func(s *Slot) {
		t.ConnTotal += s.ConnTotal.Load()
		t.ConnCur += s.ConnCur.Load()
		t.BytesIn += s.BytesIn.Load()
		t.BytesOut += s.BytesOut.Load()
		t.ConnectErrors += s.ConnectErrors.Load()
		t.ResponseErrors += s.ResponseErrors.Load()
		t.Retries += s.Retries.Load()
		t.NoServer += s.NoServer.Load()
		t.Timeouts += s.Timeouts.Load()
		t.Aborts += s.Aborts.Load()
		t.Requests += s.Requests.Load()
		t.Denied += s.Denied.Load()
		t.RuleDenied += s.RuleDenied.Load()
		t.RuleRedirects += s.RuleRedirects.Load()
		t.RuleRewrites += s.RuleRewrites.Load()
		t.Errors += s.Errors.Load()
		t.Queue += s.Queue.Load()
		for i := range s.Status {
			t.Status[i] += s.Status[i].Load()
		}
		t.ConnectNs += s.ConnectNs.Load()
		t.ConnectCount += s.ConnectCount.Load()
		t.RespNs += s.RespNs.Load()
		t.RespCount += s.RespCount.Load()
		t.TLSFull += s.TLSFull.Load()
		t.TLSResumed += s.TLSResumed.Load()
		t.TLSFailed += s.TLSFailed.Load()
		t.TLSTimeouts += s.TLSTimeouts.Load()
		t.ProxyAccepted += s.ProxyAccepted.Load()
		t.ProxyRefused += s.ProxyRefused.Load()
		t.ProxyInvalid += s.ProxyInvalid.Load()
		t.ProxyTimeouts += s.ProxyTimeouts.Load()
		t.H2ConnCur += s.H2ConnCur.Load()
		t.H2Streams += s.H2Streams.Load()
		t.H2StreamsCur += s.H2StreamsCur.Load()
		t.H2Refused += s.H2StreamsRefused.Load()
		t.H2ResetsSent += s.H2ResetsSent.Load()
		t.H2ResetsRecv += s.H2ResetsReceived.Load()
		t.ConnRate += s.ConnRate.read(sec, frac)
		t.ReqRate += s.ReqRate.read(sec, frac)
	}
	if p := c.slots.Load(); p != nil {
		for _, s := range *p {
			add(s)
		}
	}
	// The reader folds too: the second that just ended (a burst that no
	// later event of its loops folded), and the rate shown now, so that a
	// peak is never below the rate beside it.
	t.ConnRateMax = c.foldRead(rateConn, sec, t.ConnRate)
	t.ReqRateMax = c.foldRead(rateReq, sec, t.ReqRate)
	return t
}

// foldSecond raises the peak of rate which with second sec, which has
// ended on loop slot self with own events there: the sum of every loop's
// count of that second. A loop still in sec adds what it has so far (it
// folds again when its own second ends); a loop that had events in two
// other seconds since has lost its count of sec (Rate keeps one second
// back): the peak may then be low by that loop's share, never high.
func (c *Counters) foldSecond(self *Slot, which int, sec uint32, own uint32) {
	sum := int64(own)
	if p := c.slots.Load(); p != nil {
		for _, s := range *p {
			if s != self {
				sum += int64(s.rate(which).countAt(sec))
			}
		}
	}
	raiseMax(&c.rateMax[which], sum)
}

// foldRead raises the peak of rate which with every second the loops still
// know (each one's last two seconds with events: a burst that nothing
// followed stays known however late it is read) and with now (the rate
// over the last second as read), and returns it. Readers only: O(loops²).
func (c *Counters) foldRead(which int, sec uint32, now float64) int64 {
	best := int64(now + 0.5)
	if p := c.slots.Load(); p != nil {
		for _, s := range *p {
			r := s.rate(which)
			for _, w := range [2]uint64{r.cur.Load(), r.prev.Load()} {
				at := uint32(w >> 32)
				if w&0xffffffff == 0 || at == sec { // the second in progress: now covers it
					continue
				}
				var sum int64
				for _, o := range *p {
					sum += int64(o.rate(which).countAt(at))
				}
				best = max(best, sum)
			}
		}
	}
	raiseMax(&c.rateMax[which], best)
	return c.rateMax[which].Load()
}

// raiseMax stores v in m when it is larger (lock-free: a CAS only when the
// peak moves, which a steady rate or count does not).
func raiseMax(m *atomic.Int64, v int64) {
	for {
		cur := m.Load()
		if v <= cur || m.CompareAndSwap(cur, v) {
			return
		}
	}
}

// RaiseMax is raiseMax for the peaks kept outside Counters (a frontend's
// connection limit, a server's and a backend's slots): any goroutine.
func RaiseMax(m *atomic.Int64, v int64) { raiseMax(m, v) }

// Rate counts events per second (HAProxy's freq_ctr). cur packs the second
// (high 32 bits) and the count of that second (low 32 bits) in one word so
// the owning loop updates both with one store; prev is the word cur held
// before its second changed (the last second with events before the
// current one, whichever it was): the rate reads it when it is the second
// just before, the peaks whatever it is.
type Rate struct {
	cur  atomic.Uint64
	prev atomic.Uint64
}

// Sec converts a loop clock value (ns) to the second Rate.Add takes.
func Sec(nowNs int64) uint32 { return uint32(nowNs / 1e9) }

func clock(nowNs int64) (sec uint32, frac float64) {
	return Sec(nowNs), float64(nowNs%1e9) / 1e9
}

// Add counts one event in second sec (owning loop only).
func (r *Rate) Add(sec uint32) { r.add(sec) }

// add is Add; when sec starts a new second it also returns the second that
// ended and its count (ok true), for the peaks.
func (r *Rate) add(sec uint32) (done uint32, n uint32, ok bool) {
	v := r.cur.Load()
	if s := uint32(v >> 32); s != sec {
		// Publish prev before cur: a reader that sees the new second in
		// cur also sees the matching prev.
		r.prev.Store(v)
		done, n, ok = s, uint32(v), v != 0
		v = uint64(sec) << 32
	}
	r.cur.Store(v + 1)
	return done, n, ok
}

// countAt is the number of events counted in second sec, if the rate
// still knows it (sec is its current second or the one before).
func (r *Rate) countAt(sec uint32) uint64 {
	if v := r.cur.Load(); uint32(v>>32) == sec {
		return v & 0xffffffff
	}
	if v := r.prev.Load(); uint32(v>>32) == sec {
		return v & 0xffffffff
	}
	return 0
}

// read is the rate over the last second as seen at second sec plus frac.
func (r *Rate) read(sec uint32, frac float64) float64 {
	v := r.cur.Load()
	s, n := uint32(v>>32), float64(v&0xffffffff)
	switch {
	case s == sec:
		if p := r.prev.Load(); uint32(p>>32)+1 == sec {
			n += float64(p&0xffffffff) * (1 - frac)
		}
		return n
	case s+1 == sec:
		return n * (1 - frac)
	}
	return 0
}

// Read is the rate over the last second at clock nowNs (any goroutine).
func (r *Rate) Read(nowNs int64) float64 {
	sec, frac := clock(nowNs)
	return r.read(sec, frac)
}
