package loop

// Mono is the clock of Now, readable from any goroutine (one clock read):
// what a reader on another thread compares with values a loop stamped with
// Now (stats rates).
func Mono() int64 { return monoNow() }
