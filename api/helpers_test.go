package api

import (
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
)

// fixture is an API over a store in a temp dir and a coretest.Nop.
type fixture struct {
	h     http.Handler
	store *config.Store
	core  *coretest.Nop
}

func newFixture(t testing.TB) *fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir())
}

// newFixtureIn keeps the store in dir (fuzz targets need a directory that
// outlives one input).
func newFixtureIn(t testing.TB, dir string) *fixture {
	t.Helper()
	log := slog.New(slog.DiscardHandler)
	st, err := config.Open(dir, "", log)
	if err != nil {
		t.Fatalf("open store: %v", err)
	}
	t.Cleanup(func() { _ = st.Storage().Close() }) // a snapshot may be written after the last change
	nop := &coretest.Nop{}
	if err := nop.Apply(t.Context(), st.Current()); err != nil {
		t.Fatal(err)
	}
	h := New(Options{Store: st, Core: nop, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}}) // httptest.NewRequest's Host
	return &fixture{h: h, store: st, core: nop}
}

type hdr map[string]string

// do sends one request; a body is sent as application/json unless hdr
// names another Content-Type.
func (f *fixture) do(method, path, body string, h ...hdr) *httptest.ResponseRecorder {
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req := httptest.NewRequest(method, path, rd)
	if body != "" {
		req.Header.Set("Content-Type", "application/json")
	}
	for _, m := range h {
		for k, v := range m {
			if v == "" {
				req.Header.Del(k)
			} else {
				req.Header.Set(k, v)
			}
		}
	}
	w := httptest.NewRecorder()
	f.h.ServeHTTP(w, req)
	return w
}

// must sends a request and fails the test unless the status is want.
func (f *fixture) must(t testing.TB, want int, method, path, body string, h ...hdr) *httptest.ResponseRecorder {
	t.Helper()
	w := f.do(method, path, body, h...)
	if w.Code != want {
		t.Fatalf("%s %s: status %d, want %d; body: %s", method, path, w.Code, want, w.Body.String())
	}
	return w
}

func decodeJSON[T any](t testing.TB, w *httptest.ResponseRecorder) T {
	t.Helper()
	var v T
	if err := json.Unmarshal(w.Body.Bytes(), &v); err != nil {
		t.Fatalf("decode %q: %v", w.Body.String(), err)
	}
	return v
}

func problemOf(t testing.TB, w *httptest.ResponseRecorder) Problem {
	t.Helper()
	if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
		t.Fatalf("Content-Type %q, want application/problem+json; body %s", ct, w.Body.String())
	}
	p := decodeJSON[Problem](t, w)
	if p.Status != w.Code || p.Type == "" || p.Title == "" || p.Errors == nil {
		t.Fatalf("incomplete problem for status %d: %+v", w.Code, p)
	}
	return p
}

// writeAnswer is WriteResult with the result kept raw.
type writeAnswer struct {
	DryRun     bool            `json:"dry_run"`
	Generation int64           `json:"generation"`
	Plan       config.Plan     `json:"plan"`
	Result     json.RawMessage `json:"result"`
}

const (
	backendWeb = `{"name":"web","mode":"http","balance":"roundrobin",
		"servers":[{"name":"s1","address":"127.0.0.1","port":8081,"weight":100}]}`
	frontendPublic = `{"name":"public","mode":"http","default_backend":"web",
		"binds":[{"name":"b1","address":"127.0.0.1","port":8080}]}`
)

// seed creates backend web (server s1) and frontend public (bind b1).
func (f *fixture) seed(t testing.TB) {
	t.Helper()
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends", backendWeb)
	f.must(t, http.StatusCreated, "POST", "/api/v1/frontends", frontendPublic)
}

// snapshot is the current document as GET /api/v1/config answers it.
func (f *fixture) snapshot(t testing.TB) string {
	t.Helper()
	return f.must(t, http.StatusOK, "GET", "/api/v1/config", "").Body.String()
}
