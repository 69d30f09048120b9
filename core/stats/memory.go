package stats

import (
	"os"
	"runtime"
	"runtime/metrics"
	"strconv"
	"strings"
)

// Memory is what GET /api/v1/memory shows: the process's resident set,
// the Go runtime's memory classes, and per loop what the data plane holds
// — its connection objects, their pools and its tables — counted on the
// loop's thread at the time of the call.
type Memory struct {
	// RSSBytes is the process's resident set (VmRSS of /proc/self/status):
	// what the bench's idle row measures, kernel socket buffers excluded.
	RSSBytes int64    `json:"rss_bytes" example:"27000000"`
	Go       GoMemory `json:"go"`
	// Loops: per loop, what its data plane holds.
	Loops []LoopMemory `json:"loops"`
	// IdleHTTPConn is what one idle kept-alive HTTP/1.1 client connection
	// holds in the data plane, by part: its connection object (the Side
	// with its fd, tasklet and transport, the client, the timer: one
	// allocation in its size class) and its slots in the loop's fd table
	// and timer heap. It holds no stream, no parser and no buffer: those
	// are taken when a request begins and given back when it ends.
	IdleHTTPConn []Part `json:"idle_http_conn"`
	// IdleHTTPConnBytes is the sum of IdleHTTPConn.
	IdleHTTPConnBytes int64 `json:"idle_http_conn_bytes" example:"304"`
}

// Part is one thing a connection holds, and what it costs.
type Part struct {
	Name  string `json:"name" example:"h1_conn"`
	Bytes int64  `json:"bytes" example:"288"`
}

// GoMemory is the Go runtime's view (runtime/metrics, /memory/classes):
// TotalBytes is everything it mapped; the resident set is that minus
// HeapReleasedBytes (and pages never touched), plus what is not Go's.
type GoMemory struct {
	// HeapObjectsBytes: live objects and garbage not swept yet.
	HeapObjectsBytes uint64 `json:"heap_objects_bytes"`
	// HeapLiveBytes: what the last GC found live.
	HeapLiveBytes uint64 `json:"heap_live_bytes"`
	// HeapUnusedBytes: reserved for objects in spans in use but holding
	// none (the rest of a size class's span: fragmentation).
	HeapUnusedBytes uint64 `json:"heap_unused_bytes"`
	// HeapFreeBytes: free spans still resident (may be reused at once).
	HeapFreeBytes uint64 `json:"heap_free_bytes"`
	// HeapReleasedBytes: free spans given back to the kernel.
	HeapReleasedBytes uint64 `json:"heap_released_bytes"`
	// HeapGoalBytes: the heap size at which the next GC starts (GOGC).
	HeapGoalBytes uint64 `json:"heap_goal_bytes"`
	// StacksBytes: goroutine stacks (and the OS stacks of locked threads).
	StacksBytes uint64 `json:"stacks_bytes"`
	// MetadataBytes: the runtime's own structures (spans, per-P caches).
	MetadataBytes uint64 `json:"metadata_bytes"`
	// OtherBytes: everything else the runtime mapped (profiling, GC, misc).
	OtherBytes uint64 `json:"other_bytes"`
	TotalBytes uint64 `json:"total_bytes"`
	GCCycles   uint64 `json:"gc_cycles"`
	Goroutines int    `json:"goroutines"`
}

// LoopMemory is what one loop's data plane holds.
type LoopMemory struct {
	Loop    int    `json:"loop" example:"0"`
	Objects []Pool `json:"objects"`
	// Bytes is the sum of Objects' bytes.
	Bytes int64 `json:"bytes"`
}

// Pool is one kind of object a loop holds: those in use (Live) and those
// kept for reuse (Free), or for a table its entries in use and its spare
// capacity. Bytes is what they cost: each object in its Go malloc size
// class (ClassBytes), a table as one allocation of its capacity.
type Pool struct {
	Name        string `json:"name" example:"h1_conn"`
	ObjectBytes int    `json:"object_bytes" example:"272"`
	ClassBytes  int    `json:"class_bytes" example:"288"`
	Live        int    `json:"live" example:"5000"`
	Free        int    `json:"free" example:"16"`
	Bytes       int64  `json:"bytes" example:"1444608"`
}

// SizeClasses are the Go runtime's malloc size classes, from the bucket
// bounds of its allocation histogram (each bound is a class's size + 1).
func SizeClasses() []int {
	s := []metrics.Sample{{Name: "/gc/heap/allocs-by-size:bytes"}}
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindFloat64Histogram {
		return nil
	}
	var out []int
	for _, b := range s[0].Value.Float64Histogram().Buckets {
		if b > 1 && b < 1<<40 { // the first bound is 1 (size 0), the last +Inf
			out = append(out, int(b)-1)
		}
	}
	return out
}

// ClassOf is what an allocation of n bytes costs: its size class, or
// for a large object (past the last class) whole 8 KiB runtime pages.
func ClassOf(classes []int, n int) int {
	for _, c := range classes {
		if c >= n {
			return c
		}
	}
	const page = 8192
	return (n + page - 1) / page * page
}

// PoolOf is the Pool of live and free objects of size bytes each.
func PoolOf(classes []int, name string, size uintptr, live, free int) Pool {
	c := ClassOf(classes, int(size))
	return Pool{Name: name, ObjectBytes: int(size), ClassBytes: c, Live: live, Free: free, Bytes: int64(c) * int64(live+free)}
}

// TableOf is the Pool of a table of entries of size bytes, used entries
// in use out of its capacity, allocated as one.
func TableOf(classes []int, name string, size uintptr, used, capacity int) Pool {
	return Pool{Name: name, ObjectBytes: int(size), ClassBytes: int(size), Live: used, Free: capacity - used,
		Bytes: int64(ClassOf(classes, int(size)*capacity))}
}

// ReadGoMemory reads the runtime's memory classes.
func ReadGoMemory() GoMemory {
	names := []string{
		"/memory/classes/heap/objects:bytes", "/gc/heap/live:bytes", "/memory/classes/heap/unused:bytes",
		"/memory/classes/heap/free:bytes", "/memory/classes/heap/released:bytes", "/gc/heap/goal:bytes",
		"/memory/classes/heap/stacks:bytes", "/memory/classes/os-stacks:bytes",
		"/memory/classes/metadata/mcache/free:bytes", "/memory/classes/metadata/mcache/inuse:bytes",
		"/memory/classes/metadata/mspan/free:bytes", "/memory/classes/metadata/mspan/inuse:bytes",
		"/memory/classes/metadata/other:bytes", "/memory/classes/other:bytes",
		"/memory/classes/profiling/buckets:bytes", "/memory/classes/total:bytes", "/gc/cycles/total:gc-cycles",
	}
	s := make([]metrics.Sample, len(names))
	for i, n := range names {
		s[i].Name = n
	}
	metrics.Read(s)
	v := func(i int) uint64 {
		if s[i].Value.Kind() != metrics.KindUint64 {
			return 0
		}
		return s[i].Value.Uint64()
	}
	return GoMemory{
		HeapObjectsBytes: v(0), HeapLiveBytes: v(1), HeapUnusedBytes: v(2),
		HeapFreeBytes: v(3), HeapReleasedBytes: v(4), HeapGoalBytes: v(5),
		StacksBytes:   v(6) + v(7),
		MetadataBytes: v(8) + v(9) + v(10) + v(11) + v(12),
		OtherBytes:    v(13) + v(14),
		TotalBytes:    v(15), GCCycles: v(16), Goroutines: runtime.NumGoroutine(),
	}
}

// ReadRSS is the process's VmRSS in bytes (0 when /proc cannot be read).
func ReadRSS() int64 {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kib, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			if err != nil {
				return 0
			}
			return kib << 10
		}
	}
	return 0
}
