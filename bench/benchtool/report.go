package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"os"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
)

const mib = 1 << 20

// reference is the proxy every ratio is relative to.
const reference = "haproxy"

// sharedWarn is the share of the proxy's CPU, in percent, that other work
// may take in a run before the table flags the figures as suspect. Loopback
// softirq work that the kernel charges to no process counts as other, so
// it is rarely zero.
const sharedWarn = 15

// rowOrder is the order in which workloads are printed.
var rowOrder = []string{"ka", "pp2", "rules20", "rules-set", "close", "1m", "s003", "idle", "h2", "h2-10k", "h2-idle", "hs-ecdsa", "hs-rsa", "resume", "first", "flood"}

// idleRow: rows that measure memory per idle connection (benchtool idle).
func idleRow(row string) bool { return row == "idle" || row == "h2-idle" }

// handshakeRow: rows whose requests are connections, one handshake each.
func handshakeRow(row string) bool { return row == "hs-ecdsa" || row == "hs-rsa" || row == "resume" }

func rowTitle(mode, row string) string {
	switch {
	case mode == "tls" && row == "ka":
		return "keep-alive over TLS, 64 B objects"
	case mode == "tls" && row == "idle":
		return "memory per idle keep-alive TLS client connection (one GET done; session state, record buffers)"
	case mode == "tls" && row == "1m":
		return "1 MiB objects over TLS, keep-alive (no splice: the proxy deciphers and enciphers every byte)"
	}
	switch row {
	case "ka":
		return "keep-alive, 64 B objects"
	case "pp2":
		return "keep-alive, 64 B objects, a PROXY v2 header in front of each connection (an HAProxy relay on the load CPU sends it; compare with ka)"
	case "rules20":
		return "keep-alive, 64 B objects, 20 request rules none of which matches (compare with ka: the cost of rules)"
	case "rules-set":
		return "keep-alive, 64 B objects, one request rule that sets a header on every request"
	case "close":
		return "new connection per request (Connection: close), 64 B objects"
	case "1m":
		return "1 MiB objects, keep-alive, splice on where the proxy has it (spliced-auto, spliced-off: splice auto, off)"
	case "s003":
		return "seed 003: 1 MiB objects, one request per connection, thousands at once, splice on (and -off: off)"
	case "idle":
		return "memory per idle keep-alive client connection"
	case "h2":
		return "HTTP/2 (h2c) clients, h2load 100 clients x 10 streams, 64 B objects, HTTP/1.1 to the origin"
	case "h2-10k":
		return "HTTP/2 (h2c) clients, h2load 100 clients x 10 streams, 10 KiB objects (seed 000's H2 10k), HTTP/1.1 to the origin"
	case "h2-idle":
		return "memory per idle HTTP/2 (h2c) client connection (one GET done on stream 1)"
	case "hs-ecdsa":
		return "full TLS handshakes, ECDSA P-256, one GET per connection"
	case "hs-rsa":
		return "full TLS handshakes, RSA-2048, one GET per connection"
	case "resume":
		return "resumed TLS handshakes (session tickets), ECDSA P-256, one GET per connection"
	case "first":
		return "first response after a full TLS handshake, one client at a time that leaves Nagle on (Python's ssl, curl)"
	case "flood":
		return "keep-alive latency (4 connections, 64 B) idle, then under a flood of RSA-2048 full handshakes"
	}
	return row
}

// Metrics are the figures derived from one valid run.
type Metrics struct {
	ReqPerSec   float64 `json:"req_per_sec"`
	MiBPerSec   float64 `json:"mib_per_sec"`
	CPUusPerReq float64 `json:"cpu_us_per_req"`
	CPUmsPerMiB float64 `json:"cpu_ms_per_mib"`
	CPUPercent  float64 `json:"cpu_percent"`
	// OtherPercent is the share of the proxy's CPU used by anything else.
	OtherPercent float64 `json:"other_percent_on_proxy_cpu"`
	KiBPerConn   float64 `json:"kib_per_conn"`
	// HandshakesPerCPUSecond: connections (one handshake each) per second
	// of the proxy's CPU, on the handshake rows.
	HandshakesPerCPUSecond float64 `json:"handshakes_per_cpu_second,omitempty"`
	// Flood row: the probe's latency, idle and under the flood, and the
	// flood's handshakes per second.
	IdleP50us             float64 `json:"idle_p50_us,omitempty"`
	IdleP99us             float64 `json:"idle_p99_us,omitempty"`
	FloodP50us            float64 `json:"flood_p50_us,omitempty"`
	FloodP99us            float64 `json:"flood_p99_us,omitempty"`
	FloodHandshakesPerSec float64 `json:"flood_handshakes_per_sec,omitempty"`
	// First row: from the end of the handshake to the response.
	FirstP50us float64 `json:"first_p50_us,omitempty"`
	FirstP99us float64 `json:"first_p99_us,omitempty"`
}

func derive(r Run) Metrics {
	var m Metrics
	if idleRow(r.Row) {
		if r.IdleConns > 0 {
			m.KiBPerConn = float64(r.RSSAfterKiB-r.RSSBeforeKiB) / float64(r.IdleConns)
		}
		return m
	}
	if r.Seconds > 0 {
		m.ReqPerSec = float64(r.Requests) / r.Seconds
		m.MiBPerSec = float64(r.Bytes) / mib / r.Seconds
		m.CPUPercent = 100 * r.CPUSeconds / r.Seconds
	}
	if r.WallSeconds > 0 {
		m.OtherPercent = 100 * r.OtherSeconds / r.WallSeconds
	}
	if r.Requests > 0 {
		m.CPUusPerReq = r.CPUSeconds * 1e6 / float64(r.Requests)
	}
	if r.Bytes > 0 {
		m.CPUmsPerMiB = r.CPUSeconds * 1e3 / (float64(r.Bytes) / mib)
	}
	if handshakeRow(r.Row) && r.CPUSeconds > 0 {
		m.HandshakesPerCPUSecond = float64(r.Requests) / r.CPUSeconds
	}
	if r.Row == "first" {
		m.FirstP50us, m.FirstP99us = float64(r.LatP50us), float64(r.LatP99us)
	}
	if r.Row == "flood" && r.Seconds > 0 {
		m.IdleP50us, m.IdleP99us = float64(r.IdleLatP50us), float64(r.IdleLatP99us)
		m.FloodP50us, m.FloodP99us = float64(r.LatP50us), float64(r.LatP99us)
		m.FloodHandshakesPerSec = float64(r.Handshakes) / r.Seconds
	}
	return m
}

// Summary is one table line: the medians over the valid repetitions of a
// (mode, row, proxy) and the ratios of those medians to HAProxy's.
type Summary struct {
	Mode  string `json:"mode"`
	Row   string `json:"row"`
	Proxy string `json:"proxy"`
	Runs  int    `json:"runs"`
	Valid int    `json:"valid"`
	Conns int    `json:"conns"`           // client connections (wrk -c, or idle connections)
	Holds string `json:"holds,omitempty"` // idle row: the last valid run's Run.Holds
	Metrics
	// CPUSpread is (max-min)/median of CPU per request (or KiB per
	// connection) over the valid runs; 0 with one run.
	CPUSpread float64 `json:"cpu_spread"`
	// Ratios to HAProxy's medians in the same mode and row; 0 = unknown.
	CPURatio float64 `json:"cpu_per_req_ratio_haproxy,omitempty"`
	RPSRatio float64 `json:"req_per_sec_ratio_haproxy,omitempty"`
	KiBRatio float64 `json:"kib_per_conn_ratio_haproxy,omitempty"`
	Errors   Errors  `json:"errors"`
	Error    string  `json:"error,omitempty"` // why no valid run, or first failure
	// Requests and Resumed are totals over the valid runs (the handshake
	// rows print the share of resumed handshakes).
	Requests int64 `json:"requests"`
	Resumed  int64 `json:"resumed,omitempty"`
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func spread(xs []float64) float64 {
	if len(xs) < 2 {
		return 0
	}
	lo, hi := xs[0], xs[0]
	for _, x := range xs {
		lo, hi = math.Min(lo, x), math.Max(hi, x)
	}
	m := median(xs)
	if m == 0 {
		return 0
	}
	return (hi - lo) / m
}

// summarize groups runs by mode, row and proxy, keeping the order in which
// modes and proxies first appear and rowOrder for rows.
func summarize(runs []Run) []Summary {
	type key struct{ mode, row, proxy string }
	groups := map[key][]Run{}
	var modes, proxies []string
	seen := map[string]bool{}
	for _, r := range runs {
		k := key{r.Mode, r.Row, r.Proxy}
		groups[k] = append(groups[k], r)
		if !seen["m/"+r.Mode] {
			seen["m/"+r.Mode] = true
			modes = append(modes, r.Mode)
		}
		if !seen["p/"+r.Proxy] {
			seen["p/"+r.Proxy] = true
			proxies = append(proxies, r.Proxy)
		}
	}
	rows := append([]string(nil), rowOrder...)
	for _, r := range runs {
		if !contains(rows, r.Row) {
			rows = append(rows, r.Row)
		}
	}
	var out []Summary
	for _, mode := range modes {
		for _, row := range rows {
			first := len(out)
			for _, proxy := range proxies {
				rs, ok := groups[key{mode, row, proxy}]
				if !ok {
					continue
				}
				out = append(out, summarizeGroup(mode, row, proxy, rs))
			}
			addRatios(out[first:])
		}
	}
	return out
}

func summarizeGroup(mode, row, proxy string, rs []Run) Summary {
	s := Summary{Mode: mode, Row: row, Proxy: proxy, Runs: len(rs)}
	var rps, mbps, cpuReq, cpuMiB, cpuPct, other, kib, hsCPU []float64
	var i50, i99, f50, f99, fhs, n50, n99 []float64
	var resumed int64
	for _, r := range rs {
		s.Errors.Connect += r.Errors.Connect
		s.Errors.Read += r.Errors.Read
		s.Errors.Write += r.Errors.Write
		s.Errors.Status += r.Errors.Status
		s.Errors.Timeout += r.Errors.Timeout
		if r.Error != "" {
			if s.Error == "" {
				s.Error = r.Error
			}
			continue
		}
		s.Valid++
		s.Conns = max(r.Conns, r.IdleConns)
		if r.Holds != "" {
			s.Holds = r.Holds
		}
		m := derive(r)
		rps = append(rps, m.ReqPerSec)
		mbps = append(mbps, m.MiBPerSec)
		cpuReq = append(cpuReq, m.CPUusPerReq)
		cpuMiB = append(cpuMiB, m.CPUmsPerMiB)
		cpuPct = append(cpuPct, m.CPUPercent)
		other = append(other, m.OtherPercent)
		kib = append(kib, m.KiBPerConn)
		hsCPU = append(hsCPU, m.HandshakesPerCPUSecond)
		i50, i99 = append(i50, m.IdleP50us), append(i99, m.IdleP99us)
		f50, f99 = append(f50, m.FloodP50us), append(f99, m.FloodP99us)
		fhs = append(fhs, m.FloodHandshakesPerSec)
		n50, n99 = append(n50, m.FirstP50us), append(n99, m.FirstP99us)
		resumed += r.Resumed
		s.Requests += r.Requests
	}
	s.Resumed = resumed
	s.HandshakesPerCPUSecond = median(hsCPU)
	s.IdleP50us, s.IdleP99us, s.FloodP50us, s.FloodP99us = median(i50), median(i99), median(f50), median(f99)
	s.FloodHandshakesPerSec = median(fhs)
	s.FirstP50us, s.FirstP99us = median(n50), median(n99)
	s.ReqPerSec, s.MiBPerSec = median(rps), median(mbps)
	s.CPUusPerReq, s.CPUmsPerMiB, s.CPUPercent = median(cpuReq), median(cpuMiB), median(cpuPct)
	s.KiBPerConn = median(kib)
	s.OtherPercent = slices.Max(append(other, 0))
	if idleRow(row) {
		s.CPUSpread = spread(kib)
	} else {
		s.CPUSpread = spread(cpuReq)
	}
	return s
}

func addRatios(ss []Summary) {
	var ref *Summary
	for i := range ss {
		if ss[i].Proxy == reference && ss[i].Valid > 0 {
			ref = &ss[i]
		}
	}
	if ref == nil {
		return
	}
	for i := range ss {
		s := &ss[i]
		if s.Valid == 0 {
			continue
		}
		if ref.CPUusPerReq > 0 {
			s.CPURatio = s.CPUusPerReq / ref.CPUusPerReq
		}
		if ref.ReqPerSec > 0 {
			s.RPSRatio = s.ReqPerSec / ref.ReqPerSec
		}
		if ref.KiBPerConn > 0 {
			s.KiBRatio = s.KiBPerConn / ref.KiBPerConn
		}
	}
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

func ratio(x float64) string {
	if x == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2f×", x)
}

func pct(x float64, valid int) string {
	if valid < 2 {
		return ""
	}
	return fmt.Sprintf("±%.0f%%", 50*x) // half the range, around the median
}

// printTables writes one table per mode and row.
func printTables(w io.Writer, ss []Summary, reps int) {
	medians := ""
	if reps > 1 {
		medians = fmt.Sprintf(" (medians of %d runs)", reps)
	}
	for i := 0; i < len(ss); {
		j := i
		for j < len(ss) && ss[j].Mode == ss[i].Mode && ss[j].Row == ss[i].Row {
			j++
		}
		fmt.Fprintf(w, "\n== %s mode: %s%s\n", ss[i].Mode, rowTitle(ss[i].Mode, ss[i].Row), medians)
		tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
		if handshakeRow(ss[i].Row) {
			printHandshakes(tw, ss[i:j])
		} else if ss[i].Row == "flood" {
			printFlood(tw, ss[i:j])
		} else if ss[i].Row == "first" {
			printFirst(tw, ss[i:j])
		} else if idleRow(ss[i].Row) {
			fmt.Fprintln(tw, "proxy\tconns\tKiB/conn\tspread\tKiB/conn ×HAProxy\t")
			for _, s := range ss[i:j] {
				if s.Valid == 0 {
					fmt.Fprintf(tw, "%s\tn/a\t\t\t\t  %s\n", s.Proxy, short(s.Error))
					continue
				}
				fmt.Fprintf(tw, "%s\t%d\t%.2f\t%s\t%s\t\n", s.Proxy, s.Conns, s.KiBPerConn,
					pct(s.CPUSpread, s.Valid), ratio(s.KiBRatio))
			}
		} else {
			fmt.Fprintln(tw, "proxy\treq/s\tMiB/s\tCPU µs/req\tspread\tCPU ms/MiB\tproxy CPU\tCPU/req ×HAProxy\treq/s ×HAProxy\terrors\t")
			for _, s := range ss[i:j] {
				if s.Valid == 0 {
					fmt.Fprintf(tw, "%s\tn/a\t\t\t\t\t\t\t\t\t  %s\n", s.Proxy, short(s.Error))
					continue
				}
				note := ""
				if s.Error != "" {
					note = fmt.Sprintf("  (%d of %d runs failed: %s)", s.Runs-s.Valid, s.Runs, short(s.Error))
				}
				if s.OtherPercent >= sharedWarn {
					note += fmt.Sprintf("  (others used %.0f%% of the proxy's CPU)", s.OtherPercent)
				}
				e := s.Errors
				fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%.2f\t%s\t%.3f\t%.0f%%\t%s\t%s\t%d\t%s\n",
					s.Proxy, s.ReqPerSec, s.MiBPerSec, s.CPUusPerReq, pct(s.CPUSpread, s.Valid),
					s.CPUmsPerMiB, s.CPUPercent, ratio(s.CPURatio), ratio(s.RPSRatio),
					e.Connect+e.Read+e.Write+e.Status+e.Timeout, note)
			}
		}
		tw.Flush()
		for _, s := range ss[i:j] {
			if s.Holds != "" { // idle rows: what the proxy counts beside the RSS delta
				fmt.Fprintf(w, "  %s, by its own count (GET /api/v1/memory): %s\n", s.Proxy, s.Holds)
			}
		}
		if note := spliceNote(ss[i:j]); note != "" {
			fmt.Fprintln(w, note)
		}
		if note := bestPeerNote(ss[i:j]); note != "" {
			fmt.Fprintln(w, note)
		}
		i = j
	}
}

// peer: a proxy spliced is compared with (not spliced in another splice
// mode, not the Go baseline nor the Go TLS floor, which are our own
// floors).
func peer(proxy string) bool {
	return !strings.HasPrefix(proxy, "spliced") && proxy != "baseline" && proxy != "gotls"
}

// bestPeerNote is the line under a table that puts spliced beside the
// best peer of that row, whichever it is (issue 27): CPU per request
// against the lowest, req/s against the highest; memory per connection
// against the lowest on the idle rows. Ratios below 1 for CPU and memory,
// above 1 for req/s, are leads. Empty when spliced or every peer lacks a
// figure, and on the first and flood rows (latencies, their own tables).
func bestPeerNote(ss []Summary) string {
	var sp *Summary
	for i := range ss {
		if ss[i].Proxy == "spliced" && ss[i].Valid > 0 {
			sp = &ss[i]
		}
	}
	if sp == nil || sp.Row == "first" || sp.Row == "flood" {
		return ""
	}
	var cpu, rps, kib *Summary
	for i := range ss {
		s := &ss[i]
		if !peer(s.Proxy) || s.Valid == 0 {
			continue
		}
		if s.CPUusPerReq > 0 && (cpu == nil || s.CPUusPerReq < cpu.CPUusPerReq) {
			cpu = s
		}
		if s.ReqPerSec > 0 && (rps == nil || s.ReqPerSec > rps.ReqPerSec) {
			rps = s
		}
		if s.KiBPerConn > 0 && (kib == nil || s.KiBPerConn < kib.KiBPerConn) {
			kib = s
		}
	}
	if idleRow(sp.Row) {
		if kib == nil || sp.KiBPerConn == 0 {
			return ""
		}
		return fmt.Sprintf("  spliced ÷ best peer: memory %.2f× (%s %.2f KiB/conn)", sp.KiBPerConn/kib.KiBPerConn, kib.Proxy, kib.KiBPerConn)
	}
	var parts []string
	if cpu != nil && sp.CPUusPerReq > 0 {
		parts = append(parts, fmt.Sprintf("CPU/req %.2f× (%s %.2f µs)", sp.CPUusPerReq/cpu.CPUusPerReq, cpu.Proxy, cpu.CPUusPerReq))
	}
	if rps != nil && sp.ReqPerSec > 0 {
		parts = append(parts, fmt.Sprintf("req/s %.2f× (%s %.0f)", sp.ReqPerSec/rps.ReqPerSec, rps.Proxy, rps.ReqPerSec))
	}
	if len(parts) == 0 {
		return ""
	}
	note := "  spliced ÷ best peer: " + strings.Join(parts, ", ")
	for i := range ss {
		if f := &ss[i]; f.Proxy == "gotls" && f.Valid > 0 && f.CPUusPerReq > 0 && sp.CPUusPerReq > 0 {
			// The Go TLS floor (benchtool tlsfloor): what spliced adds
			// to crypto/tls's own work on this row.
			note += fmt.Sprintf("\n  spliced ÷ Go TLS floor (gotls): CPU/req %.2f× (%.2f µs)", sp.CPUusPerReq/f.CPUusPerReq, f.CPUusPerReq)
		}
	}
	return note
}

// spliceNote compares spliced's req/s with splice on ("spliced") and auto
// ("spliced-auto") to splice off ("spliced-off") in one table: the split
// run.sh makes on the http 1m row. Empty when spliced-off has no figure.
func spliceNote(ss []Summary) string {
	rps := map[string]float64{}
	for _, s := range ss {
		if s.Valid > 0 {
			rps[s.Proxy] = s.ReqPerSec
		}
	}
	off := rps["spliced-off"]
	if off == 0 {
		return ""
	}
	note := "spliced req/s ÷ splice off:"
	for _, p := range []struct{ name, label string }{{"spliced-auto", "auto"}, {"spliced", "on"}} {
		if v, ok := rps[p.name]; ok {
			note += fmt.Sprintf(" %s %.2f×", p.label, v/off)
		}
	}
	return note
}

func readRuns(path string) ([]Run, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var runs []Run
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" {
			continue
		}
		var r Run
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		runs = append(runs, r)
	}
	return runs, sc.Err()
}

// readMeta reads key=value lines (versions, settings) written by run.sh.
func readMeta(path string) (map[string]string, error) {
	m := map[string]string{}
	if path == "" {
		return m, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if k, v, ok := strings.Cut(line, "="); ok {
			m[strings.TrimSpace(k)] = strings.TrimSpace(v)
		}
	}
	return m, nil
}

// Document is what report writes to bench/out/<timestamp>.json.
type Document struct {
	Meta    map[string]string `json:"meta"`
	Summary []Summary         `json:"summary"`
	Runs    []Run             `json:"runs"`
}

func cmdReport(args []string) error {
	fs := flag.NewFlagSet("report", flag.ContinueOnError)
	in := fs.String("in", "", "results file (JSON lines)")
	out := fs.String("out", "", "JSON document to write (optional)")
	metaPath := fs.String("meta", "", "key=value file of run metadata (optional)")
	reps := fs.Int("repeat", 1, "repetitions per row, for the table title")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *in == "" {
		return errors.New("-in is required")
	}
	runs, err := readRuns(*in)
	if err != nil {
		return err
	}
	meta, err := readMeta(*metaPath)
	if err != nil {
		return err
	}
	ss := summarize(runs)
	printTables(os.Stdout, ss, *reps)
	if *out == "" {
		return nil
	}
	b, err := json.MarshalIndent(Document{Meta: meta, Summary: ss, Runs: runs}, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(*out, append(b, '\n'), 0o644)
}

// short keeps table notes on one readable line; the JSON has the whole text.
func short(s string) string {
	const n = 110
	if r := []rune(s); len(r) > n {
		return string(r[:n]) + "…"
	}
	return s
}

// printHandshakes is the table of the handshake rows: a request is a
// connection with one handshake.
func printHandshakes(tw *tabwriter.Writer, ss []Summary) {
	fmt.Fprintln(tw, "proxy\thandshakes/s\tCPU µs/hs\tspread\ths/CPU-s\tproxy CPU\tresumed\tCPU/hs ×HAProxy\ths/s ×HAProxy\terrors\t")
	for _, s := range ss {
		if s.Valid == 0 {
			fmt.Fprintf(tw, "%s\tn/a\t\t\t\t\t\t\t\t\t  %s\n", s.Proxy, short(s.Error))
			continue
		}
		e := s.Errors
		fmt.Fprintf(tw, "%s\t%.0f\t%.1f\t%s\t%.0f\t%.0f%%\t%.0f%%\t%s\t%s\t%d\t%s\n",
			s.Proxy, s.ReqPerSec, s.CPUusPerReq, pct(s.CPUSpread, s.Valid), s.HandshakesPerCPUSecond,
			s.CPUPercent, 100*float64(s.Resumed)/float64(max(s.Requests, 1)), ratio(s.CPURatio), ratio(s.RPSRatio),
			e.Connect+e.Read+e.Write+e.Status+e.Timeout, rowNote(s))
	}
}

// printFirst is the table of the first row: how long a Nagle client's
// first request waits for its answer after the handshake.
func printFirst(tw *tabwriter.Writer, ss []Summary) {
	fmt.Fprintln(tw, "proxy\tfirst response p50 µs\tp99 µs\tconnections/s\tproxy CPU\terrors\t")
	for _, s := range ss {
		if s.Valid == 0 {
			fmt.Fprintf(tw, "%s\tn/a\t\t\t\t\t  %s\n", s.Proxy, short(s.Error))
			continue
		}
		e := s.Errors
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f%%\t%d\t%s\n", s.Proxy, s.FirstP50us, s.FirstP99us,
			s.ReqPerSec, s.CPUPercent, e.Connect+e.Read+e.Write+e.Status+e.Timeout, rowNote(s))
	}
}

// printFlood is the table of the flood row: the probe's latency idle and
// under the flood, its p99 relative to idle and to HAProxy's under flood.
func printFlood(tw *tabwriter.Writer, ss []Summary) {
	var ref float64
	for _, s := range ss {
		if s.Proxy == reference && s.Valid > 0 {
			ref = s.FloodP99us
		}
	}
	fmt.Fprintln(tw, "proxy\tidle p50 µs\tidle p99 µs\tflood p50 µs\tflood p99 µs\tp99 ×idle\tflood p99 ×HAProxy\tprobe req/s\tflood hs/s\tproxy CPU\terrors\t")
	for _, s := range ss {
		if s.Valid == 0 {
			fmt.Fprintf(tw, "%s\tn/a\t\t\t\t\t\t\t\t\t\t  %s\n", s.Proxy, short(s.Error))
			continue
		}
		var vsIdle, vsRef float64
		if s.IdleP99us > 0 {
			vsIdle = s.FloodP99us / s.IdleP99us
		}
		if ref > 0 {
			vsRef = s.FloodP99us / ref
		}
		e := s.Errors
		fmt.Fprintf(tw, "%s\t%.0f\t%.0f\t%.0f\t%.0f\t%s\t%s\t%.0f\t%.0f\t%.0f%%\t%d\t%s\n",
			s.Proxy, s.IdleP50us, s.IdleP99us, s.FloodP50us, s.FloodP99us, ratio(vsIdle), ratio(vsRef),
			s.ReqPerSec, s.FloodHandshakesPerSec, s.CPUPercent,
			e.Connect+e.Read+e.Write+e.Status+e.Timeout, rowNote(s))
	}
}

// rowNote is what follows a table line: failed repetitions, a shared CPU.
func rowNote(s Summary) string {
	note := ""
	if s.Error != "" {
		note = fmt.Sprintf("  (%d of %d runs failed: %s)", s.Runs-s.Valid, s.Runs, short(s.Error))
	}
	if s.OtherPercent >= sharedWarn {
		note += fmt.Sprintf("  (others used %.0f%% of the proxy's CPU)", s.OtherPercent)
	}
	return note
}
