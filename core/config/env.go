package config

import (
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
)

// Env describes the machine for the semantic checks that depend on it.
type Env struct {
	// CPUs are the online CPU ids, ascending. nil or empty skips every CPU
	// check (the store validates a persisted config with an empty Env so that
	// a state directory moved to another machine still loads; the pin code
	// reports CPUs that do not exist when it applies the map).
	CPUs []int
}

// cpuOnlinePath is where Linux lists the online CPUs in cpulist format.
const cpuOnlinePath = "/sys/devices/system/cpu/online"

// MaxCPUID bounds CPU ids accepted by ParseCPUList (Linux NR_CPUS is at most
// 8192); it keeps a hostile "0-4000000000" from allocating gigabytes.
const MaxCPUID = 8191

// HostEnv describes this machine: the online CPUs from
// /sys/devices/system/cpu/online. If the file cannot be read or parsed it
// returns an empty Env, which skips the CPU checks rather than refusing every
// config.
func HostEnv() Env {
	return envFromFile(cpuOnlinePath)
}

func envFromFile(path string) Env {
	b, err := os.ReadFile(path)
	if err != nil {
		return Env{}
	}
	cpus, err := ParseCPUList(string(b))
	if err != nil {
		return Env{}
	}
	return Env{CPUs: cpus}
}

// ParseCPUList parses the kernel's cpulist format ("0-3,5", "0,2-3\n") into
// ascending, de-duplicated CPU ids. Surrounding white space is ignored; an
// empty list gives an empty result. Ranges must be ascending; ids are
// 0..MaxCPUID.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var set [(MaxCPUID + 1) / 64]uint64
	for part := range strings.SplitSeq(s, ",") {
		part = strings.TrimSpace(part)
		lo, hi, isRange := strings.Cut(part, "-")
		a, err := parseCPUID(lo)
		if err != nil {
			return nil, fmt.Errorf("cpu list %q: %w", s, err)
		}
		b := a
		if isRange {
			if b, err = parseCPUID(hi); err != nil {
				return nil, fmt.Errorf("cpu list %q: %w", s, err)
			}
			if b < a {
				return nil, fmt.Errorf("cpu list %q: range %d-%d is descending", s, a, b)
			}
		}
		for id := a; id <= b; id++ {
			set[id/64] |= 1 << (id % 64)
		}
	}
	out := []int{}
	for id := 0; id <= MaxCPUID; id++ {
		if set[id/64]&(1<<(id%64)) != 0 {
			out = append(out, id)
		}
	}
	return out, nil
}

func parseCPUID(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("empty cpu id")
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("cpu id %q is not a decimal number", s)
		}
	}
	n, err := strconv.Atoi(s)
	if err != nil || n > MaxCPUID {
		return 0, fmt.Errorf("cpu id %q out of range 0-%d", s, MaxCPUID)
	}
	return n, nil
}

// FormatCPUList is the inverse of ParseCPUList: ascending ids in cpulist
// format with ranges ("0-3,5").
func FormatCPUList(ids []int) string {
	s := slices.Clone(ids)
	slices.Sort(s)
	s = slices.Compact(s)
	var b strings.Builder
	for i := 0; i < len(s); {
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
