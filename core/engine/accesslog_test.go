package engine

import (
	"log/slog"
	"slices"
	"testing"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/stats"
)

// TestDrainLogRingsTakesOneInstantOfEveryLoop: while the writer drains
// loop 0's ring, loop 0 logs a request that ends at 2 and loop 1 one that
// ends at 3 (the next request of the same client). Both wait for the next
// batch, and the lines come out 1, 2, 3. Draining each ring up to where
// it stood when its turn came wrote 3 in the first batch and 2 after it.
func TestDrainLogRingsTakesOneInstantOfEveryLoop(t *testing.T) {
	rings := []*stats.LogRing{stats.NewLogRing(8), stats.NewLogRing(8)}
	al := accesslog.New(slog.New(slog.DiscardHandler), 0, 0, func() int64 { return 0 })
	rings[0].Push(&stats.LogEntry{End: 1, BytesIn: 1})
	add := func(e *stats.LogEntry) {
		if e.End == 1 { // the loops go on while the writer works
			rings[0].Push(&stats.LogEntry{End: 2, BytesIn: 2})
			rings[1].Push(&stats.LogEntry{End: 3, BytesIn: 3})
		}
		al.Add(e)
	}
	var tails []uint64
	for range 2 {
		tails, _ = drainLogRings(rings, tails, add)
		al.Flush()
	}
	var got []int64
	for _, r := range al.Recent(0) {
		got = append(got, r.BytesIn)
	}
	if !slices.Equal(got, []int64{1, 2, 3}) {
		t.Fatalf("entries written in the order %v, want 1 2 3 (by end)", got)
	}
}
