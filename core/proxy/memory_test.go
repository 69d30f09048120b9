package proxy

import (
	"bufio"
	"io"
	"net/http"
	"testing"

	"github.com/spliced-proxy/spliced/core/stats"
)

// TestMemoryCountsWhatAnIdleConnectionHolds: after one request each, N
// kept-alive connections hold an h1Conn each and nothing else — no
// stream, no parser, no buffer in use — and the report says so, with the
// objects in their size classes; the streams and parsers the requests
// used are back in the free lists.
func TestMemoryCountsWhatAnIdleConnectionHolds(t *testing.T) {
	e := newEnv(t, defaultTuning())
	o := newRawOrigin(t, okAnswer("hello"))
	fe := httpFrontend(t, nil, o.addr)
	const n = 20
	for range n {
		c := e.dialHTTP(fe)
		defer c.Close()
		if _, err := c.Write([]byte("GET /x HTTP/1.1\r\nHost: a\r\n\r\n")); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
	}
	classes := stats.SizeClasses()
	var got map[string]stats.Pool
	e.do(func() {
		got = map[string]stats.Pool{}
		for _, p := range e.w.Memory(classes) {
			got[p.Name] = p
		}
	})
	for _, w := range []struct {
		name string
		live int
	}{{"h1_conn", n}, {"stream", 0}, {"request_parser", 0}, {"response_parser", 0}, {"buffer", 0}, {"tunnel", 0}, {"h2_conn", 0}} {
		p, ok := got[w.name]
		if !ok {
			t.Errorf("%s: not in the report", w.name)
			continue
		}
		if p.Live != w.live {
			t.Errorf("%s: %d live, want %d", w.name, p.Live, w.live)
		}
		if p.ClassBytes < p.ObjectBytes || p.Bytes != int64(p.ClassBytes)*int64(p.Live+p.Free) {
			t.Errorf("%s: %+v: class below the size, or bytes not (live+free)*class", w.name, p)
		}
	}
	if got["stream"].Free < 1 || got["request_parser"].Free < 1 || got["response_parser"].Free < 1 {
		t.Errorf("the requests' stream and parsers are not back in the free lists: %+v", got)
	}
	if h := got["h1_conn"]; h.ClassBytes != 288 {
		t.Errorf("h1_conn costs %d bytes, want its size class of 288 (TestConnectionObjectsKeepTheirSizeClass)", h.ClassBytes)
	}
	if f := got["fd_table"]; f.Live < n || f.Free < 0 {
		t.Errorf("fd table: %+v, want at least %d fds registered", f, n)
	}
	if tm := got["timer_heap"]; tm.Live < n {
		t.Errorf("timer heap: %+v, want at least %d armed (the keep-alive timers)", tm, n)
	}
	var sum int64
	for _, p := range IdleHTTPConn(classes) {
		sum += p.Bytes
	}
	if sum != 288+8+8 {
		t.Errorf("an idle connection holds %d bytes by the report, want 304", sum)
	}
}

func TestSizeClassesAreTheRuntimes(t *testing.T) {
	c := stats.SizeClasses()
	for _, w := range []struct{ n, class int }{{1, 8}, {8, 8}, {9, 16}, {272, 288}, {288, 288}, {289, 320}, {640, 640}, {16384, 16384}, {32768, 32768}, {32769, 40960}} {
		if got := stats.ClassOf(c, w.n); got != w.class {
			t.Errorf("ClassOf(%d) = %d, want %d", w.n, got, w.class)
		}
	}
}
