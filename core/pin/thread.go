package pin

import (
	"fmt"
	"strconv"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

// SetThreadAffinity pins the calling OS thread to cpus (sched_setaffinity
// with pid 0, which Linux applies to the calling thread only, not the whole
// process). The caller must hold runtime.LockOSThread, or the goroutine may
// move to another thread right after and the pin lands on a thread the
// runtime hands to someone else. No privilege is needed to narrow or widen a
// thread's own mask within the process's cpuset.
//
// ids above 1023 cannot be expressed in unix.CPUSet and are refused. Errors
// are *PinError (EINVAL: no CPU of the list online and allowed).
func SetThreadAffinity(cpus []int) error {
	what := "thread " + strconv.Itoa(unix.Gettid())
	op := "set affinity " + FormatCPUList(cpus)
	if err := checkCPUs(cpus); err != nil {
		return &PinError{What: what, Op: op, Err: err}
	}
	set, err := toCPUSet(cpus)
	if err != nil {
		return &PinError{What: what, Op: op, Err: fmt.Errorf("%w: %w", config.ErrInvalid, err)}
	}
	if err := unix.SchedSetaffinity(0, &set); err != nil {
		return classify(what, op, fmt.Errorf("sched_setaffinity: %w", err))
	}
	return nil
}

// ThreadAffinity reads back the calling OS thread's CPU mask, i.e. what the
// kernel granted (it may be narrower than asked when the cpuset changed).
// Meaningful only under runtime.LockOSThread, like SetThreadAffinity.
func ThreadAffinity() ([]int, error) {
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(0, &set); err != nil {
		return nil, classify("thread "+strconv.Itoa(unix.Gettid()), "read affinity", fmt.Errorf("sched_getaffinity: %w", err))
	}
	return fromCPUSet(&set), nil
}

// ThreadAffinityOf reads the CPU mask of any thread of any process by its
// kernel thread id (what a loop records with unix.Gettid after locking its
// goroutine), so the API can show what each loop was granted without running
// code on the loop. Errors are *PinError (ESRCH: no such thread, wrapping
// config.ErrNotFound).
func ThreadAffinityOf(tid int) ([]int, error) {
	what := "thread " + strconv.Itoa(tid)
	if tid <= 0 {
		return nil, &PinError{What: what, Op: "read affinity", Err: fmt.Errorf("%w: thread id must be positive", config.ErrInvalid)}
	}
	var set unix.CPUSet
	if err := unix.SchedGetaffinity(tid, &set); err != nil {
		return nil, classify(what, "read affinity", fmt.Errorf("sched_getaffinity: %w", err))
	}
	return fromCPUSet(&set), nil
}
