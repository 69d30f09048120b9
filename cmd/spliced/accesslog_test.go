package main

import (
	"bytes"
	"flag"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/loop"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
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

// TestAccessLogFullFileIsWarnedOf: an access-log file that cannot be
// written (disk full: /dev/full) is said in a warning, with the error and
// the lines lost, instead of losing every line in silence.
func TestAccessLogFullFileIsWarnedOf(t *testing.T) {
	if f, err := os.OpenFile("/dev/full", os.O_WRONLY, 0); err != nil {
		t.Skipf("no /dev/full here: %v", err)
	} else {
		f.Close()
	}
	in := startSpliced(t, "", "--log-format", "json", "--access-log-file", "/dev/full")
	web := newHTTPOrigin(t, "web", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", web.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "access_log": true},
	})
	roundTrip(t, port, "GET /hello HTTP/1.1\r\nHost: x\r\n\r\n")
	testutil.Eventually(t, 10*time.Second, func() bool {
		return strings.Contains(in.Logs(), `"msg":"access log lines not written: a sink fails","lost":1,"lost_total":1,"error":"write /dev/full: no space left on device"`)
	}, "a warning of the lines lost")
	// A line lost within the 10 s that follow a warning is still told,
	// at the latest when spliced stops.
	roundTrip(t, port, "GET /again HTTP/1.1\r\nHost: x\r\n\r\n")
	if err := in.Stop(10 * time.Second); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(in.Logs(), `"lost":1,"lost_total":2`) {
		t.Errorf("the second line lost is not told; logs:\n%s", in.Logs())
	}
}

// TestAccessLogKeepAbnormalFlag: --access-log-keep-abnormal sizes the
// two rings of abnormal entries, the server side's and the client side's
// (what GET /api/v1/logs may ask for grows with
// it) and refuses a size outside 1..KeepAbnormalMax.
func TestAccessLogKeepAbnormalFlag(t *testing.T) {
	for _, tc := range []struct {
		args []string
		kept int // 0: refused
	}{
		{nil, accesslog.KeepDefault + 2*accesslog.KeepAbnormalDefault},
		{[]string{"--access-log-keep-abnormal", "5000"}, accesslog.KeepDefault + 2*5000},
		{[]string{"--access-log-keep-abnormal", "1"}, accesslog.KeepDefault + 2},
		{[]string{"--access-log-keep-abnormal", "0"}, 0},
		{[]string{"--access-log-keep-abnormal", "-3"}, 0},
		{[]string{"--access-log-keep-abnormal", "100001"}, 0},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		f := addAccessLogFlags(fs)
		if err := fs.Parse(tc.args); err != nil {
			t.Fatal(err)
		}
		sink, err := openAccessLog(f, "json", &bytes.Buffer{})
		if tc.kept == 0 {
			if err == nil || !strings.Contains(err.Error(), "--access-log-keep-abnormal") {
				t.Errorf("%v: error %v, want one naming the flag", tc.args, err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%v: %v", tc.args, err)
		}
		if got := sink.log.Kept(); got != tc.kept {
			t.Errorf("%v: keeps %d, want %d", tc.args, got, tc.kept)
		}
		sink.close()
	}
}
