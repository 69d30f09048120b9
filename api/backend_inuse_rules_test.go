package api

import (
	"net/http"
	"testing"
)

// TestBackendInUseByRule: a backend a request rule's use_backend sends to
// is still referenced, as one a route or default_backend sends to: its
// DELETE is a 409 in_use that points at the rule, not a 422 saying that
// the backend (which exists) "does not exist".
func TestBackendInUseByRule(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends",
		`{"name":"alt","mode":"http","servers":[{"name":"a1","address":"127.0.0.1","port":8082}]}`)
	f.must(t, http.StatusOK, "PATCH", "/api/v1/frontends/public",
		`{"rules":{"request":[{"when":{"path":"/x"},"do":{"deny":{"status":403}}},{"when":{"path":"/alt"},"do":{"use_backend":"alt"}}]}}`,
		hdr{"Content-Type": "application/merge-patch+json"})
	p := problemOf(t, f.must(t, http.StatusConflict, "DELETE", "/api/v1/backends/alt", ""))
	if len(p.Errors) != 1 || p.Errors[0].Field != "/frontends/0/rules/request/1/do/use_backend" || p.Errors[0].Code != "in_use" {
		t.Fatalf("problem %+v, want one in_use error at /frontends/0/rules/request/1/do/use_backend", p)
	}
	f.must(t, http.StatusOK, "GET", "/api/v1/backends/alt", "")
}
