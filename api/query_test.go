package api

import (
	"strings"
	"testing"
)

// TestQueryRefusesRepeatedUnknownAndMalformedParameters: a repeated
// parameter, one the operation does not take and a malformed query string
// are 400 bad-query problems naming what was refused — before, the first
// value won (PATCH ?dry_run=false&dry_run=true applied the change) and
// ?stauts=5xx answered everything. What the operations take still works.
func TestQueryRefusesRepeatedUnknownAndMalformedParameters(t *testing.T) {
	f := newFixture(t)
	before := f.must(t, 200, "GET", "/api/v1/tuning", "").Body.String()
	for _, tc := range []struct {
		method, path, body, detail string
	}{
		{"PATCH", "/api/v1/tuning?dry_run=false&dry_run=true", `{"maxaccept":9}`, `query parameter "dry_run" is given 2 times`},
		{"PATCH", "/api/v1/tuning?dry_run=true&dry_run=true", `{"maxaccept":9}`, `"dry_run" is given 2 times`},
		{"GET", "/api/v1/logs?status=5xx&status=2xx", "", `query parameter "status" is given 2 times`},
		{"GET", "/api/v1/logs?limit=1&limit=5", "", `query parameter "limit" is given 2 times`},
		{"GET", "/api/v1/logs?stauts=5xx", "", `unknown query parameter "stauts": this operation takes abnormal, backend, client, follow, frontend, limit, server, since, status, termination`},
		{"GET", "/api/v1/logs?%zz=1", "", "the query string is malformed"},
		{"GET", "/api/v1/logs?status=5xx;limit=1", "", "the query string is malformed"},
		{"GET", "/api/v1/frontends?limit=1", "", `unknown query parameter "limit": this operation takes none`},
		{"HEAD", "/api/v1/config?x", "", ""},
		{"GET", "/healthz?full=1", "", `unknown query parameter "full"`},
		{"PUT", "/api/v1/tuning?dryrun=true", `{}`, `unknown query parameter "dryrun": this operation takes dry_run, wait_ms`},
		{"GET", "/api/v1/stats?frontend=a&frontend=b", "", `"frontend" is given 2 times`},
		{"GET", "/api/v1/audit?spliced_" + strings.Repeat("Ab", 20) + "=1", "", `unknown query parameter "REDACTED"`},
	} {
		w := f.do(tc.method, tc.path, tc.body)
		if w.Code != 400 {
			t.Errorf("%s %s: %d, want 400; %s", tc.method, tc.path, w.Code, w.Body.String())
			continue
		}
		if tc.method == "HEAD" {
			continue
		}
		if p := problemOf(t, w); p.Type != "urn:spliced:problem:bad-query" || !strings.Contains(p.Detail, tc.detail) {
			t.Errorf("%s %s: %+v, want a bad-query: %s", tc.method, tc.path, p, tc.detail)
		}
	}
	if after := f.must(t, 200, "GET", "/api/v1/tuning", "").Body.String(); after != before {
		t.Errorf("a refused write changed the tuning:\n%s\n%s", before, after)
	}
	// What the operations take, each once, is taken.
	f.must(t, 200, "PATCH", "/api/v1/tuning?dry_run=true&wait_ms=100", `{"maxaccept":9}`)
	f.must(t, 200, "GET", "/api/v1/stats?frontend=&backend=&server=", "")
	f.must(t, 200, "GET", "/api/v1/audit?limit=5&actor=&dry_run=true", "")
	f.must(t, 200, "GET", "/api/v1/config", "")
	f.must(t, 200, "GET", "/healthz", "")
	// A path no operation serves stays a 404.
	f.must(t, 404, "GET", "/api/v1/nothing?x=1&x=2", "")
}
