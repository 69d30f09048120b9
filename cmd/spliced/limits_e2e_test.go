package main

// End-to-end tests of the fd budget (issue 12): the binary started with a
// low RLIMIT_NOFILE (prlimit) derives a global maxconn that fits, says so
// in its log and in /readyz, and refuses a tuning.maxconn it cannot hold.

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// startLimited starts spliced under prlimit --nofile=soft:hard.
func startLimited(t *testing.T, soft, hard int, extra ...string) *instance {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not found")
	}
	admin := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	wrap := []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", soft, hard), "--"}
	in := startWrapped(t, wrap, t.TempDir(), admin, "http://"+admin+"/healthz", http.DefaultClient, extra...)
	in.Admin = admin
	return in
}

// A 1024 fd limit used to make the derived maxconn 1 (1024 - 256 - 2 x 1024
// pipes), silently. Now maxpipes is capped to maxconn/4, maxconn is what
// fits (307), the soft limit is raised to the hard one first, and the
// warning is in the log and in /readyz (which stays 200: the data plane
// serves, with fewer connections).
func TestLowFdLimitDerivesAFittingMaxconnAndWarns(t *testing.T) {
	boot := filepath.Join(t.TempDir(), "boot.json")
	if err := os.WriteFile(boot, []byte(`{"tuning":{"maxconn":30000}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name       string
		soft, hard int
		extra      []string
	}{
		{"soft equals hard", 1024, 1024, nil},
		{"soft raised to hard", 256, 1024, nil},
		// A persisted config is not refused at start (the API could not
		// fix it then): its maxconn is clamped, with the same warning.
		{"persisted maxconn above the limit", 1024, 1024, []string{"--config", boot}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			in := startLimited(t, tc.soft, tc.hard, tc.extra...)
			want := config.MaxconnFor(1024, config.DefaultMaxpipes)
			var info struct{ Maxconn int }
			in.MustDo(200, "GET", "/api/v1/info", nil).JSON(t, &info)
			if info.Maxconn != want || want < 300 {
				t.Fatalf("maxconn %d with a 1024 fd limit, want %d", info.Maxconn, want)
			}
			var h struct {
				Status   string
				Warnings []string
			}
			in.MustDo(200, "GET", "/readyz", nil).JSON(t, &h)
			if h.Status != "ready" || len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "fd limit (RLIMIT_NOFILE) is 1024") {
				t.Fatalf("readyz %+v", h)
			}
			if !strings.Contains(in.Logs(), "the fd limit lowers maxconn") {
				t.Fatalf("no warning in the log:\n%s", in.Logs())
			}
		})
	}
}
