// Package api is the REST admin API of spliced: a chi router under /api/v1
// over the configuration document (config, revisions, frontends and their
// binds, backends and their servers, certificates, tuning, node-local settings:
// nodes.go), plus /healthz, /readyz,
// /openapi.json, the API reference at /docs/ and the web page at /ui/.
//
// It owns HTTP only: routing, strict body decoding, ETags and If-Match,
// merge patches, problem answers, request ids and the access log. It talks
// to the core only through config.Store (every write is one store.Update
// whose Apply is core.Control.Apply, so the answer comes after the data
// plane runs the change, and a refused change is rolled back; with a
// cluster store, Options.Cluster, the Update commits without applying and
// the write then calls Cluster.Sync and Cluster.Wait: cluster.go; a store
// that went back is reseeded with store.Reseed: reseed.go) and
// core.Control.Runtime, Stats, LoopActivity and its placement part
// (threads, IRQs: read through Control, never from /proc directly). It
// never touches the data plane otherwise and does not import it
// (scripts/test.sh fails if go list -deps ./api names core/engine,
// core/proxy, core/listen or core/loop). Its only state is observability (stats.go): the audit
// trail (audit.log in the state directory, one JSON line per write or
// refused write) and the event hub of /api/v1/events. Handlers run on
// net/http's goroutines, any number at once; the store serialises writes.
//
// # Observability
//
// Rules (the numbers and the walkthrough are next to the code: metrics.go,
// events.go, audit.go, audit_pending.go):
//
//   - /api/v1/stats, /api/v1/activity and /metrics only read atomics in the
//     core; /metrics renders at most once per metricsMaxAge and serves a
//     bounded number of scrapes at once (503 beyond).
//   - /api/v1/events never makes a publisher wait: a client that does not
//     keep up is disconnected; streams are capped per token (429) and in
//     all (503), and end soon after their token is revoked.
//   - Every refusal of an admitted client (413, 415, 403 by role, 422...)
//     is an audit entry (the audit middleware runs right after the access
//     log); a refusal before authentication (the guard's 401, 403, 429) is
//     not, it is counted and sampled into the log.
//   - A write is durable in the trail (audit.pending, fsynced, under the
//     store's lock) before the store persists it; a record a crash left is
//     completed at start-up, or, on a cluster node whose store does not
//     answer then, once it does (settle: on a timer and before the next
//     write, which is refused with 503 until then).
//   - Logged paths are redacted (redactURI): no credential from a URL is kept.
//   - Certificates (certificates.go): uploads carry a key, which goes to the
//     store's certs/ file only; every answer, audit entry and revision
//     shows the metadata of the config document.
//   - Session ticket keys (tlskeys.go): /api/v1/tls/ticket-keys reads and
//     sets the process's core/tlsconf.TicketKeys (Options.TicketKeys, which
//     writes its own 0600 file in the state directory): ids in answers,
//     never a key in an answer, log line or audit entry; admin only, reads
//     included.
//
// # Conventions
//
//   - GET of a resource or a list answers its JSON with a strong ETag (hash
//     of the canonical JSON) and X-Spliced-Generation; If-None-Match gives 304.
//     Lists are JSON arrays.
//   - Writes (POST, PUT, PATCH, DELETE, restore) accept ?dry_run=true, which
//     answers 200 {"dry_run":true,"generation":current,"plan":...,"result":...}
//     and changes nothing. If-Match is compared, inside the store's lock, with
//     the current ETag of the target (the resource; for POST the list it adds
//     to; for restore the whole document): mismatch 412, "*" matches.
//   - Accepted writes answer WriteResult {"generation","plan","result"}
//     (201 + Location for POST, 200 otherwise) or 204 for DELETE; the new
//     generation is also in X-Spliced-Generation. The result is the object as
//     GET now returns it, defaults filled. A write whose plan is empty (PUT of
//     what is already there) creates no generation and answers the current.
//     Writes run to their end even if the client disconnects.
//   - PUT replaces the object; the name in the path wins, a different name in
//     the body is 422 (renaming is delete + create). PUT of an unknown name is
//     404: POST creates. PATCH is an RFC 7386 merge patch (application/
//     merge-patch+json or application/json) applied to the object's current
//     JSON, the result decoded as strictly as a PUT body.
//   - Bodies are decoded by config.DecodeBytes: application/json (charset
//     utf-8 if any) else 415, at most --admin-max-body (1 MiB) else 413 (PUT
//     /api/v1/config: or three times the current document, if more), UTF-8,
//     nesting at most
//     32 levels, members named exactly as the model's json tags, plus (here)
//     no member twice and a JSON object at the top. Violations are 400 with
//     the member's JSON pointer. A value of the wrong JSON type, or a number
//     that does not fit, is 422 (code "type"): the document is well formed,
//     one value is invalid, as with validation errors.
//
// # Problems
//
// Every error is RFC 9457 application/problem+json: type
// (urn:spliced:problem:...), title, status, detail, instance (the path),
// request_id and errors [{field, code, message}], field being a JSON pointer
// into the request body; a problem outside the submitted object (a frontend
// referring to a backend being deleted) points into the whole document as
// GET /api/v1/config shows it. Handlers return their error instead of
// answering it (handlerFunc, as Caddy's AdminHandler; handle adapts them for
// chi), and writeError answers every error, the middlewares' refusals
// included: it audits the refusal and logs a 5xx the API did not decide
// itself. problemFor, under it, is the only place errors become statuses: config.ErrNotFound 404, ErrConflict and ErrInUse 409 (an
// *config.ApplyError, the OS refusing a bind or pin, is 409 with the OS error
// in detail: nothing changed), ErrStale 412, *config.ValidationError 422 (409
// when it says Conflict), *DecodeError 400/422, unknown path 404, wrong
// method 405 with Allow. Client input never yields a 5xx; a panic is
// recovered into a logged 500.
//
// # Security (api/auth.go, package api/tokens)
//
// Middlewares run in this order: security headers (headers.go: CSP with
// frame-ancestors 'none', X-Frame-Options, nosniff, Cache-Control, set
// before anything else so that refusals carry them too), request id, access
// log, audit, recoverer, the guard, body limit, media type. The guard refuses (403) a Host that
// does not name the admin address (DNS rebinding; skipped on a unix
// socket) and an Origin that is not the admin's own origin (cross-site
// requests from a browser), tokens or not. Then, unless the route is
// public (/healthz, /readyz, /openapi.json, /docs/, /ui/), it establishes
// the caller's role: open (admin, actor "local") while tokens.json holds
// no token and the listener is loopback or a unix socket with no
// --admin-host (cmd/spliced refuses to start otherwise); otherwise
// Authorization: Bearer (401); bad tokens are limited per remote address
// and per token prefix (429 + Retry-After), a valid token never is. Every
// refusal of the guard answers Connection: close, and admission calls the
// connection's hook (WithAdmitHook; what it returns is called when the
// handler returns): the admin listener evicts and times out anonymous
// connections first, and never one whose admitted handler runs
// (cmd/spliced/admin.go). requiredRole is the one rule mapping method and
// route to a role, stated per operation in the OpenAPI document (x-spliced-role);
// an operator's server PUT/PATCH may change only admin_state and weight,
// which checkRole verifies inside the store's lock. Secrets never reach a
// log, an answer or the audit trail: only the token's name does.
package api
