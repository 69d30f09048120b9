package api

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/go-chi/chi/v5"

	"github.com/spliced-proxy/spliced/internal/redact"
)

// queryParams are the query parameters each operation takes, by "METHOD
// /path/{pattern}" as chi routes it: those its annotations declare in the
// OpenAPI document (the one place they are written), and on every write
// dry_run and wait_ms (the document's description: every write takes
// them).
type queryParams map[string][]string

// newQueryParams reads them from the OpenAPI document spec.
func newQueryParams(spec []byte) queryParams {
	var doc struct {
		Paths map[string]map[string]struct {
			Parameters []struct{ Name, In string } `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(spec, &doc); err != nil {
		panic("api: the embedded OpenAPI document does not parse: " + err.Error())
	}
	qp := make(queryParams)
	for path, ops := range doc.Paths {
		for method, op := range ops {
			method = strings.ToUpper(method)
			var names []string
			switch method {
			case http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete:
				names = append(names, "dry_run", "wait_ms")
			}
			for _, p := range op.Parameters {
				if p.In == "query" && !slices.Contains(names, p.Name) {
					names = append(names, p.Name)
				}
			}
			slices.Sort(names)
			qp[method+" "+path] = names
		}
	}
	return qp
}

// checkQuery refuses, with a 400 bad-query problem, a query string the
// operation r is routed to would otherwise read loosely: a malformed one
// (a bad %-escape, a ';'), a parameter given twice (url.Values.Get takes
// the first: ?dry_run=false&dry_run=true applied the change), and a
// parameter the operation does not take (?stauts=5xx answered everything).
// A JSON body's repeated member is a 400 too (decode.go). Paths no
// operation serves (404, 405) are left to their answer.
func (s *server) checkQuery(r *http.Request) error {
	if r.URL.RawQuery == "" {
		return nil
	}
	method := r.Method
	if method == http.MethodHead {
		method = http.MethodGet
	}
	rc := chi.RouteContext(r.Context())
	if rc == nil {
		return nil
	}
	takes, known := s.queries[method+" "+rc.RoutePattern()]
	if !known {
		return nil
	}
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return &apiError{Status: http.StatusBadRequest, Code: "bad-query",
			Detail: "the query string is malformed: " + shown(err.Error(), 120)}
	}
	names := make([]string, 0, len(q))
	for name := range q {
		names = append(names, name)
	}
	slices.Sort(names) // the same answer for the same query
	for _, name := range names {
		if !slices.Contains(takes, name) {
			takes := strings.Join(takes, ", ")
			if takes == "" {
				takes = "none"
			}
			return &apiError{Status: http.StatusBadRequest, Code: "bad-query",
				Detail: fmt.Sprintf("unknown query parameter %q: this operation takes %s", shown(name, 40), takes)}
		}
		if n := len(q[name]); n > 1 {
			return &apiError{Status: http.StatusBadRequest, Code: "bad-query",
				Detail: fmt.Sprintf("query parameter %q is given %d times: give it once", name, n)}
		}
	}
	return nil
}

// shown is text of the client's as a detail quotes it: a secret in it
// (a token pasted as a parameter's name) replaced, then cut at n bytes.
func shown(text string, n int) string {
	return truncate(redact.SecretLike.ReplaceAllString(text, redact.Redacted), n)
}
