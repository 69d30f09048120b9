package pin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"

	"golang.org/x/sys/unix"
)

// CPU is one online CPU and where it sits.
type CPU struct {
	ID      int  `json:"id"`
	Core    int  `json:"core"`    // topology/core_id; -1 when unknown
	Package int  `json:"package"` // topology/physical_package_id; -1 when unknown
	Node    int  `json:"node"`    // NUMA node; -1 when unknown
	L3      int  `json:"l3"`      // index into Topology.L3
	Allowed bool `json:"allowed"` // in the process affinity mask
}

// CacheGroup is a set of online CPUs sharing one last-level cache.
type CacheGroup struct {
	// Level is the cache level the group was read from: 3 normally, lower
	// when the CPU has no L3 (its highest cache is used instead), 0 when no
	// cache information exists (the group is then the CPU alone).
	Level int   `json:"level"`
	CPUs  []int `json:"cpus"`
}

// Node is one NUMA node and its online CPUs (empty for memory-only nodes).
type Node struct {
	ID   int   `json:"id"`
	CPUs []int `json:"cpus"`
}

// Topology is the machine as far as placement is concerned. All CPU lists are
// sorted; CPUs is indexed in the order of Online.
type Topology struct {
	Online  []int        `json:"online"`
	Allowed []int        `json:"allowed"` // process affinity mask ∩ Online
	CPUs    []CPU        `json:"cpus"`
	L3      []CacheGroup `json:"l3"` // each online CPU in exactly one group; sorted by first CPU
	Nodes   []Node       `json:"nodes"`
	// Notes says what could not be read and how the topology was degraded,
	// one sentence each; empty on a complete sysfs.
	Notes []string `json:"notes,omitempty"`
}

// CPU returns the description of an online CPU.
func (t Topology) CPU(id int) (CPU, bool) {
	i, ok := slices.BinarySearch(t.Online, id)
	if !ok || i >= len(t.CPUs) {
		return CPU{}, false
	}
	return t.CPUs[i], true
}

// L3Of returns the CPUs sharing id's last-level cache (nil if id is not online).
func (t Topology) L3Of(id int) []int {
	c, ok := t.CPU(id)
	if !ok {
		return nil
	}
	return t.L3[c.L3].CPUs
}

// Topology reads the machine's CPU layout from sysfs.
//
// Sources, and what happens when they are missing (containers and some VMs
// hide parts of sysfs; nothing here is fatal except having no CPU list at all):
//   - online CPUs: /sys/devices/system/cpu/online; else the cpuN directories;
//     else the affinity mask. Error only when all three fail.
//   - affinity mask: FS.Mask or sched_getaffinity; if that fails, Allowed is
//     Online (noted).
//   - core and package: cpuN/topology/{core_id,physical_package_id}; -1 if absent.
//   - last-level cache: cpuN/cache/index*/ with level 3 (else the highest
//     level present), its shared_cpu_list restricted to online CPUs. With no
//     cache directory the CPU is its own group (Level 0, noted): the policy
//     then finds no neighbour sharing a cache, which is the safe answer.
//   - NUMA: /sys/devices/system/node/nodeN/cpulist; CPU.Node -1 if absent.
func (fs FS) Topology() (Topology, error) {
	var t Topology
	online, err := fs.OnlineCPUs()
	if err != nil {
		dirs := numbered(fs.sys("devices/system/cpu"), "cpu")
		switch {
		case len(dirs) > 0:
			online = dirs
			t.note("%s unreadable (%v): using the cpuN directories", fs.sys("devices/system/cpu/online"), err)
		default:
			m, merr := fs.AffinityMask()
			if merr != nil || len(m) == 0 {
				return Topology{}, fmt.Errorf("topology: no CPU list: %w", errors.Join(err, merr))
			}
			online = m
			t.note("%s unreadable (%v): using the affinity mask as the online CPUs", fs.sys("devices/system/cpu/online"), err)
		}
	}
	if len(online) == 0 {
		return Topology{}, fmt.Errorf("topology: %s lists no CPU", fs.sys("devices/system/cpu/online"))
	}
	t.Online = online

	mask, err := fs.AffinityMask()
	if err != nil {
		t.note("affinity mask unknown (%v): every online CPU counted as allowed", err)
		mask = online
	}
	t.Allowed = intersect(online, mask)

	nodeOf := fs.readNodes(&t)

	// A cache group is its level and its CPU list (formatted: a slice is
	// not comparable); the struct keeps the two apart without a separator.
	type groupKey struct {
		level int
		cpus  string
	}
	groupIdx := map[groupKey]int{}
	var noCache []int
	t.CPUs = make([]CPU, len(online))
	for i, id := range online {
		dir := fs.sys("devices/system/cpu", "cpu"+strconv.Itoa(id))
		c := CPU{ID: id, Core: -1, Package: -1, Node: -1}
		if n, err := readInt(dir + "/topology/core_id"); err == nil {
			c.Core = n
		}
		if n, err := readInt(dir + "/topology/physical_package_id"); err == nil {
			c.Package = n
		}
		if n, ok := nodeOf[id]; ok {
			c.Node = n
		}
		_, c.Allowed = slices.BinarySearch(t.Allowed, id)

		level, shared := fs.lastLevelCache(dir)
		if level == 0 {
			noCache = append(noCache, id)
		}
		shared = intersect(shared, online)
		if _, ok := slices.BinarySearch(shared, id); !ok {
			shared = append(shared, id)
			slices.Sort(shared)
		}
		key := groupKey{level, FormatCPUList(shared)}
		gi, ok := groupIdx[key]
		if !ok {
			gi = len(t.L3)
			groupIdx[key] = gi
			t.L3 = append(t.L3, CacheGroup{Level: level, CPUs: []int{}})
		}
		t.L3[gi].CPUs = append(t.L3[gi].CPUs, id)
		c.L3 = gi
		t.CPUs[i] = c
	}
	if len(noCache) > 0 {
		t.note("no cache information for CPUs %s: each is its own cache group", FormatCPUList(noCache))
	}
	// Groups were created in the order of their first CPU (online is sorted),
	// and each group's CPUs are the CPUs whose own shared list produced the
	// key, so an inconsistent sysfs cannot put a CPU in two groups.
	return t, nil
}

func (t *Topology) note(format string, args ...any) {
	t.Notes = append(t.Notes, fmt.Sprintf(format, args...))
}

// lastLevelCache returns the level and shared CPUs of the CPU's level-3 cache,
// or of its highest data/unified cache when there is no L3; level 0 when the
// cache directory is missing or unreadable.
func (fs FS) lastLevelCache(cpuDir string) (int, []int) {
	bestLevel, best := 0, []int(nil)
	for _, idx := range numbered(cpuDir+"/cache", "index") {
		d := cpuDir + "/cache/index" + strconv.Itoa(idx)
		level, err := readInt(d + "/level")
		if err != nil {
			continue
		}
		if typ, _ := readString(d + "/type"); typ == "Instruction" {
			continue
		}
		shared, err := readCPUList(d + "/shared_cpu_list")
		if err != nil {
			continue
		}
		// Prefer exactly 3 (an L4 such as eDRAM is not what "share an L3"
		// means); otherwise the highest level seen.
		if bestLevel == 3 {
			continue
		}
		if level == 3 || level > bestLevel {
			bestLevel, best = level, shared
		}
	}
	return bestLevel, best
}

// readNodes fills t.Nodes and returns CPU -> node.
func (fs FS) readNodes(t *Topology) map[int]int {
	nodeOf := map[int]int{}
	dir := fs.sys("devices/system/node")
	ids := numbered(dir, "node")
	if len(ids) == 0 {
		if _, err := os.Stat(dir); errors.Is(err, os.ErrNotExist) {
			t.note("%s absent: NUMA nodes unknown", dir)
		}
		t.Nodes = []Node{}
		return nodeOf
	}
	for _, id := range ids {
		cpus, err := readCPUList(dir + "/node" + strconv.Itoa(id) + "/cpulist")
		if err != nil {
			t.note("node%d: %v", id, err)
			continue
		}
		cpus = intersect(cpus, t.Online)
		for _, c := range cpus {
			nodeOf[c] = id
		}
		t.Nodes = append(t.Nodes, Node{ID: id, CPUs: cpus})
	}
	if t.Nodes == nil {
		t.Nodes = []Node{}
	}
	return nodeOf
}

// fromCPUSet lists the CPUs set in s.
func fromCPUSet(s *unix.CPUSet) []int {
	out := []int{}
	for c := 0; c < len(s)*64; c++ {
		if s.IsSet(c) {
			out = append(out, c)
		}
	}
	return out
}

// toCPUSet builds a CPUSet; ids beyond its capacity (1024) are an error.
func toCPUSet(cpus []int) (unix.CPUSet, error) {
	var s unix.CPUSet
	limit := len(s) * 64
	for _, c := range cpus {
		if c < 0 || c >= limit {
			return s, fmt.Errorf("CPU id %d outside 0-%d", c, limit-1)
		}
		s.Set(c)
	}
	return s, nil
}
