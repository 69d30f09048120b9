package proxy

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"net/netip"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stick"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// limitSet compiles limits as the engine does, one table each.
func limitSet(t testing.TB, mode string, ls ...config.Limit) *LimitSet {
	t.Helper()
	cf := config.Frontend{Name: "fe", Mode: mode, Limits: ls}
	cf.Normalize()
	var out []*Limit
	for i := range cf.Limits {
		cl := &cf.Limits[i]
		out = append(out, CompileLimit(cl, NewLimitTable(cl), NewLimitCounters(1), nil))
	}
	return NewLimitSet(out)
}

func rate(n, ms int) *config.LimitRate { return &config.LimitRate{Count: n, PeriodMs: ms} }

func getOn(t *testing.T, c net.Conn, br *bufio.Reader, extra string) *http.Response {
	t.Helper()
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n"+extra+"\r\n"); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp
}

// Over req_rate, a request gets 429 with a Retry-After in seconds and the
// connection closes; a request of another client still passes.
func TestLimitReqRateDenies(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "per_ip", ReqRate: rate(3, 10000)})
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		if r := getOn(t, c, br, ""); r.StatusCode != 200 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	r := getOn(t, c, br, "")
	if r.StatusCode != 429 {
		t.Fatalf("4th request: %d, want 429", r.StatusCode)
	}
	ra, err := strconv.Atoi(r.Header.Get("Retry-After"))
	// The window slides: 4 requests in this 10 s period weigh until the
	// estimate falls to 2 (count-1), halfway through the next period:
	// 5 to 15 s from now, depending on where in its period it is.
	if err != nil || ra < 5 || ra > 16 {
		t.Fatalf("Retry-After %q, want 5-15 s", r.Header.Get("Retry-After"))
	}
	if _, err := br.ReadByte(); err != io.EOF {
		t.Fatalf("connection not closed after the 429: %v", err)
	}
	if st := fe.Limits.List[0].Stats.Total(); st.Denied != 1 || st.Tarpitted != 0 {
		t.Fatalf("counters %+v", st)
	}
	if d := fe.Stats.Total(0).Denied; d != 1 {
		t.Fatalf("frontend denied %d", d)
	}
	// The client's entry holds its 4 requests.
	k := stick.AddrKey(netip.MustParseAddr("127.0.0.1"))
	tb := fe.Limits.List[0].Table
	if got := tb.Find(&k).Rate(stick.CtrReq, e.now(), 10e9); got != 4 {
		t.Fatalf("entry counts %d requests, want 4", got)
	}
}

func (e *env) now() int64 {
	var n int64
	e.do(func() { n = e.w.L.Now() })
	return n
}

// tarpit holds the request tarpit_ms on the loop's timer, then answers 429.
func TestLimitTarpitHoldsThenAnswers(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "slow", ReqRate: rate(1, 10000), Action: "tarpit", TarpitMs: 300})
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	if r := getOn(t, c, br, ""); r.StatusCode != 200 {
		t.Fatalf("first request: %d", r.StatusCode)
	}
	start := time.Now()
	r := getOn(t, c, br, "")
	if el := time.Since(start); r.StatusCode != 429 || el < 300*time.Millisecond {
		t.Fatalf("tarpitted request: %d after %v, want 429 after 300 ms", r.StatusCode, el)
	}
	if st := fe.Limits.List[0].Stats.Total(); st.Tarpitted != 1 || st.Denied != 0 {
		t.Fatalf("counters %+v", st)
	}
	if !strings.Contains(o.received(), "GET / HTTP/1.1") || strings.Count(o.received(), "GET /") != 1 {
		t.Fatalf("the server saw %q", o.received())
	}
}

// A header key limits each value apart; requests without the field are
// not tracked.
func TestLimitHeaderKey(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "api", Key: "header:X-Api-Key", ReqRate: rate(1, 10000)})
	get := func(extra string) int {
		c := e.dialHTTP(fe)
		return getOn(t, c, bufio.NewReader(c), extra).StatusCode
	}
	for i, tc := range []struct {
		extra string
		want  int
	}{
		{"X-Api-Key: a\r\n", 200}, {"x-api-key: a\r\n", 429}, {"X-Api-Key: b\r\n", 200},
		{"", 200}, {"", 200},
	} {
		if got := get(tc.extra); got != tc.want {
			t.Fatalf("request %d (%q): %d, want %d", i, tc.extra, got, tc.want)
		}
	}
	_, live := fe.Limits.List[0].Table.Top(10, e.now(), stick.Periods{})
	if live != 2 {
		t.Fatalf("%d entries, want 2 (a and b)", live)
	}
}

// Error responses count in err_rate; over it the client is refused, and
// the limit's own 429s do not count.
func TestLimitErrRate(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, func(string) string { return "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n" })
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "scan", ErrRate: rate(2, 10000)})
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	for i := 0; i < 3; i++ {
		if r := getOn(t, c, br, ""); r.StatusCode != 404 {
			t.Fatalf("request %d: %d", i, r.StatusCode)
		}
	}
	for i := 0; i < 3; i++ {
		c := e.dialHTTP(fe)
		if r := getOn(t, c, bufio.NewReader(c), ""); r.StatusCode != 429 {
			t.Fatalf("request after 3 errors: %d, want 429", r.StatusCode)
		}
	}
	k := stick.AddrKey(netip.MustParseAddr("127.0.0.1"))
	if n := fe.Limits.List[0].Table.Find(&k).Rate(stick.CtrErr, e.now(), 10e9); n != 3 {
		t.Fatalf("err_rate %d, want 3 (429s of the limit not counted)", n)
	}
}

// conn_cur closes the connection at accept when the client holds that
// many already, in tcp mode; a connection that ends gives its slot back.
func TestLimitConnCurTCP(t *testing.T) {
	e := newEnv(t, defaultTuning())
	srv := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	}).Addr
	fe := frontend(t, SpliceOff, srv)
	fe.Limits = limitSet(t, config.ModeTCP, config.Limit{Name: "conns", ConnCur: 2})
	accept := func() *net.TCPConn { return e.connect(func(fd int) { e.w.Accept(fd, fe, nil) }) }
	a, b := accept(), accept()
	echo(t, a, "a")
	echo(t, b, "b")
	third := accept()
	third.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := third.Read(make([]byte, 1)); err == nil {
		t.Fatal("the third connection was served")
	}
	if st := fe.Limits.List[0].Stats.Total(); st.Refused != 1 {
		t.Fatalf("counters %+v", st)
	}
	a.Close()
	k := stick.AddrKey(netip.MustParseAddr("127.0.0.1"))
	tb := fe.Limits.List[0].Table
	testutil.Eventually(t, 5*time.Second, func() bool { return tb.Find(&k).Conns() == 1 }, "the closed connection's slot given back")
	d := accept()
	echo(t, d, "d")
	b.Close()
	d.Close()
	testutil.Eventually(t, 5*time.Second, func() bool { return tb.Find(&k).Conns() == 0 }, "every slot given back")
	e.waitIdle()
}

// conn_rate refuses the connections beyond count per period in http mode
// too (closed at accept, before any request).
func TestLimitConnRateHTTP(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "rate", ConnRate: rate(2, 60000)})
	accept := func() *net.TCPConn {
		c := e.connect(func(fd int) { e.w.Accept(fd, fe, nil) })
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c
	}
	for i := 0; i < 2; i++ {
		c := accept()
		if r := getOn(t, c, bufio.NewReader(c), ""); r.StatusCode != 200 {
			t.Fatalf("connection %d: %d", i, r.StatusCode)
		}
		c.Close()
	}
	c := accept()
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	if _, err := http.ReadResponse(bufio.NewReader(c), nil); err == nil {
		t.Fatal("the third connection got an answer")
	}
	k := stick.AddrKey(netip.MustParseAddr("127.0.0.1"))
	testutil.Eventually(t, 5*time.Second, func() bool { return fe.Limits.List[0].Table.Find(&k).Conns() == 0 }, "slots given back")
}

// A request under its limits allocates nothing more than one without.
func TestLimitedKeepAliveRequestDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	o := newRawServer(t)
	fe := httpFrontend(t, nil, o)
	fe.Limits = limitSet(t, config.ModeHTTP,
		config.Limit{Name: "a", ReqRate: rate(1000000, 1000), ErrRate: rate(1000, 1000)},
		config.Limit{Name: "b", Key: "header:X-Key", ReqRate: rate(1000000, 1000)})
	c := e.dialHTTP(fe)
	c.SetDeadline(time.Time{})
	req := []byte("GET /x HTTP/1.1\r\nHost: a\r\nX-Key: k1\r\n\r\n")
	buf := make([]byte, 4096)
	one := func() {
		if _, err := c.Write(req); err != nil {
			t.Fatal(err)
		}
		n := 0
		for n < len(rawResponse) {
			m, err := c.Read(buf[n:])
			if err != nil {
				t.Fatal(err)
			}
			n += m
		}
	}
	for i := 0; i < 50; i++ {
		one()
	}
	if a := testing.AllocsPerRun(200, one); a > 0.05 {
		t.Fatalf("%.2f allocations per request, want 0", a)
	}
}

// scope cluster divides each threshold by the live nodes, never below 1.
func TestLimitThresholdScopeCluster(t *testing.T) {
	var nodes atomic.Int32
	cf := config.Frontend{Name: "fe", Mode: config.ModeHTTP, Limits: []config.Limit{
		{Name: "n", ReqRate: rate(10, 1000)},
		{Name: "c", ReqRate: rate(10, 1000), Scope: "cluster"},
	}}
	cf.Normalize()
	node := CompileLimit(&cf.Limits[0], NewLimitTable(&cf.Limits[0]), NewLimitCounters(1), &nodes)
	cl := CompileLimit(&cf.Limits[1], NewLimitTable(&cf.Limits[1]), NewLimitCounters(1), &nodes)
	for _, tc := range []struct {
		live        int32
		node, clust uint64
	}{{0, 10, 10}, {1, 10, 10}, {3, 10, 3}, {20, 10, 1}} {
		nodes.Store(tc.live)
		if n, c := node.Threshold(10), cl.Threshold(10); n != tc.node || c != tc.clust {
			t.Errorf("%d live nodes: node %d cluster %d, want %d %d", tc.live, n, c, tc.node, tc.clust)
		}
	}
}

// A client that leaves while its request is tarpitted costs nothing
// once the tarpit ends: the answer fails, the connection and its
// buffers go.
func TestLimitTarpitClientLeaves(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hi"))
	fe := httpFrontend(t, nil, o.addr)
	fe.Limits = limitSet(t, config.ModeHTTP, config.Limit{Name: "slow", ReqRate: rate(1, 10000), Action: "tarpit", TarpitMs: 200})
	c := e.dialHTTP(fe)
	br := bufio.NewReader(c)
	if r := getOn(t, c, br, ""); r.StatusCode != 200 {
		t.Fatalf("first request: %d", r.StatusCode)
	}
	io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	c2 := e.dialHTTP(fe)
	io.WriteString(c2, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
	testutil.Eventually(t, 5*time.Second, func() bool { return fe.Limits.List[0].Stats.Total().Tarpitted == 2 }, "two requests tarpitted")
	c.SetLinger(0)
	c.Close()
	c2.Close()
	e.waitIdle()
}

// Counting a connection at accept and giving it back at its close
// allocate nothing once the worker's holds exist.
func TestLimitConnDoesNotAllocate(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates")
	}
	e := newEnv(t, defaultTuning())
	fe := frontend(t, SpliceOff)
	fe.Limits = limitSet(t, config.ModeTCP, config.Limit{Name: "c", ConnCur: 1000, ConnRate: rate(1000000, 1000)})
	var fd int
	e.connect(func(f int) { fd = f })
	defer unix.Close(fd)
	var allocs float64
	e.do(func() {
		e.w.limitConn(fd, fe, 0)
		e.w.limitConnEnd(fd)
		allocs = testing.AllocsPerRun(200, func() {
			if !e.w.limitConn(fd, fe, 0) {
				t.Error("refused")
			}
			e.w.limitConnEnd(fd)
		})
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per connection counted", allocs)
	}
}
