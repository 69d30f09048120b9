// Command clusterbench measures how fast a change reaches every node of a
// three-node spliced cluster (--store etcd://…), and compares it with the
// same change pushed to three HAProxy processes and reloaded.
//
// For each size (-servers) it starts an embedded etcd (internal/etcdtest,
// one member, fsync on, in a temporary directory) and three spliced nodes
// a, b, c (--node-address 127.0.0.2, .3, .4, each its own state directory
// and admin port). Through node a's REST API it sets nbthread 1 and creates
// a tcp backend of that many servers (127.0.0.1 on distinct ports, in
// admin_state maint) and a frontend bound on "${NODE_ADDRESS}". Then -writes
// times: PATCH the weight of one server on node a with ?wait_ms=0 (the
// answer comes once etcd committed it and node a applied it), and poll the
// three nodes' GET /api/v1/info, each every -poll, until running_generation
// is the write's. Printed, p50/p95/max over the writes:
//
//   - fmt.Sprintf("spliced answer → all %d run it", len(nodeNames)): from the write's answer to the last
//     node seen running it (what the issue asks: the propagation beyond the
//     receiving node). Resolution: the poll interval plus one GET (~0.3 ms).
//   - fmt.Sprintf("spliced request → all %d run it", len(nodeNames)): the same from the request sent.
//   - "spliced write acked by 3": -acked writes with ?wait_ms=10000, request
//     to answer, each answer listing a, b and c as applied (the nodes'
//     own ACK, what a client of the API sees).
//
// HAProxy: three haproxy processes in master-worker mode (-W, reload by
// SIGUSR2: the master re-executes itself, parses the file, forks a new
// worker; how Debian's systemd unit reloads), each with the same backend
// (servers "disabled", the same weights) and a frontend on its own
// address. -reloads times: change one server's weight and the global
// "description" (gen-N) in the file, write it to each node's directory
// (temporary file + rename), SIGUSR2 the three masters at once, and poll
// each one's stats socket ("show info") until its worker reports gen-N.
// Printed: fmt.Sprintf("haproxy push + reload → all %d run it", len(nodeNames)), p50/p95/max, and the
// ratio spliced / HAProxy of the medians.
//
//	go run ./bench/clusterbench -bin bin/spliced -servers 1000,10000 -writes 200
//
// -nodes 1 (with -haproxy set to the empty string) times the same writes on one node of a
// cluster: the store's part, without other nodes competing for the CPUs.
//
// It exits non-zero when a run fails (a node did not apply, a write or a
// reload failed).
package main

import (
	"bufio"
	"bytes"
	"encoding/json"
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
	"syscall"
	"time"

	"github.com/spliced-proxy/spliced/bench/internal/benchutil"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
)

func main() {
	bin := flag.String("bin", benchutil.EnvOr("SPLICED_BIN", "bin/spliced"), "spliced binary")
	haproxy := flag.String("haproxy", "haproxy", "haproxy binary (empty: no HAProxy comparison)")
	sizes := flag.String("servers", "1000,10000", "comma-separated backend sizes")
	writes := flag.Int("writes", 200, "writes with ?wait_ms=0 per size")
	acked := flag.Int("acked", 50, "writes with ?wait_ms=10000 per size (acknowledged by the three nodes)")
	reloads := flag.Int("reloads", 20, "HAProxy push + reload repetitions per size")
	poll := flag.Duration("poll", time.Millisecond, "interval of the polls of each node")
	fsync := flag.Bool("fsync", true, "etcd fsyncs its writes (as a real deployment)")
	nodes := flag.Int("nodes", 3, "nodes (1 to 3): 1 times a cluster write without other nodes competing for the CPUs")
	flag.Parse()
	if *nodes < 1 || *nodes > len(nodeNames) {
		fatalf("-nodes %d: 1 to %d", *nodes, len(nodeNames))
	}
	nodeNames, nodeAddrs = nodeNames[:*nodes], nodeAddrs[:*nodes]

	failed := false
	fmt.Printf("cluster: %d nodes on one machine, etcd 1 member (fsync %v), polls every %v\n", len(nodeNames), *fsync, *poll)
	fmt.Printf("%-8s %-38s %5s %9s %9s %9s %12s\n", "servers", "measure", "n", "p50 ms", "p95 ms", "max ms", "vs HAProxy")
	for _, f := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(f))
		if err != nil || n < 2 {
			fatalf("bad size %q", f)
		}
		b := &bench{bin: *bin, servers: n, poll: *poll}
		var hp []float64
		if *haproxy != "" {
			if hp, err = b.haproxy(*haproxy, *reloads); err != nil {
				fmt.Fprintf(os.Stderr, "clusterbench: %d servers: haproxy: %v\n", n, err)
				failed = true
			}
		}
		if err := b.spliced(*writes, *acked, *fsync, hp); err != nil {
			fmt.Fprintf(os.Stderr, "clusterbench: %d servers: spliced: %v\n", n, err)
			failed = true
		}
		if hp != nil {
			row(n, fmt.Sprintf("haproxy push + reload → all %d run it", len(nodeNames)), hp, nil)
		}
	}
	if failed {
		os.Exit(1)
	}
}

// row prints one measure; ref (HAProxy's, sorted) gives the ratio of medians.
func row(servers int, what string, sorted, ref []float64) {
	ratio := ""
	if len(ref) > 0 && benchutil.Pct(ref, 50) > 0 {
		ratio = fmt.Sprintf("%.2g×", benchutil.Pct(sorted, 50)/benchutil.Pct(ref, 50))
	}
	fmt.Printf("%-8d %-38s %5d %9.1f %9.1f %9.1f %12s\n", servers, what, len(sorted), benchutil.Pct(sorted, 50), benchutil.Pct(sorted, 95), sorted[len(sorted)-1], ratio)
}

type bench struct {
	bin     string
	servers int
	poll    time.Duration
}

var nodeNames = []string{"a", "b", "c"}
var nodeAddrs = []string{"127.0.0.2", "127.0.0.3", "127.0.0.4"}

// node is one spliced process.
type node struct {
	name, addr, admin string
	cmd               *exec.Cmd
	done              chan struct{}
	log               string
	client            *http.Client
}

func (b *bench) spliced(writes, acked int, fsync bool, ref []float64) (err error) {
	dir, err := os.MkdirTemp("", "spliced-clusterbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	etcd, err := etcdtest.Launch(etcdtest.Options{Dir: filepath.Join(dir, "etcd"), Fsync: fsync})
	if err != nil {
		return err
	}
	defer etcd.Close()
	store := etcd.StoreURL("/spliced")

	var nodes []*node
	defer func() {
		for _, n := range nodes {
			n.stop()
			if err != nil {
				tail, _ := os.ReadFile(n.log)
				if len(tail) > 1500 {
					tail = tail[len(tail)-1500:]
				}
				fmt.Fprintf(os.Stderr, "--- node %s log tail:\n%s\n", n.name, tail)
			}
		}
	}()
	for i, name := range nodeNames {
		n, err := startNode(b.bin, dir, name, nodeAddrs[i], store)
		if err != nil {
			return err
		}
		nodes = append(nodes, n)
	}
	a := nodes[0]
	feport, err := benchutil.FreePort()
	if err != nil {
		return err
	}
	if _, _, err := a.call("PATCH", "/api/v1/tuning?wait_ms=30000", `{"nbthread":1}`, 200); err != nil {
		return err
	}
	var doc bytes.Buffer
	doc.WriteString(`{"name":"big","mode":"tcp","balance":"roundrobin","servers":[`)
	for i := range b.servers {
		if i > 0 {
			doc.WriteByte(',')
		}
		fmt.Fprintf(&doc, `{"name":"s%05d","address":"127.0.0.1","port":%d,"admin_state":"maint"}`, i, 20000+i)
	}
	doc.WriteString(`]}`)
	if _, _, err := a.call("POST", "/api/v1/backends?wait_ms=30000", doc.String(), 201); err != nil {
		return err
	}
	body, _, err := a.call("POST", "/api/v1/frontends?wait_ms=30000", fmt.Sprintf(`{"name":"fe","mode":"tcp","default_backend":"big",
		"binds":[{"name":"b1","address":"${NODE_ADDRESS}","port":%d}]}`, feport), 201)
	if err != nil {
		return err
	}
	if err := allApplied(body); err != nil {
		return fmt.Errorf("frontend: %w", err)
	}

	// Propagation: the answer of a ?wait_ms=0 write, then the nodes.
	var fromAnswer, fromRequest []float64
	var cpu0 []time.Duration
	for i := range writes + 5 {
		if i == 5 {
			cpu0 = nodesCPU(nodes)
		}
		path := fmt.Sprintf("/api/v1/backends/big/servers/s%05d?wait_ms=0", i%b.servers)
		t0 := time.Now()
		_, hdr, err := a.call("PATCH", path, fmt.Sprintf(`{"weight":%d}`, 2+i%200), 200)
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		tAnswer := time.Now()
		gen, err := strconv.ParseInt(hdr.Get("X-Spliced-Generation"), 10, 64)
		if err != nil {
			return fmt.Errorf("write %d: no X-Spliced-Generation", i)
		}
		last, err := b.waitAll(nodes, gen, 30*time.Second)
		if err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
		if i < 5 { // warm-up
			continue
		}
		fromAnswer = append(fromAnswer, benchutil.Ms(last.Sub(tAnswer)))
		fromRequest = append(fromRequest, benchutil.Ms(last.Sub(t0)))
	}
	cpu := nodesCPU(nodes)
	// Acknowledged writes: the answer lists the three nodes.
	var ack []float64
	for i := range acked {
		path := fmt.Sprintf("/api/v1/backends/big/servers/s%05d?wait_ms=10000", (writes+i)%b.servers)
		t0 := time.Now()
		body, _, err := a.call("PATCH", path, fmt.Sprintf(`{"weight":%d}`, 2+i%200), 200)
		if err != nil {
			return fmt.Errorf("acked write %d: %w", i, err)
		}
		ack = append(ack, benchutil.Ms(time.Since(t0)))
		if err := allApplied(body); err != nil {
			return fmt.Errorf("acked write %d: %w", i, err)
		}
	}
	for _, s := range [][]float64{fromAnswer, fromRequest, ack} {
		slices.Sort(s)
	}
	if len(fromAnswer) > 0 {
		row(b.servers, fmt.Sprintf("spliced answer → all %d run it", len(nodeNames)), fromAnswer, ref)
		row(b.servers, fmt.Sprintf("spliced request → all %d run it", len(nodeNames)), fromRequest, ref)
	}
	if len(ack) > 0 {
		row(b.servers, fmt.Sprintf("spliced write acked by %d (wait_ms)", len(nodeNames)), ack, ref)
	}
	if len(fromAnswer) > 0 && cpu0 != nil {
		var per []string
		for i := range nodes {
			per = append(per, fmt.Sprintf("%s %.1f", nodes[i].name, benchutil.Ms(cpu[i]-cpu0[i])/float64(len(fromAnswer))))
		}
		fmt.Printf("%-8d %-38s %5d %s (ms each, the polls included)\n", b.servers, "spliced CPU per write", len(fromAnswer), strings.Join(per, ", "))
	}
	for _, n := range nodes[1:] {
		if ad, err := n.adoptions(); err == nil {
			fmt.Printf("%-8d %-38s %s\n", b.servers, "spliced node "+n.name+" adopted", ad)
		}
	}
	return nil
}

// nodesCPU is the CPU time (user and system) each node used so far.
func nodesCPU(nodes []*node) []time.Duration {
	out := make([]time.Duration, len(nodes))
	for i, n := range nodes {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", n.cmd.Process.Pid))
		if err != nil {
			continue
		}
		// Fields after the command's closing parenthesis: utime and
		// stime are the 12th and 13th (in clock ticks, 100 a second).
		f := strings.Fields(string(b[bytes.LastIndexByte(b, ')')+1:]))
		if len(f) < 13 {
			continue
		}
		ut, _ := strconv.ParseInt(f[11], 10, 64)
		st, _ := strconv.ParseInt(f[12], 10, 64)
		out[i] = time.Duration(ut+st) * 10 * time.Millisecond
	}
	return out
}

// adoptions is how the node adopted the other nodes' writes
// (/api/v1/cluster: store.adoptions), as printed.
func (n *node) adoptions() (string, error) {
	body, _, err := n.call("GET", "/api/v1/cluster", "", 200)
	if err != nil {
		return "", err
	}
	var ci struct {
		Store struct {
			Adoptions *struct {
				Deltas        int64 `json:"deltas"`
				Documents     int64 `json:"documents"`
				RefusedDeltas int64 `json:"refused_deltas"`
			} `json:"adoptions"`
		} `json:"store"`
	}
	if err := json.Unmarshal(body, &ci); err != nil || ci.Store.Adoptions == nil {
		return "", fmt.Errorf("no adoptions in /api/v1/cluster")
	}
	a := ci.Store.Adoptions
	return fmt.Sprintf("%d changes applied, %d documents loaded, %d changes refused", a.Deltas, a.Documents, a.RefusedDeltas), nil
}

// allApplied checks that a write's answer lists a, b and c as applied.
func allApplied(body []byte) error {
	var w struct {
		Nodes struct {
			Applied []string `json:"applied"`
		} `json:"nodes"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return err
	}
	got := slices.Sorted(slices.Values(w.Nodes.Applied))
	if !slices.Equal(got, nodeNames) {
		return fmt.Errorf("applied by %v, want %v: %.300s", got, nodeNames, body)
	}
	return nil
}

// waitAll polls every node's running_generation until it is gen or newer,
// and returns when the last one was seen.
func (b *bench) waitAll(nodes []*node, gen int64, d time.Duration) (time.Time, error) {
	seen := make([]time.Time, len(nodes))
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	deadline := time.Now().Add(d)
	for i, n := range nodes {
		wg.Go(func() {
			for {
				g, err := n.running()
				if err == nil && g >= gen {
					seen[i] = time.Now()
					return
				}
				if time.Now().After(deadline) {
					errs[i] = fmt.Errorf("node %s runs %d after %v, want %d (%v)", n.name, g, d, gen, err)
					return
				}
				time.Sleep(b.poll)
			}
		})
	}
	wg.Wait()
	var last time.Time
	for i := range nodes {
		if errs[i] != nil {
			return last, errs[i]
		}
		if seen[i].After(last) {
			last = seen[i]
		}
	}
	return last, nil
}

func startNode(bin, dir, name, addr, store string) (*node, error) {
	port, err := benchutil.FreePort()
	if err != nil {
		return nil, err
	}
	n := &node{name: name, addr: addr, admin: fmt.Sprintf("127.0.0.1:%d", port), done: make(chan struct{}),
		log:    filepath.Join(dir, name+".log"),
		client: &http.Client{Timeout: 60 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 4}}}
	logf, err := os.Create(n.log)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	n.cmd = exec.Command(bin, "--store", store, "--node-name", name, "--node-address", addr,
		"--admin-addr", n.admin, "--state-dir", filepath.Join(dir, "state-"+name), "--log-format", "text")
	n.cmd.Stdout, n.cmd.Stderr = logf, logf
	if err := n.cmd.Start(); err != nil {
		return nil, err
	}
	go func() { _ = n.cmd.Wait(); close(n.done) }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if _, err := n.running(); err == nil {
			return n, nil
		}
		select {
		case <-n.done:
			return n, fmt.Errorf("node %s exited at start (log %s)", name, n.log)
		default:
		}
		if time.Now().After(deadline) {
			return n, fmt.Errorf("node %s: admin API did not answer on %s", name, n.admin)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func (n *node) stop() {
	_ = n.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.done:
	case <-time.After(15 * time.Second):
		_ = n.cmd.Process.Kill()
		<-n.done
	}
}

// running is the node's running_generation (/api/v1/info).
func (n *node) running() (int64, error) {
	body, _, err := n.call("GET", "/api/v1/info", "", 200)
	if err != nil {
		return 0, err
	}
	var in struct {
		RunningGeneration int64 `json:"running_generation"`
	}
	err = json.Unmarshal(body, &in)
	return in.RunningGeneration, err
}

func (n *node) call(method, path, body string, want int) ([]byte, http.Header, error) {
	req, err := http.NewRequest(method, "http://"+n.admin+path, strings.NewReader(body))
	if err != nil {
		return nil, nil, err
	}
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
		if method == "PATCH" {
			req.Header.Set("Content-Type", "application/merge-patch+json")
		}
	}
	resp, err := n.client.Do(req)
	if err != nil {
		return nil, nil, err
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, nil, err
	}
	if resp.StatusCode != want {
		return nil, nil, fmt.Errorf("%s %s on %s: status %d, want %d: %.400s", method, path, n.name, resp.StatusCode, want, out)
	}
	return out, resp.Header, nil
}

// ---- HAProxy ----

// hnode is one haproxy master (-W) and its files.
type hnode struct {
	dir, addr string
	cmd       *exec.Cmd
	done      chan struct{}
}

// haproxyConfig is the file of one node at generation gen: weight of
// server target changed.
func (b *bench) haproxyConfig(h *hnode, port, gen, target, weight int) []byte {
	var c bytes.Buffer
	fmt.Fprintf(&c, `global
    nbthread 1
    stats socket %s/stats.sock mode 600 level admin
    description gen-%d

defaults
    mode tcp
    timeout connect 5s
    timeout client 60s
    timeout server 60s

frontend fe
    bind %s:%d
    default_backend big

backend big
    balance roundrobin
`, h.dir, gen, h.addr, port)
	for i := range b.servers {
		w := 1
		if i == target {
			w = weight
		}
		fmt.Fprintf(&c, "    server s%05d 127.0.0.1:%d weight %d disabled\n", i, 20000+i, w)
	}
	return c.Bytes()
}

func writeAtomic(path string, data []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// description asks h's worker for its "description" (show info).
func (h *hnode) description() (string, error) {
	c, err := net.DialTimeout("unix", filepath.Join(h.dir, "stats.sock"), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, "show info\n"); err != nil {
		return "", err
	}
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		if v, ok := strings.CutPrefix(sc.Text(), "description: "); ok {
			return v, nil
		}
	}
	return "", fmt.Errorf("no description in show info (%v)", sc.Err())
}

// masterReady waits until h's master answers "show proc" on its CLI
// socket (-S): its loop runs, so a SIGUSR2 now is acted on. A SIGUSR2
// that reaches a master still re-executing itself is lost (seen with
// HAProxy 2.6), so every reload waits for this first (outside the timing).
func (h *hnode) masterReady(d time.Duration) error {
	deadline := time.Now().Add(d)
	for {
		out, err := h.masterCmd("show proc")
		if err == nil && strings.Contains(out, "master") && strings.Contains(out, "worker") {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("haproxy master in %s: no answer to show proc after %v: %v %q", h.dir, d, err, out)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

func (h *hnode) masterCmd(cmd string) (string, error) {
	c, err := net.DialTimeout("unix", filepath.Join(h.dir, "master.sock"), time.Second)
	if err != nil {
		return "", err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(c, cmd+"\n"); err != nil {
		return "", err
	}
	// The master CLI keeps the connection: read up to the answer's end
	// (an empty line).
	var out strings.Builder
	buf := make([]byte, 4096)
	for !strings.HasSuffix(out.String(), "\n\n") {
		n, err := c.Read(buf)
		out.Write(buf[:n])
		if err != nil {
			return out.String(), err
		}
	}
	return out.String(), nil
}

// waitGen polls h until its worker reports gen-N; returns when.
func (h *hnode) waitGen(gen int, poll, d time.Duration) (time.Time, error) {
	want := fmt.Sprintf("gen-%d", gen)
	deadline := time.Now().Add(d)
	for {
		got, err := h.description()
		if got == want {
			return time.Now(), nil
		}
		select {
		case <-h.done:
			return time.Time{}, fmt.Errorf("haproxy in %s exited", h.dir)
		default:
		}
		if time.Now().After(deadline) {
			return time.Time{}, fmt.Errorf("haproxy in %s reports %q after %v, want %s (%v)", h.dir, got, d, want, err)
		}
		time.Sleep(poll)
	}
}

func (b *bench) haproxy(bin string, reloads int) ([]float64, error) {
	dir, err := os.MkdirTemp("", "spliced-clusterbench-haproxy-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	port, err := benchutil.FreePort()
	if err != nil {
		return nil, err
	}
	var hs []*hnode
	defer func() {
		for _, h := range hs {
			_ = h.cmd.Process.Signal(syscall.SIGTERM)
			select {
			case <-h.done:
			case <-time.After(15 * time.Second):
				_ = h.cmd.Process.Kill()
				<-h.done
			}
		}
	}()
	for i, addr := range nodeAddrs {
		h := &hnode{dir: filepath.Join(dir, nodeNames[i]), addr: addr, done: make(chan struct{})}
		if err := os.MkdirAll(h.dir, 0o700); err != nil {
			return nil, err
		}
		cfg := filepath.Join(h.dir, "haproxy.cfg")
		if err := writeAtomic(cfg, b.haproxyConfig(h, port, 0, 0, 1)); err != nil {
			return nil, err
		}
		logf, err := os.Create(filepath.Join(h.dir, "haproxy.log"))
		if err != nil {
			return nil, err
		}
		h.cmd = exec.Command(bin, "-W", "-db", "-S", filepath.Join(h.dir, "master.sock"), "-f", cfg)
		h.cmd.Stdout, h.cmd.Stderr = logf, logf
		err = h.cmd.Start()
		logf.Close()
		if err != nil {
			return nil, err
		}
		go func() { _ = h.cmd.Wait(); close(h.done) }()
		hs = append(hs, h)
	}
	for _, h := range hs {
		if _, err := h.waitGen(0, 10*time.Millisecond, 60*time.Second); err != nil {
			return nil, err
		}
	}
	var d []float64
	for r := 1; r <= reloads; r++ {
		target, weight := r%b.servers, 2+r%200
		for _, h := range hs {
			if err := h.masterReady(60 * time.Second); err != nil {
				return nil, err
			}
		}
		t0 := time.Now()
		// The push: the same file to the three nodes, then the reloads.
		for _, h := range hs {
			if err := writeAtomic(filepath.Join(h.dir, "haproxy.cfg"), b.haproxyConfig(h, port, r, target, weight)); err != nil {
				return nil, err
			}
		}
		for _, h := range hs {
			if err := h.cmd.Process.Signal(syscall.SIGUSR2); err != nil {
				return nil, err
			}
		}
		var last time.Time
		var wg sync.WaitGroup
		errs := make([]error, len(hs))
		seen := make([]time.Time, len(hs))
		for i, h := range hs {
			wg.Go(func() { seen[i], errs[i] = h.waitGen(r, b.poll, 60*time.Second) })
		}
		wg.Wait()
		for i := range hs {
			if errs[i] != nil {
				return nil, errs[i]
			}
			if seen[i].After(last) {
				last = seen[i]
			}
		}
		d = append(d, benchutil.Ms(last.Sub(t0)))
	}
	slices.Sort(d)
	return d, nil
}

// ---- helpers ----

func fatalf(format string, a ...any) {
	fmt.Fprintf(os.Stderr, "clusterbench: "+format+"\n", a...)
	os.Exit(2)
}
