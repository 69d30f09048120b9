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
	return config.LockDir(dir)
}
