package pin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestSetIRQAffinityWritesTheList(t *testing.T) {
	tr := igbTree(t)
	if err := tr.fs.SetIRQAffinity(50, []int{3, 2}); err != nil {
		t.Fatal(err)
	}
	if got := tr.read("proc/irq/50/smp_affinity_list"); got != "2-3\n" {
		t.Errorf("smp_affinity_list = %q, want %q", got, "2-3\n")
	}
	got, err := tr.fs.IRQAffinity(50)
	if err != nil || FormatCPUList(got) != "2-3" {
		t.Errorf("IRQAffinity(50) = %v, %v", got, err)
	}
}

func TestSetIRQAffinityRefusals(t *testing.T) {
	tests := []struct {
		name     string
		irq      int
		cpus     []int
		errno    syscall.Errno
		sentinel error
		hint     string
	}{
		{"offline CPU", 50, []int{1, 7}, syscall.EINVAL, config.ErrConflict, "online CPUs are 0-3"},
		{"no such IRQ", 49, []int{1}, syscall.ENOENT, config.ErrNotFound, "no such IRQ"},
		{"empty list", 50, nil, 0, config.ErrInvalid, ""},
		{"id beyond MaxCPU", 50, []int{5000}, 0, config.ErrInvalid, ""},
		{"negative IRQ", -1, []int{1}, 0, config.ErrInvalid, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := igbTree(t)
			err := tr.fs.SetIRQAffinity(tt.irq, tt.cpus)
			var pe *PinError
			if !errors.As(err, &pe) {
				t.Fatalf("error %v (%T) is not a *PinError", err, err)
			}
			if pe.Errno != tt.errno || (tt.errno != 0 && !errors.Is(err, tt.errno)) {
				t.Errorf("errno %v (Is: %v), want %v", pe.Errno, errors.Is(err, tt.errno), tt.errno)
			}
			if !errors.Is(err, tt.sentinel) {
				t.Errorf("%v does not wrap %v", err, tt.sentinel)
			}
			if !strings.Contains(pe.Hint, tt.hint) {
				t.Errorf("hint %q, want it to contain %q", pe.Hint, tt.hint)
			}
			if got := tr.read("proc/irq/50/smp_affinity_list"); got != "1\n" {
				t.Errorf("IRQ 50 changed to %q by a refused write", got)
			}
		})
	}
}

// The kernel's answers (EACCES as non-root, EIO for a managed IRQ, ...)
// cannot be produced by a fake tree; classify is what turns them into
// PinErrors, so it is pinned here with the errors os.File.Write returns.
func TestOSRefusalsMapToPinErrors(t *testing.T) {
	tests := []struct {
		errno    syscall.Errno
		what     string
		hint     string
		sentinel error
		managed  bool
	}{
		{syscall.EACCES, "irq 50", "needs root", config.ErrConflict, false},
		{syscall.EPERM, "irq 50", "needs root", config.ErrConflict, false},
		{syscall.EIO, "irq 50", "kernel-managed IRQ: affinity is fixed by the driver", config.ErrConflict, false},
		{syscall.ERANGE, "irq 50", "nr_cpu_ids", config.ErrConflict, false},
		{syscall.EINVAL, "irq 50", "no CPU of the list is online", config.ErrConflict, false},
		{syscall.ENOENT, "irq 50", "no such IRQ", config.ErrNotFound, false},
		{syscall.EROFS, "irq 50", "read-only", config.ErrConflict, false},
		{syscall.ENOSPC, "irq 50", "no free interrupt vector", config.ErrConflict, false},
		{syscall.EINVAL, "thread 42", "cpuset", config.ErrConflict, false},
		{syscall.EPERM, "thread 42", "CAP_SYS_NICE", config.ErrConflict, false},
		{syscall.ESRCH, "thread 42", "no such thread", config.ErrNotFound, false},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s %v", tt.what, tt.errno), func(t *testing.T) {
			osErr := &os.PathError{Op: "write", Path: "/proc/irq/50/smp_affinity_list", Err: tt.errno}
			err := error(classify(tt.what, "set affinity 2", osErr))
			var pe *PinError
			if !errors.As(err, &pe) || pe.Errno != tt.errno {
				t.Fatalf("classify = %#v", err)
			}
			if !errors.Is(err, tt.errno) || !errors.Is(err, tt.sentinel) {
				t.Errorf("%v: Is(errno)=%v Is(sentinel)=%v", err, errors.Is(err, tt.errno), errors.Is(err, tt.sentinel))
			}
			if !strings.Contains(pe.Hint, tt.hint) || !strings.Contains(err.Error(), pe.Hint) {
				t.Errorf("hint %q / message %q, want %q", pe.Hint, err, tt.hint)
			}
			if !strings.HasPrefix(err.Error(), tt.what+": set affinity 2: write /proc/irq/50") {
				t.Errorf("message %q does not say what and how", err)
			}
			if pe.Managed() != tt.managed { // only SetIRQAffinity knows the stage
				t.Errorf("Managed() = %v", pe.Managed())
			}
			// Wrapped by the engine as an ApplyError, it still answers 409/404.
			ae := &config.ApplyError{Field: "/irq/pins/0", Object: "irq 50", Err: err}
			if !errors.Is(ae, tt.errno) {
				t.Errorf("ApplyError loses the errno")
			}
		})
	}
}

func TestApplyIRQPins(t *testing.T) {
	tests := []struct {
		name    string
		pins    map[int][]int
		breakIt func(tr *tree)
		want    map[int]string // smp_affinity_list contents afterwards
		errno   syscall.Errno
		errText string
		fail    bool
	}{
		{
			name: "all written",
			pins: map[int][]int{50: {2}, 51: {3}, 52: {2, 3}},
			want: map[int]string{50: "2\n", 51: "3\n", 52: "2-3\n", 53: "1\n"},
		},
		{
			name: "offline CPU in the third pin: the first two are rolled back",
			pins: map[int][]int{50: {2}, 51: {3}, 52: {9}},
			want: map[int]string{50: "1\n", 51: "1\n", 52: "1\n"}, errno: syscall.EINVAL, fail: true,
		},
		{
			name:    "unknown IRQ in the middle: earlier ones rolled back, later untouched",
			pins:    map[int][]int{50: {2}, 51: {3}, 53: {2}, 54: {3}},
			breakIt: func(tr *tree) { os.RemoveAll(filepath.Join(tr.fs.Proc, "irq/53")) },
			want:    map[int]string{50: "1\n", 51: "1\n", 54: "1\n"}, errno: syscall.ENOENT, errText: "irq 53", fail: true,
		},
		{
			name: "unwritable entry: rolled back",
			pins: map[int][]int{50: {2}, 51: {3}},
			breakIt: func(tr *tree) { // a directory where the file should be: EISDIR
				p := filepath.Join(tr.fs.Proc, "irq/51/smp_affinity_list")
				os.Remove(p)
				os.Mkdir(p, 0o755)
			},
			want: map[int]string{50: "1\n"}, errno: syscall.EISDIR, fail: true,
		},
		{
			name: "rollback that fails is reported with the cause",
			pins: map[int][]int{50: {2}, 51: {9}},
			breakIt: func(tr *tree) { // IRQ 50 sits on a CPU that is gone: cannot be restored
				tr.write("proc/irq/50/smp_affinity_list", "6\n")
			},
			want:  map[int]string{50: "2\n", 51: "1\n"},
			errno: syscall.EINVAL, errText: "rollback failed: irq 50: set affinity 6", fail: true,
		},
		{
			name: "already in place: not written (a managed IRQ where it should be does not fail)",
			pins: map[int][]int{50: {1}},
			breakIt: func(tr *tree) { // "1" without newline: any write would leave "1\n"
				tr.write("proc/irq/50/smp_affinity_list", "1")
			},
			want: map[int]string{50: "1"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := igbTree(t)
			if tt.breakIt != nil {
				tt.breakIt(tr)
			}
			err := tr.fs.ApplyIRQPins(tt.pins)
			if (err != nil) != tt.fail {
				t.Fatalf("ApplyIRQPins = %v, want error: %v", err, tt.fail)
			}
			if err != nil {
				var pe *PinError
				if !errors.As(err, &pe) {
					t.Errorf("%v is not a *PinError", err)
				}
				if tt.errno != 0 && !errors.Is(err, tt.errno) {
					t.Errorf("%v does not wrap %v", err, tt.errno)
				}
				if !strings.Contains(err.Error(), tt.errText) {
					t.Errorf("%q does not contain %q", err, tt.errText)
				}
			}
			for irq, w := range tt.want {
				if got := tr.read(fmt.Sprintf("proc/irq/%d/smp_affinity_list", irq)); got != w {
					t.Errorf("irq %d: %q, want %q", irq, got, w)
				}
			}
		})
	}
}
