package stick

import (
	"testing"
	"time"
)

// A steady rate reads within 10 % of itself, whatever the phase of the
// window.
func TestFreqEstimate(t *testing.T) {
	const period = int64(time.Second)
	for _, perSec := range []int{10, 100, 1000} {
		var f Freq
		step := period / int64(perSec)
		now := int64(0)
		for i := 0; i < 5*perSec; i++ {
			f.Hit(now, period)
			now += step
			if now > 2*period && i%7 == 0 {
				got := float64(f.Rate(now, period))
				if got < 0.9*float64(perSec) || got > 1.1*float64(perSec) {
					t.Fatalf("%d/s: estimate %.0f at %v", perSec, got, time.Duration(now))
				}
			}
		}
	}
}

func TestFreqPeriods(t *testing.T) {
	const p = int64(time.Second)
	var f Freq
	for i := 0; i < 10; i++ {
		f.Hit(p/2, p)
	}
	if r := f.Rate(p/2, p); r != 10 {
		t.Fatalf("same period: %d", r)
	}
	// Next period, halfway: half the previous count is still in the window.
	if r := f.Rate(p+p/2, p); r != 5 {
		t.Fatalf("next period halfway: %d, want 5", r)
	}
	if r := f.Hit(p+p/2, p); r != 6 {
		t.Fatalf("hit in the next period: %d, want 6", r)
	}
	// Two periods later nothing is left.
	if r := f.Rate(4*p, p); r != 0 {
		t.Fatalf("after two periods: %d", r)
	}
	for i := 0; i < FreqMax+10; i++ {
		f.Hit(10*p, p)
	}
	if r := f.Rate(10*p, p); r != FreqMax {
		t.Fatalf("saturation: %d", r)
	}
}

// Wait says when the next event passes: waiting that long, the estimate
// is below the limit, and not much earlier.
func TestFreqWait(t *testing.T) {
	const p = int64(10 * time.Second)
	var f Freq
	now := int64(3 * p)
	for i := 0; i < 20; i++ {
		f.Hit(now+int64(i)*int64(time.Millisecond), p)
	}
	now += 20 * int64(time.Millisecond)
	const limit = 10
	d := f.Wait(now, p, limit)
	if d <= 0 {
		t.Fatal("over the limit but no wait")
	}
	if r := f.Rate(now+d, p); r > limit-1 {
		t.Fatalf("after the wait (%v) the estimate is %d", time.Duration(d), r)
	}
	if r := f.Rate(now+d-int64(time.Second), p); r <= limit-1 {
		t.Fatalf("a second before the end of the wait (%v) the estimate is already %d", time.Duration(d), r)
	}
	var quiet Freq
	if quiet.Wait(now, p, limit) != 0 {
		t.Fatal("a quiet client waits")
	}
}
