package loop

import "sync/atomic"

// Activity holds the per-loop counters shown by /api/v1/activity (HAProxy's
// "show activity"). Every field is an atomic: the owning loop and the code it
// runs (proxy, listen) write them, any goroutine reads them without locks.
// The struct is padded to whole cache lines so that two loops' counters never
// share one, and the counters the loop updates per event are accumulated in
// the loop and published once per round (Loops, PollIO, WakeTasks, Tasklets,
// Timers), so a reader sees values at most one round old.
type Activity struct {
	_ [64]byte

	Loops     atomic.Uint64    // rounds of the event loop
	PollIO    atomic.Uint64    // events returned by epoll_wait
	WakeTasks atomic.Uint64    // Wake calls that queued a tasklet
	Tasklets  [3]atomic.Uint64 // units of work run, by Class: tasklets, and (normal) Exec'd functions and timers, (urgent) Source entries
	CPUNs     [3]atomic.Uint64 // ns spent running each Class (the seed's TC0/TC1/TC2)
	Timers    atomic.Uint64    // timers fired
	AvgLoopUs atomic.Uint64    // EWMA (1/16) of a round's busy time, sleep excluded, µs
	// Sleeps counts the polls that could block (no work left, the sleep
	// announced), SleepNs the time spent in them, and Notified the
	// wake-ups another thread gave (eventfd writes consumed): sleeps per
	// request is how often the loop gives its CPU back, and each sleep
	// is paid again by whoever wakes it (an IPI to an idle CPU).
	Sleeps   atomic.Uint64
	SleepNs  atomic.Uint64
	Notified atomic.Uint64
	// BusyPolls counts the busy polls before a sleep (tuning.busy_poll_us),
	// BusyPollNs the time spent in them: the CPU busy polling costs.
	BusyPolls  atomic.Uint64
	BusyPollNs atomic.Uint64
	// Naps counts the naps before a poll (tuning.poll_nap_us), NapNs the
	// time from the round's end to the end of the poll after the nap.
	Naps  atomic.Uint64
	NapNs atomic.Uint64

	// Written by core/listen.
	Accepted     atomic.Uint64 // connections handed to an AcceptFunc on this loop
	AccqPushed   atomic.Uint64 // entries pushed into this loop's accept ring
	AccqFull     atomic.Uint64 // pushes refused because this loop's ring was full
	AcceptPauses atomic.Uint64 // accept back-offs on EMFILE/ENFILE/ENOBUFS/ENOMEM on this loop

	// Written by core/proxy.
	HandshakeNs atomic.Uint64 // ns TLS handshakes of this loop's pools computed (helper goroutines)
	// What the handshakes of this loop's pools waited for besides their
	// peer, ns summed over handshakes: a slot of the pool
	// (tuning.tls.max_handshakes), a CPU token, and the hand-offs between
	// the loop and the helper goroutine (from the accept to the goroutine
	// running, from its end to the loop taking the connection back).
	// HandshakeParks counts the waits for the peer (parked in the runtime
	// poller).
	HandshakeSlotWaitNs atomic.Uint64
	HandshakeCPUWaitNs  atomic.Uint64
	HandshakeHandoffNs  atomic.Uint64
	HandshakeParks      atomic.Uint64
	SpliceBytes         atomic.Uint64 // bytes moved with splice(2)
	PipesUsed           atomic.Int64  // pipes currently taken from the pool
	BufsUsed            atomic.Int64  // buffers currently taken from the pool
	Conns               atomic.Int64  // live connections owned by this loop, every bind (the accept load is per bind: listen.LoopConns)

	_ [64]byte
}

// ActivitySnapshot is a plain copy of Activity, for the API.
type ActivitySnapshot struct {
	Loops, PollIO, WakeTasks uint64
	Tasklets, CPUNs          [3]uint64
	HandshakeNs              uint64
	HandshakeSlotWaitNs      uint64
	HandshakeCPUWaitNs       uint64
	HandshakeHandoffNs       uint64
	HandshakeParks           uint64
	Timers, AvgLoopUs        uint64
	Sleeps, SleepNs          uint64
	Notified                 uint64
	BusyPolls, BusyPollNs    uint64
	Naps, NapNs              uint64
	Accepted, AccqPushed     uint64
	AccqFull, AcceptPauses   uint64
	SpliceBytes              uint64
	PipesUsed, Conns         int64
	BufsUsed                 int64
}

// Snapshot reads every counter once; fields are individually consistent.
func (a *Activity) Snapshot() ActivitySnapshot {
	return ActivitySnapshot{
		Loops: a.Loops.Load(), PollIO: a.PollIO.Load(), WakeTasks: a.WakeTasks.Load(),
		Tasklets:            [3]uint64{a.Tasklets[0].Load(), a.Tasklets[1].Load(), a.Tasklets[2].Load()},
		CPUNs:               [3]uint64{a.CPUNs[0].Load(), a.CPUNs[1].Load(), a.CPUNs[2].Load()},
		HandshakeNs:         a.HandshakeNs.Load(),
		HandshakeSlotWaitNs: a.HandshakeSlotWaitNs.Load(),
		HandshakeCPUWaitNs:  a.HandshakeCPUWaitNs.Load(),
		HandshakeHandoffNs:  a.HandshakeHandoffNs.Load(),
		HandshakeParks:      a.HandshakeParks.Load(),
		Timers:              a.Timers.Load(),
		AvgLoopUs:           a.AvgLoopUs.Load(),
		Sleeps:              a.Sleeps.Load(), SleepNs: a.SleepNs.Load(),
		Notified:  a.Notified.Load(),
		BusyPolls: a.BusyPolls.Load(), BusyPollNs: a.BusyPollNs.Load(),
		Naps: a.Naps.Load(), NapNs: a.NapNs.Load(),
		Accepted: a.Accepted.Load(), AccqPushed: a.AccqPushed.Load(),
		AccqFull: a.AccqFull.Load(), AcceptPauses: a.AcceptPauses.Load(),
		SpliceBytes: a.SpliceBytes.Load(),
		PipesUsed:   a.PipesUsed.Load(), Conns: a.Conns.Load(),
		BufsUsed: a.BufsUsed.Load(),
	}
}
