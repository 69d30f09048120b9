// Package coretest provides a core.Control for tests of the layers above
// the data plane, as net/http/httptest does for handlers: Nop applies
// nothing to the network and records what it was asked to run.
package coretest

import (
	"context"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/pin"
	"github.com/spliced-proxy/spliced/core/stats"
)

// Nop is a core.Control that applies nothing to the network. It records
// the last snapshot so tests can observe Apply. It is safe for use from any
// goroutine once its fields are set.
type Nop struct {
	// Fail, when set, is returned by Apply (to test rollback).
	Fail func(snap *config.Config) error
	// PinFS is the procfs/sysfs the IRQs and the affinity mask are read
	// from; the zero value is the host.
	PinFS    pin.FS
	last     atomic.Pointer[config.Config]
	stopping atomic.Bool
}

var _ core.Control = (*Nop)(nil)

// Apply records snap, or returns the error Fail gives; core.ErrStopping
// after Close.
func (n *Nop) Apply(_ context.Context, snap *config.Config) error {
	if n.stopping.Load() {
		return core.ErrStopping
	}
	if n.Fail != nil {
		if err := n.Fail(snap); err != nil {
			return err
		}
	}
	n.last.Store(snap)
	return nil
}

// Last is the last snapshot Apply accepted; nil before the first.
func (n *Nop) Last() *config.Config { return n.last.Load() }

// Runtime reports the generation of the last applied snapshot.
func (n *Nop) Runtime() core.Runtime {
	var g int64
	if last := n.last.Load(); last != nil {
		g = last.Generation
	}
	return core.Runtime{Nbthread: 0, Generation: g}
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
				State: stats.ServerState(true, sv.AdminState), Up: true, AdminState: sv.AdminState, Weight: w, Maxconn: sv.Maxconn})
		}
		s.Backends = append(s.Backends, sb)
	}
	return s
}

// LoopActivity reports no loops.
func (n *Nop) LoopActivity() []stats.LoopActivity { return []stats.LoopActivity{} }

// Memory reports the process's memory and no loop.
func (n *Nop) Memory(context.Context) (stats.Memory, error) {
	return stats.Memory{Loops: []stats.LoopMemory{}, Go: stats.ReadGoMemory(), RSSBytes: stats.ReadRSS()}, nil
}

// Close only marks n stopping.
func (n *Nop) Close(context.Context) error { n.stopping.Store(true); return nil }

// Stopping reports whether Close was called.
func (n *Nop) Stopping() bool { return n.stopping.Load() }

// Threads: no loop thread runs.
func (n *Nop) Threads() []core.ThreadState { return []core.ThreadState{} }

// PinWarnings: nothing is pinned.
func (n *Nop) PinWarnings() []string { return []string{} }

// AffinityMask reads the mask from n.PinFS.
func (n *Nop) AffinityMask() ([]int, error) { return n.PinFS.AffinityMask() }

// IRQs reads the IRQs of n.PinFS.
func (n *Nop) IRQs() ([]pin.IRQ, error) { return n.PinFS.IRQs() }

// IRQ reads IRQ n of n.PinFS.
func (n *Nop) IRQ(irq int) (pin.IRQ, error) { return n.PinFS.IRQ(irq) }

// LimitEntries: Nop runs no limit.
func (n *Nop) LimitEntries(frontend, limit string, _ int) (core.LimitTable, error) {
	return core.LimitTable{}, fmt.Errorf("%w: no limit %q in frontend %q", config.ErrNotFound, limit, frontend)
}

// ClearLimitEntry: Nop runs no limit.
func (n *Nop) ClearLimitEntry(frontend, limit, _ string, _ bool) error {
	return fmt.Errorf("%w: no limit %q in frontend %q", config.ErrNotFound, limit, frontend)
}
