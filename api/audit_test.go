package api

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
)

// The kill test's child: seed, then a write that SIGKILLs the process at
// the fault point named by the parent.
const (
	killDirEnv = "SPLICED_TEST_AUDIT_KILL_DIR"
	killAtEnv  = "SPLICED_TEST_AUDIT_KILL_AT"
)

// A kill between the steps of a write (record made, generation committed
// with its record, entry written) never leaves a persisted generation
// without its entry, nor a gap in the sequence: the restart completes the
// record. On a single node the record is durable with the generation (in
// its journal line): a write killed before its commit leaves none, and no
// entry.
func TestAuditSurvivesAKillBetweenItsSteps(t *testing.T) {
	if dir := os.Getenv(killDirEnv); dir != "" {
		point := os.Getenv(killAtEnv)
		f := newFixtureIn(t, dir)
		f.seed(t) // generations 1 and 2, entries 1 and 2
		testFault = func(p string) {
			if p == point {
				_ = syscall.Kill(os.Getpid(), syscall.SIGKILL)
				select {} // the signal is on its way; never go on
			}
		}
		f.do("PATCH", "/api/v1/backends/web/servers/s1", `{"weight":50}`, hdr{"X-Request-Id": "killed-write"})
		t.Fatalf("fault point %q not reached", point)
	}
	for _, tc := range []struct {
		point     string
		recovered string
		gen       int64 // committed generation after the restart
	}{
		{"persisted", "applied", 3},
		{"pending", "", 2},
	} {
		t.Run(tc.point, func(t *testing.T) {
			dir := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestAuditSurvivesAKillBetweenItsSteps$", "-test.count=1")
			cmd.Env = append(os.Environ(), killDirEnv+"="+dir, killAtEnv+"="+tc.point)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("child not killed at %q: %v\n%s", tc.point, err, out)
			}
			f := newFixtureIn(t, dir) // the restart
			if g := f.store.Current().Generation; g != tc.gen {
				t.Fatalf("committed generation %d after the kill, want %d", g, tc.gen)
			}
			f.must(t, 200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":60}`) // numbering goes on
			got, _ := f.audit(t, "?limit=1000")
			for i, e := range got {
				if want := int64(len(got) - i); e.Seq != want {
					t.Fatalf("seq %d at position %d, want %d (no gap): %+v", e.Seq, i, want, got)
				}
			}
			revs, err := f.store.Revisions()
			if err != nil {
				t.Fatal(err)
			}
			for _, rv := range revs {
				found := false
				for _, e := range got {
					found = found || (e.Generation == rv.Generation && e.Status < 400 && !e.DryRun)
				}
				if !found {
					t.Errorf("generation %d is persisted but has no audit entry: %+v", rv.Generation, got)
				}
			}
			var killed *AuditEntry
			for i := range got {
				if got[i].RequestID == "killed-write" {
					if killed != nil {
						t.Fatalf("two entries for the killed write: %+v", got)
					}
					killed = &got[i]
				}
			}
			if tc.recovered == "" {
				if killed != nil {
					t.Fatalf("a write killed before its commit has an entry: %+v", killed)
				}
				if b, err := os.ReadFile(filepath.Join(dir, pendingFile)); len(b) > 0 {
					t.Fatalf("audit.pending written on a single node: %q (%v)", b, err)
				}
				return
			}
			if killed == nil || killed.Recovered != tc.recovered || killed.Method != "PATCH" || killed.Actor != "local" {
				t.Fatalf("killed write's entry = %+v, want recovered %q", killed, tc.recovered)
			}
			if tc.recovered == "applied" && (killed.Generation != 3 || killed.Plan == nil || len(killed.Plan.Items) != 1 || len(killed.Changes) != 1) {
				t.Fatalf("applied entry lacks its generation or plan: %+v", killed)
			}
			if tc.recovered == "not-applied" && killed.Generation != 0 {
				t.Fatalf("not-applied entry names generation %d", killed.Generation)
			}
			// The record was consumed: a second restart adds nothing.
			f2 := newFixtureIn(t, dir)
			if again, _ := f2.audit(t, "?limit=1000"); len(again) != len(got) {
				t.Fatalf("second restart: %d entries, want %d", len(again), len(got))
			}
		})
	}
}

// A flood of requests refused before authentication leaves the change
// audit alone: counted in /metrics, sampled (bounded) into the server log.
func TestAuditRefusalFloodKeepsTheRealEntries(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	admin := f.secrets[tokens.Admin]
	for i := range 3 {
		if w := f.do(req{method: "PATCH", path: "/api/v1/tuning", body: fmt.Sprintf(`{"maxconn":%d}`, 1000+i), token: admin}); w.Code != 200 {
			t.Fatalf("admin write: %d %s", w.Code, w.Body)
		}
	}
	const flood = 1500
	start := time.Now()
	codes := map[int]int{}
	for i := range flood {
		q := req{method: "DELETE", path: "/api/v1/backends/web", remote: fmt.Sprintf("198.51.100.%d:1", i%200)}
		switch i % 3 {
		case 1:
			q.token = "spliced_wrong"
		case 2:
			q.host = "evil.example"
		}
		codes[f.do(q).Code]++
	}
	elapsed := time.Since(start)
	if codes[401] == 0 || codes[403] == 0 || codes[401]+codes[403]+codes[429] != flood {
		t.Fatalf("flood answers: %v", codes)
	}
	w := f.do(req{method: "GET", path: "/api/v1/audit?limit=1000", token: admin})
	got := decodeJSON[auditPage](t, w)
	if len(got) != 3 {
		t.Fatalf("audit holds %d entries after the flood, want the 3 real ones; newest: %+v", len(got), got[0])
	}
	for _, e := range got {
		if e.Actor != "t-admin" || e.Status != 200 {
			t.Fatalf("audit entry not a real change: %+v", e)
		}
	}
	m := f.do(req{method: "GET", path: "/metrics", token: admin}).Body.String()
	for code, n := range codes {
		want := fmt.Sprintf(`spliced_admin_refused_total{code="%d"} %d`, code, n)
		if !strings.Contains(m, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	logged := strings.Count(f.logs.String(), "refused before authentication")
	if bound := refusedLogPerSec * (int(elapsed/time.Second) + 2); logged == 0 || logged > bound {
		t.Errorf("%d refusals logged in %v, want 1..%d", logged, elapsed, bound)
	}
}

// With keep rotated files the trail holds keep+1 files' worth of entries,
// contiguous, and no more files.
func TestAuditKeepsNRotatedFiles(t *testing.T) {
	dir := t.TempDir()
	l := newAuditLog(dir, slog.New(slog.DiscardHandler))
	l.maxBytes, l.keep = 2000, 3
	var copyTo bytes.Buffer
	l.sys = &copyTo
	for i := range 200 {
		if err := l.write(&AuditEntry{Method: "PUT", Path: fmt.Sprintf("/api/v1/tuning/%d", i), Status: 200}); err != nil {
			t.Fatal(err)
		}
	}
	for n := 1; n <= 3; n++ {
		if _, err := os.Stat(l.path(n)); err != nil {
			t.Fatalf("rotated file %d: %v", n, err)
		}
	}
	if _, err := os.Stat(l.path(4)); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("audit.log.4 exists with keep=3: %v", err)
	}
	got, err := l.read(1000, 0, auditFilter{})
	if err != nil {
		t.Fatal(err)
	}
	// The entries of all 4 files: more than 3 times what one rotated file holds.
	one, _ := os.ReadFile(l.path(1))
	if len(got) <= 3*bytes.Count(one, []byte("\n")) || got[0].Seq != 200 {
		t.Fatalf("read back %d entries, newest %d", len(got), got[0].Seq)
	}
	for i := 1; i < len(got); i++ {
		if got[i].Seq != got[i-1].Seq-1 {
			t.Fatalf("gap across rotation: %d then %d", got[i-1].Seq, got[i].Seq)
		}
	}
	if n := strings.Count(copyTo.String(), `"seq":`); n != 200 {
		t.Fatalf("%d entries copied to the syslog writer, want 200", n)
	}
}

// Credentials in a URL (query parameters access_token and token, any value
// starting with the token prefix, a secret as a path segment) are redacted
// from the audit trail and the server log.
func TestAuditAndLogRedactCredentialsInURLs(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	f.seed(t)
	admin := f.secrets[tokens.Admin]
	other := "spliced_" + strings.Repeat("Zq", 22)
	paths := []string{
		"/api/v1/backends/web/servers/s1?access_token=" + admin + "&dry_run=true",
		"/api/v1/backends/web/servers/s1?dry_run=true&token=plainsecret1",
		"/api/v1/backends/web/servers/s1?dry_run=true&x=" + other,
		"/api/v1/backends/web/servers/s1?dry_run=true;x=SPLICED%5F" + other[8:],
		"/api/v1/backends/" + other,
		"/api/v1/backends/%73pliced_" + other[8:],
		"/api/v1/backends/web/servers/s1?dry_run=true&auth=Bearer+" + other,
	}
	for _, p := range paths {
		method := "PATCH"
		if !strings.Contains(p, "?") {
			method = "DELETE"
		}
		f.do(req{method: method, path: p, body: `{"weight":7}`, token: admin})
	}
	audit, err := os.ReadFile(filepath.Join(f.dir, "audit.log"))
	if err != nil {
		t.Fatal(err)
	}
	for what, text := range map[string]string{"audit": string(audit), "log": f.logs.String()} {
		for _, secret := range []string{admin[8:], "plainsecret1", other[8:]} {
			if strings.Contains(text, secret) {
				t.Errorf("the %s holds a credential from a URL (%s...):\n%s", what, secret[:6], text)
			}
		}
	}
	if n := strings.Count(string(audit), "REDACTED"); n < len(paths) {
		t.Errorf("%d redactions in the audit trail, want %d:\n%s", n, len(paths), audit)
	}
	// What is not a credential stays.
	if !strings.Contains(string(audit), "dry_run=true") || !strings.Contains(string(audit), "/api/v1/backends/web/servers/s1") {
		t.Errorf("redaction took more than the credentials:\n%s", audit)
	}
	for in, want := range map[string]string{
		"/api/v1/backends/spliced_web":                  "/api/v1/backends/spliced_web", // a name, not a secret
		"/x?token=a&b=c&ACCESS_TOKEN=d":                 "/x?token=REDACTED&b=c&ACCESS_TOKEN=REDACTED",
		"/x?a=spliced_1&b=ok":                           "/x?a=REDACTED&b=ok",
		"/x?a=%73pliced_1":                              "/x?a=REDACTED",
		"/x?plain=1":                                    "/x?plain=1",
		"/x?access%5Ftoken=1":                           "/x?access%5Ftoken=REDACTED",
		"/a/" + other + "/b?" + other + "=value":        "/a/REDACTED/b?REDACTED=value",
		"/a/%73pliced_" + other[8:] + "/b":              "/a/REDACTED/b",
		"/a/" + strings.Replace(other, "Zq", "%5Aq", 3): "/a/REDACTED",
		"/x?" + other:                                   "/x?REDACTED",
		"/x?auth=Bearer+" + other + "&b=1":              "/x?auth=REDACTED&b=1",
		"/x?auth=Bearer%20" + other:                     "/x?auth=REDACTED",
	} {
		u, err := url.ParseRequestURI(in)
		if err != nil {
			t.Fatal(err)
		}
		if got := redactURI(u); got != want {
			t.Errorf("redactURI(%s) = %s, want %s", in, got, want)
		}
	}
}

// A symbolic link planted as audit.log or audit.pending is never followed:
// the file it points to stays untouched.
func TestAuditRefusesSymlinks(t *testing.T) {
	for _, name := range []string{auditFile, pendingFile} {
		t.Run(name, func(t *testing.T) {
			dir := t.TempDir()
			victim := filepath.Join(t.TempDir(), "victim")
			if err := os.WriteFile(victim, []byte("precious\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			f := newFixtureIn(t, dir)
			if err := os.Symlink(victim, filepath.Join(dir, name)); err != nil {
				t.Fatal(err)
			}
			w := f.do("PATCH", "/api/v1/tuning", `{"maxconn":1234}`)
			if b, _ := os.ReadFile(victim); string(b) != "precious\n" {
				t.Fatalf("the symlink's target was written through %s:\n%s", name, b)
			}
			if name == pendingFile && w.Code != 200 {
				// On a single node the write's record goes with its
				// revision: audit.pending is not written at all.
				t.Fatalf("write with a symlinked %s answered %d, want 200 (the file is not used)", name, w.Code)
			}
		})
	}
}
