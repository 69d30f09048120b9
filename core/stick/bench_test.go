package stick

import (
	"runtime"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkTrackExisting: one loop's lookup and request count of a client
// the table holds, among 100 000 (make bench's limit-table row).
func BenchmarkTrackExisting(b *testing.B) {
	const n = 100000
	tb := New(n*2, int64(time.Hour))
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = AddrKey(addr(i))
		tb.Track(&keys[i], 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if r := tb.Track(&keys[i%n], int64(i)); r.Valid() {
			r.Hit(CtrReq, int64(i), 1e9)
		}
	}
}

// BenchmarkTrackParallel: every P tracks and counts clients of the same
// table at once (the loops sharing a limit).
func BenchmarkTrackParallel(b *testing.B) {
	const n = 100000
	tb := New(n*2, int64(time.Hour))
	keys := make([]Key, n)
	for i := range keys {
		keys[i] = AddrKey(addr(i))
		tb.Track(&keys[i], 1)
	}
	var seq atomic.Int64
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int(seq.Add(7919))
		for pb.Next() {
			i++
			if r := tb.Track(&keys[i%n], int64(i)); r.Valid() {
				r.Hit(CtrReq, int64(i), 1e9)
			}
		}
	})
}

// BenchmarkTrackNewKeys: a flood of distinct clients into a full table of
// 100 000 entries (each takes the least recently seen entry of its set).
func BenchmarkTrackNewKeys(b *testing.B) {
	const n = 100000
	tb := New(n, int64(time.Hour))
	for i := 0; i < 2*n; i++ {
		k := AddrKey(addr(i))
		tb.Track(&k, int64(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		k := AddrKey(addr(2*n + i))
		tb.Track(&k, int64(2*n+i))
	}
}

// BenchmarkMemoryPerEntry fills a table of 100 000 entries and reports
// the heap it took per entry.
func BenchmarkMemoryPerEntry(b *testing.B) {
	const n = 100000
	for i := 0; i < b.N; i++ {
		var before, after runtime.MemStats
		runtime.GC()
		runtime.ReadMemStats(&before)
		tb := New(n, int64(time.Hour))
		for j := 0; j < 4*n; j++ {
			k := AddrKey(addr(j))
			tb.Track(&k, int64(j))
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/float64(n), "B/entry")
		b.ReportMetric(float64(tb.Stats().Used), "entries")
		runtime.KeepAlive(tb)
	}
}

// BenchmarkTrackSameKeyParallel: every P counts requests of one client
// at once, the worst case of a shared table (one entry's cache line
// bounces between the loops); per-loop shards would avoid it only to pay
// the sum over every loop's shard on each decision.
func BenchmarkTrackSameKeyParallel(b *testing.B) {
	tb := New(1024, int64(time.Hour))
	k := AddrKey(addr(1))
	tb.Track(&k, 1)
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		i := int64(0)
		for pb.Next() {
			i++
			if r := tb.Track(&k, i); r.Valid() {
				r.Hit(CtrReq, i, 1e9)
			}
		}
	})
}
