package main

import (
	"fmt"
	"os"
	"syscall"

	"github.com/spliced-proxy/spliced/core/config"
)

// openStateDir creates the state directory (0700) if needed and takes its
// lock for the life of the process, before anything reads or writes in it.
func openStateDir(dir string) (*config.DirLock, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	// Anyone who may create files in it may plant a config, a token file
	// or a link: refuse, and say how to fix it.
	fi, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("state directory %s is not a directory", dir)
	}
	// Group members and the directory's owner can plant files as much as
	// everyone can: a group-writable directory, or one owned by another
	// user (but root), is as open as a world-writable one.
	if fi.Mode().Perm()&0o022 != 0 {
		return nil, fmt.Errorf("state directory %s is writable by other users (mode %04o): fix it with `chmod 700 %s`",
			dir, fi.Mode().Perm(), dir)
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() && st.Uid != 0 {
		return nil, fmt.Errorf("state directory %s belongs to uid %d, not to this process (uid %d): that user can plant "+
			"a token file or a config in it; run spliced as uid %d, or `chown %d %s`", dir, st.Uid, os.Geteuid(), st.Uid, os.Geteuid(), dir)
	}
	return config.LockDir(dir)
}
