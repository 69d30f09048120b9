package api

import (
	"fmt"
	"net/http"
	"net/url"
	"strconv"

	"github.com/go-chi/chi/v5"
)

// The entries of the per-client limits (stick tables): runtime state of the
// data plane, not configuration (the limits themselves are a frontend's
// "limits", written through the frontend). Reading them is a viewer's,
// clearing one an operator's (HAProxy's "show table" and "clear table").

// Bounds of ?limit= of the entries endpoint: a page of the highest
// counters, never the whole table (up to 4 million entries).
const (
	defaultLimitEntries = 20
	maxLimitEntries     = 1000
)

// pathParam is the path parameter name, percent-decoded once: chi matches
// the escaped path when the request needed escapes (a key with "/" or
// "%"), the decoded one otherwise.
func pathParam(r *http.Request, name string) (string, error) {
	v := chi.URLParam(r, name)
	if r.URL.RawPath == "" {
		return v, nil
	}
	d, err := url.PathUnescape(v)
	if err != nil {
		return "", &apiError{Status: http.StatusBadRequest, Code: "bad-path", Detail: fmt.Sprintf("%s is not percent-encoded properly", name)}
	}
	return d, nil
}

// getLimitEntries godoc
//
//	@Summary		The clients of a limit with the highest counters
//	@Description	HAProxy's "show table": the entries of the limit's stick table with the highest counters — requests over req_rate's period, then current connections, then new connections over conn_rate's period, then error responses over err_rate's period (a rate the limit does not set reads 0) — with the number of clients tracked and the table's capacity. Each node has its own table (scope node or cluster alike): this is this node's. The table is read while the loops run: each entry is consistent, the whole is not a snapshot.
//	@Tags			frontends
//	@Produce		json
//	@Param			name	path		string	true	"frontend name"
//	@Param			limit	path		string	true	"limit name"
//	@Param			limit	query		integer	false	"entries to return (1-1000, default 20)"
//	@Success		200		{object}	core.LimitTable
//	@Failure		400		{object}	Problem	"bad ?limit="
//	@Failure		404		{object}	Problem	"no such frontend or limit running"
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/frontends/{name}/limits/{limit}/entries [get]
func (s *server) getLimitEntries(w http.ResponseWriter, r *http.Request) error {
	n := defaultLimitEntries
	if v := r.URL.Query().Get("limit"); v != "" {
		k, err := strconv.Atoi(v)
		if err != nil || k < 1 || k > maxLimitEntries {
			return &apiError{Status: http.StatusBadRequest, Code: "bad-query",
				Detail: fmt.Sprintf("limit must be an integer from 1 to %d, not %q", maxLimitEntries, truncate(v, 40))}
		}
		n = k
	}
	t, err := s.core.LimitEntries(chi.URLParam(r, "name"), chi.URLParam(r, "limit"), n)
	if err != nil {
		return err
	}
	w.Header().Set("Cache-Control", "no-store")
	return writeValue(w, http.StatusOK, t)
}

// deleteLimitEntry godoc
//
//	@Summary		Forget one client of a limit
//	@Description	HAProxy's "clear table … key": the client's rates restart from zero (an entry that holds connections keeps counting them). The key is as the entries show it, percent-encoded: an IP address (key src), the header's value, or "sha256:" and 64 hex digits (a certificate, or a header value longer than 64 bytes). This node's table only. Not a configuration change: no new generation, nothing persisted; audited as every write.
//	@Tags			frontends
//	@Param			name	path	string	true	"frontend name"
//	@Param			limit	path	string	true	"limit name"
//	@Param			key		path	string	true	"the client's key, percent-encoded"
//	@Param			dry_run	query	bool	false	"check that the entry exists and change nothing"
//	@Param			wait_ms	query	integer	false	"ignored: not a configuration change"
//	@Success		204
//	@Failure		400	{object}	Problem	"bad dry_run, or a key not percent-encoded properly"
//	@Failure		404	{object}	Problem	"no such frontend, limit, or entry"
//	@Failure		422	{object}	Problem	"not a key of this limit (an address for key src…)"
//	@x-spliced-role	"operator"
//	@Router			/api/v1/frontends/{name}/limits/{limit}/entries/{key} [delete]
func (s *server) deleteLimitEntry(w http.ResponseWriter, r *http.Request) error {
	dry, err := dryRun(r)
	if err != nil {
		return err
	}
	key, err := pathParam(r, "key")
	if err != nil {
		return err
	}
	fe, lim := chi.URLParam(r, "name"), chi.URLParam(r, "limit")
	if err := s.core.ClearLimitEntry(fe, lim, key, dry); err != nil {
		return err
	}
	if !dry {
		s.log.Info("limit entry cleared", "frontend", fe, "limit", lim, "key", key, "actor", actor(r.Context()))
	}
	w.WriteHeader(http.StatusNoContent)
	return nil
}
