package stick

import "sync/atomic"

// Freq is a sliding-window event counter (HAProxy's freq_ctr): the index
// of the current period (24 bits), its count (20 bits) and the previous
// period's count (20 bits), in one word changed by CAS, so that a reader
// never sees a count of one period with the index of another. Periods are
// counted from the table's epoch; now and period are nanoseconds.
type Freq struct {
	v atomic.Uint64
}

const (
	freqIdxBits = 24
	freqCntBits = 20
	freqIdxMask = 1<<freqIdxBits - 1
	// FreqMax is where a period's count saturates.
	FreqMax   = 1<<freqCntBits - 1
	freqShift = 2 * freqCntBits
)

func freqPack(idx, cur, prev uint64) uint64 {
	return idx<<freqShift | cur<<freqCntBits | prev
}

func freqUnpack(v uint64) (idx, cur, prev uint64) {
	return v >> freqShift, v >> freqCntBits & FreqMax, v & FreqMax
}

// Hit counts one event at now and returns the estimate that includes it.
func (f *Freq) Hit(now, period int64) uint64 {
	idx := uint64(now/period) & freqIdxMask
	for {
		old := f.v.Load()
		oi, cur, prev := freqUnpack(old)
		switch oi {
		case idx:
			if cur < FreqMax {
				cur++
			}
		case (idx - 1) & freqIdxMask:
			prev, cur = cur, 1
		default:
			prev, cur = 0, 1
		}
		if f.v.CompareAndSwap(old, freqPack(idx, cur, prev)) {
			return estimate(cur, prev, now, period)
		}
	}
}

// Rate is the estimate of events over the period ending at now.
func (f *Freq) Rate(now, period int64) uint64 {
	oi, cur, prev := freqUnpack(f.v.Load())
	idx := uint64(now/period) & freqIdxMask
	switch oi {
	case idx:
		return estimate(cur, prev, now, period)
	case (idx - 1) & freqIdxMask:
		return estimate(0, cur, now, period)
	}
	return 0
}

// reset forgets every count.
func (f *Freq) reset() { f.v.Store(0) }

// estimate: cur, plus prev weighted by the part of the previous period
// still inside the window that ends at now (HAProxy's
// read_freq_ctr_period). The weight is in 1/65536ths: no overflow for
// periods up to 2^47 ns (a day is 2^46.3).
func estimate(cur, prev uint64, now, period int64) uint64 {
	if prev == 0 {
		return cur
	}
	left := uint64(period - now%period) // ns of the period still to come
	w := left << 16 / uint64(period)
	return cur + (prev*w+0xffff)>>16
}

// Wait is how long (ns) a client whose counter reads as it does at now
// must stay quiet before its estimate is at most limit-1, so that its next
// event passes: Retry-After. At least 1 ns when it is over now.
func (f *Freq) Wait(now, period int64, limit uint64) int64 {
	oi, cur, prev := freqUnpack(f.v.Load())
	idx := uint64(now/period) & freqIdxMask
	switch oi {
	case idx:
	case (idx - 1) & freqIdxMask:
		prev, cur = cur, 0
	default:
		return 0
	}
	if limit == 0 {
		limit = 1
	}
	target := limit - 1 // the estimate the next event may find
	left := period - now%period
	if cur <= target {
		// Within this period, prev's weight must drop to target-cur:
		// prev × t/period <= target-cur, t the ns left of the period.
		if prev == 0 || estimate(cur, prev, now, period) <= target {
			return 0
		}
		room := target - cur
		t := int64(float64(room) * float64(period) / float64(prev)) // the period part still allowed
		if d := left - t; d > 0 {
			return d
		}
		return 1
	}
	// This period alone is over: wait for its end, then for the weight of
	// cur (the previous period then) to drop to target.
	t := int64(float64(target) * float64(period) / float64(cur))
	return left + period - t
}
