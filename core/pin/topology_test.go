package pin

import (
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

func l3Sets(topo Topology) [][]int {
	var out [][]int
	for _, g := range topo.L3 {
		out = append(out, g.CPUs)
	}
	return out
}

func TestTopologyReadsCachesCoresAndNodes(t *testing.T) {
	two := func() []cpuSpec { // 2 sockets × 4 cores × 2 threads; siblings i and i+8
		var c []cpuSpec
		for i := 0; i < 16; i++ {
			pkg := (i / 4) % 2
			l3 := "0-3,8-11"
			if pkg == 1 {
				l3 = "4-7,12-15"
			}
			c = append(c, cpuSpec{id: i, core: i % 4, pkg: pkg, l3: l3})
		}
		return c
	}
	tests := []struct {
		name     string
		online   string
		cpus     []cpuSpec
		nodes    map[int]string
		mask     []int
		wantL3   [][]int
		wantLvl  int
		wantNode map[int]int // cpu -> node
		wantCore map[int][2]int
		allowed  []int
		notes    bool
	}{
		{
			name: "seed 003 box: 4 CPUs under one L3", online: "0-3", cpus: uniform(4),
			nodes: map[int]string{0: "0-3"}, mask: []int{0, 1, 2, 3},
			wantL3: [][]int{{0, 1, 2, 3}}, wantLvl: 3, wantNode: map[int]int{0: 0, 3: 0},
			wantCore: map[int][2]int{2: {0, 2}}, allowed: []int{0, 1, 2, 3},
		},
		{
			name: "two sockets with SMT siblings numbered apart", online: "0-15", cpus: two(),
			nodes: map[int]string{0: "0-3,8-11", 1: "4-7,12-15"}, mask: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
			wantL3: [][]int{{0, 1, 2, 3, 8, 9, 10, 11}, {4, 5, 6, 7, 12, 13, 14, 15}}, wantLvl: 3,
			wantNode: map[int]int{5: 1, 9: 0}, wantCore: map[int][2]int{12: {1, 0}, 8: {0, 0}},
			allowed: []int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15},
		},
		{
			name: "offline CPU is left out of its cache group", online: "0-1,3", cpus: uniform(4),
			mask:   []int{0, 1, 3},
			wantL3: [][]int{{0, 1, 3}}, wantLvl: 3, wantNode: map[int]int{0: -1}, allowed: []int{0, 1, 3},
			notes: true, // no NUMA directory
		},
		{
			name: "affinity mask narrower than online", online: "0-3", cpus: uniform(4), nodes: map[int]string{0: "0-3"},
			mask: []int{1, 3, 9}, wantL3: [][]int{{0, 1, 2, 3}}, wantLvl: 3, allowed: []int{1, 3},
		},
		{
			name: "no cache information: each CPU its own group", online: "0-2",
			cpus:  []cpuSpec{{id: 0}, {id: 1, core: 1}, {id: 2, core: 2}},
			nodes: map[int]string{0: "0-2"}, mask: []int{0, 1, 2},
			wantL3: [][]int{{0}, {1}, {2}}, wantLvl: 0, allowed: []int{0, 1, 2}, notes: true,
		},
		{
			name: "no L3: clusters sharing an L2 are the groups", online: "0-3",
			cpus: []cpuSpec{
				{id: 0, core: 0, noL3: true, l2: "0-1"}, {id: 1, core: 1, noL3: true, l2: "0-1"},
				{id: 2, core: 2, noL3: true, l2: "2-3"}, {id: 3, core: 3, noL3: true, l2: "2-3"},
			},
			nodes: map[int]string{0: "0-3"}, mask: []int{0, 1, 2, 3},
			wantL3: [][]int{{0, 1}, {2, 3}}, wantLvl: 2, allowed: []int{0, 1, 2, 3},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tr := newTree(t)
			tr.machine(tt.online, tt.cpus, tt.nodes)
			tr.fs.Mask = tt.mask
			topo, err := tr.fs.Topology()
			if err != nil {
				t.Fatal(err)
			}
			if got := l3Sets(topo); !reflect.DeepEqual(got, tt.wantL3) {
				t.Errorf("L3 groups = %v, want %v", got, tt.wantL3)
			}
			for _, g := range topo.L3 {
				if g.Level != tt.wantLvl {
					t.Errorf("group %v level %d, want %d", g.CPUs, g.Level, tt.wantLvl)
				}
			}
			if !slices.Equal(topo.Allowed, tt.allowed) {
				t.Errorf("Allowed = %v, want %v", topo.Allowed, tt.allowed)
			}
			for cpu, node := range tt.wantNode {
				if c, _ := topo.CPU(cpu); c.Node != node {
					t.Errorf("cpu%d node %d, want %d", cpu, c.Node, node)
				}
			}
			for cpu, pc := range tt.wantCore {
				if c, _ := topo.CPU(cpu); c.Package != pc[0] || c.Core != pc[1] {
					t.Errorf("cpu%d package/core %d/%d, want %v", cpu, c.Package, c.Core, pc)
				}
			}
			// Every online CPU is in exactly one group, and the group it
			// points at contains it.
			seen := map[int]int{}
			for _, g := range topo.L3 {
				for _, c := range g.CPUs {
					seen[c]++
				}
			}
			for _, c := range topo.CPUs {
				if seen[c.ID] != 1 || !slices.Contains(topo.L3Of(c.ID), c.ID) {
					t.Errorf("cpu%d in %d groups (L3Of %v)", c.ID, seen[c.ID], topo.L3Of(c.ID))
				}
				if _, ok := slices.BinarySearch(topo.Allowed, c.ID); ok != c.Allowed {
					t.Errorf("cpu%d Allowed flag %v disagrees with Allowed list", c.ID, c.Allowed)
				}
			}
			if tt.notes != (len(topo.Notes) > 0) {
				t.Errorf("notes = %q, want notes: %v", topo.Notes, tt.notes)
			}
		})
	}
}

func TestTopologyWithoutOnlineFileUsesCPUDirectories(t *testing.T) {
	tr := newTree(t)
	tr.machine("0-3", uniform(4), map[int]string{0: "0-3"})
	if err := os.Remove(filepath.Join(tr.fs.Sys, "devices/system/cpu/online")); err != nil {
		t.Fatal(err)
	}
	tr.mkdir("sys/devices/system/cpu/cpufreq") // not a cpuN directory
	topo, err := tr.fs.Topology()
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(topo.Online, []int{0, 1, 2, 3}) {
		t.Errorf("Online = %v", topo.Online)
	}
	if len(topo.Notes) == 0 || !strings.Contains(topo.Notes[0], "cpuN") {
		t.Errorf("notes %q do not explain the degradation", topo.Notes)
	}
}

func TestTopologyWithoutAnyCPUListFails(t *testing.T) {
	tr := newTree(t)
	tr.fs.Mask = []int{} // mask known and empty: nothing to fall back on
	if _, err := tr.fs.Topology(); err == nil {
		t.Fatal("Topology on an empty tree succeeded")
	}
}

func TestTopologyOfThisMachine(t *testing.T) {
	topo, err := Host().Topology()
	if err != nil {
		t.Fatal(err)
	}
	if len(topo.Online) == 0 || len(topo.CPUs) != len(topo.Online) || len(topo.L3) == 0 {
		t.Fatalf("implausible topology %+v", topo)
	}
	mask, err := Host().AffinityMask()
	if err != nil {
		t.Fatal(err)
	}
	if want := intersect(topo.Online, mask); !slices.Equal(topo.Allowed, want) {
		t.Errorf("Allowed = %v, want online ∩ mask = %v", topo.Allowed, want)
	}
	t.Logf("online %v allowed %v l3 %v nodes %v notes %q", topo.Online, topo.Allowed, l3Sets(topo), topo.Nodes, topo.Notes)
}
