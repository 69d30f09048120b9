//go:build race

package accesslog

// raceEnabled: the race detector instruments (and allocates in) the
// standard library, so allocation counts are only compared without it.
const raceEnabled = true
