package config

import "testing"

// TestNormalizeFillsBindBacklog: a bind's listen(2) backlog is a default
// like the others, filled here once (core/listen fills none); a chosen one
// is kept.
func TestNormalizeFillsBindBacklog(t *testing.T) {
	c := Config{Frontends: []Frontend{{Name: "fe", Binds: []Bind{{Name: "a"}, {Name: "b", Backlog: 100}}}}}
	c.Normalize()
	if got := c.Frontends[0].Binds[0].Backlog; got != DefaultBacklog {
		t.Errorf("unset backlog normalized to %d, want %d", got, DefaultBacklog)
	}
	if got := c.Frontends[0].Binds[1].Backlog; got != 100 {
		t.Errorf("backlog 100 normalized to %d", got)
	}
}
