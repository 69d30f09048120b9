// Package stats owns the traffic counters of the data plane and the plain
// snapshot types the admin API, the Prometheus collector and the event
// stream read.
//
// # Counters
//
// Counters is the counter set of one frontend, backend or server. It holds
// one Slot per loop, each padded to whole cache lines: a loop adds only to
// its own slot (Counters.Loop(id)), so the cache line it writes is never
// written by another thread and stays in its core's cache; a reader sums
// the slots (Counters.Total) when it reads. Every field is an atomic so a
// reader on another goroutine sees whole values (-race clean), but the
// atomics are uncontended: the cost per increment is that of an
// uncontended locked add, with no line bouncing between cores (measured in
// BenchmarkSlotAdd / BenchmarkSharedAdd).
//
// Counters survive configuration changes: the engine keeps one Counters
// per frontend and backend name, and one per server object (which balance
// carries over from one generation to the next), and hands the same
// pointer to the objects of each new generation.
//
// A zero Counters (new(Counters)) is usable. A loop beyond the slots made
// so far (nbthread raised at run time, or a zero Counters) gets its own
// slot on its first Loop call: the slot list is copied on write and
// published with a CAS (one allocation per object and new loop, then
// none); slots never move, so counts added meanwhile are kept.
//
// # Duration histograms
//
// A backend's Counters also hold, per loop and made on first use, three
// Prometheus histograms with fixed buckets (hist.go, 0.5 ms .. 10 s):
// request (head complete -> response complete, http), queue (wait for a
// server slot, 0 when none) and connect (connect(2) -> established, TLS
// handshake included). A bucket is an atomic of the owning loop; Observe
// neither allocates nor locks; TimingTotal sums and accumulates them.
//
// # Rates
//
// Rate is HAProxy's freq_ctr: the events of the current second and those
// of the previous one, the rate over the last second being
// cur + prev*(1 - elapsed fraction of the current second). The loop passes
// its cached clock (loop.Now, in whole seconds), the reader loop.Mono():
// the same monotonic clock, no system call on the hot path.
//
// # Access-log entries
//
// LogEntry is one access-log record as a loop fills it (core/proxy): fixed
// size, names pointing at immutable objects, the request line copied into
// a 256-byte array, phase times as loop.Now values and HAProxy's
// two-letter Termination. LogRing is a bounded single-producer (the loop)
// single-consumer (the engine's writer) ring of them: Push never blocks
// (a full ring drops and counts), Drain hands each entry to the writer,
// which formats it off the loop (core/accesslog).
//
// # What it must not do
//
// Allocate, lock or log on the increment path; know about connections,
// configuration documents or HTTP.
//
// # Threads
//
// Slot fields, Rate.Add and LogRing.Push: the loop that owns them only;
// LogRing.Drain: the one writer goroutine. Total,
// Snapshot types and everything else: any goroutine.
package stats
