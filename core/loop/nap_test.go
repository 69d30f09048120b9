package loop

import (
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestPollNapTakesTheNapsEventsInOneRound: a loop that naps
// (tuning.poll_nap_us) after a round that did work takes the events that
// came during the nap in one round, without a sleep or a wake-up: their
// tasklets all run in the round after the nap.
func TestPollNapTakesTheNapsEventsInOneRound(t *testing.T) {
	const nap = 200 * time.Millisecond // long: the writes below land in it
	l := startLoop(t, Options{PollNapUs: int(nap / time.Microsecond)})
	a := l.Activity()
	const n = 8
	rounds := make(chan uint64, n)
	var w [n]int
	for i := range n {
		var p [2]int
		if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
		w[i] = p[1]
		f := &FD{Fd: p[0]}
		f.T = &Tasklet{Run: func(*Tasklet) {
			var b [8]byte
			for {
				if _, err := unix.Read(f.Fd, b[:]); err != nil {
					break
				}
			}
			rounds <- l.cLoops // loop thread: the round running now
		}}
		execWait(t, l, func(l *Loop) {
			if err := l.Register(f); err != nil {
				t.Error(err)
			}
		})
	}
	// The registrations' naps each took one event (an Exec's wake-up), so
	// the loop stopped napping: as after a sleep that woke to a batch, it
	// naps again after this round (its waits between Execs are short).
	execWait(t, l, func(l *Loop) { l.napOK = true })
	naps0, sleeps0 := a.Naps.Load(), a.Sleeps.Load() // the last round published before its nap
	start := time.Now()
	for i := range n {
		if _, err := unix.Write(w[i], []byte{1}); err != nil {
			t.Fatal(err)
		}
	}
	if time.Since(start) > nap/2 {
		t.Skip("the test was descheduled for half the nap: the writes may not all land in it")
	}
	var first uint64
	for i := range n {
		select {
		case r := <-rounds:
			if i == 0 {
				first = r
			} else if r != first {
				t.Errorf("event %d ran in round %d, the first in round %d: the nap's events took more than one round", i, r, first)
			}
		case <-time.After(5 * time.Second):
			t.Fatal("the events were not taken")
		}
	}
	execWait(t, l, func(*Loop) {}) // publishes
	if got := a.Naps.Load() - naps0; got == 0 {
		t.Error("no nap counted")
	}
	if got := a.Sleeps.Load() - sleeps0; got > 1 { // the one after the events' round
		t.Errorf("%d sleeps: the loop slept instead of napping", got)
	}
}

// TestPollNapOnlyWhileEventsComeFast: a loop whose waits are long (an
// idle or lightly loaded one) does not nap: after the first wait longer
// than napGaps naps it sleeps until its next event, as without the nap.
func TestPollNapOnlyWhileEventsComeFast(t *testing.T) {
	const nap = time.Millisecond
	l := startLoop(t, Options{PollNapUs: int(nap / time.Microsecond)})
	a := l.Activity()
	execWait(t, l, func(*Loop) {})
	naps0 := a.Naps.Load()
	const n = 10
	for range n {
		// Spacing, not synchronisation: each wait is longer than
		// napGaps naps.
		time.Sleep(3 * napGaps * nap)
		execWait(t, l, func(*Loop) {})
	}
	execWait(t, l, func(*Loop) {})
	// The round before the first long wait may nap once (its last wait
	// was short), and so may the one after execWait's quick follow-up.
	if got := a.Naps.Load() - naps0; got > 2 {
		t.Errorf("%d naps for %d Exec spaced %v apart: a loop with long waits naps", got, n, 3*napGaps*nap)
	}
}

// TestPollNapStopsWhenEventsComeOneAtATime: a nap that takes a single
// event gathered nothing (one client's ping-pong): the loop stops napping
// and sleeps until each event, as without the nap, rather than adding the
// nap to every hop.
func TestPollNapStopsWhenEventsComeOneAtATime(t *testing.T) {
	const nap = time.Millisecond // gaps of the ping-pong are far shorter than napGaps naps
	l := startLoop(t, Options{PollNapUs: int(nap / time.Microsecond)})
	a := l.Activity()
	var p [2]int
	if err := unix.Pipe2(p[:], unix.O_NONBLOCK|unix.O_CLOEXEC); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { unix.Close(p[0]); unix.Close(p[1]) })
	ran := make(chan struct{}, 1)
	f := &FD{Fd: p[0]}
	f.T = &Tasklet{Run: func(*Tasklet) {
		var b [8]byte
		for {
			if _, err := unix.Read(f.Fd, b[:]); err != nil {
				break
			}
		}
		ran <- struct{}{}
	}}
	execWait(t, l, func(l *Loop) {
		if err := l.Register(f); err != nil {
			t.Error(err)
		}
	})
	ping := func() {
		if _, err := unix.Write(p[1], []byte{1}); err != nil {
			t.Fatal(err)
		}
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("the event was not taken")
		}
	}
	for range 5 {
		ping()
	}
	execWait(t, l, func(*Loop) {}) // publishes
	naps0 := a.Naps.Load()
	const n = 50
	start := time.Now()
	for range n {
		ping()
	}
	execWait(t, l, func(*Loop) {})
	naps := a.Naps.Load() - naps0
	t.Logf("%d pings in %v, %d naps", n, time.Since(start).Round(time.Microsecond), naps)
	// The execWait before may have let the loop nap once more.
	if naps > 2 {
		t.Errorf("%d naps for %d events that came one at a time: each nap took one event", naps, n)
	}
}
