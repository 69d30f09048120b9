package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strings"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// Problem is an RFC 9457 problem document, the body of every error answer
// (Content-Type application/problem+json).
type Problem struct {
	// Type identifies the kind of problem (a stable URN, not dereferenceable).
	Type   string `json:"type" example:"urn:spliced:problem:validation"`
	Title  string `json:"title" example:"Validation failed"`
	Status int    `json:"status" example:"422"`
	Detail string `json:"detail,omitempty" example:"/servers/0/port: must be between 1 and 65535"`
	// Instance is the request path.
	Instance string `json:"instance,omitempty" example:"/api/v1/backends/web/servers"`
	// RequestID repeats the X-Request-Id of the exchange.
	RequestID string `json:"request_id,omitempty"`
	// Errors lists every problem with a field; Field is a JSON pointer into
	// the request body (or into the whole config document, GET
	// /api/v1/config, for problems outside the submitted object).
	Errors []config.FieldError `json:"errors"`
}

// apiError is an error the api package itself decides the status of (wrong
// media type, name mismatch, bad query parameter, resource still referenced).
type apiError struct {
	Status int
	Code   string // problem type slug
	Detail string
	Errors []config.FieldError
	Err    error // optional sentinel it stands for (config.ErrInUse...)
}

func (e *apiError) Error() string {
	if e.Detail != "" {
		return e.Detail
	}
	return http.StatusText(e.Status)
}

func (e *apiError) Unwrap() error { return e.Err }

// inObject carries, with an error of a write, the JSON pointer in the whole
// config document of the object the request body stands for ("/backends/2"):
// problemFor rewrites field pointers under it to point into the request body.
type inObject struct {
	prefix string
	err    error
}

func (e *inObject) Error() string { return e.err.Error() }
func (e *inObject) Unwrap() error { return e.err }

// problemFor is the one place where errors become HTTP problems.
func problemFor(err error) Problem {
	var prefix string
	if o := (*inObject)(nil); errors.As(err, &o) {
		prefix = o.prefix
	}
	var (
		ae *apiError
		de *config.DecodeError
		ve *config.ValidationError
		xe *config.ApplyError
		me *http.MaxBytesError
		se *config.StorageError
	)
	p := Problem{Errors: []config.FieldError{}}
	switch {
	case errors.As(err, &ae):
		p.Status, p.Type, p.Detail = ae.Status, ae.Code, ae.Detail
		p.Errors = append(p.Errors, ae.Errors...)
	case errors.As(err, &me):
		p.Status, p.Type = http.StatusRequestEntityTooLarge, "body-too-large"
		p.Detail = fmt.Sprintf("the request body exceeds %d bytes", me.Limit)
	case errors.As(err, &de):
		// Not JSON, or JSON with a member the type does not have: 400. A
		// value of the wrong type for its field: 422, like any other value
		// the document may not hold.
		p.Status, p.Type = http.StatusBadRequest, "malformed-body"
		if de.Code == config.DecodeType {
			p.Status, p.Type = http.StatusUnprocessableEntity, "validation"
		}
		p.Detail = de.Error()
		p.Errors = append(p.Errors, config.FieldError{Field: de.Field, Code: de.Code, Message: de.Message})
	case errors.As(err, &xe):
		// The data plane refused the snapshot; the store rolled back, so the
		// answer says nothing changed and carries the OS error text.
		p.Status, p.Type = http.StatusConflict, "apply-failed"
		p.Detail = "the data plane refused the change, nothing was changed: " + xe.Error()
		p.Errors = append(p.Errors, config.FieldError{Field: rebase(xe.Field, prefix), Code: "apply_failed", Message: xe.Err.Error()})
	case errors.As(err, &ve):
		p.Status, p.Type = http.StatusUnprocessableEntity, "validation"
		if ve.Conflict {
			p.Status, p.Type = http.StatusConflict, "conflict"
		}
		p.Detail = ve.Error()
		for _, f := range ve.Errors {
			f.Field = rebase(f.Field, prefix)
			p.Errors = append(p.Errors, f)
		}
		if len(p.Errors) > 0 {
			p.Detail = fieldSummary(p.Errors)
		}
	case errors.As(err, &se):
		// The state directory refused the write (full, read-only, I/O
		// error); nothing changed. The OS error is the operator's clue:
		// 507 when space or quota ran out, 503 (not ready) otherwise.
		p.Status, p.Type = http.StatusServiceUnavailable, "storage-unavailable"
		if se.Full() {
			p.Status, p.Type = http.StatusInsufficientStorage, "storage-full"
		}
		p.Detail = "the change could not be saved, nothing was changed: " + se.Error()
	case errors.Is(err, config.ErrUnavailable):
		// The cluster store (etcd) cannot be reached or has no quorum: the
		// node keeps running what it runs; a write may be sent again later.
		p.Status, p.Type = http.StatusServiceUnavailable, "store-unavailable"
		p.Detail = "the configuration store cannot be reached; the change was not committed (or, if the store " +
			"stopped answering during the commit, not confirmed: read it back before sending it again): " + err.Error()
	case errors.Is(err, config.ErrTooLarge):
		// The document, even compressed, is over what the cluster store
		// takes in one request (etcd's --max-request-bytes).
		p.Status, p.Type = http.StatusRequestEntityTooLarge, "document-too-large"
		p.Detail = "the configuration store refuses a document this large; nothing was changed: " + err.Error()
	case errors.Is(err, config.ErrStoreBehind):
		// etcd went back (restored, cleared) behind what the nodes run.
		p.Status, p.Type = http.StatusConflict, "store-behind"
		p.Detail = err.Error() + "; to make this node's generation the store's again, POST " + reseedPath +
			" (?dry_run=true says what it would do)"
	case errors.Is(err, config.ErrNotBehind):
		p.Status, p.Type, p.Detail = http.StatusConflict, "store-not-behind", err.Error()
	case errors.Is(err, config.ErrRace):
		// Other nodes kept committing between this write's reads and its
		// commit, through every retry of the store.
		p.Status, p.Type = http.StatusConflict, "write-race"
		p.Detail = "other writes kept committing first; nothing was changed, send the write again: " + err.Error()
	case errors.Is(err, config.ErrNotFound):
		p.Status, p.Type, p.Detail = http.StatusNotFound, "not-found", err.Error()
	case errors.Is(err, config.ErrInUse):
		p.Status, p.Type, p.Detail = http.StatusConflict, "in-use", err.Error()
	case errors.Is(err, config.ErrConflict):
		p.Status, p.Type, p.Detail = http.StatusConflict, "conflict", err.Error()
	case errors.Is(err, config.ErrStale):
		p.Status, p.Type, p.Detail = http.StatusPreconditionFailed, "stale", err.Error()
	case errors.Is(err, config.ErrInvalid):
		p.Status, p.Type, p.Detail = http.StatusUnprocessableEntity, "validation", err.Error()
	case errors.Is(err, core.ErrStopping):
		p.Status, p.Type = http.StatusServiceUnavailable, "stopping"
		p.Detail = "the process is stopping: nothing was changed"
	case errors.Is(err, context.DeadlineExceeded):
		p.Status, p.Type = http.StatusServiceUnavailable, "timeout"
		p.Detail = "the change was not applied in time and was rolled back: " + err.Error()
	default:
		p.Status, p.Type, p.Detail = http.StatusInternalServerError, "internal", "internal error; see the server log"
	}
	p.Title = title(p.Status)
	p.Type = "urn:spliced:problem:" + p.Type
	return p
}

func title(status int) string {
	switch status {
	case http.StatusBadRequest:
		return "Malformed request"
	case http.StatusUnprocessableEntity:
		return "Validation failed"
	case http.StatusServiceUnavailable:
		return "Not ready"
	case http.StatusInternalServerError:
		return "Internal error"
	}
	return http.StatusText(status)
}

// rebase turns a pointer into the whole config document into a pointer into
// the request body when it lies under prefix.
func rebase(field, prefix string) string {
	if prefix == "" {
		return field
	}
	if field == prefix {
		return ""
	}
	if strings.HasPrefix(field, prefix+"/") {
		return field[len(prefix):]
	}
	return field
}

func fieldSummary(errs []config.FieldError) string {
	f := errs[0]
	s := f.Message
	if f.Field != "" {
		s = f.Field + ": " + s
	}
	if len(errs) > 1 {
		s += fmt.Sprintf(" (and %d more)", len(errs)-1)
	}
	return s
}

// handlerFunc is an API handler, as Caddy's AdminHandler: it either writes
// its whole answer and returns nil, or writes no body and returns the error,
// which handle answers. Headers it set before failing (Retry-After, Allow)
// go out with the problem.
type handlerFunc func(w http.ResponseWriter, r *http.Request) error

// handle adapts h to the router: the error h returns is answered by
// writeError.
func (s *server) handle(h handlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if err := s.checkQuery(r); err != nil { // query.go
			writeError(w, r, s.log, err)
			return
		}
		if err := h(w, r); err != nil {
			writeError(w, r, s.log, err)
		}
	}
}

// writeError answers err as a problem (problemFor), audits the refusal
// (writeProblem) and logs what the client does not see: a 5xx whose cause
// is not an *apiError, i.e. not a refusal the API decided and explained in
// the detail (a not-ready /readyz, too many scrapes), is logged with the
// error, whose text the answer does not carry.
func writeError(w http.ResponseWriter, r *http.Request, log *slog.Logger, err error) {
	p := problemFor(err)
	if ae := (*apiError)(nil); p.Status >= 500 && !errors.As(err, &ae) {
		log.LogAttrs(r.Context(), slog.LevelError, "admin request failed",
			slog.String("method", r.Method), slog.String("path", redactPath(r.URL.EscapedPath())),
			slog.String("request_id", requestID(r.Context())), slog.Any("err", err))
	}
	writeProblem(w, r, p)
}

func writeProblem(w http.ResponseWriter, r *http.Request, p Problem) {
	p.Instance = r.URL.Path
	p.RequestID = requestID(r.Context())
	auditProblem(r, &p)
	b, err := json.Marshal(p)
	if err != nil {
		b = []byte(`{"type":"urn:spliced:problem:internal","title":"Internal error","status":500,"errors":[]}`)
		p.Status = http.StatusInternalServerError
	}
	h := w.Header()
	h.Set("Content-Type", "application/problem+json")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Del("ETag")
	w.WriteHeader(p.Status)
	_, _ = w.Write(append(b, '\n'))
}
