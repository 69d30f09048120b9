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

// TestOpenAPITagsMatchTheOperations checks that each tag an operation uses
// is declared with a description and that each declared tag is used, and
// that the document promises no 501: no route answers it (the placeholder
// text of the first releases outlived the routes it described).
func TestOpenAPITagsMatchTheOperations(t *testing.T) {
	var doc struct {
		Paths map[string]map[string]struct {
			Tags []string `json:"tags"`
		} `json:"paths"`
		Tags []struct {
			Name        string `json:"name"`
			Description string `json:"description"`
		} `json:"tags"`
	}
	if err := json.Unmarshal(openapi.JSON(), &doc); err != nil {
		t.Fatal(err)
	}
	used := map[string]bool{}
	for path, ops := range doc.Paths {
		for method, op := range ops {
			if len(op.Tags) == 0 {
				t.Errorf("%s %s has no tag", method, path)
			}
			for _, tag := range op.Tags {
				used[tag] = true
			}
		}
	}
	declared := map[string]bool{}
	for _, tag := range doc.Tags {
		declared[tag.Name] = true
		if tag.Description == "" {
			t.Errorf("tag %q has no description", tag.Name)
		}
		if !used[tag.Name] {
			t.Errorf("tag %q is declared but no operation uses it", tag.Name)
		}
	}
	for tag := range used {
		if !declared[tag] {
			t.Errorf("tag %q is used but not declared in api/openapi.go", tag)
		}
	}
	if s := string(openapi.JSON()); strings.Contains(s, "501") || strings.Contains(strings.ToLower(s), "not implemented") {
		t.Errorf("the document says an operation answers 501; none does")
	}
}
