package config

import (
	"strings"
	"testing"
)

func TestFdBudget(t *testing.T) {
	tests := []struct {
		name              string
		maxconn, maxpipes int
		pipes             int
		fds               int64
	}{
		{"pipes capped to a quarter of maxconn", 1000, 1024, 250, 2000 + 500 + FdReserve},
		{"maxpipes below the quarter", 100000, 1024, 1024, 200000 + 2048 + FdReserve},
		{"at least one pipe", 2, 1024, 1, 4 + 2 + FdReserve},
		{"maxpipes 0 is the default", 1 << 20, 0, DefaultMaxpipes, 2<<20 + 2*DefaultMaxpipes + FdReserve},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p := PipesFor(tt.maxpipes, tt.maxconn); p != tt.pipes {
				t.Errorf("PipesFor(%d, %d) = %d, want %d", tt.maxpipes, tt.maxconn, p, tt.pipes)
			}
			if f := FdsFor(tt.maxconn, tt.maxpipes); f != tt.fds {
				t.Errorf("FdsFor(%d, %d) = %d, want %d", tt.maxconn, tt.maxpipes, f, tt.fds)
			}
		})
	}
}

// MaxconnFor is the largest maxconn that fits: with a 1024 fd limit it no
// longer collapses to 1 (the old RLIMIT_NOFILE - 256 - 2*maxpipes did).
func TestMaxconnForFitsTheFdLimit(t *testing.T) {
	for _, lim := range []int64{0, 100, 256, 258, 262, 1024, 4096, 20000, 1 << 20} {
		for _, mp := range []int{0, 1, 64, 1024} {
			m := MaxconnFor(lim, mp)
			if m > 0 && FdsFor(m, mp) > lim {
				t.Errorf("MaxconnFor(%d, %d) = %d needs %d fds", lim, mp, m, FdsFor(m, mp))
			}
			if FdsFor(m+1, mp) <= lim {
				t.Errorf("MaxconnFor(%d, %d) = %d, but %d fits", lim, mp, m, m+1)
			}
		}
	}
	if m := MaxconnFor(1024, DefaultMaxpipes); m != 307 {
		t.Errorf("MaxconnFor(1024, default) = %d, want 307 (2.5 fds per connection)", m)
	}
}

func TestValidateMaxconnAgainstTheFdLimit(t *testing.T) {
	tests := []struct {
		name    string
		maxconn int
		env     Env
		want    []want
	}{
		{"above the fd limit", 30000, Env{FdLimit: 20000}, []want{{"/tuning/maxconn", CodeFdLimit}}},
		{"fits", 7000, Env{FdLimit: 20000}, nil},
		{"0 derives from the limit", 0, Env{FdLimit: 1024}, nil},
		{"unknown limit (persisted config)", 30000, Env{}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := goodConfig()
			c.Tuning.Maxconn = tt.maxconn
			err := Validate(c, tt.env)
			got := fieldErrors(t, err)
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Fatalf("got %v, want %v (%v)", got, tt.want, err)
			}
			if err != nil && !strings.Contains(err.Error(), "fd limit (RLIMIT_NOFILE) is 20000") {
				t.Errorf("message does not name the limit: %v", err)
			}
		})
	}
}
