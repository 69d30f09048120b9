package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// bigConfig is the configuration of issue 13: 1 000 frontends, 3 000
// backends, 9 000 servers.
func bigConfig(t testing.TB) *config.Config {
	t.Helper()
	var sb strings.Builder
	sb.WriteString(`{"frontends":[`)
	for i := range 1000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"fe%d","mode":"http","default_backend":"be%d","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, i, i, 20000+i)
	}
	sb.WriteString(`],"backends":[`)
	for i := range 3000 {
		if i > 0 {
			sb.WriteByte(',')
		}
		fmt.Fprintf(&sb, `{"name":"be%d","mode":"http","balance":"roundrobin","servers":[`, i)
		for j := range 3 {
			if j > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"name":"s%d","address":"10.%d.%d.%d","port":8080,"weight":100}`, j, i>>8&255, i&255, j+1)
		}
		sb.WriteString(`]}`)
	}
	sb.WriteString(`]}`)
	var c config.Config
	if err := config.DecodeBytes([]byte(sb.String()), &c); err != nil {
		t.Fatal(err)
	}
	return &c
}

// install makes c the running configuration without going through the
// API (whose body limit is what is tested).
func (f *fixture) install(t testing.TB, c *config.Config) {
	t.Helper()
	_, err := f.store.Update(context.Background(), func(cur *config.Config) error {
		g := cur.Generation
		*cur = *c
		cur.Generation = g
		return nil
	}, config.UpdateOptions{Apply: f.core.Apply})
	if err != nil {
		t.Fatal(err)
	}
}

// A document GET /api/v1/config gives can be sent back with PUT, however
// large: the limit of PUT /api/v1/config is the larger of --admin-max-body
// and three times the current document (it was 1 MiB, less than the 1.67 MB
// document of issue 13: 413). Beyond it, and for the other requests beyond
// --admin-max-body, 413.
func TestPutConfigTakesBackTheDocumentGetGives(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("13 000 objects")
	}
	f := newFixture(t)
	f.install(t, bigConfig(t))
	doc := f.must(t, http.StatusOK, "GET", "/api/v1/config", "").Body.String()
	if len(doc) <= MaxBodyBytes {
		t.Fatalf("the document is %d bytes, not over the %d-byte default limit", len(doc), MaxBodyBytes)
	}
	t.Logf("document: %d bytes", len(doc))
	f.must(t, http.StatusOK, "PUT", "/api/v1/config", doc)

	// Indented (as jq or an editor writes it) it is still taken.
	var pretty bytes.Buffer
	if err := json.Indent(&pretty, []byte(doc), "", "  "); err != nil {
		t.Fatal(err)
	}
	t.Logf("indented: %d bytes (%.2fx)", pretty.Len(), float64(pretty.Len())/float64(len(doc)))
	f.must(t, http.StatusOK, "PUT", "/api/v1/config", pretty.String())

	// Indented with 4 spaces, too.
	pretty.Reset()
	if err := json.Indent(&pretty, []byte(doc), "", "    "); err != nil {
		t.Fatal(err)
	}
	t.Logf("indented by 4: %d bytes (%.2fx)", pretty.Len(), float64(pretty.Len())/float64(len(doc)))
	f.must(t, http.StatusOK, "PUT", "/api/v1/config", pretty.String())

	// Over three times the document: 413, with or without Content-Length.
	over := doc[:len(doc)-1] + strings.Repeat(" ", 2*len(doc)+2) + "}"
	for _, chunked := range []bool{false, true} {
		req := httptest.NewRequest("PUT", "/api/v1/config", strings.NewReader(over))
		req.Header.Set("Content-Type", "application/json")
		if chunked {
			req.ContentLength = -1
		}
		w := httptest.NewRecorder()
		f.h.ServeHTTP(w, req)
		if w.Code != http.StatusRequestEntityTooLarge {
			t.Fatalf("PUT of %d bytes (chunked %v): %d, want 413", len(over), chunked, w.Code)
		}
		if p := problemOf(t, w); p.Type != "urn:spliced:problem:body-too-large" && !strings.HasSuffix(p.Type, "body-too-large") {
			t.Fatalf("problem type %q", p.Type)
		}
	}
	// Other requests keep --admin-max-body.
	big := `{"name":"x","servers":[],"mode":"http"` + strings.Repeat(" ", MaxBodyBytes) + `}`
	if w := f.do("POST", "/api/v1/backends", big); w.Code != http.StatusRequestEntityTooLarge {
		t.Fatalf("POST of %d bytes: %d, want 413", len(big), w.Code)
	}
}
