package e2e

import (
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// Options say how Start runs a node. The zero value is spliced on a free
// 127.0.0.1 admin port with a new temporary state directory.
type Options struct {
	// Name names the node in messages ("node b"); default "spliced".
	Name string
	// Args are the flags after --admin-addr and --state-dir.
	Args []string
	// StateDir is the --state-dir; "" makes a new temporary one.
	StateDir string
	// AdminAddr is the --admin-addr; "" takes a free 127.0.0.1 port.
	AdminAddr string
	// HealthURL is polled until it answers 200; "" is
	// http://AdminAddr/healthz (give it for a unix socket or TLS).
	HealthURL string
	// Client polls HealthURL; nil is a client with a 5 s timeout.
	Client *http.Client
	// Wrap is a command and its arguments that execs the rest (prlimit
	// --nofile=1024:1024 --), so that the process is still the node's.
	Wrap []string
	// Binary is the program run; "" is the spliced binary (Binary). The
	// package's own tests run a stand-in.
	Binary string
	// Env is added to the test's environment (GODEBUG=…, GORACE=…).
	Env []string
	// ExpectDeath, when not "", says why the node may die before the
	// end of the test (Kill, a crash on purpose); see Node.ExpectDeath.
	ExpectDeath string
	// Grace bounds the stop at the end of the test; zero is StopGrace.
	Grace time.Duration
}

// StopGrace bounds the stop at the end of a test: SIGTERM, then SIGKILL
// after StopGrace, which fails the test (a stop that hangs is a defect).
// spliced lets open connections finish for tuning.grace_ms (10 s by
// default) and a cluster node with etcd down takes a few seconds more to
// leave: 20 s is only reached by a hang. No second SIGTERM (spliced's hard
// stop) to save time: one that comes after spliced has stopped listening
// for signals kills it, and then the race detector cannot end its report.
const StopGrace = 20 * time.Second

// slowStop is a stop at the end of a test long enough to be logged: the
// test left connections open, or spliced is slow to leave.
const slowStop = 2 * time.Second

// Node is one running spliced process.
type Node struct {
	// Admin is the --admin-addr, StateDir the --state-dir.
	Admin, StateDir string
	// Cmd is the running command (Cmd.Process for signals the test
	// sends itself: SIGSTOP, SIGHUP, its own SIGTERM).
	Cmd *exec.Cmd

	t       testing.TB
	name    string
	grace   time.Duration
	out     *testutil.SyncBuffer
	exited  chan struct{}
	exitErr error // set before exited closes

	mu          sync.Mutex
	expectDeath string
	known       []KnownDefect
}

// Start runs a node per o, waits until its health URL answers 200 (20 s;
// the test fails at once if the process exits first) and registers its
// stop and check at the end of the test.
func Start(t testing.TB, o Options) *Node {
	t.Helper()
	if o.Name == "" {
		o.Name = "spliced"
	}
	if o.StateDir == "" {
		o.StateDir = t.TempDir()
	}
	if o.AdminAddr == "" {
		o.AdminAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(testutil.FreePort(t)))
	}
	if o.HealthURL == "" {
		o.HealthURL = "http://" + o.AdminAddr + "/healthz"
	}
	if o.Client == nil {
		o.Client = &http.Client{Timeout: 5 * time.Second}
	}
	if o.Binary == "" {
		o.Binary = Binary(t)
	}
	if o.Grace == 0 {
		o.Grace = StopGrace
	}
	n := &Node{Admin: o.AdminAddr, StateDir: o.StateDir, t: t, name: o.Name, grace: o.Grace,
		out: &testutil.SyncBuffer{}, exited: make(chan struct{}), expectDeath: o.ExpectDeath}
	args := append(slices.Clone(o.Wrap), o.Binary, "--admin-addr", o.AdminAddr, "--state-dir", o.StateDir)
	n.Cmd = exec.Command(args[0], append(args[1:], o.Args...)...)
	n.Cmd.Stdout, n.Cmd.Stderr = n.out, n.out
	if len(o.Env) > 0 {
		n.Cmd.Env = append(os.Environ(), o.Env...)
	}
	if err := n.Cmd.Start(); err != nil {
		t.Fatalf("%s: %v", o.Name, err)
	}
	go func() { n.exitErr = n.Cmd.Wait(); close(n.exited) }()
	t.Cleanup(n.cleanup)
	testutil.Eventually(t, 20*time.Second, func() bool {
		select {
		case <-n.exited:
			n.ExpectDeath("exited at start: reported")
			t.Fatalf("%s exited at start: %v\n%s", o.Name, n.exitErr, Tail(n.out.String(), 16<<10))
		default:
		}
		resp, err := o.Client.Get(o.HealthURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "%s: 200 from %s", o.Name, o.HealthURL)
	return n
}

// ExpectDeath says that the node may die before the end of the test, and
// why (the test kills it to prove a restart, it crashes on purpose): its
// exit is then not a failure. Its output is checked all the same.
func (n *Node) ExpectDeath(why string) {
	n.mu.Lock()
	n.expectDeath = why
	n.mu.Unlock()
}

// KnownDefect excuses the reports that k matches in this node's output
// (they are logged, not failed), for a defect found by the check and not
// fixed yet; k.Name points at where it is tracked.
func (n *Node) KnownDefect(k KnownDefect) {
	n.mu.Lock()
	n.known = append(n.known, k)
	n.mu.Unlock()
}

func (n *Node) deathExpected() string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.expectDeath
}

// Exited is closed once the process has exited (ExitErr then holds how).
func (n *Node) Exited() <-chan struct{} { return n.exited }

// ExitErr is what exec.Cmd.Wait returned: nil for status 0. Valid once
// Exited is closed.
func (n *Node) ExitErr() error { return n.exitErr }

// Pid is the process id of the node.
func (n *Node) Pid() int { return n.Cmd.Process.Pid }

// Output is the node's stdout and stderr, as they come.
func (n *Node) Output() *testutil.SyncBuffer { return n.out }

// Logs returns what the node printed so far.
func (n *Node) Logs() string { return n.out.String() }

// WaitLog waits (5 s) until the node has printed s. A line the process
// wrote before an API answer reaches Logs later, through a pipe and the
// goroutine of exec.Cmd that copies it: read at once after the answer, it
// can be missing.
func (n *Node) WaitLog(t testing.TB, s string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() bool { return strings.Contains(n.out.String(), s) },
		"%s: the log line %q", n.name, s)
}

// Stop sends SIGTERM and waits up to d for the process to exit; it
// returns the exit error (nil for status 0). The test fails (Fatal) if
// the process is still running after d.
func (n *Node) Stop(d time.Duration) error {
	n.t.Helper()
	_ = n.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-n.exited:
		return n.exitErr
	case <-time.After(d):
		n.t.Fatalf("%s did not exit within %v after SIGTERM", n.name, d)
		return nil
	}
}

// Kill stops the process with SIGKILL (a crash) and waits for it. The
// test must have said it expects the death (ExpectDeath): a node killed
// without it fails the test, so that no death goes unexplained.
func (n *Node) Kill() {
	n.t.Helper()
	if n.deathExpected() == "" {
		n.t.Errorf("%s killed without ExpectDeath: say why the test kills it", n.name)
		n.ExpectDeath("killed without ExpectDeath: reported")
	}
	_ = n.Cmd.Process.Kill()
	<-n.exited
}

// cleanup stops the node if it runs (SIGCONT, for a test that stopped it
// with SIGSTOP, then SIGTERM; SIGKILL after the grace, failing the test)
// and then fails the test on a report in its output (Reports) or, when
// there is none to explain it, an exit the test did not expect (a race
// makes the exit status 66, a panic 2).
func (n *Node) cleanup() {
	t := n.t
	t.Helper()
	var unexpected string // how the node ended, when the test did not expect it
	select {
	case <-n.exited:
		if n.exitErr != nil {
			unexpected = fmt.Sprintf("%s died during the test (%v) and the test did not expect it (ExpectDeath)", n.name, n.exitErr)
		}
	default:
		_ = n.Cmd.Process.Signal(syscall.SIGCONT)
		_ = n.Cmd.Process.Signal(syscall.SIGTERM)
		t0 := time.Now()
		select {
		case <-n.exited:
			if d := time.Since(t0); d > slowStop {
				t.Logf("%s took %v to exit after SIGTERM", n.name, d.Round(time.Millisecond))
			}
		case <-time.After(n.grace):
			_ = n.Cmd.Process.Kill()
			<-n.exited
			t.Errorf("%s still ran %v after SIGTERM: killed", n.name, n.grace)
			n.ExpectDeath("killed after the grace: reported")
		}
		if n.exitErr != nil {
			unexpected = fmt.Sprintf("%s exited with %v after SIGTERM, want status 0", n.name, n.exitErr)
		}
	}
	n.mu.Lock()
	known, expected := n.known, n.expectDeath
	n.mu.Unlock()
	out := n.out.String()
	if unexpected != "" && expected == "" && len(Reports(out)) == 0 {
		t.Errorf("%s", unexpected)
	}
	check(t, n.name, out, known)
	if t.Failed() {
		t.Logf("%s output (tail):\n%s", n.name, Tail(out, 32<<10))
	}
}
