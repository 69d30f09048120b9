package stats

import (
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// StatusCounts are HTTP responses by status class.
type StatusCounts struct {
	S1xx  int64 `json:"1xx"`
	S2xx  int64 `json:"2xx"`
	S3xx  int64 `json:"3xx"`
	S4xx  int64 `json:"4xx"`
	S5xx  int64 `json:"5xx"`
	Other int64 `json:"other"`
}

// Classes returns the counts as the index layout of Slot.Status.
func (s StatusCounts) Classes() [StatusClasses]int64 {
	return [StatusClasses]int64{s.Other, s.S1xx, s.S2xx, s.S3xx, s.S4xx, s.S5xx}
}

// Counts is what the API shows of an object's Totals.
type Counts struct {
	ConnTotal int64   `json:"conn_total" example:"1200"`
	ConnCur   int64   `json:"conn_cur" example:"3"`
	ConnRate  float64 `json:"conn_rate" example:"12.5"` // connections over the last second
	Requests  int64   `json:"requests" example:"0"`     // http mode
	ReqRate   float64 `json:"req_rate" example:"0"`     // requests over the last second
	// ConnMax, ConnRateMax and ReqRateMax are the peaks since start (or
	// since the object was created; HAProxy's smax, rate_max,
	// req_rate_max): the most connections alive at once (a frontend's
	// include those accepted and not yet served, a backend's and a
	// server's are its slots taken), and the most connections and
	// requests in one second.
	ConnMax     int64 `json:"conn_max" example:"40"`
	ConnRateMax int64 `json:"conn_rate_max" example:"25"`
	ReqRateMax  int64 `json:"req_rate_max" example:"0"`
	BytesIn     int64 `json:"bytes_in" example:"640000"`
	BytesOut    int64 `json:"bytes_out" example:"1280000"`
	Denied      int64 `json:"denied"`
	Errors      int64 `json:"errors"` // malformed requests
	// ConnectErrors, ResponseErrors, Retries, NoServer, Timeouts, Aborts
	// explain why connections ended badly. ResponseErrors (HAProxy's
	// eresp, http mode) are responses a server spoiled: a bad or cut
	// response, or none within server_ms.
	ConnectErrors  int64 `json:"connect_errors"`
	ResponseErrors int64 `json:"response_errors"`
	Retries        int64 `json:"retries"`
	NoServer       int64 `json:"no_server"`
	Timeouts       int64 `json:"timeouts"`
	Aborts         int64 `json:"aborts"`
	// Queue is the number of connections waiting for a server slot.
	Queue  int64        `json:"queue"`
	Status StatusCounts `json:"status"`
	// ConnectTimeAvgUs is the mean time from connect(2) to an established
	// server connection since start; ResponseTimeAvgUs the mean time from
	// a request sent to its response headers (http mode).
	ConnectTimeAvgUs  float64 `json:"connect_time_avg_us"`
	ResponseTimeAvgUs float64 `json:"response_time_avg_us"`
	// Raw sums behind the averages, for exporters (rate(sum)/rate(count)).
	ConnectNs    int64 `json:"-"`
	ConnectCount int64 `json:"-"`
	RespNs       int64 `json:"-"`
	RespCount    int64 `json:"-"`
}

// TLSCounts are TLS handshakes: a frontend's on its TLS binds, or the
// proxy's with a server that has tls (its connections, not its health
// checks): full, resumed (a session ticket), failed (timeouts included;
// Timeouts counts those apart).
type TLSCounts struct {
	Full     int64 `json:"handshakes_full"`
	Resumed  int64 `json:"handshakes_resumed"`
	Failed   int64 `json:"handshakes_failed"`
	Timeouts int64 `json:"handshake_timeouts"`
}

// ProxyCounts are the PROXY protocol headers of a frontend's binds with
// accept_proxy: accepted; connections refused because their peer is not
// in the bind's trusted list; headers refused as malformed, truncated,
// oversized or absent; headers that did not come within handshake_ms.
// Every connection but the accepted ones was closed.
type ProxyCounts struct {
	Accepted int64 `json:"accepted"`
	Refused  int64 `json:"refused"`
	Invalid  int64 `json:"invalid"`
	Timeouts int64 `json:"timeouts"`
}

// Proxy returns the PROXY protocol counts of t.
func (t Totals) Proxy() ProxyCounts {
	return ProxyCounts{Accepted: t.ProxyAccepted, Refused: t.ProxyRefused, Invalid: t.ProxyInvalid, Timeouts: t.ProxyTimeouts}
}

// H2Counts are a frontend's HTTP/2 client connections and streams:
// connections open now, streams opened (requests) and open now, streams
// refused (REFUSED_STREAM past max_concurrent_streams, or 431 for a head
// past max_header_list_size), RST_STREAM frames sent and received.
type H2Counts struct {
	ConnCur        int64 `json:"conn_cur"`
	StreamsTotal   int64 `json:"streams_total"`
	StreamsCur     int64 `json:"streams_cur"`
	StreamsRefused int64 `json:"streams_refused"`
	ResetsSent     int64 `json:"resets_sent"`
	ResetsReceived int64 `json:"resets_received"`
}

// H2 returns the HTTP/2 counts of t.
func (t Totals) H2() H2Counts {
	return H2Counts{ConnCur: t.H2ConnCur, StreamsTotal: t.H2Streams, StreamsCur: t.H2StreamsCur,
		StreamsRefused: t.H2Refused, ResetsSent: t.H2ResetsSent, ResetsReceived: t.H2ResetsRecv}
}

// Counts converts Totals into the API view.
func (t Totals) Counts() Counts {
	c := Counts{
		ConnTotal: t.ConnTotal, ConnCur: t.ConnCur, ConnRate: round2(t.ConnRate),
		Requests: t.Requests, ReqRate: round2(t.ReqRate),
		ConnRateMax: t.ConnRateMax, ReqRateMax: t.ReqRateMax,
		BytesIn: t.BytesIn, BytesOut: t.BytesOut, Denied: t.Denied, Errors: t.Errors,
		ConnectErrors: t.ConnectErrors, ResponseErrors: t.ResponseErrors, Retries: t.Retries, NoServer: t.NoServer,
		Timeouts: t.Timeouts, Aborts: t.Aborts, Queue: t.Queue,
		Status: StatusCounts{
			Other: t.Status[0], S1xx: t.Status[1], S2xx: t.Status[2],
			S3xx: t.Status[3], S4xx: t.Status[4], S5xx: t.Status[5],
		},
		ConnectNs: t.ConnectNs, ConnectCount: t.ConnectCount, RespNs: t.RespNs, RespCount: t.RespCount,
	}
	if t.ConnectCount > 0 {
		c.ConnectTimeAvgUs = round2(float64(t.ConnectNs) / float64(t.ConnectCount) / 1e3)
	}
	if t.RespCount > 0 {
		c.ResponseTimeAvgUs = round2(float64(t.RespNs) / float64(t.RespCount) / 1e3)
	}
	return c
}

func round2(f float64) float64 {
	if f < 0 {
		return 0
	}
	return float64(int64(f*100+0.5)) / 100
}

// Frontend is one frontend's statistics.
type Frontend struct {
	Name string `json:"name" example:"public"`
	Mode string `json:"mode" example:"tcp"`
	// Maxconn is the frontend's limit (0 = none); ConnCur counts against it.
	Maxconn int `json:"maxconn"`
	Counts
	// TLS is present when the frontend has a bind with tls, or had one.
	TLS *TLSCounts `json:"tls,omitempty"`
	// Proxy is present when the frontend has a bind with accept_proxy, or
	// had one.
	Proxy *ProxyCounts `json:"proxy,omitempty"`
	// H2 is present when the frontend speaks HTTP/2 (http.versions lists
	// "2"), or did.
	H2 *H2Counts `json:"h2,omitempty"`
	// Rules is present when the frontend has rules, or had some.
	Rules *RuleCounts `json:"rules,omitempty"`
	// Limits are its per-client limits (limits.go); absent without any.
	// The frontend's Denied counts their refusals too.
	Limits []LimitCounts `json:"limits,omitempty"`
}

// RuleCounts are a frontend's rules at work: requests (tcp: connections)
// denied by a rule, requests redirected, requests and responses whose
// head a rule changed (each once, however many rules acted), since the
// frontend was created; and each rule's matches since the rules were last
// changed (a rule list changed compiles anew, its counters from 0).
type RuleCounts struct {
	Denied     int64      `json:"denied"`
	Redirected int64      `json:"redirected"`
	Rewritten  int64      `json:"rewritten"`
	Request    []RuleHits `json:"request"`
	Response   []RuleHits `json:"response"`
}

// RuleHits is one rule's matches; Index is its position in its list.
type RuleHits struct {
	Index  int    `json:"index"`
	Action string `json:"action" example:"set_header"`
	Hits   int64  `json:"hits"`
}

// Rules returns the frontend totals of t's rules (per-rule hits empty).
func (t Totals) Rules() RuleCounts {
	return RuleCounts{Denied: t.RuleDenied, Redirected: t.RuleRedirects, Rewritten: t.RuleRewrites,
		Request: []RuleHits{}, Response: []RuleHits{}}
}

// TLS returns the TLS handshake counts of t.
func (t Totals) TLS() TLSCounts {
	return TLSCounts{Full: t.TLSFull, Resumed: t.TLSResumed, Failed: t.TLSFailed, Timeouts: t.TLSTimeouts}
}

// Server is one server's statistics. ConnTotal counts connection slots
// taken on it (each connect attempt), ConnCur its live connections,
// ConnectErrors its failed connects.
type Server struct {
	Name    string `json:"name" example:"s1"`
	Address string `json:"address" example:"10.0.0.1:8080"`
	// State is the one word for alerts and badges (ServerState): "down"
	// when the health check sees the server down, whatever its admin
	// state; else "maint" or "drain" (admin); else "up". Up and AdminState
	// are the two facts apart.
	State      string    `json:"state" example:"up" enums:"up,down,drain,maint"`
	Up         bool      `json:"up"`
	AdminState string    `json:"admin_state" example:"ready"`
	Weight     int       `json:"weight" example:"100"`
	Maxconn    int       `json:"maxconn"`
	LastChange time.Time `json:"last_change"`
	Counts
	// TLS is present when the server has tls, or had handshakes counted.
	TLS *TLSCounts `json:"tls,omitempty"`
	// Check is the server's health check, absent when its backend has
	// none.
	Check *Check `json:"check,omitempty"`
}

// HAProxy's names of check results (its "check status").
const (
	CheckINI     = "INI"     // no probe finished yet
	CheckSOCKERR = "SOCKERR" // socket(2) or epoll registration failed
	CheckL4OK    = "L4OK"    // tcp check: connected
	CheckL4TOUT  = "L4TOUT"  // no connection within timeout_ms
	CheckL4CON   = "L4CON"   // connection refused, unreachable, or closed while connecting
	CheckL6OK    = "L6OK"    // tcp check of a TLS server: handshake completed
	CheckL6TOUT  = "L6TOUT"  // TLS handshake past timeout_ms
	CheckL6RSP   = "L6RSP"   // TLS handshake failed (certificate, protocol...)
	CheckL7OK    = "L7OK"    // http check: status within status_min..status_max
	CheckL7TOUT  = "L7TOUT"  // no status line within timeout_ms
	CheckL7RSP   = "L7RSP"   // not an HTTP/1.x status line, or the connection ended (or failed) before one
	CheckL7STS   = "L7STS"   // a status outside status_min..status_max
)

// CheckStatuses are every Check.Status value, sorted (the metric's label
// values).
func CheckStatuses() [12]string {
	return [12]string{CheckINI, CheckL4CON, CheckL4OK, CheckL4TOUT, CheckL6OK, CheckL6RSP,
		CheckL6TOUT, CheckL7OK, CheckL7RSP, CheckL7STS, CheckL7TOUT, CheckSOCKERR}
}

// Check is the last result of a server's health check, named as
// HAProxy's check status: L4OK, L4TOUT, L4CON (refused, unreachable,
// closed while connecting), L6OK, L6TOUT, L6RSP (TLS handshake), L7OK,
// L7TOUT, L7RSP (not a status line, or none before the end), L7STS (a
// status out of range: Code), SOCKERR, and INI before the first probe.
type Check struct {
	Status string `json:"status" example:"L7STS"`
	Code   int    `json:"code,omitempty" example:"503"` // L7OK, L7STS
	Reason string `json:"reason" example:"status 503"`
	// Since is when Status (with Code) became what it is; CheckedAt when
	// the last probe ended (absent before the first), DurationMs how long
	// it took.
	Since      time.Time  `json:"since"`
	CheckedAt  *time.Time `json:"checked_at,omitempty"`
	DurationMs float64    `json:"duration_ms" example:"2"`
	Type       string     `json:"type" example:"http"`
	// Health is the rise/fall counter (HAProxy's "check health"): the
	// server is up while Health >= Rise; a success takes it to
	// Rise+Fall-1, a failure below Rise to 0.
	Health int    `json:"health" example:"0"`
	Rise   int    `json:"rise" example:"2"`
	Fall   int    `json:"fall" example:"3"`
	Runs   uint64 `json:"runs"`  // probes finished
	Fails  uint64 `json:"fails"` // of them failed
}

// Backend is one backend's statistics and its servers'.
type Backend struct {
	Name string `json:"name" example:"web"`
	Mode string `json:"mode" example:"tcp"`
	Algo string `json:"balance" example:"roundrobin"`
	// State is "up" when at least one server is usable, else "down".
	State string `json:"state" example:"up"`
	// ServersUp is the number of usable servers.
	ServersUp int `json:"servers_up" example:"2"`
	Counts
	Servers []Server `json:"servers"`
	// Timings are the duration histograms (Prometheus only).
	Timings Timings `json:"-"`
}

// Snapshot is every object's statistics at one instant.
type Snapshot struct {
	Time time.Time `json:"time"`
	// Generation is the configuration generation the data plane runs.
	Generation int64      `json:"generation" example:"7"`
	Frontends  []Frontend `json:"frontends"`
	Backends   []Backend  `json:"backends"`
}

// LoopActivity is one loop's activity (HAProxy's "show activity").
type LoopActivity struct {
	Loop        int    `json:"loop" example:"0"`
	Loops       uint64 `json:"loops"`      // rounds of the event loop
	PollIO      uint64 `json:"poll_io"`    // events returned by epoll_wait
	WakeTasks   uint64 `json:"wake_tasks"` // Wake calls that queued a tasklet
	TaskletsUrg uint64 `json:"tasklets_urgent"`
	TaskletsNrm uint64 `json:"tasklets_normal"`
	TaskletsBlk uint64 `json:"tasklets_bulk"`
	// Time spent running each class (units of work: tasklets, timers,
	// Exec'd functions, accept-ring entries), ns, and each class's share
	// of their sum in percent (seed 000's TC0/TC1/TC2), since start.
	CPUUrgentNs uint64  `json:"cpu_urgent_ns"`
	CPUNormalNs uint64  `json:"cpu_normal_ns"`
	CPUBulkNs   uint64  `json:"cpu_bulk_ns"`
	ShareUrg    float64 `json:"share_urgent"`
	ShareNrm    float64 `json:"share_normal"`
	ShareBlk    float64 `json:"share_bulk"`
	// CPUHandshakeNs is the time TLS handshakes of this loop's pools
	// computed, on their helper goroutines (outside the classes).
	CPUHandshakeNs uint64 `json:"cpu_handshake_ns"`
	// What those handshakes waited for besides their peer, ns summed
	// over handshakes: a slot of the pool (tuning.tls.max_handshakes), a
	// CPU token, and the hand-offs between the loop and the helper
	// goroutine; and how many times one waited for its peer (parked).
	HandshakeSlotWaitNs uint64 `json:"handshake_slot_wait_ns"`
	HandshakeCPUWaitNs  uint64 `json:"handshake_cpu_wait_ns"`
	HandshakeHandoffNs  uint64 `json:"handshake_handoff_ns"`
	HandshakeParks      uint64 `json:"handshake_parks"`
	Timers              uint64 `json:"timers"`      // timers fired
	AvgLoopUs           uint64 `json:"avg_loop_us"` // EWMA of a round's busy time, µs
	// Sleeps: polls that could block (nothing left to run), the time
	// spent in them (ns), and the wake-ups other threads gave the loop
	// (Exec, accept-ring pushes, handshakes handed back).
	Sleeps   uint64 `json:"sleeps"`
	SleepNs  uint64 `json:"sleep_ns"`
	Notified uint64 `json:"notified"`
	// BusyPolls: busy polls before a sleep (tuning.busy_poll_us), and the
	// time spent in them (ns): what busy polling costs.
	BusyPolls  uint64 `json:"busy_polls"`
	BusyPollNs uint64 `json:"busy_poll_ns"`
	// Naps: naps before a poll (tuning.poll_nap_us), and the time from
	// the round's end to the poll after each (ns).
	Naps        uint64 `json:"naps"`
	NapNs       uint64 `json:"nap_ns"`
	Accepted    uint64 `json:"accepted"`
	AccqPushed  uint64 `json:"accq_pushed"`
	AccqFull    uint64 `json:"accq_full"`
	AcceptPause uint64 `json:"accept_pauses"`
	SpliceBytes uint64 `json:"splice_bytes"`
	PipesUsed   int64  `json:"pipes_used"`
	BuffersUsed int64  `json:"buffers_used"`
	Conns       int64  `json:"conns"` // live connections owned by the loop
}

// ServerState is a server's State from its health (up) and its admin state
// (ready, drain, maint): health first, so that "down" means down whatever
// the operator did, and an alert on state="down" sees a drained or
// maintained server that fails its checks (before, a drained down server
// read "drain", looking healthy). HAProxy's stats show DOWN over DRAIN too;
// they show MAINT over DOWN because HAProxy stops checking a server in
// maintenance, where spliced keeps checking it, so its health is known.
func ServerState(up bool, admin string) string {
	switch {
	case !up:
		return "down"
	case admin == config.AdminDrain || admin == config.AdminMaint:
		return admin
	}
	return "up"
}
