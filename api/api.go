package api

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-chi/chi/v5"
	"github.com/go-chi/chi/v5/middleware"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/accesslog"
	"github.com/spliced-proxy/spliced/core/acme"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/openapi"
	"github.com/spliced-proxy/spliced/web"
)

// Options wires the API to the store and the core.
type Options struct {
	Store     *config.Store
	Core      core.Control
	Env       config.Env
	Version   string
	StateDir  string
	AdminAddr string
	Logger    *slog.Logger // nil: discard
	Started   time.Time    // zero: time of New

	// Security (api/auth.go). Tokens nil: no authentication at
	// all (embedding and tests). With Tokens, Open allows requests without
	// a token while no token exists (loopback or unix admin address).
	Tokens *tokens.Checker
	Open   bool
	// AdminHosts are more names (or name:port) the Host header may carry;
	// with an explicit port they are trusted origins too (a proxy in front).
	AdminHosts []string
	// AdminTLS: the admin listener serves HTTPS (its own origin is https).
	AdminTLS bool
	// MaxBodyBytes bounds request bodies; 0 means MaxBodyBytes. PUT
	// /api/v1/config takes up to three times the current document if that
	// is more (decode.go, bodyLimit).
	MaxBodyBytes int64
	// MaxEventStreams and MaxEventStreamsPerToken cap open
	// /api/v1/events streams (0: DefaultMaxEventStreams...).
	MaxEventStreams, MaxEventStreamsPerToken int
	// AuditKeep is how many rotated audit files are kept (0: AuditKeepDefault).
	AuditKeep int
	// AuditCopy, when set, gets a copy of every audit entry (one JSON
	// document per Write), e.g. a log/syslog writer.
	AuditCopy io.Writer
	// TicketKeys are the session ticket keys of the TLS binds
	// (/api/v1/tls/ticket-keys); nil: those routes answer 404.
	TicketKeys *tlsconf.TicketKeys
	// AccessLog is the data plane's access log (the one given to the
	// engine): GET /api/v1/logs reads its last entries and follows it;
	// nil: an empty list and a stream without events.
	AccessLog *accesslog.Log
	// TCPULPPath is the kernel's TCP ULP list /api/v1/info reads for its
	// "ktls" field; "" means core.TCPULPPath (tests point it at a file).
	TCPULPPath string

	// Cluster is the set of nodes sharing the configuration through a
	// cluster store (--store etcd://…); nil on a single node (the state
	// directory). With it, a write commits without applying (the node
	// applies through Cluster.Sync, every other node through its watch)
	// and waits for the nodes (?wait_ms=, cluster.go).
	Cluster core.Cluster
	// ACME runs the managed certificates (core/acme): GET shows their
	// run-time state, /readyz and /metrics their failures, and New makes
	// it store what it obtains through the certificate write
	// (acme.go); nil: managed certificates are accepted, never ordered.
	ACME *acme.Manager
	// Node names this node (--node-name, --node-address): the audit
	// entries and revisions of the writes it takes, /api/v1/info, and the
	// single node of /api/v1/cluster. With Cluster, Cluster.Self wins.
	Node core.NodeIdentity
}

// MaxBodyBytes bounds every request body (413 beyond).
const MaxBodyBytes = 1 << 20

// applyTimeout bounds one write, apply included. A write runs to its end
// even when the client goes away (context.WithoutCancel), so the store and
// the data plane never see a half-done change because a curl was killed.
const applyTimeout = 60 * time.Second

// Media types accepted for request bodies.
const (
	mediaJSON  = "application/json"
	mediaMerge = "application/merge-patch+json"
)

// Base path of the REST resources.
const base = "/api/v1"

// server holds what the handlers need. It has no mutable state of its own:
// all state lives in the store and the core.
type server struct {
	store   *config.Store
	core    core.Control
	env     config.Env
	version string
	dir     string
	addr    string
	log     *slog.Logger
	started time.Time
	spec    []byte
	queries queryParams // the query parameters of each operation (query.go)
	mux     *chi.Mux
	docSize docSize // of the current document, for PUT /config's body limit
	c       collections
	obs     *observer // stats, metrics, events, audit (stats.go)
	ulpPath string    // core.KTLSSupport's file, for /api/v1/info
	tickets *tlsconf.TicketKeys
	alog    *accesslog.Log    // GET /api/v1/logs (logs.go)
	cluster core.Cluster      // nil on a single node (cluster.go)
	node    core.NodeIdentity // this node
	acme    *acme.Manager     // managed certificates (acme.go); may be nil
}

// New returns the admin HTTP handler: the REST API under /api/v1, /healthz,
// /readyz, /metrics, /openapi.json, /docs/ and the web page under /ui/.
func New(o Options) http.Handler {
	s := &server{
		store: o.Store, core: o.Core, env: o.Env, version: o.Version,
		dir: o.StateDir, addr: o.AdminAddr, log: o.Logger, started: o.Started,
		spec: openapi.JSON(), c: newCollections(), ulpPath: o.TCPULPPath,
		tickets: o.TicketKeys, alog: o.AccessLog, cluster: o.Cluster, node: o.Node,
		acme: o.ACME,
	}
	s.queries = newQueryParams(s.spec)
	if s.cluster != nil {
		s.node = s.cluster.Self()
	}
	if s.ulpPath == "" {
		s.ulpPath = core.TCPULPPath
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.started.IsZero() {
		s.started = time.Now()
	}
	if s.dir == "" && s.store != nil {
		s.dir = s.store.Dir()
	}
	s.obs = newObserver(s)
	s.obs.events.setLimits(o.MaxEventStreams, o.MaxEventStreamsPerToken)
	if o.AuditKeep > 0 {
		s.obs.audit.keep = o.AuditKeep
	}
	s.obs.audit.sys = o.AuditCopy
	s.obs.audit.node = s.node.Name
	if err := s.obs.audit.recoverPending(s.store); err != nil {
		s.log.Error("audit trail: writes under way at the last stop not recovered", "err", err)
	}
	r := chi.NewRouter()
	s.mux = r
	// Order matters: the id first (everything logs it), the access log
	// around the recoverer (so a recovered panic is logged as its 500).
	// Issue 7's host/origin checks and bearer-token auth go right after
	// the recoverer, before any body is read.
	// The audit trail wraps everything after the access log, so refusals
	// by later middlewares (413, 415, auth) are recorded too.
	limit := o.MaxBodyBytes
	if limit <= 0 {
		limit = MaxBodyBytes
	}
	sec := newGuard(o, r, s.log)
	r.Use(securityHeaders, requestIDs, accessLog(s.log), s.obs.audit.middleware, recoverer(s.log), sec.handler, maxBody(s.log, s.bodyLimit(limit)),
		mediaTypes(s.log, map[string][]string{
			http.MethodPost:  {mediaJSON},
			http.MethodPut:   {mediaJSON},
			http.MethodPatch: {mediaMerge, mediaJSON},
		}),
		middleware.GetHead, // HEAD answers like GET, without the body
		s.staleReads)       // cluster store unreachable: X-Spliced-Stale (cluster.go)
	r.NotFound(s.handle(notFound))
	r.MethodNotAllowed(s.handle(s.methodNotAllowed))
	s.routes(r)
	if s.acme != nil {
		s.acme.SetCommit(s.commitIssued) // acme.go
	}
	return r
}

func (s *server) routes(r chi.Router) {
	r.Get("/", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusFound) })
	r.Get("/healthz", s.handle(s.healthz))
	r.Get("/readyz", s.handle(s.readyz))
	r.Get("/openapi.json", s.handle(s.openapiJSON))
	r.Get("/docs", func(w http.ResponseWriter, r *http.Request) {
		http.Redirect(w, r, "/docs/", http.StatusMovedPermanently)
	})
	r.Get("/docs/*", http.StripPrefix("/docs/", http.FileServerFS(openapi.Docs())).ServeHTTP)
	r.Get("/ui", func(w http.ResponseWriter, r *http.Request) { http.Redirect(w, r, "/ui/", http.StatusMovedPermanently) })
	r.Get("/ui/*", http.StripPrefix("/ui/", http.FileServerFS(web.FS())).ServeHTTP)
	r.Get("/metrics", s.metrics) // an http.Handler with its own admission (metrics.go)

	r.Get(base+"/info", s.handle(s.info))
	r.Get(base+"/cluster", s.handle(s.getCluster))
	r.Post(reseedPath, s.handle(s.postReseed))                                // reseed.go
	r.Get(base+"/cluster/nodes/{name}/settings", s.handle(s.getNodeSettings)) // nodes.go
	r.Put(base+"/cluster/nodes/{name}/settings", s.handle(s.putNodeSettings))
	r.Delete(base+"/cluster/nodes/{name}/settings", s.handle(s.deleteNodeSettings))
	r.Get(base+"/config", s.handle(s.getConfig))
	r.Put(base+"/config", s.handle(s.putConfig))
	r.Get(base+"/config/revisions", s.handle(s.listRevisions))
	r.Get(base+"/config/revisions/{rev}", s.handle(s.getRevision))
	r.Post(base+"/config/revisions/{rev}/restore", s.handle(s.restoreRevision))

	r.Get(base+"/frontends", s.handle(s.listFrontends))
	r.Post(base+"/frontends", s.handle(s.createFrontend))
	r.Get(base+"/frontends/{name}", s.handle(s.getFrontend))
	r.Put(base+"/frontends/{name}", s.handle(s.putFrontend))
	r.Patch(base+"/frontends/{name}", s.handle(s.patchFrontend))
	r.Delete(base+"/frontends/{name}", s.handle(s.deleteFrontend))
	r.Get(base+"/frontends/{name}/binds", s.handle(s.listBinds))
	r.Post(base+"/frontends/{name}/binds", s.handle(s.createBind))
	r.Get(base+"/frontends/{name}/binds/{bind}", s.handle(s.getBind))
	r.Put(base+"/frontends/{name}/binds/{bind}", s.handle(s.putBind))
	r.Delete(base+"/frontends/{name}/binds/{bind}", s.handle(s.deleteBind))
	r.Get(base+"/frontends/{name}/limits/{limit}/entries", s.handle(s.getLimitEntries))           // limits.go
	r.Delete(base+"/frontends/{name}/limits/{limit}/entries/{key}", s.handle(s.deleteLimitEntry)) // runtime state: operator

	r.Get(base+"/backends", s.handle(s.listBackends))
	r.Post(base+"/backends", s.handle(s.createBackend))
	r.Get(base+"/backends/{name}", s.handle(s.getBackend))
	r.Put(base+"/backends/{name}", s.handle(s.putBackend))
	r.Patch(base+"/backends/{name}", s.handle(s.patchBackend))
	r.Delete(base+"/backends/{name}", s.handle(s.deleteBackend))
	r.Get(base+"/backends/{name}/servers", s.handle(s.listServers))
	r.Post(base+"/backends/{name}/servers", s.handle(s.createServer))
	r.Get(base+"/backends/{name}/servers/{server}", s.handle(s.getServer))
	r.Put(base+"/backends/{name}/servers/{server}", s.handle(s.putServer))
	r.Patch(base+"/backends/{name}/servers/{server}", s.handle(s.patchServer))
	r.Delete(base+"/backends/{name}/servers/{server}", s.handle(s.deleteServer))

	r.Get(base+"/certificates", s.handle(s.listCertificates))
	r.Post(base+"/certificates", s.handle(s.createCertificate))
	r.Get(base+"/certificates/{name}", s.handle(s.getCertificate))
	r.Put(base+"/certificates/{name}", s.handle(s.putCertificate))
	r.Delete(base+"/certificates/{name}", s.handle(s.deleteCertificate))

	r.Get(base+"/tls/ticket-keys", s.handle(s.getTicketKeys))
	r.Put(base+"/tls/ticket-keys", s.handle(s.putTicketKeys))

	r.Get(base+"/tuning", s.handle(s.getTuning))
	r.Put(base+"/tuning", s.handle(s.putTuning))
	r.Patch(base+"/tuning", s.handle(s.patchTuning))

	// Observability (stats.go, events.go, audit.go; /metrics above) and
	// placement (pin.go).
	r.Get(base+"/stats", s.handle(s.stats))
	r.Get(base+"/activity", s.handle(s.activity))
	r.Get(base+"/memory", s.handle(s.memory))
	r.Get(base+"/events", s.handle(s.events))
	r.Get(base+"/audit", s.handle(s.audit))
	r.Get(base+"/logs", s.handle(s.logs))
	r.Get(base+"/cpu-map", s.handle(s.getCPUMap))
	r.Put(base+"/cpu-map", s.handle(s.putCPUMap))
	r.Get(base+"/irqs", s.handle(s.listIRQs))
	r.Get(base+"/irqs/{irq}", s.handle(s.getIRQ))
	r.Put(base+"/irqs/{irq}", s.handle(s.putIRQ))
}

// notFound answers unknown paths with a 404 problem.
func notFound(w http.ResponseWriter, r *http.Request) error {
	return &apiError{Status: http.StatusNotFound, Code: "not-found",
		Detail: "no such resource: " + truncate(r.URL.Path, 200)}
}

// methodNotAllowed answers a known path with a method it does not take: 405
// with Allow listing the methods it does take.
func (s *server) methodNotAllowed(w http.ResponseWriter, r *http.Request) error {
	var allow []string
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete} {
		if s.mux.Match(chi.NewRouteContext(), m, r.URL.Path) {
			allow = append(allow, m)
			if m == http.MethodGet {
				allow = append(allow, http.MethodHead)
			}
		}
	}
	w.Header().Set("Allow", strings.Join(allow, ", "))
	return &apiError{Status: http.StatusMethodNotAllowed, Code: "method-not-allowed",
		Detail: fmt.Sprintf("%s is not allowed here; allowed: %s", r.Method, strings.Join(allow, ", "))}
}

// ---- reading ----

// get answers the JSON of view(current config) with its ETag and the
// generation it was read from; If-None-Match gives 304.
func (s *server) get(w http.ResponseWriter, r *http.Request, view func(c *config.Config) (any, error)) error {
	c := s.store.Current()
	v, err := view(c)
	if err != nil {
		return err
	}
	body, tag, err := represent(v)
	if err != nil {
		return err
	}
	h := w.Header()
	h.Set("ETag", tag)
	h.Set("X-Spliced-Generation", strconv.FormatInt(c.Generation, 10))
	if inm := r.Header.Get("If-None-Match"); inm != "" && etagMatches(inm, tag) {
		w.WriteHeader(http.StatusNotModified)
		return nil
	}
	writeJSON(w, http.StatusOK, body)
	return nil
}

// represent marshals v canonically (encoding/json: struct fields in
// declaration order, map keys sorted) and derives its strong ETag.
func represent(v any) ([]byte, string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, "", fmt.Errorf("api: marshal: %w", err)
	}
	sum := sha256.Sum256(b)
	return b, `"` + hex.EncodeToString(sum[:16]) + `"`, nil
}

func etagOf(v any) (string, error) {
	_, tag, err := represent(v)
	return tag, err
}

// etagMatches implements the strong comparison of If-Match / If-None-Match
// lists (RFC 9110 13.1.1); "*" matches any existing representation.
func etagMatches(header, tag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || t == tag {
			return true
		}
	}
	return false
}

func writeJSON(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n'))
}

// writeValue answers the JSON of v; it writes nothing if v does not marshal.
func writeValue(w http.ResponseWriter, status int, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Errorf("api: marshal: %w", err)
	}
	writeJSON(w, status, b)
	return nil
}

// ---- writing ----

// WriteResult is the answer to every accepted write (except DELETE, which
// answers 204 with the generation in X-Spliced-Generation).
type WriteResult struct {
	// DryRun is true when nothing was changed (?dry_run=true).
	DryRun bool `json:"dry_run,omitempty"`
	// Generation is the new generation, or for a dry run the current one.
	Generation int64 `json:"generation" example:"8"`
	// Plan says what the data plane does (or would do) for the change.
	Plan config.Plan `json:"plan"`
	// Result is the written object as GET now returns it (defaults filled).
	Result any `json:"result,omitempty" swaggertype:"object"`
	// Nodes (cluster mode) says which live nodes run the new generation
	// after the wait (?wait_ms=), which refused it (with their errors) and
	// which had not answered yet. The write is committed either way.
	Nodes *core.WaitResult `json:"nodes,omitempty"`
}

// writeOp describes one write for server.write.
type writeOp struct {
	// target returns the current representation of what If-Match is about
	// (the resource, or the collection a POST adds to), or ErrNotFound.
	target func(c *config.Config) (any, error)
	// mutate changes c and returns the JSON pointer of the written object
	// in the config document (to rebase field pointers of problems).
	mutate func(c *config.Config) (string, error)
	// result returns what to answer with from the new config; nil: 204.
	result   func(c *config.Config) any
	status   int
	location string
	// certificates are bundles the write adds (UpdateOptions.Certificates).
	certificates map[string][]byte
	// restoreOf is the generation a restore brings back (UpdateOptions.RestoreOf).
	restoreOf int64
}

// write runs op through the store: one atomic Update under the store's lock
// (If-Match checked there too), validated, persisted, applied by the core
// before the answer. In cluster mode (s.cluster set) the Update commits
// without applying; the node then applies the new generation (Sync) and the
// answer says which nodes run it after ?wait_ms= (writeCluster).
func (s *server) write(w http.ResponseWriter, r *http.Request, op writeOp) error {
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	wait, err := waitOf(r)
	if err != nil {
		return err
	}
	ifMatch := r.Header.Get("If-Match")
	var prefix string
	// mutate may run more than once: the store runs it again on the newer
	// config after a commit that lost a race (another node wrote first).
	mutate := func(c *config.Config) error {
		// Refused at once while the process stops, before anything is
		// persisted (Apply would refuse too: core.ErrStopping).
		if s.core.Stopping() {
			return core.ErrStopping
		}
		auditBefore(r, s.store.Current()) // under the store's lock: what c is a clone of
		cur, err := op.target(c)
		if err != nil {
			return err
		}
		if ifMatch != "" {
			tag, err := etagOf(cur)
			if err != nil {
				return err
			}
			if !etagMatches(ifMatch, tag) {
				return fmt.Errorf("If-Match %s does not match the current ETag %s: %w", truncate(ifMatch, 80), tag, config.ErrStale)
			}
		}
		if prefix, err = op.mutate(c); err != nil {
			return err
		}
		if err := checkRole(r.Context(), s.store.Current(), c); err != nil { // operators: admin_state and weight only
			return err
		}
		if dry {
			return nil
		}
		// The trail holds the write before the store persists it.
		if err := s.obs.audit.begin(r, s.store.Current().Generation+1); err != nil {
			if errors.Is(err, config.ErrUnavailable) {
				return err // the cluster store (settle): 503 store-unavailable
			}
			return &config.StorageError{Err: err} // 507/503, /readyz not ready
		}
		fault("pending")
		return nil
	}
	opts := config.UpdateOptions{
		DryRun: dry, Env: s.env, Apply: s.applyLocal, Certificates: op.certificates,
		Actor: actor(r.Context()), Node: s.node.Name, RestoreOf: op.restoreOf,
		// every op replaces a list of servers before it changes it
		// (collection.writable); the others are shared with Current
		ShareServers: true,
		AuditRecord:  s.obs.audit.recordOf(r), // the state directory: in the journal line with the change
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), applyTimeout)
	defer cancel()
	if s.cluster != nil {
		// A committed generation is never reverted (other nodes may run
		// it already): nothing to apply inside the Update. Validated with
		// the rules of any machine; each node checks its CPUs and fd
		// limit when it applies. Bounded: etcd unreachable answers 503
		// within storeTimeout, not when the client gives up.
		opts.Apply, opts.Env = nil, config.Env{}
		var scancel context.CancelFunc
		ctx, scancel = context.WithTimeout(ctx, storeTimeout)
		defer scancel()
	}
	res, err := s.store.Update(ctx, mutate, opts)
	s.noteWrite(r, dry, res, err)
	if err != nil {
		if s.cluster != nil && errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, config.ErrUnavailable) {
			err = fmt.Errorf("%w: no answer within %s: %w", config.ErrUnavailable, storeTimeout, err)
		}
		if prefix != "" {
			err = &inObject{prefix: prefix, err: err}
		}
		return err
	}
	out := WriteResult{DryRun: dry, Generation: res.Generation, Plan: res.Plan}
	if out.Plan.Items == nil {
		out.Plan.Items = []config.PlanItem{}
	}
	if op.result != nil && res.Config != nil {
		out.Result = op.result(res.Config)
	}
	h := w.Header()
	h.Set("X-Spliced-Generation", strconv.FormatInt(res.Generation, 10))
	if dry {
		return writeValue(w, http.StatusOK, out)
	}
	if s.cluster != nil {
		out.Nodes = s.syncAndWait(r, res.Generation, wait)
		setNodeHeaders(h, out.Nodes)
	}
	if op.result == nil {
		w.WriteHeader(http.StatusNoContent)
		return nil
	}
	if out.Result != nil {
		if tag, err := etagOf(out.Result); err == nil {
			h.Set("ETag", tag)
		}
	}
	if op.location != "" {
		h.Set("Location", op.location)
	}
	return writeValue(w, op.status, out)
}

// applyLocal is the Apply of a single node's write: the data plane runs
// the new generation before the store makes it current. It runs the
// node's effective config (its section of "nodes", "${NODE_ADDRESS}"
// replaced), validated again when that differs from the document.
func (s *server) applyLocal(ctx context.Context, c *config.Config) error {
	fault("persisted")
	eff, err := c.ForNode(s.node.Name, s.node.Address)
	if err != nil {
		return err
	}
	if eff != c {
		if err := config.Validate(eff, s.env); err != nil {
			return err
		}
	}
	return s.core.Apply(ctx, eff)
}

func dryRun(r *http.Request) (bool, error) {
	v := r.URL.Query().Get("dry_run")
	if v == "" {
		return false, nil
	}
	b, err := strconv.ParseBool(v)
	if err != nil {
		return false, &apiError{Status: http.StatusBadRequest, Code: "bad-query",
			Detail: fmt.Sprintf("dry_run must be true or false, not %q", truncate(v, 40))}
	}
	return b, nil
}

// readBody reads the (size-limited) body.
func readBody(r *http.Request) ([]byte, error) {
	b, err := io.ReadAll(r.Body)
	if err != nil {
		var me *http.MaxBytesError
		if errors.As(err, &me) {
			return nil, fmt.Errorf("read request body: %w", err) // 413
		}
		// A broken chunked encoding, a body cut short: the client's fault.
		return nil, &apiError{Status: http.StatusBadRequest, Code: "malformed-body", Err: err,
			Detail: "the request body could not be read: " + truncate(err.Error(), 120)}
	}
	return b, nil
}

// decodeBody reads and strictly decodes the body into dst.
func decodeBody(r *http.Request, dst any) error {
	b, err := readBody(r)
	if err != nil {
		return err
	}
	return decodeStrict(b, dst)
}

// readPatch reads a merge patch; it must be a JSON object (a patch that is
// not an object would replace the resource with a non-object).
func readPatch(r *http.Request) (map[string]any, error) {
	b, err := readBody(r)
	if err != nil {
		return nil, err
	}
	v, err := decodeAny(b)
	if err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, &config.DecodeError{Code: config.DecodeType, Message: "a merge patch must be a JSON object"}
	}
	return m, nil
}

// param returns the decoded path parameter key.
func param(r *http.Request, key string) string {
	v := chi.URLParam(r, key)
	if r.URL.RawPath != "" {
		if u, err := url.PathUnescape(v); err == nil {
			return u
		}
	}
	return v
}
