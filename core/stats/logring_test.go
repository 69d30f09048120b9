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
		{"normal entries fill all but the reserve", 8, 7, 7, 0},
		{"overflow drops the newest", 8, 11, 7, 4},
		{"size rounds up to a power of two", 5, 9, 7, 2},
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

// TestLogRingKeepsRoomForAbnormalEntries: a ring that normal entries
// filled (the writer behind the traffic) still takes abnormal ones, up to
// its reserve (an eighth), in order; the tester's load saw one of 20
// 502s dropped with the normal entries before.
func TestLogRingKeepsRoomForAbnormalEntries(t *testing.T) {
	r := NewLogRing(64)
	for i := range 100 {
		r.Push(&LogEntry{BytesIn: int64(i), Status: 200, Term: TermNormal})
	}
	var kept []int64
	for i := range 10 {
		ok := r.Push(&LogEntry{BytesIn: int64(1000 + i), Status: 502, Term: Termination{'S', 'H'}})
		if ok != (i < 8) {
			t.Errorf("502 number %d: pushed %v", i, ok)
		}
	}
	if r.Push(&LogEntry{Status: 200, Term: TermNormal}) || r.Push(&LogEntry{Status: 0, Term: Termination{'C', 'D'}}) {
		t.Error("a full ring took an entry")
	}
	r.Drain(func(e *LogEntry) { kept = append(kept, e.BytesIn) })
	if len(kept) != 64 || kept[55] != 55 || kept[56] != 1000 || kept[63] != 1007 {
		t.Errorf("kept %d entries: %v", len(kept), kept)
	}
	if d := r.Dropped(); d != 100-56+2+2 {
		t.Errorf("dropped %d", d)
	}
	for _, tc := range []struct {
		e    LogEntry
		want bool
	}{
		{LogEntry{Status: 200, Term: TermNormal}, false}, {LogEntry{}, false}, {LogEntry{Status: 404}, true},
		{LogEntry{Term: Termination{'C', 'D'}}, true}, {LogEntry{Status: 502, Term: Termination{'S', 'H'}}, true},
	} {
		if got := tc.e.Abnormal(); got != tc.want {
			t.Errorf("%+v: abnormal %v", tc.e.Term, got)
		}
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
