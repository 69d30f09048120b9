// Package accesslog turns the data plane's access-log entries
// (stats.LogEntry, filled by the loops) into records and lines: it
// derives HAProxy's timers, redacts the request line, writes one line per
// entry through a slog.Logger (JSON or text, to stderr, a file or syslog:
// sinks.go), keeps the last entries for GET /api/v1/logs and hands each
// new one to the subscribers of the event stream. Three rings keep
// records for GET /api/v1/logs: the last entries, and beside them the last
// abnormal ones (Abnormal: status >= 400, or a termination other than
// "--") so that an incident stays findable after thousands of normal
// requests — in two rings, the server side's faults (ServerSide: a 5xx,
// an end blamed on the server or the proxy) apart from the client side's
// (a 4xx, a client's abort), so that a flood of bad requests or of 404s
// cannot push an incident's 502s out; Query selects among all three
// (filter.go).
//
// Threads: Add, Flush and Write are called by one goroutine, the engine's
// access-log writer (core/engine), never by a loop; Recent and Subscribe by any
// goroutine. Nothing here runs on a loop thread.
package accesslog

import (
	"cmp"
	"context"
	"log/slog"
	"math"
	"slices"
	"sync"
	"time"

	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/redact"
)

// KeepDefault is how many of the last entries Recent can return: at 1000
// requests per second, the last second; about 500 KB.
const KeepDefault = 1000

// KeepAbnormalDefault is how many of the last abnormal entries of each
// side (server, client: Record.ServerSide) are kept beside them: an
// incident's errors outlive the normal traffic that follows (at 1 error
// per 100 requests, the last 100 000 requests), and the client side's
// cannot take the server side's room; about 500 KB per side.
const KeepAbnormalDefault = 1000

// KeepAbnormalMax bounds --access-log-keep-abnormal: about 50 MB per side.
const KeepAbnormalMax = 100_000

// Record is one access-log entry as the API and the lines show it.
// Timers are HAProxy's, in milliseconds, -1 when the phase was not
// reached: tq_ms the request head (from the accept, or from the end of the
// previous request on a kept-alive connection), tw_ms the wait for a
// server slot (queue), tc_ms the connect (-1 for a reused connection),
// tr_ms the server's response head from when the request could go to it,
// ta_ms the whole request (tcp: the connection).
type Record struct {
	Time     time.Time `json:"time" example:"2026-12-01T20:53:44.123Z"` // when the request (tcp: the connection) began
	Mode     string    `json:"mode" example:"http"`                     // http or tcp
	Frontend string    `json:"frontend" example:"public"`
	Backend  string    `json:"backend" example:"web"`
	Server   string    `json:"server" example:"s1"`
	// Client is the client's address and port: on a bind with
	// accept_proxy, the one its PROXY header named.
	Client string `json:"client" example:"192.0.2.7:51234"`
	// Peer is the address and port of the load balancer that sent a
	// PROXY header naming Client (absent without one).
	Peer string `json:"peer,omitempty" example:"10.0.0.5:40123"`
	// Request is the request line, credentials redacted (userinfo, the
	// access_token and token query parameters, values starting with
	// spliced_), cut at 256 bytes (a cut piece that holds spliced_ is
	// replaced whole); "" in tcp mode.
	Request string `json:"request" example:"GET /index.html HTTP/1.1"`
	// Proto is the HTTP version the client spoke: HTTP/1.0, HTTP/1.1 or
	// HTTP/2 ("" in tcp mode).
	Proto string `json:"proto,omitempty" example:"HTTP/2"`
	// Status is the HTTP status sent to the client (0: none, tcp).
	Status   int   `json:"status" example:"200"`
	TqMs     int64 `json:"tq_ms" example:"0"`
	TwMs     int64 `json:"tw_ms" example:"0"`
	TcMs     int64 `json:"tc_ms" example:"1"`
	TrMs     int64 `json:"tr_ms" example:"3"`
	TaMs     int64 `json:"ta_ms" example:"4"`
	BytesIn  int64 `json:"bytes_in" example:"78"`
	BytesOut int64 `json:"bytes_out" example:"512"`
	Retries  int   `json:"retries" example:"0"`
	// Termination is HAProxy's two-letter termination state: who ended
	// the request ('-' normal, C client, S server, P proxy, R resource, K
	// stop, c client timeout, s server timeout) and in which phase (R
	// request, Q queue, C connect, H response headers, D data, '-' normal).
	Termination string `json:"termination" example:"--"`
	// ClientCert is the subject of the client's TLS certificate.
	ClientCert string `json:"client_cert,omitempty" example:"CN=alice"`
}

// Log writes the access-log lines and keeps the last records.
type Log struct {
	out  *slog.Logger
	mono func() int64 // the clock of the entries' times (loop.Mono)

	batch []pending // Add'ed, not flushed yet (writer goroutine only)

	unwritten uint64 // lines a sink failed to take (writer goroutine only)
	lastErr   error  // the last sink's error (writer goroutine only)

	mu     sync.Mutex
	seq    uint64 // records kept so far: the seq of the last one
	recent ring   // the last records
	server ring   // the last abnormal records of the server side (Record.ServerSide)
	client ring   // the last other abnormal records (the client side's)
	subs   map[chan Record]struct{}
}

// New returns a Log that writes a line per entry to out (message
// "access") and keeps the last keep records (KeepDefault when keep <= 0)
// and the last keepAbnormal abnormal ones of each side, server and client
// (KeepAbnormalDefault when keepAbnormal <= 0). mono is the monotonic clock the entries' times were
// read from (the data plane's loop.Mono): it is handed in so that this
// package, which the admin API imports, does not depend on the data plane.
func New(out *slog.Logger, keep, keepAbnormal int, mono func() int64) *Log {
	if keep <= 0 {
		keep = KeepDefault
	}
	if keepAbnormal <= 0 {
		keepAbnormal = KeepAbnormalDefault
	}
	return &Log{out: out, mono: mono, recent: newRing(keep),
		server: newRing(keepAbnormal), client: newRing(keepAbnormal),
		subs: make(map[chan Record]struct{})}
}

// Kept is how many records the Log can hold: the last entries and the
// last abnormal ones of each side (the bound of Query's limit).
func (l *Log) Kept() int { return len(l.recent.recs) + len(l.server.recs) + len(l.client.recs) }

// kept is a record in a ring, with its place in the order records were
// kept (a record held by two rings, the last entries' and an abnormal
// one, has one seq).
type kept struct {
	seq uint64
	r   Record
}

// ring is a fixed-size ring of records: the newest overwrites the oldest.
// Its slice is allocated once (New); push copies a record into it, so
// keeping one allocates nothing.
type ring struct {
	recs []kept
	next int // where the next record goes
	n    int // records held (up to len(recs))
}

func newRing(size int) ring { return ring{recs: make([]kept, size)} }

func (g *ring) push(seq uint64, r *Record) {
	g.recs[g.next] = kept{seq: seq, r: *r}
	if g.next++; g.next == len(g.recs) {
		g.next = 0
	}
	g.n = min(g.n+1, len(g.recs))
}

// newest returns the i-th newest record (0: the newest; i < n).
func (g *ring) newest(i int) *kept {
	j := g.next - 1 - i
	if j < 0 {
		j += len(g.recs)
	}
	return &g.recs[j]
}

// pending is a record of the current batch and when its entry ended.
type pending struct {
	end int64
	r   Record
}

// Add takes e into the current batch (the writer goroutine only; e is not
// kept): the engine adds what every loop's ring holds, then flushes.
func (l *Log) Add(e *stats.LogEntry) {
	l.batch = append(l.batch, pending{end: e.End, r: RecordOf(e, time.Now(), l.mono())})
}

// Flush writes the lines of the batch in the order its entries ended
// (each loop's ring is in order; this merges the loops), keeps their
// records and sends them to the subscribers (the writer goroutine only).
func (l *Log) Flush() { l.FlushBefore(math.MaxInt64) }

// FlushBefore is Flush of the entries of the batch that ended at or
// before cut (a loop.Mono time); the others stay in the batch, for a
// later flush, ahead of what is added meanwhile.
//
// The writer flushes what ended at least one drain period ago: a loop
// stamps an entry's end (its round's time) before it pushes it, and a
// loop thread the kernel preempts between the last write of a response
// and the push can push it after the client's next request, served by
// another loop, was pushed, drained and written. Holding back what
// ended within the last period orders the two unless that preemption
// outlasts the period (TestUILogsPage saw "… 478, 476, 477 …" on a
// loaded machine before).
func (l *Log) FlushBefore(cut int64) {
	b := l.batch
	slices.SortStableFunc(b, func(x, y pending) int { return cmp.Compare(x.end, y.end) })
	n, _ := slices.BinarySearchFunc(b, cut, func(p pending, t int64) int {
		if p.end <= t {
			return -1
		}
		return 1
	})
	for i := range b[:n] {
		l.line(&b[i].r)
	}
	l.mu.Lock()
	for i := range b[:n] {
		r := &b[i].r
		l.keep(r)
		for ch := range l.subs {
			select {
			case ch <- *r:
			default: // a subscriber that does not keep up loses records, never blocks the writer
			}
		}
	}
	l.mu.Unlock()
	left := copy(b, b[n:])
	clear(b[left:])
	l.batch = b[:left]
}

// Write is Add and Flush of one entry.
func (l *Log) Write(e *stats.LogEntry) {
	l.Add(e)
	l.Flush()
}

// Unwritten is how many lines a sink failed to take so far (a full disk,
// an unreachable syslog) and the last error (the writer goroutine only).
func (l *Log) Unwritten() (uint64, error) { return l.unwritten, l.lastErr }

// keep puts r in the ring of the last records, and when it is abnormal in
// that of its side's (l.mu held). Two copies into preallocated rings:
// nothing is allocated per record.
func (l *Log) keep(r *Record) {
	l.seq++
	l.recent.push(l.seq, r)
	switch {
	case r.ServerSide():
		l.server.push(l.seq, r)
	case r.Abnormal():
		l.client.push(l.seq, r)
	}
}

// Recent returns the last limit records (all of the ring of the last
// entries when limit <= 0), oldest first.
func (l *Log) Recent(limit int) []Record {
	if limit <= 0 {
		limit = len(l.recent.recs)
	}
	return l.Query(Filter{}, min(limit, len(l.recent.recs)))
}

// Subscribe returns a channel that receives every record written from now
// on (up to buf of them queued: beyond, records are dropped for this
// subscriber) and the function that ends the subscription.
func (l *Log) Subscribe(buf int) (<-chan Record, func()) {
	ch := make(chan Record, buf)
	l.mu.Lock()
	l.subs[ch] = struct{}{}
	l.mu.Unlock()
	var once sync.Once
	return ch, func() {
		once.Do(func() {
			l.mu.Lock()
			delete(l.subs, ch)
			l.mu.Unlock()
		})
	}
}

// RecordOf is e as a record; wall and mono are the same instant read from
// the wall clock and from loop.Mono (e's times are loop.Now values).
func RecordOf(e *stats.LogEntry, wall time.Time, mono int64) Record {
	r := Record{
		Time:     wall.Add(-time.Duration(mono - e.Start)).UTC(),
		Mode:     "tcp",
		Frontend: e.Frontend, Backend: e.Backend, Server: e.Server,
		Status:  int(e.Status),
		BytesIn: e.BytesIn, BytesOut: e.BytesOut,
		Retries:     int(e.Retries),
		Termination: e.Term.String(),
		ClientCert:  e.ClientCert,
		TqMs:        -1, TwMs: -1, TcMs: -1, TrMs: -1,
		TaMs: ms(e.End - e.Start),
	}
	if e.Client.IsValid() {
		r.Client = e.Client.String()
	}
	if e.Peer.IsValid() {
		r.Peer = e.Peer.String()
	}
	if e.HTTP {
		r.Mode = "http"
		switch e.Proto {
		case 10:
			r.Proto = "HTTP/1.0"
		case 11:
			r.Proto = "HTTP/1.1"
		case 20:
			r.Proto = "HTTP/2"
		}
		if e.LineCut { // it may end inside a secret
			r.Request = redact.CutRequestLine(string(e.RequestLine()))
		} else {
			r.Request = redact.RequestLine(string(e.RequestLine()))
		}
	}
	from := e.Start // where the wait for a slot starts
	if e.Head != 0 {
		r.TqMs = ms(e.Head - e.Start)
		from = e.Head
	}
	if e.Granted != 0 {
		r.TwMs = ms(e.Granted - from)
	}
	ready := e.Granted // when the request could go to the server
	if e.Connected != 0 {
		r.TcMs = ms(e.Connected - e.ConnStart)
		ready = e.Connected
	}
	if e.Resp != 0 && ready != 0 {
		r.TrMs = ms(e.Resp - ready)
	}
	return r
}

func ms(ns int64) int64 { return max(ns, 0) / 1e6 }

// line writes r as one line through l.out.
func (l *Log) line(r *Record) {
	h := l.out.Handler()
	if !h.Enabled(context.Background(), slog.LevelInfo) {
		return
	}
	rec := slog.NewRecord(r.Time, slog.LevelInfo, "access", 0)
	rec.AddAttrs(
		slog.String("mode", r.Mode),
		slog.String("frontend", r.Frontend),
		slog.String("backend", r.Backend),
		slog.String("server", r.Server),
		slog.String("client", r.Client),
	)
	if r.Peer != "" {
		rec.AddAttrs(slog.String("peer", r.Peer))
	}
	if r.Mode == "http" {
		rec.AddAttrs(slog.String("request", r.Request), slog.Int("status", r.Status))
		if r.Proto != "" {
			rec.AddAttrs(slog.String("proto", r.Proto))
		}
	}
	rec.AddAttrs(
		slog.Int64("tq_ms", r.TqMs), slog.Int64("tw_ms", r.TwMs), slog.Int64("tc_ms", r.TcMs),
		slog.Int64("tr_ms", r.TrMs), slog.Int64("ta_ms", r.TaMs),
		slog.Int64("bytes_in", r.BytesIn), slog.Int64("bytes_out", r.BytesOut),
		slog.Int("retries", r.Retries),
		slog.String("termination", r.Termination),
	)
	if r.ClientCert != "" {
		rec.AddAttrs(slog.String("client_cert", r.ClientCert))
	}
	if err := h.Handle(context.Background(), rec); err != nil {
		l.unwritten++
		l.lastErr = err
	}
}
