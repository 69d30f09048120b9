package api

import (
	"fmt"
	"net/http"

	"github.com/spliced-proxy/spliced/core/config"
)

// Node-local settings: the section of the document's nodes
// member for one node name, which replaces tuning.nbthread, cpu_map and irq
// on that node. A section is part of the document: its writes go through
// the store like every other one (revisions, audit, If-Match, dry_run), and
// every node reads it; only the node of that name runs it.

// nodeSettingsPtr is the JSON pointer of node name's section.
func nodeSettingsPtr(name string) string { return "/nodes/" + escapePointer(name) }

// nodeSettingsView is the section of the node named in the path, or 404.
func nodeSettingsView(name string) func(c *config.Config) (any, error) {
	return func(c *config.Config) (any, error) {
		s, ok := c.Nodes[name]
		if !ok {
			return nil, fmt.Errorf("node %q has no settings: %w", name, config.ErrNotFound)
		}
		return s, nil
	}
}

// getNodeSettings godoc
//
//	@Summary		Node-local settings of one node
//	@Description	The section of the document's nodes member for this node name: nbthread, cpu_map and irq, each present only when it replaces the document's tuning.nbthread, cpu_map or irq on that node (machines differ). 404 when the node has no section (it runs the document's values).
//	@Tags			cluster
//	@Produce		json
//	@Param			name	path		string	true	"node name (--node-name)"
//	@Success		200		{object}	config.NodeSettings
//	@Header			200		{string}	ETag					"strong ETag of the section"
//	@Header			200		{integer}	X-Spliced-Generation	"generation read"
//	@Failure		404		{object}	Problem
//	@x-spliced-role	"viewer"
//	@Router			/api/v1/cluster/nodes/{name}/settings [get]
func (s *server) getNodeSettings(w http.ResponseWriter, r *http.Request) error {
	return s.get(w, r, nodeSettingsView(param(r, "name")))
}

// putNodeSettings godoc
//
//	@Summary		Set the node-local settings of one node
//	@Description	Creates or replaces the section of the document's nodes member for this node name. Members left out take the document's values on that node; {} is a section that replaces nothing. The name follows the rules of object names. The section is validated with the rules of the document's values for what that node runs (bind and cpu_map threads below its nbthread...); its CPUs are checked by that node when it applies it. Only that node's data plane changes (the plan item node/NAME says what it does there).
//	@Tags			cluster
//	@Accept			json
//	@Produce		json
//	@Param			name		path		string				true	"node name (--node-name)"
//	@Param			settings	body		config.NodeSettings	true	"the section"
//	@Param			dry_run		query		bool				false	"return the plan and change nothing"
//	@Param			If-Match	header		string				false	"ETag the section must still have"
//	@Success		200			{object}	WriteResult{result=config.NodeSettings}
//	@Header			200			{integer}	X-Spliced-Generation	"new generation"
//	@Failure		400			{object}	Problem
//	@Failure		409			{object}	Problem	"this node refused the change (its CPUs, a single node): nothing changed"
//	@Failure		412			{object}	Problem
//	@Failure		503			{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the store refused the write: nothing changed"
//	@Failure		507			{object}	Problem	"the state directory is full: nothing changed"
//	@Failure		413			{object}	Problem
//	@Failure		415			{object}	Problem
//	@Failure		422			{object}	Problem
//	@x-spliced-role	"admin"
//	@Router			/api/v1/cluster/nodes/{name}/settings [put]
func (s *server) putNodeSettings(w http.ResponseWriter, r *http.Request) error {
	name := param(r, "name")
	var in config.NodeSettings
	if err := decodeBody(r, &in); err != nil {
		return err
	}
	return s.write(w, r, writeOp{
		// A node without a section: If-Match compares with the ETag of null.
		target: func(c *config.Config) (any, error) {
			if sec, ok := c.Nodes[name]; ok {
				return sec, nil
			}
			return nil, nil
		},
		mutate: func(c *config.Config) (string, error) {
			if c.Nodes == nil {
				c.Nodes = map[string]config.NodeSettings{}
			}
			c.Nodes[name] = in.Clone() // mutate may run again: in stays as decoded
			return nodeSettingsPtr(name), nil
		},
		result: func(c *config.Config) any { return c.Nodes[name] },
		status: http.StatusOK,
	})
}

// deleteNodeSettings godoc
//
//	@Summary		Remove the node-local settings of one node
//	@Description	The node then runs the document's tuning.nbthread, cpu_map and irq.
//	@Tags			cluster
//	@Param			name		path	string	true	"node name (--node-name)"
//	@Param			dry_run		query	bool	false	"return the plan and change nothing"
//	@Param			If-Match	header	string	false	"ETag the section must still have"
//	@Success		204
//	@Success		200	{object}	WriteResult	"dry run"
//	@Header			204	{integer}	X-Spliced-Generation	"new generation"
//	@Failure		404	{object}	Problem
//	@Failure		409	{object}	Problem
//	@Failure		412	{object}	Problem
//	@Failure		503	{object}	Problem	"the process is stopping, the change did not apply in time (rolled back), or the store refused the write: nothing changed"
//	@Failure		507	{object}	Problem	"the state directory is full: nothing changed"
//	@x-spliced-role	"admin"
//	@Router			/api/v1/cluster/nodes/{name}/settings [delete]
func (s *server) deleteNodeSettings(w http.ResponseWriter, r *http.Request) error {
	name := param(r, "name")
	return s.write(w, r, writeOp{
		target: nodeSettingsView(name),
		mutate: func(c *config.Config) (string, error) {
			delete(c.Nodes, name)
			if len(c.Nodes) == 0 {
				c.Nodes = nil
			}
			return nodeSettingsPtr(name), nil
		},
	})
}
