package core

import (
	"context"
	"errors"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/pin"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Control is the whole surface the admin API uses to drive the data plane.
// Implementations must be safe for use from any goroutine; the API serialises
// calls to Apply.
type Control interface {
	// Apply makes the data plane run snap and returns once every loop runs it
	// (binds opened or closed, servers added or removed). On error nothing
	// changed: the data plane still runs the previous snapshot, and the error
	// is a *config.ApplyError (wrapping config.ErrConflict and the OS error)
	// whenever the OS refused something. snap is normalized and validated
	// and must not be modified after the call.
	Apply(ctx context.Context, snap *config.Config) error

	// Runtime reports what the data plane actually runs, for /api/v1/info.
	Runtime() Runtime

	// Stats returns the counters of every frontend, backend and server of
	// the running generation. It reads atomics only: it never waits for the
	// loops or for an Apply in progress.
	Stats() stats.Snapshot

	// LoopActivity returns each loop's activity counters (HAProxy's "show
	// activity"), by loop index; empty before the first Apply.
	LoopActivity() []stats.LoopActivity

	// Memory reports the process's memory (resident set, the Go runtime's
	// classes) and what each loop's data plane holds, counted by each loop
	// on its own thread (GET /api/v1/memory); within ctx.
	Memory(ctx context.Context) (stats.Memory, error)

	// Close stops accepting, closes idle keep-alive connections, lets
	// requests in flight and tcp tunnels finish until tuning.grace_ms or
	// ctx ends, then closes what is left and releases every resource.
	// From the moment it is called, Stopping reports true and Apply
	// returns ErrStopping at once, without waiting for the grace.
	Close(ctx context.Context) error

	// Stopping reports whether Close was called (the process is stopping:
	// /readyz answers 503 "stopping", writes are refused).
	Stopping() bool

	Placement
	LimitTables
}

// Placement is the CPU placement part of Control: the loop
// threads and the IRQs as the data plane sees them. The IRQs are read
// through it, not from a procfs/sysfs root handed out, so the API reads the
// same tree the data plane pins in (tests give the engine a fake one).
type Placement interface {
	// Threads describes every live loop thread: its tid, the CPUs the
	// cpu_map gives it and what the kernel reports for it now.
	Threads() []ThreadState
	// PinWarnings lists the pins of the running config that could not be
	// applied (at start: a CPU gone, no root), one sentence each.
	PinWarnings() []string
	// AffinityMask is the process affinity mask (what cpu_map auto
	// distributes).
	AffinityMask() ([]int, error)
	// IRQs lists every numbered IRQ with its affinity and counts.
	IRQs() ([]pin.IRQ, error)
	// IRQ reads one IRQ; an unknown one is an error wrapping
	// config.ErrNotFound.
	IRQ(n int) (pin.IRQ, error)
}

// ThreadState is one loop thread as GET /api/v1/cpu-map shows it.
type ThreadState struct {
	Thread int `json:"thread" example:"0"`
	// TID is the kernel thread id (/proc/PID/task/TID).
	TID int `json:"tid" example:"4242"`
	// State is "active", or "draining" for a loop removed by a smaller
	// nbthread that still finishes its connections.
	State string `json:"state" example:"active"`
	// Configured is what the cpu_map asks for this thread; null when the
	// thread is not pinned (it keeps the process's mask).
	Configured []int `json:"configured" example:"0"`
	// Granted is the thread's CPU mask as the kernel reports it now
	// (sched_getaffinity of the tid).
	Granted []int `json:"granted" example:"0"`
	// Error says why Granted could not be read.
	Error string `json:"error,omitempty"`
}

// ErrStopping is what Apply returns once Close was called: the data plane
// takes no change while it stops (the API answers 503 "stopping").
var ErrStopping = errors.New("the process is stopping: no change is applied")

// Runtime is what the data plane reports about itself.
type Runtime struct {
	Nbthread   int   `json:"nbthread"`
	Maxconn    int   `json:"maxconn"`
	Generation int64 `json:"generation"` // generation of the snapshot it runs
	// Warnings says what runs below what the config asks without stopping
	// the data plane (the fd limit lowering maxconn); /readyz lists them.
	Warnings []string `json:"warnings,omitempty"`
}
