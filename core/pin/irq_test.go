package pin

import (
	"fmt"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// seed003Interrupts is the table of seed 003 as it arrived by mail (blanks
// collapsed): igb-style queues eth1-TxRx-N, old "PCI-MSI-edge" chip text.
const seed003Interrupts = `CPU0 CPU1 CPU2 CPU3
50: 25 19986125 17 0 PCI-MSI-edge eth1-TxRx-0
51: 0 20002074 13 0 PCI-MSI-edge eth1-TxRx-1
52: 0 20004145 16 0 PCI-MSI-edge eth1-TxRx-2
53: 2 20004083 13 0 PCI-MSI-edge eth1-TxRx-3
54: 0 0 1 0 PCI-MSI-edge eth1
55: 14 16075935 7 0 PCI-MSI-edge eth3-TxRx-0
56: 3 16070740 3 0 PCI-MSI-edge eth3-TxRx-1
57: 5 16091911 3 0 PCI-MSI-edge eth3-TxRx-2
58: 4 16077275 3 0 PCI-MSI-edge eth3-TxRx-3
59: 2 0 0 0 PCI-MSI-edge eth3
`

// virtioInterrupts is a 4-CPU KVM guest on a 5.x kernel: virtio-net on
// virtio0 (config, input.0, output.0), virtio-blk on virtio1.
const virtioInterrupts = `           CPU0       CPU1       CPU2       CPU3       
  0:         36          0          0          0   IO-APIC   2-edge      timer
  1:          0          9          0          0   IO-APIC   1-edge      i8042
  8:          0          0          1          0   IO-APIC   8-edge      rtc0
  9:          0          0          0          0   IO-APIC   9-fasteoi   acpi
 11:          0         30          0          0   IO-APIC  11-fasteoi   uhci_hcd:usb1, virtio2
 24:          0          0          0          0   PCI-MSI 1048576-edge      virtio0-config
 25:    1843552          0          0          0   PCI-MSI 1048577-edge      virtio0-input.0
 26:          1          0          0     904211   PCI-MSI 1048578-edge      virtio0-output.0
 27:          0          0          0          0   PCI-MSI 65536-edge      virtio1-config
 28:          0     524288          0          0   PCI-MSI 65537-edge      virtio1-req.0
NMI:          0          0          0          0   Non-maskable interrupts
LOC:    4423432    4234223    4194822    4123312   Local timer interrupts
SPU:          0          0          0          0   Spurious interrupts
RES:      13836      12512      11893      12001   Rescheduling interrupts
ERR:          0
MIS:          0
PIN:          0          0          0          0   Posted-interrupt notification event
`

// offlineInterrupts: CPU2 is offline, so the header skips it and every row
// has three counts; IRQ 7 is a short row (fewer counts than the header).
const offlineInterrupts = `           CPU0       CPU1       CPU3       
  0:         44          0          0   IO-APIC   2-edge      timer
  7:          5   IO-APIC   7-edge      parport0
 30:        100        200        300   PCI-MSI 512000-edge      ahci[0000:00:1f.2]
 31:          0          0          0   PCI-MSI 524288-edge
NMI:          1          2          3   Non-maskable interrupts
IPI0:        10         20         30   Rescheduling interrupts
ERR:          0
`

// armInterrupts: GICv3 with the bare hwirq and a separate trigger word.
const armInterrupts = `           CPU0       CPU1       
 11:     123456     123455     GICv3  27 Level     arch_timer
 45:        100          0     GICv3 152 Edge      eth0
 46:          7          9 ITS-MSI 524288 Edge      eth0-TxRx-0
IPI0:      1000       1001       Rescheduling interrupts
`

// mlx5Interrupts mimics a 6.x kernel with a ConnectX NIC at 0000:3b:00.0:
// per-device MSI-X chip text, one async and N completion vectors, 16 CPUs.
func mlx5Interrupts(ncpu, ncomp int) string {
	var b strings.Builder
	b.WriteString("    ")
	for c := 0; c < ncpu; c++ {
		fmt.Fprintf(&b, "       CPU%-3d", c)
	}
	b.WriteString("\n")
	row := func(irq int, hot int, chip, name string) {
		fmt.Fprintf(&b, "%4d: ", irq)
		for c := 0; c < ncpu; c++ {
			n := 0
			if c == hot {
				n = 1000000 + irq
			}
			fmt.Fprintf(&b, "%10d ", n)
		}
		fmt.Fprintf(&b, " %-8s %s\n", chip, name)
	}
	row(1, 0, "IR-IO-APIC    1-edge", "i8042")
	row(120, 0, "IR-PCI-MSIX-0000:3b:00.0    0-edge", "mlx5_async0@pci:0000:3b:00.0")
	for i := 0; i < ncomp; i++ {
		row(121+i, i%ncpu, fmt.Sprintf("IR-PCI-MSIX-0000:3b:00.0   %2d-edge", i+1), fmt.Sprintf("mlx5_comp%d@pci:0000:3b:00.0", i))
	}
	row(200, 3, "IR-PCI-MSIX-0000:00:17.0    0-edge", "ahci[0000:00:17.0]")
	b.WriteString(" NMI:" + strings.Repeat("          0 ", ncpu) + "  Non-maskable interrupts\n")
	b.WriteString(" ERR:          0\n")
	return b.String()
}

func TestParseInterruptsRealWorldLayouts(t *testing.T) {
	type want struct {
		chip, name string
		counts     map[int]uint64
	}
	tests := []struct {
		name   string
		text   string
		irqs   []int // every IRQ number, in order
		checks map[int]want
	}{
		{
			name: "seed 003 igb, four CPUs", text: seed003Interrupts,
			irqs: []int{50, 51, 52, 53, 54, 55, 56, 57, 58, 59},
			checks: map[int]want{
				50: {"PCI-MSI-edge", "eth1-TxRx-0", map[int]uint64{0: 25, 1: 19986125, 2: 17, 3: 0}},
				54: {"PCI-MSI-edge", "eth1", map[int]uint64{0: 0, 1: 0, 2: 1, 3: 0}},
				58: {"PCI-MSI-edge", "eth3-TxRx-3", map[int]uint64{0: 4, 1: 16077275, 2: 3, 3: 0}},
			},
		},
		{
			name: "virtio-net guest", text: virtioInterrupts,
			irqs: []int{0, 1, 8, 9, 11, 24, 25, 26, 27, 28},
			checks: map[int]want{
				0:  {"IO-APIC 2-edge", "timer", map[int]uint64{0: 36, 1: 0, 2: 0, 3: 0}},
				11: {"IO-APIC 11-fasteoi", "uhci_hcd:usb1, virtio2", map[int]uint64{0: 0, 1: 30, 2: 0, 3: 0}},
				25: {"PCI-MSI 1048577-edge", "virtio0-input.0", map[int]uint64{0: 1843552, 1: 0, 2: 0, 3: 0}},
				26: {"PCI-MSI 1048578-edge", "virtio0-output.0", map[int]uint64{0: 1, 1: 0, 2: 0, 3: 904211}},
			},
		},
		{
			name: "offline CPU2 and a short row", text: offlineInterrupts,
			irqs: []int{0, 7, 30, 31},
			checks: map[int]want{
				7:  {"IO-APIC 7-edge", "parport0", map[int]uint64{0: 5}},
				30: {"PCI-MSI 512000-edge", "ahci[0000:00:1f.2]", map[int]uint64{0: 100, 1: 200, 3: 300}},
				31: {"PCI-MSI 524288-edge", "", map[int]uint64{0: 0, 1: 0, 3: 0}},
			},
		},
		{
			name: "arm GICv3 and ITS", text: armInterrupts,
			irqs: []int{11, 45, 46},
			checks: map[int]want{
				11: {"GICv3 27 Level", "arch_timer", map[int]uint64{0: 123456, 1: 123455}},
				46: {"ITS-MSI 524288 Edge", "eth0-TxRx-0", map[int]uint64{0: 7, 1: 9}},
			},
		},
		{
			name: "mlx5, 16 CPUs, per-device MSI-X chip", text: mlx5Interrupts(16, 8),
			irqs: []int{1, 120, 121, 122, 123, 124, 125, 126, 127, 128, 200},
			checks: map[int]want{
				120: {"IR-PCI-MSIX-0000:3b:00.0 0-edge", "mlx5_async0@pci:0000:3b:00.0", nil},
				128: {"IR-PCI-MSIX-0000:3b:00.0 8-edge", "mlx5_comp7@pci:0000:3b:00.0", nil},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			irqs, err := ParseInterrupts(strings.NewReader(tt.text))
			if err != nil {
				t.Fatal(err)
			}
			var nums []int
			byNum := map[int]IRQ{}
			for _, q := range irqs {
				nums = append(nums, q.IRQ)
				byNum[q.IRQ] = q
				var sum uint64
				for _, n := range q.Counts {
					sum += n
				}
				if sum != q.Total {
					t.Errorf("irq %d: Total %d, sum of counts %d", q.IRQ, q.Total, sum)
				}
			}
			if !slices.Equal(nums, tt.irqs) {
				t.Errorf("IRQs %v, want %v", nums, tt.irqs)
			}
			for n, w := range tt.checks {
				q := byNum[n]
				if q.Chip != w.chip || q.Name != w.name {
					t.Errorf("irq %d: chip %q name %q, want %q %q", n, q.Chip, q.Name, w.chip, w.name)
				}
				if w.counts != nil && !maps.Equal(q.Counts, w.counts) {
					t.Errorf("irq %d: counts %v, want %v", n, q.Counts, w.counts)
				}
			}
		})
	}
}

func TestParseInterruptsMlx5CountsLandOnTheirCPU(t *testing.T) {
	irqs, err := ParseInterrupts(strings.NewReader(mlx5Interrupts(16, 20)))
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range irqs {
		if !strings.HasPrefix(q.Name, "mlx5_comp") {
			continue
		}
		i, _ := strconv.Atoi(strings.TrimPrefix(strings.Split(q.Name, "@")[0], "mlx5_comp"))
		if len(q.Counts) != 16 || q.Counts[i%16] != uint64(1000000+q.IRQ) || q.Total != q.Counts[i%16] {
			t.Errorf("irq %d (%s): counts %v", q.IRQ, q.Name, q.Counts)
		}
	}
}

func TestParseInterruptsRejectsBadHeader(t *testing.T) {
	for _, text := range []string{
		"",
		"\n\n",
		"  0:  1  IO-APIC 2-edge timer\n",
		"CPU0 CPUx\n",
		"CPU0 GPU1\n",
		"CPU0 CPU1 CPU0\n 0: 1 2 3 IO-APIC 2-edge timer\n", // found by FuzzParseInterrupts
	} {
		if irqs, err := ParseInterrupts(strings.NewReader(text)); err == nil {
			t.Errorf("ParseInterrupts(%q) = %v, want error", text, irqs)
		}
	}
}

// igbTree is the seed 003 machine as a fake tree: 4 CPUs under one L3,
// eth1 whose PCI function lists its MSI vectors, eth3 whose does not (name
// matching then), affinities as in the mail (all on CPU1).
func igbTree(t *testing.T) *tree {
	tr := newTree(t)
	tr.machine("0-3", uniform(4), map[int]string{0: "0-3"})
	tr.write("proc/interrupts", seed003Interrupts)
	for irq := 50; irq <= 59; irq++ {
		tr.irqAff(irq, "1", "1")
	}
	for irq := 50; irq <= 54; irq++ {
		tr.write("sys/devices/pci0000:00/0000:01:00.0/msi_irqs/"+strconv.Itoa(irq), "msix\n")
	}
	tr.symlink("../../../devices/pci0000:00/0000:01:00.0", "sys/class/net/eth1/device")
	tr.mkdir("sys/devices/pci0000:00/0000:01:00.1")
	tr.symlink("../../../devices/pci0000:00/0000:01:00.1", "sys/class/net/eth3/device")
	tr.mkdir("sys/class/net/lo") // no device link
	return tr
}

func TestIRQsAttachNICsAffinityAndManagedState(t *testing.T) {
	type want struct {
		nic      string
		aff, eff []int
		managed  *bool
	}
	yes, no := true, false
	tests := []struct {
		name  string
		build func(t *testing.T) *tree
		want  map[int]want
	}{
		{
			name:  "seed 003 igb: msi_irqs for eth1, name prefix for eth3",
			build: igbTree,
			want: map[int]want{
				50: {nic: "eth1", aff: []int{1}, eff: []int{1}},
				54: {nic: "eth1", aff: []int{1}, eff: []int{1}},
				55: {nic: "eth3", aff: []int{1}, eff: []int{1}},
				59: {nic: "eth3", aff: []int{1}, eff: []int{1}},
			},
		},
		{
			name: "virtio-net: msi_irqs on the parent PCI function",
			build: func(t *testing.T) *tree {
				tr := newTree(t)
				tr.write("proc/interrupts", virtioInterrupts)
				for _, irq := range []int{24, 25, 26} {
					tr.write("sys/devices/pci0000:00/0000:00:03.0/msi_irqs/"+strconv.Itoa(irq), "msix\n")
				}
				tr.mkdir("sys/devices/pci0000:00/0000:00:03.0/virtio0")
				tr.symlink("../../../devices/pci0000:00/0000:00:03.0/virtio0", "sys/class/net/eth0/device")
				tr.irqAff(25, "0-3", "2")
				tr.irqAff(28, "0-3", "")
				tr.write("sys/kernel/debug/irq/irqs/28", "handler:  handle_edge_irq\ndstate:   0x31600200\n            IRQD_ACTIVATED\n            IRQD_AFFINITY_MANAGED\n")
				tr.write("sys/kernel/debug/irq/irqs/25", "handler:  handle_edge_irq\ndstate:   0x00400200\n            IRQD_ACTIVATED\n")
				return tr
			},
			want: map[int]want{
				24: {nic: "eth0"},
				25: {nic: "eth0", aff: []int{0, 1, 2, 3}, eff: []int{2}, managed: &no},
				26: {nic: "eth0"},
				27: {},
				28: {aff: []int{0, 1, 2, 3}, managed: &yes},
				11: {}, // shared line naming "virtio2": no such NIC here
			},
		},
		{
			name: "virtio-net without msi_irqs: the virtio name prefix",
			build: func(t *testing.T) *tree {
				tr := newTree(t)
				tr.write("proc/interrupts", virtioInterrupts)
				tr.mkdir("sys/devices/pci0000:00/0000:00:03.0/virtio0")
				tr.symlink("../../../devices/pci0000:00/0000:00:03.0/virtio0", "sys/class/net/ens3/device")
				return tr
			},
			want: map[int]want{24: {nic: "ens3"}, 25: {nic: "ens3"}, 26: {nic: "ens3"}, 28: {}},
		},
		{
			name: "mlx5 without msi_irqs: the PCI address in chip and name",
			build: func(t *testing.T) *tree {
				tr := newTree(t)
				tr.write("proc/interrupts", mlx5Interrupts(16, 4))
				tr.mkdir("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0")
				tr.symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.0", "sys/class/net/ens1f0np0/device")
				tr.mkdir("sys/devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1")
				tr.symlink("../../../devices/pci0000:3a/0000:3a:00.0/0000:3b:00.1", "sys/class/net/ens1f1np1/device")
				return tr
			},
			want: map[int]want{120: {nic: "ens1f0np0"}, 121: {nic: "ens1f0np0"}, 124: {nic: "ens1f0np0"}, 200: {}, 1: {}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tr := tt.build(t)
			irqs, err := tr.fs.IRQs()
			if err != nil {
				t.Fatal(err)
			}
			byNum := map[int]IRQ{}
			for _, q := range irqs {
				byNum[q.IRQ] = q
			}
			for n, w := range tt.want {
				q, ok := byNum[n]
				if !ok {
					t.Errorf("irq %d missing", n)
					continue
				}
				if q.NIC != w.nic {
					t.Errorf("irq %d (%s): NIC %q, want %q", n, q.Name, q.NIC, w.nic)
				}
				if !slices.Equal(q.Affinity, w.aff) || !slices.Equal(q.Effective, w.eff) {
					t.Errorf("irq %d: affinity %v effective %v, want %v %v", n, q.Affinity, q.Effective, w.aff, w.eff)
				}
				if !reflect.DeepEqual(q.Managed, w.managed) {
					t.Errorf("irq %d: managed %v, want %v", n, q.Managed, w.managed)
				}
			}
			one, err := tr.fs.IRQ(irqs[len(irqs)-1].IRQ)
			if err != nil || !reflect.DeepEqual(one, irqs[len(irqs)-1]) {
				t.Errorf("IRQ(%d) = %+v, %v; want the IRQs() entry", irqs[len(irqs)-1].IRQ, one, err)
			}
		})
	}
}

func TestIRQOfUnknownNumberIsNotFound(t *testing.T) {
	tr := igbTree(t)
	_, err := tr.fs.IRQ(49)
	if !isNotFound(err) {
		t.Fatalf("IRQ(49) = %v, want ErrNotFound", err)
	}
}

func TestIRQsOfThisMachine(t *testing.T) {
	irqs, err := Host().IRQs()
	if err != nil {
		t.Skipf("no readable /proc/interrupts: %v", err)
	}
	if len(irqs) == 0 {
		t.Skip("no IRQ on this machine")
	}
	online, err := Host().OnlineCPUs()
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range irqs {
		for c := range q.Counts {
			if !slices.Contains(online, c) {
				t.Errorf("irq %d counts CPU %d, not online %v", q.IRQ, c, online)
			}
		}
	}
	for _, q := range irqs {
		t.Logf("irq %d %q %q nic=%q aff=%v eff=%v total=%d", q.IRQ, q.Chip, q.Name, q.NIC, q.Affinity, q.Effective, q.Total)
	}
}

func FuzzParseInterrupts(f *testing.F) {
	for _, s := range []string{seed003Interrupts, virtioInterrupts, offlineInterrupts, armInterrupts, mlx5Interrupts(4, 2), "CPU0\n 1:\n", "CPU0\n:\n"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		irqs, err := ParseInterrupts(strings.NewReader(s))
		if err != nil {
			return
		}
		for _, q := range irqs {
			if q.IRQ < 0 {
				t.Fatalf("negative IRQ %d", q.IRQ)
			}
			var sum uint64
			for c, n := range q.Counts {
				if c < 0 || c > MaxCPU {
					t.Fatalf("count for CPU %d", c)
				}
				sum += n
			}
			if sum != q.Total {
				t.Fatalf("irq %d: total %d != %d", q.IRQ, q.Total, sum)
			}
		}
	})
}
