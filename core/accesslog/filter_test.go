package accesslog

import (
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/stats"
)

// TestParseFilterTakesEachParameter: each parameter's accepted forms, and
// the values it refuses with an error that names it.
func TestParseFilterTakesEachParameter(t *testing.T) {
	since := time.Date(2026, 12, 1, 20, 53, 44, 0, time.UTC)
	for _, tc := range []struct {
		query string
		want  Filter
	}{
		{"", Filter{}},
		{"status=5xx", Filter{HasStatus: true, StatusMin: 500, StatusMax: 599}},
		{"status=1xx", Filter{HasStatus: true, StatusMin: 100, StatusMax: 199}},
		{"status=4XX", Filter{HasStatus: true, StatusMin: 400, StatusMax: 499}},
		{"status=502", Filter{HasStatus: true, StatusMin: 502, StatusMax: 502}},
		{"status=none", Filter{HasStatus: true}},
		{"termination=SH", Filter{Termination: "SH"}},
		{"termination=--", Filter{Termination: "--"}},
		{"termination=cR", Filter{Termination: "cR"}},
		{"frontend=pub&backend=web&server=s-1", Filter{Frontend: "pub", Backend: "web", Server: "s-1"}},
		{"client=192.0.2.7", Filter{Client: netip.MustParseAddr("192.0.2.7")}},
		{"client=192.0.2.7:51234", Filter{Client: netip.MustParseAddr("192.0.2.7"), ClientPort: 51234}},
		{"client=::1", Filter{Client: netip.MustParseAddr("::1")}},
		{"client=[::1]", Filter{Client: netip.MustParseAddr("::1")}},
		{"client=[2001:db8::1]:443", Filter{Client: netip.MustParseAddr("2001:db8::1"), ClientPort: 443}},
		{"client=::ffff:192.0.2.7", Filter{Client: netip.MustParseAddr("192.0.2.7")}},
		{"since=2026-12-01T20:53:44Z", Filter{Since: since}},
		{"since=2026-12-01T21:53:44.5%2B01:00", Filter{Since: since.Add(500 * time.Millisecond)}},
		{"abnormal=1", Filter{Abnormal: true}},
		{"abnormal=0", Filter{}},
	} {
		q, _ := url.ParseQuery(tc.query)
		got, err := ParseFilter(q)
		if err != nil {
			t.Errorf("%s: %v", tc.query, err)
			continue
		}
		if !got.Since.Equal(tc.want.Since) {
			t.Errorf("%s: since %v, want %v", tc.query, got.Since, tc.want.Since)
		}
		if got.Client.IsValid() && got.clientStr != got.Client.String() {
			t.Errorf("%s: client text %q", tc.query, got.clientStr)
		}
		got.Since, tc.want.Since, got.clientStr = time.Time{}, time.Time{}, ""
		if got != tc.want {
			t.Errorf("%s: %+v, want %+v", tc.query, got, tc.want)
		}
	}
	for _, tc := range []struct{ query, param string }{
		{"status=6xx", "status"},
		{"status=5x", "status"},
		{"status=99", "status"},
		{"status=600", "status"},
		{"status=0502", "status"},
		{"status=+50", "status"},
		{"status=bad", "status"},
		{"termination=S", "termination"},
		{"termination=SHH", "termination"},
		{"termination=XH", "termination"},
		{"termination=Sx", "termination"},
		{"frontend=Pub", "frontend"},
		{"backend=a%20b", "backend"},
		{"server=-s", "server"},
		{"client=192.0.2", "client"},
		{"client=host.example:80", "client"},
		{"client=192.0.2.7:99999", "client"},
		{"since=yesterday", "since"},
		{"since=2026-12-01", "since"},
		{"abnormal=true", "abnormal"},
		{"abnormal=2", "abnormal"},
	} {
		q, _ := url.ParseQuery(tc.query)
		_, err := ParseFilter(q)
		var pe *ParamError
		if !errors.As(err, &pe) || pe.Param != tc.param || !strings.HasPrefix(err.Error(), tc.param+" must be ") {
			t.Errorf("%s: error %v, want one about %s", tc.query, err, tc.param)
		}
	}
}

// TestFilterMatch: what each filter selects; filters together all have
// to match.
func TestFilterMatch(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 20, 0, 0, 0, time.UTC)
	ok := Record{Time: t0, Frontend: "pub", Backend: "web", Server: "s1", Client: "192.0.2.7:51234", Status: 200, Termination: "--"}
	with := func(f func(*Record)) Record { r := ok; f(&r); return r }
	bad := with(func(r *Record) { r.Status, r.Termination = 502, "SH" })
	notFound := with(func(r *Record) { r.Status = 404 })
	abort := with(func(r *Record) { r.Termination = "CD" })
	tcp := with(func(r *Record) { r.Status = 0; r.Mode = "tcp" })
	v6 := with(func(r *Record) { r.Client = "[2001:db8::1]:443" })
	mapped := with(func(r *Record) { r.Client = "[::ffff:192.0.2.7]:1" })
	later := with(func(r *Record) { r.Time = t0.Add(time.Second) })
	for _, tc := range []struct {
		query   string
		matches []Record
		not     []Record
	}{
		{"", []Record{ok, bad, abort, tcp}, nil},
		{"status=5xx", []Record{bad}, []Record{ok, notFound, abort, tcp}},
		{"status=502", []Record{bad}, []Record{ok, notFound}},
		{"status=none", []Record{tcp}, []Record{ok, bad}},
		{"termination=SH", []Record{bad}, []Record{ok, abort}},
		{"abnormal=1", []Record{bad, notFound, abort}, []Record{ok, tcp}},
		{"frontend=pub&backend=web&server=s1", []Record{ok}, nil},
		{"frontend=other", nil, []Record{ok}},
		{"backend=other", nil, []Record{ok}},
		{"server=s2", nil, []Record{ok}},
		{"client=192.0.2.7", []Record{ok, mapped}, []Record{v6}},
		{"client=192.0.2.7:51234", []Record{ok}, []Record{mapped}},
		{"client=192.0.2.7:1", []Record{mapped}, []Record{ok}},
		{"client=2001:db8::1", []Record{v6}, []Record{ok}},
		{"client=[2001:db8::1]:443", []Record{v6}, []Record{ok}},
		{"client=192.0.2.8", nil, []Record{ok}},
		{"client=192.0.2.70", nil, []Record{ok, with(func(r *Record) { r.Client = "[::ffff:192.0.2.7]:51234" })}},
		{"client=fe80::1", []Record{with(func(r *Record) { r.Client = "[fe80::1%eth0]:80" })}, []Record{ok}},
		{"client=192.0.2.7:5123", nil, []Record{ok, with(func(r *Record) { r.Client = "192.0.2.7:512345" })}},
		{"client=192.0.2.7", nil, []Record{with(func(r *Record) { r.Client = "" }), with(func(r *Record) { r.Client = "192.0.2.7" })}},
		{"since=2026-12-01T20:00:00Z", []Record{ok, later}, nil},
		{"since=2026-12-01T20:00:00.5Z", []Record{later}, []Record{ok}},
		{"status=5xx&frontend=pub", []Record{bad}, []Record{with(func(r *Record) { r.Status, r.Frontend = 503, "other" })}},
	} {
		q, _ := url.ParseQuery(tc.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatalf("%s: %v", tc.query, err)
		}
		for _, r := range tc.matches {
			if !f.Match(&r) {
				t.Errorf("%q does not select %+v", tc.query, r)
			}
		}
		for _, r := range tc.not {
			if f.Match(&r) {
				t.Errorf("%q selects %+v", tc.query, r)
			}
		}
	}
}

// entry is an http entry of status and termination, its BytesIn n (to
// tell entries apart).
func entry(n int, status int32, term string) *stats.LogEntry {
	e := &stats.LogEntry{HTTP: true, Frontend: "pub", Backend: "web", Server: "s1", Status: status, BytesIn: int64(n),
		Client: netip.MustParseAddrPort("192.0.2.7:4242"), Term: stats.Termination{term[0], term[1]}}
	e.SetLine([]byte("GET / HTTP/1.1"))
	return e
}

func ids(rs []Record) []int64 {
	out := make([]int64, len(rs))
	for i, r := range rs {
		out[i] = r.BytesIn
	}
	return out
}

// TestQueryKeepsAbnormalEntriesBeyondTheLast: with rings of 4 last
// entries and 3 abnormal ones, after a 502 and many normal requests the
// 502 is still found; each query answers the newest matching entries,
// oldest first, each once.
func TestQueryKeepsAbnormalEntriesBeyondTheLast(t *testing.T) {
	type step struct {
		n      int
		status int32
		term   string
	}
	for _, tc := range []struct {
		name    string
		entries []step
		query   string
		limit   int
		want    []int64
	}{
		{"empty", nil, "", 10, []int64{}},
		{"the last, oldest first", []step{{1, 200, "--"}, {2, 200, "--"}, {3, 200, "--"}}, "", 10, []int64{1, 2, 3}},
		{"limit keeps the newest", []step{{1, 200, "--"}, {2, 200, "--"}, {3, 200, "--"}}, "", 2, []int64{2, 3}},
		{"an error outlives the last entries",
			[]step{{1, 502, "SH"}, {2, 200, "--"}, {3, 200, "--"}, {4, 200, "--"}, {5, 200, "--"}, {6, 200, "--"}},
			"status=5xx", 10, []int64{1}},
		{"unfiltered: the last entries, then older abnormal ones",
			[]step{{1, 502, "SH"}, {2, 200, "--"}, {3, 200, "--"}, {4, 200, "--"}, {5, 200, "--"}, {6, 200, "--"}},
			"", 10, []int64{1, 3, 4, 5, 6}},
		{"unfiltered within the last entries' ring is the last entries",
			[]step{{1, 502, "SH"}, {2, 200, "--"}, {3, 200, "--"}, {4, 200, "--"}, {5, 200, "--"}, {6, 200, "--"}},
			"", 4, []int64{3, 4, 5, 6}},
		{"an abnormal entry in both rings is listed once",
			[]step{{1, 200, "--"}, {2, 503, "SC"}, {3, 200, "--"}}, "", 10, []int64{1, 2, 3}},
		{"each side's ring keeps its last 3 abnormal",
			[]step{{1, 500, "--"}, {2, 404, "--"}, {3, 200, "CD"}, {4, 200, "--"}, {5, 502, "SH"}, {6, 200, "--"},
				{7, 200, "--"}, {8, 200, "--"}, {9, 200, "--"}, {10, 404, "--"}, {11, 400, "PR"}, {12, 504, "sH"},
				{13, 200, "--"}, {14, 200, "--"}, {15, 200, "--"}, {16, 200, "--"}},
			"abnormal=1", 20, []int64{1, 3, 5, 10, 11, 12}}, // 2 pushed out by 3, 10, 11; 1 kept
		{"abnormal limited to the newest",
			[]step{{1, 500, "--"}, {2, 404, "--"}, {3, 200, "CD"}, {4, 502, "SH"}}, "abnormal=1", 2, []int64{3, 4}},
		{"normal entries past the last entries' ring are gone",
			[]step{{1, 200, "--"}, {2, 502, "SH"}, {3, 200, "--"}, {4, 200, "--"}, {5, 200, "--"}, {6, 200, "--"}},
			"status=2xx", 10, []int64{3, 4, 5, 6}},
		{"termination filter across both rings",
			[]step{{1, 502, "SH"}, {2, 200, "--"}, {3, 200, "--"}, {4, 200, "--"}, {5, 502, "SH"}, {6, 504, "sH"}},
			"termination=SH", 10, []int64{1, 5}},
	} {
		l := New(slog.New(slog.DiscardHandler), 4, 3, fixedClock)
		for _, s := range tc.entries {
			l.Add(entry(s.n, s.status, s.term))
		}
		l.Flush()
		q, _ := url.ParseQuery(tc.query)
		f, err := ParseFilter(q)
		if err != nil {
			t.Fatal(err)
		}
		if got := ids(l.Query(f, tc.limit)); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q limit %d gives %v, want %v", tc.name, tc.query, tc.limit, got, tc.want)
		}
	}
}

// TestClientFaultsDoNotPushOutAServerFault: a 502 followed by more bad
// requests (the proxy's 400s, "PR") and 404s than the abnormal ring holds
// is still found by status=502, status=5xx and termination=SH: the client
// side's faults have a ring of their own (the tester's 1 001 garbage
// requests pushed it out before).
func TestClientFaultsDoNotPushOutAServerFault(t *testing.T) {
	l := New(slog.New(slog.DiscardHandler), 0, 0, fixedClock)
	l.Write(entry(1, 502, "SH"))
	for i := range 3 * KeepAbnormalDefault {
		if i%2 == 0 {
			l.Add(entry(2+i, 400, "PR"))
		} else {
			l.Add(entry(2+i, 404, "--"))
		}
		if i%100 == 99 {
			l.Flush()
		}
	}
	l.Flush()
	for _, q := range []string{"status=502", "status=5xx", "termination=SH"} {
		v, _ := url.ParseQuery(q)
		f, _ := ParseFilter(v)
		if got := ids(l.Query(f, 100)); !slices.Equal(got, []int64{1}) {
			t.Errorf("%s: %v, want the 502", q, got)
		}
	}
	v, _ := url.ParseQuery("status=4xx")
	f, _ := ParseFilter(v)
	if got := l.Query(f, l.Kept()); len(got) != KeepAbnormalDefault { // the last entries are all 4xx, and in the client side's ring
		t.Errorf("status=4xx: %d entries", len(got))
	}
}

// TestServerSide: which abnormal records are the server side's.
func TestServerSide(t *testing.T) {
	for _, tc := range []struct {
		status int
		term   string
		want   bool
	}{
		{502, "SH", true}, {503, "SC", true}, {504, "sH", true}, {500, "--", true}, {503, "PR", true},
		{200, "SD", true}, {200, "sD", true}, {0, "sD", true}, {200, "PH", true}, {0, "RC", true}, {200, "KD", true},
		{400, "PR", false}, {404, "--", false}, {413, "PR", false}, {408, "cR", false}, {200, "CD", false},
		{0, "CD", false}, {200, "--", false}, {0, "--", false},
	} {
		r := Record{Status: tc.status, Termination: tc.term}
		if got := r.ServerSide(); got != tc.want {
			t.Errorf("status %d termination %s: server side %v, want %v", tc.status, tc.term, got, tc.want)
		}
	}
}

// TestQueryFindsA502AfterThousandsOfRequests: with the default sizes, a
// 502 followed by 5 000 normal requests is found by status=5xx,
// termination=SH and abnormal=1; Recent (the last entries) no longer
// holds it.
func TestQueryFindsA502AfterThousandsOfRequests(t *testing.T) {
	l := New(slog.New(slog.DiscardHandler), 0, 0, fixedClock)
	l.Write(entry(1, 502, "SH"))
	for i := range 5000 {
		l.Add(entry(2+i, 200, "--"))
		if i%100 == 99 {
			l.Flush()
		}
	}
	l.Flush()
	for _, q := range []string{"status=5xx", "status=502", "termination=SH", "abnormal=1", "abnormal=1&client=192.0.2.7"} {
		v, _ := url.ParseQuery(q)
		f, _ := ParseFilter(v)
		if got := ids(l.Query(f, 100)); !slices.Equal(got, []int64{1}) {
			t.Errorf("%s: %v, want the 502", q, got)
		}
	}
	if got := l.Recent(0); len(got) != KeepDefault || got[0].BytesIn != 5001-KeepDefault+1 {
		t.Errorf("recent holds %d entries from %d", len(got), got[0].BytesIn)
	}
}

// TestKeepDoesNotAllocate: keeping a record, normal or abnormal, copies
// it into the preallocated rings.
func TestKeepDoesNotAllocate(t *testing.T) {
	l := New(slog.New(slog.DiscardHandler), 16, 16, fixedClock)
	normal, abnormal := benchEntries()
	for _, e := range []*stats.LogEntry{&normal, &abnormal} {
		r := RecordOf(e, time.Now(), 0)
		if n := testing.AllocsPerRun(1000, func() { l.keep(&r) }); n != 0 {
			t.Errorf("%s: %v allocations per record kept", r.Termination, n)
		}
	}
}

// TestWriteAllocatesAsMuchForAnAbnormalEntry: the abnormal ring costs no
// allocation per entry: an abnormal entry allocates what a normal one
// does (the record's strings and the line). The two differ by their
// status alone: a termination other than "--" is a string of its own
// (Termination.String), whichever ring keeps it.
func TestWriteAllocatesAsMuchForAnAbnormalEntry(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector's allocations vary from run to run (8 or 9 for either entry)")
	}
	l := New(slog.New(slog.NewJSONHandler(io.Discard, nil)), 16, 16, fixedClock)
	normal, _ := benchEntries()
	abnormal := normal
	abnormal.Status = 502
	n := testing.AllocsPerRun(1000, func() { l.Write(&normal) })
	a := testing.AllocsPerRun(1000, func() { l.Write(&abnormal) })
	if a > n {
		t.Errorf("an abnormal entry: %v allocations, a normal one %v", a, n)
	}
}

// BenchmarkQuery is the time Query holds the lock the writer goroutine
// takes: full default rings, a filter that selects few records (the
// whole walk) and none (the unfiltered last 100).
func BenchmarkQuery(b *testing.B) {
	l := New(slog.New(slog.DiscardHandler), 0, 0, fixedClock)
	for i := range KeepDefault + KeepAbnormalDefault {
		if i%2 == 0 {
			l.Add(entry(i, 502, "SH"))
		} else {
			l.Add(entry(i, 200, "--"))
		}
	}
	l.Flush()
	for _, bc := range []struct {
		query string
		limit int
	}{{"", 100}, {"", 1000}, {"status=5xx&frontend=other", 100}, {"client=192.0.2.8", 100}, {"client=192.0.2.7:4242&abnormal=1", 100}} {
		b.Run(fmt.Sprintf("%q,limit=%d", bc.query, bc.limit), func(b *testing.B) {
			q, limit := bc.query, bc.limit
			v, _ := url.ParseQuery(q)
			f, _ := ParseFilter(v)
			b.ReportAllocs()
			for b.Loop() {
				l.Query(f, limit)
			}
		})
	}
}
