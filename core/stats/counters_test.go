package stats

import (
	"sync"
	"sync/atomic"
	"testing"
	"unsafe"
)

func TestSlotIsWholeCacheLinesWithASpareLine(t *testing.T) {
	size := unsafe.Sizeof(Slot{})
	fields := unsafe.Sizeof(slotFields{})
	if size%cacheLine != 0 {
		t.Fatalf("Slot is %d bytes, not a multiple of %d", size, cacheLine)
	}
	if size-fields < cacheLine {
		t.Fatalf("Slot pads %d bytes after its fields, want at least a line (%d)", size-fields, cacheLine)
	}
}

func TestTotalSumsEveryLoopSlot(t *testing.T) {
	tests := []struct {
		name   string
		nloops int
		adds   map[int]int64 // loop id -> bytes added
		want   int64
	}{
		{"one loop", 1, map[int]int64{0: 10}, 10},
		{"four loops", 4, map[int]int64{0: 1, 1: 2, 2: 3, 3: 4}, 10},
		{"loop beyond the slots gets a slot", 2, map[int]int64{0: 5, 7: 6}, 11},
		{"zero counters grow", 0, map[int]int64{0: 1, 3: 2}, 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := New(tc.nloops)
			for id, n := range tc.adds {
				s := c.Loop(id)
				s.BytesIn.Add(n)
				s.ConnTotal.Add(1)
			}
			got := c.Total(0)
			if got.BytesIn != tc.want {
				t.Errorf("BytesIn = %d, want %d", got.BytesIn, tc.want)
			}
			if got.ConnTotal != int64(len(tc.adds)) {
				t.Errorf("ConnTotal = %d, want %d", got.ConnTotal, len(tc.adds))
			}
		})
	}
}

func TestZeroCountersAreUsable(t *testing.T) {
	var c Counters
	c.Loop(3).Requests.Add(2)
	if got := c.Total(0).Requests; got != 2 {
		t.Fatalf("Requests = %d, want 2", got)
	}
}

// TestLoopsAddedLaterGetTheirOwnSlots: counters made for 2 loops, then
// loops 2..7 appear (nbthread grew) and count concurrently with the first
// ones. Each new loop gets its own slot (not one slot shared by all the
// new loops, contended and written by several threads), a slot never
// moves once handed out, and no count is lost while the list grows.
func TestLoopsAddedLaterGetTheirOwnSlots(t *testing.T) {
	const loops, adds = 8, 1000
	c := New(2)
	first := c.Loop(0)
	var wg sync.WaitGroup
	got := make([]*Slot, loops)
	for id := loops - 1; id >= 0; id-- {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range adds {
				s := c.Loop(id)
				s.Requests.Add(1)
				if got[id] == nil {
					got[id] = s
				} else if got[id] != s {
					t.Errorf("loop %d: slot moved", id)
					return
				}
			}
		}()
	}
	wg.Wait()
	seen := map[*Slot]int{}
	for id, s := range got {
		if prev, dup := seen[s]; dup {
			t.Fatalf("loops %d and %d share a slot", prev, id)
		}
		seen[s] = id
		if n := s.Requests.Load(); n != adds {
			t.Errorf("loop %d slot holds %d, want %d", id, n, adds)
		}
	}
	if c.Loop(0) != first {
		t.Error("loop 0's slot moved when the list grew")
	}
	if n := c.Total(0).Requests; n != loops*adds {
		t.Errorf("Total = %d, want %d", n, loops*adds)
	}
}

// TestLoopDoesNotAllocate: a loop's slot, once made, costs no allocation.
func TestLoopDoesNotAllocate(t *testing.T) {
	c := New(1)
	c.Loop(3)
	if n := testing.AllocsPerRun(100, func() { c.Loop(0).Requests.Add(1); c.Loop(3).Requests.Add(1) }); n != 0 {
		t.Fatalf("%v allocations per Loop", n)
	}
}

func TestCountStatusByClass(t *testing.T) {
	c := New(1)
	s := c.Loop(0)
	for _, code := range []int{100, 200, 204, 301, 404, 418, 500, 503, 599, 0, 600, 99} {
		s.CountStatus(code)
	}
	got := c.Total(0).Counts().Status
	want := StatusCounts{S1xx: 1, S2xx: 2, S3xx: 1, S4xx: 2, S5xx: 3, Other: 3}
	if got != want {
		t.Fatalf("status = %+v, want %+v", got, want)
	}
}

func TestRateIsLastSecondWeightedByElapsedFraction(t *testing.T) {
	const s = int64(1e9)
	tests := []struct {
		name string
		adds []int64 // event times, ns
		at   int64
		want float64
	}{
		{"nothing", nil, 5 * s, 0},
		{"current second only", []int64{5 * s, 5*s + 1, 5*s + 2}, 5*s + s/2, 3},
		{"previous second weighted by what is left of this one", []int64{4 * s, 4 * s, 4 * s, 4 * s, 5 * s}, 5*s + s/4, 1 + 4*0.75},
		{"previous second read a second later", []int64{4 * s, 4 * s}, 5*s + s/2, 1},
		{"old events are forgotten", []int64{2 * s, 2 * s}, 5 * s, 0},
		{"a gap of more than a second clears prev", []int64{2 * s, 2 * s, 4 * s}, 4 * s, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r Rate
			for _, at := range tc.adds {
				r.Add(Sec(at))
			}
			if got := r.Read(tc.at); got != tc.want {
				t.Fatalf("rate = %v, want %v", got, tc.want)
			}
		})
	}
}

func TestCountsAverages(t *testing.T) {
	c := New(2)
	c.Loop(0).ConnectNs.Add(3000)
	c.Loop(0).ConnectCount.Add(1)
	c.Loop(1).ConnectNs.Add(1000)
	c.Loop(1).ConnectCount.Add(1)
	got := c.Total(0).Counts()
	if got.ConnectTimeAvgUs != 2 {
		t.Fatalf("connect avg = %v µs, want 2", got.ConnectTimeAvgUs)
	}
	if got.ResponseTimeAvgUs != 0 {
		t.Fatalf("response avg with no response = %v, want 0", got.ResponseTimeAvgUs)
	}
}

// Loops add while a reader sums: -race must stay quiet and the final total
// must be exact.
func TestConcurrentLoopsAndReaderAddUpExactly(t *testing.T) {
	const loops, per = 4, 10000
	c := New(loops)
	var wg sync.WaitGroup
	var stop atomic.Bool
	go func() {
		for !stop.Load() {
			_ = c.Total(0)
		}
	}()
	for id := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			s := c.Loop(id)
			for range per {
				s.ConnTotal.Add(1)
				s.BytesOut.Add(3)
				s.ConnRate.Add(1)
			}
		}()
	}
	wg.Wait()
	stop.Store(true)
	got := c.Total(0)
	if got.ConnTotal != loops*per || got.BytesOut != 3*loops*per {
		t.Fatalf("totals = %d conns %d bytes, want %d and %d", got.ConnTotal, got.BytesOut, loops*per, 3*loops*per)
	}
}

func TestIncrementsDoNotAllocate(t *testing.T) {
	c := New(2)
	s := c.Loop(1)
	n := testing.AllocsPerRun(1000, func() {
		s.ConnTotal.Add(1)
		s.BytesIn.Add(100)
		s.CountStatus(200)
		s.ConnRate.Add(7)
	})
	if n != 0 {
		t.Fatalf("%v allocations per increment set", n)
	}
}

// BenchmarkSlotAdd: every goroutine adds to its own slot (the design).
func BenchmarkSlotAdd(b *testing.B) {
	c := New(64)
	var next atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := c.Loop(int(next.Add(1) - 1))
		for pb.Next() {
			s.ConnTotal.Add(1)
			s.BytesIn.Add(512)
		}
	})
}

// BenchmarkSharedAdd: every goroutine adds to one shared counter set (what
// per-loop slots avoid).
func BenchmarkSharedAdd(b *testing.B) {
	var c Counters
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		s := c.Loop(-1)
		for pb.Next() {
			s.ConnTotal.Add(1)
			s.BytesIn.Add(512)
		}
	})
}

func BenchmarkTotal(b *testing.B) {
	c := New(8)
	b.ReportAllocs()
	for b.Loop() {
		_ = c.Total(1)
	}
}
