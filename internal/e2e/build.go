package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

// Package is the import path of the binary Binary builds.
const Package = "github.com/spliced-proxy/spliced/cmd/spliced"

var build struct {
	once sync.Once
	dir  string // removed by Main
	path string
	err  error
}

// BinaryEnv names the environment variable that gives Binary a spliced
// binary already built from this checkout, with -race when the tests run
// with it (scripts/test.sh builds it once for both end-to-end packages,
// beside the compilation of their tests). Unset, Binary builds its own.
const BinaryEnv = "SPLICED_E2E_BINARY"

// Binary returns the path of the spliced binary, built on the first call
// of the test process (with -race when the tests run with it, so the data
// plane is checked under load too) unless BinaryEnv names one; a failed
// build fails every caller.
func Binary(t testing.TB) string {
	t.Helper()
	build.once.Do(func() {
		if p := os.Getenv(BinaryEnv); p != "" {
			if _, err := os.Stat(p); err != nil {
				build.err = fmt.Errorf("%s: %v", BinaryEnv, err)
			}
			build.path = p
			return
		}
		build.dir, build.err = os.MkdirTemp("", "spliced-e2e-bin-")
		if build.err != nil {
			return
		}
		build.path = filepath.Join(build.dir, "spliced")
		args := []string{"build", "-o", build.path}
		if Race {
			args = append(args, "-race")
		}
		out, err := exec.Command("go", append(args, Package)...).CombinedOutput()
		if err != nil {
			build.err = fmt.Errorf("go build %s: %v\n%s", Package, err, out)
		}
	})
	if build.err != nil {
		t.Fatal(build.err)
	}
	return build.path
}

// Main runs the tests and removes the binary Binary built; a package's
// TestMain is os.Exit(e2e.Main(m)).
func Main(m *testing.M) int {
	code := m.Run()
	if build.dir != "" {
		os.RemoveAll(build.dir)
	}
	return code
}
