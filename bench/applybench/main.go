// Command applybench measures how long a runtime change of one server takes
// through the real binary with many servers configured (design target: < 50 ms
// at 10 000 servers, no connection of another server dropped).
//
// For each size it starts spliced (SPLICED_BIN or -bin) with a temporary
// state directory and admin port, creates through the REST API a tcp backend
// of that many servers (the first -origins are real echo origins started
// here, the others 127.0.0.1 on distinct ports that need not listen and start
// in admin_state maint so that no connection goes to them) and a tcp frontend,
// opens -conns long-lived connections through the proxy that keep echoing,
// then times -reps repetitions of: PATCH admin_state (drain/ready), PATCH
// weight, POST a new server, DELETE a server, PATCH the frontend's maxconn
// (a frontend change). Time is wall clock from
// request sent to answer received (the API answers after the data plane has
// applied the change). Finally every live connection must still echo.
//
//	go run ./bench/applybench -servers 1000,10000 -reps 20
//
// It exits non-zero if a connection dropped or an operation failed.
package main

import (
	"bufio"
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/bench/internal/benchutil"
)

func main() {
	bin := flag.String("bin", benchutil.EnvOr("SPLICED_BIN", "bin/spliced"), "spliced binary")
	sizes := flag.String("servers", "1000,10000", "comma-separated backend sizes")
	conns := flag.Int("conns", 50, "live connections through the proxy")
	origins := flag.Int("origins", 4, "real echo origins (the first servers)")
	reps := flag.Int("reps", 20, "repetitions of each operation")
	nbthread := flag.Int("nbthread", 0, "PATCH tuning nbthread first (0: leave the default)")
	keep := flag.Bool("keep", false, "keep the state directory")
	only := flag.String("ops", "", "comma-separated operations to time among state, weight, post, delete, frontend (empty: all)")
	warmup := flag.Int("warmup", 0, "untimed weight changes first (the state directory's steady state: its first snapshot and prune come after a few hundred changes at 10 000 servers)")
	flag.Parse()

	failed := false
	fmt.Printf("%-8s %-22s %5s %9s %9s %9s %11s\n", "servers", "operation", "n", "p50 ms", "p95 ms", "max ms", "CPU ms/op")
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < *origins+2 {
			fatalf("bad size %q (need > origins+1)", f)
		}
		r := &run{bin: *bin, servers: n, conns: *conns, origins: *origins, reps: *reps, nbthread: *nbthread, keep: *keep, only: *only, warmup: *warmup}
		if err := r.do(); err != nil {
			fmt.Fprintf(os.Stderr, "applybench: %d servers: %v\n", n, err)
			failed = true
		}
	}
	if failed {
		os.Exit(1)
	}
}

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "applybench: "+format+"\n", a...)
	os.Exit(2)
}

type run struct {
	bin                                     string
	servers, conns, origins, reps, nbthread int
	keep                                    bool
	only                                    string // -ops
	warmup                                  int    // -warmup

	admin  string
	client *http.Client
}

func (r *run) do() (err error) {
	dir, err := os.MkdirTemp("", "spliced-applybench-")
	if err != nil {
		return err
	}
	if !r.keep {
		defer os.RemoveAll(dir)
	}
	adminPort, err := benchutil.FreePort()
	if err != nil {
		return err
	}
	feport, err := benchutil.FreePort()
	if err != nil {
		return err
	}
	r.admin = fmt.Sprintf("http://127.0.0.1:%d", adminPort)
	r.client = &http.Client{Timeout: 60 * time.Second}
	logf, err := os.Create(filepath.Join(dir, "spliced.log"))
	if err != nil {
		return err
	}
	defer logf.Close()
	cmd := exec.Command(r.bin, "--state-dir", filepath.Join(dir, "state"),
		"--admin-addr", fmt.Sprintf("127.0.0.1:%d", adminPort), "--log-format", "text")
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		return err
	}
	defer func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { _ = cmd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			_ = cmd.Process.Kill()
			<-done
		}
		if err != nil {
			b, _ := os.ReadFile(logf.Name())
			if len(b) > 2000 {
				b = b[len(b)-2000:]
			}
			fmt.Fprintf(os.Stderr, "spliced log tail:\n%s\n", b)
		}
	}()
	if err := r.waitReady(10 * time.Second); err != nil {
		return err
	}
	if r.nbthread > 0 {
		if _, err := r.call("PATCH", "/api/v1/tuning", fmt.Sprintf(`{"nbthread":%d}`, r.nbthread), 200); err != nil {
			return err
		}
	}

	// Echo origins.
	var originPorts []int
	for range r.origins {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return err
		}
		defer ln.Close()
		go echoServe(ln)
		originPorts = append(originPorts, ln.Addr().(*net.TCPAddr).Port)
	}
	// Backend: origins, then placeholders on distinct ports in maint.
	var b bytes.Buffer
	b.WriteString(`{"name":"big","mode":"tcp","balance":"roundrobin","servers":[`)
	port := 20000
	taken := map[int]bool{}
	for _, p := range originPorts {
		taken[p] = true
	}
	nextPort := func() int {
		for taken[port] {
			port++
		}
		p := port
		taken[p] = true
		return p
	}
	for i := range r.servers {
		if i > 0 {
			b.WriteByte(',')
		}
		if i < r.origins {
			fmt.Fprintf(&b, `{"name":"s%05d","address":"127.0.0.1","port":%d}`, i, originPorts[i])
		} else {
			fmt.Fprintf(&b, `{"name":"s%05d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, nextPort())
		}
	}
	b.WriteString(`]}`)
	t0 := time.Now()
	if _, err := r.call("POST", "/api/v1/backends", b.String(), 201); err != nil {
		return err
	}
	createMs := benchutil.Ms(time.Since(t0))
	if _, err := r.call("POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"fe","mode":"tcp","default_backend":"big",
		"binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, feport), 201); err != nil {
		return err
	}

	// Live connections, each echoing every 20 ms.
	lc, err := openLive(fmt.Sprintf("127.0.0.1:%d", feport), r.conns)
	if err != nil {
		return err
	}
	defer lc.close()

	// Operations on placeholder servers (never on one that carries traffic).
	type op struct {
		name, key string // key: as -ops names it
		do        func(i int) (string, string, string, int)
	}
	target := func(i int) string { return fmt.Sprintf("s%05d", r.origins+1+i%(r.servers-r.origins-1)) }
	ops := []op{
		{"PATCH admin_state", "state", func(i int) (string, string, string, int) {
			// drain, then ready, the same server; then the next one.
			return "PATCH", "/api/v1/backends/big/servers/" + target(i/2), fmt.Sprintf(`{"admin_state":%q}`, []string{"drain", "ready"}[i%2]), 200
		}},
		{"PATCH weight", "weight", func(i int) (string, string, string, int) {
			return "PATCH", "/api/v1/backends/big/servers/" + target(i), fmt.Sprintf(`{"weight":%d}`, 2+i%50), 200
		}},
		{"POST server", "post", func(i int) (string, string, string, int) {
			return "POST", "/api/v1/backends/big/servers",
				fmt.Sprintf(`{"name":"new%05d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, nextPort()), 201
		}},
		{"DELETE server", "delete", func(i int) (string, string, string, int) {
			return "DELETE", fmt.Sprintf("/api/v1/backends/big/servers/new%05d", i), "", 204
		}},
		{"PATCH frontend", "frontend", func(i int) (string, string, string, int) {
			// the frontend the live connections came through
			return "PATCH", "/api/v1/frontends/fe", fmt.Sprintf(`{"maxconn":%d}`, 20000+i), 200
		}},
	}
	fmt.Printf("%-8d %-22s %5d %9.1f %9s %9s\n", r.servers, "create backend", 1, createMs, "", "")
	pid := cmd.Process.Pid
	for i := range r.warmup {
		if _, err := r.call("PATCH", "/api/v1/backends/big/servers/"+target(i), fmt.Sprintf(`{"weight":%d}`, 60+i%50), 200); err != nil {
			return fmt.Errorf("warm-up #%d: %w", i, err)
		}
	}
	for _, o := range ops {
		if r.only != "" && !slices.Contains(strings.Split(r.only, ","), o.key) {
			continue
		}
		var d []float64
		cpu0 := cpuNs(pid)
		for i := range r.reps {
			m, p, body, want := o.do(i)
			t := time.Now()
			if _, err := r.call(m, p, body, want); err != nil {
				return fmt.Errorf("%s #%d: %w", o.name, i, err)
			}
			d = append(d, benchutil.Ms(time.Since(t)))
		}
		cpu := float64(cpuNs(pid)-cpu0) / 1e6 / float64(len(d))
		slices.Sort(d)
		fmt.Printf("%-8d %-22s %5d %9.1f %9.1f %9.1f %11.2f\n", r.servers, o.name, len(d), benchutil.Pct(d, 50), benchutil.Pct(d, 95), d[len(d)-1], cpu)
	}
	dropped, echoes := lc.check()
	status := "ok"
	if dropped > 0 {
		status = "FAIL"
	}
	fmt.Printf("%-8d %-22s %5d live connections, %d dropped, %d echoes during the run: %s\n",
		r.servers, "connections", r.conns, dropped, echoes, status)
	if dropped > 0 {
		return fmt.Errorf("%d of %d live connections dropped: %v", dropped, r.conns, lc.firstErr())
	}
	return nil
}

// cpuNs returns the CPU time pid's threads spent, in nanoseconds: the sum
// of their schedstat run times (the scheduler's own count, not sampled at
// the 10 ms tick: 20 repetitions of a 1.5 ms change read 1.5 or 2.0 ms by
// utime+stime). A thread that exited in between is not counted: the Go
// runtime keeps its threads. Without schedstat, utime+stime (cpuTicks).
func cpuNs(pid int) int64 {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return cpuTicks(pid) * 10e6
	}
	var sum int64
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, e.Name(), "schedstat"))
		if err != nil {
			continue // the thread exited meanwhile
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return cpuTicks(pid) * 10e6
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return cpuTicks(pid) * 10e6
		}
		sum += ns
	}
	return sum
}

// cpuTicks returns utime+stime of pid in clock ticks (1/100 s): the CPU
// spliced spent, which unlike wall time does not depend on what else runs.
func cpuTicks(pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// Fields after the command name (which may hold spaces): state is 3rd.
	f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
	if len(f) < 13 {
		return 0
	}
	u, _ := strconv.ParseInt(f[11], 10, 64)
	st, _ := strconv.ParseInt(f[12], 10, 64)
	return u + st
}

func (r *run) waitReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		resp, err := r.client.Get(r.admin + "/api/v1/info")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return nil
			}
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("admin API did not answer on %s: %v", r.admin, err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (r *run) call(method, path, body string, want int) ([]byte, error) {
	req, err := http.NewRequest(method, r.admin+path, strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	resp, err := r.client.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	if resp.StatusCode != want {
		if len(out) > 400 {
			out = out[:400]
		}
		return nil, fmt.Errorf("%s %s: status %d, want %d: %s", method, path, resp.StatusCode, want, out)
	}
	return out, nil
}

func echoServe(ln net.Listener) {
	for {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		go func() {
			defer c.Close()
			_, _ = io.Copy(c, c)
		}()
	}
}

// live holds connections that echo a line every 20 ms until stopped.
type live struct {
	conns  []net.Conn
	stop   chan struct{}
	wg     sync.WaitGroup
	echoes atomic.Int64
	mu     sync.Mutex
	errs   []error
}

func openLive(addr string, n int) (*live, error) {
	l := &live{stop: make(chan struct{})}
	for i := range n {
		c, err := net.DialTimeout("tcp", addr, 5*time.Second)
		if err != nil {
			l.close()
			return nil, err
		}
		l.conns = append(l.conns, c)
		// One synchronous echo first: the connection reached an origin.
		if err := echoOnce(c, bufio.NewReader(c), i, 0); err != nil {
			l.close()
			return nil, fmt.Errorf("connection %d: first echo: %w", i, err)
		}
	}
	for i, c := range l.conns {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			br := bufio.NewReader(c)
			t := time.NewTicker(20 * time.Millisecond)
			defer t.Stop()
			for seq := 1; ; seq++ {
				select {
				case <-l.stop:
					// Last word: one more echo after all changes.
					if err := echoOnce(c, br, i, seq); err != nil {
						l.fail(fmt.Errorf("connection %d final echo: %w", i, err))
					}
					return
				case <-t.C:
				}
				if err := echoOnce(c, br, i, seq); err != nil {
					l.fail(fmt.Errorf("connection %d echo %d: %w", i, seq, err))
					return
				}
				l.echoes.Add(1)
			}
		}()
	}
	return l, nil
}

func echoOnce(c net.Conn, br *bufio.Reader, i, seq int) error {
	msg := fmt.Sprintf("conn %d seq %d\n", i, seq)
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := io.WriteString(c, msg); err != nil {
		return err
	}
	got, err := br.ReadString('\n')
	if err != nil {
		return err
	}
	if got != msg {
		return fmt.Errorf("echo %q, want %q", got, msg)
	}
	return nil
}

func (l *live) fail(err error) {
	l.mu.Lock()
	l.errs = append(l.errs, err)
	l.mu.Unlock()
}

func (l *live) firstErr() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.errs) == 0 {
		return nil
	}
	return errors.Join(l.errs[:min(3, len(l.errs))]...)
}

// check stops the echo loops (each does one final echo) and returns how
// many connections failed.
func (l *live) check() (int, int64) {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.errs), l.echoes.Load()
}

func (l *live) close() {
	for _, c := range l.conns {
		c.Close()
	}
}
