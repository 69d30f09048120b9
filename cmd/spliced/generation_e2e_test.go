package main

import (
	"bufio"
	"io"
	"strconv"
	"testing"
)

// TestHTTPKeptAliveConnectionSeesConfigurationChanges is issue 12's
// "kept-alive http clients get 503 after an in-place server change": a
// keep-alive client connection resolves each new request against the
// running generation, as a new connection does. After PATCHing the
// server's port to another live origin (plan: in_place), the next request
// on the same connection is answered by the new origin (it was 503: the
// connection kept the retired Server); a route added after the connection
// opened is used by that connection's next request.
func TestHTTPKeptAliveConnectionSeesConfigurationChanges(t *testing.T) {
	in := startSpliced(t, "")
	first := newHTTPOrigin(t, "first", nil)
	second := newHTTPOrigin(t, "second", nil)
	routed := newHTTPOrigin(t, "routed", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{
			httpBackend("web", "roundrobin", first.server("s1")),
			httpBackend("other", "roundrobin", routed.server("s")),
		},
		frontend: map[string]any{"default_backend": "web"},
	})
	c := dialProxy(t, port)
	br := bufio.NewReader(c)
	get := func(path string) (int, string) {
		t.Helper()
		if _, err := io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
			t.Fatal(err)
		}
		resp, b := readResp(t, br, "GET")
		return resp.StatusCode, string(b)
	}
	if st, b := get("/"); st != 200 || b != "first" {
		t.Fatalf("before the change: %d %q", st, b)
	}

	var res struct {
		Plan struct {
			Items []struct{ Object, Apply string }
		}
	}
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"port":`+strconv.Itoa(second.port)+`}`).JSON(t, &res)
	if len(res.Plan.Items) != 1 || res.Plan.Items[0].Apply != "in_place" {
		t.Fatalf("plan %+v, want one in_place item", res.Plan.Items)
	}
	if st, b := get("/"); st != 200 || b != "second" {
		t.Fatalf("same connection after the in-place server change: %d %q, want 200 \"second\"", st, b)
	}

	in.MustDo(200, "PATCH", "/api/v1/frontends/pub",
		`{"routes":[{"path_prefix":"/r/","backend":"other"}]}`)
	if st, b := get("/r/x"); st != 200 || b != "routed" {
		t.Fatalf("same connection, a route added after it opened: %d %q, want 200 \"routed\"", st, b)
	}
	if st, b := get("/"); st != 200 || b != "second" {
		t.Fatalf("same connection, default backend: %d %q", st, b)
	}
	if n := first.origin.Accepted() + second.origin.Accepted() + routed.origin.Accepted(); n != 3 {
		t.Fatalf("%d origin connections, want 3 (one each)", n)
	}
}
