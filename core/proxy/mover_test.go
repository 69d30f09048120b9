package proxy

import (
	"bytes"
	"io"
	"net"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// moverRig drives two movers between two sides directly, the way a mux
// does, without a tunnel or an http connection around them: its tasklet
// runs both directions with runCap each, passes an end of stream on as a
// FIN once flushed, and closes both sides when both directions are done
// (with an RST when a mover reports an error).
type moverRig struct {
	w      *Worker
	a, b   Side
	ab, ba rigDir
	closed bool
	res    int // first non-zero mover result
	done   chan struct{}
}

type rigDir struct {
	m    mover
	buf  *Buffer
	shut bool
}

func runRig(tk *loop.Tasklet) { tk.Owner.(*moverRig).process() }

// newMoverRig connects two loopback TCP pairs and gives the proxy-side
// ends to a rig on e's loop; it returns the test's ends (a's and b's
// peers).
func newMoverRig(t testing.TB, e *env, mode SpliceMode) (r *moverRig, pa, pb *net.TCPConn) {
	t.Helper()
	r = &moverRig{w: e.w, done: make(chan struct{})}
	r.ab.m.mode, r.ba.m.mode = mode, mode
	peer := func(s *Side) *net.TCPConn {
		return e.connect(func(fd int) {
			s.Task.Run, s.Task.Owner = runRig, r
			s.Connected = true
			if err := s.open(e.l, fd, rawSock{}); err != nil {
				t.Error(err)
			}
		})
	}
	return r, peer(&r.a), peer(&r.b)
}

// blockingFD is a blocking duplicate of c's socket (closed at cleanup),
// for loops of raw reads and writes that must not allocate.
func blockingFD(t testing.TB, c *net.TCPConn) int {
	fd := rawFD(t, c)
	c.Close()
	unix.SetNonblock(fd, false)
	t.Cleanup(func() { unix.Close(fd) })
	return fd
}

func (r *moverRig) process() {
	if r.closed {
		return
	}
	for _, d := range [2]struct {
		d        *rigDir
		src, dst *Side
	}{{&r.ab, &r.a, &r.b}, {&r.ba, &r.b, &r.a}} {
		if !d.src.Connected {
			continue // the rig's other side is not open yet
		}
		budget := runCap
		if res := d.d.m.run(r.w, d.src, d.dst, &d.d.buf, &budget, nil); res != 0 {
			r.res = res
			r.close(true)
			return
		}
		if d.d.m.eof && !d.d.shut && d.d.m.pending(d.d.buf, nil) == 0 {
			// A TLS side answers EAGAIN while its close_notify waits
			// for EPOLLOUT: shut again on the next run.
			d.d.shut = d.dst.shutw() != unix.EAGAIN
		}
	}
	if r.ab.shut && r.ba.shut {
		r.close(false)
	}
}

func (r *moverRig) close(reset bool) {
	r.closed = true
	r.a.close(r.w.L, reset)
	r.b.close(r.w.L, reset)
	for _, d := range []*rigDir{&r.ab, &r.ba} {
		if d.buf != nil {
			r.w.Bufs.Put(d.buf)
			d.buf = nil
		}
		d.m.release(r.w)
	}
	close(r.done)
}

// spliceCases are the splice modes the transfer tests run in, and whether
// splice must carry the bytes in each.
var spliceCases = []struct {
	name       string
	mode       SpliceMode
	wantSplice bool
}{
	{"off", SpliceOff, false},
	{"auto", SpliceAuto, true},
	{"on", SpliceOn, true},
}

// transfer is what one end of a transfer test sent and received.
type transfer struct {
	sent, got [32]byte
	n         int64
	err       error
}

// sameBytes checks that n bytes hashing to got arrived of the size bytes
// that hashed to sent.
func sameBytes(t testing.TB, what string, size, n int64, got, sent [32]byte) {
	t.Helper()
	if n != size || got != sent {
		t.Errorf("%s: got %d bytes of %d, hash match %v", what, n, size, got == sent)
	}
}

// awaitTransfer waits for an origin's result.
func awaitTransfer(t testing.TB, ch <-chan transfer) transfer {
	t.Helper()
	select {
	case r := <-ch:
		if r.err != nil {
			t.Fatalf("origin: %v", r.err)
		}
		return r
	case <-time.After(30 * time.Second):
		t.Fatal("origin did not finish")
	}
	return transfer{}
}

// checkSpliced checks, once e's connections closed, that splice moved at
// least least bytes when the mode wants it and none otherwise, and that
// every pipe went back to the pool.
func checkSpliced(t testing.TB, e *env, name string, want bool, least uint64) {
	t.Helper()
	spliced := e.l.Activity().SpliceBytes.Load()
	if want && spliced < least {
		t.Errorf("splice=%s moved only %d bytes with splice", name, spliced)
	}
	if !want && spliced != 0 {
		t.Errorf("splice=%s moved %d bytes with splice", name, spliced)
	}
	if got := e.l.Activity().PipesUsed.Load(); got != 0 {
		t.Errorf("Activity.PipesUsed = %d after close", got)
	}
}

// TestMoverPassesBytesUnchanged is the byte mover's own test, without a
// mux around it: 100 MiB each way at the same time in each splice mode,
// sha256 of what each end sent against what the other received, splice
// used exactly when the mode asks for it, and every buffer and pipe back
// in the pools. TestTunnelPassesBytesUnchanged and
// TestHTTPBodiesPassUnchanged run the same mover through tcp and http
// mode.
func TestMoverPassesBytesUnchanged(t *testing.T) {
	size := int64(100 << 20)
	if testing.Short() {
		size = 8 << 20
	}
	for _, tc := range spliceCases {
		t.Run(tc.name, func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			r, pa, pb := newMoverRig(t, e, tc.mode)
			var ra, rb transfer
			var wg sync.WaitGroup
			for _, x := range []struct {
				c    *net.TCPConn
				res  *transfer
				seed uint64
			}{{pa, &ra, 1}, {pb, &rb, 2}} {
				wg.Add(2)
				x.c.SetDeadline(time.Now().Add(60 * time.Second))
				go func() {
					defer wg.Done()
					x.res.got, x.res.n, _ = drain(x.c)
				}()
				go func() {
					defer wg.Done()
					x.res.sent, x.res.err = sendPattern(x.c, x.seed, size)
					x.c.CloseWrite()
				}()
			}
			waitDone(t, &wg, 60*time.Second)
			if ra.err != nil || rb.err != nil {
				t.Fatalf("send: %v, %v", ra.err, rb.err)
			}
			sameBytes(t, "a->b", size, rb.n, rb.got, ra.sent)
			sameBytes(t, "b->a", size, ra.n, ra.got, rb.sent)
			select {
			case <-r.done:
			case <-time.After(10 * time.Second):
				t.Fatal("rig did not close")
			}
			var ab, ba, spliced int64
			var res int
			e.do(func() { ab, ba, res = r.ab.m.bytes, r.ba.m.bytes, r.res; spliced = r.ab.m.spliced + r.ba.m.spliced })
			if res != 0 || ab != size || ba != size {
				t.Errorf("mover result %d, bytes a->b %d b->a %d", res, ab, ba)
			}
			if tc.wantSplice != (spliced >= size) {
				t.Errorf("splice=%s: %d bytes spliced out", tc.name, spliced)
			}
			e.waitIdle()
			checkSpliced(t, e, tc.name, tc.wantSplice, uint64(size))
		})
	}
}

// TestMoverDoesNotAllocate pins zero heap allocations per moved chunk in
// steady state, buffered and spliced, both ways, for the mover alone
// (TestForwardingDoesNotAllocate does it through a tunnel).
func TestMoverDoesNotAllocate(t *testing.T) {
	for _, mode := range []SpliceMode{SpliceOff, SpliceOn} {
		t.Run(modeName(mode), func(t *testing.T) {
			e := newEnv(t, defaultTuning())
			_, ca, cb := newMoverRig(t, e, mode)
			pa, pb := blockingFD(t, ca), blockingFD(t, cb)
			out := bytes.Repeat([]byte("x"), 16<<10)
			in := make([]byte, len(out))
			var ferr error
			allocs := testing.AllocsPerRun(200, func() {
				for _, p := range [2][2]int{{pa, pb}, {pb, pa}} {
					if err := writeFull(p[0], out); err != nil {
						ferr = err
					}
					if err := readFull(p[1], in); err != nil {
						ferr = err
					}
				}
			})
			if ferr != nil {
				t.Fatal(ferr)
			}
			if allocs != 0 {
				t.Fatalf("%v allocations per 16 KiB round trip, want 0", allocs)
			}
		})
	}
}

func waitDone(t testing.TB, wg *sync.WaitGroup, d time.Duration) {
	t.Helper()
	ch := make(chan struct{})
	go func() { wg.Wait(); close(ch) }()
	select {
	case <-ch:
	case <-time.After(d):
		t.Fatalf("transfer did not finish within %v", d)
	}
}

// TestDemotedSourceIsReadOnlyByItsBulkRun: a direction that used its
// read budget demotes its source's tasklet to class Bulk (Loop.Demote),
// even when an fd event queued it as Urgent first; and until that Bulk
// run, a run of the other side's tasklet (woken Urgent by its own fd, as
// a tunnel's or an http exchange's other side is) flushes what is pending
// but does not read the source again with a fresh budget: a transfer past
// its cap does not run as Urgent again in the same round (seed 000's
// self-waking class, HAProxy's TASK_SELF_WAKING).
func TestDemotedSourceIsReadOnlyByItsBulkRun(t *testing.T) {
	e := newEnv(t, defaultTuning())
	var a, b Side
	noop := func(*loop.Tasklet) {} // the test runs the mover itself
	open := func(s *Side) *net.TCPConn {
		return e.connect(func(fd int) {
			s.Task.Run = noop
			s.Connected = true
			if err := s.open(e.l, fd, rawSock{}); err != nil {
				t.Error(err)
			}
		})
	}
	pa, pb := open(&a), open(&b)
	t.Cleanup(func() { e.do(func() { e.l.Unqueue(&a.Task); a.close(e.l, true); b.close(e.l, true) }) })
	go io.Copy(io.Discard, pb)
	const size = 64 << 10 // four reads of the 16 KiB buffer
	if _, err := pa.Write(make([]byte, size)); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		n := 0
		e.do(func() {
			if a.canRecv() {
				n, _ = unix.IoctlGetInt(a.FD.Fd, unix.SIOCINQ)
			}
		})
		return n == size
	}, "the bytes in a's receive queue, its readiness seen")
	var m mover
	var buf *Buffer
	var first, second int64
	var demoted bool
	e.do(func() {
		e.l.Wake(&a.Task, loop.Urgent) // a's fd fired
		budget := 1                    // one read uses it
		if res := m.run(e.w, &a, &b, &buf, &budget, nil); res != 0 {
			t.Errorf("first run: %d", res)
		}
		first = m.bytes
		demoted = a.Task.QueuedIn(loop.Bulk)
		budget = runCap // the other side's run, with its own budget
		if res := m.run(e.w, &a, &b, &buf, &budget, nil); res != 0 {
			t.Errorf("second run: %d", res)
		}
		second = m.bytes
		if buf != nil {
			e.w.Bufs.Put(buf)
		}
	})
	if !demoted {
		t.Error("the source's tasklet is not queued in Bulk after its budget was used")
	}
	if first == 0 || first >= size || second != first {
		t.Errorf("moved %d bytes with the budget, then %d more by the other side's run; want some, then none", first, second-first)
	}
}
