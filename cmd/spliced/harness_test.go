package main

// The end-to-end harness, a thin layer over internal/e2e: the binary is
// built once per test run (buildBinary); startSpliced starts it on a free
// admin port with a temporary state directory; at the end of the test it
// is stopped with SIGTERM and the test fails on a data race, a panic or a
// death it did not expect (ExpectDeath) in its output. runSpliced runs a
// subcommand the same way.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
)

func TestMain(m *testing.M) { os.Exit(e2e.Main(m)) }

// raceEnabled says whether the tests run with the race detector (the
// binaries they build then have it too).
const raceEnabled = e2e.Race

// buildBinary is the spliced binary, built once per test run (with -race
// when the tests run with it).
func buildBinary(t testing.TB) string {
	t.Helper()
	return e2e.Binary(t)
}

// runSpliced runs the binary with args until it exits by itself (60 s at
// most) and returns its output and exit error; a race or a panic in the
// output fails the test.
func runSpliced(t testing.TB, args ...string) (string, error) {
	t.Helper()
	return e2e.Run(t, 60*time.Second, args...)
}

// runCmd is runSpliced for a command of the test's own (a script that runs
// the binary, a context, an environment); its Stdout and Stderr are unset.
func runCmd(t testing.TB, cmd *exec.Cmd) (string, error) {
	t.Helper()
	return e2e.RunCmd(t, 60*time.Second, cmd)
}

// instance is one running spliced process (an e2e.Node: Admin, StateDir,
// Stop, Kill, ExpectDeath, Pid, Logs, WaitLog), stopped and checked for
// races and panics at the end of the test.
type instance struct {
	*e2e.Node
	t       testing.TB
	cmd     *exec.Cmd
	exited  chan struct{} // closed once exitErr is set
	exitErr error
}

// startSpliced starts the binary on a free admin port with stateDir (a new
// temporary directory when empty) and waits for /healthz.
func startSpliced(t testing.TB, stateDir string, extra ...string) *instance {
	t.Helper()
	return startNode(t, e2e.Options{StateDir: stateDir, Args: extra})
}

// startAt runs the binary with its own --admin-addr and stateDir and waits
// for /healthz through client at healthURL (startSpliced is startAt on a
// free loopback port; the security tests give unix sockets and TLS).
func startAt(t testing.TB, stateDir, adminAddr, healthURL string, client *http.Client, extra ...string) *instance {
	t.Helper()
	return startWrapped(t, nil, stateDir, adminAddr, healthURL, client, extra...)
}

// startWrapped is startAt with the binary run by wrap (a command and its
// arguments that execs the rest, e.g. prlimit --nofile=1024 --), nil for
// none. The wrapper must exec, so that the process is the wrapper's.
func startWrapped(t testing.TB, wrap []string, stateDir, adminAddr, healthURL string, client *http.Client, extra ...string) *instance {
	t.Helper()
	return startNode(t, e2e.Options{Wrap: wrap, StateDir: stateDir, AdminAddr: adminAddr,
		HealthURL: healthURL, Client: client, Args: extra})
}

// startNode is e2e.Start as an instance.
func startNode(t testing.TB, o e2e.Options) *instance {
	t.Helper()
	n := e2e.Start(t, o)
	in := &instance{Node: n, t: t, cmd: n.Cmd, exited: make(chan struct{})}
	go func() { <-n.Exited(); in.exitErr = n.ExitErr(); close(in.exited) }()
	return in
}

// waitLog waits until the process has printed s (e2e.Node.WaitLog: a
// line written before an API answer may reach Logs after it).
func (in *instance) waitLog(t testing.TB, s string) {
	t.Helper()
	in.WaitLog(t, s)
}

// apiResponse is a decoded admin API answer.
type apiResponse struct {
	Status int
	Header http.Header
	Body   []byte
}

// JSON decodes the body into v or fails the test.
func (r apiResponse) JSON(t testing.TB, v any) {
	t.Helper()
	if err := json.Unmarshal(r.Body, v); err != nil {
		t.Fatalf("decoding %s: %v", r.Body, err)
	}
}

// Do sends a request to the admin API. body may be nil, a string, []byte or
// any value marshalled as JSON. hdr are "Name: value" pairs.
func (in *instance) Do(method, path string, body any, hdr ...string) apiResponse {
	in.t.Helper()
	var rd io.Reader
	switch b := body.(type) {
	case nil:
	case string:
		rd = strings.NewReader(b)
	case []byte:
		rd = bytes.NewReader(b)
	default:
		j, err := json.Marshal(b)
		if err != nil {
			in.t.Fatal(err)
		}
		rd = bytes.NewReader(j)
	}
	r, err := sendRequest(in.Admin, method, path, rd, hdr...)
	if err != nil {
		in.t.Fatalf("%s %s: %v", method, path, err)
	}
	return r
}

// sendRequest is Do without a test: it returns the error (for goroutines).
func sendRequest(admin, method, path string, rd io.Reader, hdr ...string) (apiResponse, error) {
	req, err := http.NewRequest(method, "http://"+admin+path, rd)
	if err != nil {
		return apiResponse{}, err
	}
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, h := range hdr {
		k, v, _ := strings.Cut(h, ":")
		req.Header.Set(strings.TrimSpace(k), strings.TrimSpace(v))
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return apiResponse{}, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		return apiResponse{}, err
	}
	return apiResponse{Status: resp.StatusCode, Header: resp.Header, Body: b}, nil
}

// MustDo is Do that fails the test unless the status is want.
func (in *instance) MustDo(want int, method, path string, body any, hdr ...string) apiResponse {
	in.t.Helper()
	r := in.Do(method, path, body, hdr...)
	if r.Status != want {
		in.t.Fatalf("%s %s: status %d, want %d: %s", method, path, r.Status, want, r.Body)
	}
	return r
}

// openFDs counts the open file descriptors of a process.
func openFDs(t testing.TB, pid int) int {
	t.Helper()
	ents, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	return len(ents)
}

// dataFDs counts the open file descriptors of in's process but its admin
// API's sockets (the listener and its connections: the ones with the
// admin port as local port). The harness's keep-alive connection to the
// API is closed by spliced once idle for --admin-anon-idle-timeout (5 s),
// which a test that compares fd counts across a few loaded seconds saw
// as a fd "released" that was never the data plane's.
func dataFDs(t testing.TB, in *instance) int {
	t.Helper()
	_, port, err := net.SplitHostPort(in.Admin)
	if err != nil {
		t.Fatal(err)
	}
	admin := map[string]bool{} // socket inodes
	for _, f := range []string{"tcp", "tcp6"} {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", in.Pid(), f))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n")[1:] {
			// sl local_address rem_address st tx:rx tr:when retrnsmt uid timeout inode
			fs := strings.Fields(line)
			if len(fs) < 10 {
				continue
			}
			_, hexPort, _ := strings.Cut(fs[1], ":")
			if p, err := strconv.ParseUint(hexPort, 16, 16); err == nil && strconv.FormatUint(p, 10) == port {
				admin["socket:["+fs[9]+"]"] = true
			}
		}
	}
	dir := fmt.Sprintf("/proc/%d/fd", in.Pid())
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range ents {
		if target, err := os.Readlink(dir + "/" + e.Name()); err != nil || !admin[target] {
			n++
		}
	}
	return n
}
