package main

import (
	"fmt"
	"os"

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
	if fi.Mode().Perm()&0o002 != 0 {
		return nil, fmt.Errorf("state directory %s is writable by other users (mode %04o): fix it with `chmod 700 %s`",
			dir, fi.Mode().Perm(), dir)
	}
	return config.LockDir(dir)
}
