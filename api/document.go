package api

import (
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spliced-proxy/spliced/core/config"
)

// ---- whole config ----

// getConfig godoc
//
//	@Summary	Get the whole configuration
//	@Tags		config
//	@Produce	json
//	@Success	200	{object}	config.Config
//	@Header		200	{string}	ETag					"strong ETag of the document (changes with every generation)"
//	@Header		200	{integer}	X-Spliced-Generation	"generation read"
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/config [get]
func (s *server) getConfig(w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, configView)
}

func configView(c *config.Config) (any, error) { return c, nil }

// putConfig godoc
//
//	@Summary		Replace the whole configuration
//	@Description	Atomically replaces every frontend, backend, tuning value, CPU map and IRQ setting. A generation in the body is ignored. Error pointers are into the body.
//	@Tags			config
//	@Accept			json
//	@Produce		json
//	@Param			config		body		config.Config	true	"the whole document"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string			false	"ETag the document must still have"
//	@Success		200			{object}	WriteResult{result=config.Config}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		409			{object}	Problem	"the OS refused part of it (nothing changed)"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem	"body over --admin-max-body and over 3 times the current document"
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/config [put]
func (s *server) putConfig(w http.ResponseWriter, r *http.Request) error {
	var in config.Config
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	return s.write(w, r, writeOp{
		target: configView,
		mutate: func(c *config.Config) (string, error) {
			g := c.Generation
			*c = in
			c.Generation = g
			return "", nil
		},
		result: func(c *config.Config) any { return c },
		status: http.StatusOK,
	})
}

// ---- revisions ----

// RevisionDetail is one revision of the configuration with the plan that
// led to it.
type RevisionDetail struct {
	Generation int64 `json:"generation" example:"7"`
	// Against is the generation the plan is computed from (the previous one
	// unless ?against= says otherwise); null when that revision is no longer
	// kept, and then Plan is null too.
	Against *int64         `json:"against" example:"6"`
	Plan    *config.Plan   `json:"plan"`
	Config  *config.Config `json:"config"`
}

// listRevisions godoc
//
//	@Summary	List the kept revisions, newest first
//	@Tags		config
//	@Produce	json
//	@Success	200	{array}		config.RevisionInfo
//	@Header		200	{string}	ETag	"strong ETag of the list"
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/config/revisions [get]
func (s *server) listRevisions(w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, func(*config.Config) (any, error) {
		revs, err := s.store.Revisions()
		if err != nil {
			return nil, err
		}
		if revs == nil {
			revs = []config.RevisionInfo{}
		}
		return revs, nil
	})
}

// getRevision godoc
//
//	@Summary		Get a revision and its plan
//	@Description	The document of revision rev and the plan from the previous revision (or from revision ?against=N; 0 is the empty configuration).
//	@Tags			config
//	@Produce		json
//	@Param			rev		path		integer	true	"generation"
//	@Param			against	query		integer	false	"generation to diff against (default rev-1)"
//	@Success		200		{object}	RevisionDetail
//	@Header			200		{string}	ETag	"strong ETag"
//	@Failure		400		{object}	Problem	"rev or against is not a generation number"
//	@Failure		404		{object}	Problem	"no such revision kept"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/config/revisions/{rev} [get]
func (s *server) getRevision(w http.ResponseWriter, r *http.Request) error {
	rev, err := generationParam("rev", param(r, "rev"))
	if err != nil {
		return err
	}
	against, explicit := rev-1, false
	if v := r.URL.Query().Get("against"); v != "" {
		if against, err = generationParam("against", v); err != nil {
			return err
		}
		explicit = true
	}
	return s.get(w, r, func(cur *config.Config) (any, error) {
		doc, err := s.revision(cur, rev)
		if err != nil {
			return nil, err
		}
		out := RevisionDetail{Generation: rev, Config: doc}
		old, err := s.revision(cur, against)
		switch {
		case err == nil:
			p := config.Diff(old, doc)
			if p.Items == nil {
				p.Items = []config.PlanItem{}
			}
			out.Against, out.Plan = &against, &p
		case explicit || !errors.Is(err, config.ErrNotFound):
			return nil, err
		}
		return out, nil
	})
}

// revision returns the document of generation gen: the store's revision,
// the current document, or for generation 0 with no revision kept the empty
// configuration spliced starts from.
func (s *server) revision(cur *config.Config, gen int64) (*config.Config, error) {
	if gen < 0 {
		return nil, fmt.Errorf("revision %d: %w", gen, config.ErrNotFound)
	}
	if gen == cur.Generation {
		return cur, nil
	}
	c, err := s.store.Revision(gen)
	if err != nil && gen == 0 && errors.Is(err, config.ErrNotFound) {
		c = &config.Config{}
		c.Normalize()
		return c, nil
	}
	return c, err
}

func generationParam(name, v string) (int64, error) {
	g, err := strconv.ParseInt(v, 10, 64)
	if err != nil || g < 0 {
		return 0, &apiError{Status: http.StatusBadRequest, Code: "bad-parameter",
			Detail: fmt.Sprintf("%s must be a generation number, not %q", name, truncate(v, 40))}
	}
	return g, nil
}

// restoreRevision godoc
//
//	@Summary		Restore a revision
//	@Description	Makes the document of revision rev the current one, as a new generation (history is never rewritten). No body.
//	@Tags			config
//	@Produce		json
//	@Param			rev			path		integer	true	"generation to restore"
//	@Param			dry_run		query		bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string	false	"ETag the current document (GET /api/v1/config) must still have"
//	@Success		200			{object}	WriteResult{result=config.Config}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem	"no such revision kept"
//	@Failure		409			{object}	Problem	"the OS refused part of it (nothing changed)"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		422			{object}	Problem	"the revision is not valid on this machine (e.g. CPU ids)"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/config/revisions/{rev}/restore [post]
func (s *server) restoreRevision(w http.ResponseWriter, r *http.Request) error {
	rev, err := generationParam("rev", param(r, "rev"))
	if err != nil {
		return err
	}
	doc, err := s.revision(s.store.Current(), rev)
	if err != nil {
		return err
	}
	return s.write(w, r, writeOp{
		target: configView,
		mutate: func(c *config.Config) (string, error) {
			g := c.Generation
			*c = *doc.Clone()
			c.Generation = g
			return "", nil
		},
		result:    func(c *config.Config) any { return c },
		status:    http.StatusOK,
		restoreOf: rev,
	})
}

// ---- tuning ----

func tuningView(c *config.Config) (any, error) { return c.Tuning, nil }

// getTuning godoc
//
//	@Summary	Get the data-plane tuning
//	@Tags		tuning
//	@Produce	json
//	@Success	200	{object}	config.Tuning
//	@Header		200	{string}	ETag	"strong ETag"
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/tuning [get]
func (s *server) getTuning(w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, tuningView)
}

// putTuning godoc
//
//	@Summary		Replace the data-plane tuning
//	@Description	Fields left out (or 0) take their defaults. Some changes restart the loops (see the plan).
//	@Tags			tuning
//	@Accept			json
//	@Produce		json
//	@Param			tuning		body		config.Tuning	true	"the tuning"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string			false	"ETag the tuning must still have"
//	@Success		200			{object}	WriteResult{result=config.Tuning}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/tuning [put]
func (s *server) putTuning(w http.ResponseWriter, r *http.Request) error {
	var in config.Tuning
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	return s.writeTuning(w, r, func(*config.Tuning) (config.Tuning, error) { return in, nil })
}

// patchTuning godoc
//
//	@Summary		Change the data-plane tuning (JSON merge patch)
//	@Description	RFC 7386, e.g. {"nbthread":2,"sched":{"urgent":33,"normal":50,"bulk":17}}.
//	@Tags			tuning
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Param			patch		body		object	true	"merge patch"
//	@Param			dry_run		query		bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string	false	"ETag the tuning must still have"
//	@Success		200			{object}	WriteResult{result=config.Tuning}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/tuning [patch]
func (s *server) patchTuning(w http.ResponseWriter, r *http.Request) error {
	mp, err := readPatch(r)
	if err != nil {
		return err
	}
	return s.writeTuning(w, r, func(cur *config.Tuning) (config.Tuning, error) {
		var t config.Tuning
		err := patchInto(*cur, mp, &t)
		return t, err
	})
}

func (s *server) writeTuning(w http.ResponseWriter, r *http.Request, build func(cur *config.Tuning) (config.Tuning, error)) error {
	return s.write(w, r, writeOp{
		target: tuningView,
		mutate: func(c *config.Config) (string, error) {
			t, err := build(&c.Tuning)
			if err != nil {
				return "", err
			}
			c.Tuning = t
			return "/tuning", nil
		},
		result: func(c *config.Config) any { return c.Tuning },
		status: http.StatusOK,
	})
}
