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
