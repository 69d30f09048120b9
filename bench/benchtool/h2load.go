package main

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// h2load's summary lines (nghttp2's h2load, the load generator of the h2
// rows and of the seed 001 rows):
//
//	finished in 3.00s, 123456.78 req/s, 12.34MB/s
//	requests: 370370 total, 370470 started, 370370 done, 370370 succeeded, 0 failed, 0 errored, 0 timeout
//	status codes: 370370 2xx, 0 3xx, 0 4xx, 0 5xx
//	traffic: 29.13MB (30543210) total, 1.06MB (1111110) headers (space savings 95.23%), 22.60MB (23703680) data
var (
	h2loadFinished = regexp.MustCompile(`(?m)^finished in ([0-9.]+)(us|ms|s),`)
	h2loadRequests = regexp.MustCompile(`(?m)^requests: (\d+) total, (\d+) started, (\d+) done, (\d+) succeeded, (\d+) failed, (\d+) errored, (\d+) timeout`)
	h2loadStatus   = regexp.MustCompile(`(?m)^status codes: (\d+) 2xx, (\d+) 3xx, (\d+) 4xx, (\d+) 5xx`)
	h2loadTraffic  = regexp.MustCompile(`(?m)^traffic: .*, [0-9.]+[A-Za-z]* \((\d+)\) data`)
)

// isH2load says whether out is h2load's output rather than wrk's.
func isH2load(out string) bool { return h2loadFinished.MatchString(out) }

// parseH2loadResult reads h2load's summary into r: Requests are the
// requests that completed with a 2xx or 3xx status, Bytes the response
// bodies (h2load's "data"), Seconds h2load's own duration (the whole run
// with -n, the measurement window with -D). failed requests that h2load
// counted as errored (the connection failed) go to Errors.Connect, the
// rest of the failed ones to Errors.Read, timeouts to Errors.Timeout and
// 4xx/5xx to Errors.Status. h2load gives no latency percentiles.
func parseH2loadResult(out string, r *Run) error {
	m := h2loadFinished.FindStringSubmatch(out)
	if m == nil {
		return errors.New("no 'finished in' line in h2load output (h2load failed?)")
	}
	d, err := time.ParseDuration(m[1] + m[2])
	if err != nil {
		return fmt.Errorf("h2load duration %q: %w", m[1]+m[2], err)
	}
	q := h2loadRequests.FindStringSubmatch(out)
	s := h2loadStatus.FindStringSubmatch(out)
	t := h2loadTraffic.FindStringSubmatch(out)
	if q == nil || s == nil || t == nil {
		return errors.New("h2load output lacks its requests, status codes or traffic line")
	}
	n := func(x string) int64 { v, _ := strconv.ParseInt(x, 10, 64); return v }
	failed, errored, timeout := n(q[5]), n(q[6]), n(q[7])
	r.Requests = n(s[1]) + n(s[2])
	r.Bytes = n(t[1])
	r.Seconds = d.Seconds()
	r.Errors = Errors{Connect: errored, Read: max(0, failed-errored-timeout), Timeout: timeout,
		Status: n(s[3]) + n(s[4])}
	return nil
}
