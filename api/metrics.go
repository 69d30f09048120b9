package api

import (
	"bytes"
	"compress/gzip"
	"log/slog"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/stats"
)

// The Prometheus exposition. It reads the data plane's counters when
// scraped (core.Control.Stats and LoopActivity: atomic loads summed over
// the loops' slots); nothing is added to the hot path. Metric names are a
// public contract: see the table in README.md ("Metrics").
//
// The spliced_* families are written straight into one text buffer from
// the stats snapshot: with 13 000 objects, a client_golang collector made
// ~400 000 const metrics, then gathered, sorted and encoded them on every
// scrape (26 MB of text, 1.6 s, hundreds of MB of garbage per scrape).
// The text is byte for byte what the collector gave (the families sorted
// by name, the samples by label values; TestMetricsSameAsTheCollector).
// The Go runtime's and the process's metrics still come from client_golang.
//
// One rendered exposition serves every scrape for metricsMaxAge: scrapes
// that arrive meanwhile share it (and its gzip form), and one that arrives
// while it is rendered waits for it instead of rendering again. At most
// metricsMaxInFlight scrapes are served at once; more get 503 at once. So
// the memory of /metrics is bounded by a few expositions, whatever the
// number of scrapers.

const (
	metricsMaxAge      = time.Second
	metricsMaxInFlight = 4
)

// countMetric is one metric every frontend, backend and server has.
type countMetric struct {
	name string // after spliced_<kind>_
	help string
	typ  prometheus.ValueType
	val  func(c *stats.Counts) float64
}

var countMetrics = []countMetric{
	{"connections_total", "Connections started.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.ConnTotal) }},
	{"current_connections", "Connections alive.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.ConnCur) }},
	{"connection_rate", "Connections over the last second.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return c.ConnRate }},
	{"peak_connections", "Most connections alive at once since start (HAProxy's smax; a backend's and a server's: slots held).", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.ConnMax) }},
	{"peak_connection_rate", "Most connections in one second since start.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.ConnRateMax) }},
	{"peak_request_rate", "Most HTTP requests in one second since start.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.ReqRateMax) }},
	{"requests_total", "HTTP requests (http mode).", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Requests) }},
	{"request_rate", "HTTP requests over the last second.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return c.ReqRate }},
	{"bytes_in_total", "Bytes from clients to servers.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.BytesIn) }},
	{"bytes_out_total", "Bytes from servers to clients.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.BytesOut) }},
	{"denied_total", "Connections or requests refused by a rule or limit.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Denied) }},
	{"request_errors_total", "Malformed requests.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Errors) }},
	{"connect_errors_total", "Failed connect attempts (frontend: connections closed after every attempt failed).", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.ConnectErrors) }},
	{"response_errors_total", "Responses a server spoiled: bad, cut, or none within server_ms (HAProxy's eresp; http mode).", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.ResponseErrors) }},
	{"retries_total", "Connect attempts after the first.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Retries) }},
	{"no_server_total", "Connections closed because no server was usable.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.NoServer) }},
	{"timeouts_total", "Connections closed by a timeout.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Timeouts) }},
	{"aborts_total", "Connections closed by a reset or an I/O error.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Aborts) }},
	{"queue", "Connections waiting for a server slot.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.Queue) }},
}

// loopMetric is one metric of loop activity.
type loopMetric struct {
	name, help string
	typ        prometheus.ValueType
	val        func(a *stats.LoopActivity) float64
}

var loopMetrics = []loopMetric{
	{"rounds_total", "Rounds of the event loop.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Loops) }},
	{"poll_events_total", "Events returned by epoll_wait.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.PollIO) }},
	{"wakeups_total", "Tasklet wake-ups that queued a tasklet.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.WakeTasks) }},
	{"timers_total", "Timers fired.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Timers) }},
	{"urgent_seconds_total", "Time spent running the urgent class (I/O wake-ups, accept rings).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.CPUUrgentNs) / 1e9 }},
	{"normal_seconds_total", "Time spent running the normal class (timers, control functions, stream processing).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.CPUNormalNs) / 1e9 }},
	{"bulk_seconds_total", "Time spent running the bulk class (self-waking transfers).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.CPUBulkNs) / 1e9 }},
	{"handshake_seconds_total", "Time TLS handshakes of this loop's pools computed (helper goroutines).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.CPUHandshakeNs) / 1e9 }},
	{"urgent_share_ratio", "Share of the loop's class time spent in the urgent class since start (seed 000's TC0, share_urgent / 100).", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return a.ShareUrg / 100 }},
	{"normal_share_ratio", "Share of the loop's class time spent in the normal class since start (seed 000's TC1, share_normal / 100).", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return a.ShareNrm / 100 }},
	{"bulk_share_ratio", "Share of the loop's class time spent in the bulk class since start (seed 000's TC2, share_bulk / 100).", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return a.ShareBlk / 100 }},
	{"handshake_slot_wait_seconds_total", "Time TLS handshakes of this loop's pools waited for a slot (tuning.tls.max_handshakes).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.HandshakeSlotWaitNs) / 1e9 }},
	{"handshake_cpu_wait_seconds_total", "Time TLS handshakes of this loop's pools waited for a CPU token.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.HandshakeCPUWaitNs) / 1e9 }},
	{"handshake_handoff_seconds_total", "Time TLS handshakes of this loop's pools spent between the loop and their helper goroutine (start, hand-back).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.HandshakeHandoffNs) / 1e9 }},
	{"handshake_parks_total", "Waits of TLS handshakes of this loop's pools for their peer.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.HandshakeParks) }},
	{"sleeps_total", "Polls that could block: the loop had nothing left to run.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Sleeps) }},
	{"sleep_seconds_total", "Time the loop spent in polls that could block.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.SleepNs) / 1e9 }},
	{"notified_total", "Wake-ups other threads gave the loop (eventfd).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Notified) }},
	{"busy_polls_total", "Busy polls before a sleep (tuning.busy_poll_us).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.BusyPolls) }},
	{"busy_poll_seconds_total", "Time spent busy polling (tuning.busy_poll_us).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.BusyPollNs) / 1e9 }},
	{"naps_total", "Naps before a poll (tuning.poll_nap_us).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Naps) }},
	{"nap_seconds_total", "Time from a round's end to the poll after a nap (tuning.poll_nap_us).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.NapNs) / 1e9 }},
	{"avg_loop_seconds", "Average busy time of a round (EWMA), sleep excluded.", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return float64(a.AvgLoopUs) / 1e6 }},
	{"accepted_total", "Connections accepted on this loop.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.Accepted) }},
	{"accept_queue_pushed_total", "Entries pushed into this loop's accept ring.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.AccqPushed) }},
	{"accept_queue_full_total", "Pushes refused because this loop's accept ring was full.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.AccqFull) }},
	{"accept_pauses_total", "Accept back-offs on EMFILE, ENFILE, ENOBUFS, ENOMEM.", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.AcceptPause) }},
	{"splice_bytes_total", "Bytes moved with splice(2).", prometheus.CounterValue, func(a *stats.LoopActivity) float64 { return float64(a.SpliceBytes) }},
	{"pipes_used", "Pipes taken from the pool.", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return float64(a.PipesUsed) }},
	{"buffers_used", "Buffers taken from the pool.", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return float64(a.BuffersUsed) }},
	{"connections", "Live connections owned by this loop.", prometheus.GaugeValue, func(a *stats.LoopActivity) float64 { return float64(a.Conns) }},
}

// Label values in the order the collector's gatherer sorted them.
var (
	sortedStatusCodes = [...]struct {
		class int
		code  string
	}{{1, "1xx"}, {2, "2xx"}, {3, "3xx"}, {4, "4xx"}, {5, "5xx"}, {0, "other"}}
	sortedServerStates = [...]string{"down", "drain", "maint", "up"}
	sortedTaskletClass = [...]string{"bulk", "normal", "urgent"}
	sortedTLSResults   = [...]string{"failed", "full", "resumed"}
	sortedCheckStatus  = stats.CheckStatuses()
	// histLe are the le label values of the duration buckets, as expfmt
	// writes a float.
	histLe = func() (le [stats.HistBuckets]string) {
		for i := range le {
			le[i] = strconv.FormatFloat(stats.HistBound(i), 'g', -1, 64)
		}
		return le
	}()
)

// mobj is one frontend, backend or server: its label values (backend,
// server for a server) and counts.
type mobj struct {
	lv [2]string
	c  *stats.Counts
	sv *stats.Server  // servers
	be *stats.Backend // backends
	fe *stats.Frontend
}

// mview is the snapshot with its objects sorted by label values, which is
// the order of the samples in a family. Its slices are kept from one
// render to the next.
type mview struct {
	fe, be, srv []mobj
	checked     int   // servers with a health check
	loops       []int // indexes into act, sorted by the loop label (a string)
	loopIDs     []string
	act         []stats.LoopActivity
	gen         int64
	version     string
}

func cmpObj(a, b mobj) int {
	if c := strings.Compare(a.lv[0], b.lv[0]); c != 0 {
		return c
	}
	return strings.Compare(a.lv[1], b.lv[1])
}

func (v *mview) load(s *stats.Snapshot, act []stats.LoopActivity) {
	v.fe, v.be, v.srv = v.fe[:0], v.be[:0], v.srv[:0]
	v.checked = 0
	v.gen = s.Generation
	for i := range s.Frontends {
		f := &s.Frontends[i]
		v.fe = append(v.fe, mobj{lv: [2]string{f.Name}, c: &f.Counts, fe: f})
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		v.be = append(v.be, mobj{lv: [2]string{b.Name}, c: &b.Counts, be: b})
		for j := range b.Servers {
			sv := &b.Servers[j]
			v.srv = append(v.srv, mobj{lv: [2]string{b.Name, sv.Name}, c: &sv.Counts, sv: sv})
			if sv.Check != nil {
				v.checked++
			}
		}
	}
	slices.SortFunc(v.fe, cmpObj)
	slices.SortFunc(v.be, cmpObj)
	slices.SortFunc(v.srv, cmpObj)
	v.act = act
	v.loops, v.loopIDs = v.loops[:0], v.loopIDs[:0]
	for i := range act {
		v.loops = append(v.loops, i)
		v.loopIDs = append(v.loopIDs, strconv.Itoa(act[i].Loop))
	}
	slices.SortFunc(v.loops, func(a, b int) int { return strings.Compare(v.loopIDs[a], v.loopIDs[b]) })
}

// expo appends the text exposition format (version 0.0.4) to b, as
// expfmt.MetricFamilyToText writes it.
type expo struct{ b []byte }

func typeName(t prometheus.ValueType) string {
	if t == prometheus.CounterValue {
		return "counter"
	}
	return "gauge"
}

func (e *expo) family(name, help, typ string) {
	e.b = append(e.b, "# HELP "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	for i := 0; i < len(help); i++ {
		switch help[i] {
		case '\\':
			e.b = append(e.b, `\\`...)
		case '\n':
			e.b = append(e.b, `\n`...)
		default:
			e.b = append(e.b, help[i])
		}
	}
	e.b = append(e.b, "\n# TYPE "...)
	e.b = append(e.b, name...)
	e.b = append(e.b, ' ')
	e.b = append(e.b, typ...)
	e.b = append(e.b, '\n')
}

// sample writes name+suffix{kv[0]="kv[1]",...} v; kv are label names and
// values, the names in sorted order.
func (e *expo) sample(name, suffix string, v float64, kv ...string) {
	e.b = append(e.b, name...)
	e.b = append(e.b, suffix...)
	for i := 0; i+1 < len(kv); i += 2 {
		if i == 0 {
			e.b = append(e.b, '{')
		} else {
			e.b = append(e.b, ',')
		}
		e.b = append(e.b, kv[i]...)
		e.b = append(e.b, `="`...)
		lv := kv[i+1]
		for j := 0; j < len(lv); j++ {
			switch lv[j] {
			case '\\':
				e.b = append(e.b, `\\`...)
			case '\n':
				e.b = append(e.b, `\n`...)
			case '"':
				e.b = append(e.b, `\"`...)
			default:
				e.b = append(e.b, lv[j])
			}
		}
		e.b = append(e.b, '"')
	}
	if len(kv) > 0 {
		e.b = append(e.b, '}')
	}
	e.b = append(e.b, ' ')
	switch v {
	case 0:
		e.b = append(e.b, '0')
	case 1:
		e.b = append(e.b, '1')
	case -1:
		e.b = append(e.b, "-1"...)
	default: // NaN and ±Inf: strconv writes NaN, +Inf, -Inf like expfmt
		e.b = strconv.AppendFloat(e.b, v, 'g', -1, 64)
	}
	e.b = append(e.b, '\n')
}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

// kindFamilies are the families every frontend, backend and server has.
// labels are the kind's label names; codeAt is where "code" sorts among
// them (http_responses_total).
func kindFamilies(kind string, labels []string, codeAt int, objs func(v *mview) []mobj) []mfamily {
	kv := func(e *expo, name, suffix string, val float64, o *mobj) {
		if len(labels) == 1 {
			e.sample(name, suffix, val, labels[0], o.lv[0])
		} else {
			e.sample(name, suffix, val, labels[0], o.lv[0], labels[1], o.lv[1])
		}
	}
	var fams []mfamily
	for _, m := range countMetrics {
		name := "spliced_" + kind + "_" + m.name
		fams = append(fams, mfamily{name, m.help, typeName(m.typ), func(e *expo, v *mview) {
			os := objs(v)
			for i := range os {
				kv(e, name, "", m.val(os[i].c), &os[i])
			}
		}})
	}
	name := "spliced_" + kind + "_http_responses_total"
	fams = append(fams, mfamily{name, "HTTP responses by status class (1xx..5xx, other).", "counter", func(e *expo, v *mview) {
		os := objs(v)
		// Samples sort by the label values before "code", then code, then
		// the rest: group the objects by the values before code.
		for i := 0; i < len(os); {
			j := i + 1
			for j < len(os) && (codeAt == 0 || os[j].lv[0] == os[i].lv[0]) {
				j++
			}
			for _, sc := range sortedStatusCodes {
				for k := i; k < j; k++ {
					o := &os[k]
					n := float64(o.c.Status.Classes()[sc.class])
					switch {
					case codeAt == 0:
						e.sample(name, "", n, "code", sc.code, labels[0], o.lv[0])
					case len(labels) == 1:
						e.sample(name, "", n, labels[0], o.lv[0], "code", sc.code)
					default:
						e.sample(name, "", n, labels[0], o.lv[0], "code", sc.code, labels[1], o.lv[1])
					}
				}
			}
			i = j
		}
	}})
	name2 := "spliced_" + kind + "_connect_time_seconds"
	fams = append(fams, mfamily{name2, "Time from connect(2) to an established server connection.", "summary", func(e *expo, v *mview) {
		os := objs(v)
		for i := range os {
			o := &os[i]
			kv(e, name2, "_sum", float64(o.c.ConnectNs)/1e9, o)
			kv(e, name2, "_count", float64(uint64(o.c.ConnectCount)), o)
		}
	}})
	name3 := "spliced_" + kind + "_response_time_seconds"
	fams = append(fams, mfamily{name3, "Time from a request sent to its response headers (http mode).", "summary", func(e *expo, v *mview) {
		os := objs(v)
		for i := range os {
			o := &os[i]
			kv(e, name3, "_sum", float64(o.c.RespNs)/1e9, o)
			kv(e, name3, "_count", float64(uint64(o.c.RespCount)), o)
		}
	}})
	return fams
}

// mfamily is one spliced_* family: its samples in order.
type mfamily struct {
	name, help, typ string
	write           func(e *expo, v *mview)
}

// splicedFamilies are every spliced_* family, sorted by name.
var splicedFamilies = func() []mfamily {
	fe := func(v *mview) []mobj { return v.fe }
	be := func(v *mview) []mobj { return v.be }
	srv := func(v *mview) []mobj { return v.srv }
	fams := kindFamilies("frontend", []string{"frontend"}, 0, fe)
	fams = append(fams, kindFamilies("backend", []string{"backend"}, 1, be)...)
	fams = append(fams, kindFamilies("server", []string{"backend", "server"}, 1, srv)...)
	// gauge is a family of one sample per object; label is the kind's
	// first label name (a server's are backend and server).
	gauge := func(name, help string, objs func(v *mview) []mobj, val func(o *mobj) float64) mfamily {
		label := strings.SplitN(name, "_", 3)[1] // spliced_<kind>_...
		return mfamily{name, help, "gauge", func(e *expo, v *mview) {
			os := objs(v)
			for i := range os {
				o := &os[i]
				if o.sv == nil {
					e.sample(name, "", val(o), label, o.lv[0])
				} else {
					e.sample(name, "", val(o), "backend", o.lv[0], "server", o.lv[1])
				}
			}
		}}
	}
	fams = append(fams,
		gauge("spliced_frontend_max_connections", "Connection limit (0 = none).", fe, func(o *mobj) float64 { return float64(o.fe.Maxconn) }),
		gauge("spliced_backend_up", "1 when at least one server is usable.", be, func(o *mobj) float64 { return boolf(o.be.State == "up") }),
		gauge("spliced_backend_servers_up", "Usable servers.", be, func(o *mobj) float64 { return float64(o.be.ServersUp) }),
		gauge("spliced_server_up", "1 when the health check sees the server up.", srv, func(o *mobj) float64 { return boolf(o.sv.Up) }),
		gauge("spliced_server_weight", "Current weight.", srv, func(o *mobj) float64 { return float64(o.sv.Weight) }),
		gauge("spliced_server_max_connections", "Connection limit (0 = none).", srv, func(o *mobj) float64 { return float64(o.sv.Maxconn) }),
		gauge("spliced_server_last_change_timestamp_seconds", "Time of the last health state change.", srv,
			func(o *mobj) float64 { return float64(o.sv.LastChange.UnixNano()) / 1e9 }),
		mfamily{"spliced_server_state", "1 for the server's current state (up, down, drain, maint; down when its check sees it down, whatever its admin state).", "gauge", func(e *expo, v *mview) {
			for i := range v.srv {
				o := &v.srv[i]
				for _, st := range sortedServerStates {
					e.sample("spliced_server_state", "", boolf(o.sv.State == st), "backend", o.lv[0], "server", o.lv[1], "state", st)
				}
			}
		}},
		mfamily{"spliced_server_check_status", "1 for the result of the server's last health check as HAProxy names it (INI before the first); servers with a health check only.", "gauge", func(e *expo, v *mview) {
			for i := range v.srv {
				if o := &v.srv[i]; o.sv.Check != nil {
					for _, st := range sortedCheckStatus {
						e.sample("spliced_server_check_status", "", boolf(o.sv.Check.Status == st), "backend", o.lv[0], "server", o.lv[1], "status", st)
					}
				}
			}
		}},
		checkGauge("spliced_server_check_code", "HTTP status of the last http health check (0 when none came).",
			func(c *stats.Check) float64 { return float64(c.Code) }),
		checkGauge("spliced_server_check_duration_seconds", "Duration of the last health check.",
			func(c *stats.Check) float64 { return c.DurationMs / 1e3 }),
		histFamily("spliced_backend_request_duration_seconds", "Time from a request head received to its response sent entirely (http mode).",
			func(t *stats.Timings) *stats.HistTotals { return &t.Request }),
		histFamily("spliced_backend_queue_duration_seconds", "Time waiting for a server slot (0 when one was free), per request (http) or connection (tcp).",
			func(t *stats.Timings) *stats.HistTotals { return &t.Queue }),
		histFamily("spliced_backend_connect_duration_seconds", "Time from connect(2) to an established server connection, TLS handshake included.",
			func(t *stats.Timings) *stats.HistTotals { return &t.Connect }),
		mfamily{"spliced_config_generation", "Configuration generation the data plane runs.", "gauge", func(e *expo, v *mview) {
			e.sample("spliced_config_generation", "", float64(v.gen))
		}},
		mfamily{"spliced_loops", "Event loops (threads) of the data plane.", "gauge", func(e *expo, v *mview) {
			e.sample("spliced_loops", "", float64(len(v.act)))
		}},
		mfamily{"spliced_info", "Always 1; the version is a label.", "gauge", func(e *expo, v *mview) {
			e.sample("spliced_info", "", 1, "version", v.version)
		}},
		mfamily{"spliced_loop_tasklets_total", "Tasklets run, by class.", "counter", func(e *expo, v *mview) {
			for _, class := range sortedTaskletClass {
				for _, i := range v.loops {
					a := &v.act[i]
					n := a.TaskletsBlk
					switch class {
					case "normal":
						n = a.TaskletsNrm
					case "urgent":
						n = a.TaskletsUrg
					}
					e.sample("spliced_loop_tasklets_total", "", float64(n), "class", class, "loop", v.loopIDs[i])
				}
			}
		}},
	)
	fams = append(fams, tlsFamilies("frontend",
		"TLS handshakes on the frontend's TLS binds, by result (failed includes timeouts).",
		"TLS handshakes that did not end within the frontend's handshake_ms (also counted as failed).", fe, func(o *mobj) *stats.TLSCounts { return o.fe.TLS }, true)...)
	fams = append(fams, tlsFamilies("server",
		"TLS handshakes of the proxy's connections to the server (servers with tls; not health checks), by result (failed includes timeouts).",
		"TLS handshakes with the server that did not end within the backend's connect_ms (also counted as failed).", srv,
		func(o *mobj) *stats.TLSCounts { return o.sv.TLS }, false)...)
	fams = append(fams, mfamily{"spliced_frontend_proxy_headers_total",
		"PROXY protocol headers on the frontend's binds with accept_proxy, by result: accepted, refused (peer not trusted), invalid (malformed, truncated, oversized or absent), timeout (none within handshake_ms); all but accepted closed the connection.",
		"counter", func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				p := o.fe.Proxy
				if p == nil {
					continue
				}
				e.sample("spliced_frontend_proxy_headers_total", "", float64(p.Accepted), "frontend", o.lv[0], "result", "accepted")
				e.sample("spliced_frontend_proxy_headers_total", "", float64(p.Invalid), "frontend", o.lv[0], "result", "invalid")
				e.sample("spliced_frontend_proxy_headers_total", "", float64(p.Refused), "frontend", o.lv[0], "result", "refused")
				e.sample("spliced_frontend_proxy_headers_total", "", float64(p.Timeouts), "frontend", o.lv[0], "result", "timeout")
			}
		}})
	fams = append(fams, mfamily{"spliced_frontend_rule_actions_total",
		"Requests (tcp: connections) a rule of the frontend denied, requests it redirected, requests and responses whose head a rule changed (each once), by action.",
		"counter", func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				if r := o.fe.Rules; r != nil {
					e.sample("spliced_frontend_rule_actions_total", "", float64(r.Denied), "action", "denied", "frontend", o.lv[0])
					e.sample("spliced_frontend_rule_actions_total", "", float64(r.Redirected), "action", "redirected", "frontend", o.lv[0])
					e.sample("spliced_frontend_rule_actions_total", "", float64(r.Rewritten), "action", "rewritten", "frontend", o.lv[0])
				}
			}
		}}, mfamily{"spliced_frontend_rule_hits_total",
		"Matches of each rule of the frontend (phase request or response, rule its index in the list) since the rules last changed.",
		"counter", func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				if r := o.fe.Rules; r != nil {
					for _, h := range r.Request {
						e.sample("spliced_frontend_rule_hits_total", "", float64(h.Hits), "action", h.Action, "frontend", o.lv[0], "phase", "request", "rule", strconv.Itoa(h.Index))
					}
					for _, h := range r.Response {
						e.sample("spliced_frontend_rule_hits_total", "", float64(h.Hits), "action", h.Action, "frontend", o.lv[0], "phase", "response", "rule", strconv.Itoa(h.Index))
					}
				}
			}
		}})
	fams = append(fams, limitFamilies()...) // metrics_limits.go
	h2 := func(name, help, typ string, val func(h *stats.H2Counts, each func(v int64, kv ...string))) mfamily {
		return mfamily{name, help, typ, func(e *expo, v *mview) {
			for i := range v.fe {
				o := &v.fe[i]
				if h := o.fe.H2; h != nil {
					val(h, func(x int64, kv ...string) {
						e.sample(name, "", float64(x), append([]string{"frontend", o.lv[0]}, kv...)...)
					})
				}
			}
		}}
	}
	fams = append(fams,
		h2("spliced_frontend_h2_connections", "HTTP/2 client connections of the frontend open now.", "gauge",
			func(h *stats.H2Counts, each func(int64, ...string)) { each(h.ConnCur) }),
		h2("spliced_frontend_h2_streams", "HTTP/2 streams of the frontend open now.", "gauge",
			func(h *stats.H2Counts, each func(int64, ...string)) { each(h.StreamsCur) }),
		h2("spliced_frontend_h2_streams_total", "HTTP/2 streams opened (requests) on the frontend.", "counter",
			func(h *stats.H2Counts, each func(int64, ...string)) { each(h.StreamsTotal) }),
		h2("spliced_frontend_h2_streams_refused_total", "HTTP/2 streams refused: REFUSED_STREAM past max_concurrent_streams, or 431 past max_header_list_size.", "counter",
			func(h *stats.H2Counts, each func(int64, ...string)) { each(h.StreamsRefused) }),
		h2("spliced_frontend_h2_resets_total", "RST_STREAM frames on the frontend's HTTP/2 connections, by direction (sent, received).", "counter",
			func(h *stats.H2Counts, each func(int64, ...string)) {
				each(h.ResetsSent, "direction", "sent")
				each(h.ResetsReceived, "direction", "received")
			}),
	)
	for _, m := range loopMetrics {
		name := "spliced_loop_" + m.name
		fams = append(fams, mfamily{name, m.help, typeName(m.typ), func(e *expo, v *mview) {
			for _, i := range v.loops {
				e.sample(name, "", m.val(&v.act[i]), "loop", v.loopIDs[i])
			}
		}})
	}
	slices.SortFunc(fams, func(a, b mfamily) int { return strings.Compare(a.name, b.name) })
	return fams
}()

// checkGauge is a family of one sample per server with a health check.
func checkGauge(name, help string, val func(c *stats.Check) float64) mfamily {
	return mfamily{name, help, "gauge", func(e *expo, v *mview) {
		for i := range v.srv {
			if o := &v.srv[i]; o.sv.Check != nil {
				e.sample(name, "", val(o.sv.Check), "backend", o.lv[0], "server", o.lv[1])
			}
		}
	}}
}

// histFamily is a backend duration histogram: cumulative buckets (le),
// +Inf, _sum and _count, as expfmt writes a const histogram.
func histFamily(name, help string, of func(t *stats.Timings) *stats.HistTotals) mfamily {
	return mfamily{name, help, "histogram", func(e *expo, v *mview) {
		for i := range v.be {
			o := &v.be[i]
			h := of(&o.be.Timings)
			for j, le := range histLe {
				e.sample(name, "_bucket", float64(h.Cumulative[j]), "backend", o.lv[0], "le", le)
			}
			e.sample(name, "_bucket", float64(h.Count), "backend", o.lv[0], "le", "+Inf")
			e.sample(name, "_sum", h.SumSeconds, "backend", o.lv[0])
			e.sample(name, "_count", float64(h.Count), "backend", o.lv[0])
		}
	}}
}

// tlsFamilies are the TLS handshake families of kind (frontend, server):
// handshakes by result and timeouts, of what tlsOf returns for each
// object; an object without TLS counts (nil) has zeros when all is set,
// no sample otherwise.
func tlsFamilies(kind, help, helpTimeouts string, objs func(v *mview) []mobj, tlsOf func(o *mobj) *stats.TLSCounts, all bool) []mfamily {
	name := "spliced_" + kind + "_tls_handshakes_total"
	tname := "spliced_" + kind + "_tls_handshake_timeouts_total"
	// each calls fn for every object that has samples, with its counts.
	each := func(v *mview, fn func(o *mobj, t *stats.TLSCounts)) {
		var zero stats.TLSCounts
		os := objs(v)
		for i := range os {
			o := &os[i]
			switch t := tlsOf(o); {
			case t != nil:
				fn(o, t)
			case all:
				fn(o, &zero)
			}
		}
	}
	// sample writes one sample of o with its labels in name order, as
	// the collector did (result, when set, between backend and server).
	sample := func(e *expo, name string, n int64, o *mobj, result string) {
		switch {
		case o.sv == nil && result == "":
			e.sample(name, "", float64(n), kind, o.lv[0])
		case o.sv == nil:
			e.sample(name, "", float64(n), kind, o.lv[0], "result", result)
		case result == "":
			e.sample(name, "", float64(n), "backend", o.lv[0], "server", o.lv[1])
		default:
			e.sample(name, "", float64(n), "backend", o.lv[0], "result", result, "server", o.lv[1])
		}
	}
	return []mfamily{
		{name, help, "counter", func(e *expo, v *mview) {
			each(v, func(o *mobj, t *stats.TLSCounts) {
				for _, r := range sortedTLSResults {
					n := t.Failed
					switch r {
					case "full":
						n = t.Full
					case "resumed":
						n = t.Resumed
					}
					sample(e, name, n, o, r)
				}
			})
		}},
		{tname, helpTimeouts, "counter", func(e *expo, v *mview) {
			each(v, func(o *mobj, t *stats.TLSCounts) { sample(e, tname, t.Timeouts, o, "") })
		}},
	}
}

// hasSamples reports whether family f has at least one sample in v (the
// gatherer leaves out a family without samples).
func (f *mfamily) hasSamples(v *mview) bool {
	switch {
	case f.name == "spliced_frontend_proxy_headers_total":
		return slices.ContainsFunc(v.fe, func(o mobj) bool { return o.fe.Proxy != nil })
	case f.name == "spliced_frontend_rule_actions_total":
		return slices.ContainsFunc(v.fe, func(o mobj) bool { return o.fe.Rules != nil })
	case f.name == "spliced_frontend_rule_hits_total":
		return slices.ContainsFunc(v.fe, func(o mobj) bool { return o.fe.Rules != nil && len(o.fe.Rules.Request)+len(o.fe.Rules.Response) > 0 })
	case strings.HasPrefix(f.name, "spliced_frontend_limit"):
		return slices.ContainsFunc(v.fe, func(o mobj) bool { return len(o.fe.Limits) > 0 })
	case strings.HasPrefix(f.name, "spliced_frontend_h2_"):
		return slices.ContainsFunc(v.fe, func(o mobj) bool { return o.fe.H2 != nil })
	case strings.HasPrefix(f.name, "spliced_server_tls_"):
		return slices.ContainsFunc(v.srv, func(o mobj) bool { return o.sv.TLS != nil })
	case strings.HasPrefix(f.name, "spliced_server_check_"):
		return slices.ContainsFunc(v.srv, func(o mobj) bool { return o.sv.Check != nil })
	case strings.HasPrefix(f.name, "spliced_frontend_"):
		return len(v.fe) > 0
	case strings.HasPrefix(f.name, "spliced_backend_"):
		return len(v.be) > 0
	case strings.HasPrefix(f.name, "spliced_server_"):
		return len(v.srv) > 0
	case strings.HasPrefix(f.name, "spliced_loop_"):
		return len(v.act) > 0
	}
	return true
}

// exposition is one rendered /metrics answer, shared by the scrapes of
// its second.
type exposition struct {
	at     time.Time
	refs   int // scrapes sending it (metricsHandler.mu)
	body   []byte
	gzOnce sync.Once
	gz     []byte
}

func (x *exposition) gzipped() []byte {
	x.gzOnce.Do(func() {
		var b bytes.Buffer
		zw, _ := gzip.NewWriterLevel(&b, gzip.BestSpeed) // a valid level: no error
		_, _ = zw.Write(x.body)                          // a bytes.Buffer does not fail
		_ = zw.Close()
		x.gz = b.Bytes()
	})
	return x.gz
}

// metricsHandler serves /metrics from one exposition per metricsMaxAge.
type metricsHandler struct {
	core     core.Control
	version  string
	reg      *prometheus.Registry // Go runtime and process
	inflight chan struct{}
	maxAge   time.Duration
	log      *slog.Logger // for writeError

	mu       sync.Mutex
	cur      *exposition
	building chan struct{} // closed when the render under way is done
	view     mview         // used by the render under way only
	spare    []byte        // the body of an exposition nobody sends any more
	lastLen  int           // of the last body (render only)
}

// newMetricsHandler is /metrics: the data plane's families plus the Go
// runtime's and the process's, and the extra collectors of the admin API
// (spliced_admin_*: they sort before the data plane's families).
func newMetricsHandler(c core.Control, version string, extra ...prometheus.Collector) *metricsHandler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(extra...)
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return &metricsHandler{core: c, version: version, reg: reg,
		inflight: make(chan struct{}, metricsMaxInFlight), maxAge: metricsMaxAge,
		log: slog.New(slog.DiscardHandler)}
}

// get returns an exposition at most maxAge old, rendering one when there
// is none; concurrent callers wait for the render under way. The caller
// releases it when sent.
func (m *metricsHandler) get() *exposition {
	m.mu.Lock()
	for {
		if x := m.cur; x != nil && time.Since(x.at) < m.maxAge {
			x.refs++
			m.mu.Unlock()
			return x
		}
		if m.building == nil {
			break
		}
		ch := m.building
		m.mu.Unlock()
		<-ch
		m.mu.Lock()
	}
	ch := make(chan struct{})
	m.building = ch
	if old := m.cur; old != nil && old.refs == 0 {
		m.recycle(old) // render into its buffer: one body kept, not two
		m.cur = nil
	}
	buf := m.spare
	m.spare = nil
	m.mu.Unlock()

	x := &exposition{at: time.Now(), body: m.render(buf[:0]), refs: 1}

	m.mu.Lock()
	old := m.cur
	m.cur, m.building = x, nil
	if old != nil && old.refs == 0 {
		m.recycle(old)
	}
	m.mu.Unlock()
	close(ch)
	return x
}

// release is the end of a scrape's use of x.
func (m *metricsHandler) release(x *exposition) {
	m.mu.Lock()
	x.refs--
	if x.refs == 0 && x != m.cur {
		m.recycle(x)
	}
	m.mu.Unlock()
}

// recycle keeps the body of x, which nobody sends any more, for the next
// render: in steady state a render appends into the buffer of the one
// before, without growing a 20 MB buffer from nothing. Called with m.mu.
func (m *metricsHandler) recycle(x *exposition) {
	if cap(x.body) > cap(m.spare) {
		m.spare = x.body[:0]
	}
	x.body = nil
}

// render appends the whole exposition to b.
func (m *metricsHandler) render(b []byte) []byte {
	s := m.core.Stats()
	v := &m.view
	v.version = m.version
	v.load(&s, m.core.LoopActivity())
	// Size the buffer once: append grows a large slice by 1.25x, which
	// costs five times the final size in garbage.
	need := m.lastLen + m.lastLen/32
	if need == 0 {
		// ~2 kB of text per object, ~1 kB more per checked server (14
		// lines) and ~4 kB per backend (3 histograms of 17 lines).
		need = 64<<10 + 2200*(len(v.fe)+len(v.be)+len(v.srv)) + 1100*v.checked + 4200*len(v.be)
	}
	if cap(b) < need {
		b = make([]byte, 0, need+need/8)
	}
	e := expo{b: b}
	if fams, err := m.reg.Gather(); err == nil || len(fams) > 0 {
		var w bytes.Buffer
		enc := expfmt.NewEncoder(&w, expfmt.NewFormat(expfmt.TypeTextPlain))
		for _, f := range fams {
			_ = enc.Encode(f) // a bytes.Buffer does not fail; a bad family is left out
		}
		e.b = append(e.b, w.Bytes()...)
	}
	for i := range splicedFamilies {
		f := &splicedFamilies[i]
		if !f.hasSamples(v) {
			continue
		}
		e.family(f.name, f.help, f.typ)
		f.write(&e, v)
	}
	v.load(&stats.Snapshot{}, nil) // keep no reference to the snapshot
	m.lastLen = len(e.b)
	return e.b
}

// metricsContentType is what promhttp answered for the text format.
var metricsContentType = string(expfmt.NewFormat(expfmt.TypeTextPlain)) + "; escaping=" + model.NameEscapingScheme.String()

func (m *metricsHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case m.inflight <- struct{}{}:
		defer func() { <-m.inflight }()
	default:
		w.Header().Set("Retry-After", "1")
		writeError(w, r, m.log, &apiError{Status: http.StatusServiceUnavailable, Code: "too-many-scrapes",
			Detail: "too many /metrics requests at once (at most " + strconv.Itoa(metricsMaxInFlight) + "); try again later"})
		return
	}
	x := m.get()
	defer m.release(x)
	body := x.body
	h := w.Header()
	h.Set("Content-Type", metricsContentType)
	h.Add("Vary", "Accept-Encoding")
	if acceptsGzip(r) {
		body = x.gzipped()
		h.Set("Content-Encoding", "gzip")
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	_, _ = w.Write(body)
}

// acceptsGzip reports whether Accept-Encoding allows gzip (q > 0).
func acceptsGzip(r *http.Request) bool {
	for _, v := range r.Header.Values("Accept-Encoding") {
		for part := range strings.SplitSeq(v, ",") {
			coding, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(coding), "gzip") {
				continue
			}
			q := strings.ReplaceAll(params, " ", "")
			return q != "q=0" && q != "q=0.0" && q != "q=0.00" && q != "q=0.000"
		}
	}
	return false
}

// metrics godoc
//
//	@Summary		Prometheus metrics
//	@Description	Prometheus text exposition: spliced_frontend_*, spliced_backend_*, spliced_server_*, spliced_loop_* (see README "Metrics"), Go runtime and process metrics. Read from the data plane's counters at most once a second: scrapes within a second share one rendering. At most 4 scrapes are served at once; more get 503 with Retry-After.
//	@Tags			observability
//	@Produce		plain
//	@Success		200	{string}	string	"Prometheus text format"
//	@Failure		503	{object}	Problem	"too many scrapes at once"
//	@x-spliced-role	"viewer"
//	@Router			/metrics [get]
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	s.obs.metrics.ServeHTTP(w, r)
}
