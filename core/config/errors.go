package config

import (
	"errors"
	"fmt"
)

// Sentinel errors of the core. The api package maps them to HTTP problems in
// exactly one place; everything else wraps them with %w.
var (
	ErrNotFound = errors.New("not found")          // 404
	ErrConflict = errors.New("conflict")           // 409: name taken, OS refused a bind or pin
	ErrInUse    = errors.New("still referenced")   // 409
	ErrStale    = errors.New("stale precondition") // 412
	ErrInvalid  = errors.New("invalid")            // 422
	ErrCorrupt  = errors.New("corrupt state")      // refuses start
)

// FieldError is one problem with one field of a document. Field is a JSON
// pointer (RFC 6901) into the request body, e.g. "/servers/1/port".
type FieldError struct {
	Field   string `json:"field"`
	Code    string `json:"code"`
	Message string `json:"message"`
}

// ValidationError lists every problem found in a document. It unwraps to
// ErrInvalid (422) unless Conflict is set (409, e.g. a name already taken).
type ValidationError struct {
	Errors   []FieldError
	Conflict bool
}

func (e *ValidationError) Error() string {
	if len(e.Errors) == 0 {
		return "invalid configuration"
	}
	f := e.Errors[0]
	if len(e.Errors) == 1 {
		return fmt.Sprintf("%s: %s", f.Field, f.Message)
	}
	return fmt.Sprintf("%s: %s (and %d more)", f.Field, f.Message, len(e.Errors)-1)
}

func (e *ValidationError) Unwrap() error {
	if e.Conflict {
		return ErrConflict
	}
	return ErrInvalid
}

// ApplyError is returned by the data plane when the OS refused part of a
// snapshot (EADDRINUSE on a bind, EPERM on a pin). Field points at the object
// in the whole config document ("/frontends/0/binds/1"). It unwraps to
// ErrConflict and to the OS error.
type ApplyError struct {
	Field  string
	Object string // e.g. "frontend public bind b1"
	Err    error
}

func (e *ApplyError) Error() string { return e.Object + ": " + e.Err.Error() }

// Unwrap lets errors.Is match both ErrConflict and the OS errno.
func (e *ApplyError) Unwrap() []error { return []error{ErrConflict, e.Err} }
