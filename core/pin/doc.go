// Package pin owns placement on the machine (seed 003): the CPU topology
// (online CPUs, the process affinity mask, cores, packages, last-level cache
// groups, NUMA nodes), the IRQ table (/proc/interrupts with each IRQ's
// affinity and the NIC it belongs to), writing IRQ affinities with rollback,
// the "separate" IRQ policy, and the thread-affinity calls loop threads use
// to pin themselves. It also owns the cpulist format ("0-3,5") both ways.
//
// What it must not do: keep state (every call reads the kernel afresh; FS is
// a value naming the procfs and sysfs roots, injectable so tests run on a
// tree built in t.TempDir()), import any spliced package other than config,
// decide when to pin (the engine does, from the config snapshot), log.
//
// Privilege:
//   - reading everything (Topology, IRQs, IRQAffinity, ThreadAffinity,
//     ThreadAffinityOf): none.
//   - SetIRQAffinity / ApplyIRQPins on the real /proc: root (write access
//     to the root-owned /proc/irq/N files, i.e. uid 0 or CAP_DAC_OVERRIDE;
//     otherwise EACCES at open) and a writable /proc (unprivileged
//     containers mount /proc/irq read-only: EROFS). Kernel-managed IRQs
//     (multi-queue block and NIC drivers that spread their vectors
//     themselves) and IRQs whose controller cannot steer them refuse every
//     write, even root's: EPERM at write(2) on current kernels (measured on
//     6.18), EIO on older ones; PinError.Managed tells that apart from a
//     missing privilege. Everything comes back as a *PinError with the errno
//     and a hint, and nothing is left half-applied.
//   - SetThreadAffinity: none, within the process's cpuset.
//
// Threads: SetThreadAffinity and ThreadAffinity act on the calling OS thread
// only (sched_setaffinity/sched_getaffinity with pid 0), never on the whole
// process. A loop calls them from its own goroutine after
// runtime.LockOSThread. A pinned thread must not go back to the runtime's
// pool with its pin: a loop either exits its goroutine still locked (the
// runtime then ends the thread) or restores the mask before
// UnlockOSThread; otherwise unrelated goroutines later run confined to that
// CPU. (Threads the runtime creates while a goroutine is locked come from its
// template thread, so a pin does not leak into new threads.)
// ThreadAffinityOf(tid) reads any thread's mask from any goroutine: the API
// uses it with the tid each loop records after locking.
// FS.AffinityMask and Topology ask sched_getaffinity of the calling thread
// for the process mask; call them from ordinary goroutines (the API, the
// engine at start), never from a pinned loop.
//
// Everything else may be called from any goroutine; none of it belongs on a
// loop's hot path (it reads files and allocates).
package pin
