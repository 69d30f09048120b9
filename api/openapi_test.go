package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/go-chi/chi/v5"

	"github.com/spliced-proxy/spliced/openapi"
)

// TestEveryRouteIsInTheOpenAPIDocument walks the router and checks that the
// committed document describes each method and path (so a handler added
// without swag annotations, or a stale document, fails here too).
func TestEveryRouteIsInTheOpenAPIDocument(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	f := newFixture(t)
	mux := f.h.(*chi.Mux)
	undocumented := map[string]bool{ // static pages, not API operations
		"/": true, "/docs": true, "/docs/*": true, "/ui": true, "/ui/*": true,
	}
	n := 0
	err := chi.Walk(mux, func(method, route string, _ http.Handler, _ ...func(http.Handler) http.Handler) error {
		if undocumented[route] {
			return nil
		}
		n++
		ops, ok := doc.Paths[route]
		if !ok {
			t.Errorf("%s %s: path missing from openapi.json", method, route)
			return nil
		}
		if _, ok := ops[strings.ToLower(method)]; !ok {
			t.Errorf("%s %s: method missing from openapi.json", method, route)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if n < 40 {
		t.Fatalf("walked only %d routes", n)
	}
}
