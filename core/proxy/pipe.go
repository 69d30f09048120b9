package proxy

import (
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"golang.org/x/sys/unix"
)

// The pipe pool of a loop is bounded: at most Tuning.Maxpipes pipes exist
// at once, in use and idle together (the engine gives each loop its share
// of tuning.maxpipes, so the process-wide bound is HAProxy's); pipes are
// sized with F_SETPIPE_SZ when pipesize is set (kept at the kernel default
// if refused), and with autoPipesize when it is 0 and the process is not
// bound by the per-user pipe quota (autoPipeSize). Changing pipesize closes
// idle pipes and, on release, pipes of the old size.

// autoPipesize is the size of a pipe when pipesize is 0 (automatic) and the
// process may exceed fs.pipe-user-pages-soft. A splice moves at most one
// pipe: with the kernel's 64 KiB (16 pages, HAProxy's default) a MiB took
// 41 splice calls on make bench's tcp 1m row (perf stat), with 256 KiB 15,
// and the proxy's CPU per MiB fell by a fifth (0.119 -> 0.096 ms/MiB,
// medians of 5 interleaved runs, loaded machine); 512 KiB and 1 MiB did
// no better. The kernel takes pages only for bytes in a pipe: the cost is
// at most maxpipes x 256 KiB of kernel memory when every pipe is full at
// once (destinations slower than their sources), 256 MiB at the default
// maxpipes against 64 MiB.
const autoPipesize = 256 << 10

// autoPipeSize is the F_SETPIPE_SZ of a pipe when pipesize is 0:
// autoPipesize for a process the pipe quota does not bind
// (pipeQuotaExempt), 0 (the kernel default) otherwise. An unprivileged
// user's pipes share fs.pipe-user-pages-soft (16 384 pages, 64 MiB:
// maxpipes' default 1 024 pipes of 64 KiB): enlarged pipes would use it up
// sooner, and the kernel gives every pipe made past it 2 pages (pipe(7)).
var autoPipeSize = sync.OnceValue(func() int {
	if pipeQuotaExempt() {
		return autoPipesize
	}
	return 0
})

// pipeQuotaExempt: the kernel does not apply fs.pipe-user-pages-soft to
// this process: it has CAP_SYS_RESOURCE or CAP_SYS_ADMIN (root has both)
// in the initial user namespace. The root of a user namespace (a rootless
// container) has them in its own namespace only, and the kernel checks
// the initial one: its uid_map is not the identity of every uid.
func pipeQuotaExempt() bool {
	if capEff()&(1<<unix.CAP_SYS_RESOURCE|1<<unix.CAP_SYS_ADMIN) == 0 {
		return false
	}
	m, err := os.ReadFile("/proc/self/uid_map")
	if err != nil {
		return false
	}
	f := strings.Fields(string(m))
	return len(f) == 3 && f[0] == "0" && f[1] == "0" && f[2] == "4294967295"
}

// capEff is the process's effective capability set (/proc/self/status
// CapEff), 0 if it cannot be read.
func capEff() uint64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "CapEff:"); ok {
			c, err := strconv.ParseUint(strings.TrimSpace(v), 16, 64)
			if err != nil {
				return 0
			}
			return c
		}
	}
	return 0
}

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
	size  int // requested F_SETPIPE_SZ, 0 = automatic (autoPipeSize)
	gen   int
	inUse int
	used  *atomic.Int64 // the loop's Activity.PipesUsed, may be nil
	fails int           // pipe2 failures (EMFILE...), for tests and stats
}

// NewPipePool returns a pool of at most max pipes of size bytes (0 =
// automatic: autoPipeSize). used, when not nil, tracks the number of pipes in use.
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
	size := pp.size
	if size == 0 {
		size = autoPipeSize()
	}
	if size > 0 {
		// EPERM above /proc/sys/fs/pipe-max-size for an unprivileged
		// process: keep the default size rather than refusing to splice.
		_, _ = unix.FcntlInt(uintptr(p.w), unix.F_SETPIPE_SZ, size)
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
