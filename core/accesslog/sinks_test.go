package accesslog

import (
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
)

// TestSyslogOneDatagramPerLine: each line is one datagram with the
// format's header (priority local0.info, tag spliced), without its newline.
func TestSyslogOneDatagramPerLine(t *testing.T) {
	for _, tc := range []struct {
		format string
		header *regexp.Regexp
	}{
		{"rfc3164", regexp.MustCompile(`^<134>[A-Z][a-z]{2} [ 0-9]\d \d\d:\d\d:\d\d \S+ spliced\[\d+\]: `)},
		{"rfc5424", regexp.MustCompile(`^<134>1 \d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z \S+ spliced \d+ access - `)},
	} {
		pc, err := net.ListenPacket("udp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		s, err := DialSyslog("udp://"+pc.LocalAddr().String(), tc.format)
		if err != nil {
			t.Fatal(err)
		}
		defer s.Close()
		for _, l := range []string{"first line\n", "second line\n"} {
			if _, err := s.Write([]byte(l)); err != nil {
				t.Fatal(err)
			}
		}
		buf := make([]byte, 2048)
		for _, want := range []string{"first line", "second line"} {
			pc.SetReadDeadline(time.Now().Add(5 * time.Second))
			n, _, err := pc.ReadFrom(buf)
			if err != nil {
				t.Fatal(err)
			}
			msg := string(buf[:n])
			loc := tc.header.FindStringIndex(msg)
			if loc == nil || msg[loc[1]:] != want {
				t.Errorf("%s: datagram %q, want a header and %q", tc.format, msg, want)
			}
		}
	}
	if _, err := DialSyslog("tcp://127.0.0.1:514", ""); err == nil {
		t.Error("tcp:// accepted")
	}
}

// TestFileReopensWhenRotatedAway: a file renamed away is reopened at the
// path by the next write past rotateCheckEvery.
func TestFileReopensWhenRotatedAway(t *testing.T) {
	p := filepath.Join(t.TempDir(), "access.log")
	f, err := OpenFile(p)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	f.Write([]byte("a\n"))
	if err := os.Rename(p, p+".1"); err != nil {
		t.Fatal(err)
	}
	f.mu.Lock()
	f.checked = time.Time{} // as if a second passed
	f.mu.Unlock()
	f.Write([]byte("b\n"))
	if b, _ := os.ReadFile(p); string(b) != "b\n" {
		t.Errorf("new file holds %q, want the line written after the rotation", b)
	}
	if b, _ := os.ReadFile(p + ".1"); string(b) != "a\n" {
		t.Errorf("rotated file holds %q", b)
	}
}

// TestSyslogNeverBlocksOnAStalledDaemon: a local syslog daemon that
// stops reading (its socket's queue full) costs the writer lost lines,
// never a wait: a blocked Write stalled the access-log writer for good,
// froze /api/v1/logs and kept spliced from stopping.
func TestSyslogNeverBlocksOnAStalledDaemon(t *testing.T) {
	p := filepath.Join(t.TempDir(), "log.sock")
	daemon, err := net.ListenPacket("unixgram", p) // never read
	if err != nil {
		t.Fatal(err)
	}
	defer daemon.Close()
	s, err := DialSyslog("unix:"+p, "")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	line := []byte(strings.Repeat("x", 300) + "\n")
	done := make(chan int)
	go func() {
		lost := 0
		for range 20000 { // far more than a socket queue holds
			if _, err := s.Write(line); err != nil {
				lost++
			}
		}
		done <- lost
	}()
	select {
	case lost := <-done:
		if lost == 0 {
			t.Error("no line lost: the daemon's queue never filled")
		}
	case <-time.After(10 * time.Second):
		daemon.Close() // frees the blocked Write
		t.Fatal("Write blocked on a daemon that does not read")
	}
}
