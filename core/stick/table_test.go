package stick

import (
	"math/rand/v2"
	"net/netip"
	"runtime"
	"sync"
	"testing"
	"time"
	"unsafe"
)

func addr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, byte(i >> 16), byte(i >> 8), byte(i)})
}

func TestEntryIs128Bytes(t *testing.T) {
	if s := unsafe.Sizeof(Entry{}); s != 128 {
		t.Fatalf("Entry is %d bytes, want 128 (the memory figure of the doc)", s)
	}
}

func TestKeyRoundTrip(t *testing.T) {
	long := make([]byte, 100)
	for i := range long {
		long[i] = 'a' + byte(i%26)
	}
	sum := [32]byte{1, 2, 3}
	for _, tc := range []struct {
		kind Kind
		key  Key
		want string
	}{
		{KindAddr, AddrKey(netip.MustParseAddr("10.1.2.3")), "10.1.2.3"},
		{KindAddr, AddrKey(netip.MustParseAddr("::ffff:10.1.2.3")), "10.1.2.3"},
		{KindAddr, AddrKey(netip.MustParseAddr("2001:db8::1")), "2001:db8::1"},
		{KindBytes, BytesKey([]byte("key-123")), "key-123"},
		{KindBytes, BytesKey(long), ""},
		{KindCert, CertKey(&sum), "sha256:0102030000000000000000000000000000000000000000000000000000000000"},
	} {
		s := tc.key.String()
		if tc.want != "" && s != tc.want {
			t.Errorf("String() = %q, want %q", s, tc.want)
		}
		back, err := ParseKey(tc.kind, s)
		if err != nil || back != tc.key {
			t.Errorf("ParseKey(%q) = %v, %v; want the key back", s, back, err)
		}
	}
	for _, bad := range []string{"", "10.0.0.1%eth0", "nope"} {
		if _, err := ParseKey(KindAddr, bad); err == nil {
			t.Errorf("ParseKey(addr, %q) accepted", bad)
		}
	}
	if _, err := ParseKey(KindCert, "sha256:zz"); err == nil {
		t.Error("a bad certificate hash was accepted")
	}
	if k := BytesKey(nil); !k.IsZero() {
		t.Error("an empty header value must not be tracked")
	}
}

// A flood of distinct keys never holds more entries than the table's
// capacity, which max_entries bounds.
func TestTableBoundedUnderFlood(t *testing.T) {
	tb := New(1000, int64(time.Minute))
	if c := tb.Capacity(); c != 1000 {
		t.Fatalf("capacity %d, want 1000", c)
	}
	for i := 0; i < 100000; i++ {
		k := AddrKey(addr(i))
		if r := tb.Track(&k, int64(i)); !r.Valid() {
			t.Fatalf("key %d not tracked", i)
		}
	}
	st := tb.Stats()
	if st.Used > int64(tb.Capacity()) || st.Used < int64(tb.Capacity())*9/10 {
		t.Fatalf("used %d entries of %d", st.Used, tb.Capacity())
	}
	_, live := tb.Top(10, 100000, Periods{})
	if live > tb.Capacity() {
		t.Fatalf("%d live entries, capacity %d", live, tb.Capacity())
	}
	// The most recent keys are there; the oldest went first.
	recent := 0
	for i := 99000; i < 100000; i++ {
		k := AddrKey(addr(i))
		if tb.Find(&k).Valid() {
			recent++
		}
	}
	if recent < 600 {
		t.Errorf("only %d of the last 1000 keys kept: least recently seen must go first", recent)
	}
	if tb.Capacity() != New(1007, 1).Capacity() {
		t.Error("max_entries is rounded down to a multiple of 8")
	}
}

// Within a set, the least recently seen entry is the one a new key takes;
// an entry holding a connection is never taken.
func TestSetEvictsLeastRecentlySeen(t *testing.T) {
	tb := New(Ways, int64(time.Hour)) // one set
	keys := make([]Key, Ways+2)
	for i := range keys {
		keys[i] = AddrKey(addr(i))
	}
	refs := make([]Ref, Ways)
	for i := 0; i < Ways; i++ {
		refs[i] = tb.Track(&keys[i], int64(i+1)*1e9)
	}
	if n := refs[0].Acquire(); n != 1 {
		t.Fatalf("Acquire = %d", n)
	}
	tb.Track(&keys[1], 100e9) // seen again: now the most recent
	tb.Track(&keys[Ways], 200e9)
	if !tb.Find(&keys[0]).Valid() {
		t.Error("the entry holding a connection was taken")
	}
	if !tb.Find(&keys[1]).Valid() {
		t.Error("a recently seen entry was taken")
	}
	if tb.Find(&keys[2]).Valid() {
		t.Error("the least recently seen entry (2) is still there")
	}
	// Every way held by a connection: the new key is not tracked.
	for i := 1; i < Ways; i++ {
		r := tb.Find(&keys[i])
		if !r.Valid() {
			r = tb.Find(&keys[Ways])
		}
		if r.Valid() && r.Conns() == 0 {
			r.Acquire()
		}
	}
	if r := tb.Track(&keys[Ways+1], 300e9); r.Valid() {
		t.Fatal("a key was placed in a set whose entries all hold connections")
	}
	if tb.Stats().Full == 0 {
		t.Error("Stats.Full not counted")
	}
}

func TestClear(t *testing.T) {
	tb := New(64, int64(time.Hour))
	k := AddrKey(addr(1))
	r := tb.Track(&k, 1)
	r.Hit(CtrReq, 1, 1e9)
	if !tb.Clear(&k) || tb.Find(&k).Valid() || tb.Stats().Used != 0 {
		t.Fatal("Clear left the entry")
	}
	r = tb.Track(&k, 2)
	r.Acquire()
	r.Hit(CtrReq, 2, 1e9)
	if !tb.Clear(&k) {
		t.Fatal("Clear missed")
	}
	r2 := tb.Find(&k)
	if !r2.Valid() || r2.Conns() != 1 || r2.Rate(CtrReq, 3, 1e9) != 0 {
		t.Fatal("Clear of an entry holding a connection must keep it and restart its rates")
	}
	k2 := AddrKey(addr(2))
	if tb.Clear(&k2) {
		t.Error("Clear found an absent key")
	}
}

func TestTrackExistingDoesNotAllocate(t *testing.T) {
	tb := New(1024, int64(time.Minute))
	k := AddrKey(addr(7))
	tb.Track(&k, 1)
	now := int64(2)
	if n := testing.AllocsPerRun(1000, func() {
		r := tb.Track(&k, now)
		r.Hit(CtrReq, now, 1e9)
		now++
	}); n != 0 {
		t.Fatalf("%v allocations per lookup of an existing key", n)
	}
	// Once its set exists, a new key allocates nothing either.
	tb = New(Ways, int64(time.Minute))
	i := 0
	if n := testing.AllocsPerRun(1000, func() {
		k := AddrKey(addr(i))
		tb.Track(&k, int64(i))
		i++
	}); n != 0 {
		t.Fatalf("%v allocations per new key in an existing set", n)
	}
}

// Loops acquire and release connections of a few keys while others flood
// the same sets with new keys: no count is lost, none is left behind.
func TestAcquireReleaseUnderEviction(t *testing.T) {
	tb := New(2*Ways, int64(time.Hour))
	var wg sync.WaitGroup
	hot := []Key{AddrKey(addr(1)), AddrKey(addr(2)), AddrKey(addr(3))}
	stop := make(chan struct{})
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(g), 1))
			for i := 0; i < 20000; i++ {
				k := &hot[rng.IntN(len(hot))]
				var r Ref
				for {
					r = tb.Track(k, int64(i))
					if !r.Valid() {
						continue
					}
					if r.Acquire() > 0 {
						break
					}
				}
				r.Release()
			}
		}(g)
	}
	var flood sync.WaitGroup
	flood.Add(1)
	go func() {
		defer flood.Done()
		for i := 1000; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			k := AddrKey(addr(i))
			tb.Track(&k, int64(i))
			if i%64 == 0 {
				runtime.Gosched()
			}
		}
	}()
	wg.Wait()
	close(stop)
	flood.Wait()
	for i := range hot {
		if r := tb.Find(&hot[i]); r.Valid() && r.Conns() != 0 {
			t.Errorf("key %d holds %d connections after every release", i, r.Conns())
		}
	}
}
