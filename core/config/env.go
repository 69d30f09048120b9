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
	// FdLimit is the RLIMIT_NOFILE the process runs with (its soft limit,
	// raised to the hard one at start). 0 skips the check of
	// tuning.maxconn against it (limits.go), as for a persisted config.
	FdLimit int64
	// NodeName is this node's name (--node-name): the section of
	// Config.Nodes by that name is the one whose CPUs are checked against
	// CPUs (other nodes' machines are unknown here), and the document's
	// nbthread, cpu_map and irq are checked against this machine only
	// where that section does not replace them. "" : no section is local.
	NodeName string
	// NodeAddress is this node's --node-address, what "${NODE_ADDRESS}"
	// becomes on it (ForNode does the replacement; Validate does not use
	// it).
	NodeAddress string
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

// ParseCPUList parses the kernel's cpulist format ("0-3,5,7-8", as found in
// /sys/devices/system/cpu/online and /proc/irq/N/smp_affinity_list) into
// ascending, de-duplicated CPU ids. It serves config (HostEnv) and core/pin.
//
// Surrounding white space (the trailing newline of sysfs files) is ignored and
// an empty string is the empty list (the "offline" file of a machine with no
// offline CPU). Everything else is strict: empty elements ("0,,1", "0,"),
// blanks inside the list, signs, descending ranges ("3-1"), ids above
// MaxCPUID and the kernel's stride syntax ("0-15:2/4", which the kernel never
// prints) are errors wrapping ErrInvalid. Overlapping elements ("0-3,2") are
// accepted and merged, as the kernel does; leading zeros ("007") too.
func ParseCPUList(s string) ([]int, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return []int{}, nil
	}
	var set [(MaxCPUID + 1) / 64]uint64
	for elem := range strings.SplitSeq(s, ",") {
		lo, hi, isRange := strings.Cut(elem, "-")
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
				return nil, fmt.Errorf("cpu list %q: %w: descending range %q", s, ErrInvalid, elem)
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
		return 0, fmt.Errorf("%w: empty element", ErrInvalid)
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, fmt.Errorf("%w: %q is not a CPU id", ErrInvalid, s)
		}
	}
	n, err := strconv.Atoi(s) // digits only: fails only on overflow
	if err != nil || n > MaxCPUID {
		return 0, fmt.Errorf("%w: CPU id %s above %d", ErrInvalid, s, MaxCPUID)
	}
	return n, nil
}

// FormatCPUList is the inverse of ParseCPUList: sorted, duplicates removed,
// runs of two or more consecutive ids written as ranges ("0-1", as the kernel
// prints them). The input is not modified. Negative ids are dropped: they are
// no CPU and have no representation in the format.
func FormatCPUList(ids []int) string {
	s := slices.Clone(ids)
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
