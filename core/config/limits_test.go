package config

import (
	"strings"
	"testing"
)

func TestFdBudget(t *testing.T) {
	bare := FdBudget{Fixed: FdReserve, Maxpipes: 1024}
	tests := []struct {
		name    string
		b       FdBudget
		maxconn int
		pipes   int
		fds     int64
	}{
		{"pipes capped to a quarter of maxconn", bare, 1000, 250, FdReserve + 2000 + 500 + 250},
		{"maxpipes below the quarter", bare, 100000, 1024, FdReserve + 200000 + 2048 + 25000},
		{"at least one pipe and one idle connection", bare, 2, 1, FdReserve + 4 + 2 + 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if p := PipesFor(tt.b.Maxpipes, tt.maxconn); p != tt.pipes {
				t.Errorf("PipesFor(%d, %d) = %d, want %d", tt.b.Maxpipes, tt.maxconn, p, tt.pipes)
			}
			if f := tt.b.Fds(tt.maxconn); f != tt.fds {
				t.Errorf("Fds(%d) = %d, want %d", tt.maxconn, f, tt.fds)
			}
		})
	}
}

// The fixed part counts FdReserve, each loop, each listening socket (a
// sharded bind has one per shard) and each server with health checks.
func TestNewFdBudgetCountsLoopsSocketsAndChecks(t *testing.T) {
	c := goodConfig() // binds: b1, b2 (public), b1 with 2 shards (db_front); checks: web (2 servers), db (1)
	c.Tuning.Maxpipes = 64
	b := NewFdBudget(c, 3)
	if want := int64(FdReserve + 3*FdsPerLoop + 1 + 1 + 2 + 2 + 1); b.Fixed != want || b.Maxpipes != 64 {
		t.Fatalf("budget %+v, want fixed %d", b, want)
	}
}

// Maxconn is the largest maxconn that fits: with a 1024 fd limit it no
// longer collapses to 1 (the old RLIMIT_NOFILE - 256 - 2*maxpipes did).
func TestFdBudgetMaxconnFitsTheLimit(t *testing.T) {
	for _, lim := range []int64{0, 100, 256, 258, 262, 1024, 4096, 20000, 1 << 20} {
		for _, mp := range []int{0, 1, 64, 1024} {
			b := FdBudget{Fixed: FdReserve + 2*FdsPerLoop + 1, Maxpipes: mp}
			m := b.Maxconn(lim)
			if m > 0 && b.Fds(m) > lim {
				t.Errorf("Maxconn(%d) with maxpipes %d = %d needs %d fds", lim, mp, m, b.Fds(m))
			}
			if b.Fds(m+1) <= lim {
				t.Errorf("Maxconn(%d) with maxpipes %d = %d, but %d fits", lim, mp, m, m+1)
			}
		}
	}
	if m := (FdBudget{Fixed: FdReserve, Maxpipes: DefaultMaxpipes}).Maxconn(1024); m != 279 {
		t.Errorf("Maxconn(1024) = %d, want 279 (2.75 fds per connection: a pipe per 4, an idle server connection per 4)", m)
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
