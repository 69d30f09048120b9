package loop

// Timer runs Run on its loop's thread once Now() reaches the time it was
// armed for. It is embedded in its owner's struct; arming and disarming
// allocate nothing (the heap slice grows only when more timers are armed at
// once than ever before).
type Timer struct {
	Run   func(t *Timer)
	Owner any

	when int64
	idx  int // position in the heap + 1; 0 = not armed
}

// Armed reports whether t is waiting to fire.
func (t *Timer) Armed() bool { return t.idx != 0 }

// When is the expiry t was armed for (meaningless when not armed).
func (t *Timer) When() int64 { return t.when }

// timerHeap is a binary min-heap on when; each Timer keeps its index so that
// Disarm and re-Arm are O(log n) without a search.
type timerHeap []*Timer

func (h *timerHeap) arm(t *Timer, at int64) {
	if t.idx != 0 {
		old := t.when
		t.when = at
		if at < old {
			h.up(t.idx - 1)
		} else if at > old {
			h.down(t.idx - 1)
		}
		return
	}
	t.when = at
	*h = append(*h, t)
	t.idx = len(*h)
	h.up(len(*h) - 1)
}

func (h *timerHeap) disarm(t *Timer) {
	if t.idx == 0 {
		return
	}
	s := *h
	i := t.idx - 1
	last := len(s) - 1
	if i != last {
		s.swap(i, last)
	}
	s[last] = nil
	*h = s[:last]
	t.idx = 0
	if i != last {
		h.down(i)
		h.up(i)
	}
}

func (h timerHeap) swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].idx = i + 1
	h[j].idx = j + 1
}

func (h timerHeap) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if h[p].when <= h[i].when {
			return
		}
		h.swap(i, p)
		i = p
	}
}

func (h timerHeap) down(i int) {
	n := len(h)
	for {
		l := 2*i + 1
		if l >= n {
			return
		}
		m := l
		if r := l + 1; r < n && h[r].when < h[l].when {
			m = r
		}
		if h[i].when <= h[m].when {
			return
		}
		h.swap(i, m)
		i = m
	}
}
