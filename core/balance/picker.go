package balance

import (
	"math/bits"
	"net/netip"

	"github.com/spliced-proxy/spliced/core/config"
)

const (
	algoRoundRobin = iota
	algoLeastConn
	algoSource
	algoRandom
)

// sourceProbes bounds the weighted jump-hash probes of the source algorithm
// before it falls back to a deterministic scan (see pickSource).
const sourceProbes = 64

// Picker chooses servers of one Backend for one loop. It is not safe for
// concurrent use: each loop has its own Picker per backend.
//
// It caches a view of the usable servers (and, for round robin, the smooth
// weighted round robin state) and rebuilds it when the backend's change
// counter moved since the last Pick: every Server setter bumps that counter,
// so weight, admin and health changes made after the Picker was built are
// seen by the next Pick. The chosen server's state word is read again at
// pick time, so a change racing with the rebuild never yields an unusable
// server.
//
// Servers at their maxconn are avoided by roundrobin, leastconn and random
// while another usable server has room; when all are full the algorithm's
// choice is returned anyway, so the caller's Acquire fails and it queues.
// source keeps its affinity and ignores maxconn.
type Picker struct {
	b    *Backend
	algo uint8
	seen uint64
	rng  uint64
	rot  uint32

	// Usable view, in configuration order.
	use    []*Server
	useW   []uint32
	useIdx []int32

	// random: prefix sums of useW.
	cum   []uint64
	total uint64

	// roundrobin: one group per distinct weight, see stepRR.
	groups  []rrGroup
	members []int32 // server indexes, grouped by weight, ascending within a group
	rrTotal int64

	// source: largest configured weight among the hash slots.
	wmax uint32
}

// rrGroup holds the smooth weighted round robin state of all usable servers
// of one weight. nginx's algorithm gives every server a current value; all
// servers of equal weight gain the same amount each step, and the one picked
// loses the total, so inside a group the values only ever take two levels:
// cur for the members not yet picked in this lap (from pos on, in list
// order) and cur-total for those already picked. The first unpicked member
// is therefore the group's best candidate, and a step costs one comparison
// per distinct weight instead of one per server.
type rrGroup struct {
	w     int64
	cur   int64
	first int32 // offset of the group in members
	n     int32
	pos   int32 // next member to pick
	last  int32 // server index picked last from this group, -1 none
}

// NewPicker returns a Picker for the calling loop. seed varies the random
// choices (and leastconn's tie rotation) between loops.
func (b *Backend) NewPicker(seed uint64) *Picker {
	p := &Picker{b: b, rng: seed, rot: uint32(seed)}
	switch b.Algo {
	case config.BalanceLeastConn:
		p.algo = algoLeastConn
	case config.BalanceSource:
		p.algo = algoSource
	case config.BalanceRandom:
		p.algo = algoRandom
	default:
		p.algo = algoRoundRobin
	}
	p.refresh(b.changes.Load())
	return p
}

// Backend returns the backend the picker chooses from.
func (p *Picker) Backend() *Backend { return p.b }

// Pick returns a usable server, or nil when none is usable. hash is the
// client address hash (used by source only). exclude, when not nil, is
// skipped (a retry after a connect failure goes to another server) unless it
// is the only usable server. Loop thread only; no allocation.
func (p *Picker) Pick(hash uint64, exclude *Server) *Server {
	for try := 0; try < 2; try++ {
		if c := p.b.changes.Load(); c != p.seen || try > 0 {
			p.refresh(c)
		}
		if len(p.use) == 0 {
			return nil
		}
		var s *Server
		switch p.algo {
		case algoRoundRobin:
			s = p.pickRR(exclude)
		case algoLeastConn:
			s = p.pickLeastConn(exclude)
		case algoSource:
			s = p.pickSource(hash, exclude)
		default:
			s = p.pickRandom(exclude)
		}
		if s != nil {
			return s
		}
		// Everything in the view turned out unusable: a change raced with
		// the view; rebuild once from the current state words.
	}
	return nil
}

// refresh rebuilds the usable view from the servers' state words. It runs on
// the loop thread when the change counter moved; it reuses its slices, so it
// allocates only when the backend grew.
func (p *Picker) refresh(c uint64) {
	p.seen = c
	p.use, p.useW, p.useIdx = p.use[:0], p.useW[:0], p.useIdx[:0]
	for i, s := range p.b.Servers {
		st := s.st.Load()
		if usableState(st) {
			p.use = append(p.use, s)
			p.useW = append(p.useW, st&stWeightMask)
			p.useIdx = append(p.useIdx, int32(i))
		}
	}
	switch p.algo {
	case algoRoundRobin:
		p.refreshRR()
	case algoRandom:
		p.cum = p.cum[:0]
		var t uint64
		for _, w := range p.useW {
			t += uint64(w)
			p.cum = append(p.cum, t)
		}
		p.total = t
	case algoSource:
		p.wmax = 0
		for _, s := range p.b.slots {
			if s != nil {
				p.wmax = max(p.wmax, s.st.Load()&stWeightMask)
			}
		}
	}
}

// refreshRR regroups the usable servers by weight. A group whose weight
// existed before keeps its current value and continues its rotation after
// the server it picked last, so frequent changes (a flapping server among
// thousands) neither restart every lap at the first server nor starve
// low-weight servers, whose current value has to build up over many steps.
func (p *Picker) refreshRR() {
	var oldCur [MaxWeight + 1]int64
	var oldLast [MaxWeight + 1]int32
	var had [MaxWeight + 1]bool
	for i := range p.groups {
		g := &p.groups[i]
		had[g.w], oldCur[g.w], oldLast[g.w] = true, g.cur, g.last
	}
	var cnt [MaxWeight + 1]int32
	for _, w := range p.useW {
		cnt[w]++
	}
	var gi [MaxWeight + 1]int16
	p.groups = p.groups[:0]
	p.rrTotal = 0
	off := int32(0)
	for w := MaxWeight; w >= 1; w-- {
		if cnt[w] == 0 {
			continue
		}
		gi[w] = int16(len(p.groups))
		p.groups = append(p.groups, rrGroup{w: int64(w), first: off, last: -1})
		off += cnt[w]
		p.rrTotal += int64(w) * int64(cnt[w])
	}
	if cap(p.members) < len(p.use) {
		p.members = make([]int32, len(p.use))
	}
	p.members = p.members[:len(p.use)]
	for k, idx := range p.useIdx {
		g := &p.groups[gi[p.useW[k]]]
		p.members[g.first+g.n] = idx
		g.n++
	}
	for i := range p.groups {
		g := &p.groups[i]
		if !had[g.w] {
			continue
		}
		g.cur, g.last = oldCur[g.w], oldLast[g.w]
		// First member after the last one picked (members ascend).
		m := p.members[g.first : g.first+g.n]
		lo, hi := 0, len(m)
		for lo < hi {
			mid := int(uint(lo+hi) >> 1)
			if m[mid] <= g.last {
				lo = mid + 1
			} else {
				hi = mid
			}
		}
		if lo == len(m) {
			lo = 0
		}
		g.pos = int32(lo)
	}
}

// stepRR is one step of nginx's smooth weighted round robin
// (ngx_http_upstream_get_peer): every server's current value grows by its
// weight, the largest wins (the first in list order on ties) and loses the
// total weight. With groups (see rrGroup) the candidates are the groups'
// first unpicked members.
func (p *Picker) stepRR() *Server {
	best := -1
	var bestCur int64
	var bestIdx int32
	for i := range p.groups {
		g := &p.groups[i]
		g.cur += g.w
		idx := p.members[g.first+g.pos]
		if best < 0 || g.cur > bestCur || (g.cur == bestCur && idx < bestIdx) {
			best, bestCur, bestIdx = i, g.cur, idx
		}
	}
	g := &p.groups[best]
	g.last = bestIdx
	g.pos++
	if g.pos == g.n {
		// Every member now stands at cur-total: that is the new level.
		g.pos = 0
		g.cur -= p.rrTotal
	}
	return p.b.Servers[bestIdx]
}

func (p *Picker) pickRR(exclude *Server) *Server {
	if len(p.use) == 1 {
		s := p.use[0]
		if !s.Usable() {
			return nil
		}
		return s
	}
	// Skipping a server (excluded, or full) forfeits its turn, as if it had
	// been picked: the others keep their smooth order. A heavy server can
	// win many steps in a row, hence the bound of one lap of the largest
	// weight plus the server count before the linear fallback.
	limit := min(len(p.use)+MaxWeight, 1024)
	var full *Server
	for range limit {
		s := p.stepRR()
		if s == exclude {
			continue
		}
		if !s.Usable() {
			return p.scan(exclude, nil)
		}
		if s.Full() {
			if full == nil {
				full = s
			}
			continue
		}
		return s
	}
	return p.scan(exclude, full)
}

// scan is the slow path shared by the algorithms: the first usable server
// with room from a rotating start, else full (or any usable full server),
// else exclude when it is the only usable one.
func (p *Picker) scan(exclude, full *Server) *Server {
	n := len(p.use)
	start := int(p.rot % uint32(n))
	p.rot++
	sawExclude := false
	for j := range n {
		k := start + j
		if k >= n {
			k -= n
		}
		s := p.use[k]
		if !s.Usable() {
			continue
		}
		if s == exclude {
			sawExclude = true
			continue
		}
		if !s.Full() {
			return s
		}
		if full == nil {
			full = s
		}
	}
	if full != nil {
		return full
	}
	if sawExclude {
		return exclude
	}
	return nil
}

// pickLeastConn returns the usable server with the lowest Cur/weight (servers
// with room before full ones), comparing Cur_a*w_b < Cur_b*w_a to avoid
// divisions. The scan starts one position further at each pick so that ties
// (an idle backend) rotate instead of piling on the first server. O(usable
// servers) per pick, like nginx's least_conn (HAProxy keeps a tree under a
// lock, updated on every connection instead): each server costs three
// atomic loads from one cache line. For pools of thousands of servers,
// random (two choices) is the cheap approximation.
func (p *Picker) pickLeastConn(exclude *Server) *Server {
	n := len(p.use)
	start := int(p.rot % uint32(n))
	p.rot++
	var lc lcScan
	lc.exclude = exclude
	lc.scan(p.use[start:])
	lc.scan(p.use[:start])
	if lc.best == nil && lc.sawExclude {
		return exclude
	}
	return lc.best
}

// lcScan is leastconn's running minimum; scanning two plain sub-slices
// (from the rotating start to the end, then the beginning) keeps the inner
// loop free of index arithmetic.
type lcScan struct {
	best, exclude        *Server
	bc, bw               int64
	bestFull, sawExclude bool
}

func (lc *lcScan) scan(servers []*Server) {
	for _, s := range servers {
		st := s.st.Load()
		if !usableState(st) {
			continue
		}
		if s == lc.exclude {
			lc.sawExclude = true
			continue
		}
		w := int64(st & stWeightMask)
		c := s.Cur.Load()
		m := s.maxconn.Load()
		full := m > 0 && c >= m
		if lc.best == nil || (lc.bestFull && !full) || (full == lc.bestFull && c*lc.bw < lc.bc*w) {
			lc.best, lc.bc, lc.bw, lc.bestFull = s, c, w, full
		}
	}
}

// next is splitmix64: fast, good enough for load balancing, no allocation.
func (p *Picker) next() uint64 {
	p.rng += 0x9e3779b97f4a7c15
	return mix64(p.rng)
}

// draw returns the index in use of a server drawn with probability
// proportional to its weight (binary search in the prefix sums).
func (p *Picker) draw() int {
	x, _ := bits.Mul64(p.next(), p.total) // uniform in [0, total)
	lo, hi := 0, len(p.cum)
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		if p.cum[mid] <= x {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return lo
}

// pickRandom is the power of two choices: two servers drawn in proportion to
// their weights, the one with the lower Cur/weight wins (the first on a tie,
// so an idle backend gets a weighted random spread). A few redraws avoid the
// excluded server and a duplicate second choice.
func (p *Picker) pickRandom(exclude *Server) *Server {
	if len(p.use) == 1 {
		s := p.use[0]
		if !s.Usable() {
			return nil
		}
		return s
	}
	var a, b *Server
	ai := -1
	for t := 0; t < 4 && a == nil; t++ {
		i := p.draw()
		if s := p.use[i]; s != exclude && s.Usable() {
			a, ai = s, i
		}
	}
	if a == nil {
		return p.scan(exclude, nil)
	}
	for t := 0; t < 4 && b == nil; t++ {
		i := p.draw()
		if s := p.use[i]; i != ai && s != exclude && s.Usable() {
			b = s
		}
	}
	if b == nil && len(p.use) > 1 {
		// Heavy weights make a duplicate draw likely: compare with the
		// neighbour instead, so that two servers are still weighed.
		i := ai + 1
		if i == len(p.use) {
			i = 0
		}
		if s := p.use[i]; s != exclude && s.Usable() {
			b = s
		}
	}
	if b == nil {
		if a.Full() {
			return p.scan(exclude, a)
		}
		return a
	}
	ca, cb := a.Cur.Load(), b.Cur.Load()
	fa, fb := a.fullAt(ca), b.fullAt(cb)
	if fa && fb {
		return p.scan(exclude, a)
	}
	if fa != fb {
		if fa {
			return b
		}
		return a
	}
	if cb*int64(a.Weight()) < ca*int64(b.Weight()) {
		return b
	}
	return a
}

func (s *Server) fullAt(cur int64) bool {
	m := s.maxconn.Load()
	return m > 0 && cur >= m
}

// pickSource maps the client hash onto the backend's stable slot list with a
// weighted jump hash: probe j draws a slot with jump consistent hashing
// (Lamping & Veach) of mix(hash+j), and accepts it when the slot holds a
// usable server and a second independent draw falls below its share
// weight/wmax (wmax = the largest configured weight). Every usable server is
// thus chosen with probability proportional to its weight, and a key only
// moves when its own first accepted server becomes unusable, is removed, or
// a new server takes a slot or hole that one of its earlier probes hit:
// removing one of n equal servers moves about 1/n of the keys. Slots keep
// their position across Build (holes for removed servers), which is what
// makes removals cheap. Expected probes: slots*wmax/(usable weight sum),
// about 1 for equal weights; after sourceProbes misses (most servers down)
// a deterministic scan from the key's first slot decides.
func (p *Picker) pickSource(hash uint64, exclude *Server) *Server {
	slots := p.b.slots
	n := len(slots)
	if n == 0 || p.wmax == 0 {
		return nil
	}
	wmax := uint64(p.wmax)
	sawExclude := false
	for j := range uint64(sourceProbes) {
		k := mix64(hash + j*0x9e3779b97f4a7c15)
		s := slots[jump(k, n)]
		if s == nil {
			continue
		}
		st := s.st.Load()
		if !usableState(st) {
			continue
		}
		if s == exclude {
			sawExclude = true
			continue
		}
		if w := uint64(st & stWeightMask); w < wmax {
			r := uint64(uint32(mix64(k ^ 0xd6e8feb86659fd93)))
			if (r*wmax)>>32 >= w {
				continue
			}
		}
		return s
	}
	start := jump(mix64(hash), n)
	for j := range n {
		k := start + j
		if k >= n {
			k -= n
		}
		s := slots[k]
		if s == nil || !s.Usable() {
			continue
		}
		if s == exclude {
			sawExclude = true
			continue
		}
		return s
	}
	if sawExclude {
		return exclude
	}
	return nil
}

// jump is Lamping and Veach's jump consistent hash: a bucket in [0, n) such
// that growing n to n+1 moves only the keys that land in bucket n.
func jump(key uint64, n int) int {
	var b, j int64 = -1, 0
	for j < int64(n) {
		b = j
		key = key*2862933555777941757 + 1
		j = int64(float64(b+1) * (float64(int64(1)<<31) / float64((key>>33)+1)))
	}
	return int(b)
}

// mix64 is the splitmix64 finaliser: a bijective 64-bit mix.
func mix64(x uint64) uint64 {
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}

// HashAddr is the source hash of a client address for Pick: IPv4 and
// IPv4-mapped IPv6 forms of one address hash alike, the port and zone are
// ignored. No allocation.
func HashAddr(a netip.Addr) uint64 {
	b := a.Unmap().As16()
	hi := uint64(b[0])<<56 | uint64(b[1])<<48 | uint64(b[2])<<40 | uint64(b[3])<<32 |
		uint64(b[4])<<24 | uint64(b[5])<<16 | uint64(b[6])<<8 | uint64(b[7])
	lo := uint64(b[8])<<56 | uint64(b[9])<<48 | uint64(b[10])<<40 | uint64(b[11])<<32 |
		uint64(b[12])<<24 | uint64(b[13])<<16 | uint64(b[14])<<8 | uint64(b[15])
	return mix64(hi ^ mix64(lo))
}
