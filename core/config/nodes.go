package config

import (
	"slices"
	"strconv"
)

// Node-local settings and "${NODE_ADDRESS}": one document runs
// on every node of a cluster, but machines differ. Config.Nodes holds, per
// node name, the settings that replace the document's on that node
// (tuning.nbthread, cpu_map, irq), and a bind's address may be
// NodeAddress, which each node replaces with its own --node-address. Each
// node runs ForNode's result, not the document itself.

// NodeAddress is the one placeholder a document may hold: as a bind's
// address it stands for each node's --node-address.
const NodeAddress = "${NODE_ADDRESS}"

// ForNode returns the config node name runs: its section of Nodes applied
// over tuning.nbthread, cpu_map and irq, and every bind address
// NodeAddress replaced by address. It returns c itself, allocating
// nothing, when neither applies (this runs on every apply, and the
// document may hold 10 000 servers). The result shares every part it does
// not change with c: like c, it must not be mutated (Clone it first).
// Nodes stays in the result, so that validating it with the node's Env
// (Env.NodeName = name) checks the section against the machine.
//
// When a bind uses NodeAddress and address is empty, ForNode returns a
// *ValidationError (code invalid, one per such bind, pointing at its
// address): the node must be started with --node-address. address itself
// is not checked here: validating the result does it, as for any bind.
func (c *Config) ForNode(name, address string) (*Config, error) {
	placeholder := c.usesNodeAddress()
	if placeholder && address == "" {
		return nil, c.nodeAddressMissing(name)
	}
	out := c.WithNodeSettings(name)
	if !placeholder {
		return out, nil
	}
	if out == c {
		cp := *c
		out = &cp
	}
	out.Frontends = slices.Clone(c.Frontends)
	for i := range out.Frontends {
		f := &out.Frontends[i]
		if !slices.ContainsFunc(f.Binds, isNodeAddressBind) {
			continue
		}
		f.Binds = slices.Clone(f.Binds)
		for j := range f.Binds {
			if isNodeAddressBind(f.Binds[j]) {
				f.Binds[j].Address = address
			}
		}
	}
	return out, nil
}

// WithNodeSettings is ForNode without the addresses: c with node name's
// section applied over tuning.nbthread, cpu_map and irq, or c itself when
// the node has none (or an empty one). What it does not change is shared
// with c. The admin API's placement views read it.
func (c *Config) WithNodeSettings(name string) *Config {
	s, ok := c.Nodes[name]
	if !ok || s.Nbthread == nil && s.CPUMap == nil && s.IRQ == nil {
		return c
	}
	out := *c
	if s.Nbthread != nil {
		out.Tuning.Nbthread = *s.Nbthread
	}
	if s.CPUMap != nil {
		out.CPUMap = *s.CPUMap
	}
	if s.IRQ != nil {
		out.IRQ = *s.IRQ
	}
	return &out
}

func isNodeAddressBind(b Bind) bool { return b.Address == NodeAddress }

// usesNodeAddress reports whether a bind's address is NodeAddress.
func (c *Config) usesNodeAddress() bool {
	for i := range c.Frontends {
		for j := range c.Frontends[i].Binds {
			if c.Frontends[i].Binds[j].Address == NodeAddress {
				return true
			}
		}
	}
	return false
}

func (c *Config) nodeAddressMissing(name string) error {
	var p problems
	for i := range c.Frontends {
		for j := range c.Frontends[i].Binds {
			if c.Frontends[i].Binds[j].Address == NodeAddress {
				p.addf("/frontends/"+strconv.Itoa(i)+"/binds/"+strconv.Itoa(j)+"/address", CodeInvalid,
					"bind address %s needs this node's address: start node %q with --node-address", NodeAddress, name)
			}
		}
	}
	return p.err()
}

// NodeNames returns the names of the sections of Nodes, sorted.
func (c *Config) NodeNames() []string {
	names := make([]string, 0, len(c.Nodes))
	for n := range c.Nodes {
		names = append(names, n)
	}
	slices.Sort(names)
	return names
}

// nodeNbthread is the tuning.nbthread node name runs with (0: its CPU
// count).
func (c *Config) nodeNbthread(name string) int {
	if s, ok := c.Nodes[name]; ok && s.Nbthread != nil {
		return *s.Nbthread
	}
	return c.Tuning.Nbthread
}

func (s *NodeSettings) normalize() {
	if s.CPUMap != nil && s.CPUMap.Mode == "" {
		s.CPUMap.Mode = CPUMapNone
	}
	if s.IRQ != nil && s.IRQ.Policy == "" {
		s.IRQ.Policy = IRQPolicyNone
	}
}

// Clone returns a deep copy of the section.
func (s *NodeSettings) Clone() NodeSettings {
	var out NodeSettings
	if s.Nbthread != nil {
		n := *s.Nbthread
		out.Nbthread = &n
	}
	if s.CPUMap != nil {
		m := s.CPUMap.clone()
		out.CPUMap = &m
	}
	if s.IRQ != nil {
		q := s.IRQ.clone()
		out.IRQ = &q
	}
	return out
}

// nodes checks the sections of Nodes: names as object names, and
// the rules of the document's nbthread, cpu_map and irq applied to the
// values each node runs (its section over the document's). CPUs are
// checked against the Env only in the section of Env.NodeName.
func (v *validation) nodes() {
	for _, name := range v.c.NodeNames() {
		s := v.c.Nodes[name]
		np := "/nodes/" + escapePointer(name)
		if !ValidName(name) {
			v.p.addf(np, CodeFormat, "node name %q must be 1-%d characters of a-z, 0-9, '-' and '_', "+
				"starting and ending with a letter or digit", name, MaxNameLen)
		}
		local := v.env.NodeName != "" && name == v.env.NodeName
		nb := v.c.nodeNbthread(name)
		if nb == 0 && local {
			nb = len(v.env.CPUs)
		}
		if s.Nbthread != nil && nb > 0 {
			v.threadsOnNode(np+"/nbthread", name, nb, s.CPUMap == nil)
		}
		mode := v.c.CPUMap.Mode
		if s.CPUMap != nil {
			v.cpuMapRules(np+"/cpu_map", s.CPUMap, nb, local)
			mode = s.CPUMap.Mode
		}
		switch {
		case s.IRQ != nil:
			v.irqRules(np+"/irq", s.IRQ, mode, local)
		case s.CPUMap != nil && v.c.IRQ.Policy == IRQPolicySeparate && !pinnedMode(mode):
			v.p.addf(np+"/cpu_map/mode", CodeModeMismatch,
				"irq policy separate (/irq) needs pinned loops on node %q too: cpu_map mode auto or manual, not %q", name, mode)
		}
	}
}

// threadsOnNode reports the first bind thread, and (docMap) the first
// thread of the document's cpu_map, that a node running nb loop threads
// does not have.
func (v *validation) threadsOnNode(ptr, name string, nb int, docMap bool) {
	for i := range v.c.Frontends {
		for j := range v.c.Frontends[i].Binds {
			for k, t := range v.c.Frontends[i].Binds[j].Threads {
				if t >= nb {
					v.p.addf(ptr, CodeOutOfRange, "thread %d of /frontends/%d/binds/%d/threads/%d does not exist on node %q: its nbthread is %d",
						t, i, j, k, name, nb)
					return
				}
			}
		}
	}
	if !docMap {
		return
	}
	for i, tc := range v.c.CPUMap.Threads {
		if tc.Thread >= nb {
			v.p.addf(ptr, CodeOutOfRange, "thread %d of /cpu_map/threads/%d does not exist on node %q: its nbthread is %d",
				tc.Thread, i, name, nb)
			return
		}
	}
}

func pinnedMode(mode string) bool { return mode == CPUMapAuto || mode == CPUMapManual }

// nodes lists the sections of Nodes that differ, by name: "node/<name>"
// create, update (the members that changed) or delete. Such an item
// changes nothing on other nodes; its apply is what that node does:
// restart_loops when the nbthread it runs changes, else in_place.
func (d *differ) nodes(old, new *Config) {
	seen := func(c *Config, name string) bool { _, ok := c.Nodes[name]; return ok }
	apply := func(name string) string {
		if old.nodeNbthread(name) != new.nodeNbthread(name) {
			return ApplyRestartLoops
		}
		return ApplyInPlace
	}
	for _, name := range new.NodeNames() {
		obj := "node/" + name
		if !seen(old, name) {
			d.add(obj, OpCreate, apply(name), nil)
			continue
		}
		if f := changedFields(old.Nodes[name], new.Nodes[name]); len(f) > 0 {
			d.add(obj, OpUpdate, apply(name), f)
		}
	}
	for _, name := range old.NodeNames() {
		if !seen(new, name) {
			d.add("node/"+name, OpDelete, apply(name), nil)
		}
	}
}
