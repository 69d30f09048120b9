package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"text/tabwriter"
	"time"
)

// schedScenario is one line of seed 000's table (or the TLS handshakes
// added to it): how spliced is configured and what load runs.
type schedScenario struct {
	name, title string
	seed        string // the seed's TC0/TC1/TC2, "" when it has none
	mode        string // tcp | http
	splice      string // off | on | auto
	tls         bool
	path        string // object checked before the run
	size        int
	loads       [][]string // load generators run at once; {URL} and {SECONDS} are replaced
}

// Shares of the comparison: the seed's new ones (spliced's default) and
// the diff's left side (urgent 1/6 of the budget, normal 2/5 of what is
// left, bulk the rest).
var schedShares = []struct {
	name  string
	value map[string]int
}{
	{"new 33/50/17", map[string]int{"urgent": 33, "normal": 50, "bulk": 17}},
	{"old 17/33/50", map[string]int{"urgent": 17, "normal": 33, "bulk": 50}},
}

func schedScenarios(wrkScript, self string) []schedScenario {
	wrk := func(url string, conns int, extra ...string) []string {
		a := []string{"wrk", "-t1", "-c", strconv.Itoa(conns), "-d", "{SECONDS}s", "--timeout", "5s", "-s", wrkScript}
		return append(append(a, extra...), url)
	}
	return []schedScenario{
		{name: "tcp-conn", title: "TCP conn rate", seed: "32/51/17", mode: "tcp", splice: "off", path: "/64", size: 64,
			loads: [][]string{wrk("{URL}", 50, "-H", "Connection: close")}},
		{name: "http-conn", title: "HTTP conn rate", seed: "34/41/25", mode: "http", splice: "off", path: "/64", size: 64,
			loads: [][]string{wrk("{URL}", 50, "-H", "Connection: close")}},
		{name: "tcp-bytes", title: "TCP byte rate (2 MB objects)", seed: "2/3/95", mode: "tcp", splice: "off", path: "/2m", size: 2 << 20,
			loads: [][]string{wrk("{URL}", 64)}},
		{name: "splice-bytes", title: "splicing byte rate (2 MB objects)", seed: "11/6/83", mode: "tcp", splice: "on", path: "/2m", size: 2 << 20,
			loads: [][]string{wrk("{URL}", 64)}},
		{name: "h2-10k", title: "H2 10k objects", seed: "44/23/33", mode: "http", splice: "off", path: "/10k", size: 10240,
			loads: [][]string{{"h2load", "-t1", "-c", "100", "-m", "10", "-D", "{SECONDS}", "{URL}"}}},
		{name: "mixed", title: "mixed (1 MB keep-alive + 0 B per connection)", seed: "18/10/72", mode: "http", splice: "auto", path: "/1m", size: 1 << 20,
			loads: [][]string{wrk("{URL}", 64), wrk("{URL0}", 32, "-H", "Connection: close")}},
		{name: "tls-hs", title: "TLS handshakes (ECDSA, one GET each)", mode: "http", splice: "off", tls: true, path: "/64", size: 64,
			loads: [][]string{{self, "handshake", "-addr", "{ADDR}", "-conns", "50", "-duration", "{SECONDS}s"}}},
	}
}

// schedRun is one scenario under one set of shares.
type schedRun struct {
	scenario, shares string
	err              string
	tc               [3]float64 // percent of the loop's class CPU time
	tasklets         [3]uint64
	hsPct            float64 // handshake CPU / (class CPU + handshake CPU)
	avgLoopUs        float64 // median of the samples taken during the run
	p50ms, p95ms     float64 // /api/v1/activity answer time
	reqPerSec        float64
	mibPerSec        float64
	cpuUsPerReq      float64
	otherPct         float64
}

// cmdSched runs seed 000's scenarios through spliced (one loop, pinned)
// with the new and the old class shares and prints, for each, the class
// distribution of the loop's CPU time (TC0/TC1/TC2 = urgent/normal/bulk),
// the average loop time, the answer time of /api/v1/activity polled every
// -poll during the load, and the throughput.
func cmdSched(args []string) error {
	fs := flag.NewFlagSet("sched", flag.ContinueOnError)
	bin := fs.String("bin", "bin/spliced", "spliced binary")
	origin := fs.String("origin", "", "origin host:port (serves /0, /64, /10k, /1m, /2m)")
	seconds := fs.Int("seconds", 10, "seconds per run")
	repeat := fs.Int("repeat", 1, "runs per cell (medians)")
	cpu := fs.Int("cpu", 0, "CPU spliced is pinned to")
	loadCPUs := fs.String("load-cpus", "1", "taskset CPU list of the load generators")
	wrkScript := fs.String("wrk-script", "bench/wrk-report.lua", "bench/wrk-report.lua")
	only := fs.String("scenarios", "", "comma-separated scenario names (default all)")
	poll := fs.Duration("poll", 100*time.Millisecond, "interval of the /api/v1/activity requests")
	tmp := fs.String("dir", "", "directory for spliced's state (default: a temporary one)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *origin == "" || *seconds < 1 || *repeat < 1 {
		return fmt.Errorf("need -origin, -seconds >= 1, -repeat >= 1")
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	dir := *tmp
	if dir == "" {
		d, err := os.MkdirTemp("", "sched-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	var scs []schedScenario
	for _, s := range schedScenarios(*wrkScript, self) {
		if *only == "" || slices.Contains(strings.Split(*only, ","), s.name) {
			scs = append(scs, s)
		}
	}
	var res []schedRun
	n := 0
	for rep := 1; rep <= *repeat; rep++ {
		for _, sc := range scs {
			for _, sh := range schedShares {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				n++
				r := schedRun{scenario: sc.name, shares: sh.name}
				d := filepath.Join(dir, strconv.Itoa(n))
				if err := schedOnce(ctx, &r, sc, sh.value, *bin, d, *origin, *cpu, *loadCPUs, *seconds, *poll); err != nil {
					r.err = err.Error()
					fmt.Fprintf(os.Stderr, "    sched %s, %s #%d: n/a: %s\n", sc.name, sh.name, rep, r.err)
				} else {
					fmt.Fprintf(os.Stderr, "    sched %s, %s #%d: TC %.0f/%.0f/%.0f (tasklets %d/%d/%d), avg loop %.0f µs, activity p50 %.1f p95 %.1f ms, %.0f req/s, %.1f MiB/s, others on its CPU %.0f%%\n",
						sc.name, sh.name, rep, r.tc[0], r.tc[1], r.tc[2], r.tasklets[0], r.tasklets[1], r.tasklets[2],
						r.avgLoopUs, r.p50ms, r.p95ms, r.reqPerSec, r.mibPerSec, r.otherPct)
				}
				res = append(res, r)
				_ = os.RemoveAll(d)
			}
		}
	}
	printSched(os.Stdout, scs, res, *repeat)
	return nil
}

func schedOnce(ctx context.Context, r *schedRun, sc schedScenario, shares map[string]int, bin, dir, origin string,
	cpu int, loadCPUs string, seconds int, poll time.Duration) error {
	p, err := startSpliced(ctx, bin, dir, strconv.Itoa(cpu))
	if err != nil {
		return err
	}
	defer p.stop()
	host, port, _ := strings.Cut(origin, ":")
	oport, _ := strconv.Atoi(port)
	fport, err := freePort()
	if err != nil {
		return err
	}
	if err := p.api("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1, "sched": shares}); err != nil {
		return err
	}
	bind := map[string]any{"name": "b1", "address": "127.0.0.1", "port": fport}
	fe := map[string]any{"name": "bench", "mode": sc.mode, "default_backend": "origin", "splice": sc.splice,
		"binds": []any{bind}}
	scheme := "http"
	if sc.tls {
		cert, key, err := selfSigned()
		if err != nil {
			return err
		}
		if err := p.api("POST", "/api/v1/certificates", map[string]any{"name": "bench", "cert_pem": cert, "key_pem": key}); err != nil {
			return err
		}
		bind["tls"] = map[string]any{"certificates": []string{"bench"}}
		scheme = "https"
	}
	if err := p.api("POST", "/api/v1/backends", map[string]any{"name": "origin", "mode": sc.mode, "balance": "roundrobin",
		"servers": []any{map[string]any{"name": "o1", "address": host, "port": oport}}}); err != nil {
		return err
	}
	if err := p.api("POST", "/api/v1/frontends", fe); err != nil {
		return err
	}
	base := fmt.Sprintf("%s://127.0.0.1:%d", scheme, fport)
	if err := httpGetOK(base+sc.path, sc.size); err != nil {
		return err
	}
	pid := p.cmd.Process.Pid
	before, _, err := p.activity()
	if err != nil {
		return err
	}
	cpu0, err := treeCPUTicks("/proc", pid)
	if err != nil {
		return err
	}
	busy0, err := readCPUBusy(cpu)
	if err != nil {
		return err
	}
	t0 := time.Now()
	lctx, cancel := context.WithTimeout(ctx, time.Duration(seconds)*time.Second+time.Minute)
	defer cancel()
	outs := make([]string, len(sc.loads))
	errs := make([]error, len(sc.loads))
	var wg sync.WaitGroup
	done := make(chan struct{})
	for i, l := range sc.loads {
		args := make([]string, 0, len(l)+3)
		if loadCPUs != "" {
			args = append(args, "taskset", "-c", loadCPUs)
		}
		for _, a := range l {
			a = strings.ReplaceAll(a, "{SECONDS}", strconv.Itoa(seconds))
			a = strings.ReplaceAll(a, "{ADDR}", fmt.Sprintf("127.0.0.1:%d", fport))
			a = strings.ReplaceAll(a, "{URL0}", base+"/0")
			a = strings.ReplaceAll(a, "{URL}", base+sc.path)
			args = append(args, a)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			outs[i], errs[i] = runLoad(lctx, args)
		}()
	}
	go func() { wg.Wait(); close(done) }()
	var lat, loopUs []float64
	tick := time.NewTicker(poll)
	defer tick.Stop()
	warm := t0.Add(500 * time.Millisecond)
polling:
	for {
		select {
		case <-done:
			break polling
		case <-tick.C:
		}
		la, d, err := p.activity()
		if err != nil || time.Now().Before(warm) {
			continue
		}
		lat = append(lat, float64(d.Microseconds())/1e3)
		loopUs = append(loopUs, float64(la[0].AvgLoopUs))
	}
	wall := time.Since(t0)
	cpu1, err := treeCPUTicks("/proc", pid)
	if err != nil {
		return fmt.Errorf("spliced died: %w", err)
	}
	busy1, _ := readCPUBusy(cpu)
	after, _, err := p.activity()
	if err != nil {
		return err
	}
	for i := range errs {
		if errs[i] != nil {
			return errs[i]
		}
	}
	var reqs, bytes int64
	var secs float64
	for _, out := range outs {
		var run Run
		parse := parseWrkResult
		if isH2load(out) {
			parse = parseH2loadResult
		}
		if err := parse(out, &run); err != nil {
			return err
		}
		run.Row = sc.name
		if e := validate(&run); e != "" {
			return fmt.Errorf("%s", e)
		}
		reqs += run.Requests
		bytes += run.Bytes
		secs = max(secs, run.Seconds)
	}
	var u, nn, b, hs, tu, tn, tb uint64
	for i := range after {
		if i >= len(before) {
			break
		}
		u += after[i].CPUUrgentNs - before[i].CPUUrgentNs
		nn += after[i].CPUNormalNs - before[i].CPUNormalNs
		b += after[i].CPUBulkNs - before[i].CPUBulkNs
		hs += after[i].CPUHandshakeNs - before[i].CPUHandshakeNs
		tu += after[i].TaskletsUrgent - before[i].TaskletsUrgent
		tn += after[i].TaskletsNormal - before[i].TaskletsNormal
		tb += after[i].TaskletsBulk - before[i].TaskletsBulk
	}
	if tot := float64(u + nn + b); tot > 0 {
		r.tc = [3]float64{100 * float64(u) / tot, 100 * float64(nn) / tot, 100 * float64(b) / tot}
		r.hsPct = 100 * float64(hs) / (tot + float64(hs))
	}
	r.tasklets = [3]uint64{tu, tn, tb}
	slices.Sort(lat)
	if len(lat) > 0 {
		r.p50ms, r.p95ms = pctl(lat, 50), pctl(lat, 95)
	}
	r.avgLoopUs = median(loopUs)
	if secs > 0 {
		r.reqPerSec = float64(reqs) / secs
		r.mibPerSec = float64(bytes) / mib / secs
	}
	if reqs > 0 {
		r.cpuUsPerReq = float64(cpu1-cpu0) / userHZ * 1e6 / float64(reqs)
	}
	r.otherPct = max(0, 100*float64(busy1-busy0-(cpu1-cpu0))/userHZ/wall.Seconds())
	return nil
}

// pctl is the p-th percentile of sorted xs (nearest rank).
func pctl(sorted []float64, p int) float64 {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

type schedMed struct {
	tc                                      [3]float64
	hs, loop, p50, p95, rps, mibs, cpu, oth float64
	valid, runs                             int
	err                                     string
}

func schedMedians(res []schedRun, scenario, shares string) schedMed {
	var m schedMed
	var t0, t1, t2, hs, lp, p50, p95, rps, mibs, cpu, oth []float64
	for _, r := range res {
		if r.scenario != scenario || r.shares != shares {
			continue
		}
		m.runs++
		if r.err != "" {
			m.err = r.err
			continue
		}
		m.valid++
		t0, t1, t2 = append(t0, r.tc[0]), append(t1, r.tc[1]), append(t2, r.tc[2])
		hs, lp = append(hs, r.hsPct), append(lp, r.avgLoopUs)
		p50, p95 = append(p50, r.p50ms), append(p95, r.p95ms)
		rps, mibs, cpu = append(rps, r.reqPerSec), append(mibs, r.mibPerSec), append(cpu, r.cpuUsPerReq)
		oth = append(oth, r.otherPct)
	}
	m.tc = [3]float64{median(t0), median(t1), median(t2)}
	m.hs, m.loop, m.p50, m.p95 = median(hs), median(lp), median(p50), median(p95)
	m.rps, m.mibs, m.cpu = median(rps), median(mibs), median(cpu)
	if len(oth) > 0 {
		m.oth = slices.Max(oth)
	}
	return m
}

func printSched(w io.Writer, scs []schedScenario, res []schedRun, repeat int) {
	def := schedShares[0].name
	fmt.Fprintf(w, "\n== sched: seed 000's table, spliced with 1 loop pinned, default shares (%s); medians of %d\n", def, repeat)
	fmt.Fprintln(w, "   TC0/TC1/TC2 = urgent/normal/bulk share of the loop's tasklet CPU time (cpu_*_ns of /api/v1/activity over the run); hs CPU = TLS handshake CPU beside them;")
	fmt.Fprintln(w, "   activity = answer time of GET /api/v1/activity every 100 ms during the load (the seed's \"show activity\": 30-50 ms, 70-100 ms at 90 Gbps; 5.7 ms avg loop on mixed)")
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tTC0/TC1/TC2\tseed\ths CPU\tavg loop µs\tactivity p50/p95 ms\treq/s\tMiB/s\tCPU µs/req\t")
	for _, sc := range scs {
		m := schedMedians(res, sc.name, def)
		if m.valid == 0 {
			fmt.Fprintf(tw, "%s\tn/a\t%s\t\t\t\t\t\t\t  %s\n", sc.title, seedOr(sc.seed), short(m.err))
			continue
		}
		fmt.Fprintf(tw, "%s\t%.0f/%.0f/%.0f\t%s\t%s\t%.0f\t%.1f/%.1f\t%.0f\t%.1f\t%.2f\t%s\n", sc.title,
			m.tc[0], m.tc[1], m.tc[2], seedOr(sc.seed), hsStr(sc, m.hs), m.loop, m.p50, m.p95, m.rps, m.mibs, m.cpu, schedNote(m))
	}
	tw.Flush()
	fmt.Fprintf(w, "\n== sched: the seed's experiment, old shares (%s: urgent 1/6, normal 2/5 of the rest, bulk the rest) against new (%s)\n",
		schedShares[1].name, def)
	tw = tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "scenario\tshares\tTC0/TC1/TC2\tavg loop µs\tactivity p50/p95 ms\treq/s\tMiB/s\tCPU µs/req\treq/s new/old\tp95 new/old\t")
	for _, sc := range scs {
		mn := schedMedians(res, sc.name, def)
		for _, sh := range []string{schedShares[1].name, def} {
			m := schedMedians(res, sc.name, sh)
			if m.valid == 0 {
				fmt.Fprintf(tw, "%s\t%s\tn/a\t\t\t\t\t\t\t\t  %s\n", sc.name, sh, short(m.err))
				continue
			}
			rr, pr := "", ""
			if sh == def {
				mo := schedMedians(res, sc.name, schedShares[1].name)
				if mo.valid > 0 && mo.rps > 0 && mo.p95 > 0 {
					rr = fmt.Sprintf("%.2f×", mn.rps/mo.rps)
					pr = fmt.Sprintf("%.2f×", mn.p95/mo.p95)
				}
			}
			fmt.Fprintf(tw, "%s\t%s\t%.0f/%.0f/%.0f\t%.0f\t%.1f/%.1f\t%.0f\t%.1f\t%.2f\t%s\t%s\t%s\n", sc.name, sh,
				m.tc[0], m.tc[1], m.tc[2], m.loop, m.p50, m.p95, m.rps, m.mibs, m.cpu, rr, pr, schedNote(m))
		}
	}
	tw.Flush()
}

func seedOr(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func hsStr(sc schedScenario, pct float64) string {
	if !sc.tls {
		return "-"
	}
	return fmt.Sprintf("%.0f%%", pct)
}

func schedNote(m schedMed) string {
	note := ""
	if m.valid < m.runs {
		note = fmt.Sprintf("  (%d of %d runs failed: %s)", m.runs-m.valid, m.runs, short(m.err))
	}
	if m.oth >= sharedWarn {
		note += fmt.Sprintf("  (others used %.0f%% of the proxy's CPU)", m.oth)
	}
	return note
}
