package testutil

import (
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// TestFreePortIsOutOfTheEphemeralRangeAndNeverTwice: the ports are below
// the range connects and listens on port 0 take from, distinct within the
// process, and free to listen on.
func TestFreePortIsOutOfTheEphemeralRangeAndNeverTwice(t *testing.T) {
	floor, err := ephemeralFloor()
	if err != nil {
		t.Fatal(err)
	}
	seen := map[int]bool{}
	for range 200 {
		p := FreePort(t)
		if p < portFloor || p >= floor {
			t.Fatalf("port %d: want in [%d, %d)", p, portFloor, floor)
		}
		if seen[p] {
			t.Fatalf("port %d handed out twice", p)
		}
		seen[p] = true
	}
	ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(FreePort(t)))
	if err != nil {
		t.Fatal(err)
	}
	ln.Close()
}

// TestFreePortNotSharedWithAnotherProcess: a second test process (this
// test binary, run again) gets none of the ports this one holds.
func TestFreePortNotSharedWithAnotherProcess(t *testing.T) {
	if os.Getenv("TESTUTIL_FREEPORT_CHILD") != "" {
		var out []string
		for range 500 {
			out = append(out, strconv.Itoa(FreePort(t)))
		}
		os.Stdout.WriteString("PORTS " + strings.Join(out, ",") + "\n")
		return
	}
	mine := map[int]bool{}
	for range 500 {
		mine[FreePort(t)] = true
	}
	cmd := exec.Command(os.Args[0], "-test.run=^TestFreePortNotSharedWithAnotherProcess$", "-test.count=1")
	cmd.Env = append(os.Environ(), "TESTUTIL_FREEPORT_CHILD=1")
	b, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("child: %v\n%s", err, b)
	}
	_, list, ok := strings.Cut(string(b), "PORTS ")
	if !ok {
		t.Fatalf("child printed no ports:\n%s", b)
	}
	list, _, _ = strings.Cut(list, "\n")
	for _, s := range strings.Split(list, ",") {
		p, err := strconv.Atoi(s)
		if err != nil {
			t.Fatal(err)
		}
		if mine[p] {
			t.Fatalf("port %d handed to both processes", p)
		}
	}
}
