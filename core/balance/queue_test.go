package balance

import (
	"math/rand/v2"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// box is a loop's mailbox in these tests; wakes counts Notify calls.
type box struct {
	Mailbox
	wakes atomic.Int64
}

func newBox() *box {
	b := &box{}
	b.Notify = func() { b.wakes.Add(1) }
	return b
}

func newWaiter(b *box, name string) *Waiter {
	w := &Waiter{}
	w.Init(name, &b.Mailbox)
	return w
}

// full builds a backend whose servers all have maxconn 1 and holds their
// slots.
func full(t *testing.T, algo string, n int) *Backend {
	t.Helper()
	ws := make([]int, n)
	for i := range ws {
		ws[i] = 1
	}
	cfg := cfgBackend(algo, ws...)
	for i := range cfg.Servers {
		cfg.Servers[i].Maxconn = 1
	}
	b := mustBuild(t, cfg, nil)
	for _, s := range b.Servers {
		if !s.Acquire() {
			t.Fatal("first Acquire refused")
		}
	}
	return b
}

func mustQueue(t *testing.T, q *Queue, w *Waiter, srv *Server) {
	t.Helper()
	if s, queued := q.Wait(w, srv); s != nil || !queued {
		t.Fatalf("%v: Wait = %v, %v; want queued", w.Owner, s, queued)
	}
}

func take(t *testing.T, b *box) (string, *Server) {
	t.Helper()
	w, s := b.Take()
	if w == nil {
		t.Fatal("mailbox empty")
	}
	return w.Owner.(string), s
}

// TestQueueServesInArrivalOrder: waiters of one backend get the released
// slots oldest first, whichever loop (mailbox) they live on, and each
// release wakes the waiter's loop: no poll.
func TestQueueServesInArrivalOrder(t *testing.T) {
	b := full(t, config.BalanceRoundRobin, 1)
	q, s := b.Queue(), b.Servers[0]
	loopA, loopB := newBox(), newBox()
	w1, w2, w3 := newWaiter(loopB, "w1"), newWaiter(loopA, "w2"), newWaiter(loopB, "w3")
	for _, w := range []*Waiter{w1, w2, w3} {
		mustQueue(t, q, w, nil)
	}
	if q.Len() != 3 {
		t.Fatalf("Len = %d", q.Len())
	}
	s.Release() // on "loop A": goes to w1 on loop B
	if loopB.wakes.Load() != 1 || loopA.wakes.Load() != 0 {
		t.Fatalf("wakes A %d B %d, want B woken once", loopA.wakes.Load(), loopB.wakes.Load())
	}
	if name, got := take(t, loopB); name != "w1" || got != s {
		t.Fatalf("first grant to %s (%v)", name, got)
	}
	if s.Cur.Load() != 1 {
		t.Fatalf("Cur = %d: the slot must pass to w1, not be freed", s.Cur.Load())
	}
	if w, _ := loopB.Take(); w != nil {
		t.Fatal("w3 granted before w2")
	}
	s.Release()
	if name, _ := take(t, loopA); name != "w2" {
		t.Fatalf("second grant to %s", name)
	}
	s.Release()
	if name, _ := take(t, loopB); name != "w3" {
		t.Fatalf("third grant to %s", name)
	}
	s.Release()
	if s.Cur.Load() != 0 || q.Len() != 0 {
		t.Fatalf("Cur %d Len %d after the last release", s.Cur.Load(), q.Len())
	}
}

// TestQueueBackendsDoNotBlockEachOther: a full backend with waiters does
// not hold back the waiters of another one.
func TestQueueBackendsDoNotBlockEachOther(t *testing.T) {
	x, y := full(t, config.BalanceRoundRobin, 1), full(t, config.BalanceRoundRobin, 1)
	lb := newBox()
	wx, wy := newWaiter(lb, "x"), newWaiter(lb, "y")
	mustQueue(t, x.Queue(), wx, nil) // older, on the backend that stays full
	mustQueue(t, y.Queue(), wy, nil)
	y.Servers[0].Release()
	if name, s := take(t, lb); name != "y" || s != y.Servers[0] {
		t.Fatalf("grant to %s", name)
	}
	if w, _ := lb.Take(); w != nil {
		t.Fatal("x granted without a slot of its backend")
	}
	wx.Cancel()
	if x.Queue().Len() != 0 {
		t.Fatal("x still queued after Cancel")
	}
}

// TestQueueFreeSlotAtWaitIsTaken: a slot released between the caller's
// failed Acquire and Wait (Release saw nobody waiting) is found by Wait.
func TestQueueFreeSlotAtWaitIsTaken(t *testing.T) {
	b := full(t, config.BalanceRoundRobin, 2)
	b.Servers[1].Release()
	w := newWaiter(newBox(), "w")
	if s, queued := b.Queue().Wait(w, nil); s != b.Servers[1] || queued {
		t.Fatalf("Wait = %v, %v; want s1's slot at once", s, queued)
	}
	if w.Busy() || b.Queue().Len() != 0 || b.Servers[1].Cur.Load() != 1 {
		t.Fatalf("busy %v len %d cur %d", w.Busy(), b.Queue().Len(), b.Servers[1].Cur.Load())
	}
}

// TestQueueFollowsServerState: a server that comes back or gets a larger
// maxconn takes waiters; the waiters of a server that goes away move to
// the other servers; when none is usable every waiter is refused.
func TestQueueFollowsServerState(t *testing.T) {
	t.Run("maxconn raised", func(t *testing.T) {
		b := full(t, config.BalanceRoundRobin, 1)
		lb := newBox()
		mustQueue(t, b.Queue(), newWaiter(lb, "a"), nil)
		mustQueue(t, b.Queue(), newWaiter(lb, "b"), nil)
		b.Servers[0].SetMaxconn(3)
		for _, want := range []string{"a", "b"} {
			if name, s := take(t, lb); name != want || s != b.Servers[0] {
				t.Fatalf("grant to %s, want %s", name, want)
			}
		}
	})
	t.Run("server back from maint", func(t *testing.T) {
		b := full(t, config.BalanceRoundRobin, 2)
		s1 := b.Servers[1]
		s1.SetAdminState(config.AdminMaint)
		s1.Release() // a free slot on a server in maint serves nobody
		lb := newBox()
		mustQueue(t, b.Queue(), newWaiter(lb, "a"), nil)
		s1.SetAdminState(config.AdminReady)
		if name, s := take(t, lb); name != "a" || s != s1 {
			t.Fatalf("grant to %s on %v", name, s)
		}
	})
	t.Run("affinity server down moves its waiters", func(t *testing.T) {
		b := full(t, config.BalanceSource, 2)
		s0, s1 := b.Servers[0], b.Servers[1]
		lb := newBox()
		mustQueue(t, b.Queue(), newWaiter(lb, "for-s0"), s0)
		mustQueue(t, b.Queue(), newWaiter(lb, "any"), nil)
		s1.Release() // s1's slot is not for s0's waiter
		if name, _ := take(t, lb); name != "any" {
			t.Fatalf("s1 slot went to %s", name)
		}
		s0.SetUp(false, time.Now())
		s1.Release()
		if name, s := take(t, lb); name != "for-s0" || s != s1 {
			t.Fatalf("after s0 went down: grant to %s on %v", name, s)
		}
	})
	t.Run("no usable server refuses", func(t *testing.T) {
		b := full(t, config.BalanceRoundRobin, 2)
		la, lb := newBox(), newBox()
		mustQueue(t, b.Queue(), newWaiter(la, "a"), nil)
		mustQueue(t, b.Queue(), newWaiter(lb, "b"), nil)
		b.Servers[0].SetAdminState(config.AdminDrain)
		if la.Pending() || lb.Pending() {
			t.Fatal("refused while s1 is usable")
		}
		b.Servers[1].SetUp(false, time.Now())
		for _, m := range []*box{la, lb} {
			if _, s := take(t, m); s != nil {
				t.Fatalf("granted %v, want refused", s)
			}
		}
		if b.Queue().Len() != 0 {
			t.Fatalf("Len = %d", b.Queue().Len())
		}
		if s, queued := b.Queue().Wait(newWaiter(la, "c"), nil); s != nil || queued {
			t.Fatal("Wait queued with no usable server")
		}
	})
	t.Run("backend removed refuses", func(t *testing.T) {
		b := full(t, config.BalanceRoundRobin, 1)
		lb := newBox()
		mustQueue(t, b.Queue(), newWaiter(lb, "a"), nil)
		b.Retire(nil)
		if _, s := take(t, lb); s != nil {
			t.Fatal("granted a retired server")
		}
	})
	t.Run("server added takes waiters when committed", func(t *testing.T) {
		cfg := cfgBackend(config.BalanceRoundRobin, 1)
		cfg.Servers[0].Maxconn = 1
		b := mustBuild(t, cfg, nil)
		b.Servers[0].Acquire()
		lb := newBox()
		mustQueue(t, b.Queue(), newWaiter(lb, "a"), nil)
		cfg2 := cfgBackend(config.BalanceRoundRobin, 1, 1)
		cfg2.Servers[0].Maxconn = 1
		next := mustBuild(t, cfg2, b)
		if lb.Pending() {
			t.Fatal("granted a server of a generation not committed yet")
		}
		b.Retire(next)
		if name, s := take(t, lb); name != "a" || s != next.Servers[1] {
			t.Fatalf("grant to %s on %v", name, s)
		}
	})
}

// TestQueueCancelRacingAGrantLeaksNoSlot: waiters on several "loops" give
// up (queue timeout, client gone) at the very moment other loops release
// slots to them. Whatever the interleaving, every slot is either used and
// released or given back by Cancel: at the end the server holds none and
// nobody is queued.
func TestQueueCancelRacingAGrantLeaksNoSlot(t *testing.T) {
	const loops, rounds = 6, 2000
	cfg := cfgBackend(config.BalanceRoundRobin, 1, 1)
	for i := range cfg.Servers {
		cfg.Servers[i].Maxconn = 1
	}
	b := mustBuild(t, cfg, nil)
	q := b.Queue()
	pick := func(i int) *Server { return b.Servers[i%len(b.Servers)] }
	var grants, cancels, direct atomic.Int64
	var wg sync.WaitGroup
	for l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(l), 1))
			mb := newBox()
			w := newWaiter(mb, "w")
			for i := range rounds {
				s := pick(i + l)
				if !s.Acquire() {
					got, queued := q.Wait(w, nil)
					switch {
					case got != nil:
						s = got
					case !queued:
						t.Error("refused with usable servers")
						return
					default:
						// Give a releaser a chance to grant, then either
						// take the grant or cancel, as a timeout would.
						for range rng.IntN(3) {
							runtime.Gosched()
						}
						if rng.IntN(2) == 0 {
							w.Cancel()
							if _, s2 := mb.Take(); s2 != nil {
								t.Error("grant taken after Cancel")
							}
							cancels.Add(1)
							continue
						}
						deadline := time.Now().Add(10 * time.Second)
						for {
							if _, s2 := mb.Take(); s2 != nil {
								s = s2
								break
							}
							if time.Now().After(deadline) {
								t.Error("no grant within 10s")
								w.Cancel()
								return
							}
							runtime.Gosched()
						}
						grants.Add(1)
					}
				} else {
					direct.Add(1)
				}
				for range 1 + rng.IntN(3) {
					runtime.Gosched()
				}
				s.Release()
			}
		}()
	}
	wg.Wait()
	for _, s := range b.Servers {
		if c := s.Cur.Load(); c != 0 {
			t.Errorf("%s: %d slots leaked", s.Name, c)
		}
	}
	if q.Len() != 0 {
		t.Errorf("%d waiters left", q.Len())
	}
	t.Logf("direct %d, granted %d, cancelled %d", direct.Load(), grants.Load(), cancels.Load())
	if grants.Load() == 0 || cancels.Load() == 0 {
		t.Error("the interleavings did not cover both outcomes")
	}
}

// BenchmarkQueueWaitGrant: one waiter queued and granted by a release on
// another goroutine's behalf (same goroutine here): the cost of the lock,
// the FIFO and the mailbox per queued connection.
func BenchmarkQueueWaitGrant(b *testing.B) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1)
	cfg.Servers[0].Maxconn = 1
	bk, err := Build(cfg, nil, noResolve)
	if err != nil {
		b.Fatal(err)
	}
	s, q := bk.Servers[0], bk.Queue()
	s.Acquire()
	mb := &Mailbox{Notify: func() {}}
	w := &Waiter{}
	w.Init(nil, mb)
	b.ReportAllocs()
	for b.Loop() {
		if _, queued := q.Wait(w, nil); !queued {
			b.Fatal("not queued")
		}
		s.Release() // grants w: the slot passes on
		if _, got := mb.Take(); got != s {
			b.Fatal("not granted")
		}
	}
}

// BenchmarkReleaseNobodyWaits: the hot path, a release with an empty
// queue (one atomic load more than before the queue existed).
func BenchmarkReleaseNobodyWaits(b *testing.B) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1)
	cfg.Servers[0].Maxconn = 1
	bk, err := Build(cfg, nil, noResolve)
	if err != nil {
		b.Fatal(err)
	}
	s := bk.Servers[0]
	b.ReportAllocs()
	for b.Loop() {
		s.Acquire()
		s.Release()
	}
}

// BenchmarkQueueContended: every goroutine (one per P: a loop each) takes
// a slot of a server with maxconn 1, queuing when it is taken, and
// releases it: the slot passes from goroutine to goroutine through the
// queue, so each op is a Wait, a handoff under the lock and a Take.
func BenchmarkQueueContended(b *testing.B) {
	cfg := cfgBackend(config.BalanceRoundRobin, 1)
	cfg.Servers[0].Maxconn = 1
	bk, err := Build(cfg, nil, noResolve)
	if err != nil {
		b.Fatal(err)
	}
	s, q := bk.Servers[0], bk.Queue()
	var queued atomic.Int64
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		mb := &Mailbox{Notify: func() {}}
		w := &Waiter{}
		w.Init(nil, mb)
		for pb.Next() {
			if !s.Acquire() {
				got, ok := q.Wait(w, nil)
				if got == nil {
					if !ok {
						b.Error("refused")
						return
					}
					queued.Add(1)
					for {
						if _, g := mb.Take(); g != nil {
							break
						}
						runtime.Gosched()
					}
				}
			}
			s.Release()
		}
	})
	b.ReportMetric(float64(queued.Load())/float64(b.N), "queued/op")
}
