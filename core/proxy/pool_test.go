package proxy

import (
	"errors"
	"os"
	"os/exec"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

func TestBufPoolReusesEmptyBuffersOfCurrentSize(t *testing.T) {
	p := NewBufPool(1024)
	b := p.Get()
	if b.Cap() != 1024 || b.Len() != 0 || b.Room() != 1024 {
		t.Fatalf("new buffer cap=%d len=%d room=%d", b.Cap(), b.Len(), b.Room())
	}
	copy(b.Free(), "hello")
	b.Produced(5)
	if string(b.Data()) != "hello" {
		t.Fatalf("data %q", b.Data())
	}
	b.Consumed(5)
	if b.Len() != 0 || b.Room() != 1024 {
		t.Fatalf("emptied buffer did not rewind: len=%d room=%d", b.Len(), b.Room())
	}
	p.Put(b)
	if p.InUse() != 0 || p.Idle() != 1 {
		t.Fatalf("inUse=%d idle=%d", p.InUse(), p.Idle())
	}
	if p.Get() != b {
		t.Fatal("idle buffer not reused")
	}
	p.SetSize(2048)
	p.Put(b) // old size: dropped
	if p.Idle() != 0 {
		t.Fatalf("buffer of the old size was pooled")
	}
	if got := p.Get().Cap(); got != 2048 {
		t.Fatalf("cap after SetSize = %d", got)
	}
}

func TestPipePoolBoundedAndDirtyPipesClosed(t *testing.T) {
	var used atomic.Int64
	pp := NewPipePool(2, 0, &used)
	a, b := pp.Get(), pp.Get()
	if a == nil || b == nil {
		t.Fatal("could not get two pipes")
	}
	if pp.Get() != nil {
		t.Fatal("pool handed out more than max pipes")
	}
	if used.Load() != 2 {
		t.Fatalf("used = %d", used.Load())
	}
	if a.Size() < 4096 {
		t.Fatalf("pipe size %d", a.Size())
	}
	// A pipe with data in it is closed on release.
	if _, err := unix.Write(b.w, []byte("x")); err != nil {
		t.Fatal(err)
	}
	b.Data = 1
	bw := b.w
	pp.Put(b)
	if pp.Idle() != 0 {
		t.Fatal("pipe holding data was pooled")
	}
	if _, err := unix.FcntlInt(uintptr(bw), unix.F_GETFD, 0); err != unix.EBADF {
		t.Fatalf("dirty pipe fd still open: %v", err)
	}
	pp.Put(a)
	if pp.Idle() != 1 || pp.InUse() != 0 || used.Load() != 0 {
		t.Fatalf("idle=%d inUse=%d used=%d", pp.Idle(), pp.InUse(), used.Load())
	}
	if pp.Get() != a {
		t.Fatal("clean pipe not reused")
	}
	pp.Put(a)
	pp.Close()
	if pp.Idle() != 0 {
		t.Fatal("Close left idle pipes")
	}
}

func TestPipePoolAppliesPipesize(t *testing.T) {
	pp := NewPipePool(4, 256*1024, nil)
	p := pp.Get()
	if p == nil {
		t.Fatal("no pipe")
	}
	// Unprivileged processes are limited by /proc/sys/fs/pipe-max-size
	// (1 MiB by default), so 256 KiB must be granted.
	if p.Size() != 256*1024 {
		t.Fatalf("pipe size = %d, want 262144", p.Size())
	}
	pp.SetLimits(4, 0)
	pp.Put(p) // made for the old size: closed
	if pp.Idle() != 0 {
		t.Fatal("pipe of the old size was pooled")
	}
	pp.Close()
}

// TestBufPoolTrimKeepsWhatTheLoadUses pins the trim's arithmetic: what no
// Get needed during a period, beyond trimReserve, is given back, the
// coldest first, its pages zeroed at once (returned to the kernel); what
// a steady load keeps taking is not.
func TestBufPoolTrimKeepsWhatTheLoadUses(t *testing.T) {
	p := NewBufPool(16 << 10)
	var bs []*Buffer
	for range 40 {
		bs = append(bs, p.Get())
	}
	for _, b := range bs {
		copy(b.Free(), "dirty")
		p.Put(b)
	}
	cold := p.free[0]   // the first put back: the bottom of the free list
	p.low = len(p.free) // as arming the timer does
	// A load that keeps 10 buffers busy: the low-water mark is 30.
	for range 100 {
		var held [10]*Buffer
		for i := range held {
			held[i] = p.Get()
		}
		for _, b := range held {
			p.Put(b)
		}
	}
	p.trim()
	if got, want := p.Idle(), 40-(30-trimReserve); got != want {
		t.Fatalf("after a period with 10 in use: %d free, want %d", got, want)
	}
	if p.Trimmed() != 30-trimReserve {
		t.Fatalf("trimmed %d, want %d", p.Trimmed(), 30-trimReserve)
	}
	if string(cold.b[:5]) != "\x00\x00\x00\x00\x00" {
		t.Fatalf("a trimmed buffer's pages were not given back: %q", cold.b[:5])
	}
	for _, b := range p.free {
		if b == cold {
			t.Fatal("the coldest buffer was kept")
		}
	}
	// A lull: nothing taken during the next period, all but the reserve go.
	p.trim()
	if p.Idle() != trimReserve {
		t.Fatalf("after an idle period: %d free, want %d", p.Idle(), trimReserve)
	}
	p.trim()
	if p.Idle() != trimReserve {
		t.Fatalf("the reserve was trimmed: %d free", p.Idle())
	}
}

// TestBufPoolTrimsOnItsLoop: a burst's buffers are given back by the
// loop's timer once the burst is over, and the timer stops with them.
func TestBufPoolTrimsOnItsLoop(t *testing.T) {
	e := newEnv(t, defaultTuning())
	e.do(func() {
		var bs []*Buffer
		for range 100 {
			bs = append(bs, e.w.Bufs.Get())
		}
		for _, b := range bs {
			e.w.Bufs.Put(b)
		}
	})
	testutil.Eventually(t, 10*time.Second, func() bool {
		var idle int
		var armed bool
		e.do(func() { idle, armed = e.w.Bufs.Idle(), e.w.Bufs.tm.Armed() })
		return idle == trimReserve && !armed
	}, "the burst's buffers trimmed down to the reserve, the timer stopped")
}

// TestPipePoolSizesAutomatically: pipesize 0 is 256 KiB (autoPipesize)
// for a process the per-user pipe quota does not bind (pipeQuotaExempt:
// root in make test and make bench), the kernel's default
// otherwise. Before, 0 was always the kernel's 64 KiB: 41 splice calls per
// MiB on the tcp 1m row, not 15.
func TestPipePoolSizesAutomatically(t *testing.T) {
	pp := NewPipePool(1, 0, nil)
	defer pp.Close()
	p := pp.Get()
	if p == nil {
		t.Fatal("no pipe")
	}
	defer pp.Put(p)
	want := 256 << 10
	if !pipeQuotaExempt() {
		want = 16 * os.Getpagesize() // the kernel's default: 16 pages
	}
	if p.Size() != want {
		t.Fatalf("pipe size %d with pipesize 0, want %d (CapEff %#x)", p.Size(), want, capEff())
	}
}

// TestPipeQuotaExemptNeedsTheInitialUserNamespace: a process whose uid_map
// is not the identity (the root of a rootless container) is bound by the
// pipe quota whatever its CapEff says, so its pipes keep the kernel's
// size. Run as root here, a child in a new user namespace checks it.
func TestPipeQuotaExemptNeedsTheInitialUserNamespace(t *testing.T) {
	if os.Getenv("SPLICED_PIPE_QUOTA_CHILD") == "1" {
		if pipeQuotaExempt() {
			os.Exit(3)
		}
		os.Exit(0)
	}
	if !pipeQuotaExempt() {
		t.Skip("not exempt from the pipe quota to begin with")
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestPipeQuotaExemptNeedsTheInitialUserNamespace$")
	cmd.Env = append(os.Environ(), "SPLICED_PIPE_QUOTA_CHILD=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{
		Cloneflags:  syscall.CLONE_NEWUSER,
		UidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
		GidMappings: []syscall.SysProcIDMap{{ContainerID: 0, HostID: 0, Size: 1}},
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		var ee *exec.ExitError
		if errors.As(err, &ee) && ee.ExitCode() == 3 {
			t.Fatal("root of a user namespace taken as exempt from the pipe quota")
		}
		t.Skipf("no user namespace here: %v %s", err, out)
	}
}
