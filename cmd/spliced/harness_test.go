package main

// The end-to-end harness: every test in this package that needs the real
// binary builds it once (buildBinary) and starts it with startSpliced, which
// gives a free admin port and a temporary state directory, and stops it at
// the end of the test.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
	buildDir  string
)

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// buildBinary compiles cmd/spliced once per test run (with -race when the
// tests run with it, so the data plane is checked under load too).
func buildBinary(t testing.TB) string {
	t.Helper()
	buildOnce.Do(func() {
		buildDir, buildErr = os.MkdirTemp("", "spliced-e2e-bin-")
		if buildErr != nil {
			return
		}
		binPath = filepath.Join(buildDir, "spliced")
		args := []string{"build", "-o", binPath}
		if raceEnabled {
			args = append(args, "-race")
		}
		args = append(args, ".")
		cmd := exec.Command("go", args...)
		out, err := cmd.CombinedOutput()
		if err != nil {
			buildErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

// instance is one running spliced process.
type instance struct {
	t        testing.TB
	cmd      *exec.Cmd
	Admin    string // host:port
	StateDir string
	logs     *testutil.SyncBuffer
	exited   chan struct{}
	exitErr  error
}

// startSpliced starts the binary on a free admin port with stateDir (a new
// temporary directory when empty) and waits for /healthz.
func startSpliced(t testing.TB, stateDir string, extra ...string) *instance {
	t.Helper()
	if stateDir == "" {
		stateDir = t.TempDir()
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	in := startAt(t, stateDir, admin, "http://"+admin+"/healthz", http.DefaultClient, extra...)
	in.Admin = admin
	return in
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
	in := &instance{t: t, StateDir: stateDir, logs: &testutil.SyncBuffer{}, exited: make(chan struct{})}
	args := append([]string{buildBinary(t), "--admin-addr", adminAddr, "--state-dir", stateDir}, extra...)
	args = append(slices.Clone(wrap), args...)
	in.cmd = exec.Command(args[0], args[1:]...)
	in.cmd.Stdout, in.cmd.Stderr = in.logs, in.logs
	if err := in.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { in.exitErr = in.cmd.Wait(); close(in.exited) }()
	t.Cleanup(func() {
		in.Kill()
		if t.Failed() {
			t.Logf("spliced logs:\n%s", in.logs.String())
		}
	})
	testutil.Eventually(t, 20*time.Second, func() bool {
		select {
		case <-in.exited:
			t.Fatalf("spliced exited at start: %v\n%s", in.exitErr, in.logs.String())
		default:
		}
		resp, err := client.Get(healthURL)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == 200
	}, "/healthz at "+healthURL)
	return in
}

// Kill stops the process with SIGKILL (a crash) and waits for it.
func (in *instance) Kill() {
	if in.cmd.Process != nil {
		_ = in.cmd.Process.Kill()
	}
	<-in.exited
}

// Stop sends SIGTERM and waits up to d for the process to exit; it returns
// the exit error (nil for status 0).
func (in *instance) Stop(d time.Duration) error {
	in.t.Helper()
	_ = in.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-in.exited:
		return in.exitErr
	case <-time.After(d):
		in.t.Fatalf("spliced did not exit within %v after SIGTERM", d)
		return nil
	}
}

// Pid is the process id of the running binary.
func (in *instance) Pid() int { return in.cmd.Process.Pid }

// Logs returns what the process printed so far.
func (in *instance) Logs() string { return in.logs.String() }

// waitLog waits until the process has printed s. A line the process wrote
// before an API answer reaches Logs later, through a pipe and the
// goroutine of exec.Cmd that copies it: read at once after the answer, it
// can be missing.
func (in *instance) waitLog(t testing.TB, s string) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() bool { return strings.Contains(in.logs.String(), s) }, "the log line %q", s)
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
