package pin

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// Real-kernel refusals. They never change an affinity: the non-root write
// fails at open(2), and the managed-IRQ probe writes back the mask the IRQ
// already has.

const childEnv = "PIN_TEST_NONROOT_IRQ"

// TestNonRootChild runs only inside the child started by
// TestSetIRQAffinityAsNonRootIsEACCES, as uid 65534.
func TestNonRootChild(t *testing.T) {
	v := os.Getenv(childEnv)
	if v == "" {
		t.Skip("helper for TestSetIRQAffinityAsNonRootIsEACCES")
	}
	irq, _ := strconv.Atoi(v)
	aff, err := Host().IRQAffinity(irq)
	if err != nil {
		t.Fatalf("reading needs no privilege, got %v", err)
	}
	err = Host().SetIRQAffinity(irq, aff)
	var pe *PinError
	if !errors.As(err, &pe) || pe.Errno != syscall.EACCES || pe.Managed() || !strings.Contains(pe.Hint, "needs root") {
		t.Fatalf("non-root write: %v (%#v), want EACCES with the root hint", err, pe)
	}
	t.Logf("as uid %d: %v", os.Getuid(), err)
}

func TestSetIRQAffinityAsNonRootIsEACCES(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to start a child as another user")
	}
	irqs, err := Host().IRQs()
	if err != nil || len(irqs) == 0 || irqs[0].Affinity == nil {
		t.Skipf("no IRQ with a readable affinity: %v", err)
	}
	// The test binary may sit in a directory only root can enter: copy it
	// where uid 65534 can run it.
	dir, err := os.MkdirTemp("", "pin-nonroot-")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "pin.test")
	if err := copyFile(os.Args[0], bin, 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(bin, "-test.run=^TestNonRootChild$", "-test.v", "-test.count=1")
	cmd.Env = append(os.Environ(), childEnv+"="+strconv.Itoa(irqs[0].IRQ), "GOCOVERDIR=")
	cmd.Dir = dir
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: 65534, Gid: 65534}}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child as uid 65534: %v\n%s", err, out)
	}
	if !strings.Contains(string(out), "permission denied") {
		t.Fatalf("child did not exercise the write:\n%s", out)
	}
}

func copyFile(src, dst string, mode os.FileMode) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, mode)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// Block-queue IRQs (virtio-blk "virtioN-req.M", NVMe "nvmeXqY") are
// kernel-managed on current kernels. Writing back the mask such an IRQ
// already has must come back as a managed refusal, or succeed when the IRQ
// turns out not to be managed (then nothing moved either).
func TestSetIRQAffinityOnManagedIRQIsRefused(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root to reach the kernel's check")
	}
	irqs, err := Host().IRQs()
	if err != nil {
		t.Skip(err)
	}
	for _, q := range irqs {
		if q.Affinity == nil || !(strings.Contains(q.Name, "-req.") || strings.HasPrefix(q.Name, "nvme") && strings.Contains(q.Name, "q")) {
			continue
		}
		err := Host().SetIRQAffinity(q.IRQ, q.Affinity)
		if err == nil {
			t.Logf("irq %d (%s) accepted its own mask: not managed here", q.IRQ, q.Name)
			continue
		}
		var pe *PinError
		if !errors.As(err, &pe) || !pe.Managed() || !strings.Contains(pe.Hint, "kernel-managed") {
			t.Fatalf("irq %d (%s): %v, want a managed refusal", q.IRQ, q.Name, err)
		}
		after, _ := Host().IRQAffinity(q.IRQ)
		if FormatCPUList(after) != FormatCPUList(q.Affinity) {
			t.Errorf("irq %d moved from %v to %v", q.IRQ, q.Affinity, after)
		}
		t.Logf("irq %d (%s): %v", q.IRQ, q.Name, err)
		return
	}
	t.Skip("no managed block-queue IRQ on this machine")
}
