package core

import (
	"context"

	"github.com/spliced-proxy/spliced/core/config"
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

	// Close stops accepting, lets connections finish until ctx ends, and
	// releases every resource.
	Close(ctx context.Context) error
}

// Runtime is what the data plane reports about itself.
type Runtime struct {
	Nbthread   int   `json:"nbthread"`
	Maxconn    int   `json:"maxconn"`
	Generation int64 `json:"generation"` // generation of the snapshot it runs
}

// Nop is a Control that applies nothing to the network. It records the last
// snapshot so tests and the control-plane-only build can observe Apply.
type Nop struct {
	// Fail, when set, is returned by Apply (to test rollback).
	Fail func(snap *config.Config) error
	last *config.Config
}

// Apply records snap, or returns the error Fail gives.
func (n *Nop) Apply(_ context.Context, snap *config.Config) error {
	if n.Fail != nil {
		if err := n.Fail(snap); err != nil {
			return err
		}
	}
	n.last = snap
	return nil
}

// Runtime reports the generation of the last applied snapshot.
func (n *Nop) Runtime() Runtime {
	var g int64
	if n.last != nil {
		g = n.last.Generation
	}
	return Runtime{Nbthread: 0, Generation: g}
}

// Close does nothing.
func (n *Nop) Close(context.Context) error { return nil }
