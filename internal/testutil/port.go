package testutil

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"
)

// FreePort returns a TCP port on 127.0.0.1 for the test to listen on later
// (a bind given to spliced through the API, an HAProxy or nginx config),
// and that nothing else takes in between:
//
//   - it is below the kernel's ephemeral range (ip_local_port_range), so
//     neither the source port of a connect nor a listen on port 0, which
//     every test does by the thousand, can take it. A port taken from the
//     ephemeral range and closed again (the old FreePort) was taken back
//     that way: TestReadmeEveryShellBlock's gRPC frontend got 409
//     (EADDRINUSE) in CI;
//   - this process hands each port out once;
//   - a lock on the port's byte of one shared file (fcntl, released by
//     the kernel when the process ends, however it ends) keeps it from
//     every other test process that uses FreePort at the same time (the
//     lanes of make test run side by side).
//
// It fails the test when the ephemeral range leaves no room below it.
func FreePort(t testing.TB) int {
	t.Helper()
	p, err := ports.take()
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// portFloor is the lowest port FreePort hands out: above the well-known
// and registered ports servers of this machine may use (etcd's 2379,
// 2380), below the ephemeral range's default floor (32768).
const portFloor = 20000

type portPool struct {
	mu   sync.Mutex
	lock *os.File // the shared lock file, open for the process's life
	lo   int      // portFloor
	hi   int      // the ephemeral range's floor: ports are in [lo, hi)
	next int      // the next port to try
	left int      // ports not tried yet in this process
}

var ports portPool

func (pp *portPool) take() (int, error) {
	pp.mu.Lock()
	defer pp.mu.Unlock()
	if pp.lock == nil {
		if err := pp.open(); err != nil {
			return 0, err
		}
	}
	for pp.left > 0 {
		p := pp.next
		pp.left--
		if pp.next++; pp.next == pp.hi {
			pp.next = pp.lo
		}
		lk := unix.Flock_t{Type: unix.F_WRLCK, Whence: 0, Start: int64(p), Len: 1}
		if err := unix.FcntlFlock(pp.lock.Fd(), unix.F_SETLK, &lk); err != nil {
			if errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EACCES) {
				continue // another test process holds it
			}
			return 0, fmt.Errorf("FreePort: lock port %d: %w", p, err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:"+strconv.Itoa(p))
		if err != nil {
			continue // something else on the machine listens there
		}
		ln.Close()
		return p, nil
	}
	return 0, fmt.Errorf("FreePort: every port in [%d, %d) is taken", pp.lo, pp.hi)
}

func (pp *portPool) open() error {
	hi, err := ephemeralFloor()
	if err != nil {
		return err
	}
	if hi-portFloor < 1000 {
		return fmt.Errorf("FreePort: the ephemeral range starts at %d, leaving fewer than 1000 ports above %d: raise net.ipv4.ip_local_port_range's floor", hi, portFloor)
	}
	f, err := os.OpenFile(filepath.Join(os.TempDir(), "spliced-test-ports.lock"), os.O_RDWR|os.O_CREATE, 0o666)
	if err != nil {
		return fmt.Errorf("FreePort: %w", err)
	}
	pp.lock, pp.lo, pp.hi, pp.left = f, portFloor, hi, hi-portFloor
	// A random start, so that processes that start together do not
	// contend for the same first ports.
	pp.next = portFloor + rand.IntN(hi-portFloor)
	return nil
}

// ephemeralFloor is the first port of the kernel's ephemeral range.
func ephemeralFloor() (int, error) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, fmt.Errorf("FreePort: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, fmt.Errorf("FreePort: ip_local_port_range %q: want two ports", b)
	}
	return strconv.Atoi(f[0])
}
