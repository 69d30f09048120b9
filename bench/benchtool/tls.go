package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// The TLS rows' load generators. wrk runs the keep-alive and 1 MiB rows
// over https like the others; these run what wrk cannot: one handshake
// per connection, with or without resumption (handshake), and a keep-alive
// client's latency while such handshakes flood the proxy (flood).
//
// Every client offers TLS 1.3 and 1.2 and X25519 alone as key exchange, so
// that every proxy does the same X25519 + signature work: Go's default
// would offer X25519MLKEM768 first, which spliced (Go) would pick and
// OpenSSL 3.0 cannot, comparing different work. The certificate is not
// verified (self-signed, made per run), but its key still signs the
// handshake, which is the server's cost being measured.

func benchTLSConfig(resume bool) *tls.Config {
	c := &tls.Config{
		InsecureSkipVerify: true, //nolint:gosec // a bench against its own self-signed certificate
		CurvePreferences:   []tls.CurveID{tls.X25519},
		MinVersion:         tls.VersionTLS12,
	}
	if resume {
		c.ClientSessionCache = tls.NewLRUClientSessionCache(1)
	}
	return c
}

// hsResult is what a handshake run counts, printed as a BENCHRESULT line
// so that `benchtool measure` reads it as it reads wrk's.
type hsResult struct {
	conns, resumed, bytes        int64
	connect, read, status, tmout int64
	lat                          []time.Duration // per connection: dial to response read
	firstErr                     error
}

func (h *hsResult) line(d time.Duration) string {
	p50, p99 := percentiles(h.lat)
	return fmt.Sprintf("BENCHRESULT requests=%d bytes=%d duration_us=%d connect=%d read=%d write=0 status=%d timeout=%d p50_us=%d p99_us=%d resumed=%d",
		h.conns, h.bytes, d.Microseconds(), h.connect, h.read, h.status, h.tmout,
		p50.Microseconds(), p99.Microseconds(), h.resumed)
}

func percentiles(lat []time.Duration) (p50, p99 time.Duration) {
	if len(lat) == 0 {
		return 0, 0
	}
	s := slices.Clone(lat)
	slices.Sort(s)
	return s[len(s)*50/100], s[min(len(s)-1, len(s)*99/100)]
}

// cmdHandshake opens connections one after the other on each of -conns
// workers for -duration: dial, TLS handshake, one GET, read the response,
// close (the client first, see handshakeOnce). A completed response proves the proxy
// finished the handshake and passed traffic; one small request per
// connection is a few percent of a full handshake's cost. With -resume
// each worker keeps its last session ticket and offers it on its next
// connection (its first connection is a full handshake).
func cmdHandshake(args []string) error {
	fs := flag.NewFlagSet("handshake", flag.ContinueOnError)
	addr := fs.String("addr", "", "proxy address host:port")
	path := fs.String("path", "/64", "object requested on each connection")
	conns := fs.Int("conns", 50, "concurrent connections (workers)")
	duration := fs.Duration("duration", 10*time.Second, "run length")
	resume := fs.Bool("resume", false, "resume sessions with tickets")
	nagle := fs.Bool("nagle", false, "leave Nagle on (as Python's ssl, curl without TCP_NODELAY) and time the first response from the end of the handshake")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *addr == "" || *conns < 1 || *duration <= 0 {
		return errors.New("need -addr, -conns >= 1, -duration > 0")
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	start := time.Now()
	res := handshakeLoad(ctx, start.Add(*duration), *addr, *path, *conns, *resume, *nagle)
	fmt.Println(res.line(time.Since(start)))
	if res.firstErr != nil {
		fmt.Printf("first error: %v\n", res.firstErr)
	}
	return nil
}

// handshakeLoad runs the workers until end. Whether the run is over is
// read from the clock, not from a context's Err: a context with that
// deadline cuts the dials in flight at end (the poller sees the deadline)
// before its own timer has fired and set Err, which on a loaded CPU takes
// tens of milliseconds, and every worker would count its dials failing at
// once in between as thousands of timeouts.
//
// With nagle, each connection leaves Nagle on and its latency runs from
// the end of the handshake to the response (the first row): a server
// that sends nothing after the client's Finished and delays its ACK
// holds such a client's request for the delayed ACK, 40 ms.
func handshakeLoad(ctx context.Context, end time.Time, addr, path string, workers int, resume, nagle bool) *hsResult {
	ctx, cancel := context.WithDeadline(ctx, end)
	defer cancel()
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n"
	var total hsResult
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h hsResult
			cfg := benchTLSConfig(resume)
			d := net.Dialer{Timeout: 5 * time.Second}
			for ctx.Err() == nil {
				t0 := time.Now()
				n, resumed, t1, err := handshakeOnce(ctx, &d, addr, req, cfg, nagle)
				if nagle {
					t0 = t1
				}
				if ctx.Err() != nil || !time.Now().Before(end) {
					break // cut by the end of the run: not an error
				}
				h.count(err)
				if err == nil {
					h.conns++
					h.bytes += n
					h.lat = append(h.lat, time.Since(t0))
					if resumed {
						h.resumed++
					}
				}
			}
			mu.Lock()
			total.add(&h)
			mu.Unlock()
		}()
	}
	wg.Wait()
	return &total
}

var errStatus = errors.New("non-200 response")

// count files an error under wrk's counters.
func (h *hsResult) count(err error) {
	var ne net.Error
	if err != nil && h.firstErr == nil {
		h.firstErr = err
	}
	switch {
	case err == nil:
	case errors.Is(err, errStatus):
		h.status++
	case errors.As(err, &ne) && ne.Timeout():
		h.tmout++
	case strings.HasPrefix(err.Error(), "dial") || strings.HasPrefix(err.Error(), "handshake"):
		h.connect++
	default:
		h.read++
	}
}

func (h *hsResult) add(o *hsResult) {
	h.conns += o.conns
	h.resumed += o.resumed
	h.bytes += o.bytes
	h.connect += o.connect
	h.read += o.read
	h.status += o.status
	h.tmout += o.tmout
	h.lat = append(h.lat, o.lat...)
	if h.firstErr == nil {
		h.firstErr = o.firstErr
	}
}

// handshakeOnce runs one connection; it returns the response bytes read,
// whether the handshake resumed a session and when it ended. The client
// closes the connection once it has read the response. With nagle the
// client leaves Nagle on (Go's default sets TCP_NODELAY).
func handshakeOnce(ctx context.Context, d *net.Dialer, addr, req string, cfg *tls.Config, nagle bool) (int64, bool, time.Time, error) {
	raw, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return 0, false, time.Time{}, fmt.Errorf("dial: %w", err)
	}
	defer raw.Close()
	if nagle {
		if tc, ok := raw.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(false)
		}
	}
	_ = raw.SetDeadline(time.Now().Add(5 * time.Second))
	c := tls.Client(raw, cfg)
	if err := c.HandshakeContext(ctx); err != nil {
		return 0, false, time.Time{}, fmt.Errorf("handshake: %w", err)
	}
	t1 := time.Now()
	if _, err := io.WriteString(c, req); err != nil {
		return 0, false, t1, err
	}
	// Reading the response also reads the TLS 1.3 session tickets the
	// server sent after the handshake, which -resume needs.
	n, err := readResponse(bufio.NewReaderSize(c, 16<<10))
	return n, c.ConnectionState().DidResume, t1, err
}

// readResponse reads one response; its bytes count as wrk counts them
// (the body's).
func readResponse(br *bufio.Reader) (int64, error) {
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return 0, err
	}
	n, err := io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if err != nil {
		return n, err
	}
	if resp.StatusCode != http.StatusOK {
		return n, fmt.Errorf("%w: %d", errStatus, resp.StatusCode)
	}
	return n, nil
}

// cmdFlood measures what a handshake flood does to established
// connections: -probes keep-alive TLS connections send GET -path one after
// the other (closed loop) for -duration with the proxy otherwise idle,
// then again while a child `benchtool handshake` at nice 19 opens full
// handshakes on -flood workers. The child's lower priority gives the probe
// and the origin (on the same CPU) first claim on that CPU, so that the
// latency measured is the proxy's, not the load generator's. It records
// one run: probe latency p50/p99 and req/s idle and under flood, flood
// handshakes, the proxy's CPU during the flood.
func cmdFlood(args []string) error {
	fs := flag.NewFlagSet("flood", flag.ContinueOnError)
	var rf runFlags
	rf.register(fs)
	pid := fs.Int("pid", 0, "proxy PID (descendants included)")
	proxyCPU := fs.Int("cpu", -1, "CPU the proxy is pinned to, -1 = none")
	addr := fs.String("addr", "", "proxy address host:port")
	path := fs.String("path", "/64", "object the probes request")
	probes := fs.Int("probes", 4, "keep-alive probe connections")
	flood := fs.Int("flood", 64, "concurrent handshake workers of the flood")
	duration := fs.Duration("duration", 10*time.Second, "length of each phase (idle, flood)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *pid <= 0 || *addr == "" || *probes < 1 || *flood < 1 || *duration <= 0 {
		return errors.New("need -pid, -addr, -probes >= 1, -flood >= 1, -duration > 0")
	}
	r := rf.run()
	r.Conns = *flood
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	if err := floodRun(ctx, &r, *pid, *proxyCPU, *addr, *path, *probes, *flood, *duration); err != nil {
		r.Error = err.Error()
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: n/a: %s\n", r.Proxy, r.Mode, r.Row, r.Rep, r.Error)
	} else {
		fmt.Fprintf(os.Stderr, "    %s %s/%s #%d: probe p50/p99 idle %d/%d µs, flood %d/%d µs; %d handshakes/s, proxy CPU %.0f%%\n",
			r.Proxy, r.Mode, r.Row, r.Rep, r.IdleLatP50us, r.IdleLatP99us, r.LatP50us, r.LatP99us,
			int64(float64(r.Handshakes)/r.Seconds), 100*r.CPUSeconds/r.Seconds)
	}
	return appendRun(rf.out, r)
}

func floodRun(ctx context.Context, r *Run, pid, proxyCPU int, addr, path string, probes, flood int, d time.Duration) error {
	conns, err := probeConns(ctx, addr, probes)
	defer closeAll(conns)
	if err != nil {
		return err
	}
	idle, err := probeLoad(ctx, conns, path, d)
	if err != nil {
		return fmt.Errorf("idle phase: %w", err)
	}
	p50, p99 := percentiles(idle.lat)
	r.IdleLatP50us, r.IdleLatP99us = p50.Microseconds(), p99.Microseconds()
	r.IdleRequests = idle.conns

	self, err := os.Executable()
	if err != nil {
		return err
	}
	// The flood outlasts the probe by a ramp-up on each side.
	ramp := 500 * time.Millisecond
	var out strings.Builder
	child := exec.CommandContext(ctx, "nice", "-n", "19", self, "handshake", "-addr", addr, "-path", path,
		"-conns", strconv.Itoa(flood), "-duration", (d + 2*ramp).String())
	child.Stdout, child.Stderr = &out, &out
	if err := child.Start(); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-time.After(ramp):
	}
	before, err := treeCPUTicks("/proc", pid)
	if err != nil {
		return err
	}
	var busyBefore, busyAfter int64
	if proxyCPU >= 0 {
		if busyBefore, err = readCPUBusy(proxyCPU); err != nil {
			return err
		}
	}
	t0 := time.Now()
	under, perr := probeLoad(ctx, conns, path, d)
	wall := time.Since(t0)
	after, cerr := treeCPUTicks("/proc", pid)
	if proxyCPU >= 0 {
		if busyAfter, err = readCPUBusy(proxyCPU); err != nil {
			return err
		}
	}
	werr := child.Wait()
	switch {
	case perr != nil:
		return fmt.Errorf("flood phase: %w", perr)
	case cerr != nil:
		return fmt.Errorf("proxy died during the flood: %w", cerr)
	case werr != nil:
		return fmt.Errorf("flood generator: %v: %s", werr, tail(out.String(), 500))
	}
	var hs Run
	if err := parseWrkResult(out.String(), &hs); err != nil {
		return fmt.Errorf("flood generator: %w", err)
	}
	if hs.Requests == 0 {
		return errors.New("the flood completed no handshake")
	}
	// The flood's handshakes over the probe's window, at the flood's rate.
	r.Handshakes = int64(float64(hs.Requests) * wall.Seconds() / hs.Seconds)
	r.Errors = hs.Errors
	r.Requests = under.conns
	r.Bytes = under.bytes
	r.Seconds, r.WallSeconds = wall.Seconds(), wall.Seconds()
	r.CPUSeconds = float64(after-before) / userHZ
	if proxyCPU >= 0 {
		r.OtherSeconds = max(0, float64(busyAfter-busyBefore-(after-before))/userHZ)
	}
	p50, p99 = percentiles(under.lat)
	r.LatP50us, r.LatP99us = p50.Microseconds(), p99.Microseconds()
	return nil
}

// probeConns opens n keep-alive TLS connections (one handshake each).
func probeConns(ctx context.Context, addr string, n int) ([]net.Conn, error) {
	var conns []net.Conn
	for i := 0; i < n; i++ {
		d := net.Dialer{Timeout: 5 * time.Second}
		raw, err := d.DialContext(ctx, "tcp", addr)
		if err != nil {
			return conns, fmt.Errorf("probe dial: %w", err)
		}
		c := tls.Client(raw, benchTLSConfig(false))
		hctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		err = c.HandshakeContext(hctx)
		cancel()
		if err != nil {
			raw.Close()
			return conns, fmt.Errorf("probe handshake: %w", err)
		}
		conns = append(conns, c)
	}
	return conns, nil
}

// probeLoad sends GET path on every connection, one request at a time per
// connection, for d; every request's latency is kept.
func probeLoad(ctx context.Context, conns []net.Conn, path string, d time.Duration) (*hsResult, error) {
	end := time.Now().Add(d)
	req := "GET " + path + " HTTP/1.1\r\nHost: bench\r\n\r\n"
	var total hsResult
	var mu sync.Mutex
	var firstErr error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for _, c := range conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var h hsResult
			br := bufio.NewReaderSize(c, 16<<10)
			var err error
			for ctx.Err() == nil && !failed.Load() && time.Now().Before(end) {
				t0 := time.Now()
				_ = c.SetDeadline(t0.Add(5 * time.Second))
				if _, err = io.WriteString(c, req); err != nil {
					break
				}
				var n int64
				if n, err = readResponse(br); err != nil {
					break
				}
				h.lat = append(h.lat, time.Since(t0))
				h.conns++
				h.bytes += n
			}
			mu.Lock()
			total.add(&h)
			if err != nil && firstErr == nil {
				firstErr = err
				failed.Store(true)
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if total.conns == 0 {
		return nil, errors.New("no probe request completed")
	}
	return &total, nil
}
