package balance

import (
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestHealthRiseAndFall(t *testing.T) {
	tests := []struct {
		name       string
		rise, fall int
		startUp    bool
		// outcomes: '+' success, '-' failure; want: the state after each,
		// 'u' up or 'd' down (Observe must report a change exactly when it
		// differs from the state before).
		outcomes, want string
	}{
		{"fresh up server falls at first failure", 2, 3, true, "-", "d"},
		{"settled up server needs fall consecutive failures", 2, 3, true, "+---", "uuud"},
		{"a success refills an up server", 2, 3, true, "+--+---", "uuuuuud"},
		{"down needs rise consecutive successes", 2, 3, false, "++", "du"},
		{"a failure restarts the rise", 3, 2, false, "++-+++", "dddddu"},
		{"rise and fall of one", 1, 1, true, "-+-+", "dudu"},
		{"failures on a down server stay down", 2, 2, false, "---+", "dddd"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := mustBuild(t, cfgBackend(config.BalanceRoundRobin, 1), nil).Servers[0]
			srv.SetUp(tt.startUp, time.Now())
			h := NewHealth(srv, tt.rise, tt.fall)
			wasUp := tt.startUp
			for i, o := range tt.outcomes {
				now := time.Unix(1000+int64(i), 0)
				changed := h.Observe(o == '+', now)
				up := h.Up()
				want := tt.want[i]
				if up != (want == 'u') {
					t.Fatalf("after %q: up=%v, want %c", tt.outcomes[:i+1], up, want)
				}
				if changed != (up != wasUp) {
					t.Fatalf("after %q: changed=%v but state went %v -> %v", tt.outcomes[:i+1], changed, wasUp, up)
				}
				if srv.Up() != up {
					t.Fatalf("after %q: server up %v, health up %v", tt.outcomes[:i+1], srv.Up(), up)
				}
				if changed && !srv.LastChange().Equal(now) {
					t.Fatalf("last change %v, want %v", srv.LastChange(), now)
				}
				wasUp = up
			}
		})
	}
}
