// Package version holds the version string injected at link time
// (-ldflags -X .../version.Version=...). Any goroutine may read it.
package version

// Version is set by the Makefile from `git describe`.
var Version = "0.0.0-dev"
