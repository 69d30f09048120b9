package main

// End-to-end tests of what the admin plane exposes (issue 13): an
// --admin-host with no token, the security headers of the pages and the
// API, and who sees the state directory.

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/e2e"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// --admin-host means clients come through another name, usually a proxy
// in front whose clients all share the loopback address: without a token
// the API would be open to each of them.
func TestAdminHostNeedsAToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	addr := fmt.Sprintf("127.0.0.1:%d", testutil.FreePort(t))
	// A refusal exits at once; one that starts serves until killed.
	out, err := e2e.Run(t, 10*time.Second, "--admin-addr", addr, "--state-dir", dir,
		"--admin-host", "admin.example.com")
	if err == nil || errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("spliced started with --admin-host and no token (%v):\n%s", err, out)
	}
	if !strings.Contains(string(out), "--admin-host") || !strings.Contains(string(out), "spliced token add") {
		t.Fatalf("the refusal does not name --admin-host and how to create a token:\n%s", out)
	}
	tok := newToken(t, dir, "admin", "root")
	in := startAt(t, dir, addr, "http://"+addr+"/healthz", http.DefaultClient, "--admin-host", "admin.example.com")
	in.Admin = addr
	body := `{"name":"b1"}`
	if st, b := doHost(t, in, "POST", "/api/v1/backends", "admin.example.com", body); st != 401 {
		t.Fatalf("write through the proxy name without a token: %d, want 401: %s", st, b)
	}
	if st, b := doHost(t, in, "POST", "/api/v1/backends", "admin.example.com", body, bearerHdr(tok)); st != 201 {
		t.Fatalf("write through the proxy name with a token: %d, want 201: %s", st, b)
	}
	// Revoking the last token closes the API, even on loopback: the proxy's
	// clients share it.
	if _, errs, err := tokenCLI(t, dir, "revoke", "root"); err != nil {
		t.Fatal(err, errs)
	}
	st, b := doHost(t, in, "POST", "/api/v1/backends", "admin.example.com", `{"name":"b2"}`)
	if st != 401 {
		t.Fatalf("write through the proxy name after the last token was revoked: %d, want 401: %s", st, b)
	}
	if strings.Contains(string(b), dir) {
		t.Fatalf("the 401 to an anonymous client shows the state directory: %s", b)
	}
}

// Where the config, the tokens and the audit log live is shown to admins
// only: not to viewers or operators, not in a 401.
func TestStateDirShownToAdminsOnly(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	toks := map[string]string{}
	for _, role := range []string{"admin", "operator", "viewer"} {
		toks[role] = newToken(t, dir, role, "t-"+role)
	}
	in := startSpliced(t, dir)
	for role, tok := range toks {
		var info struct {
			StateDir *string `json:"state_dir"`
		}
		r := in.MustDo(200, "GET", "/api/v1/info", nil, bearerHdr(tok))
		r.JSON(t, &info)
		switch {
		case role == "admin" && (info.StateDir == nil || *info.StateDir != dir):
			t.Errorf("admin: state_dir = %v, want %q", info.StateDir, dir)
		case role != "admin" && (info.StateDir != nil || strings.Contains(string(r.Body), dir)):
			t.Errorf("%s sees the state directory: %s", role, r.Body)
		}
	}
	for _, hdr := range [][]string{nil, {bearerHdr("spliced_wrong")}} {
		if r := in.MustDo(401, "GET", "/api/v1/info", nil, hdr...); strings.Contains(string(r.Body), dir) {
			t.Errorf("401 shows the state directory: %s", r.Body)
		}
	}
}
