package api

import (
	"fmt"
	"net/http"
	"strconv"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
)

// observer holds the observability state of the API: the audit trail and
// the event hub (both safe for concurrent use).
type observer struct {
	audit   *auditLog
	events  *eventHub
	metrics http.Handler
}

func newObserver(s *server) *observer {
	audit := newAuditLog(s.dir, s.log)
	metrics := newMetricsHandler(s.core, s.version, audit.refused.count, newCertCollector(s.store), newClusterCollector(s), newACMECollector(s.acme))
	metrics.log = s.log
	events := newEventHub(s.core, s.log)
	if s.cluster != nil {
		events.remote = &adoptions{store: s.store}
	}
	return &observer{audit: audit, events: events, metrics: metrics}
}

// noteWrite records the outcome of store.Update for the audit trail and,
// when it created a generation, tells the event stream.
func (s *server) noteWrite(r *http.Request, dry bool, res *config.Result, err error) {
	if err != nil || res == nil {
		return
	}
	auditResult(r, dry, res)
	if dry || len(res.Plan.Items) == 0 {
		return
	}
	s.obs.events.configChanged(ConfigEvent{Generation: res.Generation, Plan: res.Plan,
		Actor: actor(r.Context()), RequestID: requestID(r.Context()), Node: s.node.Name}, res.Config)
}

func notFoundf(format string, args ...any) error {
	return fmt.Errorf(format+": %w", append(args, config.ErrNotFound)...)
}

// stats godoc
//
//	@Summary		Traffic statistics
//	@Description	Counters of every frontend, backend and server of the running generation: connections (total, current, rate over the last second), requests and their rate (http mode), bytes in/out, denied, errors, connect errors, retries, timeouts, aborts, HTTP status classes, average connect and response times; servers add state (up, down, drain, maint), weight and the time of the last health change. Counters are kept per loop and summed when read; they survive configuration changes for objects that remain. ?frontend=, ?backend=, ?server= keep only the named objects (server: in every backend, or in ?backend=); a name that matches nothing is 404.
//	@Tags			observability
//	@Produce		json
//	@Param			frontend	query		string	false	"only this frontend"
//	@Param			backend		query		string	false	"only this backend"
//	@Param			server		query		string	false	"only servers of this name"
//	@Success		200			{object}	stats.Snapshot
//	@Failure		404			{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/stats [get]
func (s *server) stats(w http.ResponseWriter, r *http.Request) error {
	snap := s.core.Stats()
	q := r.URL.Query()
	fe, be, sv := q.Get("frontend"), q.Get("backend"), q.Get("server")
	if fe != "" || be != "" || sv != "" {
		var err error
		if snap, err = filterStats(snap, fe, be, sv); err != nil {
			return err
		}
	}
	return writeValue(w, http.StatusOK, snap)
}

func filterStats(snap stats.Snapshot, fe, be, sv string) (stats.Snapshot, error) {
	out := snap
	out.Frontends = []stats.Frontend{}
	out.Backends = []stats.Backend{}
	if fe != "" {
		for _, f := range snap.Frontends {
			if f.Name == fe {
				out.Frontends = append(out.Frontends, f)
			}
		}
		if len(out.Frontends) == 0 {
			return out, notFoundf("no frontend %q runs", fe)
		}
	}
	if be != "" || sv != "" {
		for _, b := range snap.Backends {
			if be != "" && b.Name != be {
				continue
			}
			if sv != "" {
				var keep []stats.Server
				for _, x := range b.Servers {
					if x.Name == sv {
						keep = append(keep, x)
					}
				}
				if len(keep) == 0 {
					continue
				}
				b.Servers = keep
			}
			out.Backends = append(out.Backends, b)
		}
		if len(out.Backends) == 0 {
			if sv != "" {
				return out, notFoundf("no server %q runs in %s", sv, backendWord(be))
			}
			return out, notFoundf("no backend %q runs", be)
		}
	}
	return out, nil
}

func backendWord(be string) string {
	if be == "" {
		return "any backend"
	}
	return "backend " + strconv.Quote(be)
}

// activity godoc
//
//	@Summary		Per-loop activity
//	@Description	HAProxy's "show activity", one entry per event loop: rounds, epoll events, tasklet wake-ups and runs per class (urgent, normal, bulk), timers fired, average busy time of a round (µs, EWMA), connections accepted, accept-ring pushes and refusals, accept pauses, bytes spliced, pipes and buffers in use, live connections.
//	@Tags			observability
//	@Produce		json
//	@Success		200	{array}	stats.LoopActivity
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/activity [get]
func (s *server) activity(w http.ResponseWriter, r *http.Request) error {
	return writeValue(w, http.StatusOK, s.core.LoopActivity())
}

// memory godoc
//
//	@Summary		Memory: the process, the Go runtime, each loop's objects
//	@Description	The process's resident set (VmRSS), the Go runtime's memory classes (runtime/metrics: heap objects, live heap, fragmentation, free and released spans, GC goal, stacks, metadata), and per loop what its data plane holds, counted by the loop on its own thread: each kind of connection object (HTTP/1.1 and HTTP/2 client connections, streams, request and response parsers, idle server connections, tunnels) in use and kept in its free list, in its Go size class, the buffers in use and pooled, and the loop's fd table, timer heap and epoll event array. idle_http_conn is what one idle kept-alive HTTP/1.1 client connection holds, by part (the bench's idle row prints it beside its RSS delta).
//	@Tags			observability
//	@Produce		json
//	@Success		200	{object}	stats.Memory
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/memory [get]
func (s *server) memory(w http.ResponseWriter, r *http.Request) error {
	m, err := s.core.Memory(r.Context())
	if err != nil {
		return err
	}
	return writeValue(w, http.StatusOK, m)
}
