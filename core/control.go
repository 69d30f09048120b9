package core

import (
	"context"
	"errors"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
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

	// Close stops accepting, closes idle keep-alive connections, lets
	// requests in flight and tcp tunnels finish until tuning.grace_ms or
	// ctx ends, then closes what is left and releases every resource.
	// From the moment it is called, Stopping reports true and Apply
	// returns ErrStopping at once, without waiting for the grace.
	Close(ctx context.Context) error

	// Stopping reports whether Close was called (the process is stopping:
	// /readyz answers 503 "stopping", writes are refused).
	Stopping() bool
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

// Nop is a Control that applies nothing to the network. It records the last
// snapshot so tests and the control-plane-only build can observe Apply.
type Nop struct {
	// Fail, when set, is returned by Apply (to test rollback).
	Fail     func(snap *config.Config) error
	last     atomic.Pointer[config.Config]
	stopping atomic.Bool
}

// Apply records snap, or returns the error Fail gives; ErrStopping after
// Close.
func (n *Nop) Apply(_ context.Context, snap *config.Config) error {
	if n.stopping.Load() {
		return ErrStopping
	}
	if n.Fail != nil {
		if err := n.Fail(snap); err != nil {
			return err
		}
	}
	n.last.Store(snap)
	return nil
}

// Runtime reports the generation of the last applied snapshot.
func (n *Nop) Runtime() Runtime {
	var g int64
	if last := n.last.Load(); last != nil {
		g = last.Generation
	}
	return Runtime{Nbthread: 0, Generation: g}
}

// Stats reports the frontends and backends of the last snapshot with zero
// counters (nothing runs).
func (n *Nop) Stats() stats.Snapshot {
	s := stats.Snapshot{Time: time.Now(), Frontends: []stats.Frontend{}, Backends: []stats.Backend{}}
	last := n.last.Load()
	if last == nil {
		return s
	}
	s.Generation = last.Generation
	for _, f := range last.Frontends {
		s.Frontends = append(s.Frontends, stats.Frontend{Name: f.Name, Mode: f.Mode, Maxconn: f.Maxconn})
	}
	for _, b := range last.Backends {
		sb := stats.Backend{Name: b.Name, Mode: b.Mode, Algo: b.Balance, State: "down", Servers: []stats.Server{}}
		for _, sv := range b.Servers {
			w := 0
			if sv.Weight != nil {
				w = *sv.Weight
			}
			sb.Servers = append(sb.Servers, stats.Server{Name: sv.Name, Address: net.JoinHostPort(sv.Address, strconv.Itoa(sv.Port)),
				State: "up", Up: true, AdminState: sv.AdminState, Weight: w, Maxconn: sv.Maxconn})
		}
		s.Backends = append(s.Backends, sb)
	}
	return s
}

// LoopActivity reports no loops.
func (n *Nop) LoopActivity() []stats.LoopActivity { return []stats.LoopActivity{} }

// Close only marks n stopping.
func (n *Nop) Close(context.Context) error { n.stopping.Store(true); return nil }

// Stopping reports whether Close was called.
func (n *Nop) Stopping() bool { return n.stopping.Load() }
