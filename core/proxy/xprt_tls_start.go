package proxy

import (
	"os"
	"sync/atomic"
	"syscall"

	"golang.org/x/sys/unix"
)

// The start of a handshake's goroutine, off the loop's P.
//
// A goroutine that the loop thread starts (go) or wakes (a channel send)
// goes to the loop's P, in its runnext slot, and only another P can run it:
// the loop goroutine never gives its P up (it sleeps in a raw epoll_wait,
// core/loop). The Go scheduler takes a runnext from another P last, and
// after a usleep(3) when that P runs a goroutine not in a syscall
// (runtime.runqgrab: "give pp a chance to schedule runnext"), which the
// loop always is: with the kernel's 50 µs timer slack, a sleep of 55-60 µs
// before each handshake that starts while the helper Ps have nothing else
// to do, the CPU idle meanwhile. Measured with one benchtool handshake
// worker (Activity.HandshakeHandoffNs, split): 135 µs from the accept to
// the handshake's goroutine running, against 21 µs for the hand-back to the
// loop; perf record -e syscalls:sys_enter_nanosleep -g: 0.97
// runtime.runqgrab usleeps per handshake.
//
// So the loop does not start them: it pushes the job on a lock-free stack
// and, when the starter goroutine sleeps, writes its eventfd (at most one
// write per sleep, as loop.Notify). The starter waits for that eventfd in
// Go's runtime poller, so the P that runs it is the one whose M polled the
// network — not the loop's — and the handshakes' goroutines it starts go
// to that P, which runs them as soon as the starter parks. Each Worker has
// one, shared by its two pools, from NewWorker to CloseAll.
type hsStarter struct {
	head     atomic.Pointer[tlsJob] // jobs pushed by the loop, newest first
	sleeping atomic.Bool            // parked (or about to): a push writes efd
	broken   atomic.Bool            // closed, or the runtime poller refused to wait: jobs start where pushed
	efd      int
	f        *os.File // owns efd
	rc       syscall.RawConn
	closed   bool // loop thread
}

// newHSStarter makes a starter and starts its goroutine.
func newHSStarter() (*hsStarter, error) {
	efd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		return nil, os.NewSyscallError("eventfd", err)
	}
	f := os.NewFile(uintptr(efd), "tls-start")
	rc, err := f.SyscallConn()
	if err != nil {
		f.Close()
		return nil, err
	}
	s := &hsStarter{efd: efd, f: f, rc: rc}
	go s.run()
	return s, nil
}

// close ends the starter (loop thread, once no job will be pushed: the
// pools stopped first): its goroutine starts what is left on the stack and
// exits, and the eventfd closes.
func (s *hsStarter) close() {
	if s == nil || s.closed {
		return
	}
	s.closed = true
	s.f.Close() // wakes the starter's wait with an error
}

// push hands j to the starter (loop thread, before close). The job is
// pushed before the sleeping flag is read, and the starter sets the flag
// before it looks at the stack a last time (sequentially consistent
// atomics), so either it sees the job or this push writes the eventfd.
func (s *hsStarter) push(j *tlsJob) {
	for {
		old := s.head.Load()
		j.next = old
		if s.head.CompareAndSwap(old, j) {
			break
		}
	}
	if s.broken.Load() {
		s.startAll()
		return
	}
	if s.sleeping.Load() && s.sleeping.CompareAndSwap(true, false) {
		one := [8]byte{1}
		for {
			// EAGAIN: the counter is saturated, a wake-up is pending.
			if _, err := unix.Write(s.efd, one[:]); err != unix.EINTR {
				return
			}
		}
	}
}

// run is the starter goroutine: it starts the goroutine of every job
// pushed, oldest first, and parks in the runtime poller when none is left.
func (s *hsStarter) run() {
	var buf [8]byte
	drain := func(fd uintptr) bool {
		_, err := unix.Read(int(fd), buf[:])
		return err != unix.EAGAIN
	}
	for {
		list := s.head.Swap(nil)
		if list == nil {
			s.sleeping.Store(true)
			if s.head.Load() != nil && s.sleeping.CompareAndSwap(true, false) {
				continue // pushed meanwhile, and nobody writes the eventfd
			}
			// Parked until a push writes the eventfd (or wrote it
			// already: drain reads it first).
			if err := s.rc.Read(drain); err != nil {
				// Closed (or not pollable after all, never for an
				// eventfd): a later push starts its job itself, and
				// whatever is on the stack now is started here.
				s.broken.Store(true)
				s.startAll()
				s.f.Close()
				return
			}
			continue
		}
		startJobs(list)
	}
}

// startAll starts the goroutine of every job on the stack.
func (s *hsStarter) startAll() {
	if list := s.head.Swap(nil); list != nil {
		startJobs(list)
	}
}

// startJobs starts the goroutines of list (newest first), oldest first.
func startJobs(list *tlsJob) {
	var fifo *tlsJob
	for list != nil {
		next := list.next
		list.next = fifo
		fifo, list = list, next
	}
	for j := fifo; j != nil; {
		next := j.next
		j.next = nil
		go j.h.run(j)
		j = next
	}
}
