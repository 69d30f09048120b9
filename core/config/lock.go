package config

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// LockFile is the lock file of the state directory. It holds the PID of
// the process that owns the directory, for the refusal message.
const LockFile = "spliced.lock"

// ErrLocked is returned by LockDir when another process owns the directory.
var ErrLocked = errors.New("state directory in use")

// DirLock is the exclusive ownership of one state directory: an flock held
// on dir/spliced.lock until Close (or the process exits, whatever the way:
// the kernel drops an flock with the last descriptor of its file).
type DirLock struct{ f *os.File }

// LockDir takes the state directory dir for this process, or fails at once
// with an error wrapping ErrLocked that names the PID written in the lock
// file by its owner. A second spliced on the same directory would otherwise
// roll back or overwrite generations the first one acknowledged. The
// command-line token edits do not take this lock (they run beside the
// daemon): they serialise on api/tokens' own lock file.
func LockDir(dir string) (*DirLock, error) {
	path := filepath.Join(dir, LockFile)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|unix.O_NOFOLLOW, 0o600)
	if err != nil {
		return nil, fmt.Errorf("state directory lock: %w", err)
	}
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if err != unix.EINTR {
			break
		}
	}
	if err != nil {
		defer f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			pid := "unknown"
			if b, rerr := os.ReadFile(path); rerr == nil && len(strings.TrimSpace(string(b))) > 0 {
				pid = strings.TrimSpace(string(b))
			}
			return nil, fmt.Errorf("%w: %s is held by another spliced (pid %s); stop it first, or give this one its own --state-dir",
				ErrLocked, path, pid)
		}
		return nil, fmt.Errorf("state directory lock %s: %w", path, err)
	}
	// Ours now: record who we are. A crash leaves a stale PID in the file,
	// never a stale lock.
	if err := f.Truncate(0); err == nil {
		_, _ = f.WriteAt([]byte(strconv.Itoa(os.Getpid())+"\n"), 0)
	}
	return &DirLock{f: f}, nil
}

// Close releases the directory.
func (l *DirLock) Close() error { return l.f.Close() }
