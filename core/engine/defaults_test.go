package engine

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestEngineRefusesWhatNormalizeWouldHaveSet: the engine fills no default
// (config.Normalize does, once); a snapshot holding a value Normalize sets
// is refused with an ApplyError naming it, and the running generation is
// untouched.
func TestEngineRefusesWhatNormalizeWouldHaveSet(t *testing.T) {
	e := newTestEngine(t)
	origin := greeter(t, "A")
	p := testutil.FreePort(t)
	apply(t, e, tcpConfig(1, origin, p))
	tests := []struct {
		name  string
		mut   func(c *config.Config)
		field string
	}{
		{"maxaccept 0", func(c *config.Config) { c.Tuning.Maxaccept = 0 }, "/tuning"},
		{"distribution unset", func(c *config.Config) { c.Tuning.Distribution = "" }, "/tuning"},
		{"backend retries unset", func(c *config.Config) { c.Backends[0].Retries = nil }, "/backends/0"},
		{"backend connect timeout 0", func(c *config.Config) { c.Backends[0].Timeouts.ConnectMs = 0 }, "/backends/0"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tcpConfig(2, origin, p)
			tt.mut(c)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			err := e.Apply(ctx, c)
			var ae *config.ApplyError
			if !errors.As(err, &ae) || ae.Field != tt.field || !errors.Is(err, config.ErrInvalid) {
				t.Fatalf("apply: %v, want an ApplyError on %s wrapping ErrInvalid", err, tt.field)
			}
			if g := e.Runtime().Generation; g != 1 {
				t.Fatalf("generation %d after a refused apply, want 1", g)
			}
			echo(t, hello(t, p, "A"), "still served")
		})
	}
}
