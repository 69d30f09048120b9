package accesslog

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/stats"
)

// TestRecordOfDerivesHAProxyTimers: the timers from the phase times, -1
// for a phase not reached, and the request line redacted.
func TestRecordOfDerivesHAProxyTimers(t *testing.T) {
	const msec = int64(time.Millisecond)
	wall := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name           string
		e              stats.LogEntry
		tq, tw, tc, tr int64
		ta             int64
	}{
		{"connected", stats.LogEntry{HTTP: true, Start: 1000 * msec, Head: 1002 * msec, Granted: 1003 * msec,
			ConnStart: 1003 * msec, Connected: 1007 * msec, Resp: 1017 * msec, End: 1020 * msec}, 2, 1, 4, 10, 20},
		{"reused connection", stats.LogEntry{HTTP: true, Start: 1000 * msec, Head: 1001 * msec, Granted: 1001 * msec,
			Resp: 1006 * msec, End: 1006 * msec}, 1, 0, -1, 5, 6},
		{"no server", stats.LogEntry{HTTP: true, Start: 1000 * msec, Head: 1001 * msec, End: 1001 * msec}, 1, -1, -1, -1, 1},
		{"tcp", stats.LogEntry{Start: 1000 * msec, Granted: 1000 * msec, ConnStart: 1000 * msec, Connected: 1003 * msec,
			End: 1100 * msec}, -1, 0, 3, -1, 100},
	} {
		r := RecordOf(&tc.e, wall, 1100*msec)
		if r.TqMs != tc.tq || r.TwMs != tc.tw || r.TcMs != tc.tc || r.TrMs != tc.tr || r.TaMs != tc.ta {
			t.Errorf("%s: tq %d tw %d tc %d tr %d ta %d, want %d %d %d %d %d", tc.name,
				r.TqMs, r.TwMs, r.TcMs, r.TrMs, r.TaMs, tc.tq, tc.tw, tc.tc, tc.tr, tc.ta)
		}
		if want := wall.Add(-100 * time.Millisecond); !r.Time.Equal(want) {
			t.Errorf("%s: time %v, want the start %v", tc.name, r.Time, want)
		}
	}
}

// TestLogWritesLinesAndKeepsTheLast: one JSON line per entry with the
// record's fields; Recent returns the newest last, bounded; a subscriber
// gets the records written after it subscribed.
func TestLogWritesLinesAndKeepsTheLast(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), 3, 0, fixedClock)
	ch, stop := l.Subscribe(8)
	defer stop()
	for i := range 5 {
		e := stats.LogEntry{HTTP: true, Frontend: "fe", Backend: "be", Server: "s1", Status: 200,
			Client: netip.MustParseAddrPort("192.0.2.1:4242"), BytesIn: int64(i), Term: stats.TermNormal, Proto: 20}
		e.SetLine([]byte("GET /?access_token=x HTTP/2.0"))
		l.Write(&e)
	}
	lines := bytes.Split(bytes.TrimSpace(buf.Bytes()), []byte("\n"))
	if len(lines) != 5 {
		t.Fatalf("%d lines, want 5", len(lines))
	}
	var m map[string]any
	if err := json.Unmarshal(lines[4], &m); err != nil {
		t.Fatal(err)
	}
	if m["msg"] != "access" || m["request"] != "GET /?access_token=REDACTED HTTP/2.0" || m["proto"] != "HTTP/2" || m["status"] != 200.0 ||
		m["bytes_in"] != 4.0 || m["termination"] != "--" || m["client"] != "192.0.2.1:4242" || m["tc_ms"] != -1.0 {
		t.Errorf("line %s", lines[4])
	}
	got := l.Recent(0)
	if len(got) != 3 || got[0].BytesIn != 2 || got[2].BytesIn != 4 {
		t.Fatalf("recent %+v, want the last 3, newest last", got)
	}
	if got := l.Recent(1); len(got) != 1 || got[0].BytesIn != 4 {
		t.Fatalf("recent(1) %+v", got)
	}
	for i := range 5 {
		if r := <-ch; r.BytesIn != int64(i) {
			t.Fatalf("subscriber got %d, want %d", r.BytesIn, i)
		}
	}
}

// TestFlushOrdersABatchByEnd: entries added from several loops' rings
// are written in the order they ended.
func TestFlushOrdersABatchByEnd(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), 0, 0, fixedClock)
	for _, end := range []int64{30, 10, 40, 20} { // loop 0: 30, 40; loop 1: 10, 20
		l.Add(&stats.LogEntry{End: end, BytesIn: end})
	}
	l.Flush()
	var got []int64
	for _, r := range l.Recent(0) {
		got = append(got, r.BytesIn)
	}
	if !slices.Equal(got, []int64{10, 20, 30, 40}) {
		t.Errorf("recent in order %v, want by end", got)
	}
	if i, j := bytes.Index(buf.Bytes(), []byte(`"bytes_in":10`)), bytes.Index(buf.Bytes(), []byte(`"bytes_in":40`)); i < 0 || j < i {
		t.Errorf("lines not in end order:\n%s", buf.String())
	}
}

// fixedClock is a monotonic clock at 0: entries with Start 0 are stamped now.
func fixedClock() int64 { return 0 }

// TestRecordOfRedactsASecretCutShort: a request line cut at
// stats.LineMax inside a token shows none of it, wherever the token
// stood (a path segment, a query name, a value after "Bearer ", escaped):
// cut short, the secret is shorter than one and no longer matched whole.
func TestRecordOfRedactsASecretCutShort(t *testing.T) {
	const secret = "spliced_Zq0123456789abcdefghijklmnopqrstuvwxyz"
	for _, piece := range []string{
		"/" + secret,
		"/" + secret + ".json",
		"/x?" + secret + "=1",
		"/x?a=Bearer%20" + secret,
		"/x?a=Bearer+" + secret,
		"/%2F" + secret,
		"/%73" + secret[1:],
		"/%73pliced_Zq%30%31%32%33%34%35%36%37%38%39%41%42%43%44%45%46%47%48%49%4A%4B%4C%4D",
	} {
		for pad := stats.LineMax - 60; pad < stats.LineMax; pad++ {
			line := "GET /" + strings.Repeat("a", pad) + piece + " HTTP/1.1"
			e := stats.LogEntry{HTTP: true}
			e.SetLine([]byte(line))
			r := RecordOf(&e, time.Now(), 0)
			if i := strings.Index(r.Request, "Zq"); i >= 0 {
				t.Errorf("%q cut at %d logs %q", piece, stats.LineMax, r.Request[max(i-20, 0):])
			}
		}
	}
}

// benchEntries are a normal request and an abnormal one (a 502 SH).
func benchEntries() (normal, abnormal stats.LogEntry) {
	normal = stats.LogEntry{HTTP: true, Frontend: "fe", Backend: "be", Server: "s1", Status: 200,
		Client: netip.MustParseAddrPort("192.0.2.1:4242"), Term: stats.TermNormal}
	normal.SetLine([]byte("GET /index.html HTTP/1.1"))
	abnormal = normal
	abnormal.Status, abnormal.Term = 502, stats.Termination{'S', 'H'}
	return normal, abnormal
}

// BenchmarkLogWrite is the writer goroutine's cost per entry: the record,
// the line (to io.Discard) and what the Log keeps of it.
func BenchmarkLogWrite(b *testing.B) {
	normal, abnormal := benchEntries()
	for _, bc := range []struct {
		name string
		e    *stats.LogEntry
	}{{"normal", &normal}, {"abnormal", &abnormal}} {
		b.Run(bc.name, func(b *testing.B) {
			l := New(slog.New(slog.NewJSONHandler(io.Discard, nil)), 0, 0, fixedClock)
			b.ReportAllocs()
			for b.Loop() {
				l.Write(bc.e)
			}
		})
	}
}

// TestFlushBeforeHoldsBackTheLastEnded: FlushBefore writes what ended up
// to the cut and keeps the rest for the next flush, so that an entry
// pushed late (ended at 20, added after 30 was) still comes out in order.
func TestFlushBeforeHoldsBackTheLastEnded(t *testing.T) {
	var buf bytes.Buffer
	l := New(slog.New(slog.NewJSONHandler(&buf, nil)), 0, 0, fixedClock)
	for _, end := range []int64{30, 10} {
		l.Add(&stats.LogEntry{End: end, BytesIn: end})
	}
	l.FlushBefore(25)
	got := func() []int64 {
		var out []int64
		for _, r := range l.Recent(0) {
			out = append(out, r.BytesIn)
		}
		return out
	}
	if g := got(); !slices.Equal(g, []int64{10}) {
		t.Fatalf("after the cut at 25: %v, want 10 alone", g)
	}
	l.Add(&stats.LogEntry{End: 20, BytesIn: 20}) // ended before 30, pushed after it
	l.Add(&stats.LogEntry{End: 40, BytesIn: 40})
	l.FlushBefore(35)
	if g := got(); !slices.Equal(g, []int64{10, 20, 30}) {
		t.Fatalf("after the cut at 35: %v, want 10 20 30", g)
	}
	l.Flush()
	if g := got(); !slices.Equal(g, []int64{10, 20, 30, 40}) {
		t.Fatalf("after Flush: %v, want all four", g)
	}
	if n := bytes.Count(buf.Bytes(), []byte("\n")); n != 4 {
		t.Fatalf("%d lines, want 4", n)
	}
}
