// Package web holds the static admin page served at /ui/: index.html,
// app.css, the JavaScript modules in js/ and the vendored chart library in
// vendor/ (uPlot, MIT, from the npm registry). The files are embedded in the
// binary with go:embed; there is no build step and nothing is loaded from
// the internet. The page talks to the admin API only through /api/v1, like
// curl. The package has no state; any goroutine may call it.
package web

import (
	"embed"
	"io/fs"
)

//go:embed index.html app.css js vendor
var files embed.FS

// FS returns the static files of the admin page, index.html at the root.
func FS() fs.FS { return files }
