package stick

import (
	"hash/maphash"
	"math/bits"
	"sync/atomic"
	"unsafe"
)

// Ways is the number of entries of a set.
const Ways = 8

// The rate counters of an entry.
const (
	CtrConn = iota // new connections (conn_rate)
	CtrReq         // requests (req_rate)
	CtrErr         // error responses (err_rate)
	nCtr
)

// Entry is one client of a table. Its key words are atomics so that
// readers compare them while a writer may rewrite them (the seqlock tells
// a torn read from a good one); 128 bytes.
type Entry struct {
	seq  atomic.Uint32 // even: stable; odd: being rewritten
	_    uint32
	hash atomic.Uint64 // the key's hash, 0: free
	kw   [keyWords]atomic.Uint64
	seen atomic.Int64 // last touched (ns, the table's clock)
	conn atomic.Int32 // current connections
	_    int32
	ctr  [nCtr]Freq
}

// set is Ways entries and the bit that serializes the writers that give
// its entries to new keys.
type set struct {
	wr   atomic.Uint32
	ways [Ways]Entry
}

// Ref is an entry as found for a key: the entry and its sequence then.
type Ref struct {
	e   *Entry
	seq uint32
}

// Entry is the referenced entry, nil for the zero Ref (nothing tracked).
func (r Ref) Entry() *Entry { return r.e }

// Valid: the Ref names an entry.
func (r Ref) Valid() bool { return r.e != nil }

// Table is a bounded stick table (see the package doc). Safe for
// concurrent use.
type Table struct {
	sets   []atomic.Pointer[set]
	nsets  uint64
	seed   maphash.Seed
	expire int64 // ns

	used atomic.Int64 // entries holding a key
	// Full: new keys not tracked because every way of their set held
	// connections; Busy: because another loop was writing the set.
	full, busy atomic.Uint64
}

// New makes a table of at most maxEntries entries (rounded down to a
// multiple of Ways, at least Ways) that forgets an entry untouched for
// expire ns.
func New(maxEntries int, expire int64) *Table {
	n := max(maxEntries/Ways, 1)
	return &Table{
		sets:   make([]atomic.Pointer[set], n),
		nsets:  uint64(n),
		seed:   maphash.MakeSeed(),
		expire: expire,
	}
}

// Capacity is the most entries the table holds.
func (t *Table) Capacity() int { return int(t.nsets) * Ways }

// SetExpire changes how long an untouched entry is kept (a new generation
// of the limit).
func (t *Table) SetExpire(ns int64) { atomic.StoreInt64(&t.expire, ns) }

func (t *Table) expiry() int64 { return atomic.LoadInt64(&t.expire) }

// Stats are a table's occupancy and the new keys it could not take.
type Stats struct {
	Used     int64  // entries holding a key (expired ones included until reused)
	Capacity int    // the most it holds
	Full     uint64 // new keys untracked: their set's entries all held connections
	Busy     uint64 // new keys untracked: another loop was writing their set
}

// Stats reads the table's counters.
func (t *Table) Stats() Stats {
	return Stats{Used: t.used.Load(), Capacity: t.Capacity(), Full: t.full.Load(), Busy: t.busy.Load()}
}

func (t *Table) hashOf(k *Key) uint64 {
	b := unsafe.Slice((*byte)(unsafe.Pointer(&k.w[0])), k.words()*8)
	return maphash.Bytes(t.seed, b) | 1 // 0 marks a free entry
}

func (t *Table) setOf(h uint64) *atomic.Pointer[set] {
	hi, _ := bits.Mul64(h, t.nsets)
	return &t.sets[hi]
}

// match: e holds k (hash h) at sequence seq, read consistently.
func (e *Entry) match(k *Key, h uint64) (uint32, bool) {
	if e.hash.Load() != h {
		return 0, false
	}
	sq := e.seq.Load()
	if sq&1 != 0 {
		return 0, false
	}
	for i, n := 0, k.words(); i < n; i++ {
		if e.kw[i].Load() != k.w[i] {
			return 0, false
		}
	}
	if e.hash.Load() != h || e.seq.Load() != sq {
		return 0, false
	}
	return sq, true
}

// spins bounds how often a loop retries a set's writer bit before it
// leaves a new key untracked: a writer holds it for about 100 ns.
const spins = 64

// Track finds the entry of k, or gives it one (a free, expired or least
// recently seen entry of its set), and marks it seen at now. The zero Ref
// when k is zero or the key could not be placed (Stats.Full, Stats.Busy).
// A key the table holds costs no allocation and no lock.
func (t *Table) Track(k *Key, now int64) Ref {
	if k.IsZero() {
		return Ref{}
	}
	h := t.hashOf(k)
	sp := t.setOf(h)
	s := sp.Load()
	if s != nil {
		for i := range s.ways {
			e := &s.ways[i]
			if sq, ok := e.match(k, h); ok {
				if now-e.seen.Load() > 1e6 { // one write a millisecond at most
					e.seen.Store(now)
				}
				return Ref{e, sq}
			}
		}
	} else {
		// The set's first key: its 8 entries are allocated now, once.
		ns := new(set)
		if !sp.CompareAndSwap(nil, ns) {
			ns = sp.Load()
		}
		s = ns
	}
	return t.insert(s, k, h, now)
}

// insert gives k an entry of s under s's writer bit.
func (t *Table) insert(s *set, k *Key, h uint64, now int64) Ref {
	for i := 0; !s.wr.CompareAndSwap(0, 1); i++ {
		if i == spins {
			t.busy.Add(1)
			return Ref{}
		}
	}
	defer s.wr.Store(0)
	// Another writer may have put it there meanwhile.
	for i := range s.ways {
		e := &s.ways[i]
		if sq, ok := e.match(k, h); ok {
			return Ref{e, sq}
		}
	}
	for tries := 0; tries < Ways; tries++ {
		v := s.victim()
		if v == nil {
			t.full.Add(1)
			return Ref{}
		}
		if r, ok := t.claim(v, k, h, now); ok {
			return r
		}
		// A connection came to v meanwhile: pick again.
	}
	t.full.Add(1)
	return Ref{}
}

// victim picks the entry of s a new key takes: a free one, else the one
// seen least recently among those holding no connection (an expired one
// is always older than a live one). Writer bit held.
func (s *set) victim() *Entry {
	var best *Entry
	var bestSeen int64
	for i := range s.ways {
		e := &s.ways[i]
		if e.hash.Load() == 0 {
			return e
		}
		if e.conn.Load() != 0 {
			continue
		}
		if seen := e.seen.Load(); best == nil || seen < bestSeen {
			best, bestSeen = e, seen
		}
	}
	return best
}

// claim rewrites e for k, unless e holds a connection once its sequence is
// odd (Dekker with Acquire: see the package doc). Writer bit held.
func (t *Table) claim(e *Entry, k *Key, h uint64, now int64) (Ref, bool) {
	sq := e.seq.Load()
	e.seq.Store(sq + 1)
	if e.conn.Load() != 0 {
		e.seq.Store(sq) // untouched: Refs taken at sq stay good
		return Ref{}, false
	}
	wasFree := e.hash.Load() == 0
	e.hash.Store(0)
	for i := range e.kw {
		e.kw[i].Store(k.w[i])
	}
	for i := range e.ctr {
		e.ctr[i].reset()
	}
	e.seen.Store(now)
	e.hash.Store(h)
	e.seq.Store(sq + 2)
	if wasFree {
		t.used.Add(1)
	}
	return Ref{e, sq + 2}, true
}

// Acquire counts one more connection of the client and returns how many
// it holds now; 0 when the entry went to another key since r was taken
// (the caller tracks the key again).
func (r Ref) Acquire() int32 {
	n := r.e.conn.Add(1)
	if r.e.seq.Load() != r.seq {
		r.e.conn.Add(-1)
		return 0
	}
	return n
}

// Release gives back a connection Acquire counted (the entry cannot have
// changed key meanwhile: one holding a connection is never recycled).
func (r Ref) Release() { r.e.conn.Add(-1) }

// Conns is the client's current connections.
func (r Ref) Conns() int32 { return r.e.conn.Load() }

// Hit counts one event on counter c (CtrConn, CtrReq, CtrErr) and returns
// the estimate over period (ns) that includes it.
func (r Ref) Hit(c int, now, period int64) uint64 { return r.e.ctr[c].Hit(now, period) }

// Rate reads counter c's estimate over period.
func (r Ref) Rate(c int, now, period int64) uint64 { return r.e.ctr[c].Rate(now, period) }

// Wait is how long (ns) the client must stay quiet for counter c to let
// its next event under limit pass.
func (r Ref) Wait(c int, now, period int64, limit uint64) int64 {
	return r.e.ctr[c].Wait(now, period, limit)
}

// Clear forgets the entry of k: freed when it holds no connection, else
// its rates restart (its connections still count). False when the table
// does not hold k.
func (t *Table) Clear(k *Key) bool {
	if k.IsZero() {
		return false
	}
	h := t.hashOf(k)
	s := t.setOf(h).Load()
	if s == nil {
		return false
	}
	for !s.wr.CompareAndSwap(0, 1) {
		// The admin API may wait for a loop's insert (~100 ns).
	}
	defer s.wr.Store(0)
	for i := range s.ways {
		e := &s.ways[i]
		if _, ok := e.match(k, h); !ok {
			continue
		}
		sq := e.seq.Load()
		e.seq.Store(sq + 1)
		if e.conn.Load() != 0 {
			e.seq.Store(sq)
			for c := range e.ctr {
				e.ctr[c].reset()
			}
			return true
		}
		e.hash.Store(0)
		for c := range e.ctr {
			e.ctr[c].reset()
		}
		e.seq.Store(sq + 2)
		t.used.Add(-1)
		return true
	}
	return false
}
