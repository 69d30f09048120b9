package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/e2e"
)

var (
	etcdDevOnce sync.Once
	etcdDevPath string
	etcdDevErr  error
)

// buildEtcdDev builds internal/etcdtest/etcd-dev once per test binary, with
// -race when the tests have it (the test binary compiled etcd's packages
// that way already: only the link is left).
func buildEtcdDev(t *testing.T) string {
	t.Helper()
	bin := buildBinary(t) // makes the directory etcd-dev is built in
	etcdDevOnce.Do(func() {
		etcdDevPath = filepath.Join(filepath.Dir(bin), "etcd-dev")
		args := []string{"build", "-o", etcdDevPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, "../../internal/etcdtest/etcd-dev")...).CombinedOutput()
		if err != nil {
			etcdDevErr = fmt.Errorf("go build etcd-dev: %v\n%s", err, out)
		}
	})
	if etcdDevErr != nil {
		t.Fatal(etcdDevErr)
	}
	return etcdDevPath
}

// freePortPair is a free port whose next one is free too (etcd-dev's client
// and peer ports; the installed etcd's in the README's block), below the
// kernel's ephemeral range (net.ipv4.ip_local_port_range, 32768 and up by
// default): the blocks start etcd and the nodes on these ports three
// times over about a minute, and a port of the ephemeral range can be
// taken meanwhile as the local port of any outgoing connection on the
// machine ("bind: address already in use" for the peer port, once in a
// full run).
func freePortPair(t *testing.T) int {
	t.Helper()
	for range 200 {
		p := 20000 + rand.IntN(12000)
		if portFree(p) && portFree(p+1) {
			return p
		}
	}
	t.Fatal("no two consecutive free ports below 32000")
	return 0
}

// freeLowPort is a free port below the ephemeral range (see freePortPair).
func freeLowPort(t *testing.T) int {
	t.Helper()
	for range 200 {
		if p := 20000 + rand.IntN(12000); portFree(p) {
			return p
		}
	}
	t.Fatal("no free port below 32000")
	return 0
}

func portFree(p int) bool {
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
	if err != nil {
		return false
	}
	ln.Close()
	return true
}

// readmeBlock is the README's cluster block whose first line starts with
// "# cluster: "+label.
func readmeBlock(t *testing.T, label string) string {
	t.Helper()
	for _, b := range readmeClusterBlocks(t) {
		if strings.HasPrefix(b, "# cluster: "+label) {
			return b
		}
	}
	t.Fatalf("README has no cluster block %q", label)
	return ""
}

// TestClusterReadme runs the README's Cluster section as scripts, each
// block in its own bash as a reader would save and run it: the start block
// (etcd, its wait, three nodes on 127.0.0.2-4, their wait), the
// walk-through against them with a real origin, and the stop block, after
// which no process of the start block is left (etcd-dev included). Started
// again on the same directory the walk-through answers 409, as the README
// says; after its start-over block the start and the walk-through work
// again, that time with the installed /usr/bin/etcd and its compaction
// flags when there is one (scripts/test-deps.sh installs it). Changed for
// the test: the ports, the directory, and the builds (the test's
// binaries). Each process a script leaves running is reaped by the test
// (a child subreaper: this machine's init does not reap orphans, and the
// stop block waits with kill -0 until they are gone).
func TestClusterReadme(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	start, walk := readmeBlock(t, "start ("), readmeBlock(t, "a change on a")
	stop, over := readmeBlock(t, "stop"), readmeBlock(t, "start over")
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0) })

	dir := filepath.Join(t.TempDir(), "spliced-cluster")
	etcdPort := freePortPair(t)
	admins := []int{freeLowPort(t), freeLowPort(t), freeLowPort(t)}
	origin, port := clusterOrigin(t), freeLowPort(t)
	repl := []string{
		"make build", "true",
		"go build -o bin/etcd-dev ./internal/etcdtest/etcd-dev", "true",
		"bin/etcd-dev", buildEtcdDev(t),
		"bin/spliced", buildBinary(t),
		"/tmp/spliced-cluster", dir,
		"127.0.0.1:2379", fmt.Sprintf("127.0.0.1:%d", etcdPort),
		"127.0.0.1:2380", fmt.Sprintf("127.0.0.1:%d", etcdPort+1),
		"9901", strconv.Itoa(admins[0]), "9902", strconv.Itoa(admins[1]), "9903", strconv.Itoa(admins[2]),
		`"port":8080`, fmt.Sprintf(`"port":%d`, port), ":8080/", fmt.Sprintf(":%d/", port),
		`"port":8081`, fmt.Sprintf(`"port":%d`, origin),
	}
	if strings.Count(start, "[ -x /usr/bin/etcd ]") != 1 {
		t.Fatal("the README's start block does not choose between /usr/bin/etcd and etcd-dev with `[ -x /usr/bin/etcd ]`")
	}
	_, installed := os.Stat("/usr/bin/etcd")
	run := func(what, block string, etcd string) (string, error) {
		t.Helper()
		r := append(append([]string{}, repl...), "[ -x /usr/bin/etcd ]", map[string]string{"dev": "false", "installed": "true"}[etcd])
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
		defer cancel()
		out, err := exec.CommandContext(ctx, "bash", "-euo", "pipefail", "-c", strings.NewReplacer(r...).Replace(block)).CombinedOutput()
		if ctx.Err() != nil {
			err = fmt.Errorf("%s: still running after 3 minutes", what)
		}
		return string(out), err
	}
	must := func(what, block, etcd string) string {
		t.Helper()
		out, err := run(what, block, etcd)
		if err != nil {
			t.Fatalf("README cluster block %s failed: %v\n--- block\n%s\n--- output\n%s\n--- logs\n%s", what, err, block, out, clusterLogs(dir))
		}
		return out
	}
	// pids are the processes the start block left running: reaped when
	// they end, killed at the end of the test if they did not.
	var pids []int
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	started := func() []int {
		t.Helper()
		var ps []int
		for _, f := range []string{"etcd.pid", "nodes.pid"} {
			b, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			for _, s := range strings.Fields(string(b)) {
				p, err := strconv.Atoi(s)
				if err != nil {
					t.Fatalf("%s: %q", f, b)
				}
				ps = append(ps, p)
				go func() { // this process is its parent now (subreaper)
					var ws unix.WaitStatus
					for {
						if _, err := unix.Wait4(p, &ws, 0, nil); !errors.Is(err, unix.EINTR) {
							return
						}
					}
				}()
			}
		}
		if len(ps) != 4 {
			t.Fatalf("the start block left %d processes (%v), want etcd and three nodes", len(ps), ps)
		}
		pids = append(pids, ps...)
		return ps
	}
	stopped := func(ps []int) {
		t.Helper()
		must("stop", stop, "")
		for _, p := range ps {
			if err := syscall.Kill(p, 0); !errors.Is(err, syscall.ESRCH) {
				t.Fatalf("process %d still there after the stop block (%v)", p, err)
			}
		}
		e2e.Check(t, "a process of the README's cluster", clusterLogs(dir))
	}

	// First run, etcd-dev.
	must("start", start, "dev")
	ps := started()
	out := must("walk-through", walk, "")
	for _, want := range []string{"127.0.0.2 200", "127.0.0.3 200", "127.0.0.4 200"} {
		if !strings.Contains(out, want) {
			t.Errorf("README cluster walk-through's output lacks %q:\n%s", want, out)
		}
	}
	if !regexp.MustCompile(`(?i)x-spliced-nodes-applied: a,b,c`).MatchString(out) {
		t.Errorf("the change on c was not applied by a, b and c:\n%s", out)
	}
	var gens []int64
	for _, p := range admins {
		gens = append(gens, runningGeneration(t, p))
	}
	if gens[0] == 0 || gens[0] != gens[1] || gens[1] != gens[2] {
		t.Errorf("running generations after the walk-through: %v, want the same on a, b, c", gens)
	}
	stopped(ps)

	// Started again on the same directory: the walk-through's first POST
	// answers 409, as the README says.
	must("start (again)", start, "dev")
	ps = started()
	if out, err := run("walk-through (again)", walk, ""); err == nil || !strings.Contains(out, "409") {
		t.Fatalf("the walk-through run a second time: %v, want the README's 409:\n%s", err, out)
	}
	stopped(ps)

	// Started over: it works again, with the installed etcd if there is one.
	must("start over", over, "")
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the start-over block left %s (%v)", dir, err)
	}
	etcd := "installed"
	if installed != nil {
		etcd = "dev"
		t.Log("no /usr/bin/etcd (scripts/test-deps.sh installs etcd-server): the start block's installed-etcd branch is not run")
	}
	must("start (over, "+etcd+" etcd)", start, etcd)
	ps = started()
	if etcd == "installed" { // running, and answering: it took the flags (etcd exits on one it does not know)
		cmdline, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", ps[0]))
		if args := strings.ReplaceAll(string(cmdline), "\x00", " "); !strings.HasPrefix(args, "/usr/bin/etcd ") ||
			!strings.Contains(args, "--auto-compaction-mode periodic --auto-compaction-retention 1h") {
			t.Errorf("the installed etcd runs as %q, want /usr/bin/etcd with the compaction flags", args)
		}
	}
	out = must("walk-through (over)", walk, "")
	if !regexp.MustCompile(`(?i)x-spliced-nodes-applied: a,b,c`).MatchString(out) {
		t.Errorf("after the start over, the change on c was not applied by a, b and c:\n%s", out)
	}
	stopped(ps)
}

// runningGeneration is the running_generation of /api/v1/info on the admin
// port p of 127.0.0.1 (0 when it does not answer).
func runningGeneration(t *testing.T, p int) int64 {
	t.Helper()
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/api/v1/info", p))
	if err != nil {
		return 0
	}
	defer resp.Body.Close()
	var in nodeInfo
	if json.NewDecoder(resp.Body).Decode(&in) != nil {
		return 0
	}
	return in.RunningGeneration
}

// clusterLogs is every log of the README's cluster directory, each headed
// by its name.
func clusterLogs(dir string) string {
	var b strings.Builder
	logs, _ := filepath.Glob(filepath.Join(dir, "*.log"))
	for _, f := range logs {
		data, _ := os.ReadFile(f)
		fmt.Fprintf(&b, "=== %s\n%s\n", filepath.Base(f), data)
	}
	return b.String()
}
