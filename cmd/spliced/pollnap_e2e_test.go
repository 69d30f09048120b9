package main

import (
	"strings"
	"testing"
)

// TestPollNapDefaultVisibleAndOff: the loops nap 20 µs by default
// (tuning.poll_nap_us, shown by the API), -1 turns the naps off and is
// kept as written, 0 means the default again, and a value below -1 is a
// 422 naming the field.
func TestPollNapDefaultVisibleAndOff(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	nap := func() int {
		var tu struct {
			PollNapUs int `json:"poll_nap_us"`
		}
		in.MustDo(200, "GET", "/api/v1/tuning", nil).JSON(t, &tu)
		return tu.PollNapUs
	}
	if got := nap(); got != 20 {
		t.Fatalf("default poll_nap_us %d, want 20", got)
	}
	const mp = "Content-Type: application/merge-patch+json"
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"poll_nap_us":-1}`, mp)
	if got := nap(); got != -1 {
		t.Fatalf("poll_nap_us after PATCH -1: %d", got)
	}
	r := in.MustDo(422, "PATCH", "/api/v1/tuning", `{"poll_nap_us":-2}`, mp)
	if !strings.Contains(string(r.Body), "poll_nap_us") {
		t.Fatalf("PATCH -2: %s, want an error naming poll_nap_us", r.Body)
	}
	if got := nap(); got != -1 {
		t.Fatalf("poll_nap_us after a refused PATCH: %d", got)
	}
	in.MustDo(200, "PATCH", "/api/v1/tuning", `{"poll_nap_us":0}`, mp)
	if got := nap(); got != 20 {
		t.Fatalf("poll_nap_us after PATCH 0: %d, want the default 20", got)
	}
}
