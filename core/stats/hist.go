package stats

import (
	"sync/atomic"
	"unsafe"
)

// Duration histograms (Prometheus histograms with fixed buckets).
//
// A backend's TimingSlot holds three histograms per loop: request
// (the request head complete -> the response complete), queue (waiting
// for a server slot, 0 when there was no wait) and connect (connect(2) ->
// an established connection, the TLS handshake included). Each bucket is
// one atomic counter of the owning loop: an observation is a short scan of
// fixed bounds and two uncontended adds, no allocation, no lock; a reader
// sums the loops' buckets and makes them cumulative (Prometheus' le).

// HistBuckets is the number of finite buckets; bucket HistBuckets is +Inf.
const HistBuckets = 14

// histBoundsNs are the buckets' upper bounds in nanoseconds, from 0.5 ms
// (a local server's connect) to 10 s (a slow download); read-only.
var histBoundsNs = [HistBuckets]int64{
	500e3, 1e6, 2.5e6, 5e6, 10e6, 25e6, 50e6, 100e6, 250e6, 500e6, 1e9, 2.5e9, 5e9, 10e9,
}

// HistBound is the upper bound of finite bucket i in seconds (the le label).
func HistBound(i int) float64 { return float64(histBoundsNs[i]) / 1e9 }

// Histogram counts durations in the fixed buckets (owning loop writes).
type Histogram struct {
	n     [HistBuckets + 1]atomic.Int64 // per bucket, not cumulative; [HistBuckets] is +Inf
	sumNs atomic.Int64
}

// Observe counts one duration of ns nanoseconds (owning loop only; a
// negative duration, a clock step, counts as 0).
func (h *Histogram) Observe(ns int64) {
	ns = max(ns, 0)
	i := 0
	for i < HistBuckets && ns > histBoundsNs[i] {
		i++
	}
	h.n[i].Add(1)
	h.sumNs.Add(ns)
}

// HistTotals is a histogram summed over the loops: Cumulative[i] counts
// the observations <= HistBound(i), Count all of them.
type HistTotals struct {
	Cumulative [HistBuckets]uint64
	Count      uint64
	SumSeconds float64
}

// timingFields are the duration histograms of one backend on one loop.
type timingFields struct {
	Request Histogram // request head complete -> response complete (http)
	Queue   Histogram // wait for a server slot (0 when none)
	Connect Histogram // connect(2) -> established (TLS handshake included)
}

// TimingSlot is one loop's histograms of a backend, padded as Slot is.
type TimingSlot struct {
	timingFields
	_ [(cacheLine-unsafe.Sizeof(timingFields{})%cacheLine)%cacheLine + cacheLine]byte
}

// Timings are a backend's histograms summed over the loops.
type Timings struct {
	Request, Queue, Connect HistTotals
}

// TimingTotal sums the loops' histograms (any goroutine). Buckets are read
// one by one: a histogram read while a loop observes may be off by the
// observations in flight, never by more.
func (c *Counters) TimingTotal() Timings {
	var t Timings
	var raw [3][HistBuckets + 1]uint64
	var sum [3]int64
	if p := c.timings.Load(); p != nil {
		for _, s := range *p {
			for k, h := range [3]*Histogram{&s.Request, &s.Queue, &s.Connect} {
				for i := range h.n {
					raw[k][i] += uint64(h.n[i].Load())
				}
				sum[k] += h.sumNs.Load()
			}
		}
	}
	for k, ht := range [3]*HistTotals{&t.Request, &t.Queue, &t.Connect} {
		var cum uint64
		for i := range raw[k] {
			cum += raw[k][i]
			if i < HistBuckets {
				ht.Cumulative[i] = cum
			}
		}
		ht.Count = cum
		ht.SumSeconds = float64(sum[k]) / 1e9
	}
	return t
}

// Timing returns loop id's histograms (owning loop). They are made on
// first use, one allocation per object and loop: only backends observe
// durations, so servers' and frontends' counters never carry them.
func (c *Counters) Timing(id int) *TimingSlot {
	return loopSlot(&c.timings, id, nil)
}
