package openapi

import (
	"embed"
	"io/fs"
)

//go:embed openapi.json docs
var files embed.FS

// JSON returns the generated OpenAPI (Swagger 2.0) document. The slice is a
// fresh copy; callers may keep it.
func JSON() []byte {
	b, err := files.ReadFile("openapi.json")
	if err != nil {
		// The file is embedded at build time; its absence is a build error.
		panic("openapi: openapi.json not embedded: " + err.Error())
	}
	return b
}

// Docs returns the Swagger UI files (index.html at its root).
func Docs() fs.FS {
	sub, err := fs.Sub(files, "docs")
	if err != nil {
		panic("openapi: docs not embedded: " + err.Error())
	}
	return sub
}
