package proxy

import (
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The pipe pool of a loop is bounded: at most Tuning.Maxpipes pipes exist
// at once, in use and idle together (the engine gives each loop its share
// of tuning.maxpipes, so the process-wide bound is HAProxy's); pipes are
// sized with F_SETPIPE_SZ when pipesize is set (kept at the kernel default
// if refused). Changing pipesize closes idle pipes and, on release, pipes of
// the old size.

// Pipe is a kernel pipe used as the splice(2) relay between two sockets.
// Data counts the bytes spliced in and not yet spliced out: the kernel does
// not tell, and it is what distinguishes "pipe full" from "socket empty"
// when splice returns EAGAIN.
type Pipe struct {
	r, w int // read (consumer) and write (producer) ends
	Data int
	size int // capacity in bytes as reported by F_GETPIPE_SZ
	gen  int // pool generation it was made for (pipesize changes bump it)
}

// Size is the pipe capacity in bytes.
func (p *Pipe) Size() int { return p.size }

func (p *Pipe) close() {
	closeFd(p.r)
	closeFd(p.w)
	p.r, p.w = -1, -1
}

// PipePool is a loop's bounded pool of pipes (HAProxy's src/pipe.c, without
// the lock since the pool belongs to one loop). At most max pipes exist at
// once (in use plus idle): each costs two file descriptors and up to
// pipesize of kernel memory. Get returns nil when the bound is reached or
// the kernel refuses, and the caller falls back to a buffered copy.
type PipePool struct {
	free  []*Pipe
	max   int
	size  int // requested F_SETPIPE_SZ, 0 = kernel default
	gen   int
	inUse int
	used  *atomic.Int64 // the loop's Activity.PipesUsed, may be nil
	fails int           // pipe2 failures (EMFILE...), for tests and stats
}

// NewPipePool returns a pool of at most max pipes of size bytes (0 = kernel
// default). used, when not nil, tracks the number of pipes in use.
func NewPipePool(max, size int, used *atomic.Int64) *PipePool {
	return &PipePool{max: max, size: size, used: used}
}

// SetLimits changes the bound and the pipe size. Idle pipes of another size
// are closed at once; pipes in use of another size are closed when released.
func (pp *PipePool) SetLimits(max, size int) {
	pp.max = max
	if size != pp.size {
		pp.size = size
		pp.gen++
		pp.drainIdle()
	}
	for len(pp.free) > 0 && len(pp.free)+pp.inUse > pp.max {
		pp.pop().close()
	}
}

// InUse is the number of pipes handed out.
func (pp *PipePool) InUse() int { return pp.inUse }

// Idle is the number of pipes kept open for reuse.
func (pp *PipePool) Idle() int { return len(pp.free) }

// Failures is how many times the kernel refused a new pipe.
func (pp *PipePool) Failures() int { return pp.fails }

func (pp *PipePool) pop() *Pipe {
	n := len(pp.free)
	p := pp.free[n-1]
	pp.free[n-1] = nil
	pp.free = pp.free[:n-1]
	return p
}

func (pp *PipePool) drainIdle() {
	for len(pp.free) > 0 {
		pp.pop().close()
	}
}

// Get returns an empty pipe, or nil when none may or can be created.
func (pp *PipePool) Get() *Pipe {
	var p *Pipe
	if len(pp.free) > 0 {
		p = pp.pop()
	} else {
		if pp.inUse >= pp.max {
			return nil
		}
		p = pp.create()
		if p == nil {
			pp.fails++
			return nil
		}
	}
	pp.inUse++
	if pp.used != nil {
		pp.used.Add(1)
	}
	return p
}

func (pp *PipePool) create() *Pipe {
	var fds [2]int
	if err := unix.Pipe2(fds[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		return nil
	}
	p := &Pipe{r: fds[0], w: fds[1], gen: pp.gen}
	if pp.size > 0 {
		// EPERM above /proc/sys/fs/pipe-max-size for an unprivileged
		// process: keep the default size rather than refusing to splice.
		_, _ = unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, pp.size)
	}
	sz, err := unix.FcntlInt(uintptr(p.w), unix.F_GETPIPE_SZ, 0)
	if err != nil || sz <= 0 {
		sz = 65536
	}
	p.size = sz
	return p
}

// Put releases p. A pipe that still holds data is closed, never pooled: the
// next user would otherwise receive someone else's bytes.
func (pp *PipePool) Put(p *Pipe) {
	pp.inUse--
	if pp.used != nil {
		pp.used.Add(-1)
	}
	if p.Data != 0 || p.gen != pp.gen || len(pp.free)+pp.inUse >= pp.max {
		p.close()
		return
	}
	pp.free = append(pp.free, p)
}

// Close closes every idle pipe. Pipes in use are closed when released.
func (pp *PipePool) Close() {
	pp.drainIdle()
	pp.max = 0
}
