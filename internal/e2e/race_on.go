//go:build race

package e2e

// Race says whether the tests run with the race detector: the binary is
// then built with it too.
const Race = true
