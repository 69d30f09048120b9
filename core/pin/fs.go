package pin

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// FS names the procfs and sysfs roots this package reads and writes. The zero
// value is the host ("/proc", "/sys"); tests point both at a tree built in
// t.TempDir(), so nothing here needs root except writing a real
// /proc/irq/N/smp_affinity_list.
//
// An FS is a plain value: copy it freely, use it from any goroutine.
type FS struct {
	Proc string // procfs root; "" means "/proc"
	Sys  string // sysfs root; "" means "/sys"

	// Mask, when non-nil, stands for the process affinity mask in Topology
	// instead of asking the kernel (sched_getaffinity). Tests on fake trees
	// set it; production leaves it nil.
	Mask []int
}

// Host is the running machine's procfs and sysfs.
func Host() FS { return FS{Proc: "/proc", Sys: "/sys"} }

func (fs FS) proc(elem ...string) string {
	root := fs.Proc
	if root == "" {
		root = "/proc"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

func (fs FS) sys(elem ...string) string {
	root := fs.Sys
	if root == "" {
		root = "/sys"
	}
	return filepath.Join(append([]string{root}, elem...)...)
}

// OnlineCPUs reads /sys/devices/system/cpu/online.
func (fs FS) OnlineCPUs() ([]int, error) {
	return readCPUList(fs.sys("devices/system/cpu/online"))
}

// AffinityMask is the CPU set the process may run on: fs.Mask when set, else
// sched_getaffinity of the calling thread. Call it from a thread nobody
// pinned (any goroutine that is not a pinned loop); see doc.go.
func (fs FS) AffinityMask() ([]int, error) {
	if fs.Mask != nil {
		m, err := ParseCPUList(FormatCPUList(fs.Mask)) // validated, sorted copy
		if err != nil {
			return nil, fmt.Errorf("affinity mask: %w", err)
		}
		return m, nil
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, fmt.Errorf("sched_getaffinity: %w", err)
	}
	return fromCPUSet(&set), nil
}

func readCPUList(path string) ([]int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	l, err := ParseCPUList(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return l, nil
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("%s: %w", path, err)
	}
	return n, nil
}

func readString(path string) (string, error) {
	b, err := os.ReadFile(path)
	return strings.TrimSpace(string(b)), err
}

// numbered lists the entries of dir named prefix+N and returns the N, sorted.
func numbered(dir, prefix string) []int {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	var out []int
	for _, e := range ents {
		rest, ok := strings.CutPrefix(e.Name(), prefix)
		if !ok || rest == "" {
			continue
		}
		if n, err := strconv.Atoi(rest); err == nil && n >= 0 && strconv.Itoa(n) == rest {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	return out
}
