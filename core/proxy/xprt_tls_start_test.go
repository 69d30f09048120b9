package proxy

import (
	"bytes"
	"crypto/tls"
	"runtime"
	"strconv"
	"sync"
	"testing"
	"time"
)

// goroutineID parses the id of the goroutine whose stack (runtime.Stack,
// all=false) is b, and the id of the goroutine that created it ("created
// by … in goroutine N"; -1 when the line is missing).
func goroutineID(b []byte) (id, creator int) {
	id, creator = -1, -1
	if f := bytes.Fields(b); len(f) > 1 && string(f[0]) == "goroutine" {
		id, _ = strconv.Atoi(string(f[1]))
	}
	if i := bytes.LastIndex(b, []byte(" in goroutine ")); i >= 0 {
		rest := b[i+len(" in goroutine "):]
		if j := bytes.IndexByte(rest, '\n'); j >= 0 {
			rest = rest[:j]
		}
		creator, _ = strconv.Atoi(string(bytes.TrimSpace(rest)))
	}
	return id, creator
}

// TestTLSHandshakeGoroutineNotStartedByTheLoop: a handshake's goroutine is
// started by the process's starter goroutine, never by the loop's
// goroutine. One the loop starts waits in the loop's P's runnext slot,
// which another P takes only after a usleep(3) of 55-60 µs (the kernel's
// timer slack) while it has nothing else to do (xprt_tls_start.go).
func TestTLSHandshakeGoroutineNotStartedByTheLoop(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 2)
	h.st = e.w.tls.st
	if h.st == nil {
		t.Fatal("the worker has no handshake starter")
	}
	srv, cli := tlsPair(t, tls.VersionTLS13)
	var loopID int
	e.do(func() {
		b := make([]byte, 64)
		loopID, _ = goroutineID(b[:runtime.Stack(b, false)])
	})
	var once sync.Once
	helper, creator := -1, -1
	stacks := make(chan []byte, 1)
	h.parking = func(*tlsFd) { // on the handshake's goroutine
		once.Do(func() {
			b := make([]byte, 8<<10)
			stacks <- b[:runtime.Stack(b, false)]
		})
	}
	for range 20 {
		errc := make(chan error, 1)
		c := e.connect(func(fd int) {
			h.start(newTLSServer(fd, srv), 5*time.Second, func(x *tlsSock, err error) {
				if err == nil {
					rawSock{}.close(x.a.fd, true)
				}
				errc <- err
			})
		})
		c.SetDeadline(time.Now().Add(10 * time.Second))
		go tls.Client(c, cli).Handshake()
		if err := <-errc; err != nil {
			t.Fatalf("handshake: %v", err)
		}
		c.Close()
	}
	select {
	case b := <-stacks:
		helper, creator = goroutineID(b)
		if loopID < 0 || helper < 0 || creator < 0 {
			t.Fatalf("could not read goroutine ids: loop %d, helper %d, creator %d in\n%s", loopID, helper, creator, b)
		}
		if creator == loopID {
			t.Fatalf("the handshake's goroutine %d was started by the loop's goroutine %d:\n%s", helper, loopID, b)
		}
	default:
		t.Fatal("no handshake waited for its client: the helper goroutine's stack was not taken")
	}
}

// TestTLSStarterStartsEveryJobOnce pushes jobs from several goroutines
// while the starter sleeps and wakes: every handshake ends, none twice.
func TestTLSStarterStartsEveryJobOnce(t *testing.T) {
	e := newEnv(t, defaultTuning())
	h := newTLSHandshakes(e.l, 4)
	h.st = e.w.tls.st
	srv, cli := tlsPair(t, tls.VersionTLS13)
	cli.ClientSessionCache = nil
	const n = 64
	var mu sync.Mutex
	ended := map[*tlsSock]int{}
	errs := make(chan error, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if i%8 == 0 {
				time.Sleep(time.Millisecond) // let the starter park between pushes; not a synchronisation
			}
			c := e.connect(func(fd int) {
				h.start(newTLSServer(fd, srv), 10*time.Second, func(x *tlsSock, err error) {
					mu.Lock()
					ended[x]++
					mu.Unlock()
					if err == nil {
						rawSock{}.close(x.a.fd, true)
					}
					errs <- err
				})
			})
			c.SetDeadline(time.Now().Add(20 * time.Second))
			tls.Client(c, cli).Handshake()
			c.Close()
		}()
	}
	for range n {
		select {
		case err := <-errs:
			if err != nil {
				t.Errorf("handshake: %v", err)
			}
		case <-time.After(30 * time.Second):
			t.Fatal("a handshake never ended: a job was lost")
		}
	}
	wg.Wait()
	mu.Lock()
	defer mu.Unlock()
	for x, k := range ended {
		if k != 1 {
			t.Errorf("handshake %p ended %d times", x, k)
		}
	}
}
