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

func TestHandshakeMsDefaultsOnlyForSNIRouting(t *testing.T) {
	plain := Frontend{Name: "a", Mode: ModeTCP}
	plain.Normalize()
	routed := Frontend{Name: "b", Mode: ModeTCP, Routes: []Route{{SNI: "a.example.com", Backend: "x"}}}
	routed.Normalize()
	set := Frontend{Name: "c", Mode: ModeTCP, Routes: []Route{{SNI: "a.example.com", Backend: "x"}}, Timeouts: FrontendTimeouts{HandshakeMs: 100}}
	set.Normalize()
	if plain.Timeouts.HandshakeMs != 0 || routed.Timeouts.HandshakeMs != DefaultHandshakeMs || set.Timeouts.HandshakeMs != 100 {
		t.Fatalf("handshake_ms: plain %d, routed %d, set %d", plain.Timeouts.HandshakeMs, routed.Timeouts.HandshakeMs, set.Timeouts.HandshakeMs)
	}
}
