package api

import (
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
	"github.com/spliced-proxy/spliced/core/pin"
)

// pinTree is a fake procfs/sysfs: CPUs 0-1, IRQs 30 and 31 of eth0 and 40
// of nothing, every affinity 0-1.
type pinTree struct {
	t    *testing.T
	root string
	fs   pin.FS
}

func newPinTree(t *testing.T) *pinTree {
	t.Helper()
	root := t.TempDir()
	pt := &pinTree{t: t, root: root, fs: pin.FS{Proc: filepath.Join(root, "proc"), Sys: filepath.Join(root, "sys"), Mask: []int{0, 1}}}
	pt.write("proc/interrupts", "           CPU0       CPU1\n"+
		" 30:        500        700  PCI-MSI 1048577-edge      eth0-TxRx-0\n"+
		" 31:          1          2  PCI-MSI 1048578-edge      eth0-TxRx-1\n"+
		" 40:          9          0  IO-APIC   4-edge      ttyS0\n"+
		"NMI:          0          0   Non-maskable interrupts\n")
	for _, n := range []string{"30", "31", "40"} {
		pt.write("proc/irq/"+n+"/smp_affinity_list", "0-1\n")
	}
	pt.write("sys/devices/system/cpu/online", "0-1\n")
	pt.write("sys/class/net/eth0/device/msi_irqs/30", "msix\n")
	pt.write("sys/class/net/eth0/device/msi_irqs/31", "msix\n")
	return pt
}

func (pt *pinTree) write(rel, content string) {
	pt.t.Helper()
	p := filepath.Join(pt.root, rel)
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		pt.t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
		pt.t.Fatal(err)
	}
}

// refuse makes IRQ n's affinity file unwritable even for root (a
// directory: open for writing fails with EISDIR).
func (pt *pinTree) refuse(n int) {
	pt.t.Helper()
	p := filepath.Join(pt.fs.Proc, "irq", strconv.Itoa(n), "smp_affinity_list")
	if err := os.Remove(p); err != nil {
		pt.t.Fatal(err)
	}
	if err := os.Mkdir(p, 0o755); err != nil {
		pt.t.Fatal(err)
	}
}

func (pt *pinTree) affinity(n int) string {
	pt.t.Helper()
	m, err := pt.fs.IRQAffinity(n)
	if err != nil {
		pt.t.Fatal(err)
	}
	return pin.FormatCPUList(m)
}

// pinCore is a fake core for the placement endpoints (the engine's side,
// writing pins and reading threads back from the kernel, is tested in
// core/engine). It reads IRQs and the mask from the fake tree and, like the
// engine, writes the explicit IRQ pins of an applied snapshot there when
// they changed, refusing with the *config.ApplyError the engine gives
// (field /irq/pins/K/cpus); its threads are the manual cpu_map of the last
// snapshot, granted as configured; Runtime reports tuning.nbthread.
type pinCore struct {
	coretest.Nop
	warnings []string
}

func (c *pinCore) Apply(ctx context.Context, snap *config.Config) error {
	if last := c.Last(); last == nil || !slices.EqualFunc(last.IRQ.Pins, snap.IRQ.Pins,
		func(a, b config.IRQPin) bool { return a.IRQ == b.IRQ && slices.Equal(a.CPUs, b.CPUs) }) {
		if err := c.PinFS.ApplyIRQPins(pin.MergePins(nil, snap.IRQ.Pins)); err != nil {
			var pe *pin.PinError
			k := -1
			if errors.As(err, &pe) {
				k = slices.IndexFunc(snap.IRQ.Pins, func(p config.IRQPin) bool { return "irq "+strconv.Itoa(p.IRQ) == pe.What })
			}
			return &config.ApplyError{Field: "/irq/pins/" + strconv.Itoa(k) + "/cpus", Object: "irq pin", Err: err}
		}
	}
	return c.Nop.Apply(ctx, snap)
}

func (c *pinCore) Runtime() core.Runtime {
	rt := c.Nop.Runtime()
	if last := c.Last(); last != nil {
		rt.Nbthread = last.Tuning.Nbthread
	}
	return rt
}

func (c *pinCore) Threads() []core.ThreadState {
	out := []core.ThreadState{}
	if last := c.Last(); last != nil && last.CPUMap.Mode == config.CPUMapManual {
		for _, t := range last.CPUMap.Threads {
			out = append(out, core.ThreadState{Thread: t.Thread, TID: 1000 + t.Thread, State: "active", Configured: t.CPUs, Granted: t.CPUs})
		}
	}
	return out
}

func (c *pinCore) PinWarnings() []string { return slices.Clone(c.warnings) }

// newPinFixture is an API over a store (nbthread 2) and a pinCore over pt.
// prepare, if set, changes the stored config before the first apply.
func newPinFixture(t *testing.T, pt *pinTree, prepare func(c *config.Config)) (*fixture, *pinCore) {
	t.Helper()
	return newPinFixtureAs(t, pt, core.NodeIdentity{}, prepare)
}

// newPinFixtureAs is newPinFixture on the node named by self.
func newPinFixtureAs(t *testing.T, pt *pinTree, self core.NodeIdentity, prepare func(c *config.Config)) (*fixture, *pinCore) {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := config.Open(t.TempDir(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Update(context.Background(), func(c *config.Config) error {
		c.Tuning.Nbthread = 2
		if prepare != nil {
			prepare(c)
		}
		return nil
	}, config.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	pc := &pinCore{}
	pc.PinFS = pt.fs
	if err := pc.Apply(context.Background(), st.Current()); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Core: pc, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}, Node: self})
	return &fixture{h: h, store: st}, pc
}

func TestIRQsAreListedWithAffinityCountsAndNIC(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixture(t, pt, nil)
	w := f.must(t, http.StatusOK, "GET", "/api/v1/irqs", "")
	got := decodeJSON[[]IRQView](t, w)
	if len(got) != 3 {
		t.Fatalf("%d IRQs, want 3: %s", len(got), w.Body.String())
	}
	q := got[0]
	if q.IRQ.IRQ != 30 || q.NIC != "eth0" || q.Total != 1200 || q.Counts[1] != 700 || pin.FormatCPUList(q.Affinity) != "0-1" {
		t.Fatalf("irq 30: %+v", q)
	}
	if got[2].NIC != "" {
		t.Errorf("irq 40 has NIC %q", got[2].NIC)
	}
	if w.Header().Get("ETag") == "" {
		t.Error("no ETag")
	}
	one := decodeJSON[IRQView](t, f.must(t, http.StatusOK, "GET", "/api/v1/irqs/31", ""))
	if one.IRQ.IRQ != 31 || one.Pinned != nil {
		t.Fatalf("irq 31: %+v", one)
	}
}

func TestUnknownIRQIsNotFound(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixture(t, pt, nil)
	for _, path := range []string{"/api/v1/irqs/99", "/api/v1/irqs/abc", "/api/v1/irqs/-1"} {
		problemOf(t, f.must(t, http.StatusNotFound, "GET", path, ""))
	}
	problemOf(t, f.must(t, http.StatusNotFound, "PUT", "/api/v1/irqs/99", `{"cpus":[1]}`))
}

func TestPutIRQWritesTheAffinityAndPersistsThePin(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixture(t, pt, nil)
	w := f.must(t, http.StatusOK, "PUT", "/api/v1/irqs/31", `{"cpus":[1]}`)
	ans := decodeJSON[writeAnswer](t, w)
	if len(ans.Plan.Items) != 1 || ans.Plan.Items[0].Object != "irq" {
		t.Fatalf("plan %+v", ans.Plan)
	}
	var res IRQView
	if err := json.Unmarshal(ans.Result, &res); err != nil {
		t.Fatal(err)
	}
	if pin.FormatCPUList(res.Affinity) != "1" || pin.FormatCPUList(res.Pinned) != "1" {
		t.Fatalf("result %+v", res)
	}
	if a := pt.affinity(31); a != "1" {
		t.Fatalf("irq 31 affinity %q, want 1", a)
	}
	pins := f.store.Current().IRQ.Pins
	if len(pins) != 1 || pins[0].IRQ != 31 || pin.FormatCPUList(pins[0].CPUs) != "1" {
		t.Fatalf("stored pins %+v", pins)
	}
	// Changing it again replaces the pin; a second IRQ is kept in order.
	f.must(t, http.StatusOK, "PUT", "/api/v1/irqs/30", `{"cpus":[0]}`)
	f.must(t, http.StatusOK, "PUT", "/api/v1/irqs/31", `{"cpus":[0,1]}`)
	pins = f.store.Current().IRQ.Pins
	if len(pins) != 2 || pins[0].IRQ != 30 || pins[1].IRQ != 31 || pin.FormatCPUList(pins[1].CPUs) != "0-1" {
		t.Fatalf("stored pins %+v", pins)
	}
	if a := pt.affinity(30); a != "0" {
		t.Fatalf("irq 30 affinity %q", a)
	}
	// If-Match against the pin's ETag.
	tag := f.must(t, http.StatusOK, "GET", "/api/v1/irqs/31", "").Header().Get("ETag")
	f.must(t, http.StatusPreconditionFailed, "PUT", "/api/v1/irqs/31", `{"cpus":[1]}`, hdr{"If-Match": `"nope"`})
	f.must(t, http.StatusOK, "PUT", "/api/v1/irqs/31", `{"cpus":[1]}`, hdr{"If-Match": tag})
}

func TestPutIRQRefusedByTheOSIsConflictAndChangesNothing(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixture(t, pt, nil)
	f.must(t, http.StatusOK, "PUT", "/api/v1/irqs/30", `{"cpus":[1]}`)
	before := f.snapshot(t)
	gen := f.store.Current().Generation
	pt.refuse(31)
	p := problemOf(t, f.must(t, http.StatusConflict, "PUT", "/api/v1/irqs/31", `{"cpus":[1]}`))
	if !strings.HasSuffix(p.Type, "apply-failed") || len(p.Errors) != 1 || p.Errors[0].Field != "/cpus" ||
		!strings.Contains(p.Errors[0].Message, "irq 31") {
		t.Fatalf("problem %+v", p)
	}
	if after := f.snapshot(t); after != before || f.store.Current().Generation != gen {
		t.Fatalf("config changed by a refused write:\n%s\n%s", before, after)
	}
	if a := pt.affinity(30); a != "1" {
		t.Fatalf("irq 30 affinity %q, want 1", a)
	}
	// A CPU that is not online is refused before anything is written.
	pt.write("sys/devices/system/cpu/online", "1\n")
	p = problemOf(t, f.must(t, http.StatusConflict, "PUT", "/api/v1/irqs/30", `{"cpus":[0]}`))
	if !strings.Contains(p.Errors[0].Message, "offline") {
		t.Fatalf("problem %+v", p)
	}
	if a := pt.affinity(30); a != "1" {
		t.Fatalf("irq 30 affinity %q, want 1", a)
	}
	problemOf(t, f.must(t, http.StatusUnprocessableEntity, "PUT", "/api/v1/irqs/30", `{"cpus":[]}`))
}

func TestPinWarningsAreReadyzWarnings(t *testing.T) {
	pt := newPinTree(t)
	f, pc := newPinFixture(t, pt, nil)
	pc.warnings = []string{"irq 31: smp_affinity_list: permission denied"}
	h := decodeJSON[Health](t, f.must(t, http.StatusOK, "GET", "/readyz", ""))
	if h.Status != "ready" || len(h.Warnings) != 1 || !strings.Contains(h.Warnings[0], "irq 31") {
		t.Fatalf("readyz %+v", h)
	}
}

func TestCPUMapRoundTripShowsWhatTheKernelGranted(t *testing.T) {
	pt := newPinTree(t)
	f, _ := newPinFixture(t, pt, nil)
	check := func(want ...string) {
		t.Helper()
		v := decodeJSON[CPUMapView](t, f.must(t, http.StatusOK, "GET", "/api/v1/cpu-map", ""))
		if pin.FormatCPUList(v.Allowed) != "0-1" {
			t.Errorf("allowed %v, want the tree's mask 0-1", v.Allowed)
		}
		if len(v.Loops) != len(want) {
			t.Fatalf("%d loops, want %d", len(v.Loops), len(want))
		}
		for i, l := range v.Loops {
			if g := pin.FormatCPUList(l.Granted); g != want[i] || l.TID <= 0 {
				t.Errorf("loop %d: tid %d granted %q, want %q", i, l.TID, g, want[i])
			}
		}
	}
	w := f.must(t, http.StatusOK, "PUT", "/api/v1/cpu-map",
		`{"mode":"manual","threads":[{"thread":0,"cpus":[1]},{"thread":1,"cpus":[0]}]}`)
	ans := decodeJSON[writeAnswer](t, w)
	if len(ans.Plan.Items) != 1 || ans.Plan.Items[0].Object != "cpu_map" || ans.Plan.Items[0].Apply != config.ApplyInPlace {
		t.Fatalf("plan %+v", ans.Plan)
	}
	check("1", "0")
	f.must(t, http.StatusOK, "PUT", "/api/v1/cpu-map", `{"mode":"none"}`)
	check()
	if m := f.store.Current().CPUMap.Mode; m != config.CPUMapNone {
		t.Fatalf("stored mode %q", m)
	}
	problemOf(t, f.must(t, http.StatusUnprocessableEntity, "PUT", "/api/v1/cpu-map", `{"mode":"manual"}`))
}

func TestTuningNbthreadAppliesAtRuntimeAndPlansRestartLoops(t *testing.T) {
	pt := newPinTree(t)
	f, e := newPinFixture(t, pt, nil)
	dry := decodeJSON[writeAnswer](t, f.must(t, http.StatusOK, "PATCH", "/api/v1/tuning?dry_run=true", `{"nbthread":3}`))
	if len(dry.Plan.Items) != 1 || dry.Plan.Items[0].Apply != config.ApplyRestartLoops {
		t.Fatalf("dry-run plan %+v", dry.Plan)
	}
	dry = decodeJSON[writeAnswer](t, f.must(t, http.StatusOK, "PATCH", "/api/v1/tuning?dry_run=true", `{"maxpipes":100,"sched":{"urgent":40,"normal":40,"bulk":20}}`))
	if len(dry.Plan.Items) != 1 || dry.Plan.Items[0].Apply != config.ApplyInPlace {
		t.Fatalf("dry-run plan %+v", dry.Plan)
	}
	f.must(t, http.StatusOK, "PATCH", "/api/v1/tuning", `{"nbthread":3}`)
	if n := e.Runtime().Nbthread; n != 3 {
		t.Fatalf("nbthread %d after PATCH 3", n)
	}
	info := decodeJSON[Info](t, f.must(t, http.StatusOK, "GET", "/api/v1/info", ""))
	if info.Nbthread != 3 {
		t.Fatalf("info nbthread %d", info.Nbthread)
	}
	f.must(t, http.StatusOK, "PATCH", "/api/v1/tuning", `{"nbthread":1}`)
	if n := e.Runtime().Nbthread; n != 1 {
		t.Fatalf("nbthread %d after PATCH 1", n)
	}
	p := problemOf(t, f.must(t, http.StatusUnprocessableEntity, "PATCH", "/api/v1/tuning", `{"sched":{"urgent":0,"normal":80,"bulk":20}}`))
	if p.Errors[0].Field != "/sched/urgent" {
		t.Fatalf("problem %+v", p)
	}
}
