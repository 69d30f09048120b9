// Package listen owns the listening sockets of the data plane and the accept
// distributor (seed 001).
//
// A Group holds one accept ring per loop: a bounded lock-free MPSC queue of
// accepted fds, polled by its loop as a loop.Source. Group.Open creates,
// binds and listens synchronously (the OS error comes back to the caller,
// nothing stays open on failure) and registers the socket on loops:
//   - Shards == 0: one socket on every loop of BindSpec.Threads (default
//     all), level-triggered with EPOLLEXCLUSIVE so a connection wakes one
//     loop (a listener adopted by an nbthread change too: Adopt unregisters
//     the old listener before it registers the new one, since an exclusive
//     wake-up taken by an entry that is then deleted is lost with it, and
//     the connection waits in the backlog until another one arrives; see
//     Adopt). The woken loop accepts up to maxaccept connections per wake-up
//     with accept4(SOCK_NONBLOCK|SOCK_CLOEXEC) and picks, per connection, the
//     loop that will own it: p2c-rr (config's default: rotating index +
//     random other, lower load wins), round-robin, least-conn, local or p2c (pure
//     power of two: two random loops, for seed 001's comparison)
//     (a Distribution from ParseDistribution, which fills no default and
//     refuses an unknown algorithm or a maxaccept below 1). The load of a
//     loop is its ring length plus the live connections of this bind it
//     owns (LoopConns, HAProxy's thr_conn: counted at the hand-off,
//     uncounted by the connection's end), not all its connections: another
//     bind's load does not skew this one's spread. A different target
//     gets the fd through its ring and a Notify (a syscall only if the
//     target sleeps: the loop asks Ring.Pending before it sleeps); a full ring makes the
//     accepting loop keep it. AccqPushed and AccqFull count on the target.
//   - Shards > 0: that many SO_REUSEPORT sockets, socket i on loop
//     Threads[i % len(Threads)], which keeps what it accepts (the kernel
//     spreads connections by hashing).
//
// AcceptFunc runs on the owning loop's thread and owns the fd from then on,
// with the connection slots reserved for it (released when the connection
// ends; Listener.Release if it drops the fd unserved) and its count in the
// bind's LoopConns (Done when the connection ends, or the fd is dropped):
// everything about the connection belongs to core/proxy, which also keeps
// Activity.Conns (all the loop's connections, for the activity endpoint)
// up to date, except TCP_NODELAY: it is set once on the listening socket,
// and every accepted socket inherits it (Linux clones the listener into
// the child), so no connection pays a setsockopt for it.
//
// Connection limits (limit.go, HAProxy's listener_accept): before each
// accept4 an acceptor reserves a slot on every Limit of its listener
// (BindSpec.Limits: the frontend's maxconn, then the process's) with a CAS
// that never passes the maximum, so nothing accepted on any loop or waiting
// in any ring exceeds it; the fd carries its slots to the AcceptFunc, whose
// connection gives them back when it ends (a failed accept4, or a fd dropped
// unserved, gives them back at once). An acceptor that finds a Limit full
// unregisters its socket on its own loop and waits in the Limit's list
// (clients wait in the kernel backlog); a release that leaves the resume
// slack free (max/16, 1 to MaxResumeSlack) resumes the list, each acceptor
// on its loop, and a limited acceptor looks again every LimitRecheck for a
// slot freed below the slack.
//
// Out of fds (EMFILE, ENFILE) or memory on accept4: that loop unregisters the
// socket and re-registers it FdLimitBackoff later from a loop timer (no busy
// loop), counting Activity.AcceptPauses.
//
// Must not: allocate per accepted connection, block a loop, log on the accept
// path, own connections after the hand-off, or touch other packages'
// counters than the accept ones (Accepted, AccqPushed, AccqFull,
// AcceptPauses).
//
// Threads:
//   - control goroutine only (never a loop thread; they wait for the loops):
//     NewGroup, Group.Open, Listener.Close, Group.Close, Group.Adopt,
//     Group.Retire (adopt.go: moving listeners to a new set of loops when
//     nbthread changes, without closing a listening socket);
//   - any goroutine: SetDistribution, Pause, Resume, Paused, Addr, Ring.Len,
//     Listener.Release and every Limit method;
//   - loop threads: everything the acceptors and rings do internally.
package listen
