package pin

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/spliced-proxy/spliced/core/config"
)

// IRQ is one numbered interrupt line of /proc/interrupts with what sysfs and
// procfs say about it.
type IRQ struct {
	IRQ int `json:"irq"`
	// Counts maps a CPU id to the interrupts it served. CPUs absent from the
	// header (offline) or from a short row are absent from the map.
	Counts map[int]uint64 `json:"counts"`
	Total  uint64         `json:"total"`
	// Chip is the controller and trigger text between the counts and the
	// name: "PCI-MSI-edge", "PCI-MSI 1048577-edge", "IO-APIC 2-edge",
	// "GICv3 30 Level" (runs of blanks collapsed to one).
	Chip string `json:"chip"`
	// Name is the action list ("eth1-TxRx-0", "uhci_hcd:usb3, ehci_hcd:usb1").
	Name string `json:"name"`
	// NIC is the network interface the IRQ belongs to, "" when none is known.
	NIC string `json:"nic,omitempty"`
	// Affinity is /proc/irq/N/smp_affinity_list: where the IRQ may be
	// delivered. nil when unreadable (no /proc/irq/N entry).
	Affinity []int `json:"affinity"`
	// Effective is effective_affinity_list: where the kernel actually
	// delivers it (often one CPU of Affinity). nil when the kernel has none.
	Effective []int `json:"effective,omitempty"`
	// Managed is true when the kernel manages the IRQ's affinity (writes
	// fail with EIO), false when known not to be, nil when unknown. procfs
	// does not tell; it is known from debugfs (/sys/kernel/debug/irq/irqs/N,
	// when mounted and readable) or from a refused write (PinError.Managed).
	Managed *bool `json:"managed"`
}

// ParseInterrupts parses the /proc/interrupts format.
//
// The first line is the header: one "CPUn" per online CPU, in column order;
// offline CPUs are simply missing ("CPU0 CPU1 CPU3"), so a row's k-th count
// belongs to the k-th header CPU. A row starting with a number and a colon is
// an IRQ; rows such as NMI, LOC, ERR, MIS, IPI0 are per-CPU or architecture
// counters, not IRQs, and are skipped. A row may carry fewer counts than the
// header; the counts are the leading numeric fields, at most one per header
// CPU. After them comes the chip text (controller, optional hardware IRQ
// number, trigger) and then the name.
func ParseInterrupts(r io.Reader) ([]IRQ, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64*1024), 4*1024*1024) // a 4096-CPU row is ~45 KiB
	var cpus []int
	var seen [(MaxCPU + 64) / 64]uint64 // header CPUs, to refuse a repeat
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		if len(fields) == 0 {
			continue
		}
		for _, f := range fields {
			rest, ok := strings.CutPrefix(f, "CPU")
			n, err := strconv.Atoi(rest)
			if !ok || err != nil || n < 0 || n > MaxCPU || strconv.Itoa(n) != rest {
				return nil, fmt.Errorf("interrupts: header field %q is not CPUn: %w", f, config.ErrInvalid)
			}
			// The kernel names each online CPU once; a repeated column
			// would make a row's counts ambiguous (and Total != the sum
			// of Counts).
			if seen[n/64]&(1<<(n%64)) != 0 {
				return nil, fmt.Errorf("interrupts: header names %q twice: %w", f, config.ErrInvalid)
			}
			seen[n/64] |= 1 << (n % 64)
			cpus = append(cpus, n)
		}
		break
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("interrupts: %w", err)
	}
	if cpus == nil {
		return nil, fmt.Errorf("interrupts: no header line: %w", config.ErrInvalid)
	}

	irqs := []IRQ{}
	for sc.Scan() {
		line := sc.Text()
		label, rest, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		num, err := strconv.Atoi(strings.TrimSpace(label))
		if err != nil || num < 0 {
			continue // NMI, LOC, ERR, MIS, IPI0...: not an IRQ
		}
		fields := strings.Fields(rest)
		q := IRQ{IRQ: num, Counts: make(map[int]uint64, len(cpus))}
		k := 0
		for k < len(fields) && k < len(cpus) {
			n, err := strconv.ParseUint(fields[k], 10, 64)
			if err != nil {
				break
			}
			q.Counts[cpus[k]] = n
			q.Total += n
			k++
		}
		q.Chip, q.Name = splitChipName(fields[k:])
		irqs = append(irqs, q)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("interrupts: %w", err)
	}
	return irqs, nil
}

// splitChipName separates "PCI-MSI 1048577-edge virtio0-input.0" into chip
// and name. The chip is the first field, then optionally the hardware IRQ
// number (bare, or with the flow handler glued on: "2-edge", "1048577-edge"),
// then optionally a trigger word ("Edge", "Level"). Older kernels glue the
// trigger to the chip ("PCI-MSI-edge"), which is the single-field case.
func splitChipName(f []string) (chip, name string) {
	if len(f) == 0 {
		return "", ""
	}
	i := 1
	if i < len(f) && isHwirq(f[i]) {
		bare := isDigits(f[i])
		i++
		if bare && i < len(f) && isTrigger(f[i]) {
			i++
		}
	} else if i < len(f) && isTrigger(f[i]) {
		i++
	}
	return strings.Join(f[:i], " "), strings.Join(f[i:], " ")
}

func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

// isHwirq: "30", "1048577-edge", "2-fasteoi".
func isHwirq(s string) bool {
	num, handler, glued := strings.Cut(s, "-")
	if !isDigits(num) {
		return false
	}
	return !glued || isHandler(handler)
}

func isTrigger(s string) bool {
	return strings.EqualFold(s, "edge") || strings.EqualFold(s, "level")
}

// isHandler: flow handler names the kernel prints after the hwirq.
func isHandler(s string) bool {
	switch strings.ToLower(s) {
	case "edge", "level", "fasteoi", "simple", "percpu", "percpu_devid", "none", "bad", "ioapic":
		return true
	}
	return false
}

// Interrupts reads and parses /proc/interrupts without the per-IRQ procfs
// and sysfs look-ups (IRQs adds those).
func (fs FS) Interrupts() ([]IRQ, error) {
	b, err := os.ReadFile(fs.proc("interrupts"))
	if err != nil {
		return nil, fmt.Errorf("interrupts: %w", err)
	}
	return ParseInterrupts(bytes.NewReader(b))
}

// IRQs lists the IRQs of /proc/interrupts with their affinity, effective
// affinity, NIC and (when debugfs tells) managed state. Sorted by number.
// Reading needs no privilege.
func (fs FS) IRQs() ([]IRQ, error) {
	irqs, err := fs.Interrupts()
	if err != nil {
		return nil, err
	}
	nics := fs.nicMap()
	for i := range irqs {
		fs.decorate(&irqs[i], nics)
	}
	slices.SortStableFunc(irqs, func(a, b IRQ) int { return a.IRQ - b.IRQ })
	return irqs, nil
}

// IRQ returns one IRQ as IRQs would; the error wraps config.ErrNotFound when
// /proc/interrupts has no such line.
func (fs FS) IRQ(n int) (IRQ, error) {
	irqs, err := fs.Interrupts()
	if err != nil {
		return IRQ{}, err
	}
	for i := range irqs {
		if irqs[i].IRQ == n {
			fs.decorate(&irqs[i], fs.nicMap())
			return irqs[i], nil
		}
	}
	return IRQ{}, fmt.Errorf("irq %d: %w", n, config.ErrNotFound)
}

// IRQAffinity reads /proc/irq/N/smp_affinity_list.
func (fs FS) IRQAffinity(irq int) ([]int, error) {
	l, err := readCPUList(fs.proc("irq", strconv.Itoa(irq), "smp_affinity_list"))
	if err != nil {
		return nil, classify(fmt.Sprintf("irq %d", irq), "read affinity", err)
	}
	return l, nil
}

func (fs FS) decorate(q *IRQ, nics nicMap) {
	dir := fs.proc("irq", strconv.Itoa(q.IRQ))
	if l, err := readCPUList(dir + "/smp_affinity_list"); err == nil {
		q.Affinity = l
	}
	if l, err := readCPUList(dir + "/effective_affinity_list"); err == nil && len(l) > 0 {
		q.Effective = l
	}
	q.NIC = nics.owner(q)
	if b, err := os.ReadFile(fs.sys("kernel/debug/irq/irqs", strconv.Itoa(q.IRQ))); err == nil {
		m := bytes.Contains(b, []byte("IRQD_AFFINITY_MANAGED"))
		q.Managed = &m
	}
}

// nic is what sysfs says about one network interface.
type nic struct {
	name   string
	irqs   []int  // from device/msi_irqs (sorted); authoritative when present
	pci    string // PCI address of the device ("0000:3b:00.0"), "" if not PCI
	virtio string // "virtio2" when the device is a virtio device
}

type nicMap []nic

// nicMap reads /sys/class/net/*/device. Interfaces without a device (lo,
// bridges, bonds, veth) are skipped. For virtio-net the device is the virtio
// device and msi_irqs lives on its parent PCI function.
func (fs FS) nicMap() nicMap {
	ents, err := os.ReadDir(fs.sys("class/net"))
	if err != nil {
		return nil
	}
	var out nicMap
	for _, e := range ents {
		dev := fs.sys("class/net", e.Name(), "device")
		real, err := filepath.EvalSymlinks(dev)
		if err != nil {
			continue
		}
		n := nic{name: e.Name()}
		base := filepath.Base(real)
		n.irqs = numbered(real+"/msi_irqs", "")
		if strings.HasPrefix(base, "virtio") && isDigits(base[len("virtio"):]) {
			n.virtio = base
			parent := filepath.Dir(real)
			if n.irqs == nil {
				n.irqs = numbered(parent+"/msi_irqs", "")
			}
			base = filepath.Base(parent)
		}
		if isPCIAddr(base) {
			n.pci = base
		}
		out = append(out, n)
	}
	return out // ReadDir sorts by name: the first interface claiming an IRQ wins
}

// owner names the interface an IRQ belongs to: the one whose msi_irqs lists
// it; else the one whose PCI address the chip or name carries
// ("PCI-MSIX-0000:00:03.0", "mlx5_comp0@pci:0000:3b:00.0"); else the one the
// name starts with ("eth1-TxRx-0", "eth1", "virtio2-input.0").
func (m nicMap) owner(q *IRQ) string {
	for _, n := range m {
		if _, ok := slices.BinarySearch(n.irqs, q.IRQ); ok {
			return n.name
		}
	}
	chip, _, _ := strings.Cut(q.Chip, " ")
	for _, n := range m {
		if n.pci != "" && (strings.HasSuffix(chip, "-"+n.pci) ||
			strings.Contains(q.Name, "@pci:"+n.pci)) {
			return n.name
		}
	}
	first, _, _ := strings.Cut(q.Name, ",")
	for _, n := range m {
		if hasNamePrefix(first, n.name) || (n.virtio != "" && hasNamePrefix(first, n.virtio)) {
			return n.name
		}
	}
	return ""
}

func hasNamePrefix(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	return ok && (rest == "" || rest[0] == '-' || rest[0] == '@')
}

// isPCIAddr: "0000:3b:00.0".
func isPCIAddr(s string) bool {
	if len(s) != 12 || s[4] != ':' || s[7] != ':' || s[10] != '.' {
		return false
	}
	for i := 0; i < len(s); i++ {
		switch i {
		case 4, 7, 10:
			continue
		}
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}
