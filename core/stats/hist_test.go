package stats

import (
	"testing"
	"unsafe"
)

func TestHistogramBucketsAreUpperBoundsInclusive(t *testing.T) {
	var c Counters
	h := &c.Timing(0).Request
	for _, ns := range []int64{-5, 0, 500e3, 500e3 + 1, 1e6, 10e9, 10e9 + 1, 60e9} {
		h.Observe(ns)
	}
	got := c.TimingTotal().Request
	// <= 0.5 ms: -5 (as 0), 0, 500e3; <= 1 ms: + 500e3+1, 1e6; <= 10 s: + 10e9.
	want := [HistBuckets]uint64{3, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 5, 6}
	if got.Cumulative != want || got.Count != 8 {
		t.Fatalf("cumulative %v count %d, want %v and 8", got.Cumulative, got.Count, want)
	}
	if sum := 500e3 + 500e3 + 1 + 1e6 + 10e9 + 10e9 + 1 + 60e9; got.SumSeconds != float64(int64(sum))/1e9 {
		t.Fatalf("sum %v s, want %v", got.SumSeconds, float64(int64(sum))/1e9)
	}
	if HistBound(0) != 0.0005 || HistBound(HistBuckets-1) != 10 {
		t.Fatalf("bounds %v .. %v", HistBound(0), HistBound(HistBuckets-1))
	}
}

func TestTimingTotalSumsLoopsAndKeepsHistogramsApart(t *testing.T) {
	c := New(2)
	c.Timing(0).Queue.Observe(2e6)
	c.Timing(3).Queue.Observe(2e6)
	c.Timing(1).Connect.Observe(1)
	got := c.TimingTotal()
	if got.Queue.Count != 2 || got.Queue.Cumulative[2] != 2 || got.Queue.Cumulative[1] != 0 {
		t.Errorf("queue %+v", got.Queue)
	}
	if got.Connect.Count != 1 || got.Request.Count != 0 {
		t.Errorf("connect %+v request %+v", got.Connect, got.Request)
	}
	if (New(4)).TimingTotal() != (Timings{}) {
		t.Error("counters nobody timed have observations")
	}
}

func TestTimingSlotIsWholeCacheLines(t *testing.T) {
	if s := unsafe.Sizeof(TimingSlot{}); s%cacheLine != 0 || s-unsafe.Sizeof(timingFields{}) < cacheLine {
		t.Fatalf("TimingSlot is %d bytes", s)
	}
}

func TestObserveDoesNotAllocate(t *testing.T) {
	var c Counters
	s := c.Timing(0)
	if n := testing.AllocsPerRun(100, func() { s.Request.Observe(3e6); c.Timing(0).Queue.Observe(0) }); n != 0 {
		t.Fatalf("%v allocations per observation", n)
	}
}

func BenchmarkObserve(b *testing.B) {
	var c Counters
	s := c.Timing(0)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.Request.Observe(int64(i) * 1000)
	}
}
