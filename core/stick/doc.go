// Package stick holds the stick tables of the per-client limits
// (HAProxy's stick tables): bounded tables of entries keyed by what
// identifies a client (its address, a header's value, the SHA-256 of its
// certificate), each entry holding the client's current connections and
// three sliding-window rate counters (new connections, requests, error
// responses). core/proxy counts into them and decides; core/config holds
// the limits' model.
//
// # Threads
//
// A Table is shared by every loop of the process and read by the admin
// API: all its methods are safe from any goroutine. The request path
// (Track on a key the table holds, the counters of an Entry) takes no lock
// and allocates nothing. Inserting a key the table does not hold takes
// the writer bit of the key's set (one CAS); a loop that finds it taken
// spins a few times, then gives up tracking that request (counted, see
// Stats.Busy) rather than wait: no loop ever waits for another.
//
// # Layout, and why not per-loop shards
//
// The table is an array of sets of 8 entries (set-associative, as a CPU
// cache): a key's hash (seeded per table, so that a client cannot aim at
// one set) picks its set, and the key is in one of its 8 ways or nowhere.
// A set is allocated the first time a key lands in it, so a table costs
// what its clients use, up to max_entries rounded down to a multiple of
// 8 (128 bytes an entry; BenchmarkMemoryPerEntry); entries are then
// recycled in place, never freed: a flood of new keys allocates nothing
// once every set exists, and memory stays within max_entries.
//
// HAProxy shards its tables per thread group and protects each shard
// with a lock. Per-loop shards without a lock do not fit this data plane:
// connections are spread over the loops (p2c-rr), so one client's
// connections and requests land on every loop, and a limit must compare
// the client's total with its threshold. Per-loop tables would make every
// decision read the client's entry in every other loop's table, a lookup
// in a table that its owner changes at the same time. One table with
// atomic counters makes the decision one lookup and one atomic add on the
// client's own entry, whichever loop runs it; two loops only share a
// cache line when they serve the same client at the same moment, and
// that costs less than a lookup (BenchmarkTrackSameKeyParallel: 55 ns
// per request with two loops on one client, against 185 ns for a lookup
// among 100 000 clients, BenchmarkTrackExisting, which per-loop shards
// would pay once per loop for each decision). The figures are in
// bench/README.md.
//
// # Consistency
//
// Each entry has a sequence number (a seqlock): odd while its key is being
// rewritten, bumped by 2 each time the entry is given to another key. A
// reader checks it around its key comparison, so it never takes an entry
// that another writer is turning into someone else's. A Ref remembers
// the sequence it was found with. The rate counters of a Ref that was
// recycled meanwhile may count one event for the new key (an estimate
// anyway); the current-connection count never does: Acquire increments it
// then checks the sequence, and a writer recycles an entry only after it
// made the sequence odd and then saw no connection (both sequentially
// consistent atomics, as Dekker's), so an entry holding a connection is
// never recycled and Release always decrements the entry it acquired.
//
// # Expiry
//
// An entry untouched for expire is forgotten; a new key of a full set
// takes, in order, a free way, the expired way seen least recently, the
// way seen least recently: least recently seen first, within the set
// (an approximation of the whole table's LRU order, as Redis' sampled
// eviction). Ways that hold connections are never taken; a set whose 8
// ways all do leaves the new key untracked (Stats.Full).
//
// # Rates
//
// A rate counter (Freq) is HAProxy's freq_ctr: the count of the current
// period and of the previous one, packed with the period's index in one
// 64-bit word changed by CAS. The estimate over the sliding window ending
// now is cur + prev × (the part of the previous period still in the
// window); its error is bounded by how uneven the previous period was
// (within 10 % for steady traffic, pinned by TestFreqEstimate).
// Counts saturate at 2^20-1 per period; the period index wraps after
// 2^24 periods (19 days at the shortest period, 100 ms), which only a
// client holding a connection that long without any request could see.
package stick
