package api

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"syscall"
	"testing"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// TestWriteErrorAnswersEachKind pins writeError, the one place an error a
// handler returns becomes an answer: its status, problem type, field
// pointers (rebased into the request body when the write says where its
// object lies), that the detail of an unexpected error never reaches the
// client, which errors are logged, and the audit text of the refusal.
func TestWriteErrorAnswersEachKind(t *testing.T) {
	secret := errors.New("open /var/lib/spliced/secret-path: input/output error")
	for _, tc := range []struct {
		name   string
		err    error
		status int
		typ    string
		fields []string // errors[].field, in order
		detail string   // substring of the detail; "" checks nothing
		logged bool
	}{
		{name: "validation, pointer rebased into the body",
			err: &inObject{prefix: "/backends/2", err: &config.ValidationError{Errors: []config.FieldError{
				{Field: "/backends/2/servers/0/port", Code: "range", Message: "must be between 1 and 65535"},
				{Field: "/frontends/0/default_backend", Code: "ref", Message: "no such backend"}}}},
			status: 422, typ: "validation", fields: []string{"/servers/0/port", "/frontends/0/default_backend"},
			detail: "/servers/0/port: must be between 1 and 65535 (and 1 more)"},
		{name: "validation of the object itself points at the body's root",
			err:    &inObject{prefix: "/tuning", err: &config.ValidationError{Errors: []config.FieldError{{Field: "/tuning", Code: "x", Message: "bad"}}}},
			status: 422, typ: "validation", fields: []string{""}},
		{name: "validation without a prefix keeps document pointers",
			err:    &config.ValidationError{Errors: []config.FieldError{{Field: "/backends/2/name", Code: "x", Message: "bad"}}},
			status: 422, typ: "validation", fields: []string{"/backends/2/name"}},
		{name: "validation saying conflict",
			err:    &config.ValidationError{Conflict: true, Errors: []config.FieldError{{Field: "/frontends/1/binds/0", Code: "duplicate", Message: "address in use"}}},
			status: 409, typ: "conflict", fields: []string{"/frontends/1/binds/0"}},
		{name: "wrong JSON type",
			err:    &config.DecodeError{Field: "/maxconn", Code: config.DecodeType, Message: "must be a number"},
			status: 422, typ: "validation", fields: []string{"/maxconn"}},
		{name: "malformed body",
			err:    &config.DecodeError{Field: "/x", Code: "unknown_field", Message: "no such member"},
			status: 400, typ: "malformed-body", fields: []string{"/x"}},
		{name: "body too large",
			err:    fmt.Errorf("read request body: %w", &http.MaxBytesError{Limit: 1 << 20}),
			status: 413, typ: "body-too-large", detail: "exceeds 1048576 bytes"},
		{name: "document over what the store takes",
			err:    fmt.Errorf("commit generation 7: the request is larger than etcd accepts: %w", config.ErrTooLarge),
			status: 413, typ: "document-too-large", detail: "larger than etcd accepts"},
		{name: "store behind the node",
			err:    fmt.Errorf("%w: it holds generation 1, this node generation 7: %w", config.ErrStoreBehind, config.ErrRace),
			status: 409, typ: "store-behind", detail: "generation 1, this node generation 7"},
		{name: "precondition",
			err:    fmt.Errorf(`If-Match "a" does not match: %w`, config.ErrStale),
			status: 412, typ: "stale", detail: `If-Match "a" does not match`},
		{name: "not found",
			err:    fmt.Errorf("backend %q: %w", "web", config.ErrNotFound),
			status: 404, typ: "not-found", detail: `backend "web"`},
		{name: "conflict",
			err:    fmt.Errorf("bind taken: %w", config.ErrConflict),
			status: 409, typ: "conflict"},
		{name: "in use",
			err:    fmt.Errorf("backend still referenced: %w", config.ErrInUse),
			status: 409, typ: "in-use"},
		{name: "the API's own refusal keeps its fields",
			err: &apiError{Status: 409, Code: "in-use", Err: config.ErrInUse, Detail: "backend \"b\" is still referenced",
				Errors: []config.FieldError{{Field: "/frontends/0/default_backend", Code: "in_use", Message: "used"}}},
			status: 409, typ: "in-use", fields: []string{"/frontends/0/default_backend"}},
		{name: "apply error: nothing changed, pointer rebased, OS error shown",
			err: &inObject{prefix: "/frontends/0", err: &config.ApplyError{Field: "/frontends/0/binds/1", Object: "frontend f bind b",
				Err: syscall.EADDRINUSE}},
			status: 409, typ: "apply-failed", fields: []string{"/binds/1"}, detail: "nothing was changed: frontend f bind b: address already in use"},
		{name: "stopping",
			err:    core.ErrStopping,
			status: 503, typ: "stopping", detail: "the process is stopping", logged: true},
		{name: "storage full",
			err:    &config.StorageError{Err: fmt.Errorf("write: %w", syscall.ENOSPC)},
			status: 507, typ: "storage-full", logged: true},
		{name: "storage refused",
			err:    &config.StorageError{Err: fmt.Errorf("write: %w", syscall.EROFS)},
			status: 503, typ: "storage-unavailable", logged: true},
		{name: "apply timed out",
			err:    fmt.Errorf("apply: %w", context.DeadlineExceeded),
			status: 503, typ: "timeout", logged: true},
		{name: "the API's own 503 is not logged",
			err:    &apiError{Status: 503, Code: "not-ready", Detail: "the configuration is not loaded"},
			status: 503, typ: "not-ready", detail: "the configuration is not loaded"},
		{name: "unknown error: 500, logged, its text kept from the client",
			err:    fmt.Errorf("read audit log: %w", secret),
			status: 500, typ: "internal", detail: "internal error; see the server log", logged: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var logs bytes.Buffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			rec := &auditRec{}
			r := httptest.NewRequest("PUT", "/api/v1/backends/web", nil)
			r = r.WithContext(context.WithValue(context.WithValue(r.Context(), requestIDKey, "rid-1"), auditCtxKey{}, rec))
			w := httptest.NewRecorder()
			w.Header().Set("ETag", `"stale"`)
			writeError(w, r, log, tc.err)

			if w.Code != tc.status {
				t.Fatalf("status %d, want %d", w.Code, tc.status)
			}
			if ct := w.Header().Get("Content-Type"); ct != "application/problem+json" {
				t.Errorf("Content-Type %q", ct)
			}
			if w.Header().Get("ETag") != "" {
				t.Errorf("a problem carries the ETag %q", w.Header().Get("ETag"))
			}
			var p Problem
			if err := json.Unmarshal(w.Body.Bytes(), &p); err != nil {
				t.Fatalf("body %q: %v", w.Body, err)
			}
			if p.Status != tc.status || p.Type != "urn:spliced:problem:"+tc.typ || p.Title == "" ||
				p.Instance != "/api/v1/backends/web" || p.RequestID != "rid-1" || p.Errors == nil {
				t.Errorf("problem %+v, want status %d type %s", p, tc.status, tc.typ)
			}
			var fields []string
			for _, f := range p.Errors {
				fields = append(fields, f.Field)
			}
			if strings.Join(fields, ",") != strings.Join(tc.fields, ",") || len(fields) != len(tc.fields) {
				t.Errorf("fields %q, want %q", fields, tc.fields)
			}
			if !strings.Contains(p.Detail, tc.detail) {
				t.Errorf("detail %q, want it to contain %q", p.Detail, tc.detail)
			}
			if strings.Contains(w.Body.String(), "secret-path") {
				t.Errorf("the answer carries the internal error: %s", w.Body)
			}
			if got := strings.Contains(logs.String(), "admin request failed"); got != tc.logged {
				t.Errorf("logged %v, want %v: %q", got, tc.logged, logs.String())
			}
			if tc.logged && !strings.Contains(logs.String(), "rid-1") {
				t.Errorf("the log line does not name the request: %q", logs.String())
			}
			if want := p.Type + ": " + p.Detail; rec.errTxt != want {
				t.Errorf("audit text %q, want %q", rec.errTxt, want)
			}
		})
	}
}

// TestHandleAnswersTheReturnedError pins the adapter: a handler's error is
// answered once, with the headers the handler set before failing; a handler
// that answers returns nil and nothing is added.
func TestHandleAnswersTheReturnedError(t *testing.T) {
	s := &server{log: slog.New(slog.DiscardHandler)}
	failing := s.handle(func(w http.ResponseWriter, r *http.Request) error {
		w.Header().Set("Retry-After", "5")
		return &apiError{Status: http.StatusTooManyRequests, Code: "too-many-streams", Detail: "too many"}
	})
	w := httptest.NewRecorder()
	failing(w, httptest.NewRequest("GET", "/api/v1/events", nil))
	if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") != "5" ||
		!strings.Contains(w.Body.String(), "urn:spliced:problem:too-many-streams") {
		t.Fatalf("got %d %v %s", w.Code, w.Header(), w.Body)
	}
	ok := s.handle(func(w http.ResponseWriter, r *http.Request) error {
		return writeValue(w, http.StatusOK, Health{Status: "ok"})
	})
	w = httptest.NewRecorder()
	ok(w, httptest.NewRequest("GET", "/healthz", nil))
	if w.Code != http.StatusOK || w.Body.String() != "{\"status\":\"ok\"}\n" {
		t.Fatalf("got %d %q", w.Code, w.Body)
	}
}

// TestWriteErrorLogRedactsThePath: the log line of a failed request names
// its path as every other log line does, with a secret pasted into it
// redacted (a write to /api/v1/backends/<token> while the process stops).
func TestWriteErrorLogRedactsThePath(t *testing.T) {
	secret := "spliced_" + strings.Repeat("Ab9_", 10)
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	r := httptest.NewRequest("PUT", "/api/v1/backends/"+secret, nil)
	writeError(httptest.NewRecorder(), r, log, core.ErrStopping)
	if !strings.Contains(logs.String(), "admin request failed") {
		t.Fatalf("not logged: %q", logs.String())
	}
	if strings.Contains(logs.String(), secret[8:]) || !strings.Contains(logs.String(), "/api/v1/backends/"+redacted) {
		t.Errorf("the log line holds the secret of the path or no path: %q", logs.String())
	}
}
