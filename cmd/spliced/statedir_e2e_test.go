package main

// One owner per state directory and per admin socket (issue 13,
// "Integrity"): a second spliced on either is refused and changes nothing.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// runToExit runs the binary with args and expects it to exit by itself
// within 20 s; it returns the combined output and the exit error.
func runToExit(t *testing.T, args ...string) (string, error) {
	t.Helper()
	out, err := e2e.Run(t, 20*time.Second, args...)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("spliced %v kept running:\n%s", args, out)
	}
	return out, err
}

// stateSnapshot is config.json and every revision file, by name.
func stateSnapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	snap := map[string]string{}
	b, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil {
		t.Fatal(err)
	}
	snap["config.json"] = string(b)
	ents, err := os.ReadDir(filepath.Join(dir, "revisions"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(dir, "revisions", e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		snap["revisions/"+e.Name()] = string(b)
	}
	return snap
}

func TestSecondProcessOnTheSameStateDirIsRefused(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[]}`)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web2","servers":[]}`)
	before := stateSnapshot(t, in.StateDir)

	out, err := runToExit(t, "--admin-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--state-dir", in.StateDir)
	if err == nil {
		t.Fatalf("a second spliced on the same state directory exited 0:\n%s", out)
	}
	if !strings.Contains(out, "pid "+strconv.Itoa(in.Pid())) || !strings.Contains(out, "spliced.lock") {
		t.Errorf("the refusal should name the lock file and the owner's pid %d:\n%s", in.Pid(), out)
	}
	after := stateSnapshot(t, in.StateDir)
	if len(after) != len(before) {
		t.Errorf("state files changed: %d before, %d after", len(before), len(after))
	}
	for name, b := range before {
		if after[name] != b {
			t.Errorf("%s changed under the running spliced", name)
		}
	}
	in.MustDo(200, "GET", "/readyz", nil)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web3","servers":[]}`)

	// The token commands run beside the daemon (they do not need its lock),
	// and the daemon sees their change on the next request.
	tok := newToken(t, in.StateDir, "admin", "ops")
	in.MustDo(401, "GET", "/api/v1/info", nil)
	in.MustDo(200, "GET", "/api/v1/info", nil, "Authorization: Bearer "+tok)
	if list, errs, err := tokenCLI(t, in.StateDir, "list"); err != nil || !strings.Contains(list, "ops") {
		t.Fatalf("token list beside the daemon: %v %s\n%s", err, errs, list)
	}
	if _, errs, err := tokenCLI(t, in.StateDir, "revoke", "ops"); err != nil {
		t.Fatalf("token revoke beside the daemon: %v %s", err, errs)
	}

	// Once the owner is gone the directory is free again.
	if err := in.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	startSpliced(t, in.StateDir).MustDo(200, "GET", "/readyz", nil)
}

func TestSecondInstanceOnTheSameSocketLeavesItAlone(t *testing.T) {
	dir := t.TempDir()
	sock := filepath.Join(t.TempDir(), "admin.sock")
	client := &http.Client{Transport: &http.Transport{
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			var d net.Dialer
			return d.DialContext(ctx, "unix", sock)
		}}}
	first := startAt(t, dir, "unix:"+sock, "http://spliced/healthz", client)
	stateDirOverSocket := func() string {
		t.Helper()
		resp, err := client.Get("http://spliced/api/v1/info")
		if err != nil {
			t.Fatalf("the first spliced no longer answers on %s: %v", sock, err)
		}
		defer resp.Body.Close()
		var info struct {
			StateDir string `json:"state_dir"`
		}
		if err := json.NewDecoder(resp.Body).Decode(&info); err != nil {
			t.Fatal(err)
		}
		return info.StateDir
	}
	if got := stateDirOverSocket(); got != dir {
		t.Fatalf("state_dir over the socket %q, want %q", got, dir)
	}

	out, err := runToExit(t, "--admin-addr", "unix:"+sock, "--state-dir", t.TempDir())
	if err == nil {
		t.Fatalf("a second spliced on a served socket exited 0:\n%s", out)
	}
	if !strings.Contains(out, "served by another process") {
		t.Errorf("the refusal should say the socket is served:\n%s", out)
	}
	if got := stateDirOverSocket(); got != dir {
		t.Fatalf("after the second start, the socket is answered for %q, want the first spliced (%q)", got, dir)
	}

	// A socket left by a killed spliced (nobody accepts on it) is stale:
	// the next start replaces it.
	first.ExpectDeath("killed to leave a stale socket behind")
	first.Kill()
	if _, err := os.Lstat(sock); err != nil {
		t.Fatalf("the killed spliced should leave its socket behind: %v", err)
	}
	startAt(t, dir, "unix:"+sock, "http://spliced/healthz", client)
}
