package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// readmeCommands returns the shell commands of the README's walk-through
// block, continuation lines joined, comments dropped.
func readmeCommands(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	_, after, ok := strings.Cut(string(b), "## Walk-through")
	if !ok {
		t.Fatal("README has no Walk-through section")
	}
	_, block, ok := strings.Cut(after, "```sh\n")
	if !ok {
		t.Fatal("Walk-through has no sh block")
	}
	block, _, _ = strings.Cut(block, "```")
	return shellCommands(block)
}

// shellCommands returns the commands of a shell block: continuation lines
// joined, blank lines and comments dropped.
func shellCommands(block string) []string {
	var cmds []string
	var cur strings.Builder
	for _, line := range strings.Split(block, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		if s, cont := strings.CutSuffix(line, "\\"); cont {
			cur.WriteString(s)
			continue
		}
		cur.WriteString(line)
		cmds = append(cmds, cur.String())
		cur.Reset()
	}
	return cmds
}

// TestReadmeWalkthrough runs every curl line of the README, in order, against
// a fresh instance, then checks the end state and that it survives a crash.
func TestReadmeWalkthrough(t *testing.T) {
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	in := startSpliced(t, "")
	cmds := readmeCommands(t)
	if len(cmds) < 8 {
		t.Fatalf("walk-through has %d commands, expected the full story", len(cmds))
	}
	bindPort := fmt.Sprint(testutil.FreePort(t))
	for _, c := range cmds {
		if !strings.HasPrefix(c, "curl ") {
			t.Fatalf("README walk-through line is not a curl command: %q", c)
		}
		c = strings.ReplaceAll(c, "127.0.0.1:9900", in.Admin)
		c = strings.ReplaceAll(c, `"port":8080`, `"port":`+bindPort)
		out, err := exec.Command("sh", "-c", c).CombinedOutput()
		if err != nil {
			t.Fatalf("%s\nfailed: %v\n%s", c, err, out)
		}
		if len(out) > 0 && !json.Valid(bytes.TrimSpace(out)) {
			t.Fatalf("%s\nanswer is not JSON: %s", c, out)
		}
	}

	var cfg struct {
		Generation int64 `json:"generation"`
		Backends   []struct {
			Name    string `json:"name"`
			Servers []struct {
				Name       string `json:"name"`
				AdminState string `json:"admin_state"`
			} `json:"servers"`
		} `json:"backends"`
		Frontends []struct {
			Name    string `json:"name"`
			Maxconn int    `json:"maxconn"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/config", nil).JSON(t, &cfg)
	if cfg.Generation != 4 {
		t.Errorf("generation after the walk-through = %d, want 4 (backend, frontend, drain, restore; the dry run makes none)", cfg.Generation)
	}
	if len(cfg.Backends) != 1 || len(cfg.Backends[0].Servers) != 2 || cfg.Backends[0].Servers[0].AdminState != "ready" {
		t.Errorf("after restoring revision 2, s1 should be ready again: %+v", cfg.Backends)
	}
	if len(cfg.Frontends) != 1 || cfg.Frontends[0].Maxconn == 20000 {
		t.Errorf("the dry run must not have changed maxconn: %+v", cfg.Frontends)
	}

	before := in.MustDo(200, "GET", "/api/v1/config", nil).Body
	in.ExpectDeath("killed to prove the state survives a crash")
	in.Kill()
	again := startSpliced(t, in.StateDir)
	after := again.MustDo(200, "GET", "/api/v1/config", nil).Body
	if !bytes.Equal(before, after) {
		t.Errorf("config changed across a crash and restart:\nbefore %s\nafter  %s", before, after)
	}
}

// TestRestartResumesStateWithoutFlags checks that a SIGTERM'd instance comes
// back with the same document and revision history from its state directory.
func TestRestartResumesStateWithoutFlags(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"api","servers":[{"name":"a1","address":"127.0.0.1","port":9001,"weight":7}]}`)
	in.MustDo(201, "POST", "/api/v1/backends/api/servers", `{"name":"a2","address":"localhost","port":9002}`)
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"runqueue_depth":150}`)
	cfg := in.MustDo(200, "GET", "/api/v1/config", nil).Body
	revs := in.MustDo(200, "GET", "/api/v1/config/revisions", nil).Body
	if err := in.Stop(15 * time.Second); err != nil {
		t.Fatalf("exit after SIGTERM: %v\n%s", err, in.Logs())
	}
	again := startSpliced(t, in.StateDir)
	if got := again.MustDo(200, "GET", "/api/v1/config", nil).Body; !bytes.Equal(got, cfg) {
		t.Errorf("config after restart differs:\nbefore %s\nafter  %s", cfg, got)
	}
	if got := again.MustDo(200, "GET", "/api/v1/config/revisions", nil).Body; !bytes.Equal(got, revs) {
		t.Errorf("revisions after restart differ:\nbefore %s\nafter  %s", revs, got)
	}
	again.MustDo(200, "GET", "/readyz", nil)
}

// TestCorruptStateRefusesStart checks that a truncated config.json stops the
// start with a message naming the file and the last good revision, and that
// the file is left as it was (never silently reset).
func TestCorruptStateRefusesStart(t *testing.T) {
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[]}`)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web2","servers":[]}`)
	in.ExpectDeath("killed to corrupt its state directory afterwards")
	in.Kill()

	path := filepath.Join(in.StateDir, "config.json")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	truncated := b[:len(b)/2]
	if err := os.WriteFile(path, truncated, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := runSpliced(t, "--admin-addr", fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t)), "--state-dir", in.StateDir)
	if errors.Is(err, context.DeadlineExceeded) {
		t.Fatal("spliced kept running on a corrupt config.json")
	}
	if err == nil {
		t.Fatalf("spliced started on a corrupt config.json:\n%s", out)
	}
	msg := string(out)
	if !strings.Contains(msg, path) {
		t.Errorf("message does not name %s:\n%s", path, msg)
	}
	if !regexp.MustCompile(`(?i)last good revision`).MatchString(msg) || !strings.Contains(msg, "2") {
		t.Errorf("message does not name the last good revision (2):\n%s", msg)
	}
	if now, _ := os.ReadFile(path); !bytes.Equal(now, truncated) {
		t.Error("the corrupt config.json was modified")
	}
}

// TestBootstrapConfigOnlyWhenStateEmpty checks --config: used on an empty
// state directory, ignored once the state directory holds a config.
func TestBootstrapConfigOnlyWhenStateEmpty(t *testing.T) {
	dir := t.TempDir()
	boot := filepath.Join(dir, "boot.json")
	doc := `{"backends":[{"name":"boot","servers":[{"name":"s1","address":"127.0.0.1","port":9000}]}]}`
	if err := os.WriteFile(boot, []byte(doc), 0o600); err != nil {
		t.Fatal(err)
	}
	state := filepath.Join(dir, "state")
	in := startSpliced(t, state, "--config", boot)
	in.MustDo(200, "GET", "/api/v1/backends/boot", nil)
	in.MustDo(204, "DELETE", "/api/v1/backends/boot", nil)
	in.ExpectDeath("killed to restart on the same state directory")
	in.Kill()

	again := startSpliced(t, state, "--config", boot)
	again.MustDo(404, "GET", "/api/v1/backends/boot", nil)
}

// TestAdminRefusesNonLoopbackWithoutTokens checks the start-time refusal.
func TestAdminRefusesNonLoopbackWithoutTokens(t *testing.T) {
	out, err := runSpliced(t, "--admin-addr", "0.0.0.0:1", "--state-dir", t.TempDir())
	if err == nil {
		t.Fatalf("started on a non-loopback admin address without tokens:\n%s", out)
	}
	if !strings.Contains(string(out), "loopback") {
		t.Errorf("message does not explain the refusal:\n%s", out)
	}
}

// TestValidateCommand checks `spliced validate FILE`.
func TestValidateCommand(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	good := filepath.Join(dir, "good.json")
	bad := filepath.Join(dir, "bad.json")
	os.WriteFile(good, []byte(`{"backends":[{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":80}]}]}`), 0o600)
	os.WriteFile(bad, []byte(`{"backends":[{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":0}]}]}`), 0o600)
	if out, err := runSpliced(t, "validate", good); err != nil {
		t.Errorf("valid document refused: %v\n%s", err, out)
	}
	out, err := runSpliced(t, "validate", bad)
	if err == nil {
		t.Errorf("invalid document accepted:\n%s", out)
	}
	if !strings.Contains(string(out), "/backends/0/servers/0/port") {
		t.Errorf("message does not point at the bad field:\n%s", out)
	}
}

// readmeShellBlocks returns every ```sh block of the README except the one
// with the make commands and the cluster's (a block whose first line starts
// with "# cluster:" needs etcd and three nodes: TestClusterReadme runs it;
// one with "# acme:" needs pebble: TestACMEReadme runs it), in document
// order.
func readmeShellBlocks(t *testing.T) []string {
	t.Helper()
	var blocks []string
	for _, block := range readmeAllShellBlocks(t) {
		if strings.Contains(block, "make run") || strings.Contains(block, "make test") || strings.HasPrefix(block, "# cluster:") || strings.HasPrefix(block, "# acme:") {
			continue
		}
		blocks = append(blocks, block)
	}
	return blocks
}

// readmeAllShellBlocks returns the text of every ```sh block of the README,
// in document order.
func readmeAllShellBlocks(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	var blocks []string
	rest := string(b)
	for {
		_, after, ok := strings.Cut(rest, "```sh\n")
		if !ok {
			return blocks
		}
		block, tail, ok := strings.Cut(after, "```")
		if !ok {
			t.Fatal("README: unterminated sh block")
		}
		rest = tail
		blocks = append(blocks, block)
	}
}

// TestReadmeEveryShellBlock runs every sh block of the README (curl lines,
// token commands) in order against one fresh instance: what the README
// shows a user works as written. Addresses, ports, the state directory and
// the spliced command are pointed at the test's instance.
func TestReadmeEveryShellBlock(t *testing.T) {
	t.Parallel()
	if _, err := exec.LookPath("curl"); err != nil {
		t.Fatal("curl is needed (make test installs it)")
	}
	in := startSpliced(t, "")
	bin := buildBinary(t)
	// The README's example ports: 8080, 8090, 8443, 8453 and 8480 are binds (replaced
	// by free ports); 8081, 8082, 8091, 8444 and 8445 are origins that
	// need not exist.
	bindPort, httpPort := fmt.Sprint(testutil.FreePort(t)), fmt.Sprint(testutil.FreePort(t))
	sniPort := fmt.Sprint(testutil.FreePort(t))  // the SNI router's bind (8443; 8444 and 8445 need not exist)
	tlsPort := fmt.Sprint(testutil.FreePort(t))  // the https frontend's bind (8453)
	ppPort := fmt.Sprint(testutil.FreePort(t))   // the bind with accept_proxy (8480)
	grpcPort := fmt.Sprint(testutil.FreePort(t)) // the gRPC frontend's bind (8490)
	demoPort := fmt.Sprint(testutil.FreePort(t)) // grpc-demo's server (50051)
	command := regexp.MustCompile(`(^|\$\(|\s)spliced `)
	blocks := readmeShellBlocks(t)
	if len(blocks) < 5 {
		t.Fatalf("README has %d runnable sh blocks, expected the walk-through and the examples of each section", len(blocks))
	}
	curls := 0
	for _, block := range blocks {
		curls += strings.Count(block, "curl ")
		script := strings.NewReplacer(
			"127.0.0.1:9900", in.Admin,
			"localhost:9900", in.Admin,
			`"port":8080`, `"port":`+bindPort,
			`"port":8090`, `"port":`+httpPort,
			"127.0.0.1:8090", "127.0.0.1:"+httpPort,
			`"port":8443`, `"port":`+sniPort,
			":8443", ":"+sniPort,
			`"port":8453`, `"port":`+tlsPort,
			":8453", ":"+tlsPort,
			`"port":8480`, `"port":`+ppPort,
			`"port":8490`, `"port":`+grpcPort,
			"127.0.0.1:8490", "127.0.0.1:"+grpcPort,
			`"port":50051`, `"port":`+demoPort,
			"127.0.0.1:50051", "127.0.0.1:"+demoPort,
			"/tmp/grpc-demo", filepath.Join(t.TempDir(), "grpc-demo"),
			"/var/lib/spliced", in.StateDir,
		).Replace(block)
		script = command.ReplaceAllString(script, "${1}"+bin+" ")
		out, err := runCmd(t, exec.Command("bash", "-euo", "pipefail", "-c", script))
		if err != nil {
			t.Fatalf("README block failed: %v\n--- block\n%s\n--- output\n%s", err, block, out)
		}
	}
	t.Logf("ran %d README blocks with %d curl commands", len(blocks), curls)
}
