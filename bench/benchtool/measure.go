package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Run is one measurement: one proxy, one workload, one repetition. run.sh
// appends one per line (JSON) to the results file; report reads them all.
type Run struct {
	Mode  string `json:"mode"`  // tcp | http
	Row   string `json:"row"`   // ka | close | 1m | idle
	Proxy string `json:"proxy"` // spliced | haproxy | nginx | baseline | caddy
	Rep   int    `json:"rep"`
	// Error, when set, says why this run produced no valid figure
	// (setup failed, no traffic passed, too many errors...).
	Error string `json:"error,omitempty"`

	// Load rows (wrk).
	Conns      int     `json:"conns,omitempty"`
	Seconds    float64 `json:"seconds,omitempty"` // wrk's measured duration
	Requests   int64   `json:"requests,omitempty"`
	Bytes      int64   `json:"bytes,omitempty"` // response bytes read by wrk
	CPUSeconds float64 `json:"cpu_seconds,omitempty"`
	// OtherSeconds is the busy time of the proxy's CPU not charged to the
	// proxy: other processes, and interrupt work charged to no process.
	// Large values mean the proxy shared its core and the run is suspect.
	OtherSeconds float64 `json:"other_seconds_on_proxy_cpu"`
	// WallSeconds is the window over which CPU times were taken: wrk's
	// run plus its start and exit.
	WallSeconds float64 `json:"wall_seconds,omitempty"`
	LatP50us    int64   `json:"lat_p50_us,omitempty"`
	LatP99us    int64   `json:"lat_p99_us,omitempty"`
	Errors      Errors  `json:"errors"`

	// Idle row.
	IdleConns    int   `json:"idle_conns,omitempty"`
	RSSBeforeKiB int64 `json:"rss_before_kib,omitempty"`
	RSSAfterKiB  int64 `json:"rss_after_kib,omitempty"`
	IdleClosed   int   `json:"idle_closed,omitempty"` // conns the proxy closed while idle
	// Holds (spliced, idle -admin): what an idle connection holds by the
	// proxy's own count (GET /api/v1/memory), beside the RSS delta.
	Holds string `json:"holds,omitempty"`

	// TLS rows (benchtool handshake and flood).
	Resumed int64 `json:"resumed,omitempty"` // handshakes that resumed a session
	// Flood row: Requests, LatP50us and LatP99us are the keep-alive
	// probe's during the flood, IdleRequests and IdleLat* the same probe's
	// with no flood; Handshakes the flood's over the probe's window.
	Handshakes   int64 `json:"handshakes,omitempty"`
	IdleRequests int64 `json:"idle_requests,omitempty"`
	IdleLatP50us int64 `json:"idle_lat_p50_us,omitempty"`
	IdleLatP99us int64 `json:"idle_lat_p99_us,omitempty"`
}

// Errors are wrk's error counters.
type Errors struct {
	Connect int64 `json:"connect"`
	Read    int64 `json:"read"`
	Write   int64 `json:"write"`
	Status  int64 `json:"status"` // responses that were not 2xx/3xx
	Timeout int64 `json:"timeout"`
}

// runFlags are the flags identifying a run, shared by measure, idle, fail.
type runFlags struct {
	out              string
	mode, row, proxy string
	rep              int
}

func (r *runFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&r.out, "out", "", "results file (JSON lines), appended")
	fs.StringVar(&r.mode, "mode", "tcp", "tcp or http")
	fs.StringVar(&r.row, "row", "", "workload name")
	fs.StringVar(&r.proxy, "proxy", "", "proxy name")
	fs.IntVar(&r.rep, "rep", 1, "repetition number")
}

func (r *runFlags) run() Run {
	return Run{Mode: r.mode, Row: r.row, Proxy: r.proxy, Rep: r.rep}
}

func appendRun(path string, r Run) error {
	if path == "" {
		return errors.New("-out is required")
	}
	b, err := json.Marshal(r)
	if err != nil {
		return err
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o644)
	if err != nil {
		return err
	}
	if _, err := f.Write(append(b, '\n')); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// parseWrkResult finds the line that bench/wrk-report.lua prints in wrk's
// done() callback: exact counters, unlike wrk's rounded human summary.
func parseWrkResult(out string, r *Run) error {
	for _, line := range strings.Split(out, "\n") {
		rest, ok := strings.CutPrefix(strings.TrimSpace(line), "BENCHRESULT ")
		if !ok {
			continue
		}
		kv := map[string]int64{}
		for _, f := range strings.Fields(rest) {
			k, v, ok := strings.Cut(f, "=")
			if !ok {
				return fmt.Errorf("malformed field %q", f)
			}
			n, err := strconv.ParseInt(v, 10, 64)
			if err != nil {
				return fmt.Errorf("field %s: %w", k, err)
			}
			kv[k] = n
		}
		for _, k := range []string{"requests", "bytes", "duration_us"} {
			if _, ok := kv[k]; !ok {
				return fmt.Errorf("result line lacks %s", k)
			}
		}
		r.Requests = kv["requests"]
		r.Bytes = kv["bytes"]
		r.Seconds = float64(kv["duration_us"]) / 1e6
		r.LatP50us = kv["p50_us"]
		r.LatP99us = kv["p99_us"]
		r.Resumed = kv["resumed"] // benchtool handshake only
		r.Errors = Errors{Connect: kv["connect"], Read: kv["read"], Write: kv["write"],
			Status: kv["status"], Timeout: kv["timeout"]}
		return nil
	}
	return errors.New("no BENCHRESULT line in wrk output (wrk failed?)")
}

// validate turns a measured run into an error when its figures would not
// mean what the table says: nothing passed, the proxy answered errors, or
// a large share of connections failed.
func validate(r *Run) string {
	switch {
	case r.Requests == 0:
		return "no request completed through the proxy"
	case r.Errors.Status*1000 > r.Requests:
		return fmt.Sprintf("%d non-2xx responses of %d", r.Errors.Status, r.Requests)
	case (r.Errors.Connect+r.Errors.Timeout)*100 > r.Requests:
		return fmt.Sprintf("%d connect errors and %d timeouts for %d requests",
			r.Errors.Connect, r.Errors.Timeout, r.Requests)
	case (r.Errors.Read+r.Errors.Write)*100 > r.Requests:
		return fmt.Sprintf("%d read and %d write errors for %d requests",
			r.Errors.Read, r.Errors.Write, r.Requests)
	case r.Row == "resume" && r.Resumed*100 < r.Requests*95:
		return fmt.Sprintf("only %d of %d handshakes resumed a session", r.Resumed, r.Requests)
	case r.Row != "resume" && r.Resumed > 0:
		return fmt.Sprintf("%d of %d handshakes resumed, where every one must be full", r.Resumed, r.Requests)
	}
	return ""
}

// cmdMeasure reads the CPU time of -pid (and descendants), runs the
// command after "--" (wrk, pinned by the caller), reads the CPU time again
// and records the difference with wrk's counters.
func cmdMeasure(args []string) error {
	fs := flag.NewFlagSet("measure", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	pid := fs.Int("pid", 0, "proxy PID (descendants included)")
	conns := fs.Int("conns", 0, "client connections (recorded only)")
	proxyCPU := fs.Int("cpu", -1, "CPU the proxy is pinned to (to see who else used it), -1 = none")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cmdArgs := fs.Args()
	if *pid <= 0 || len(cmdArgs) == 0 {
		return errors.New("need -pid and a command after --")
	}
	r := rf.run()
	r.Conns = *conns

	before, err := treeCPUTicks("/proc", *pid)
	if err != nil {
		return fmt.Errorf("proxy CPU before: %w", err)
	}
	var busyBefore, busyAfter int64
	if *proxyCPU >= 0 {
		if busyBefore, err = readCPUBusy(*proxyCPU); err != nil {
			return err
		}
	}
	// run.sh stops benchtool with TERM when it is interrupted; the load
	// generator goes with it.
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	var out bytes.Buffer
	cmd := exec.CommandContext(ctx, cmdArgs[0], cmdArgs[1:]...)
	cmd.Stdout = &out
	cmd.Stderr = &out
	start := time.Now()
	runErr := cmd.Run()
	wall := time.Since(start)
	after, cpuErr := treeCPUTicks("/proc", *pid)
	if *proxyCPU >= 0 {
		if busyAfter, err = readCPUBusy(*proxyCPU); err != nil {
			return err
		}
	}

	switch {
	case ctx.Err() != nil:
		r.Error = "interrupted"
	case cpuErr != nil:
		r.Error = fmt.Sprintf("proxy died during the run: %v", cpuErr)
	case runErr != nil:
		r.Error = fmt.Sprintf("load generator failed: %v", runErr)
	default:
		parse := parseWrkResult
		if isH2load(out.String()) {
			parse = parseH2loadResult
		}
		if err := parse(out.String(), &r); err != nil {
			r.Error = err.Error()
			break
		}
		r.CPUSeconds = float64(after-before) / userHZ
		if *proxyCPU >= 0 {
			r.OtherSeconds = max(0, float64(busyAfter-busyBefore-(after-before))/userHZ)
		}
		r.Error = validate(&r)
	}
	r.WallSeconds = wall.Seconds()
	if r.Seconds == 0 {
		r.Seconds = r.WallSeconds
	}
	if r.Error != "" {
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: n/a: %s\n--- load generator output ---\n%s---\n",
			r.Proxy, r.Mode, r.Row, r.Rep, r.Error, tail(out.String(), 2000))
	} else {
		m := derive(r)
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: %.0f req/s, %.1f MiB/s, %.1f µs CPU/req, proxy CPU %.0f%%, others on its CPU %.0f%%\n",
			r.Proxy, r.Mode, r.Row, r.Rep, m.ReqPerSec, m.MiBPerSec, m.CPUusPerReq, m.CPUPercent, m.OtherPercent)
	}
	return appendRun(rf.out, r)
}

// cmdFail records a run that could not happen (proxy did not start, the
// admin API refused the configuration, the check request did not pass).
func cmdFail(args []string) error {
	fs := flag.NewFlagSet("fail", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	reason := fs.String("reason", "", "why the run did not take place")
	if err := fs.Parse(args); err != nil {
		return err
	}
	r := rf.run()
	r.Error = *reason
	if r.Error == "" {
		r.Error = "failed (no reason given)"
	}
	return appendRun(rf.out, r)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "..." + s[len(s)-n:]
	}
	return s
}
