// Package benchutil holds the small helpers the bench tools share
// (bench/applybench, bench/clusterbench).
package benchutil

import (
	"net"
	"os"
	"time"
)

// EnvOr is the environment variable k, or d when it is unset or empty.
func EnvOr(k, d string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return d
}

// Ms is d in milliseconds, with microsecond resolution.
func Ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// Pct is the p-th percentile (nearest rank) of sorted, which is not empty.
func Pct(sorted []float64, p int) float64 {
	i := (len(sorted)*p + 99) / 100
	if i < 1 {
		i = 1
	}
	return sorted[i-1]
}

// FreePort is a TCP port of 127.0.0.1 free when asked.
func FreePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
