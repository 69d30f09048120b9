package main

import (
	"log/slog"

	"github.com/spliced-proxy/spliced/core"
)

// newCore builds the data plane the admin API drives.
func newCore(log *slog.Logger) (core.Control, error) {
	return core.NewEngine(core.EngineOptions{Logger: log})
}
