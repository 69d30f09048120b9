package config

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
)

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

// TestNormalizeHTTPOptsMemberDefaults: a member missing from a frontend's
// http object takes its own default, whatever else the object holds. With
// a bool, {"max_body_size":100} (or {} or {"x_forwarded_proto":true})
// stored x_forwarded_for false, and a client's forged X-Forwarded-For
// reached the server alone. An explicit false is kept.
func TestNormalizeHTTPOptsMemberDefaults(t *testing.T) {
	for _, tt := range []struct {
		http    string // the frontend's http member, "" for none
		wantXFF bool
	}{
		{"", true},
		{`,"http":null`, true},
		{`,"http":{}`, true},
		{`,"http":{"max_body_size":100}`, true},
		{`,"http":{"x_forwarded_proto":true}`, true},
		{`,"http":{"via":true}`, true},
		{`,"http":{"x_forwarded_for":true}`, true},
		{`,"http":{"x_forwarded_for":false}`, false},
		{`,"http":{"x_forwarded_for":false,"max_body_size":100}`, false},
	} {
		var f Frontend
		if err := DecodeBytes([]byte(`{"name":"fe","mode":"http"`+tt.http+`}`), &f); err != nil {
			t.Fatalf("%s: %v", tt.http, err)
		}
		f.Normalize()
		if f.HTTP == nil || f.HTTP.XForwardedFor == nil || *f.HTTP.XForwardedFor != tt.wantXFF || f.HTTP.ForwardFor() != tt.wantXFF {
			t.Errorf("http%s: x_forwarded_for %v, want %v", tt.http, f.HTTP, tt.wantXFF)
			continue
		}
		// The stored document says it, and reads back the same.
		out, err := json.Marshal(f.HTTP)
		if err != nil {
			t.Fatal(err)
		}
		want := `"x_forwarded_for":` + strconv.FormatBool(tt.wantXFF)
		if !strings.Contains(string(out), want) {
			t.Errorf("http%s: stored %s, want %s", tt.http, out, want)
		}
		var back FrontendHTTPOpts
		if err := DecodeBytes(out, &back); err != nil || back.ForwardFor() != tt.wantXFF {
			t.Errorf("http%s: %s read back as %v (%v)", tt.http, out, back.ForwardFor(), err)
		}
	}
	// A tcp frontend's leftover http object still says every member.
	tcp := Frontend{Name: "t", Mode: ModeTCP, HTTP: &FrontendHTTPOpts{}}
	tcp.Normalize()
	if tcp.HTTP.XForwardedFor == nil {
		t.Error("tcp frontend's http object left x_forwarded_for null")
	}
}

// TestPollNapDefaultsOnAndOffIsMinusOne: an unset poll_nap_us is the
// default nap (20 µs), -1 turns the naps off and stays -1 (it is not
// "unset"), a chosen length is kept, and below -1 is refused.
func TestPollNapDefaultsOnAndOffIsMinusOne(t *testing.T) {
	for _, c := range []struct{ in, want int }{{0, DefaultPollNapUs}, {-1, -1}, {50, 50}} {
		tu := Tuning{PollNapUs: c.in}
		tu.Normalize()
		if tu.PollNapUs != c.want {
			t.Errorf("poll_nap_us %d normalized to %d, want %d", c.in, tu.PollNapUs, c.want)
		}
	}
	for _, v := range []int{-1, 0, 20, 10000} {
		c := Config{Tuning: Tuning{PollNapUs: v}}
		c.Normalize()
		if err := Validate(&c, Env{}); err != nil {
			t.Errorf("poll_nap_us %d refused: %v", v, err)
		}
	}
	for _, v := range []int{-2, 10001} {
		c := Config{Tuning: Tuning{PollNapUs: v}}
		c.Normalize()
		err := Validate(&c, Env{})
		if err == nil || !strings.Contains(err.Error(), "poll_nap_us") {
			t.Errorf("poll_nap_us %d: got %v, want an error naming poll_nap_us", v, err)
		}
	}
}
