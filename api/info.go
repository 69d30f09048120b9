package api

import (
	"net/http"
	"runtime"
	"strconv"
	"time"
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
	RunningGeneration int64  `json:"running_generation" example:"7"`
	StateDir          string `json:"state_dir" example:"/var/lib/spliced"`
	AdminAddr         string `json:"admin_addr" example:"127.0.0.1:9900"`
	GoVersion         string `json:"go_version" example:"go1.26.8"`
	// Role is the caller's role: that of its token, "admin" while no token
	// exists (open loopback or unix admin address).
	Role string `json:"role" example:"admin" enums:"viewer,operator,admin"`
	// Auth is true when tokens exist (Authorization: Bearer is required).
	Auth bool `json:"auth" example:"false"`
}

// info godoc
//
//	@Summary	About this spliced
//	@Tags		info
//	@Produce	json
//	@Success	200	{object}	Info
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/info [get]
func (s *server) info(w http.ResponseWriter, r *http.Request) {
	rt := s.core.Runtime()
	c := s.store.Current()
	w.Header().Set("X-Spliced-Generation", strconv.FormatInt(c.Generation, 10))
	s.writeValue(w, r, http.StatusOK, Info{
		Version: s.version, UptimeS: int64(time.Since(s.started) / time.Second),
		Nbthread: rt.Nbthread, Maxconn: rt.Maxconn,
		Generation: c.Generation, RunningGeneration: rt.Generation,
		StateDir: s.dir, AdminAddr: s.addr, GoVersion: runtime.Version(),
		Role: RoleFrom(r.Context()), Auth: authRequired(r.Context()),
	})
}

// Health is the answer of /healthz and /readyz.
type Health struct {
	Status     string `json:"status" example:"ok"`
	Generation int64  `json:"generation,omitempty" example:"7"`
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
func (s *server) healthz(w http.ResponseWriter, r *http.Request) {
	s.writeValue(w, r, http.StatusOK, Health{Status: "ok"})
}

// readyz godoc
//
//	@Summary		Readiness
//	@Description	200 when the configuration is loaded and the data plane runs its current generation, else 503.
//	@Tags			health
//	@Produce		json
//	@Success		200	{object}	Health
//	@Failure		503	{object}	Problem
//	@x-spliced-role	"public"
//	@Router			/readyz [get]
func (s *server) readyz(w http.ResponseWriter, r *http.Request) {
	if s.store == nil || s.store.Current() == nil {
		writeProblem(w, r, problemFor(&apiError{Status: http.StatusServiceUnavailable, Code: "not-ready",
			Detail: "the configuration is not loaded"}, ""))
		return
	}
	want := s.store.Current().Generation
	got := s.core.Runtime().Generation
	if got != want {
		writeProblem(w, r, problemFor(&apiError{Status: http.StatusServiceUnavailable, Code: "not-ready",
			Detail: "the data plane runs generation " + strconv.FormatInt(got, 10) +
				", the configuration is at generation " + strconv.FormatInt(want, 10)}, ""))
		return
	}
	s.writeValue(w, r, http.StatusOK, Health{Status: "ready", Generation: want})
}

// openapiJSON godoc
//
//	@Summary	This API's OpenAPI (Swagger 2.0) document
//	@Tags		info
//	@Produce	json
//	@Success	200	{object}	object
//	@x-spliced-role	"public"
//	@Router		/openapi.json [get]
func (s *server) openapiJSON(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, s.spec)
}

// notImplemented answers the routes of later issues.
func (s *server) notImplemented(w http.ResponseWriter, r *http.Request) {
	writeProblem(w, r, problemFor(&apiError{Status: http.StatusNotImplemented, Code: "not-implemented",
		Detail: r.Method + " " + r.URL.Path + " is not implemented yet; it is part of the API contract and comes in a later release"}, ""))
}

// getCPUMap godoc
//
//	@Summary		CPU map of the loop threads (not implemented yet)
//	@Description	Answers 501 until implemented; the CPU map is part of GET/PUT /api/v1/config meanwhile.
//	@Tags			later
//	@Produce		json
//	@Failure		501	{object}	Problem	"not implemented yet"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/cpu-map [get]
func (s *server) getCPUMap(w http.ResponseWriter, r *http.Request) { s.notImplemented(w, r) }

// putCPUMap godoc
//
//	@Summary		Set the CPU map (not implemented yet)
//	@Description	Answers 501 until implemented; the CPU map is part of GET/PUT /api/v1/config meanwhile.
//	@Tags			later
//	@Produce		json
//	@Failure		501	{object}	Problem	"not implemented yet"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/cpu-map [put]
func (s *server) putCPUMap(w http.ResponseWriter, r *http.Request) { s.notImplemented(w, r) }

// listIRQs godoc
//
//	@Summary		IRQs with their affinity and counts (not implemented yet)
//	@Description	Answers 501 until implemented.
//	@Tags			later
//	@Produce		json
//	@Failure		501	{object}	Problem	"not implemented yet"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/irqs [get]
func (s *server) listIRQs(w http.ResponseWriter, r *http.Request) { s.notImplemented(w, r) }

// getIRQ godoc
//
//	@Summary		One IRQ (not implemented yet)
//	@Description	Answers 501 until implemented.
//	@Tags			later
//	@Produce		json
//	@Param			irq	path		integer	true	"IRQ number"
//	@Failure		501	{object}	Problem	"not implemented yet"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/irqs/{irq} [get]
func (s *server) getIRQ(w http.ResponseWriter, r *http.Request) { s.notImplemented(w, r) }

// putIRQ godoc
//
//	@Summary		Set the affinity of one IRQ (not implemented yet)
//	@Description	Answers 501 until implemented.
//	@Tags			later
//	@Produce		json
//	@Param			irq	path		integer	true	"IRQ number"
//	@Failure		501	{object}	Problem	"not implemented yet"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/irqs/{irq} [put]
func (s *server) putIRQ(w http.ResponseWriter, r *http.Request) { s.notImplemented(w, r) }
