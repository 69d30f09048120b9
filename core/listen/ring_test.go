package listen

import (
	"net/netip"
	"sync"
	"testing"
)

func TestRingIsFIFOAndBounded(t *testing.T) {
	for _, size := range []int{0, 1, 2, 3, 8} {
		r := newRing(size)
		if c := r.Cap(); c < 2 || c < size || c&(c-1) != 0 {
			t.Fatalf("size %d: cap %d", size, c)
		}
		ln := &Listener{}
		for lap := range 3 {
			for i := range r.Cap() {
				if !r.push(lap*100+i, netip.AddrPort{}, ln) {
					t.Fatalf("size %d lap %d: push %d refused", size, lap, i)
				}
			}
			if r.push(-1, netip.AddrPort{}, ln) {
				t.Fatalf("size %d: push into a full ring accepted", size)
			}
			if r.Len() != r.Cap() {
				t.Fatalf("Len %d, cap %d", r.Len(), r.Cap())
			}
			for i := range r.Cap() {
				fd, _, l, ok := r.pop()
				if !ok || fd != lap*100+i || l != ln {
					t.Fatalf("size %d lap %d: pop %d = %d %v", size, lap, i, fd, ok)
				}
			}
			if _, _, _, ok := r.pop(); ok || r.Len() != 0 {
				t.Fatal("pop from an empty ring succeeded")
			}
		}
	}
}

// Concurrent producers, one consumer: every entry comes out exactly once and
// each producer's entries in order.
func TestRingConcurrentProducersLoseNothing(t *testing.T) {
	r := newRing(64)
	const producers, each = 4, 2000
	ln := &Listener{}
	var wg sync.WaitGroup
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < each; {
				if r.push(p*each+i, netip.AddrPort{}, ln) {
					i++
				}
			}
		}()
	}
	last := [producers]int{-1, -1, -1, -1}
	got := 0
	for got < producers*each {
		fd, _, _, ok := r.pop()
		if !ok {
			continue
		}
		p, i := fd/each, fd%each
		if i <= last[p] {
			t.Fatalf("producer %d: %d after %d", p, i, last[p])
		}
		last[p] = i
		got++
	}
	wg.Wait()
}

func TestRingPushPopAllocatesNothing(t *testing.T) {
	r := newRing(8)
	ln := &Listener{}
	if n := testing.AllocsPerRun(1000, func() {
		r.push(3, netip.AddrPort{}, ln)
		r.pop()
	}); n != 0 {
		t.Fatalf("%v allocations per push+pop", n)
	}
}

func BenchmarkRingPushPop(b *testing.B) {
	r := newRing(512)
	ln := &Listener{}
	b.ReportAllocs()
	for b.Loop() {
		r.push(3, netip.AddrPort{}, ln)
		r.pop()
	}
}
