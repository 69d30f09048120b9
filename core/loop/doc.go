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
//     function), or before Run starts: Wake, Unqueue, Queued, Register,
//     RegisterEvents, Unregister, Arm, Disarm, Now, AddSource, RemoveSource,
//     SetTuning, Tuning;
//   - the goroutine that owns the loop: Run (once; it locks the OS thread),
//     then Close after Run returned (Close also runs what was Exec'd to a
//     loop that never ran, so Exec's "true means it runs" always holds).
//
// Scheduling. A round refreshes Now, runs the Exec'd functions, fires the
// expired timers (at most runqueue_depth per round; a Timer's Run is called
// directly — timers are not tasklets — and typically Wakes a tasklet that
// then runs in the same round), polls each Source with a budget of
// runqueue_depth, then runs tasklets: urgent up to ceil(depth*U/100), normal
// up to ceil(left*N/(N+B)), bulk the rest, where left is what the previous
// classes did not consume. If anything is still queued (or a Source used its
// whole budget, or more timers are due), the next epoll_wait does not sleep;
// otherwise it sleeps until the earliest timer, or indefinitely. Readiness
// ORs the epoll bits into FD.Ready and Wakes FD.T as Urgent.
//
// Wake-ups from other threads (Exec, accept-ring pushes) Notify the loop.
// The eventfd is written only when the loop sleeps (or is about to: it
// announces the sleep, then looks at its inbox and pending Sources once more,
// so no wake-up is lost), and an atomic flag coalesces concurrent Notify
// calls into one write. A busy loop thus costs its producers no syscall.
// Sources fed from other threads implement Pender for that last look.
package loop
