package pin

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// queues makes n IRQs owned by nic, numbered from first.
func queues(nic string, first, n int) []IRQ {
	var out []IRQ
	for i := 0; i < n; i++ {
		out = append(out, IRQ{IRQ: first + i, Name: fmt.Sprintf("%s-TxRx-%d", nic, i), NIC: nic})
	}
	return out
}

// twoSockets: 2 packages × 8 CPUs, one L3 per package, no SMT.
func twoSockets() []cpuSpec {
	var c []cpuSpec
	for i := 0; i < 16; i++ {
		l3 := "0-7"
		if i >= 8 {
			l3 = "8-15"
		}
		c = append(c, cpuSpec{id: i, core: i % 8, pkg: i / 8, l3: l3})
	}
	return c
}

// smt4: 2 cores × 2 threads, siblings (0,2) and (1,3), one L3.
func smt4() []cpuSpec {
	return []cpuSpec{
		{id: 0, core: 0, l3: "0-3", l2: "0,2"}, {id: 1, core: 1, l3: "0-3", l2: "1,3"},
		{id: 2, core: 0, l3: "0-3", l2: "0,2"}, {id: 3, core: 1, l3: "0-3", l2: "1,3"},
	}
}

func TestPlanSeparatePlacesNICQueuesBesideTheLoops(t *testing.T) {
	others := []IRQ{{IRQ: 0, Name: "timer"}, {IRQ: 28, Name: "virtio1-req.0"}}
	tests := []struct {
		name     string
		online   string
		cpus     []cpuSpec
		loops    []int
		irqs     []IRQ
		nics     []string
		want     map[int][]int
		order    []int // plan.CPUs
		fallback bool
		warn     bool // a warning without fallback
	}{
		{
			name: "seed 003: 4 CPUs one L3, loops on 0-1: queues on 2 and 3", online: "0-3", cpus: uniform(4),
			loops: []int{0, 1}, irqs: append(queues("eth1", 50, 4), others...), nics: []string{"eth1"},
			want:  map[int][]int{50: {2}, 51: {3}, 52: {2}, 53: {3}},
			order: []int{2, 3},
		},
		{
			name: "seed 003 as configured: loop on 0, two NICs share 1-3, counter runs on", online: "0-3", cpus: uniform(4),
			loops: []int{0}, irqs: append(queues("eth1", 50, 2), queues("eth3", 55, 2)...), nics: []string{"eth1", "eth3"},
			want:  map[int][]int{50: {1}, 51: {2}, 55: {3}, 56: {1}},
			order: []int{1, 2, 3},
		},
		{
			name: "two sockets × 8, loops on half of socket 0: IRQs stay on socket 0", online: "0-15", cpus: twoSockets(),
			loops: []int{0, 1, 2, 3}, irqs: queues("eth0", 100, 6), nics: []string{"eth0"},
			want:  map[int][]int{100: {4}, 101: {5}, 102: {6}, 103: {7}, 104: {4}, 105: {5}},
			order: []int{4, 5, 6, 7},
		},
		{
			name: "two sockets × 8, loops on all of socket 0: fallback on the loop CPUs, never socket 1", online: "0-15", cpus: twoSockets(),
			loops: []int{0, 1, 2, 3, 4, 5, 6, 7}, irqs: queues("eth0", 100, 4), nics: []string{"eth0"},
			want:  map[int][]int{100: {0}, 101: {1}, 102: {2}, 103: {3}},
			order: []int{0, 1, 2, 3, 4, 5, 6, 7}, fallback: true,
		},
		{
			name: "two sockets × 8, loops on both: free CPUs of both caches, interleaved", online: "0-15", cpus: twoSockets(),
			loops: []int{0, 1, 8, 9}, irqs: queues("eth0", 100, 4), nics: []string{"eth0"},
			want:  map[int][]int{100: {2}, 101: {10}, 102: {3}, 103: {11}},
			order: []int{2, 10, 3, 11, 4, 12, 5, 13, 6, 14, 7, 15},
		},
		{
			name: "all CPUs run loops: fallback spreads over them", online: "0-3", cpus: uniform(4),
			loops: []int{0, 1, 2, 3}, irqs: queues("eth0", 30, 6), nics: []string{"eth0"},
			want:  map[int][]int{30: {0}, 31: {1}, 32: {2}, 33: {3}, 34: {0}, 35: {1}},
			order: []int{0, 1, 2, 3}, fallback: true,
		},
		{
			name: "SMT: a free core before the loop's sibling", online: "0-3", cpus: smt4(),
			loops: []int{0}, irqs: queues("eth0", 30, 3), nics: []string{"eth0"},
			want:  map[int][]int{30: {1}, 31: {3}, 32: {2}},
			order: []int{1, 3, 2},
		},
		{
			name: "no cache information: every CPU its own group, so fallback", online: "0-3",
			cpus:  []cpuSpec{{id: 0}, {id: 1, core: 1}, {id: 2, core: 2}, {id: 3, core: 3}},
			loops: []int{0, 1}, irqs: queues("eth0", 30, 2), nics: []string{"eth0"},
			want:  map[int][]int{30: {0}, 31: {1}},
			order: []int{0, 1}, fallback: true,
		},
		{
			name: "no NIC named: every NIC owning an IRQ, in name order", online: "0-3", cpus: uniform(4),
			loops: []int{0, 1}, irqs: append(append(queues("eth1", 60, 1), queues("eth0", 50, 2)...), others...),
			want:  map[int][]int{50: {2}, 51: {3}, 60: {2}},
			order: []int{2, 3},
		},
		{
			name: "loop CPUs given unsorted with duplicates", online: "0-3", cpus: uniform(4),
			loops: []int{1, 0, 1}, irqs: append(queues("eth0", 30, 2), queues("eth1", 40, 1)...), nics: []string{"eth0", "eth1", "eth0"},
			want:  map[int][]int{30: {2}, 31: {3}, 40: {2}},
			order: []int{2, 3},
		},
		{
			name: "known kernel-managed queues are left alone with a warning", online: "0-3", cpus: uniform(4),
			loops: []int{0, 1}, nics: []string{"eth0", "eth1"},
			irqs: []IRQ{
				{IRQ: 30, NIC: "eth0", Managed: new(true)}, {IRQ: 31, NIC: "eth0", Managed: new(false)}, {IRQ: 32, NIC: "eth0"},
				{IRQ: 40, NIC: "eth1", Managed: new(true)}, // only managed IRQs: the NIC exists, nothing to do
				{IRQ: 50, NIC: "eth2", Managed: new(true)}, // not named: not warned about
			},
			want:  map[int][]int{31: {2}, 32: {3}},
			order: []int{2, 3}, warn: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t)
			tr.machine(tt.online, tt.cpus, nil)
			topo, err := tr.fs.Topology()
			if err != nil {
				t.Fatal(err)
			}
			loops := slices.Clone(tt.loops)
			plan, err := PlanSeparateDetail(topo, tt.loops, tt.irqs, tt.nics)
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(loops, tt.loops) {
				t.Errorf("loop CPUs modified: %v", tt.loops)
			}
			if !reflect.DeepEqual(plan.Pins, tt.want) {
				t.Errorf("pins %v, want %v", plan.Pins, tt.want)
			}
			if !slices.Equal(plan.CPUs, tt.order) {
				t.Errorf("CPUs %v, want %v", plan.CPUs, tt.order)
			}
			if plan.Fallback != tt.fallback || (len(plan.Warnings) > 0) != (tt.fallback || tt.warn) {
				t.Errorf("fallback %v warnings %q, want fallback %v", plan.Fallback, plan.Warnings, tt.fallback)
			}
			if !tt.fallback {
				for irq, cpus := range plan.Pins {
					for _, c := range cpus {
						if slices.Contains(tt.loops, c) {
							t.Errorf("irq %d placed on loop CPU %d", irq, c)
						}
					}
				}
			}
			short, err := PlanSeparate(topo, tt.loops, tt.irqs, tt.nics)
			if err != nil || !reflect.DeepEqual(short, plan.Pins) {
				t.Errorf("PlanSeparate = %v, %v; want the detailed plan's pins", short, err)
			}
		})
	}
}

func TestPlanSeparateRefusals(t *testing.T) {
	tr := newTree(t)
	tr.machine("0-3", uniform(4), nil)
	topo, err := tr.fs.Topology()
	if err != nil {
		t.Fatal(err)
	}
	irqs := append(queues("eth0", 30, 2), IRQ{IRQ: 0, Name: "timer"})
	tests := []struct {
		name  string
		loops []int
		nics  []string
		text  string
	}{
		{"NIC names not present", []int{0}, []string{"eth0", "eth9", "bond0"}, "nic eth9, bond0"},
		{"no loop CPU (loops not pinned)", nil, []string{"eth0"}, "no loop CPU"},
		{"loop CPU offline", []int{0, 6}, []string{"eth0"}, "loop CPU 6 not online"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			plan, err := PlanSeparateDetail(topo, tt.loops, irqs, tt.nics)
			if !errors.Is(err, config.ErrInvalid) || !strings.Contains(err.Error(), tt.text) {
				t.Fatalf("err %v, want ErrInvalid mentioning %q", err, tt.text)
			}
			if len(plan.Pins) != 0 {
				t.Errorf("pins %v planned despite the error", plan.Pins)
			}
		})
	}
}

func TestPlanSeparateWithoutAnyNICIsEmptyWithWarning(t *testing.T) {
	tr := newTree(t)
	tr.machine("0-3", uniform(4), nil)
	topo, err := tr.fs.Topology()
	if err != nil {
		t.Fatal(err)
	}
	plan, err := PlanSeparateDetail(topo, []int{0}, []IRQ{{IRQ: 0, Name: "timer"}}, nil)
	if err != nil || len(plan.Pins) != 0 || len(plan.Warnings) != 1 {
		t.Fatalf("plan %+v, err %v", plan, err)
	}
}

// The whole path on the seed 003 machine: read the tree, plan, apply, and
// find the queues moved off CPU1 onto the CPUs beside haproxy's CPU0.
func TestSeparateEndToEndOnSeed003Tree(t *testing.T) {
	tr := igbTree(t)
	tr.fs.Mask = []int{0, 1, 2, 3}
	topo, err := tr.fs.Topology()
	if err != nil {
		t.Fatal(err)
	}
	irqs, err := tr.fs.IRQs()
	if err != nil {
		t.Fatal(err)
	}
	pins, err := PlanSeparate(topo, []int{0}, irqs, []string{"eth1", "eth3"})
	if err != nil {
		t.Fatal(err)
	}
	if err := tr.fs.ApplyIRQPins(pins); err != nil {
		t.Fatal(err)
	}
	want := map[int]string{50: "1", 51: "2", 52: "3", 53: "1", 54: "2", 55: "3", 56: "1", 57: "2", 58: "3", 59: "1"}
	after, err := tr.fs.IRQs()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range after {
		if got := FormatCPUList(q.Affinity); got != want[q.IRQ] {
			t.Errorf("irq %d (%s, %s) on %q, want %q", q.IRQ, q.Name, q.NIC, got, want[q.IRQ])
		}
	}
}

func TestPlanSeparateWarnsOnlyAboutNamedManagedIRQs(t *testing.T) {
	tr := newTree(t)
	tr.machine("0-3", uniform(4), nil)
	topo, err := tr.fs.Topology()
	if err != nil {
		t.Fatal(err)
	}
	irqs := []IRQ{{IRQ: 30, NIC: "eth0", Managed: new(true)}, {IRQ: 31, NIC: "eth0"}, {IRQ: 50, NIC: "eth2", Managed: new(true)}}
	plan, err := PlanSeparateDetail(topo, []int{0}, irqs, []string{"eth0"})
	if err != nil {
		t.Fatal(err)
	}
	if len(plan.Warnings) != 1 || !strings.Contains(plan.Warnings[0], "IRQs 30 are kernel-managed") {
		t.Errorf("warnings %q", plan.Warnings)
	}
}

func TestMergePinsExplicitWins(t *testing.T) {
	policy := map[int][]int{50: {2}, 51: {3}}
	explicit := []config.IRQPin{{IRQ: 51, CPUs: []int{0, 1}}, {IRQ: 60, CPUs: []int{1}}}
	got := MergePins(policy, explicit)
	want := map[int][]int{50: {2}, 51: {0, 1}, 60: {1}}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("MergePins = %v, want %v", got, want)
	}
	got[50][0] = 9
	if policy[50][0] != 2 {
		t.Error("MergePins shares slices with its input")
	}
}
