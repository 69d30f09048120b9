package pin

import (
	"fmt"
	"slices"
	"strings"

	"github.com/spliced-proxy/spliced/core/config"
)

// MaxCPU is the largest CPU id accepted anywhere in this package. It matches
// the config model's bound (lte=4095), below config.MaxCPUID.
const MaxCPU = 4095

// ParseCPUList is config.ParseCPUList (the kernel's cpulist format, strict,
// errors wrapping config.ErrInvalid) with ids bounded by MaxCPU.
func ParseCPUList(s string) ([]int, error) {
	l, err := config.ParseCPUList(s)
	if err != nil {
		return nil, err
	}
	if n := len(l); n > 0 && l[n-1] > MaxCPU {
		return nil, fmt.Errorf("cpu list %q: %w: CPU id %d above %d", strings.TrimSpace(s), config.ErrInvalid, l[n-1], MaxCPU)
	}
	return l, nil
}

// FormatCPUList is config.FormatCPUList: the inverse of ParseCPUList.
func FormatCPUList(cpus []int) string { return config.FormatCPUList(cpus) }

// checkCPUs validates ids given by a caller (not parsed from the kernel).
func checkCPUs(cpus []int) error {
	if len(cpus) == 0 {
		return fmt.Errorf("%w: empty CPU list", config.ErrInvalid)
	}
	for _, c := range cpus {
		if c < 0 || c > MaxCPU {
			return fmt.Errorf("%w: CPU id %d outside 0-%d", config.ErrInvalid, c, MaxCPU)
		}
	}
	return nil
}

// intersect returns the ids of a that are also in b, sorted (a and b sorted).
func intersect(a, b []int) []int {
	out := []int{}
	for _, c := range a {
		if _, ok := slices.BinarySearch(b, c); ok {
			out = append(out, c)
		}
	}
	return out
}

// missing returns the ids of want that are not in have (have sorted).
func missing(want, have []int) []int {
	var out []int
	for _, c := range want {
		if _, ok := slices.BinarySearch(have, c); !ok {
			out = append(out, c)
		}
	}
	return out
}
