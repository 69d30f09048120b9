package stats

import (
	"sync"
	"testing"
)

func TestLogRingKeepsOrderAndDropsWhenFull(t *testing.T) {
	tests := []struct {
		name        string
		size        int
		push        int
		wantKept    int
		wantDropped uint64
	}{
		{"room to spare", 8, 5, 5, 0},
		{"exactly full", 8, 8, 8, 0},
		{"overflow drops the newest", 8, 11, 8, 3},
		{"size rounds up to a power of two", 5, 9, 8, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewLogRing(tc.size)
			for i := range tc.push {
				r.Push(&LogEntry{BytesIn: int64(i)})
			}
			var got []int64
			r.Drain(func(e *LogEntry) { got = append(got, e.BytesIn) })
			if len(got) != tc.wantKept || r.Dropped() != tc.wantDropped {
				t.Fatalf("kept %d dropped %d, want %d and %d", len(got), r.Dropped(), tc.wantKept, tc.wantDropped)
			}
			for i, v := range got {
				if v != int64(i) {
					t.Fatalf("entry %d is %d: order lost", i, v)
				}
			}
			if n := r.Drain(func(*LogEntry) {}); n != 0 {
				t.Fatalf("second drain saw %d entries", n)
			}
		})
	}
}

// One producer, one consumer at once: every entry is either drained once
// or counted as dropped (-race checks the hand-off).
func TestLogRingProducerAndConsumerConcurrently(t *testing.T) {
	const n = 100000
	r := NewLogRing(64)
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := range n {
			r.Push(&LogEntry{Frontend: "fe", BytesIn: int64(i)})
		}
	}()
	seen, last := 0, int64(-1)
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	drain := func() {
		r.Drain(func(e *LogEntry) {
			if e.BytesIn <= last || e.Frontend != "fe" {
				t.Errorf("entry %d after %d (%q)", e.BytesIn, last, e.Frontend)
			}
			last = e.BytesIn
			seen++
		})
	}
	for running := true; running; {
		select {
		case <-done:
			running = false
		default:
		}
		drain()
	}
	drain()
	if uint64(seen)+r.Dropped() != n {
		t.Fatalf("%d drained + %d dropped != %d pushed", seen, r.Dropped(), n)
	}
}

func TestLogRingPushDoesNotAllocate(t *testing.T) {
	r := NewLogRing(16)
	e := LogEntry{Frontend: "fe", Backend: "be", Server: "s1", BytesIn: 1}
	if n := testing.AllocsPerRun(1000, func() { r.Push(&e) }); n != 0 {
		t.Fatalf("%v allocations per push", n)
	}
}

func BenchmarkLogRingPush(b *testing.B) {
	r := NewLogRing(1 << 16)
	e := LogEntry{Frontend: "fe", Backend: "be", Server: "s1", BytesIn: 1}
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		r.Push(&e)
		if i&0xfff == 0 {
			r.Drain(func(*LogEntry) {})
		}
	}
}
