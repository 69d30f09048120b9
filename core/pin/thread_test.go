package pin

import (
	"errors"
	"runtime"
	"slices"
	"syscall"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/config"
)

// onLockedThread runs fn on a goroutine locked to its own OS thread. If fn
// reports the thread's mask could not be restored, the goroutine exits still
// locked so the runtime discards the thread instead of reusing it pinned.
func onLockedThread(t *testing.T, fn func() (restored bool)) {
	t.Helper()
	done := make(chan struct{})
	go func() {
		defer close(done)
		runtime.LockOSThread()
		if fn() {
			runtime.UnlockOSThread()
		}
	}()
	<-done
}

func TestThreadAffinityRoundTripOnThisMachine(t *testing.T) {
	onLockedThread(t, func() bool {
		orig, err := ThreadAffinity()
		if err != nil {
			t.Error(err)
			return true
		}
		if len(orig) == 0 {
			t.Error("empty affinity mask")
			return true
		}
		target := orig[len(orig)-1]
		if err := SetThreadAffinity([]int{target}); err != nil {
			t.Errorf("SetThreadAffinity(%d): %v", target, err)
			return true
		}
		got, err := ThreadAffinity()
		if err != nil || !slices.Equal(got, []int{target}) {
			t.Errorf("after pinning to %d the kernel reports %v, %v", target, got, err)
		}
		tid := unix.Gettid()
		seen := make(chan []int)
		go func() { m, _ := ThreadAffinityOf(tid); seen <- m }() // from another thread
		if m := <-seen; !slices.Equal(m, []int{target}) {
			t.Errorf("ThreadAffinityOf(%d) from another goroutine = %v, want [%d]", tid, m, target)
		}
		// Only this thread moved: another thread keeps the process mask.
		other := make(chan []int)
		go func() {
			runtime.LockOSThread()
			m, _ := ThreadAffinity()
			runtime.UnlockOSThread()
			other <- m
		}()
		if m := <-other; !slices.Equal(m, orig) {
			t.Errorf("another thread sees %v, want the unpinned mask %v", m, orig)
		}
		if err := SetThreadAffinity(orig); err != nil {
			t.Errorf("restore %v: %v", orig, err)
			return false
		}
		back, err := ThreadAffinity()
		if err != nil || !slices.Equal(back, orig) {
			t.Errorf("restored mask %v, %v; want %v", back, err, orig)
			return false
		}
		return true
	})
}

func TestSetThreadAffinityRefusals(t *testing.T) {
	online, err := Host().OnlineCPUs()
	if err != nil {
		t.Skipf("online CPUs unknown: %v", err)
	}
	absent := online[len(online)-1] + 1 // not online on this machine
	tests := []struct {
		name     string
		cpus     []int
		errno    syscall.Errno
		sentinel error
	}{
		{"empty list", nil, 0, config.ErrInvalid},
		{"id beyond the CPU set", []int{2000}, 0, config.ErrInvalid},
		{"negative id", []int{-1}, 0, config.ErrInvalid},
		{"only an absent CPU", []int{absent}, syscall.EINVAL, config.ErrConflict},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			onLockedThread(t, func() bool {
				before, _ := ThreadAffinity()
				err := SetThreadAffinity(tt.cpus)
				after, _ := ThreadAffinity()
				if !slices.Equal(before, after) {
					t.Errorf("mask changed %v -> %v by a refused call", before, after)
					return false
				}
				var pe *PinError
				if !errors.As(err, &pe) || pe.Errno != tt.errno || !errors.Is(err, tt.sentinel) {
					t.Errorf("err %v (%#v), want errno %v wrapping %v", err, pe, tt.errno, tt.sentinel)
				}
				if tt.errno != 0 && (!errors.Is(err, tt.errno) || pe.Hint == "") {
					t.Errorf("err %v: errno lost or no hint", err)
				}
				return true
			})
		})
	}
}

func TestThreadAffinityOfUnknownThreadIsNotFound(t *testing.T) {
	// pid_max is at most 2^22: this id cannot exist.
	_, err := ThreadAffinityOf(1 << 30)
	var pe *PinError
	if !errors.As(err, &pe) || pe.Errno != syscall.ESRCH || !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("err %v, want ESRCH wrapping ErrNotFound", err)
	}
	if _, err := ThreadAffinityOf(0); !errors.Is(err, config.ErrInvalid) {
		t.Fatalf("tid 0: %v, want ErrInvalid (0 would mean the calling thread)", err)
	}
}
