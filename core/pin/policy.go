package pin

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/spliced-proxy/spliced/core/config"
)

// SeparatePlan is the outcome of the separate policy.
type SeparatePlan struct {
	Pins map[int][]int `json:"pins"` // IRQ -> the one CPU it is placed on
	// CPUs are the CPUs chosen for NIC IRQs, in the order they are handed
	// out round robin.
	CPUs []int `json:"cpus"`
	// Fallback is true when no CPU free of loops shares an L3 with the
	// loops, so the IRQs were spread over the loop CPUs themselves.
	Fallback bool     `json:"fallback"`
	Warnings []string `json:"warnings,omitempty"`
}

// PlanSeparate is PlanSeparateDetail without the explanation: IRQ -> CPUs.
func PlanSeparate(topo Topology, loopCPUs []int, irqs []IRQ, nics []string) (map[int][]int, error) {
	p, err := PlanSeparateDetail(topo, loopCPUs, irqs, nics)
	return p.Pins, err
}

// PlanSeparateDetail places the IRQs of the named NICs (all NICs that own an
// IRQ when nics is empty) on CPUs that run no loop thread but share a
// last-level cache with the loop CPUs: the packet data the softirq touches
// is then in the cache the loop reads it from, while the two do not compete
// for one CPU. This is the placement seed 003 asks about: IRQs on core 1,
// haproxy on core 0, both under one L3.
//
// Candidates are ordered so that round robin spreads well: CPUs whose core
// runs no loop come before SMT siblings of loop CPUs (a sibling shares L1/L2
// but also the execution units), and the cache groups are interleaved when
// the loops span several (two sockets each running loops get IRQs on both).
// Each NIC's IRQs, in number order, take the next candidate in turn; the
// counter runs on across NICs so the total is balanced too. CPUs outside the
// process affinity mask are valid candidates: an isolated CPU is a good home
// for IRQs.
//
// Fallback, when every CPU of the loops' cache groups runs a loop: the IRQs
// are spread round robin over the loop CPUs themselves and a warning says so.
// The alternatives are worse: a CPU under another L3 (another socket) makes
// every received buffer a cross-cache transfer for the loop that reads it,
// the very cost the policy exists to avoid; leaving the IRQs where they are
// gives an unknown placement (irqbalance, or all on CPU0). On the loop CPUs
// the softirq steals cycles from the loop but leaves the data hot in the
// cache of the CPU that consumes it, and spreading keeps any one loop from
// taking all of it. Freeing one CPU of the group in cpu_map removes the
// fallback.
//
// IRQs known to be kernel-managed (IRQ.Managed true) are skipped with a
// warning: writing them can only fail. Managed state is often unknown
// before a write; when ApplyIRQPins then fails with PinError.Managed, the
// caller may drop that IRQ from the plan and apply again.
//
// Errors (nothing planned): no loop CPU (the policy needs pinned loops:
// cpu_map auto or manual) or a loop CPU that is not online, wrapping
// config.ErrInvalid; a named NIC that owns no IRQ (unknown, or virtual such
// as lo, a bridge or veth), wrapping config.ErrInvalid and naming it.
func PlanSeparateDetail(topo Topology, loopCPUs []int, irqs []IRQ, nics []string) (SeparatePlan, error) {
	plan := SeparatePlan{Pins: map[int][]int{}, CPUs: []int{}}
	loops := slices.Clone(loopCPUs)
	slices.Sort(loops)
	loops = slices.Compact(loops)
	if len(loops) == 0 {
		return plan, fmt.Errorf("irq policy separate: no loop CPU (needs pinned loop threads: cpu_map auto or manual): %w", config.ErrInvalid)
	}
	if off := missing(loops, topo.Online); len(off) > 0 {
		return plan, fmt.Errorf("irq policy separate: loop CPU %s not online: %w", FormatCPUList(off), config.ErrInvalid)
	}

	byNIC := map[string][]int{}     // IRQs to place
	managedOf := map[string][]int{} // IRQs known to be managed
	for _, q := range irqs {
		switch {
		case q.NIC == "":
		case q.Managed != nil && *q.Managed:
			managedOf[q.NIC] = append(managedOf[q.NIC], q.IRQ)
		default:
			byNIC[q.NIC] = append(byNIC[q.NIC], q.IRQ)
		}
	}
	var names []string
	if len(nics) == 0 {
		for n := range byNIC {
			names = append(names, n)
		}
		slices.Sort(names)
	}
	for _, n := range nics { // in the given order, first occurrence
		if !slices.Contains(names, n) {
			names = append(names, n)
		}
	}
	var absent []string
	var managed []int
	for _, n := range names {
		if len(byNIC[n]) == 0 && len(managedOf[n]) == 0 {
			absent = append(absent, n)
		}
		managed = append(managed, managedOf[n]...)
	}
	if len(absent) > 0 {
		return plan, fmt.Errorf("irq policy separate: no IRQ belongs to nic %s (unknown interface, or one without interrupts such as lo, a bridge or veth): %w",
			strings.Join(absent, ", "), config.ErrInvalid)
	}
	if len(managed) > 0 {
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"IRQs %s are kernel-managed (their driver fixes the affinity): left where they are", FormatCPUList(managed)))
	}
	if len(names) == 0 {
		plan.Warnings = append(plan.Warnings, "no network interface owns an IRQ: nothing to place")
		return plan, nil
	}

	plan.CPUs = separateCandidates(topo, loops)
	if len(plan.CPUs) == 0 {
		plan.Fallback = true
		plan.CPUs = interleave(topo, loops)
		plan.Warnings = append(plan.Warnings, fmt.Sprintf(
			"every CPU sharing a cache with the loop threads runs a loop: NIC IRQs spread over the loop CPUs %s themselves (same cache, but softirq work competes with the loops); leave one CPU of that cache out of cpu_map to separate them",
			FormatCPUList(loops)))
	}

	k := 0
	for _, n := range names {
		q := slices.Clone(byNIC[n])
		slices.Sort(q)
		for _, irq := range slices.Compact(q) {
			plan.Pins[irq] = []int{plan.CPUs[k%len(plan.CPUs)]}
			k++
		}
	}
	return plan, nil
}

// separateCandidates: CPUs of the loops' cache groups that run no loop,
// non-siblings first, groups interleaved.
func separateCandidates(topo Topology, loops []int) []int {
	loopCore := map[[2]int]bool{}
	for _, c := range loops {
		if cpu, ok := topo.CPU(c); ok && cpu.Core >= 0 {
			loopCore[[2]int{cpu.Package, cpu.Core}] = true
		}
	}
	var free, siblings []int
	for _, g := range loopGroups(topo, loops) {
		for _, c := range topo.L3[g].CPUs {
			if _, isLoop := slices.BinarySearch(loops, c); isLoop {
				continue
			}
			cpu, _ := topo.CPU(c)
			if cpu.Core >= 0 && loopCore[[2]int{cpu.Package, cpu.Core}] {
				siblings = append(siblings, c)
			} else {
				free = append(free, c)
			}
		}
	}
	slices.Sort(free)
	slices.Sort(siblings)
	return append(interleave(topo, free), interleave(topo, siblings)...)
}

// loopGroups: indexes of the cache groups holding a loop CPU, ascending.
func loopGroups(topo Topology, loops []int) []int {
	var gs []int
	for _, c := range loops {
		if cpu, ok := topo.CPU(c); ok {
			gs = append(gs, cpu.L3)
		}
	}
	slices.Sort(gs)
	return slices.Compact(gs)
}

// interleave orders cpus (sorted) by their rank inside their cache group,
// then by group: group A's first, group B's first, group A's second...
func interleave(topo Topology, cpus []int) []int {
	type ranked struct{ cpu, rank, group int }
	seen := map[int]int{}
	rs := make([]ranked, 0, len(cpus))
	for _, c := range cpus {
		cpu, _ := topo.CPU(c)
		rs = append(rs, ranked{c, seen[cpu.L3], cpu.L3})
		seen[cpu.L3]++
	}
	slices.SortStableFunc(rs, func(a, b ranked) int {
		return cmp.Or(cmp.Compare(a.rank, b.rank), cmp.Compare(a.group, b.group))
	})
	out := make([]int, len(rs))
	for i, r := range rs {
		out[i] = r.cpu
	}
	return out
}

// MergePins combines a policy's placement with the explicit pins of the
// config; an explicit pin wins for its IRQ. Neither input is modified.
func MergePins(policy map[int][]int, explicit []config.IRQPin) map[int][]int {
	out := make(map[int][]int, len(policy)+len(explicit))
	for irq, cpus := range policy {
		out[irq] = slices.Clone(cpus)
	}
	for _, p := range explicit {
		out[p.IRQ] = slices.Clone(p.CPUs)
	}
	return out
}
