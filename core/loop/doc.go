// Package loop is the data plane's event loop: one Loop per thread, each with
// its own epoll fd, an eventfd for wake-ups, an MPSC inbox of Exec'd
// functions, a binary heap of timers whose earliest expiry sets the poll
// timeout, run queues of tasklets in three classes (urgent, normal, bulk)
// served within the budget split of seed 000 (see Split), Sources drained
// once per round (the accept rings of core/listen), and per-loop Activity
// counters.
//
// What it owns: the epoll fd and eventfd of each loop, the fd table (a slice
// indexed by fd), the run queues and the timer heap. It does not own the fds
// registered on it: owners Unregister before they close.
//
// What it must not do: allocate, log, take a Go mutex or wait on a channel in
// a round (Wake, Arm/Disarm, dispatching events and running tasklets are
// allocation-free; Exec allocates one node and is the control path); know
// about connections, listeners or configuration beyond the tuning values.
//
// Threads:
//   - any goroutine: Exec, Notify, Stop, Activity (and its fields), ID,
//     Running, Mono (the clock of Now, for readers on other threads);
//   - the loop thread only (from a tasklet, timer, Source or Exec'd
//     function), or before Run starts: Wake, Demote, Unqueue, Queued, Register,
//     RegisterEvents, Unregister, Arm, Disarm, Now, AddSource, RemoveSource,
//     SetTuning, Tuning;
//   - the goroutine that owns the loop: Run (once; it locks the OS thread),
//     then Close after Run returned (Close also runs what was Exec'd to a
//     loop that never ran, so Exec's "true means it runs" always holds).
//
// Scheduling (seed 000). Every unit of work a round does is inside the
// budget of a class, and a round does at most runqueue_depth units (see
// Loop.round): urgent, offered ceil(depth*U/100), polls the Sources (accept
// rings, queue grants: one unit per entry) then runs the tasklets woken by
// I/O; normal, offered ceil(left*N/(N+B)) of what urgent really left, runs
// the Exec'd functions, the expired timers (a Timer's Run is one unit; what
// it wakes runs in its own class) and the tasklets woken as Normal; bulk
// runs the self-waking transfers with what is left. If anything is still
// queued (or a Source used its whole budget, or more timers are due, or
// Exec'd functions wait), the next epoll_wait does not sleep; otherwise it
// sleeps until the earliest timer, or indefinitely. Readiness ORs the epoll
// bits into FD.Ready and Wakes FD.T as Urgent; a tasklet already queued
// keeps its class (HAProxy does not requeue a queued tasklet), and Demote
// moves one to Bulk: a transfer that used its per-run cap is self-waking
// work even when its fd fired first (HAProxy's TASK_SELF_WAKING; core/proxy
// says how a connection's two tasklets keep to it). The time each class
// takes is counted (Activity.CPUNs, the seed's TC0/TC1/TC2).
//
// TLS handshakes are not loop work: crypto/tls cannot pause one, so they
// compute on helper goroutines of core/proxy (at most
// tuning.tls.max_handshakes per loop, and the process's handshake CPU
// tokens: the Ps the loops leave), as HAProxy's TL_HEAVY class has its own
// share of the CPU. A heavy class inside the round was not kept: one unit
// would be a whole handshake (about 0.1 ms for ECDSA P-256, 1.5 ms for
// RSA-2048, against a few µs for a tasklet), during which the loop's
// other connections wait, and Handshake blocks on its reads, which the
// loop thread must never do; the tokens give handshakes the CPU the loops
// leave instead of a share taken from them. Their time is shown beside
// the classes (Activity.HandshakeNs, cpu_handshake_ns: 83% of the CPU
// beside the classes in the sched bench's handshake row).
//
// Wake-ups from other threads (Exec, accept-ring pushes) Notify the loop.
// The eventfd is written only when the loop sleeps (or is about to: it
// announces the sleep, then looks at its inbox and pending Sources once more,
// so no wake-up is lost), and an atomic flag coalesces concurrent Notify
// calls into one write. A busy loop thus costs its producers no syscall.
// Every Source says whether it holds work (Source.Pending) for that last
// look, which also catches what a round gave a Source after its Poll.
package loop
