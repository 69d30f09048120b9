package api

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// openStream opens /api/v1/events with token on srv; it returns the
// response (the caller closes its body).
func openStream(t *testing.T, ctx context.Context, srv *httptest.Server, token string) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(ctx, "GET", srv.URL+"/api/v1/events", nil)
	req.Host = secAddr
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := srv.Client().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	return resp
}

// Issue 13: stats and config events kept arriving on the stream of a
// token revoked since; a revocation ends its streams within a second.
func TestRevokedTokenLosesItsEventStream(t *testing.T) {
	f := newSecFixture(t, true, Options{})
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	viewer := openStream(t, ctx, srv, f.secrets[tokens.Viewer])
	defer viewer.Body.Close()
	admin := openStream(t, ctx, srv, f.secrets[tokens.Admin])
	defer admin.Body.Close()
	if viewer.StatusCode != 200 || admin.StatusCode != 200 {
		t.Fatalf("streams: %d %d", viewer.StatusCode, admin.StatusCode)
	}
	ended := make(chan time.Time, 1)
	go func() {
		_, _ = io.Copy(io.Discard, viewer.Body)
		ended <- time.Now()
	}()
	if err := tokens.Revoke(f.dir, "t-viewer"); err != nil {
		t.Fatal(err)
	}
	revoked := time.Now()
	select {
	case at := <-ended:
		if d := at.Sub(revoked); d > time.Second {
			t.Fatalf("the revoked token's stream ended %v after the revocation, want within a second", d)
		}
	case <-time.After(3 * time.Second):
		t.Fatal("the revoked token's stream still runs 3 s after the revocation")
	}
	// The admin's stream is untouched: it still delivers (a stats tick).
	buf := make([]byte, 256)
	if _, err := admin.Body.Read(buf); err != nil {
		t.Fatalf("the admin's stream ended too: %v", err)
	}
}

// Issue 13: 128 viewer streams held every admin connection. Streams are
// capped per token (429) and in all (503), with a problem document.
func TestEventStreamsAreCapped(t *testing.T) {
	f := newSecFixture(t, true, Options{MaxEventStreams: 3, MaxEventStreamsPerToken: 2})
	srv := httptest.NewServer(f.h)
	defer srv.Close()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	var open []*http.Response
	defer func() {
		for _, r := range open {
			r.Body.Close()
		}
	}()
	expect := func(token string, want int) {
		t.Helper()
		r := openStream(t, ctx, srv, token)
		if r.StatusCode != want {
			r.Body.Close()
			t.Fatalf("stream: %d, want %d", r.StatusCode, want)
		}
		if want != 200 {
			defer r.Body.Close()
			if ct := r.Header.Get("Content-Type"); ct != "application/problem+json" || r.Header.Get("Retry-After") == "" {
				t.Fatalf("refused stream: Content-Type %q, Retry-After %q", ct, r.Header.Get("Retry-After"))
			}
			return
		}
		open = append(open, r)
	}
	v, a := f.secrets[tokens.Viewer], f.secrets[tokens.Admin]
	expect(v, 200)
	expect(v, 200)
	expect(v, 429) // this token's cap
	expect(a, 200)
	expect(a, 503) // the total
	// A closed stream frees its slot.
	open[0].Body.Close()
	open = open[1:]
	last := 0
	testutil.Eventually(t, 5*time.Second, func() bool {
		r := openStream(t, ctx, srv, a)
		if last = r.StatusCode; last == 200 {
			open = append(open, r)
			return true
		}
		r.Body.Close()
		return false
	}, func() string { return fmt.Sprintf("a slot after a stream closed, still %d", last) })
}
