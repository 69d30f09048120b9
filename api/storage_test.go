package api

import (
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// mountSmallTmpfs mounts a 1 MiB tmpfs on a new directory (root only: the
// only way to make writes fail for root, which ignores permission bits).
func mountSmallTmpfs(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a tmpfs (CI runs as root)")
	}
	dir := t.TempDir()
	if err := unix.Mount("tmpfs", dir, "tmpfs", 0, "size=1m,mode=0700"); err != nil {
		t.Skipf("cannot mount a tmpfs here: %v", err)
	}
	t.Cleanup(func() {
		if err := unix.Unmount(dir, unix.MNT_DETACH); err != nil {
			t.Errorf("unmount %s: %v", dir, err)
		}
	})
	return dir
}

// fill writes to path until the file system is full.
func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for i := 0; i < 64; i++ {
		if _, err := f.Write(buf); err != nil {
			if errors.Is(err, syscall.ENOSPC) {
				return
			}
			t.Fatal(err)
		}
	}
	t.Fatal("the 1 MiB tmpfs never filled")
}

// waitReady polls /readyz until it answers 200.
func (f *fixture) waitReady(t *testing.T) {
	t.Helper()
	var code int
	var body string
	testutil.Eventually(t, 10*time.Second, func() bool {
		w := f.do("GET", "/readyz", "")
		code, body = w.Code, w.Body.String()
		return code == http.StatusOK
	}, func() string { return fmt.Sprintf("/readyz to answer 200, still %d: %s", code, body) })
}

// TestFullOrReadOnlyStateDirIs507Or503AndNotReady: a write the state
// directory refuses answers 507 (full) or 503 (read-only) with the OS error,
// changes nothing, and /readyz says not ready with the reason until writes
// are possible again.
func TestFullOrReadOnlyStateDirIs507Or503AndNotReady(t *testing.T) {
	t.Parallel()
	dir := mountSmallTmpfs(t)
	f := newFixtureIn(t, dir)
	f.seed(t)
	before := f.snapshot(t)
	revs := f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String()
	running := f.core.Runtime().Generation
	unchanged := func(what string) {
		t.Helper()
		if f.snapshot(t) != before || f.must(t, 200, "GET", "/api/v1/config/revisions", "").Body.String() != revs ||
			f.core.Runtime().Generation != running {
			t.Fatalf("%s: a refused write changed the config, its revisions or the running generation", what)
		}
	}

	filler := filepath.Join(dir, "filler")
	fill(t, filler)
	w := f.must(t, http.StatusInsufficientStorage, "POST", "/api/v1/backends", `{"name":"api","servers":[]}`)
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:storage-full" || !strings.Contains(p.Detail, "no space left on device") {
		t.Fatalf("full: problem %+v", p)
	}
	unchanged("full")
	w = f.must(t, http.StatusServiceUnavailable, "GET", "/readyz", "")
	if p := problemOf(t, w); !strings.Contains(p.Detail, "no space left on device") || strings.Contains(p.Detail, dir) {
		t.Fatalf("readyz on a full state directory (public: the OS error, not the state directory's path): %+v", p)
	}
	// Space again: ready within the probe's period, and writes work.
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	f.waitReady(t)

	if err := unix.Mount("", dir, "", unix.MS_REMOUNT|unix.MS_RDONLY, ""); err != nil {
		t.Fatalf("remount read-only: %v", err)
	}
	w = f.must(t, http.StatusServiceUnavailable, "PATCH", "/api/v1/tuning", `{"runqueue_depth":150}`)
	if p := problemOf(t, w); p.Type != "urn:spliced:problem:storage-unavailable" || !strings.Contains(p.Detail, "read-only file system") {
		t.Fatalf("read-only: problem %+v", p)
	}
	unchanged("read-only")
	w = f.must(t, http.StatusServiceUnavailable, "GET", "/readyz", "")
	if p := problemOf(t, w); !strings.Contains(p.Detail, "read-only file system") || strings.Contains(p.Detail, dir) {
		t.Fatalf("readyz on a read-only state directory (public: the OS error, not the state directory's path): %+v", p)
	}
	if err := unix.Mount("", dir, "", unix.MS_REMOUNT, "size=1m,mode=0700"); err != nil {
		t.Fatalf("remount read-write: %v", err)
	}
	f.waitReady(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends", `{"name":"api","servers":[]}`)
	f.must(t, http.StatusOK, "GET", "/readyz", "")
}

// A revision file damaged on disk is the server's fault, not the client's:
// it was answered 400 malformed-body (a request without a body), or 422.
// Now 500, for the read and for a restore, which changes nothing.
func TestDamagedRevisionFileIsNotBlamedOnTheRequest(t *testing.T) {
	f := newFixture(t)
	f.seed(t) // generations 1 and 2
	before := f.snapshot(t)
	for name, garbage := range map[string]string{
		"not json":   "garbage\n",
		"wrong type": `{"generation":"one"}`,
	} {
		p := filepath.Join(f.store.Dir(), "revisions", "00000000000000000001.json")
		if err := os.WriteFile(p, []byte(garbage), 0o600); err != nil {
			t.Fatal(err)
		}
		for _, rq := range [][2]string{{"GET", "/api/v1/config/revisions/1"}, {"POST", "/api/v1/config/revisions/1/restore"}} {
			w := f.do(rq[0], rq[1], "")
			if w.Code != http.StatusInternalServerError {
				t.Errorf("%s: %s %s answered %d, want 500: %s", name, rq[0], rq[1], w.Code, w.Body.String())
			}
		}
	}
	if f.snapshot(t) != before {
		t.Fatal("a restore of a damaged revision changed the config")
	}
}
