package stats

import (
	"sync/atomic"
	"testing"
)

// TestRatePeaksSumTheLoops: the peak of a rate is the most events of one
// second over all loops together: folded by the first event of a loop's
// next second, by a reader for the second that just ended (a burst that
// nothing followed), and never below the rate read beside it.
func TestRatePeaksSumTheLoops(t *testing.T) {
	c := New(2)
	l0, l1 := c.Loop(0), c.Loop(1)
	for range 5 {
		l0.ReqStarted(10)
	}
	for range 7 {
		l1.ReqStarted(10)
	}
	l0.ReqStarted(11) // second 10 ended on loop 0: 5 + loop 1's 7
	if got := c.rateMax[rateReq].Load(); got != 12 {
		t.Fatalf("after second 10: req_rate_max %d, want 12", got)
	}
	for range 3 {
		l1.ReqStarted(11)
	}
	l1.ReqStarted(12) // second 11: 1 + 3, below the peak
	if got := c.rateMax[rateReq].Load(); got != 12 {
		t.Fatalf("after second 11: req_rate_max %d, want 12", got)
	}
	// A burst of 30 in second 20 on loop 1, then nothing: a reader in
	// second 21 folds it.
	for range 30 {
		l1.ReqStarted(20)
	}
	if got := c.Total(21_500_000_000).ReqRateMax; got != 30 {
		t.Fatalf("read after a burst: req_rate_max %d, want 30", got)
	}
	// A burst of 50 in second 40 over both loops, then silence: read a
	// minute later, it is still the peak.
	for range 25 {
		l0.ReqStarted(40)
		l1.ReqStarted(40)
	}
	if got := c.Total(100_000_000_000).ReqRateMax; got != 50 {
		t.Fatalf("read a minute after a burst: req_rate_max %d, want 50", got)
	}
	// Connections count apart.
	l0.ConnStarted(30)
	l0.ConnStarted(30)
	l1.ConnStarted(30)
	tot := c.Total(30_100_000_000)
	if tot.ConnRateMax < int64(tot.ConnRate+0.5) || tot.ConnRateMax != 3 {
		t.Fatalf("conn_rate_max %d with conn_rate %.2f, want 3", tot.ConnRateMax, tot.ConnRate)
	}
	if tot.ReqRateMax != 50 {
		t.Fatalf("req_rate_max %d after connections, want 50", tot.ReqRateMax)
	}
}

// TestRatePeakOfAGrownSlot: a slot made for a loop beyond the first ones
// (nbthread grew) folds into the same peaks.
func TestRatePeakOfAGrownSlot(t *testing.T) {
	c := New(1)
	l3 := c.Loop(3)
	for range 4 {
		l3.ConnStarted(5)
	}
	l3.ConnStarted(6)
	if got := c.rateMax[rateConn].Load(); got != 4 {
		t.Fatalf("conn_rate_max %d, want 4", got)
	}
}

// TestPeakCountingDoesNotAllocate: counting an event, a second that ends
// included, allocates nothing.
func TestPeakCountingDoesNotAllocate(t *testing.T) {
	c := New(4)
	s := c.Loop(2)
	sec := uint32(100)
	if a := testing.AllocsPerRun(1000, func() {
		s.ReqStarted(sec)
		s.ConnStarted(sec)
		sec++
	}); a != 0 {
		t.Fatalf("%v allocations per event", a)
	}
}

func TestRaiseMax(t *testing.T) {
	var m atomic.Int64
	for _, v := range []int64{3, 1, 7, 7, 2} {
		RaiseMax(&m, v)
	}
	if m.Load() != 7 {
		t.Fatalf("max %d, want 7", m.Load())
	}
}

func BenchmarkReqStarted(b *testing.B) {
	c := New(4)
	s := c.Loop(1)
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		s.ReqStarted(uint32(i >> 16)) // a new second every 65536 events
	}
}
