package proxy

import (
	"sync/atomic"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/http1"
	"github.com/spliced-proxy/spliced/core/stick"
)

// Limits per client (stick tables; config/stick.go for the model,
// core/stick for the tables). Where the data plane counts and refuses:
//
//   - at accept (Worker.accepted, before TLS and before any mux): the
//     limits with conn_cur or conn_rate (key src, track always) count the
//     connection in the client's entry; over either, the connection is
//     closed at once, in tcp and http mode alike (a 429 would need the
//     very connection the limit refuses). The entry's conn_cur is given
//     back when the client's fd closes (limitConnEnd, called where each
//     kind of client connection closes its client side; an fd handed from
//     one owner to another, h1 to h2 or to a tunnel, keeps it).
//   - per request (stream.limitRequest at the start of startRequest,
//     HTTP/1.1 and HTTP/2 alike since both are streams): the limits with
//     track always count the request (req_rate) and read the client's
//     err_rate; over either, the request is denied or tarpitted. A rule's
//     limit action does the same for its limit (stream.TrackLimit).
//   - per response (stream.limitStatus, where the status is counted for
//     the frontend): a status >= 400, the server's or the proxy's, counts
//     in err_rate of the entries the request was tracked in, except the
//     429 of a limit (a denied client is not counted twice).
//
// deny answers 429 with Retry-After (the seconds until the client's rate
// lets a request through) and closes the connection (HTTP/1.1; an HTTP/2
// stream ends, its connection stays); the access log says PR. tarpit
// holds the request tarpit_ms on the stream's own loop timer (no
// goroutine, nothing read from the client meanwhile), then answers the
// same 429; the log says PT.

// LimitKey is what identifies a client for a limit.
type LimitKey uint8

const (
	LimitBySrc    LimitKey = iota // the client's address
	LimitByHeader                 // a request header's value
	LimitByCert                   // the client certificate's SHA-256
)

// LimitRate is a compiled rate threshold; Period 0: none.
type LimitRate struct {
	Count  uint64
	Period int64 // ns
}

// Limit is one compiled limit of a frontend generation. Immutable once
// published; Table and Stats are carried over from generation to
// generation while the limit keeps its name, key and max_entries.
type Limit struct {
	Name   string
	Key    LimitKey
	Header string // LimitByHeader: the field name
	// ConnCur 0: no such limit.
	ConnCur                    int32
	ConnRate, ReqRate, ErrRate LimitRate
	Tarpit                     int64 // ns; 0: deny
	// Always: counts every connection and request (track always); else
	// only the requests a rule sends to it (TrackLimit).
	Always bool
	// Nodes, when set (scope cluster), is the number of live nodes: each
	// threshold is divided by it (at least 1 remains).
	Nodes *atomic.Int32
	Table *stick.Table
	Stats *LimitCounters
}

// LimitSet is the limits of one frontend generation, in document order
// (a rule's limit action names its limit by index: Index).
type LimitSet struct {
	List []*Limit
	conn []*Limit // counted at accept: track always with conn_cur or conn_rate
	req  []*Limit // counted per request: track always with req_rate or err_rate
	cert bool     // some limit is keyed by the client certificate
}

// NewLimitSet indexes ls (nil when empty).
func NewLimitSet(ls []*Limit) *LimitSet {
	if len(ls) == 0 {
		return nil
	}
	s := &LimitSet{List: ls}
	for _, l := range ls {
		if l.Always && (l.ConnCur > 0 || l.ConnRate.Period > 0) {
			s.conn = append(s.conn, l)
		}
		if l.Always && (l.ReqRate.Period > 0 || l.ErrRate.Period > 0) {
			s.req = append(s.req, l)
		}
		if l.Key == LimitByCert {
			s.cert = true
		}
	}
	return s
}

// Index is the position of the limit named name, -1 if none: what a
// compiled rule keeps for its limit action (compile time, not per
// request).
func (s *LimitSet) Index(name string) int {
	if s == nil {
		return -1
	}
	for i, l := range s.List {
		if l.Name == name {
			return i
		}
	}
	return -1
}

// CompileLimit builds the data plane's limit from its configuration, with
// the table and counters it keeps (carried over by the engine).
func CompileLimit(cl *config.Limit, table *stick.Table, st *LimitCounters, nodes *atomic.Int32) *Limit {
	rate := func(r *config.LimitRate) LimitRate {
		if r == nil {
			return LimitRate{}
		}
		return LimitRate{Count: uint64(r.Count), Period: int64(r.PeriodMs) * 1e6}
	}
	l := &Limit{
		Name: cl.Name, ConnCur: int32(cl.ConnCur),
		ConnRate: rate(cl.ConnRate), ReqRate: rate(cl.ReqRate), ErrRate: rate(cl.ErrRate),
		Always: cl.Track != config.LimitTrackRules,
		Table:  table, Stats: st,
	}
	switch {
	case cl.Key == config.LimitKeyCert:
		l.Key = LimitByCert
	case cl.HeaderName() != "":
		l.Key, l.Header = LimitByHeader, cl.HeaderName()
	}
	if cl.Action == config.LimitTarpit {
		l.Tarpit = int64(cl.TarpitMs) * 1e6
	}
	if cl.Scope == config.LimitScopeCluster {
		l.Nodes = nodes
	}
	return l
}

// KeyKind is the kind of the keys of l's table (stick.ParseKey).
func (l *Limit) KeyKind() stick.Kind {
	switch l.Key {
	case LimitByHeader:
		return stick.KindBytes
	case LimitByCert:
		return stick.KindCert
	}
	return stick.KindAddr
}

// Periods are the periods the entries endpoint reads l's rates over.
func (l *Limit) Periods() stick.Periods {
	return stick.NewPeriods(l.ConnRate.Period, l.ReqRate.Period, l.ErrRate.Period)
}

// Threshold is count as this node enforces it: divided by the live
// nodes for scope cluster (at least 1).
func (l *Limit) Threshold(count uint64) uint64 {
	if l.Nodes == nil {
		return count
	}
	n := uint64(max(l.Nodes.Load(), 1))
	return max(count/n, 1)
}

// LimitCounters are what a limit did, one cache-line padded slot per
// loop (each loop adds to its own).
type LimitCounters struct {
	slots []limitSlot
}

type limitSlot struct {
	// Denied: requests answered 429 at once; Tarpitted: requests held,
	// then answered 429; Refused: connections closed at accept.
	Denied, Tarpitted, Refused atomic.Int64
	_                          [64 - 3*8]byte
}

// NewLimitCounters makes the counters of a limit for nloops loops.
func NewLimitCounters(nloops int) *LimitCounters {
	return &LimitCounters{slots: make([]limitSlot, max(nloops, 1))}
}

func (c *LimitCounters) loop(id int) *limitSlot { return &c.slots[id%len(c.slots)] }

// LimitTotals are a limit's counters summed over the loops.
type LimitTotals struct{ Denied, Tarpitted, Refused int64 }

// Total sums the slots (any goroutine).
func (c *LimitCounters) Total() LimitTotals {
	var t LimitTotals
	for i := range c.slots {
		s := &c.slots[i]
		t.Denied += s.Denied.Load()
		t.Tarpitted += s.Tarpitted.Load()
		t.Refused += s.Refused.Load()
	}
	return t
}

// Connections (accept).

// connHold is what a client connection holds in its limits' entries:
// the conn_cur it counts, given back when its fd closes.
type connHold struct {
	refs [config.MaxLimitsPerFrontend]stick.Ref
	n    int
	gen  uint32 // bumped each time the hold is taken for a connection
}

// limitState is a worker's side of the limits: the holds of its client
// connections by fd (a slice, not a map: allocated only once a frontend
// with connection limits accepts, grown to the highest fd seen).
type limitState struct {
	byFd []*connHold
	free []*connHold
}

// limitConn counts the connection accepted on fd (client pp) in the
// frontend's connection limits; false when the client is over one: then
// the fd is closed, the frontend's slot given back and the PROXY header's
// data dropped.
func (w *Worker) limitConn(fd int, fe *Frontend, pp uint32) bool {
	ls := fe.Limits
	key := stick.AddrKey(w.clientAddr(fd, pp).Addr())
	now := w.L.Now()
	st := &w.lim
	if fd >= len(st.byFd) {
		st.byFd = append(st.byFd, make([]*connHold, fd+1-len(st.byFd))...)
	}
	if old := st.byFd[fd]; old != nil {
		w.limitConnEnd(fd) // a close this side did not see: give it back now
	}
	h := popFree(&st.free)
	if h == nil {
		h = &connHold{}
	}
	h.gen++
	for _, l := range ls.conn {
		r := l.Table.Track(&key, now)
		if !r.Valid() {
			continue // the table could not place the client: not limited
		}
		n := r.Acquire()
		for tries := 0; n == 0 && tries < 3; tries++ {
			// The entry went to another key between Track and Acquire.
			r = l.Table.Track(&key, now)
			if !r.Valid() {
				break
			}
			n = r.Acquire()
		}
		if n == 0 {
			continue
		}
		h.refs[h.n] = r
		h.n++
		over := l.ConnCur > 0 && uint64(n) > l.Threshold(uint64(l.ConnCur))
		if l.ConnRate.Period > 0 {
			if r.Hit(stick.CtrConn, now, l.ConnRate.Period) > l.Threshold(l.ConnRate.Count) {
				over = true
			}
		}
		if over {
			l.Stats.loop(w.id).Refused.Add(1)
			fe.Stats.Loop(w.id).Denied.Add(1)
			w.releaseHold(h)
			w.dropCarried(pp)
			plainTransport().close(fd, true)
			if fe.OnClose != nil {
				fe.OnClose(w.id)
			}
			return false
		}
	}
	if h.n == 0 {
		st.free = append(st.free, h)
		return true
	}
	st.byFd[fd] = h
	return true
}

func (w *Worker) releaseHold(h *connHold) {
	for i := 0; i < h.n; i++ {
		h.refs[i].Release()
		h.refs[i] = stick.Ref{}
	}
	h.n = 0
	w.lim.free = append(w.lim.free, h)
}

// limitConnEnd gives back what the client connection on fd holds in its
// limits (nothing when it holds nothing): called where a client side
// closes, before its fd does.
func (w *Worker) limitConnEnd(fd int) {
	st := &w.lim
	if fd < 0 || fd >= len(st.byFd) {
		return
	}
	if h := st.byFd[fd]; h != nil {
		st.byFd[fd] = nil
		w.releaseHold(h)
	}
}

// limitHoldOf is what the connection on fd holds now and its
// generation: a TLS handshake that fails gives exactly that back
// (limitConnEndIf), since its fd was closed by the handshake pool and
// its number may already serve another connection.
func (w *Worker) limitHoldOf(fd int) (*connHold, uint32) {
	if fd < 0 || fd >= len(w.lim.byFd) || w.lim.byFd[fd] == nil {
		return nil, 0
	}
	h := w.lim.byFd[fd]
	return h, h.gen
}

// limitConnEndIf is limitConnEnd when fd still holds h of generation gen.
func (w *Worker) limitConnEndIf(fd int, h *connHold, gen uint32) {
	if h != nil && fd < len(w.lim.byFd) && w.lim.byFd[fd] == h && h.gen == gen {
		w.limitConnEnd(fd)
	}
}

// Requests.

// phTarpit is the phase of a stream held by a tarpit: its timer answers
// 429 (limitTarpitEnd); the client's events do nothing meanwhile.
const phTarpit uint8 = 100

// streamLimits are the entries a request was counted in, for err_rate
// when its status is known, and its answer's Retry-After. A stream takes
// one the first time a limit counts one of its requests and keeps it
// while it is recycled (the stream itself stays in its size class).
type streamLimits struct {
	refs  [config.MaxLimitsPerFrontend]stick.Ref
	lims  [config.MaxLimitsPerFrontend]*Limit
	n     uint8
	retry int32 // Retry-After of the 429 answered (seconds), 0: no limit answered
	// at is the reqAt of the request the refs were counted for: a stream
	// is recycled for any request of its loop, and one cut before its
	// status (an HTTP/2 stream reset while tarpitted) must leave nothing
	// that the next request's status (a head refused with 400 before any
	// limit saw it) would count.
	at int64
}

// limitRequest counts the request that starts in the frontend's limits
// with track always; true when one of them ended it (denied, or held by
// a tarpit): startRequest returns at once.
func (c *stream) limitRequest() bool {
	if c.lim != nil {
		c.lim.n, c.lim.retry, c.lim.at = 0, 0, c.reqAt
	}
	ls := c.fe.Limits
	if ls == nil {
		return false
	}
	for _, l := range ls.req {
		if c.trackLimit(l) {
			return true
		}
	}
	return false
}

// TrackLimit is the hook of a rule's limit action: it counts the request
// in limit i of the request's frontend generation (LimitSet.Index of the
// same generation) and applies the limit's action when the client is
// over it. It returns true when the request was ended (429 answered or
// tarpit started): the caller stops processing the request and returns
// from startRequest at once, touching nothing more of the stream. A
// request without the limit's key (a header key absent, no client
// certificate), or an index out of range, is not limited. Loop thread,
// during startRequest (before the head is consumed: header keys are read
// from it).
func (c *stream) TrackLimit(i int) bool {
	ls := c.fe.Limits
	if ls == nil || i < 0 || i >= len(ls.List) {
		return false
	}
	return c.trackLimit(ls.List[i])
}

func (c *stream) trackLimit(l *Limit) bool {
	key, ok := c.limitKey(l)
	if !ok {
		return false
	}
	now := c.w.L.Now()
	r := l.Table.Track(&key, now)
	if !r.Valid() {
		return false
	}
	if c.lim == nil {
		c.lim = &streamLimits{at: c.reqAt} // once per stream object: streams are recycled
	}
	if int(c.lim.n) < len(c.lim.refs) {
		c.lim.refs[c.lim.n], c.lim.lims[c.lim.n] = r, l
		c.lim.n++
	}
	var wait int64
	over := false
	if p := l.ReqRate.Period; p > 0 {
		lim := l.Threshold(l.ReqRate.Count)
		if r.Hit(stick.CtrReq, now, p) > lim {
			over, wait = true, r.Wait(stick.CtrReq, now, p, lim)
		}
	}
	if p := l.ErrRate.Period; p > 0 {
		lim := l.Threshold(l.ErrRate.Count)
		if r.Rate(stick.CtrErr, now, p) > lim {
			over, wait = true, max(wait, r.Wait(stick.CtrErr, now, p, lim))
		}
	}
	if !over {
		return false
	}
	c.limited(l, wait)
	return true
}

// limitKey is the request's key for l (false: the request has none).
func (c *stream) limitKey(l *Limit) (stick.Key, bool) {
	var k stick.Key
	switch l.Key {
	case LimitBySrc:
		if !c.cl.peer.IsValid() {
			return k, false
		}
		k = stick.AddrKey(c.cl.peer)
	case LimitByHeader:
		v, ok := c.req.Get((*c.pin).Data(), l.Header)
		if !ok {
			return k, false
		}
		k = stick.BytesKey(v)
	case LimitByCert:
		cc := c.cl.cert
		if cc == nil || !cc.hasSum {
			return k, false
		}
		k = stick.CertKey(&cc.sum)
	}
	return k, !k.IsZero()
}

// limited applies l's action to the request over it; wait is how long
// (ns) the client must stay quiet for its next request to pass.
func (c *stream) limited(l *Limit, wait int64) {
	c.lim.retry = int32(min(max((wait+999_999_999)/1e9, 1), 86400))
	if l.Tarpit > 0 {
		l.Stats.loop(c.w.id).Tarpitted.Add(1)
		c.fs.Denied.Add(1)
		c.blame('P', 'T')
		c.phase = phTarpit
		c.arm(c.w.L.Now() + l.Tarpit)
		return
	}
	l.Stats.loop(c.w.id).Denied.Add(1)
	c.fs.Denied.Add(1)
	c.blame('P', 'R')
	c.fail(429)
}

// limitTarpitEnd: the tarpit's time is over, the request gets its 429.
func (c *stream) limitTarpitEnd() { c.fail(429) }

// limitStatus counts a response's status in err_rate of the entries the
// request was tracked in (once per request).
func (c *stream) limitStatus(status int) {
	if c.lim == nil {
		return
	}
	n := c.lim.n
	if n == 0 {
		return
	}
	c.lim.n = 0
	if c.lim.at != c.reqAt || c.reqAt == 0 {
		return // the refs of another request (see streamLimits.at)
	}
	if status < 400 || status == 429 && c.lim.retry != 0 {
		return
	}
	now := c.w.L.Now()
	for i := uint8(0); i < n; i++ {
		if p := c.lim.lims[i].ErrRate.Period; p > 0 {
			c.lim.refs[i].Hit(stick.CtrErr, now, p)
		}
	}
}

// appendAnswer appends the proxy's answer of status: a rule's answer
// (http_rules.go), a limit's 429 with its Retry-After, else http1's error
// answer; to a HEAD, its head only (RFC 9110 §9.3.2: its Content-Length
// says what a GET would get; a body would read as the next response on
// the client's connection).
func (c *stream) appendAnswer(dst []byte, status int) []byte {
	n := len(dst)
	if c.w.acmeAnswer != "" {
		dst = c.appendACMEAnswer(dst) // acme.go: an http-01 key authorization
	} else if d, ok := c.appendRuleAnswer(dst); ok { // http_rules.go: a rule's deny or redirect
		dst = d
	} else if status == 429 && c.lim != nil && c.lim.retry > 0 {
		dst = http1.AppendTooManyRequests(dst, int(c.lim.retry))
	} else {
		dst = http1.AppendError(dst, status)
	}
	if c.req != nil && c.req.MethodID == http1.MethodHEAD {
		for i := n; i+4 <= len(dst); i++ {
			if dst[i] == '\r' && dst[i+1] == '\n' && dst[i+2] == '\r' && dst[i+3] == '\n' {
				return dst[:i+4]
			}
		}
	}
	return dst
}

// setSum records the client certificate's SHA-256 (limits keyed by
// tls_client_cert).
func (cc *clientCert) setSum(sum [32]byte) {
	cc.sum, cc.hasSum = sum, true
}

// NewLimitTable makes the table of limit cl (max_entries, expire_ms).
func NewLimitTable(cl *config.Limit) *stick.Table {
	return stick.New(cl.MaxEntries, int64(cl.ExpireMs)*1e6)
}
