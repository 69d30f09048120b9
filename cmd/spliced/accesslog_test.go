package main

import (
	"bytes"
	"flag"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
)

// TestAccessLogSinkFailingFileKeepsSyslog: with both --access-log-file
// and --access-log-syslog, a file that cannot be written (disk full:
// /dev/full) does not silence syslog: every line still reaches it. With
// an io.MultiWriter the first sink's error stopped each line there.
func TestAccessLogSinkFailingFileKeepsSyslog(t *testing.T) {
	pc, err := net.ListenPacket("udp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	f := addAccessLogFlags(fs)
	if err := fs.Parse([]string{"--access-log-file", "/dev/full", "--access-log-syslog", "udp://" + pc.LocalAddr().String()}); err != nil {
		t.Fatal(err)
	}
	sink, err := openAccessLog(f, "json", &bytes.Buffer{})
	if err != nil {
		t.Skipf("no /dev/full here: %v", err)
	}
	defer sink.close()
	now := loop.Mono()
	e := &stats.LogEntry{Frontend: "pub", HTTP: true, Status: 200, Start: now, End: now}
	e.SetLine([]byte("GET /full HTTP/1.1"))
	sink.log.Write(e)
	buf := make([]byte, 4096)
	pc.SetReadDeadline(time.Now().Add(5 * time.Second))
	n, _, err := pc.ReadFrom(buf)
	if err != nil {
		t.Fatalf("no syslog datagram while the file is full: %v", err)
	}
	if msg := string(buf[:n]); !strings.Contains(msg, "GET /full HTTP/1.1") {
		t.Errorf("datagram %q, want the access line", msg)
	}
}
