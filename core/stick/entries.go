package stick

import (
	"cmp"
	"slices"
)

// View is an entry as the admin API shows it: its key and counters at
// one moment.
type View struct {
	Key      Key
	ConnCur  int32
	ConnRate uint64
	ReqRate  uint64
	ErrRate  uint64
	IdleNs   int64 // since it was last touched
}

// Periods are the periods (ns) the rates of a View are read over; 0 reads
// the counter as 0 (the limit has no such rate).
type Periods [nCtr]int64

// NewPeriods names the periods of conn_rate, req_rate and err_rate.
func NewPeriods(conn, req, errs int64) Periods { return Periods{conn, req, errs} }

// score orders entries: requests, then connections, then errors.
func (v *View) score() [4]uint64 {
	return [4]uint64{v.ReqRate, uint64(v.ConnCur), v.ConnRate, v.ErrRate}
}

func cmpViews(a, b View) int {
	sa, sb := a.score(), b.score()
	for i := range sa {
		if c := cmp.Compare(sb[i], sa[i]); c != 0 {
			return c
		}
	}
	return cmp.Compare(a.IdleNs, b.IdleNs)
}

// Top returns the n entries with the highest counters at now (requests,
// then current connections, then new connections, then errors; the most
// recently seen first among equals), skipping expired ones, and how many
// live entries there are. It reads every entry without stopping the
// loops: each View is consistent, the whole is not a snapshot. Any
// goroutine.
func (t *Table) Top(n int, now int64, p Periods) ([]View, int) {
	if n <= 0 {
		return nil, 0
	}
	exp := t.expiry()
	top := make([]View, 0, n)
	live := 0
	for i := range t.sets {
		s := t.sets[i].Load()
		if s == nil {
			continue
		}
		for j := range s.ways {
			v, ok := s.ways[j].view(now, exp, p)
			if !ok {
				continue
			}
			live++
			if len(top) < n {
				top = append(top, v)
				if len(top) == n {
					slices.SortFunc(top, cmpViews)
				}
				continue
			}
			if cmpViews(v, top[n-1]) >= 0 {
				continue
			}
			// Insert in order, dropping the last: n is small (the API
			// bounds it), a flood of entries costs one compare each.
			k, _ := slices.BinarySearchFunc(top, v, cmpViews)
			copy(top[k+1:], top[k:n-1])
			top[k] = v
		}
	}
	if len(top) < n {
		slices.SortFunc(top, cmpViews)
	}
	return top, live
}

// view reads e consistently; false when free or expired.
func (e *Entry) view(now, exp int64, p Periods) (View, bool) {
	for range 4 {
		sq := e.seq.Load()
		if sq&1 != 0 || e.hash.Load() == 0 {
			return View{}, false
		}
		var v View
		for i := range v.Key.w {
			v.Key.w[i] = e.kw[i].Load()
		}
		seen := e.seen.Load()
		v.ConnCur = e.conn.Load()
		if e.seq.Load() != sq {
			continue
		}
		v.IdleNs = max(now-seen, 0)
		if v.ConnCur == 0 && v.IdleNs > exp {
			return View{}, false
		}
		rates := [nCtr]*uint64{&v.ConnRate, &v.ReqRate, &v.ErrRate}
		for c := range rates {
			if p[c] > 0 {
				*rates[c] = e.ctr[c].Rate(now, p[c])
			}
		}
		return v, true
	}
	return View{}, false
}

// Find returns the entry of k without creating one (the zero Ref when the
// table does not hold it).
func (t *Table) Find(k *Key) Ref {
	if k.IsZero() {
		return Ref{}
	}
	h := t.hashOf(k)
	s := t.setOf(h).Load()
	if s == nil {
		return Ref{}
	}
	for i := range s.ways {
		e := &s.ways[i]
		if sq, ok := e.match(k, h); ok {
			return Ref{e, sq}
		}
	}
	return Ref{}
}
