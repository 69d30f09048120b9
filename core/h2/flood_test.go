package h2

import (
	"bytes"
	"testing"

	"golang.org/x/net/http2"
)

// controlFrames writes n PINGs or empty SETTINGS with fr.
func controlFrames(fr *http2.Framer, kind string, n int) {
	for i := 0; i < n; i++ {
		if kind == "PING" {
			fr.WritePing(false, [8]byte{byte(i), byte(i >> 8)})
		} else {
			fr.WriteSettings()
		}
	}
}

// countFrames counts the frames in p.
func countFrames(t *testing.T, p []byte) int {
	t.Helper()
	fr := http2.NewFramer(nil, bytes.NewReader(p))
	n := 0
	for {
		if _, err := fr.ReadFrame(); err != nil {
			return n
		}
		n++
	}
}

// TestControlBurstReadPromptly: a client whose PINGs (or SETTINGS) come
// in one burst, more than MaxQueuedControl of them before the caller
// could write a single ACK, is no flood if it reads the ACKs once they
// are offered: the burst is fed in one Feed, or in several as a loop
// that reads its socket until EAGAIN before writing does.
func TestControlBurstReadPromptly(t *testing.T) {
	const burst = 3 * DefaultMaxQueuedControl
	for _, kind := range []string{"PING", "SETTINGS"} {
		for _, step := range []int{0, 4096} {
			cl := newClient(t, Config{})
			for round := 0; round < 3; round++ {
				controlFrames(cl.fr, kind, burst)
				cl.step = step
				if err := cl.feed(); err != nil {
					t.Fatalf("%s step %d round %d: %v", kind, step, round, err)
				}
				if fs := cl.frames(); len(fs) != burst {
					t.Fatalf("%s: %d answers, want %d", kind, len(fs), burst)
				}
			}
		}
	}
}

// TestControlFloodNotRead: a client that does not read the ACKs it was
// offered (Output called, nothing Drained) and sends more is a flood.
func TestControlFloodNotRead(t *testing.T) {
	for _, kind := range []string{"PING", "SETTINGS"} {
		cl := newClient(t, Config{})
		var err error
		for round := 0; round < 20 && err == nil; round++ {
			controlFrames(cl.fr, kind, DefaultMaxQueuedControl/4)
			var n int
			n, err = cl.c.Feed(cl.in.Bytes())
			cl.in.Next(n)
			_ = cl.c.Output() // offered, never written: the socket is full
		}
		cl.err = err
		wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
	}
}

// TestControlBurstBounded: a burst between two flushes is bounded too,
// for a caller that feeds without ever asking for Output.
func TestControlBurstBounded(t *testing.T) {
	cl := newClient(t, Config{})
	controlFrames(cl.fr, "PING", maxControlBurst*DefaultMaxQueuedControl+1)
	cl.feed()
	wantConnError(t, cl, http2.ErrCodeEnhanceYourCalm)
}

// TestClientControlBurstReadPromptly: the ClientConn's side of
// TestControlBurstReadPromptly.
func TestClientControlBurstReadPromptly(t *testing.T) {
	const burst = 3 * DefaultMaxQueuedControl
	for _, kind := range []string{"PING", "SETTINGS"} {
		s := newFakeServer(t, ClientConfig{})
		s.c.Drained(len(s.c.Output()))
		for round := 0; round < 3; round++ {
			controlFrames(s.fr, kind, burst)
			if err := s.feed(); err != nil {
				t.Fatalf("%s round %d: %v", kind, round, err)
			}
			out := s.c.Output()
			if n := countFrames(t, out); n != burst {
				t.Fatalf("%s: %d answers, want %d", kind, n, burst)
			}
			s.c.Drained(len(out))
		}
	}
}

// TestClientControlFloodNotRead: the ClientConn's side of
// TestControlFloodNotRead.
func TestClientControlFloodNotRead(t *testing.T) {
	for _, kind := range []string{"PING", "SETTINGS"} {
		s := newFakeServer(t, ClientConfig{})
		var err error
		for round := 0; round < 20 && err == nil; round++ {
			controlFrames(s.fr, kind, DefaultMaxQueuedControl/4)
			err = s.feed()
			_ = s.c.Output()
		}
		wantCode(t, err, http2.ErrCodeEnhanceYourCalm)
	}
}
