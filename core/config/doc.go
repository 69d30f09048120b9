// Package config owns the desired-state model of spliced: the Config document
// with its frontends, binds, routes, backends, servers, health checks,
// timeouts, tuning, CPU map and IRQ policy; its defaults (Normalize), its
// validation (field rules through go-playground/validator plus semantic rules),
// the diff between two documents as a plan, and the store that persists
// revisions atomically in the state directory.
//
// It imports no other spliced package; every other package imports it.
// Config values handed to the data plane are immutable snapshots: nobody
// mutates a *Config after it was passed to Control.Apply.
//
// Callers: the API (any goroutine, writes serialised by the store's lock) and
// the data plane (reads snapshots only).
package config
