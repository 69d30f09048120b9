// Package engine is the data plane behind core.Control: nbthread loops
// (core/loop), a proxy worker per loop (core/proxy), the accept group
// (core/listen) and the runtime objects built from each applied snapshot
// (frontends, binds, backends, health checkers, pins). cmd/spliced builds
// one with New and hands it to the API as a core.Control; nothing else
// imports this package (the API sees only package core).
//
// What runs on which thread:
//
//   - Apply and Close run on the caller's goroutine (the API's, or main's
//     at start and stop) and are serialised by Engine.mu. Apply builds the
//     new generation off the loops, opens binds, pins threads and IRQs, and
//     publishes: through atomics (bindRT.front, the workers by loop ID, the
//     stats view, limits) and through loop.Exec for what a loop owns (its
//     tuning, its pools). It returns once every loop ran the snapshot. The
//     order keeps a failure side-effect free (see Apply).
//   - The loops never take Engine.mu and never wait for Apply: they read
//     what Apply published with atomic loads (accept reads bindRT.front and
//     the worker of its loop; an http request loads its frontend for each
//     new request) and run what Apply queued with Exec at their next round.
//   - Stats, LoopActivity, Runtime, Stopping and PinWarnings read atomics
//     only: any goroutine, never blocked by the loops or by an Apply in
//     progress. Threads, Activity and CheckStates take Engine.mu (they wait
//     for an Apply in progress). AffinityMask, IRQs and IRQ read the
//     procfs/sysfs tree the engine pins in (Options.PinFS), no lock.
//   - A loop's thread is locked for the life of its goroutine; CPU pins
//     are set from inside the loop thread (Exec), IRQ pins from Apply's
//     goroutine (threads.go, pin.go).
//   - Close sets stopping before it takes Engine.mu, so Apply refuses at
//     once (core.ErrStopping) while Close holds mu for the whole grace.
//
// TLS on binds: at each Apply, every bind with tls gets its own copy of its
// frontend carrying the *tls.Config built from the snapshot (tlsFronts:
// tlsconf.Certs.Server with the process's ticket keys, Options.Certs and
// Options.TicketKeys), stored in bindRT.front like any generation: the
// next handshakes use it (a replaced certificate serves from there), the
// established connections keep theirs. A configuration that cannot be
// built fails the Apply before anything is opened or published.
//
// Files: engine.go (Apply, Close, binds, frontends, backends), threads.go
// (loop threads, nbthread changes), pin.go (cpu_map, IRQs), stats.go
// (counters; the access-log writer: a goroutine drains every loop's
// stats.LogRing each 50 ms into the accesslog.Log of Options.AccessLog,
// sorted by end time), check.go (health checkers across generations),
// servertls.go (each new server with tls gets its client *tls.Config at
// Apply, kept while the server is: its session cache resumes across
// Applies).
package engine
