package faults

import (
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestWholeConfigReplacedUnderLoad: while keep-alive clients run, the
// whole document is replaced (PUT /api/v1/config: the backend renamed and
// its servers swapped, the frontend pointed at it), then an older revision
// is restored, several times: the clients see no error, and after each
// write their requests reach the servers it names.
func TestWholeConfigReplacedUnderLoad(t *testing.T) {
	p := start(t, startOpts{})
	a, b := named(t, "a"), named(t, "b")
	p.backend("web", "http", map[string]any{"server_ms": 5000}, srv{"s1", a.port})
	fp := p.frontend("pub", "http", "web", nil)
	var doc map[string]any
	if err := json.Unmarshal(p.must("GET", "/api/v1/config", nil), &doc); err != nil {
		t.Fatal(err)
	}
	rev1 := int(doc["generation"].(float64))
	be := doc["backends"].([]any)[0].(map[string]any)
	be["name"] = "web2"
	be["servers"] = servers(srv{"s9", b.port})
	doc["frontends"].([]any)[0].(map[string]any)["default_backend"] = "web2"
	delete(doc, "generation")

	load := startGETs(t, fp, 4)
	answersFrom := func(name string) {
		t.Helper()
		testutil.Eventually(t, 5*time.Second, func() bool {
			// 20 more answers, so that last is one of a request sent now
			n := load.reqs.Load()
			for end := time.Now().Add(time.Second); load.reqs.Load() < n+20 && time.Now().Before(end); {
				time.Sleep(time.Millisecond)
			}
			return load.last.Load() == name
		}, "answers from "+name)
	}
	for i := 0; i < 3; i++ {
		p.must("PUT", "/api/v1/config", doc)
		answersFrom("b")
		p.must("POST", "/api/v1/config/revisions/"+strconv.Itoa(rev1)+"/restore", nil)
		answersFrom("a")
	}
	load.Stop()
	t.Logf("%d requests, %d errors", load.reqs.Load(), load.errs.Load())
	if load.errs.Load() > 0 {
		t.Fatalf("%d client errors across whole-config replacements; first: %v", load.errs.Load(), load.firstErr.Load())
	}
	p.healthy(t)
}
