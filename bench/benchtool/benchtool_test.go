package main

import (
	"bytes"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestStatTimesSplitsAtTheLastParenthesis(t *testing.T) {
	tests := []struct {
		name      string
		line      string
		ppid      int
		ticks     int64
		wantError bool
	}{
		{
			name:  "plain name",
			line:  "1234 (haproxy) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 75 0 0 20 0 1 0 100 1000 200",
			ppid:  1,
			ticks: 325,
		},
		{
			name:  "name with spaces and parentheses",
			line:  "77 (nginx: worker (x) ) R 76 76 76 0 -1 0 0 0 0 0 9 1 0 0 20 0 1 0",
			ppid:  76,
			ticks: 10,
		},
		{name: "no parenthesis", line: "1 init S 0", wantError: true},
		{name: "truncated", line: "1 (a) S 0 1 1", wantError: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ppid, ticks, err := statTimes(tt.line)
			if tt.wantError {
				if err == nil {
					t.Fatalf("statTimes(%q) = %d, %d, nil; want an error", tt.line, ppid, ticks)
				}
				return
			}
			if err != nil || ppid != tt.ppid || ticks != tt.ticks {
				t.Fatalf("statTimes = %d, %d, %v; want %d, %d", ppid, ticks, err, tt.ppid, tt.ticks)
			}
		})
	}
}

// fakeProc writes a /proc-like tree: pid -> (ppid, ticks, rss KiB).
func fakeProc(t *testing.T, procs map[string][3]int) string {
	t.Helper()
	dir := t.TempDir()
	for pid, p := range procs {
		d := filepath.Join(dir, pid)
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
		stat := pid + " (x) S " + strconv.Itoa(p[0]) + " 0 0 0 -1 0 0 0 0 0 " + strconv.Itoa(p[1]) + " 0 0 0 20 0 1 0\n"
		status := "Name:\tx\nVmPeak:\t  999 kB\nVmRSS:\t  " + strconv.Itoa(p[2]) + " kB\nThreads:\t1\n"
		if err := os.WriteFile(filepath.Join(d, "stat"), []byte(stat), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "status"), []byte(status), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.MkdirAll(filepath.Join(dir, "self"), 0o755); err != nil { // non-numeric: skipped
		t.Fatal(err)
	}
	return dir
}

func TestTreeSumsCountTheProcessAndItsDescendantsOnly(t *testing.T) {
	// 10 is an nginx master with workers 11 and 12; 12 has a child 13;
	// 20 is unrelated.
	proc := fakeProc(t, map[string][3]int{
		"10": {1, 5, 1000},
		"11": {10, 300, 2000},
		"12": {10, 200, 3000},
		"13": {12, 7, 400},
		"20": {1, 9999, 99999},
	})
	ticks, err := treeCPUTicks(proc, 10)
	if err != nil || ticks != 512 {
		t.Fatalf("treeCPUTicks = %d, %v; want 512", ticks, err)
	}
	rss, err := treeRSS(proc, 10)
	if err != nil || rss != 6400 {
		t.Fatalf("treeRSS = %d, %v; want 6400", rss, err)
	}
	if _, err := treeCPUTicks(proc, 99); err == nil {
		t.Fatal("treeCPUTicks of a missing process: want an error")
	}
}

func TestParseWrkResultReadsTheDoneLine(t *testing.T) {
	out := "Running 3s test @ http://127.0.0.1:1/64\n  1 threads and 50 connections\n" +
		"BENCHRESULT requests=1200 bytes=314572800 duration_us=3000000 connect=1 read=2 write=3 status=4 timeout=5 p50_us=900 p99_us=4000\n"
	var r Run
	if err := parseWrkResult(out, &r); err != nil {
		t.Fatal(err)
	}
	want := Run{Requests: 1200, Bytes: 314572800, Seconds: 3, LatP50us: 900, LatP99us: 4000,
		Errors: Errors{Connect: 1, Read: 2, Write: 3, Status: 4, Timeout: 5}}
	if r != want {
		t.Fatalf("parsed %+v, want %+v", r, want)
	}
	for _, bad := range []string{
		"Running 3s test\n", // wrk died before done()
		"BENCHRESULT requests=1 bytes=x duration_us=1\n",
		"BENCHRESULT bytes=1 duration_us=1\n",
	} {
		if err := parseWrkResult(bad, &r); err == nil {
			t.Errorf("parseWrkResult(%q): want an error", bad)
		}
	}
}

func TestValidateRejectsRunsThatMeasureNothingOrErrors(t *testing.T) {
	tests := []struct {
		name string
		run  Run
		ok   bool
	}{
		{"clean", Run{Requests: 10000}, true},
		{"a few read errors", Run{Requests: 10000, Errors: Errors{Read: 50}}, true},
		{"nothing passed", Run{}, false},
		{"proxy answered errors", Run{Requests: 10000, Errors: Errors{Status: 11}}, false},
		{"connects failing", Run{Requests: 10000, Errors: Errors{Connect: 101}}, false},
		{"reads failing", Run{Requests: 10000, Errors: Errors{Read: 101}}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := validate(&tt.run); (got == "") != tt.ok {
				t.Fatalf("validate = %q, want ok=%v", got, tt.ok)
			}
		})
	}
}

func TestSummarizeTakesMediansAndRatiosToHAProxy(t *testing.T) {
	run := func(proxy string, rep int, reqs int64, cpu float64) Run {
		return Run{Mode: "tcp", Row: "ka", Proxy: proxy, Rep: rep, Conns: 50,
			Seconds: 10, Requests: reqs, Bytes: reqs * 300, CPUSeconds: cpu}
	}
	runs := []Run{
		run("spliced", 1, 200000, 2), run("haproxy", 1, 100000, 2), run("baseline", 1, 100000, 3),
		run("spliced", 2, 200000, 2.2), run("haproxy", 2, 100000, 1.8), run("baseline", 2, 100000, 3),
		run("spliced", 3, 200000, 1.8), run("haproxy", 3, 100000, 9), // outlier: median ignores it
		{Mode: "tcp", Row: "ka", Proxy: "baseline", Rep: 3, Error: "proxy exited"},
		{Mode: "tcp", Row: "idle", Proxy: "haproxy", Rep: 1, IdleConns: 1000, RSSBeforeKiB: 1000, RSSAfterKiB: 2500},
		{Mode: "tcp", Row: "idle", Proxy: "spliced", Rep: 1, IdleConns: 1000, RSSBeforeKiB: 1000, RSSAfterKiB: 1750},
		{Mode: "tcp", Row: "1m", Proxy: "spliced", Rep: 1, Error: "admin API did not answer"},
	}
	ss := summarize(runs)
	type line struct {
		row, proxy      string
		valid           int
		cpuUs, cpuRatio float64
		rpsRatio        float64
		kibRatio        float64
		err             string
	}
	want := []line{
		{"ka", "spliced", 3, 10, 0.5, 2, 0, ""},
		{"ka", "haproxy", 3, 20, 1, 1, 0, ""},
		{"ka", "baseline", 2, 30, 1.5, 1, 0, "proxy exited"},
		{"1m", "spliced", 0, 0, 0, 0, 0, "admin API did not answer"},
		{"idle", "spliced", 1, 0, 0, 0, 0.5, ""}, // proxies in order of first appearance
		{"idle", "haproxy", 1, 0, 0, 0, 1, ""},
	}
	if len(ss) != len(want) {
		t.Fatalf("got %d summary lines, want %d: %+v", len(ss), len(want), ss)
	}
	near := func(a, b float64) bool { return math.Abs(a-b) < 1e-9 }
	for i, w := range want {
		s := ss[i]
		if s.Row != w.row || s.Proxy != w.proxy || s.Valid != w.valid || !near(s.CPUusPerReq, w.cpuUs) ||
			!near(s.CPURatio, w.cpuRatio) || !near(s.RPSRatio, w.rpsRatio) || !near(s.KiBRatio, w.kibRatio) || s.Error != w.err {
			t.Errorf("line %d = %+v, want %+v", i, s, w)
		}
	}
	var buf bytes.Buffer
	printTables(&buf, ss, 3)
	for _, frag := range []string{"medians of 3 runs", "0.50×", "n/a", "admin API did not answer", "1.50"} {
		if !strings.Contains(buf.String(), frag) {
			t.Errorf("tables lack %q:\n%s", frag, buf.String())
		}
	}
}

func TestMedian(t *testing.T) {
	tests := []struct {
		in   []float64
		want float64
	}{
		{nil, 0},
		{[]float64{3}, 3},
		{[]float64{5, 1, 3}, 3},
		{[]float64{4, 1, 3, 2}, 2.5},
	}
	for _, tt := range tests {
		if got := median(tt.in); got != tt.want {
			t.Errorf("median(%v) = %v, want %v", tt.in, got, tt.want)
		}
	}
}

func TestCPUBusyTicksSkipsIdleAndIOWait(t *testing.T) {
	stat := "cpu  77912 0 29268 106575 993 0 4147 151 0 0\n" +
		"cpu0 100 1 20 5000 300 2 30 4 0 0\n" +
		"cpu1 38863 0 15933 51605 706 0 2339 74 0 0\n" +
		"intr 1 2 3\n"
	tests := []struct {
		cpu     int
		want    int64
		wantErr bool
	}{
		{cpu: 0, want: 100 + 1 + 20 + 2 + 30 + 4},
		{cpu: 1, want: 38863 + 15933 + 2339 + 74},
		{cpu: 2, wantErr: true},
	}
	for _, tt := range tests {
		got, err := cpuBusyTicks(stat, tt.cpu)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("cpuBusyTicks(cpu%d) = %d, %v; want %d, error %v", tt.cpu, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestSpliceNoteComparesSplicedModesToOff(t *testing.T) {
	ss := []Summary{
		{Proxy: "spliced", Valid: 3, Metrics: Metrics{ReqPerSec: 990}},
		{Proxy: "spliced-auto", Valid: 3, Metrics: Metrics{ReqPerSec: 950}},
		{Proxy: "spliced-off", Valid: 3, Metrics: Metrics{ReqPerSec: 1000}},
		{Proxy: "haproxy", Valid: 3, Metrics: Metrics{ReqPerSec: 1200}},
	}
	if got, want := spliceNote(ss), "spliced req/s ÷ splice off: auto 0.95× on 0.99×"; got != want {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := spliceNote(ss[:2]); got != "" {
		t.Fatalf("no spliced-off: got %q, want nothing", got)
	}
}

func TestHandshakeRowsCountResumptionAndHandshakesPerCPUSecond(t *testing.T) {
	var r Run
	if err := parseWrkResult("BENCHRESULT requests=1000 bytes=64000 duration_us=2000000 connect=0 read=0 write=0 status=0 timeout=0 p50_us=1 p99_us=2 resumed=990\n", &r); err != nil {
		t.Fatal(err)
	}
	r.Row, r.CPUSeconds = "resume", 0.5
	if r.Resumed != 990 || validate(&r) != "" {
		t.Fatalf("resumed %d, validate %q", r.Resumed, validate(&r))
	}
	if m := derive(r); m.HandshakesPerCPUSecond != 2000 || m.CPUusPerReq != 500 {
		t.Fatalf("derive = %+v", m)
	}
	r.Resumed = 900 // under 95%: the proxy does not resume
	if v := validate(&r); !strings.Contains(v, "resumed") {
		t.Fatalf("validate = %q", v)
	}
	r.Row = "hs-ecdsa" // a full-handshake row where some resumed
	if v := validate(&r); !strings.Contains(v, "must be full") {
		t.Fatalf("validate = %q", v)
	}
	r.Resumed = 0
	if v := validate(&r); v != "" {
		t.Fatalf("validate = %q", v)
	}
}

func TestFloodTableComparesLatencyToIdleAndToHAProxy(t *testing.T) {
	runs := []Run{
		{Mode: "tls", Row: "flood", Proxy: "spliced", Rep: 1, Requests: 100, Seconds: 1, WallSeconds: 1, CPUSeconds: 1,
			IdleLatP50us: 100, IdleLatP99us: 200, LatP50us: 300, LatP99us: 1000, Handshakes: 500},
		{Mode: "tls", Row: "flood", Proxy: "haproxy", Rep: 1, Requests: 100, Seconds: 1, WallSeconds: 1, CPUSeconds: 1,
			IdleLatP50us: 100, IdleLatP99us: 250, LatP50us: 300, LatP99us: 2000, Handshakes: 600},
	}
	var b bytes.Buffer
	printTables(&b, summarize(runs), 1)
	out := b.String()
	for _, want := range []string{"5.00×", "0.50×", "500", "600"} {
		if !strings.Contains(out, want) {
			t.Errorf("flood table lacks %q:\n%s", want, out)
		}
	}
}

func TestPercentiles(t *testing.T) {
	var lat []time.Duration
	for i := 100; i >= 1; i-- {
		lat = append(lat, time.Duration(i)*time.Microsecond)
	}
	if p50, p99 := percentiles(lat); p50 != 51*time.Microsecond || p99 != 100*time.Microsecond {
		t.Fatalf("percentiles = %v, %v", p50, p99)
	}
	if p50, p99 := percentiles(nil); p50 != 0 || p99 != 0 {
		t.Fatal("percentiles of nothing")
	}
}

// TestBestPeerNotePicksTheBestPeerOfEachMeasure: under a table, spliced
// is compared with the lowest CPU per request and the highest req/s of
// its peers (not spliced in other modes, not the baseline), and with the
// lowest memory on idle rows.
func TestBestPeerNotePicksTheBestPeerOfEachMeasure(t *testing.T) {
	mk := func(proxy string, cpu, rps, kib float64) Summary {
		return Summary{Mode: "http", Row: "ka", Proxy: proxy, Valid: 1,
			Metrics: Metrics{CPUusPerReq: cpu, ReqPerSec: rps, KiBPerConn: kib}}
	}
	ss := []Summary{mk("spliced", 18, 30000, 0), mk("spliced-off", 10, 50000, 0), mk("haproxy", 20, 31000, 0),
		mk("nginx", 16, 29000, 0), mk("baseline", 5, 90000, 0)}
	got := bestPeerNote(ss)
	want := "  spliced ÷ best peer: CPU/req 1.12× (nginx 16.00 µs), req/s 0.97× (haproxy 31000)"
	if got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
	idle := []Summary{mk("spliced", 0, 0, 0.5), mk("haproxy", 0, 0, 1.0), mk("nginx", 0, 0, 0.73)}
	for i := range idle {
		idle[i].Row = "idle"
	}
	if got, want := bestPeerNote(idle), "  spliced ÷ best peer: memory 0.68× (nginx 0.73 KiB/conn)"; got != want {
		t.Errorf("idle: got %q, want %q", got, want)
	}
	if got := bestPeerNote(ss[1:]); got != "" {
		t.Errorf("without spliced: %q, want nothing", got)
	}
}

func TestIdleHoldsLine(t *testing.T) {
	m0 := &spMemory{}
	m0.Go.HeapObjectsBytes = 1000
	m1 := &spMemory{IdleHTTPConnBytes: 304, IdleHTTPConn: []spPart{{Name: "h1_conn", Bytes: 288}, {Name: "fd_table_slot", Bytes: 8}}}
	m1.Go.HeapObjectsBytes = 1000 + 10*500
	m1.Go.GCCycles = 1
	m1.Loops = []spLoop{{Bytes: 10 * 300, Objects: []spPart{{Name: "h1_conn", Live: 10, Bytes: 2880}, {Name: "stream", Free: 1, Bytes: 120}}}}
	got := holds(m0, m1, 10, 5)
	for _, want := range []string{"holds 304 B (h1_conn 288 + fd_table_slot 8)", "1 loops' objects +300 B (h1_conn +288, stream +12)",
		"Go heap objects +500 B", "RSS +512 B", "GC cycles +1"} {
		if !strings.Contains(got, want) {
			t.Errorf("holds line %q lacks %q", got, want)
		}
	}
}
