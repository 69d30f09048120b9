// Package balance owns the runtime side of backends: the Server objects that
// the data plane connects to (resolved address, prebuilt sockaddr, weight,
// maxconn, admin state, observed health, live connection count, counters),
// the Backend built from a config.Backend, the load-balancing algorithms
// (smooth weighted round robin, leastconn, source hash, random power of two
// choices) behind one Picker type, and the health check state machine
// (HAProxy's rise/fall counter), and the server queue: connections waiting
// for a slot when every server is at its maxconn (Queue, HAProxy's
// queue.c).
//
// What it must not do: open sockets, log, or import other spliced packages
// than config. Health probes (tcp connect, http GET) are run by their caller;
// this package only turns their outcomes into an up/down state (Health) and
// schedules them (Prober) through callbacks, so they can run on loop timers.
// It fills no configuration default: Build takes a config.Backend as
// config.Normalize left it and refuses (ErrInvalid) one that skipped it.
//
// Threads:
//   - Build, Backend.Retire and the Server setters (SetWeight, SetMaxconn,
//     SetAdminState) run on the control path (API apply), any goroutine.
//   - Server and Backend are shared, read-mostly objects: every mutable field
//     of a Server is an atomic, so loops read them without locks. A Backend is
//     immutable once Build returned it (its Servers slice is never modified;
//     a new configuration makes a new Backend that reuses Server objects).
//   - A Picker belongs to exactly one loop: Pick must only be called from
//     that loop's thread, never concurrently. It keeps its scheduling state
//     (round robin counters, usable list) in plain fields and reads server
//     state through atomics at pick time. Pick never allocates.
//   - A Health belongs to whoever runs the probes of that server (one loop);
//     it is not safe for concurrent use.
//   - A Queue (one per backend lineage, Backend.Queue) is shared by all
//     loops: Server.Release and the setters serve it from any goroutine
//     under its lock, held only to link and unlink waiters. A Waiter and
//     its Mailbox belong to one loop: only that loop calls Wait, Cancel and
//     Take; grants reach it through the Mailbox and its Notify func.
//
// Sockaddr caveat: golang.org/x/sys/unix's Connect writes into the sockaddr's
// internal raw buffer on every call, so one unix.Sockaddr must not be passed
// to Connect by two loops at the same time. Server.Sockaddr is a template; a
// loop copies it into storage it owns with Server.SockaddrInto (no
// allocation) and connects with the copy.
package balance
