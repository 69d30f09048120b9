package engine

import (
	"encoding/json"
	"log/slog"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/looptest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

func findBackend(s stats.Snapshot, name string) *stats.Backend {
	for i := range s.Backends {
		if s.Backends[i].Name == name {
			return &s.Backends[i]
		}
	}
	return nil
}

// N connections through a frontend are counted exactly, on the frontend,
// the backend and the server, with their bytes, whatever loop took them;
// and the counters survive a new generation of the same objects.
func TestStatsCountTrafficExactlyAndSurviveApply(t *testing.T) {
	e := newTestEngine(t)
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, origin, port))

	const n = 10
	const msg = "hello, world" // 12 bytes echoed back
	for range n {
		c := hello(t, port, "hi")
		echo(t, c, msg)
		c.Close()
	}
	fe := func() stats.Frontend { return e.Stats().Frontends[0] }
	testutil.Eventually(t, 5*time.Second, func() bool { return fe().ConnTotal == n && fe().ConnCur == 0 }, "every connection closed")
	check := func(gen int64, conns int64) {
		t.Helper()
		s := e.Stats()
		if s.Generation != gen {
			t.Errorf("generation = %d, want %d", s.Generation, gen)
		}
		f := s.Frontends[0]
		if f.ConnTotal != conns || f.BytesIn != conns*int64(len(msg)) || f.BytesOut != conns*int64(2+len(msg)) {
			t.Errorf("frontend conns %d in %d out %d, want %d, %d, %d", f.ConnTotal, f.BytesIn, f.BytesOut,
				conns, conns*int64(len(msg)), conns*int64(2+len(msg)))
		}
		b := findBackend(s, "be")
		if b == nil || b.ConnTotal != conns || b.BytesIn != f.BytesIn || b.BytesOut != f.BytesOut || b.State != "up" || b.ServersUp != 1 {
			t.Fatalf("backend = %+v, want the frontend's counts, up", b)
		}
		sv := b.Servers[0]
		if sv.ConnTotal != conns || sv.ConnCur != 0 || sv.BytesIn != f.BytesIn || sv.BytesOut != f.BytesOut || sv.State != "up" {
			t.Errorf("server = %+v, want %d connections and the frontend's bytes", sv, conns)
		}
		if sv.ConnectTimeAvgUs <= 0 {
			t.Errorf("server connect time average = %v, want > 0", sv.ConnectTimeAvgUs)
		}
	}
	check(1, n)
	if r := fe().ConnRate; r <= 0 || r > n {
		t.Errorf("connection rate = %v, want in (0, %d]", r, n)
	}

	// A new generation that keeps the objects keeps their counters.
	c2 := tcpConfig(2, origin, port)
	c2.Frontends[0].Maxconn = 1000
	apply(t, e, c2)
	check(2, n)
	c := hello(t, port, "hi")
	echo(t, c, msg)
	c.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return fe().ConnTotal == n+1 && fe().ConnCur == 0 }, "the next connection closed")
	check(2, n+1)
}

func TestLoopActivityReportsEveryLoop(t *testing.T) {
	e := newTestEngine(t)
	if got := e.LoopActivity(); len(got) != 0 {
		t.Fatalf("activity before the first Apply: %d loops", len(got))
	}
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, origin, port))
	c := hello(t, port, "hi")
	c.Close()
	testutil.Eventually(t, 5*time.Second, func() bool {
		var acc uint64
		for _, a := range e.LoopActivity() {
			acc += a.Accepted
		}
		return acc == 1
	}, "an accepted connection counted")
	act := e.LoopActivity()
	if len(act) != 2 {
		t.Fatalf("%d loops, want 2", len(act))
	}
	for i, a := range act {
		if a.Loop != i || a.Loops == 0 {
			t.Errorf("loop %d: %+v", i, a)
		}
		// Seed 000's TC0/TC1/TC2: the time of each class, and its share
		// of the three in percent (what the web UI's loops table shows).
		sum := a.CPUUrgentNs + a.CPUNormalNs + a.CPUBulkNs
		if sum == 0 {
			t.Errorf("loop %d ran %d rounds in no class time", i, a.Loops)
			continue
		}
		pct := func(v uint64) float64 { return math.Round(1000*float64(v)/float64(sum)) / 10 }
		if a.ShareUrg != pct(a.CPUUrgentNs) || a.ShareNrm != pct(a.CPUNormalNs) || a.ShareBlk != pct(a.CPUBulkNs) {
			t.Errorf("loop %d: shares %v/%v/%v of %d/%d/%d ns", i, a.ShareUrg, a.ShareNrm, a.ShareBlk, a.CPUUrgentNs, a.CPUNormalNs, a.CPUBulkNs)
		}
		if s := a.ShareUrg + a.ShareNrm + a.ShareBlk; s < 99.8 || s > 100.2 {
			t.Errorf("loop %d: shares sum to %v", i, s)
		}
	}
	// The field names of /api/v1/activity (issue 26).
	j, err := json.Marshal(act[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"tasklets_urgent", "tasklets_normal", "tasklets_bulk", "cpu_urgent_ns", "cpu_normal_ns",
		"cpu_bulk_ns", "cpu_handshake_ns", "share_urgent", "share_normal", "share_bulk", "avg_loop_us"} {
		if !strings.Contains(string(j), `"`+k+`":`) {
			t.Errorf("activity has no %s: %s", k, j)
		}
	}
}

// With access_log on, each connection yields one line, written off the
// loop; with it off, none.
func TestAccessLogOneLinePerConnectionOnlyWhenOn(t *testing.T) {
	var buf testutil.SyncBuffer
	e, err := New(Options{Logger: slog.New(slog.NewJSONHandler(&buf, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close(t.Context())
	origin := greeter(t, "hi")
	port := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, origin, port))
	c := hello(t, port, "hi")
	quiet := c.LocalAddr().String()
	c.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return e.Stats().Frontends[0].ConnCur == 0 && e.Stats().Frontends[0].ConnTotal == 1 }, "connection closed")
	// The loops finished closing it: had they logged it, its entry would be
	// in a ring now, ahead of every entry of the connections below. The
	// writer writes entries in the order they ended, so once it has
	// written theirs it has written any of this one (checked below).
	looptest.RoundsPass(t, e.loops...)

	c2 := tcpConfig(2, origin, port)
	c2.Frontends[0].AccessLog = true
	apply(t, e, c2)
	const n = 3
	for range n {
		c := hello(t, port, "hi")
		echo(t, c, "abc")
		c.Close()
	}
	var lines []map[string]any
	testutil.Eventually(t, 5*time.Second, func() bool {
		lines = lines[:0]
		for _, l := range strings.Split(buf.String(), "\n") {
			var m map[string]any
			if json.Unmarshal([]byte(l), &m) == nil && m["msg"] == "access" {
				lines = append(lines, m)
			}
		}
		return len(lines) >= n
	}, "3 access lines")
	for _, m := range lines {
		if m["client"] == quiet {
			t.Fatalf("access line with access_log off: %v", m)
		}
	}
	if len(lines) != n {
		t.Fatalf("%d access lines, want %d:\n%s", len(lines), n, buf.String())
	}
	for _, m := range lines {
		if m["frontend"] != "fe" || m["backend"] != "be" || m["server"] != "s1" || m["bytes_in"] != 3.0 ||
			m["bytes_out"] != 5.0 || !strings.HasPrefix(m["client"].(string), "127.0.0.1:") {
			t.Errorf("access line %v", m)
		}
	}
}
