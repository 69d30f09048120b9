package main

// End-to-end tests of the fd budget (issue 12): the binary started with a
// low RLIMIT_NOFILE (prlimit) derives a global maxconn that fits, says so
// in its log and in /readyz, and refuses a tuning.maxconn it cannot hold.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// startLimited starts spliced under prlimit --nofile=soft:hard.
func startLimited(t *testing.T, soft, hard int, extra ...string) *instance {
	t.Helper()
	if _, err := exec.LookPath("prlimit"); err != nil {
		t.Skip("prlimit (util-linux) not found")
	}
	admin := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	wrap := []string{"prlimit", fmt.Sprintf("--nofile=%d:%d", soft, hard), "--"}
	in := startWrapped(t, wrap, t.TempDir(), admin, "http://"+admin+"/healthz", http.DefaultClient, extra...)
	in.Admin = admin
	return in
}

// A 1024 fd limit used to make the derived maxconn 1 (1024 - 256 - 2 x 1024
// pipes), silently. Now maxpipes is capped to maxconn/4, maxconn is what
// fits (~300), the soft limit is raised to the hard one first, and the
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
			var info struct{ Maxconn, Nbthread int }
			in.MustDo(200, "GET", "/api/v1/info", nil).JSON(t, &info)
			// No bind yet: the loops and the reserve are the fixed fds.
			empty := &config.Config{}
			empty.Normalize()
			want := config.NewFdBudget(empty, info.Nbthread).Maxconn(1024)
			if info.Maxconn != want || want < 250 {
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
			in.waitLog(t, "the fd limit lowers maxconn")
		})
	}
}

// A flood beyond maxconn must not starve the admin API of fds (issue 12: a
// tuning.maxconn of 30000 was accepted with a 20000 fd limit, the flood
// ran the process out of fds and the admin API stopped answering). Now a
// maxconn the fd limit cannot hold is refused with 422 naming the limit;
// under a flood of twice maxconn the data plane holds its slots, the rest
// waits in the backlog, the process keeps config.FdReserve fds free, the
// admin API answers GET and PATCH within a second, and once the flood ends
// the data plane serves again.
func TestFdLimitFloodKeepsTheAdminAPIAnswering(t *testing.T) {
	const nofile = 1024
	in := startLimited(t, nofile, nofile)
	for _, maxconn := range []int{30000, 400} {
		r := in.MustDo(422, "PATCH", "/api/v1/tuning", map[string]any{"maxconn": maxconn},
			"Content-Type: application/merge-patch+json")
		var p struct { // field: a pointer into the body, the tuning object
			Errors []struct{ Field, Code, Message string }
		}
		r.JSON(t, &p)
		if len(p.Errors) != 1 || p.Errors[0].Field != "/maxconn" || p.Errors[0].Code != "fd_limit" ||
			!strings.Contains(p.Errors[0].Message, "fd limit (RLIMIT_NOFILE) is 1024") {
			t.Fatalf("maxconn %d: %s", maxconn, r.Body)
		}
	}
	o := newTCPOrigin(t, "A")
	port := setupTCP(t, in, o.server("s1"))
	var info struct{ Maxconn int }
	in.MustDo(200, "GET", "/api/v1/info", nil).JSON(t, &info)
	maxconn := info.Maxconn
	if maxconn < 250 || maxconn > 307 {
		t.Fatalf("maxconn %d with %d fds", maxconn, nofile)
	}
	c, _ := greet(t, port)
	c.Close()
	before := o.origin.Accepted()

	flood := make([]net.Conn, 0, 2*maxconn)
	defer func() {
		for _, c := range flood {
			c.Close()
		}
	}()
	for range 2 * maxconn {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
		if err != nil {
			t.Fatalf("flood dial: %v", err)
		}
		flood = append(flood, c)
	}
	testutil.Eventually(t, 20*time.Second, func() bool { return o.origin.Accepted()-before >= int64(maxconn) }, "maxconn tunnels at the origin")
	fds := openFDs(t, in.Pid())
	t.Logf("%d fds open under a flood of %d clients, maxconn %d, fd limit %d", fds, 2*maxconn, maxconn, nofile)
	if fds > nofile-config.FdReserve {
		t.Errorf("%d fds open under the flood: the %d kept for the admin API are taken", fds, config.FdReserve)
	}

	quick := &http.Client{Timeout: time.Second}
	for i := range 5 {
		start := time.Now()
		resp, err := quick.Get("http://" + in.Admin + "/api/v1/info")
		if err != nil {
			t.Fatalf("GET during the flood: %v", err)
		}
		resp.Body.Close()
		req, _ := http.NewRequest("PATCH", "http://"+in.Admin+"/api/v1/tuning",
			strings.NewReader(`{"maxaccept":`+strconv.Itoa(32+i)+`}`))
		req.Header.Set("Content-Type", "application/merge-patch+json")
		presp, err := quick.Do(req)
		if err != nil {
			t.Fatalf("PATCH during the flood: %v", err)
		}
		presp.Body.Close()
		if resp.StatusCode != 200 || presp.StatusCode != 200 {
			t.Fatalf("during the flood: GET %d, PATCH %d", resp.StatusCode, presp.StatusCode)
		}
		if d := time.Since(start); d > time.Second {
			t.Fatalf("GET and PATCH took %v under the flood", d)
		}
	}
	if n := o.origin.Accepted() - before; n > int64(maxconn) {
		t.Fatalf("the origin got %d tunnels with maxconn %d", n, maxconn)
	}

	for _, c := range flood {
		c.Close()
	}
	flood = nil
	// Every waiting client is served and closes at once; then a new one
	// gets through.
	testutil.Eventually(t, 20*time.Second, func() bool {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second)
		if err != nil {
			return false
		}
		defer c.Close()
		c.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		_, err = io.ReadFull(c, make([]byte, 1))
		return err == nil
	}, "the data plane serving after the flood")
}
