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

// The reference exposition: the client_golang collector /metrics used
// before issue 13 (one const metric per sample, gathered, sorted and encoded
// by promhttp on every scrape). metrics.go writes the same text directly;
// TestMetricsSameAsTheCollector checks that byte for byte.

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

var refStatusCodes = [stats.StatusClasses]string{"other", "1xx", "2xx", "3xx", "4xx", "5xx"}

func (d *kindDescs) collect(ch chan<- prometheus.Metric, c *stats.Counts, lv ...string) {
	for i, m := range countMetrics {
		ch <- prometheus.MustNewConstMetric(d.counts[i], m.typ, m.val(c), lv...)
	}
	cl := c.Status.Classes()
	for i, code := range refStatusCodes {
		ch <- prometheus.MustNewConstMetric(d.responses, prometheus.CounterValue, float64(cl[i]), append(lv, code)...)
	}
	ch <- prometheus.MustNewConstSummary(d.connect, uint64(c.ConnectCount), float64(c.ConnectNs)/1e9, nil, lv...)
	ch <- prometheus.MustNewConstSummary(d.response, uint64(c.RespCount), float64(c.RespNs)/1e9, nil, lv...)
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
	feTLS, feTLSTo     *prometheus.Desc
	feProxy            *prometheus.Desc
	srvTLS, srvTLSTo   *prometheus.Desc
	chkStatus, chkCode *prometheus.Desc
	chkDur             *prometheus.Desc
	beHist             [3]*prometheus.Desc // request, queue, connect
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
		srvState:    prometheus.NewDesc("spliced_server_state", "1 for the server's current state (up, down, drain, maint; down when its check sees it down, whatever its admin state).", append(srv, "state"), nil),
		srvMax:      prometheus.NewDesc("spliced_server_max_connections", "Connection limit (0 = none).", srv, nil),
		srvChange:   prometheus.NewDesc("spliced_server_last_change_timestamp_seconds", "Time of the last health state change.", srv, nil),
		feMax:       prometheus.NewDesc("spliced_frontend_max_connections", "Connection limit (0 = none).", fe, nil),
		generation:  prometheus.NewDesc("spliced_config_generation", "Configuration generation the data plane runs.", nil, nil),
		loopsN:      prometheus.NewDesc("spliced_loops", "Event loops (threads) of the data plane.", nil, nil),
		feTLS:       prometheus.NewDesc("spliced_frontend_tls_handshakes_total", "TLS handshakes on the frontend's TLS binds, by result (failed includes timeouts).", []string{"frontend", "result"}, nil),
		feTLSTo:     prometheus.NewDesc("spliced_frontend_tls_handshake_timeouts_total", "TLS handshakes that did not end within the frontend's handshake_ms (also counted as failed).", fe, nil),
		feProxy: prometheus.NewDesc("spliced_frontend_proxy_headers_total",
			"PROXY protocol headers on the frontend's binds with accept_proxy, by result: accepted, refused (peer not trusted), invalid (malformed, truncated, oversized or absent), timeout (none within handshake_ms); all but accepted closed the connection.",
			[]string{"frontend", "result"}, nil),
		srvTLS: prometheus.NewDesc("spliced_server_tls_handshakes_total", "TLS handshakes of the proxy's connections to the server (servers with tls; not health checks), by result (failed includes timeouts).",
			append(srv, "result"), nil),
		srvTLSTo:  prometheus.NewDesc("spliced_server_tls_handshake_timeouts_total", "TLS handshakes with the server that did not end within the backend's connect_ms (also counted as failed).", srv, nil),
		chkStatus: prometheus.NewDesc("spliced_server_check_status", "1 for the result of the server's last health check as HAProxy names it (INI before the first); servers with a health check only.", append(srv, "status"), nil),
		chkCode:   prometheus.NewDesc("spliced_server_check_code", "HTTP status of the last http health check (0 when none came).", srv, nil),
		chkDur:    prometheus.NewDesc("spliced_server_check_duration_seconds", "Duration of the last health check.", srv, nil),
		beHist: [3]*prometheus.Desc{
			prometheus.NewDesc("spliced_backend_request_duration_seconds", "Time from a request head received to its response sent entirely (http mode).", be, nil),
			prometheus.NewDesc("spliced_backend_queue_duration_seconds", "Time waiting for a server slot (0 when one was free), per request (http) or connection (tcp).", be, nil),
			prometheus.NewDesc("spliced_backend_connect_duration_seconds", "Time from connect(2) to an established server connection, TLS handshake included.", be, nil),
		},
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
		k.srvMax, k.srvChange, k.feMax, k.generation, k.loopsN, k.feTLS, k.feTLSTo, k.srvTLS, k.srvTLSTo,
		k.feProxy, k.chkStatus, k.chkCode, k.chkDur, k.beHist[0], k.beHist[1], k.beHist[2]} {
		ch <- x
	}
}

var refServerStates = []string{"up", "down", "drain", "maint"}

func refBoolf(b bool) float64 {
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
		var t stats.TLSCounts
		if f.TLS != nil {
			t = *f.TLS
		}
		ch <- prometheus.MustNewConstMetric(k.feTLS, prometheus.CounterValue, float64(t.Full), f.Name, "full")
		ch <- prometheus.MustNewConstMetric(k.feTLS, prometheus.CounterValue, float64(t.Resumed), f.Name, "resumed")
		ch <- prometheus.MustNewConstMetric(k.feTLS, prometheus.CounterValue, float64(t.Failed), f.Name, "failed")
		ch <- prometheus.MustNewConstMetric(k.feTLSTo, prometheus.CounterValue, float64(t.Timeouts), f.Name)
		if p := f.Proxy; p != nil {
			ch <- prometheus.MustNewConstMetric(k.feProxy, prometheus.CounterValue, float64(p.Accepted), f.Name, "accepted")
			ch <- prometheus.MustNewConstMetric(k.feProxy, prometheus.CounterValue, float64(p.Refused), f.Name, "refused")
			ch <- prometheus.MustNewConstMetric(k.feProxy, prometheus.CounterValue, float64(p.Invalid), f.Name, "invalid")
			ch <- prometheus.MustNewConstMetric(k.feProxy, prometheus.CounterValue, float64(p.Timeouts), f.Name, "timeout")
		}
	}
	for i := range s.Backends {
		b := &s.Backends[i]
		k.be.collect(ch, &b.Counts, b.Name)
		ch <- prometheus.MustNewConstMetric(k.beUp, prometheus.GaugeValue, refBoolf(b.State == "up"), b.Name)
		ch <- prometheus.MustNewConstMetric(k.beServersUp, prometheus.GaugeValue, float64(b.ServersUp), b.Name)
		for h, ht := range []*stats.HistTotals{&b.Timings.Request, &b.Timings.Queue, &b.Timings.Connect} {
			buckets := map[float64]uint64{}
			for i := range stats.HistBuckets {
				buckets[stats.HistBound(i)] = ht.Cumulative[i]
			}
			ch <- prometheus.MustNewConstHistogram(k.beHist[h], ht.Count, ht.SumSeconds, buckets, b.Name)
		}
		for j := range b.Servers {
			sv := &b.Servers[j]
			k.srv.collect(ch, &sv.Counts, b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvUp, prometheus.GaugeValue, refBoolf(sv.Up), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvWeight, prometheus.GaugeValue, float64(sv.Weight), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvMax, prometheus.GaugeValue, float64(sv.Maxconn), b.Name, sv.Name)
			ch <- prometheus.MustNewConstMetric(k.srvChange, prometheus.GaugeValue, float64(sv.LastChange.UnixNano())/1e9, b.Name, sv.Name)
			for _, st := range refServerStates {
				ch <- prometheus.MustNewConstMetric(k.srvState, prometheus.GaugeValue, refBoolf(sv.State == st), b.Name, sv.Name, st)
			}
			if c := sv.Check; c != nil {
				for _, st := range stats.CheckStatuses() {
					ch <- prometheus.MustNewConstMetric(k.chkStatus, prometheus.GaugeValue, refBoolf(c.Status == st), b.Name, sv.Name, st)
				}
				ch <- prometheus.MustNewConstMetric(k.chkCode, prometheus.GaugeValue, float64(c.Code), b.Name, sv.Name)
				ch <- prometheus.MustNewConstMetric(k.chkDur, prometheus.GaugeValue, c.DurationMs/1e3, b.Name, sv.Name)
			}
			if t := sv.TLS; t != nil {
				ch <- prometheus.MustNewConstMetric(k.srvTLS, prometheus.CounterValue, float64(t.Full), b.Name, sv.Name, "full")
				ch <- prometheus.MustNewConstMetric(k.srvTLS, prometheus.CounterValue, float64(t.Resumed), b.Name, sv.Name, "resumed")
				ch <- prometheus.MustNewConstMetric(k.srvTLS, prometheus.CounterValue, float64(t.Failed), b.Name, sv.Name, "failed")
				ch <- prometheus.MustNewConstMetric(k.srvTLSTo, prometheus.CounterValue, float64(t.Timeouts), b.Name, sv.Name)
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

// refMetricsHandler is /metrics as it was: the collector plus the Go
// runtime's and the process's, in a registry of its own.
func refMetricsHandler(c core.Control, version string) http.Handler {
	reg := prometheus.NewRegistry()
	reg.MustRegister(newCollector(c),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "spliced_info", Help: "Always 1; the version is a label.",
			ConstLabels: prometheus.Labels{"version": version}}, func() float64 { return 1 }))
	return promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError})
}
