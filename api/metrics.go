package api

import (
	"net/http"
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/stats"
)

// The Prometheus exposition. The collector reads the data plane's counters
// when scraped (core.Control.Stats and LoopActivity: atomic loads summed
// over the loops' slots); nothing is added to the hot path. Metric names
// are a public contract: see the table in README.md ("Metrics").

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
	{"requests_total", "HTTP requests (http mode).", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Requests) }},
	{"request_rate", "HTTP requests over the last second.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return c.ReqRate }},
	{"bytes_in_total", "Bytes from clients to servers.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.BytesIn) }},
	{"bytes_out_total", "Bytes from servers to clients.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.BytesOut) }},
	{"denied_total", "Connections or requests refused by a rule or limit.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Denied) }},
	{"request_errors_total", "Malformed requests.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Errors) }},
	{"connect_errors_total", "Failed connect attempts (frontend: connections closed after every attempt failed).", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.ConnectErrors) }},
	{"retries_total", "Connect attempts after the first.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Retries) }},
	{"no_server_total", "Connections closed because no server was usable.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.NoServer) }},
	{"timeouts_total", "Connections closed by a timeout.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Timeouts) }},
	{"aborts_total", "Connections closed by a reset or an I/O error.", prometheus.CounterValue, func(c *stats.Counts) float64 { return float64(c.Aborts) }},
	{"queue", "Connections waiting for a server slot.", prometheus.GaugeValue, func(c *stats.Counts) float64 { return float64(c.Queue) }},
}

type kindDescs struct {
	counts    []*prometheus.Desc
	responses *prometheus.Desc // {code}
	connect   *prometheus.Desc // summary: connect time
	response  *prometheus.Desc // summary: response time
}

func newKindDescs(kind string, labels []string) kindDescs {
	var d kindDescs
	for _, m := range countMetrics {
		d.counts = append(d.counts, prometheus.NewDesc("spliced_"+kind+"_"+m.name, m.help, labels, nil))
	}
	d.responses = prometheus.NewDesc("spliced_"+kind+"_http_responses_total", "HTTP responses by status class (1xx..5xx, other).", append(labels[:len(labels):len(labels)], "code"), nil)
	d.connect = prometheus.NewDesc("spliced_"+kind+"_connect_time_seconds", "Time from connect(2) to an established server connection.", labels, nil)
	d.response = prometheus.NewDesc("spliced_"+kind+"_response_time_seconds", "Time from a request sent to its response headers (http mode).", labels, nil)
	return d
}

var statusCodes = [stats.StatusClasses]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

func (d *kindDescs) collect(ch chan<- prometheus.Metric, c *stats.Counts, lv ...string) {
	for i, m := range countMetrics {
		ch <- prometheus.MustNewConstMetric(d.counts[i], m.typ, m.val(c), lv...)
	}
	cl := c.Status.Classes()
	for i, code := range statusCodes {
		ch <- prometheus.MustNewConstMetric(d.responses, prometheus.CounterValue, float64(cl[i]), append(lv, code)...)
	}
	ch <- prometheus.MustNewConstSummary(d.connect, uint64(c.ConnectCount), float64(c.ConnectNs)/1e9, nil, lv...)
	ch <- prometheus.MustNewConstSummary(d.response, uint64(c.RespCount), float64(c.RespNs)/1e9, nil, lv...)
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

// collector is the custom Prometheus collector over core.Control.
type collector struct {
	core               core.Control
	fe, be, srv        kindDescs
	loop               []*prometheus.Desc
	tasklets           *prometheus.Desc
	beUp, beServersUp  *prometheus.Desc
	srvUp, srvWeight   *prometheus.Desc
	srvState, srvMax   *prometheus.Desc
	srvChange, feMax   *prometheus.Desc
	generation, loopsN *prometheus.Desc
}

func newCollector(c core.Control) *collector {
	fe, be, srv := []string{"frontend"}, []string{"backend"}, []string{"backend", "server"}
	k := &collector{
		core: c,
		fe:   newKindDescs("frontend", fe), be: newKindDescs("backend", be), srv: newKindDescs("server", srv),
		tasklets:    prometheus.NewDesc("spliced_loop_tasklets_total", "Tasklets run, by class.", []string{"loop", "class"}, nil),
		beUp:        prometheus.NewDesc("spliced_backend_up", "1 when at least one server is usable.", be, nil),
		beServersUp: prometheus.NewDesc("spliced_backend_servers_up", "Usable servers.", be, nil),
		srvUp:       prometheus.NewDesc("spliced_server_up", "1 when the health check sees the server up.", srv, nil),
		srvWeight:   prometheus.NewDesc("spliced_server_weight", "Current weight.", srv, nil),
		srvState:    prometheus.NewDesc("spliced_server_state", "1 for the server's current state (up, down, drain, maint).", append(srv, "state"), nil),
		srvMax:      prometheus.NewDesc("spliced_server_max_connections", "Connection limit (0 = none).", srv, nil),
		srvChange:   prometheus.NewDesc("spliced_server_last_change_timestamp_seconds", "Time of the last health state change.", srv, nil),
		feMax:       prometheus.NewDesc("spliced_frontend_max_connections", "Connection limit (0 = none).", fe, nil),
		generation:  prometheus.NewDesc("spliced_config_generation", "Configuration generation the data plane runs.", nil, nil),
		loopsN:      prometheus.NewDesc("spliced_loops", "Event loops (threads) of the data plane.", nil, nil),
	}
	for _, m := range loopMetrics {
		k.loop = append(k.loop, prometheus.NewDesc("spliced_loop_"+m.name, m.help, []string{"loop"}, nil))
	}
	return k
}

func (k *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*kindDescs{&k.fe, &k.be, &k.srv} {
		for _, x := range d.counts {
			ch <- x
		}
		ch <- d.responses
		ch <- d.connect
		ch <- d.response
	}
	for _, x := range k.loop {
		ch <- x
	}
	for _, x := range []*prometheus.Desc{k.tasklets, k.beUp, k.beServersUp, k.srvUp, k.srvWeight, k.srvState,
		k.srvMax, k.srvChange, k.feMax, k.generation, k.loopsN} {
		ch <- x
	}
}

var serverStates = []string{"up", "down", "drain", "maint"}

func boolf(b bool) float64 {
	if b {
		return 1
	}
	return 0
}

func (k *collector) Collect(ch chan<- prometheus.Metric) {
	s := k.core.Stats()
	ch <- prometheus.MustNewConstMetric(k.generation, prometheus.GaugeValue, float64(s.Generation))
	for i := range s.Frontends {
		f := &s.Frontends[i]
		k.fe.collect(ch, &f.Counts, f.Name)
		ch <- prometheus.MustNewConstMetric(k.feMax, prometheus.GaugeValue, float64(f.Maxconn), f.Name)
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		k.be.collect(ch, &b.Counts, b.Name)
		ch <- prometheus.MustNewConstMetric(k.beUp, prometheus.GaugeValue, boolf(b.State == "up"), b.Name)
		ch <- prometheus.MustNewConstMetric(k.beServersUp, prometheus.GaugeValue, float64(b.ServersUp), b.Name)
		for j := range b.Servers {
			sv := &b.Servers[j]
			k.srv.collect(ch, &sv.Counts, b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvUp, prometheus.GaugeValue, boolf(sv.Up), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvWeight, prometheus.GaugeValue, float64(sv.Weight), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvMax, prometheus.GaugeValue, float64(sv.Maxconn), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvChange, prometheus.GaugeValue, float64(sv.LastChange.UnixNano())/1e9, b.Name, sv.Name)
			for _, st := range serverStates {
				ch <- prometheus.MustNewConstMetric(k.srvState, prometheus.GaugeValue, boolf(sv.State == st), b.Name, sv.Name, st)
			}
		}
	}
	act := k.core.LoopActivity()
	ch <- prometheus.MustNewConstMetric(k.loopsN, prometheus.GaugeValue, float64(len(act)))
	for i := range act {
		a := &act[i]
		id := strconv.Itoa(a.Loop)
		for j, m := range loopMetrics {
			ch <- prometheus.MustNewConstMetric(k.loop[j], m.typ, m.val(a), id)
		}
		ch <- prometheus.MustNewConstMetric(k.tasklets, prometheus.CounterValue, float64(a.TaskletsUrg), id, "urgent")
		ch <- prometheus.MustNewConstMetric(k.tasklets, prometheus.CounterValue, float64(a.TaskletsNrm), id, "normal")
		ch <- prometheus.MustNewConstMetric(k.tasklets, prometheus.CounterValue, float64(a.TaskletsBlk), id, "bulk")
	}
}

// newMetricsHandler is /metrics: the data plane's collector plus the Go
// runtime's and the process's, in a registry of its own.
func newMetricsHandler(c core.Control, version string, extra ...prometheus.Collector) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(extra...)
	reg.MustRegister(newCollector(c),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "spliced_info", Help: "Always 1; the version is a label.",
			ConstLabels: prometheus.Labels{"version": version}}, func() float64 { return 1 }))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}

// metrics godoc
//
//	@Summary		Prometheus metrics
//	@Description	Prometheus text exposition: spliced_frontend_*, spliced_backend_*, spliced_server_*, spliced_loop_* (see README "Metrics"), Go runtime and process metrics. Read from the data plane's counters at scrape time.
//	@Tags			observability
//	@Produce		plain
//	@Success		200	{string}	string	"Prometheus text format"
//	@x-spliced-role	"viewer"
//	@Router			/metrics [get]
func (s *server) metrics(w http.ResponseWriter, r *http.Request) {
	s.obs.metrics.ServeHTTP(w, r)
}
