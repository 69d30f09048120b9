package pin

import (
	"errors"
	"fmt"
	"os"
	"slices"
	"strconv"
	"syscall"

	"github.com/spliced-proxy/spliced/core/config"
)

// PinError is a refused placement: an IRQ affinity write or a thread
// affinity call. It keeps the OS errno so callers can tell the cases apart
// (errors.Is(err, syscall.EIO)) and carries a hint for a human.
//
// It unwraps to the underlying error (hence the errno) and to a core
// sentinel: config.ErrNotFound for ENOENT/ESRCH (no such IRQ or thread),
// config.ErrInvalid for a malformed request caught before any syscall (empty
// list, id out of range), config.ErrConflict for everything the OS refused
// (not root, managed IRQ, offline CPU): the API answers 404, 422 or 409.
type PinError struct {
	What  string        // "irq 50", "thread 4242"
	Op    string        // "set affinity 2-3", "read affinity"
	Errno syscall.Errno // 0 when the failure is not an OS error
	Hint  string        // what it means and what to do; "" when nothing useful to say
	Err   error

	managed bool // the kernel refused to move the IRQ at write time
}

func (e *PinError) Error() string {
	s := e.What + ": " + e.Op + ": " + e.Err.Error()
	if e.Hint != "" {
		s += " (" + e.Hint + ")"
	}
	return s
}

func (e *PinError) Unwrap() []error {
	switch {
	case errors.Is(e.Err, config.ErrInvalid), errors.Is(e.Err, config.ErrNotFound), errors.Is(e.Err, config.ErrConflict):
		return []error{e.Err}
	case e.Errno == syscall.ENOENT || e.Errno == syscall.ESRCH:
		return []error{config.ErrNotFound, e.Err}
	default:
		return []error{config.ErrConflict, e.Err}
	}
}

// Managed reports whether the kernel refused the write because it will not
// let user space move this IRQ: a kernel-managed IRQ (multi-queue devices
// whose driver spreads the vectors itself), or one whose controller cannot
// steer it. Older kernels answer EIO, current ones (measured on 6.18 with a
// virtio-blk queue) EPERM at write(2) even for root; EPERM or EACCES at
// open(2) is the missing privilege instead.
func (e *PinError) Managed() bool { return e.managed }

const managedHint = "kernel-managed IRQ: affinity is fixed by the driver"

// classify turns an OS error into a *PinError with a hint for its errno.
func classify(what, op string, err error) *PinError {
	pe := &PinError{What: what, Op: op, Err: err}
	if errors.As(err, &pe.Errno) {
		pe.Hint = hintFor(what, pe.Errno)
	}
	return pe
}

func hintFor(what string, errno syscall.Errno) string {
	thread := len(what) >= 6 && what[:6] == "thread"
	switch errno {
	case syscall.EACCES, syscall.EPERM:
		if thread {
			return "the thread belongs to another user: needs CAP_SYS_NICE"
		}
		return "needs root (write access to /proc/irq: uid 0 or CAP_DAC_OVERRIDE)"
	case syscall.EIO:
		return managedHint
	case syscall.ERANGE:
		return "CPU id beyond the CPUs this kernel can have (nr_cpu_ids)"
	case syscall.EINVAL:
		if thread {
			return "no CPU of the list is online and allowed by the cpuset of this process"
		}
		return "no CPU of the list is online, or the interrupt controller refuses this mask"
	case syscall.ENOENT:
		return "no such IRQ in /proc/irq"
	case syscall.ESRCH:
		return "no such thread"
	case syscall.EROFS:
		return "/proc is mounted read-only, as in an unprivileged container"
	case syscall.ENOSPC:
		return "no free interrupt vector on the target CPUs"
	}
	return ""
}

// SetIRQAffinity writes cpus to /proc/irq/N/smp_affinity_list. Needs root
// on a real procfs (see doc.go). Every failure is a *PinError; nothing
// is written when the list is malformed or names a CPU that is not online
// (the kernel would silently keep only the online ones, or choose a default
// mask when none is, which is not what was asked for).
func (fs FS) SetIRQAffinity(irq int, cpus []int) error {
	what := "irq " + strconv.Itoa(irq)
	op := "set affinity " + FormatCPUList(cpus)
	if irq < 0 {
		return &PinError{What: what, Op: op, Err: fmt.Errorf("%w: negative IRQ number", config.ErrInvalid)}
	}
	if err := checkCPUs(cpus); err != nil {
		return &PinError{What: what, Op: op, Err: err}
	}
	if online, err := fs.OnlineCPUs(); err == nil {
		if off := missing(cpus, online); len(off) > 0 {
			return &PinError{What: what, Op: op, Errno: syscall.EINVAL,
				Hint: "online CPUs are " + FormatCPUList(online),
				Err:  fmt.Errorf("CPU %s offline or absent: %w", FormatCPUList(off), syscall.EINVAL)}
		}
	}
	path := fs.proc("irq", strconv.Itoa(irq), "smp_affinity_list")
	// O_TRUNC without O_CREAT: harmless on procfs (as a shell's ">" does),
	// needed on a fake tree, and a missing IRQ stays ENOENT.
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_TRUNC, 0)
	if err != nil {
		return classify(what, op, err)
	}
	// One write: procfs parses the buffer of each write(2) as a whole list.
	_, werr := f.Write([]byte(FormatCPUList(cpus) + "\n"))
	cerr := f.Close()
	if werr != nil {
		pe := classify(what, op, werr)
		// The file opened for writing, so privilege is not the problem:
		// EPERM/EIO here is the kernel refusing to move this IRQ.
		if pe.Errno == syscall.EPERM || pe.Errno == syscall.EIO {
			pe.Hint, pe.managed = managedHint, true
		}
		return pe
	}
	if cerr != nil {
		return classify(what, op, cerr)
	}
	return nil
}

// ApplyIRQPins sets several IRQ affinities (irq -> CPUs), in IRQ order. An
// IRQ already on exactly the wanted CPUs is not written (so a managed IRQ
// that is already where it should be does not fail). On the first failure the
// IRQs already written are restored to the affinity they had, newest first,
// and the first error is returned (a *PinError); if a restore fails too, its
// error is appended to the returned one (errors.As still finds the first).
func (fs FS) ApplyIRQPins(pins map[int][]int) error {
	irqs := make([]int, 0, len(pins))
	for irq := range pins {
		irqs = append(irqs, irq)
	}
	slices.Sort(irqs)

	type undo struct {
		irq  int
		prev []int
	}
	var done []undo
	for _, irq := range irqs {
		want := pins[irq]
		prev, err := fs.IRQAffinity(irq)
		if err == nil && FormatCPUList(prev) == FormatCPUList(want) {
			continue
		}
		if err == nil {
			err = fs.SetIRQAffinity(irq, want)
		}
		if err != nil {
			var rollback []error
			for i := len(done) - 1; i >= 0; i-- {
				if rerr := fs.SetIRQAffinity(done[i].irq, done[i].prev); rerr != nil {
					rollback = append(rollback, rerr)
				}
			}
			if len(rollback) > 0 {
				return fmt.Errorf("%w; rollback failed: %w", err, errors.Join(rollback...))
			}
			return err
		}
		done = append(done, undo{irq, prev})
	}
	return nil
}
