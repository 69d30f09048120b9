package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
)

// reseedPath is the route of postReseed; the 409 store-behind problem
// names it.
const reseedPath = base + "/cluster/reseed"

// ReseedAnswer is the answer of POST /api/v1/cluster/reseed.
type ReseedAnswer struct {
	// DryRun is true when nothing was changed (?dry_run=true).
	DryRun bool `json:"dry_run,omitempty"`
	config.ReseedResult
	// Nodes (cluster mode, not on a dry run) says which live nodes run
	// the new generation after the wait (?wait_ms=).
	Nodes *core.WaitResult `json:"nodes,omitempty"`
}

// postReseed godoc
//
//	@Summary		Make this node's configuration the store's again
//	@Description	The way out of 409 store-behind: the cluster store (etcd) went back, restored from an older snapshot or wiped, behind the generation the nodes run, and no write can commit (nodes never adopt an older generation). This node's current document, unchanged, is committed as generation max(store's, node's)+1, with its certificates, conditional on what the store holds as read; every node adopts it as any newer generation (nodes that ran the same document only change their generation). A store that is not behind this node is refused (409 store-not-behind: a write, or the restore of a revision, changes it). No body.
//	@Tags			cluster
//	@Produce		json
//	@Param			dry_run	query		bool	false	"say what would happen, change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the new generation"
//	@Success		200		{object}	ReseedAnswer
//	@Header			200		{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400		{object}	Problem
//	@Failure		409		{object}	Problem	"the store is not behind this node (store-not-behind), or another node wrote first (write-race)"
//	@Failure		503		{object}	Problem	"the store cannot be reached"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/cluster/reseed [post]
func (s *server) postReseed(w http.ResponseWriter, r *http.Request) error {
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	wait, err := waitOf(r)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(r.Context()), storeTimeout)
	defer cancel()
	opts := config.UpdateOptions{DryRun: true, Actor: actor(r.Context()), Node: s.node.Name}
	auditBefore(r, s.store.Current())
	res, err := s.store.Reseed(ctx, opts)
	if err == nil && !dry {
		// The trail holds the write before the store persists it.
		if err = s.obs.audit.begin(r, res.Generation); err != nil {
			return &config.StorageError{Err: err}
		}
		opts.DryRun = false
		res, err = s.store.Reseed(ctx, opts)
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) && !errors.Is(err, config.ErrUnavailable) {
			err = fmt.Errorf("%w: no answer within %s: %w", config.ErrUnavailable, storeTimeout, err)
		}
		return err
	}
	plan := config.Plan{Items: []config.PlanItem{}}
	s.noteWrite(r, dry, &config.Result{Generation: res.Generation, Plan: plan, Config: res.Config}, nil)
	out := ReseedAnswer{DryRun: dry, ReseedResult: *res}
	if !dry {
		w.Header().Set("X-Spliced-Generation", strconv.FormatInt(res.Generation, 10))
		if s.cluster != nil {
			out.Nodes = s.syncAndWait(r, res.Generation, wait)
			setNodeHeaders(w.Header(), out.Nodes)
		}
	}
	return writeValue(w, http.StatusOK, out)
}
