package api

import (
	"errors"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"time"

	"github.com/spliced-proxy/spliced/api/tokens"
	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// Info describes the running spliced.
type Info struct {
	Version string `json:"version" example:"1.0.0"`
	// UptimeS is the time since start, in seconds.
	UptimeS int64 `json:"uptime_s" example:"3600"`
	// Nbthread is the number of loops the data plane runs.
	Nbthread int `json:"nbthread" example:"2"`
	// Maxconn is the global connection limit in force.
	Maxconn int `json:"maxconn" example:"100000"`
	// Generation is the generation of the stored configuration.
	Generation int64 `json:"generation" example:"7"`
	// RunningGeneration is the generation the data plane runs (equal to
	// Generation except while a write is being applied).
	RunningGeneration int64 `json:"running_generation" example:"7"`
	// StateDir is shown to admins only: where the config, the tokens and
	// the audit log live on the host is no business of a viewer's.
	StateDir  string `json:"state_dir,omitempty" example:"/var/lib/spliced"`
	AdminAddr string `json:"admin_addr" example:"127.0.0.1:9900"`
	GoVersion string `json:"go_version" example:"go1.26.8"`
	// Role is the caller's role: that of its token, "admin" while no token
	// exists (open loopback or unix admin address).
	Role string `json:"role" example:"admin" enums:"viewer,operator,admin"`
	// TokenName is the name of the caller's token ("local" while no token
	// exists): the web page's header shows it with the role.
	TokenName string `json:"token_name" example:"ops-alice"`
	// Auth is true when tokens exist (Authorization: Bearer is required).
	Auth bool `json:"auth" example:"false"`
	// KTLS says whether the kernel could run kTLS (its TCP ULP list names
	// "tls"): "available", "unavailable: no tls ULP" or "unknown: <why>"
	// when the list cannot be read. spliced has no kTLS transport yet.
	KTLS string `json:"ktls" example:"unavailable: no tls ULP"`
	// Node is this node (--node-name, --node-address).
	Node core.NodeIdentity `json:"node"`
	// Store is the configuration store as this node sees it: kind "dir"
	// (the state directory, always connected) or "etcd" (a cluster).
	Store core.StoreState `json:"store"`
}

// info godoc
//
//	@Summary	About this spliced
//	@Tags		info
//	@Produce	json
//	@Success	200	{object}	Info
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/info [get]
func (s *server) info(w http.ResponseWriter, r *http.Request) error {
	rt := s.core.Runtime()
	c := s.store.Current()
	w.Header().Set("X-Spliced-Generation", strconv.FormatInt(c.Generation, 10))
	role := RoleFrom(r.Context())
	dir := ""
	if role == string(tokens.Admin) {
		dir = s.dir
	}
	return writeValue(w, http.StatusOK, Info{
		Version: s.version, UptimeS: int64(time.Since(s.started) / time.Second),
		Nbthread: rt.Nbthread, Maxconn: rt.Maxconn,
		Generation: c.Generation, RunningGeneration: rt.Generation,
		StateDir: dir, AdminAddr: s.addr, GoVersion: runtime.Version(),
		Role: role, TokenName: actor(r.Context()), Auth: authRequired(r.Context()),
		KTLS: core.KTLSSupport(s.ulpPath),
		Node: s.node, Store: s.storeState(),
	})
}

// Health is the answer of /healthz and /readyz.
type Health struct {
	Status     string `json:"status" example:"ok"`
	Generation int64  `json:"generation,omitempty" example:"7"`
	// Warnings (readyz) lists what runs degraded but does not stop
	// serving, e.g. a CPU or IRQ pin of the config that could not be
	// applied at start (a CPU gone, not root), or a global maxconn the fd
	// limit holds below what the config asks or below 1000.
	Warnings []string `json:"warnings,omitempty"`
}

// healthz godoc
//
//	@Summary		Liveness
//	@Description	200 as long as the admin server answers.
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	Health
//	@x-spliced-role	"public"
//	@Router			/healthz [get]
func (s *server) healthz(w http.ResponseWriter, r *http.Request) error {
	return writeValue(w, http.StatusOK, Health{Status: "ok"})
}

// readyz godoc
//
//	@Summary		Readiness
//	@Description	200 when the configuration is loaded and the data plane runs its current generation, else 503; 503 "stopping" from the moment the process begins to stop (SIGTERM); also 503, with the OS error, while the state directory refuses writes (full, read-only), until a write or a probe (at most once a second) succeeds. In a cluster, a node that runs an older generation than the store's (behind, or it refused the newer one) is 503 too; a cluster store that cannot be reached is not: the node serves its last generation, and the answer lists a warning. A pin of the config that could not be applied at start (CPU gone, not root), or a global maxconn that the fd limit holds below what the config asks or below 1000, or a certificate that expires within 14 days (or has expired), does not make it unready: it is listed in warnings (and logged).
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	Health
//	@Failure		503	{object}	Problem
//	@x-spliced-role	"public"
//	@Router			/readyz [get]
func (s *server) readyz(w http.ResponseWriter, r *http.Request) error {
	// From the moment the stop begins (SIGTERM), so that load balancers
	// take the node out during the grace.
	if s.core.Stopping() {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "stopping",
			Detail: "the process is stopping"}
	}
	if s.store == nil || s.store.Current() == nil {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "not-ready",
			Detail: "the configuration is not loaded"}
	}
	// After a write the state directory refused (full, read-only), not
	// ready until a write succeeds again (a change, or the store's probe).
	// A cluster store that cannot be reached leaves the node ready: it
	// serves its last generation, and taking every node out of rotation
	// when etcd blips would be worse (a warning says it).
	// In a cluster the node's probe (once a second) says whether etcd
	// answers, as /api/v1/info and X-Spliced-Stale do: the storage's
	// health learns it only at its next call or probe, which this request
	// starts, one answer late both when etcd goes and when it is back.
	var warnings []string
	err := s.store.StorageHealth()
	unreachable := errors.Is(err, config.ErrUnavailable)
	if s.cluster != nil && (unreachable || err == nil) {
		unreachable, err = !s.cluster.StoreState().Connected, nil
	}
	if unreachable {
		warnings = append(warnings, "the configuration store cannot be reached: this node serves the last generation it "+
			"applied, writes are refused (503) until the store answers again")
	} else if err != nil {
		// /readyz is public: the OS error, not where the state lives
		// (shown to admins only, as in /api/v1/info).
		detail := err.Error()
		if s.dir != "" {
			detail = strings.ReplaceAll(detail, s.dir, "<state-dir>")
		}
		return &apiError{Status: http.StatusServiceUnavailable, Code: "not-ready",
			Detail: "no change can be saved: " + detail}
	}
	want := s.store.Current().Generation
	got := s.core.Runtime().Generation
	if got != want {
		return &apiError{Status: http.StatusServiceUnavailable, Code: "not-ready",
			Detail: "the data plane runs generation " + strconv.FormatInt(got, 10) +
				", the configuration is at generation " + strconv.FormatInt(want, 10)}
	}
	h := Health{Status: "ready", Generation: want, Warnings: append(warnings, s.core.Runtime().Warnings...)}
	h.Warnings = append(h.Warnings, s.core.PinWarnings()...)
	h.Warnings = append(h.Warnings, certificateWarnings(s.store.Current(), time.Now())...)
	h.Warnings = append(h.Warnings, s.acmeWarnings(s.store.Current(), time.Now())...) // acme.go
	return writeValue(w, http.StatusOK, h)
}

// openapiJSON godoc
//
//	@Summary	This API's OpenAPI (Swagger 2.0) document
//	@Tags		info
//	@Produce	json
//	@Success	200	{object}	object
//	@x-spliced-role	"public"
//	@Router		/openapi.json [get]
func (s *server) openapiJSON(w http.ResponseWriter, r *http.Request) error {
	writeJSON(w, http.StatusOK, s.spec)
	return nil
}
