// Package web holds the static admin page served at /ui/. The files are
// embedded in the binary with go:embed; there is no build step. The package
// has no state; any goroutine may call it.
package web

import (
	"embed"
	"io/fs"
)

//go:embed index.html
var files embed.FS

// FS returns the static files of the admin page, index.html at the root.
func FS() fs.FS { return files }
