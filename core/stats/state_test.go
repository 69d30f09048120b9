package stats

import "testing"

// TestServerStateHealthFirst: a server that its check sees down is
// "down" whatever its admin state; a drained one read "drain", and an
// alert on state="down" missed it. An up server shows its admin state.
func TestServerStateHealthFirst(t *testing.T) {
	for _, tt := range []struct {
		up    bool
		admin string
		want  string
	}{
		{true, "ready", "up"},
		{true, "drain", "drain"},
		{true, "maint", "maint"},
		{false, "ready", "down"},
		{false, "drain", "down"},
		{false, "maint", "down"},
	} {
		if got := ServerState(tt.up, tt.admin); got != tt.want {
			t.Errorf("up %v, admin %s: state %q, want %q", tt.up, tt.admin, got, tt.want)
		}
	}
}
