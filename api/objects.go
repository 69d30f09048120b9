package api

import (
	"fmt"
	"net/http"
	"net/url"

	"github.com/spliced-proxy/spliced/core/config"
)

// collections of the config document, built once per server.
type collections struct {
	frontends *collection[config.Frontend]
	binds     *collection[config.Bind]
	backends  *collection[config.Backend]
	servers   *collection[*config.Server]
	// certificates: GET and writes have their own handlers
	// (certificates.go); the collection gives them create, replace and
	// delete.
	certificates *collection[config.Certificate]
}

func newCollections() collections {
	feURL := func(string) string { return base + "/frontends" }
	beURL := func(string) string { return base + "/backends" }
	return collections{
		certificates: &collection[config.Certificate]{
			kind: "certificate", param: "name",
			url:    func(string) string { return base + "/certificates" },
			nameOf: func(v *config.Certificate) *string { return &v.Name },
			slice: func(c *config.Config, _ string) (*[]config.Certificate, string, error) {
				return &c.Certificates, "/certificates", nil
			},
			inUse: certificateInUse,
		},
		frontends: &collection[config.Frontend]{
			kind: "frontend", param: "name", url: feURL,
			nameOf: func(v *config.Frontend) *string { return &v.Name },
			slice: func(c *config.Config, _ string) (*[]config.Frontend, string, error) {
				return &c.Frontends, "/frontends", nil
			},
		},
		binds: &collection[config.Bind]{
			kind: "bind", parent: "name", param: "bind",
			url:    func(fe string) string { return base + "/frontends/" + url.PathEscape(fe) + "/binds" },
			nameOf: func(v *config.Bind) *string { return &v.Name },
			slice: func(c *config.Config, fe string) (*[]config.Bind, string, error) {
				i := c.FindFrontend(fe)
				if i < 0 {
					return nil, "", fmt.Errorf("frontend %q: %w", fe, config.ErrNotFound)
				}
				return &c.Frontends[i].Binds, fmt.Sprintf("/frontends/%d/binds", i), nil
			},
		},
		backends: &collection[config.Backend]{
			kind: "backend", param: "name", url: beURL,
			nameOf: func(v *config.Backend) *string { return &v.Name },
			slice: func(c *config.Config, _ string) (*[]config.Backend, string, error) {
				return &c.Backends, "/backends", nil
			},
			inUse: backendInUse,
		},
		servers: &collection[*config.Server]{
			kind: "server", parent: "name", param: "server",
			url:    func(be string) string { return base + "/backends/" + url.PathEscape(be) + "/servers" },
			nameOf: func(v **config.Server) *string { return &(*v).Name },
			index:  config.FindServer,
			slice: func(c *config.Config, be string) (*[]*config.Server, string, error) {
				i := c.FindBackend(be)
				if i < 0 {
					return nil, "", fmt.Errorf("backend %q: %w", be, config.ErrNotFound)
				}
				return &c.Backends[i].Servers, fmt.Sprintf("/backends/%d/servers", i), nil
			},
			mutable: func(c *config.Config, be string) (*[]*config.Server, string, error) {
				i := c.FindBackend(be)
				if i < 0 {
					return nil, "", fmt.Errorf("backend %q: %w", be, config.ErrNotFound)
				}
				return c.OwnServers(i), fmt.Sprintf("/backends/%d/servers", i), nil
			},
		},
	}
}

// backendInUse refuses to delete a backend a frontend still sends traffic
// to; the problem lists every reference (pointers into the config document).
func backendInUse(c *config.Config, name string) error {
	var refs []config.FieldError
	for i, f := range c.Frontends {
		if f.DefaultBackend == name {
			refs = append(refs, config.FieldError{Field: fmt.Sprintf("/frontends/%d/default_backend", i), Code: "in_use",
				Message: fmt.Sprintf("frontend %q uses it as default_backend", f.Name)})
		}
		for j, rt := range f.Routes {
			if rt.Backend == name {
				refs = append(refs, config.FieldError{Field: fmt.Sprintf("/frontends/%d/routes/%d/backend", i, j), Code: "in_use",
					Message: fmt.Sprintf("route %d of frontend %q sends to it", j, f.Name)})
			}
		}
		if f.Rules != nil {
			for j, r := range f.Rules.Request {
				if r.Do.UseBackend == name {
					refs = append(refs, config.FieldError{Field: fmt.Sprintf("/frontends/%d/rules/request/%d/do/use_backend", i, j), Code: "in_use",
						Message: fmt.Sprintf("request rule %d of frontend %q sends to it", j, f.Name)})
				}
			}
		}
	}
	if refs == nil {
		return nil
	}
	return &apiError{Status: http.StatusConflict, Code: "in-use", Err: config.ErrInUse, Errors: refs,
		Detail: fmt.Sprintf("backend %q is still referenced: %s", name, refs[0].Message)}
}

// ---- frontends ----

// listFrontends godoc
//
//	@Summary	List frontends
//	@Tags		frontends
//	@Produce	json
//	@Success	200	{array}		config.Frontend
//	@Header		200	{string}	ETag					"strong ETag of the list"
//	@Header		200	{integer}	X-Spliced-Generation	"generation read"
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/frontends [get]
func (s *server) listFrontends(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.list(s, w, r)
}

// createFrontend godoc
//
//	@Summary		Create a frontend
//	@Description	Adds a frontend (with its binds and routes). Validated, persisted and applied before the answer. If-Match is compared with the ETag of the frontend list.
//	@Tags			frontends
//	@Accept			json
//	@Produce		json
//	@Param			frontend	body		config.Frontend	true	"the new frontend"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string			false	"ETag the frontend list must still have"
//	@Success		201			{object}	WriteResult{result=config.Frontend}
//	@Success		200			{object}	WriteResult{result=config.Frontend}	"dry run"
//	@Header			201			{string}	Location				"URL of the new frontend"
//	@Header			201			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem					"malformed body (bad JSON, bad UTF-8, too deep, unknown or duplicate field)"
//	@Failure		409			{object}	Problem					"name taken, or the OS refused a bind (nothing changed)"
//	@Failure		412			{object}	Problem					"If-Match does not match"
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem					"body over 1 MiB"
//	@Failure		415			{object}	Problem					"Content-Type is not application/json"
//	@Failure		422			{object}	Problem					"validation failed (wrong type, out of range, unresolved reference)"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/frontends [post]
func (s *server) createFrontend(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.create(s, w, r)
}

// getFrontend godoc
//
//	@Summary	Get a frontend
//	@Tags		frontends
//	@Produce	json
//	@Param		name	path		string	true	"frontend name"
//	@Success	200		{object}	config.Frontend
//	@Header		200		{string}	ETag	"strong ETag of the frontend"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/frontends/{name} [get]
func (s *server) getFrontend(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.get(s, w, r)
}

// putFrontend godoc
//
//	@Summary		Replace a frontend
//	@Description	Replaces the whole frontend, binds and routes included. The name in the path wins; a different name in the body is refused (422).
//	@Tags			frontends
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string			true	"frontend name"
//	@Param			frontend	body		config.Frontend	true	"the frontend"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string			false	"ETag the frontend must still have"
//	@Success		200			{object}	WriteResult{result=config.Frontend}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem	"the OS refused a bind (nothing changed)"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/frontends/{name} [put]
func (s *server) putFrontend(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.put(s, w, r)
}

// patchFrontend godoc
//
//	@Summary		Change a frontend (JSON merge patch)
//	@Description	RFC 7386: members of the patch replace those of the frontend, null removes one (back to its default), arrays are replaced whole.
//	@Tags			frontends
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Param			name		path		string	true	"frontend name"
//	@Param			patch		body		object	true	"merge patch, e.g. {\"maxconn\":20000}"
//	@Param			dry_run		query		bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string	false	"ETag the frontend must still have"
//	@Success		200			{object}	WriteResult{result=config.Frontend}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/frontends/{name} [patch]
func (s *server) patchFrontend(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.patch(s, w, r)
}

// deleteFrontend godoc
//
//	@Summary	Delete a frontend
//	@Tags		frontends
//	@Param		name		path	string	true	"frontend name"
//	@Param		dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header	string	false	"ETag the frontend must still have"
//	@Success	204
//	@Success	200	{object}	WriteResult	"dry run"
//	@Header		204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure	404	{object}	Problem
//	@Failure	409	{object}	Problem	"the data plane refused (nothing changed)"
//	@Failure	412	{object}	Problem
//	@Failure	503	{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router		/api/v1/frontends/{name} [delete]
func (s *server) deleteFrontend(w http.ResponseWriter, r *http.Request) error {
	return s.c.frontends.del(s, w, r)
}

// ---- binds ----

// listBinds godoc
//
//	@Summary	List the binds of a frontend
//	@Tags		binds
//	@Produce	json
//	@Param		name	path		string	true	"frontend name"
//	@Success	200		{array}		config.Bind
//	@Header		200		{string}	ETag	"strong ETag of the list"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/frontends/{name}/binds [get]
func (s *server) listBinds(w http.ResponseWriter, r *http.Request) error {
	return s.c.binds.list(s, w, r)
}

// createBind godoc
//
//	@Summary	Add a bind to a frontend
//	@Tags		binds
//	@Accept		json
//	@Produce	json
//	@Param		name		path		string		true	"frontend name"
//	@Param		bind		body		config.Bind	true	"the new bind"
//	@Param		dry_run		query		bool		false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header		string		false	"ETag the bind list must still have"
//	@Success	201			{object}	WriteResult{result=config.Bind}
//	@Success	200			{object}	WriteResult{result=config.Bind}	"dry run"
//	@Header		201			{string}	Location				"URL of the new bind"
//	@Header		201			{integer}	X-Spliced-Generation	"new generation"
//	@Failure	400			{object}	Problem
//	@Failure	404			{object}	Problem	"unknown frontend"
//	@Failure	409			{object}	Problem	"name taken, address in use (nothing changed)"
//	@Failure	412			{object}	Problem
//	@Failure	503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure	413			{object}	Problem
//	@Failure	415			{object}	Problem
//	@Failure	422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router		/api/v1/frontends/{name}/binds [post]
func (s *server) createBind(w http.ResponseWriter, r *http.Request) error {
	return s.c.binds.create(s, w, r)
}

// getBind godoc
//
//	@Summary	Get a bind
//	@Tags		binds
//	@Produce	json
//	@Param		name	path		string	true	"frontend name"
//	@Param		bind	path		string	true	"bind name"
//	@Success	200		{object}	config.Bind
//	@Header		200		{string}	ETag	"strong ETag of the bind"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/frontends/{name}/binds/{bind} [get]
func (s *server) getBind(w http.ResponseWriter, r *http.Request) error { return s.c.binds.get(s, w, r) }

// putBind godoc
//
//	@Summary	Replace a bind
//	@Tags		binds
//	@Accept		json
//	@Produce	json
//	@Param		name		path		string		true	"frontend name"
//	@Param		bind		path		string		true	"bind name"
//	@Param		body		body		config.Bind	true	"the bind"
//	@Param		dry_run		query		bool		false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header		string		false	"ETag the bind must still have"
//	@Success	200			{object}	WriteResult{result=config.Bind}
//	@Header		200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure	400			{object}	Problem
//	@Failure	404			{object}	Problem
//	@Failure	409			{object}	Problem
//	@Failure	412			{object}	Problem
//	@Failure	503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure	413			{object}	Problem
//	@Failure	415			{object}	Problem
//	@Failure	422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router		/api/v1/frontends/{name}/binds/{bind} [put]
func (s *server) putBind(w http.ResponseWriter, r *http.Request) error { return s.c.binds.put(s, w, r) }

// deleteBind godoc
//
//	@Summary	Remove a bind
//	@Tags		binds
//	@Param		name		path	string	true	"frontend name"
//	@Param		bind		path	string	true	"bind name"
//	@Param		dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header	string	false	"ETag the bind must still have"
//	@Success	204
//	@Success	200	{object}	WriteResult	"dry run"
//	@Header		204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure	404	{object}	Problem
//	@Failure	409	{object}	Problem
//	@Failure	412	{object}	Problem
//	@Failure	503	{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router		/api/v1/frontends/{name}/binds/{bind} [delete]
func (s *server) deleteBind(w http.ResponseWriter, r *http.Request) error {
	return s.c.binds.del(s, w, r)
}

// ---- backends ----

// listBackends godoc
//
//	@Summary	List backends
//	@Tags		backends
//	@Produce	json
//	@Success	200	{array}		config.Backend
//	@Header		200	{string}	ETag					"strong ETag of the list"
//	@Header		200	{integer}	X-Spliced-Generation	"generation read"
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/backends [get]
func (s *server) listBackends(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.list(s, w, r)
}

// createBackend godoc
//
//	@Summary	Create a backend
//	@Tags		backends
//	@Accept		json
//	@Produce	json
//	@Param		backend		body		config.Backend	true	"the new backend, servers included"
//	@Param		dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header		string			false	"ETag the backend list must still have"
//	@Success	201			{object}	WriteResult{result=config.Backend}
//	@Success	200			{object}	WriteResult{result=config.Backend}	"dry run"
//	@Header		201			{string}	Location				"URL of the new backend"
//	@Header		201			{integer}	X-Spliced-Generation	"new generation"
//	@Failure	400			{object}	Problem
//	@Failure	409			{object}	Problem	"name taken"
//	@Failure	412			{object}	Problem
//	@Failure	503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure	413			{object}	Problem
//	@Failure	415			{object}	Problem
//	@Failure	422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router		/api/v1/backends [post]
func (s *server) createBackend(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.create(s, w, r)
}

// getBackend godoc
//
//	@Summary	Get a backend
//	@Tags		backends
//	@Produce	json
//	@Param		name	path		string	true	"backend name"
//	@Success	200		{object}	config.Backend
//	@Header		200		{string}	ETag	"strong ETag of the backend"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/backends/{name} [get]
func (s *server) getBackend(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.get(s, w, r)
}

// putBackend godoc
//
//	@Summary		Replace a backend
//	@Description	Replaces the whole backend, servers included. The name in the path wins; a different name in the body is refused (422).
//	@Tags			backends
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string			true	"backend name"
//	@Param			backend		body		config.Backend	true	"the backend"
//	@Param			dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string			false	"ETag the backend must still have"
//	@Success		200			{object}	WriteResult{result=config.Backend}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/backends/{name} [put]
func (s *server) putBackend(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.put(s, w, r)
}

// patchBackend godoc
//
//	@Summary		Change a backend (JSON merge patch)
//	@Description	RFC 7386, e.g. {"health_check":{"type":"http","path":"/healthz"}}; {"health_check":null} removes the check.
//	@Tags			backends
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Param			name		path		string	true	"backend name"
//	@Param			patch		body		object	true	"merge patch"
//	@Param			dry_run		query		bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string	false	"ETag the backend must still have"
//	@Success		200			{object}	WriteResult{result=config.Backend}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/backends/{name} [patch]
func (s *server) patchBackend(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.patch(s, w, r)
}

// deleteBackend godoc
//
//	@Summary		Delete a backend
//	@Description	Refused with 409 while a frontend refers to it (default_backend or a route); the problem lists the references.
//	@Tags			backends
//	@Param			name		path	string	true	"backend name"
//	@Param			dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header	string	false	"ETag the backend must still have"
//	@Success		204
//	@Success		200	{object}	WriteResult	"dry run"
//	@Header			204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure		404	{object}	Problem
//	@Failure		409	{object}	Problem	"still referenced"
//	@Failure		412	{object}	Problem
//	@Failure		503	{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/backends/{name} [delete]
func (s *server) deleteBackend(w http.ResponseWriter, r *http.Request) error {
	return s.c.backends.del(s, w, r)
}

// ---- servers ----

// listServers godoc
//
//	@Summary	List the servers of a backend
//	@Tags		servers
//	@Produce	json
//	@Param		name	path		string	true	"backend name"
//	@Success	200		{array}		config.Server
//	@Header		200		{string}	ETag	"strong ETag of the list"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/backends/{name}/servers [get]
func (s *server) listServers(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.list(s, w, r)
}

// createServer godoc
//
//	@Summary	Add a server to a backend
//	@Tags		servers
//	@Accept		json
//	@Produce	json
//	@Param		name		path		string			true	"backend name"
//	@Param		server		body		config.Server	true	"the new server"
//	@Param		dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header		string			false	"ETag the server list must still have"
//	@Success	201			{object}	WriteResult{result=config.Server}
//	@Success	200			{object}	WriteResult{result=config.Server}	"dry run"
//	@Header		201			{string}	Location				"URL of the new server"
//	@Header		201			{integer}	X-Spliced-Generation	"new generation"
//	@Failure	400			{object}	Problem
//	@Failure	404			{object}	Problem	"unknown backend"
//	@Failure	409			{object}	Problem	"name taken"
//	@Failure	412			{object}	Problem
//	@Failure	503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure	413			{object}	Problem
//	@Failure	415			{object}	Problem
//	@Failure	422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router		/api/v1/backends/{name}/servers [post]
func (s *server) createServer(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.create(s, w, r)
}

// getServer godoc
//
//	@Summary	Get a server
//	@Tags		servers
//	@Produce	json
//	@Param		name	path		string	true	"backend name"
//	@Param		server	path		string	true	"server name"
//	@Success	200		{object}	config.Server
//	@Header		200		{string}	ETag	"strong ETag of the server"
//	@Failure	404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router		/api/v1/backends/{name}/servers/{server} [get]
func (s *server) getServer(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.get(s, w, r)
}

// putServer godoc
//
//	@Summary	Replace a server
//	@Tags		servers
//	@Accept		json
//	@Produce	json
//	@Param		name		path		string			true	"backend name"
//	@Param		server		path		string			true	"server name"
//	@Param		body		body		config.Server	true	"the server"
//	@Param		dry_run		query		bool			false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header		string			false	"ETag the server must still have"
//	@Success	200			{object}	WriteResult{result=config.Server}
//	@Header		200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure	400			{object}	Problem
//	@Failure	404			{object}	Problem
//	@Failure	409			{object}	Problem
//	@Failure	412			{object}	Problem
//	@Failure	503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure	413			{object}	Problem
//	@Failure	415			{object}	Problem
//	@Failure	422			{object}	Problem
//	@x-spliced-role	"operator"
//	@Router		/api/v1/backends/{name}/servers/{server} [put]
func (s *server) putServer(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.put(s, w, r)
}

// patchServer godoc
//
//	@Summary		Change a server (JSON merge patch)
//	@Description	RFC 7386, e.g. {"admin_state":"drain"} or {"weight":50}; {"weight":null} restores the default weight.
//	@Tags			servers
//	@Accept			json
//	@Accept			application/merge-patch+json
//	@Produce		json
//	@Param			name		path		string	true	"backend name"
//	@Param			server		path		string	true	"server name"
//	@Param			patch		body		object	true	"merge patch"
//	@Param			dry_run		query		bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param			If-Match	header		string	false	"ETag the server must still have"
//	@Success		200			{object}	WriteResult{result=config.Server}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		404			{object}	Problem
//	@Failure		409			{object}	Problem
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"operator"
//	@Router			/api/v1/backends/{name}/servers/{server} [patch]
func (s *server) patchServer(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.patch(s, w, r)
}

// deleteServer godoc
//
//	@Summary	Remove a server
//	@Tags		servers
//	@Param		name		path	string	true	"backend name"
//	@Param		server		path	string	true	"server name"
//	@Param		dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			wait_ms	query		integer	false	"cluster: wait this long (0..30000 ms, default 2000) for the nodes to apply the write; the answer says which did (nodes, X-Spliced-Nodes-*)"
//	@Param		If-Match	header	string	false	"ETag the server must still have"
//	@Success	204
//	@Success	200	{object}	WriteResult	"dry run"
//	@Header		204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure	404	{object}	Problem
//	@Failure	409	{object}	Problem
//	@Failure	412	{object}	Problem
//	@Failure	503	{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the state directory refused the write (read-only, I/O error): nothing changed"
//	@Failure	507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router		/api/v1/backends/{name}/servers/{server} [delete]
func (s *server) deleteServer(w http.ResponseWriter, r *http.Request) error {
	return s.c.servers.del(s, w, r)
}
