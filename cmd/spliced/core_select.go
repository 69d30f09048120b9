package main

import (
	"log/slog"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/engine"
)

// newCore builds the data plane the admin API drives.
func newCore(log *slog.Logger) (core.Control, error) {
	return engine.New(engine.Options{Logger: log})
}
