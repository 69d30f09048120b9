package pin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spliced-proxy/spliced/core/config"
)

// MaxCPU is the largest CPU id accepted anywhere in this package. It matches
// the config model's bound (lte=4095) and keeps a hostile list such as
// "0-4294967295" from allocating gigabytes.
const MaxCPU = 4095

// ParseCPUList parses the kernel's cpulist format ("0-3,5,7-8", as found in
// /sys/devices/system/cpu/online and /proc/irq/N/smp_affinity_list) into a
// sorted list of distinct CPU ids.
//
// Surrounding white space (the trailing newline of sysfs files) is ignored and
// an empty string is the empty list (the "offline" file of a machine with no
// offline CPU). Everything else is strict: empty elements ("0,,1", "0,"),
// signs, descending ranges ("3-1"), ids above MaxCPU and the kernel's
// stride syntax ("0-15:2/4", which the kernel never prints) are errors
// wrapping config.ErrInvalid. Overlapping elements ("0-3,2") are accepted and
// merged, as the kernel does.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var out []int
	for elem := range strings.SplitSeq(s, ",") {
		lo, hi, err := parseCPURange(elem)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		for c := lo; c <= hi; c++ {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

func parseCPURange(elem string) (lo, hi int, err error) {
	a, b, isRange := strings.Cut(elem, "-")
	if lo, err = parseCPUID(a); err != nil {
		return 0, 0, err
	}
	if !isRange {
		return lo, lo, nil
	}
	if hi, err = parseCPUID(b); err != nil {
		return 0, 0, err
	}
	if hi < lo {
		return 0, 0, fmt.Errorf("%w: descending range %q", config.ErrInvalid, elem)
	}
	return lo, hi, nil
}

func parseCPUID(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("%w: empty element", config.ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a CPU id", config.ErrInvalid, s)
		}
	}
	if len(s) > 6 { // beyond any valid id even with leading zeros; avoids overflow
		return 0, fmt.Errorf("%w: CPU id %s above %d", config.ErrInvalid, s, MaxCPU)
	}
	n, _ := strconv.Atoi(s) // digits only and short: cannot fail
	if n > MaxCPU {
		return 0, fmt.Errorf("%w: CPU id %d above %d", config.ErrInvalid, n, MaxCPU)
	}
	return n, nil
}

// FormatCPUList is the inverse of ParseCPUList: sorted, duplicates removed,
// runs of two or more consecutive ids written as ranges ("0-1", as the kernel
// prints them). The input is not modified. Negative ids are dropped: they are
// no CPU and have no representation in the format.
func FormatCPUList(cpus []int) string {
	s := slices.Clone(cpus)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
		if s[i] < 0 {
			i++
			continue
		}
		j := i
		for j+1 < len(s) && s[j+1] == s[j]+1 {
			j++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(s[i]))
		if j > i {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(s[j]))
		}
		i = j + 1
	}
	return b.String()
}

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
