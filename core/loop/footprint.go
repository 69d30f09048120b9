package loop

import (
	"unsafe"

	"golang.org/x/sys/unix"
)

// Footprint is the memory of a loop's own tables, for the memory report
// (GET /api/v1/memory): each is one allocation of its capacity.
type Footprint struct {
	FDs, FDCap       int // registered fds, and the fd table's capacity (indexed by fd)
	Timers, TimerCap int // armed timers, and the timer heap's capacity
	EventCap         int // epoll_wait's event array
}

// Entry sizes of the tables in Footprint.
const (
	FDSlotBytes    = unsafe.Sizeof((*FD)(nil))
	TimerSlotBytes = unsafe.Sizeof((*Timer)(nil))
	EventBytes     = unsafe.Sizeof(unix.EpollEvent{})
)

// Footprint counts the loop's tables (loop thread: O(fd table)).
func (l *Loop) Footprint() Footprint {
	f := Footprint{FDCap: cap(l.fds), Timers: len(l.timers), TimerCap: cap(l.timers), EventCap: cap(l.events)}
	for _, p := range l.fds {
		if p != nil {
			f.FDs++
		}
	}
	return f
}
