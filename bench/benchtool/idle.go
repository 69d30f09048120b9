package main

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
)

// cmdIdle measures the memory a proxy holds per idle keep-alive client
// connection: RSS before, then N connections that each complete one request
// (so every buffer the proxy allocates on the way has been touched and, if
// the proxy releases buffers when empty, released) and then stay open and
// silent; RSS after. (after-before)/N is the figure; the design target is
// 0.7 KiB at 5 000 connections (nginx's 0.73). With -admin (spliced), the
// proxy's own count of what it holds (GET /api/v1/memory, before and
// after) is printed beside it: what an idle connection holds by part, and
// per connection the growth of the loops' objects (connections, pools,
// tables), of the Go heap's objects and of what the Go runtime mapped.
func cmdIdle(args []string) error {
	fs := flag.NewFlagSet("idle", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	pid := fs.Int("pid", 0, "proxy PID (descendants included)")
	addr := fs.String("addr", "", "proxy address host:port")
	path := fs.String("path", "/64", "object requested once on each connection")
	n := fs.Int("n", 5000, "idle connections to hold")
	parallel := fs.Int("parallel", 64, "connections being set up at once")
	timeout := fs.Duration("timeout", 60*time.Second, "bound on the whole measurement")
	h2 := fs.Bool("h2", false, "HTTP/2 with prior knowledge (h2c): the request is stream 1 of each connection")
	useTLS := fs.Bool("tls", false, "TLS (HTTP/1.1, certificate not verified): the idle TLS connection row")
	admin := fs.String("admin", "", "spliced's admin address host:port: print its own count of what the idle connections hold")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pid <= 0 || *addr == "" || *n < 1 || *parallel < 1 {
		return errors.New("need -pid, -addr, -n >= 1, -parallel >= 1")
	}
	r := rf.run()
	r.IdleConns = *n
	sigctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	ctx, cancel := context.WithTimeout(sigctx, *timeout)
	defer cancel()

	idleTLS = *useTLS
	idleAdmin = *admin
	if err := idleRun(ctx, &r, *pid, *addr, *path, *n, *parallel, *h2); err != nil {
		r.Error = err.Error()
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: n/a: %s\n", r.Proxy, r.Mode, r.Row, r.Rep, r.Error)
	} else {
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: %d conns, RSS %d -> %d KiB, %.2f KiB/conn\n",
			r.Proxy, r.Mode, r.Row, r.Rep, r.IdleConns, r.RSSBeforeKiB, r.RSSAfterKiB,
			float64(r.RSSAfterKiB-r.RSSBeforeKiB)/float64(r.IdleConns))
		if r.Holds != "" {
			fmt.Fprintf(os.Stderr, "      by spliced's count: %s\n", r.Holds)
		}
	}
	return appendRun(rf.out, r)
}

func idleRun(ctx context.Context, r *Run, pid int, addr, path string, n, parallel int, h2 bool) error {
	// The memory report first, before the warm-up: what answering it
	// costs the proxy (its first answer's buffers, the runtime's metrics)
	// settles with the warm-up's, out of the delta, and the RSS "before"
	// is read as without -admin.
	var m0 *spMemory
	var err error
	if idleAdmin != "" {
		if m0, err = readMemory(ctx, idleAdmin); err != nil {
			return err
		}
	}
	// Warm-up: the first connections through a fresh proxy grow pools and
	// tables once; that is not a per-connection cost.
	warm, err := openIdle(ctx, addr, path, 16, 16, h2)
	closeAll(warm)
	if err != nil {
		return fmt.Errorf("warm-up: %w", err)
	}
	if r.RSSBeforeKiB, err = stableRSS(ctx, pid); err != nil {
		return err
	}
	conns, err := openIdle(ctx, addr, path, n, parallel, h2)
	defer closeAll(conns)
	if err != nil {
		return fmt.Errorf("opened %d of %d connections: %w", len(conns), n, err)
	}
	if r.RSSAfterKiB, err = stableRSS(ctx, pid); err != nil {
		return err
	}
	if m0 != nil {
		m1, err := readMemory(ctx, idleAdmin)
		if err != nil {
			return err
		}
		r.Holds = holds(m0, m1, len(conns), r.RSSAfterKiB-r.RSSBeforeKiB)
	}
	r.IdleClosed = countClosed(conns)
	if r.IdleClosed*100 > n {
		return fmt.Errorf("proxy closed %d of %d idle connections", r.IdleClosed, n)
	}
	return nil
}

// openIdle opens n connections, parallel at a time, each completing one
// GET of path (over HTTP/2 with h2); it returns those that succeeded and
// the first error.
func openIdle(ctx context.Context, addr, path string, n, parallel int, h2 bool) ([]net.Conn, error) {
	conns := make([]net.Conn, n)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	req := fmt.Sprintf("GET %s HTTP/1.1\r\nHost: bench\r\nUser-Agent: benchtool-idle\r\n\r\n", path)
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1) - 1)
				if i >= n || ctx.Err() != nil {
					return
				}
				var c net.Conn
				var err error
				if h2 {
					c, err = oneRequestH2(ctx, addr, path)
				} else {
					c, err = oneRequest(ctx, addr, req)
				}
				mu.Lock()
				if err != nil {
					if firstErr == nil {
						firstErr = err
					}
					mu.Unlock()
					next.Store(int64(n)) // stop the others
					return
				}
				conns[i] = c
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	out := conns[:0]
	for _, c := range conns {
		if c != nil {
			out = append(out, c)
		}
	}
	if firstErr == nil && ctx.Err() != nil {
		firstErr = ctx.Err()
	}
	return out, firstErr
}

// idleTLS: the idle connections are TLS ones (-tls).
var idleTLS bool

func oneRequest(ctx context.Context, addr, req string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	var c net.Conn
	var err error
	if idleTLS {
		td := tls.Dialer{NetDialer: &d, Config: &tls.Config{InsecureSkipVerify: true, NextProtos: []string{"http/1.1"}}}
		c, err = td.DialContext(ctx, "tcp", addr)
	} else {
		c, err = d.DialContext(ctx, "tcp", addr)
	}
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, req); err != nil {
		c.Close()
		return nil, err
	}
	resp, err := http.ReadResponse(bufio.NewReaderSize(c, 4096), nil)
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading response: %w", err)
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("reading body: %w", err)
	}
	if resp.StatusCode != http.StatusOK || resp.Close {
		c.Close()
		return nil, fmt.Errorf("status %d, close=%v: not a keep-alive 200", resp.StatusCode, resp.Close)
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// stableRSS polls the RSS until two reads 200 ms apart agree within
// 64 KiB (a proxy may free or fault in pages just after the last
// connection), or 3 s have passed; it returns the last read.
func stableRSS(ctx context.Context, pid int) (int64, error) {
	prev, err := treeRSS("/proc", pid)
	if err != nil {
		return 0, fmt.Errorf("proxy RSS: %w", err)
	}
	deadline := time.Now().Add(3 * time.Second)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return 0, ctx.Err()
		case <-tick.C:
		}
		cur, err := treeRSS("/proc", pid)
		if err != nil {
			return 0, fmt.Errorf("proxy RSS: %w", err)
		}
		d := cur - prev
		prev = cur
		if d > -64 && d < 64 {
			break
		}
	}
	return prev, nil
}

// countClosed returns how many connections the proxy has closed: a read
// that times out means the connection is still open and silent, and so
// does one that returns bytes (an HTTP/2 server may send a frame late,
// e.g. a WINDOW_UPDATE); EOF or a reset means closed.
func countClosed(conns []net.Conn) int {
	var closed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var b [4096]byte
			_ = c.SetReadDeadline(time.Now().Add(100 * time.Millisecond))
			for {
				_, err := c.Read(b[:])
				if err == nil {
					continue
				}
				var ne net.Error
				if !(errors.As(err, &ne) && ne.Timeout()) {
					closed.Add(1)
				}
				return
			}
		}()
	}
	wg.Wait()
	return int(closed.Load())
}

func closeAll(conns []net.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// oneRequestH2 opens an h2c connection with prior knowledge, sends the
// preface, an empty SETTINGS and a GET of path on stream 1, and reads until
// the response ended and the server acknowledged the SETTINGS (answering
// its SETTINGS), so that the connection is then idle both ways.
func oneRequestH2(ctx context.Context, addr, path string) (net.Conn, error) {
	d := net.Dialer{Timeout: 5 * time.Second}
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return nil, err
	}
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	fail := func(err error) (net.Conn, error) { c.Close(); return nil, err }
	bw := bufio.NewWriter(c)
	fr := http2.NewFramer(bw, bufio.NewReaderSize(c, 4096))
	var hb bytes.Buffer
	enc := hpack.NewEncoder(&hb)
	for _, f := range [][2]string{{":method", "GET"}, {":scheme", "http"}, {":authority", "bench"},
		{":path", path}, {"user-agent", "benchtool-idle"}} {
		_ = enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	_, _ = io.WriteString(bw, http2.ClientPreface)
	_ = fr.WriteSettings()
	_ = fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndStream: true, EndHeaders: true})
	if err := bw.Flush(); err != nil {
		return fail(err)
	}
	status := ""
	dec := hpack.NewDecoder(4096, func(f hpack.HeaderField) {
		if f.Name == ":status" {
			status = f.Value
		}
	})
	ended, acked := false, false
	for !ended || !acked {
		f, err := fr.ReadFrame()
		if err != nil {
			return fail(fmt.Errorf("reading frames: %w", err))
		}
		switch f := f.(type) {
		case *http2.SettingsFrame:
			if f.IsAck() {
				acked = true
			} else {
				_ = fr.WriteSettingsAck()
			}
		case *http2.PingFrame:
			if !f.IsAck() {
				_ = fr.WritePing(true, f.Data)
			}
		case *http2.HeadersFrame:
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				return fail(err)
			}
			ended = ended || f.StreamEnded()
		case *http2.ContinuationFrame:
			if _, err := dec.Write(f.HeaderBlockFragment()); err != nil {
				return fail(err)
			}
		case *http2.DataFrame:
			ended = ended || f.StreamEnded()
		case *http2.GoAwayFrame:
			return fail(fmt.Errorf("GOAWAY %v", f.ErrCode))
		case *http2.RSTStreamFrame:
			return fail(fmt.Errorf("RST_STREAM %v", f.ErrCode))
		}
		if err := bw.Flush(); err != nil {
			return fail(err)
		}
	}
	if status != "200" {
		return fail(fmt.Errorf("status %q: not a 200", status))
	}
	_ = c.SetDeadline(time.Time{})
	return c, nil
}

// idleAdmin: spliced's admin address (-admin), "" for other proxies.
var idleAdmin string

// spMemory is the part of spliced's GET /api/v1/memory the idle row reads.
type spMemory struct {
	RSSBytes int64 `json:"rss_bytes"`
	Go       struct {
		HeapObjectsBytes int64 `json:"heap_objects_bytes"`
		HeapUnusedBytes  int64 `json:"heap_unused_bytes"`
		HeapFreeBytes    int64 `json:"heap_free_bytes"`
		TotalBytes       int64 `json:"total_bytes"`
		HeapReleased     int64 `json:"heap_released_bytes"`
		GCCycles         int64 `json:"gc_cycles"`
	} `json:"go"`
	Loops             []spLoop `json:"loops"`
	IdleHTTPConn      []spPart `json:"idle_http_conn"`
	IdleHTTPConnBytes int64    `json:"idle_http_conn_bytes"`
}

// spLoop is one loop's objects; spPart one kind of them, or one part of
// an idle connection (Live and Free then unused).
type spLoop struct {
	Objects []spPart `json:"objects"`
	Bytes   int64    `json:"bytes"`
}

type spPart struct {
	Name  string `json:"name"`
	Live  int    `json:"live"`
	Free  int    `json:"free"`
	Bytes int64  `json:"bytes"`
}

func readMemory(ctx context.Context, admin string) (*spMemory, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+admin+"/api/v1/memory", nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, fmt.Errorf("GET /api/v1/memory: %w", err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /api/v1/memory: %s", resp.Status)
	}
	var m spMemory
	if err := json.NewDecoder(resp.Body).Decode(&m); err != nil {
		return nil, fmt.Errorf("GET /api/v1/memory: %w", err)
	}
	return &m, nil
}

// holds is the idle row's line of what spliced counts: what one idle
// connection holds by part, then per connection (n) the growth between
// m0 and m1 of the loops' objects (by kind, the largest first), of the Go
// heap's objects, of its unused span space (fragmentation), of its free
// spans still resident, and of the RSS (rssKiB, the row's figure).
func holds(m0, m1 *spMemory, n int, rssKiB int64) string {
	if n == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "an idle connection holds %d B (", m1.IdleHTTPConnBytes)
	for i, p := range m1.IdleHTTPConn {
		if i > 0 {
			b.WriteString(" + ")
		}
		fmt.Fprintf(&b, "%s %d", p.Name, p.Bytes)
	}
	per := func(d int64) float64 { return float64(d) / float64(n) }
	kinds := map[string]int64{}
	var loops int64
	for _, l := range m1.Loops {
		loops += l.Bytes
		for _, o := range l.Objects {
			kinds[o.Name] += o.Bytes
		}
	}
	for _, l := range m0.Loops {
		loops -= l.Bytes
		for _, o := range l.Objects {
			kinds[o.Name] -= o.Bytes
		}
	}
	names := make([]string, 0, len(kinds))
	for k, v := range kinds {
		if v != 0 {
			names = append(names, k)
		}
	}
	sort.Slice(names, func(i, j int) bool { return kinds[names[i]] > kinds[names[j]] })
	fmt.Fprintf(&b, "); per connection, %d loops' objects %+.0f B (", len(m1.Loops), per(loops))
	for i, k := range names {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, "%s %+.0f", k, per(kinds[k]))
	}
	fmt.Fprintf(&b, "), Go heap objects %+.0f B, span waste %+.0f B, free spans %+.0f B, RSS %+.0f B; GC cycles %+d",
		per(m1.Go.HeapObjectsBytes-m0.Go.HeapObjectsBytes), per(m1.Go.HeapUnusedBytes-m0.Go.HeapUnusedBytes),
		per(m1.Go.HeapFreeBytes-m0.Go.HeapFreeBytes), per(rssKiB<<10), m1.Go.GCCycles-m0.Go.GCCycles)
	return b.String()
}
