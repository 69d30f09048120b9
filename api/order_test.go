package api

import (
	"encoding/json"
	"strings"
	"testing"
)

// A PUT that only reorders a backend's servers (or the document's
// backends) is written and read back as sent; it used to answer 200 with
// an empty plan and keep the old order.
func TestPutThatReordersIsWritten(t *testing.T) {
	f := newFixture(t)
	srv := func(names ...string) string {
		var b []string
		for i, n := range names {
			b = append(b, `{"name":"`+n+`","address":"127.0.0.1","port":`+string(rune('1'+i))+`001}`)
		}
		return `[` + strings.Join(b, ",") + `]`
	}
	f.must(t, 201, "POST", "/api/v1/backends", `{"name":"web","mode":"tcp","servers":`+srv("a", "b", "c")+`}`)
	f.must(t, 201, "POST", "/api/v1/backends", `{"name":"api","mode":"tcp","servers":`+srv("a")+`}`)
	names := func(path string) string {
		var v []struct{ Name string }
		if err := json.Unmarshal(f.must(t, 200, "GET", path, "").Body.Bytes(), &v); err != nil {
			t.Fatal(err)
		}
		var n []string
		for _, o := range v {
			n = append(n, o.Name)
		}
		return strings.Join(n, ",")
	}
	// the same servers (ports included), in another order
	body := `{"mode":"tcp","servers":[{"name":"c","address":"127.0.0.1","port":3001},` +
		`{"name":"a","address":"127.0.0.1","port":1001},{"name":"b","address":"127.0.0.1","port":2001}]}`
	w := f.must(t, 200, "PUT", "/api/v1/backends/web", body)
	if !strings.Contains(w.Body.String(), `"fields":["servers"]`) {
		t.Fatalf("PUT's plan: %s", w.Body.String())
	}
	if got := names("/api/v1/backends/web/servers"); got != "c,a,b" {
		t.Fatalf("servers after the PUT: %s", got)
	}
	// the document's backends in another order, through PUT /config
	var doc map[string]any
	if err := json.Unmarshal(f.must(t, 200, "GET", "/api/v1/config", "").Body.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	be := doc["backends"].([]any)
	be[0], be[1] = be[1], be[0]
	delete(doc, "generation")
	b, _ := json.Marshal(doc)
	f.must(t, 200, "PUT", "/api/v1/config", string(b))
	if got := names("/api/v1/backends"); got != "api,web" {
		t.Fatalf("backends after the PUT: %s", got)
	}
}
