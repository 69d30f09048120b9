package pin

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// tree is a fake procfs + sysfs under t.TempDir().
type tree struct {
	t    *testing.T
	root string
	fs   FS
}

func newTree(t *testing.T) *tree {
	t.Helper()
	root := t.TempDir()
	return &tree{t: t, root: root, fs: FS{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Mask: []int{}}}
}

// write creates root/rel with content (parents included).
func (tr *tree) write(rel, content string) {
	tr.t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) read(rel string) string {
	tr.t.Helper()
	b, err := os.ReadFile(filepath.Join(tr.root, rel))
	if err != nil {
		tr.t.Fatal(err)
	}
	return string(b)
}

func (tr *tree) mkdir(rel string) {
	tr.t.Helper()
	if err := os.MkdirAll(filepath.Join(tr.root, rel), 0o755); err != nil {
		tr.t.Fatal(err)
	}
}

func (tr *tree) symlink(target, rel string) {
	tr.t.Helper()
	p := filepath.Join(tr.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		tr.t.Fatal(err)
	}
	if err := os.Symlink(target, p); err != nil {
		tr.t.Fatal(err)
	}
}

// cpuSpec describes one CPU of a fake sysfs.
type cpuSpec struct {
	id, core, pkg int
	l3            string // shared_cpu_list of index3; "" = no cache directory at all
	l2            string // shared_cpu_list of index2; "" = the CPU alone
	noL3          bool   // write index0..2 only (a machine without L3)
}

// machine writes online, per-CPU topology and caches, and NUMA nodes.
func (tr *tree) machine(online string, cpus []cpuSpec, nodes map[int]string) {
	tr.t.Helper()
	tr.write("sys/devices/system/cpu/online", online+"\n")
	for _, c := range cpus {
		d := "sys/devices/system/cpu/cpu" + strconv.Itoa(c.id)
		tr.write(d+"/topology/core_id", strconv.Itoa(c.core)+"\n")
		tr.write(d+"/topology/physical_package_id", strconv.Itoa(c.pkg)+"\n")
		if c.l3 == "" && !c.noL3 {
			continue
		}
		self := strconv.Itoa(c.id)
		l2 := c.l2
		if l2 == "" {
			l2 = self
		}
		caches := []struct{ level, typ, shared string }{
			{"1", "Data", self}, {"1", "Instruction", self}, {"2", "Unified", l2},
		}
		if !c.noL3 {
			caches = append(caches, struct{ level, typ, shared string }{"3", "Unified", c.l3})
		}
		for i, k := range caches {
			ix := fmt.Sprintf("%s/cache/index%d/", d, i)
			tr.write(ix+"level", k.level+"\n")
			tr.write(ix+"type", k.typ+"\n")
			tr.write(ix+"shared_cpu_list", k.shared+"\n")
		}
	}
	for n, l := range nodes {
		tr.write(fmt.Sprintf("sys/devices/system/node/node%d/cpulist", n), l+"\n")
	}
}

// irqAff writes /proc/irq/N/smp_affinity_list (and effective when eff != "").
func (tr *tree) irqAff(n int, aff, eff string) {
	tr.t.Helper()
	d := "proc/irq/" + strconv.Itoa(n)
	tr.write(d+"/smp_affinity_list", aff+"\n")
	if eff != "" {
		tr.write(d+"/effective_affinity_list", eff+"\n")
	}
}

// uniform is n CPUs on one package, one core each, all sharing one L3.
func uniform(n int) []cpuSpec {
	all := fmt.Sprintf("0-%d", n-1)
	var out []cpuSpec
	for i := 0; i < n; i++ {
		out = append(out, cpuSpec{id: i, core: i, pkg: 0, l3: all})
	}
	return out
}

func isNotFound(err error) bool { return errors.Is(err, config.ErrNotFound) }
