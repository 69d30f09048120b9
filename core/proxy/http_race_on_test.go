//go:build race

package proxy

// raceEnabled: the race detector instruments (and allocates in) the
// standard library, so allocation counts are only pinned without it.
const raceEnabled = true
