package api

import (
	"slices"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// TestHTTPVersionsAndH2RoundTrip: a frontend's http.versions and http.h2
// come back from GET with their defaults filled, a merge patch changes one
// member and keeps the others, the change is in place (no rebind), and
// each bad value is a 422 whose pointer lands on it in the request body.
func TestHTTPVersionsAndH2RoundTrip(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	fe := decodeJSON[config.Frontend](t, f.must(t, 200, "GET", "/api/v1/frontends/public", ""))
	def := config.FrontendH2{MaxConcurrentStreams: 100, InitialWindowSize: 65535, MaxFrameSize: 16384, MaxHeaderListSize: 16384}
	if fe.HTTP == nil || !slices.Equal(fe.HTTP.Versions, []string{"1.1", "2"}) || fe.HTTP.H2 != def {
		t.Fatalf("defaults: %+v", fe.HTTP)
	}

	w := f.must(t, 200, "PATCH", "/api/v1/frontends/public", `{"http":{"versions":["1.1"],"h2":{"max_concurrent_streams":50}}}`)
	a := decodeJSON[writeAnswer](t, w)
	if len(a.Plan.Items) != 1 || a.Plan.Items[0].Object != "frontend/public" || a.Plan.Items[0].Apply != config.ApplyInPlace ||
		!slices.Equal(a.Plan.Items[0].Fields, []string{"http"}) {
		t.Fatalf("plan %+v, want frontend/public in_place on http", a.Plan)
	}
	fe = decodeJSON[config.Frontend](t, f.must(t, 200, "GET", "/api/v1/frontends/public", ""))
	want := def
	want.MaxConcurrentStreams = 50
	if !slices.Equal(fe.HTTP.Versions, []string{"1.1"}) || fe.HTTP.H2 != want || !fe.HTTP.ForwardFor() {
		t.Fatalf("after patch: %+v", fe.HTTP)
	}
	if got := f.core.Last(); got == nil || !slices.Equal(got.Frontends[0].HTTP.Versions, []string{"1.1"}) {
		t.Fatal("the change was not applied to the core")
	}
	// null gives a member its default back.
	f.must(t, 200, "PATCH", "/api/v1/frontends/public", `{"http":{"versions":null,"h2":{"max_concurrent_streams":null}}}`)
	fe = decodeJSON[config.Frontend](t, f.must(t, 200, "GET", "/api/v1/frontends/public", ""))
	if !slices.Equal(fe.HTTP.Versions, []string{"1.1", "2"}) || fe.HTTP.H2 != def {
		t.Fatalf("after null: %+v", fe.HTTP)
	}

	for _, tt := range []struct {
		body string
		want []config.FieldError // field and code only
	}{
		{`{"http":{"versions":[]}}`, []config.FieldError{{Field: "/http/versions", Code: config.CodeRequired}}},
		{`{"http":{"versions":["1.1","3","1.1"]}}`, []config.FieldError{
			{Field: "/http/versions/1", Code: config.CodeOneOf}, {Field: "/http/versions/2", Code: config.CodeDuplicate}}},
		{`{"http":{"h2":{"max_concurrent_streams":1001,"initial_window_size":1000,"max_frame_size":16383,"max_header_list_size":2000000}}}`,
			[]config.FieldError{
				{Field: "/http/h2/initial_window_size", Code: config.CodeOutOfRange},
				{Field: "/http/h2/max_concurrent_streams", Code: config.CodeOutOfRange},
				{Field: "/http/h2/max_frame_size", Code: config.CodeOutOfRange},
				{Field: "/http/h2/max_header_list_size", Code: config.CodeOutOfRange}}},
		{`{"http":{"versions":"2"}}`, nil}, // not a list: 422 type error from the decoder
	} {
		w := f.must(t, 422, "PATCH", "/api/v1/frontends/public", tt.body)
		p := problemOf(t, w)
		if tt.want == nil {
			continue
		}
		var got []config.FieldError
		for _, e := range p.Errors {
			got = append(got, config.FieldError{Field: e.Field, Code: e.Code})
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("PATCH %s: errors %+v, want %+v", tt.body, p.Errors, tt.want)
		}
	}
	if g := decodeJSON[config.Config](t, f.must(t, 200, "GET", "/api/v1/config", "")).Generation; g != 4 {
		t.Fatalf("generation %d after refused writes, want 4", g)
	}
}

// TestConfigSchemaIsSetBySpliced: the document's schema is the current
// one whatever a client sends (as generation), so a client's PUT is never
// taken for an older document to migrate.
func TestConfigSchemaIsSetBySpliced(t *testing.T) {
	f := newFixture(t)
	if c := decodeJSON[config.Config](t, f.must(t, 200, "GET", "/api/v1/config", "")); c.Schema != config.SchemaVersion {
		t.Fatalf("schema %d, want %d", c.Schema, config.SchemaVersion)
	}
	for _, doc := range []string{`{"schema":0,"backends":[{"name":"a","servers":[]}]}`, `{"schema":99,"backends":[{"name":"b","servers":[]}]}`} {
		f.must(t, 200, "PUT", "/api/v1/config", doc)
		if c := decodeJSON[config.Config](t, f.must(t, 200, "GET", "/api/v1/config", "")); c.Schema != config.SchemaVersion {
			t.Fatalf("after PUT %s: schema %d, want %d", doc, c.Schema, config.SchemaVersion)
		}
	}
}
