package api

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"mime"
	"net/http"
	"runtime/debug"
	"strings"
	"time"
)

type ctxKey int

const requestIDKey ctxKey = 0

// requestID returns the id the requestIDs middleware put in ctx.
func requestID(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// requestIDs takes the client's X-Request-Id when it is short and made of
// safe characters (it ends up in logs and in the audit trail), else
// makes one, and echoes it in the answer.
func requestIDs(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := r.Header.Get("X-Request-Id")
		if !safeRequestID(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		w.Header().Set("X-Request-Id", id)
		next.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), requestIDKey, id)))
	})
}

func safeRequestID(id string) bool {
	if id == "" || len(id) > 64 {
		return false
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// statusWriter records the status and size of an answer for the access log
// and tells the recoverer whether the header is already out. Unwrap keeps
// http.ResponseController (flush for server-sent events) working.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int64
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += int64(n)
	return n, err
}

func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// accessLog writes one slog line per admin request. The path is logged
// without the query, and redacted (redactURI): no secret reaches the log.
func accessLog(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			start := time.Now()
			sw := &statusWriter{ResponseWriter: w}
			defer func() {
				st := sw.status
				if st == 0 {
					st = http.StatusOK
				}
				log.LogAttrs(r.Context(), slog.LevelInfo, "admin request",
					slog.String("method", r.Method),
					slog.String("path", redactPath(r.URL.EscapedPath())),
					slog.Int("status", st),
					slog.Duration("duration", time.Since(start)),
					slog.Int64("bytes", sw.bytes),
					slog.String("request_id", requestID(r.Context())),
					slog.String("remote", r.RemoteAddr))
			}()
			next.ServeHTTP(sw, r)
		})
	}
}

// recoverer turns a panic in a handler into a logged 500 problem, so a bug
// costs one request, not the admin server. http.ErrAbortHandler keeps its
// meaning (abort the connection quietly).
func recoverer(log *slog.Logger) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			defer func() {
				v := recover()
				if v == nil {
					return
				}
				if v == http.ErrAbortHandler {
					panic(v)
				}
				log.LogAttrs(r.Context(), slog.LevelError, "admin handler panicked",
					slog.String("method", r.Method), slog.String("path", redactPath(r.URL.EscapedPath())),
					slog.String("request_id", requestID(r.Context())),
					slog.String("panic", fmt.Sprint(v)), slog.String("stack", string(debug.Stack())))
				if sw, ok := w.(*statusWriter); ok && sw.status != 0 {
					return // the answer has started; nothing sane can follow
				}
				// Logged above with the stack: answered as the API's own 500.
				writeError(w, r, log, &apiError{Status: http.StatusInternalServerError, Code: "internal",
					Detail: "internal error; see the server log"})
			}()
			next.ServeHTTP(w, r)
		})
	}
}

// maxBody refuses bodies over limitFor(r) bytes with 413: at once when
// Content-Length says so, else when the handler reads past the limit
// (http.MaxBytesError, mapped in problemFor).
func maxBody(log *slog.Logger, limitFor func(r *http.Request) int64) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			limit := limitFor(r)
			if r.ContentLength > limit {
				writeError(w, r, log, &http.MaxBytesError{Limit: limit})
				return
			}
			r.Body = http.MaxBytesReader(w, r.Body, limit)
			next.ServeHTTP(w, r)
		})
	}
}

// mediaTypes refuses, with 415, a request body whose Content-Type is not one
// allowed for its method. Requests without a body pass (handlers that need
// one answer 400). A charset parameter other than utf-8 is refused too:
// JSON is UTF-8 (RFC 8259).
func mediaTypes(log *slog.Logger, allowed map[string][]string) func(http.Handler) http.Handler {
	return func(next http.Handler) http.Handler {
		return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			types, checked := allowed[r.Method]
			if !checked || r.ContentLength == 0 {
				next.ServeHTTP(w, r)
				return
			}
			ct := r.Header.Get("Content-Type")
			mt, params, err := mime.ParseMediaType(ct)
			ok := err == nil
			if ok {
				cs, has := params["charset"]
				ok = !has || strings.EqualFold(cs, "utf-8")
			}
			if ok {
				ok = false
				for _, t := range types {
					if mt == t {
						ok = true
						break
					}
				}
			}
			if !ok {
				if ct == "" {
					ct = "none"
				}
				writeError(w, r, log, &apiError{
					Status: http.StatusUnsupportedMediaType, Code: "unsupported-media-type",
					Detail: fmt.Sprintf("Content-Type %s is not accepted for %s; use %s", truncate(ct, 80), r.Method, strings.Join(types, " or ")),
				})
				return
			}
			next.ServeHTTP(w, r)
		})
	}
}
