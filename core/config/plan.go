package config

import (
	"reflect"
	"slices"
	"strconv"
	"strings"
)

// Operations of a plan item.
const (
	OpCreate = "create"
	OpUpdate = "update"
	OpDelete = "delete"
)

// How the data plane applies a plan item, least disruptive first.
const (
	// ApplyInPlace swaps the snapshot; existing connections are untouched.
	ApplyInPlace = "in_place"
	// ApplyRebind opens or closes listening sockets; connections already
	// accepted live on.
	ApplyRebind = "rebind"
	// ApplyRestartLoops changes the number of loop threads: loops are
	// started or stopped and listeners redistributed.
	ApplyRestartLoops = "restart_loops"
)

// PlanItem is one change between two configs.
type PlanItem struct {
	// Object names what changes: "frontend/public",
	// "frontend/public/bind/b1", "backend/web", "backend/web/server/s1",
	// "tuning", "cpu_map", "irq", "certificate/site", "node/edge-1", and
	// "frontends", "backends", "certificates" when only their order changed.
	Object string   `json:"object"`
	Op     string   `json:"op"`               // create | update | delete
	Apply  string   `json:"apply"`            // in_place | rebind | restart_loops
	Fields []string `json:"fields,omitempty"` // changed JSON field names, for update
}

// Plan is the list of changes from one config to the next. Items is never
// nil; an empty plan means the two configs are equivalent.
type Plan struct {
	Items []PlanItem `json:"items"`
}

// Empty reports whether the plan changes nothing.
func (p Plan) Empty() bool { return len(p.Items) == 0 }

// maxSummaryItems bounds Summary so a revision listing stays one line,
// and maxSummaryFields the fields named per update.
const (
	maxSummaryItems  = 6
	maxSummaryFields = 4
)

// Summary renders the plan on one line: "create backend/web; update
// backend/web/server/s1 (weight, admin_state)" (at most six items, then
// "and N more"; an update names its changed fields, at most four, then
// "+N"), or "no change". The fields are what tells one update of an
// object from another in a revision list.
func (p Plan) Summary() string {
	if len(p.Items) == 0 {
		return "no change"
	}
	var b strings.Builder
	for i, it := range p.Items {
		if i == maxSummaryItems {
			b.WriteString("; and ")
			b.WriteString(strconv.Itoa(len(p.Items) - i))
			b.WriteString(" more")
			break
		}
		if i > 0 {
			b.WriteString("; ")
		}
		b.WriteString(it.Op)
		b.WriteByte(' ')
		b.WriteString(it.Object)
		if len(it.Fields) > 0 {
			b.WriteString(" (")
			for j, f := range it.Fields {
				if j == maxSummaryFields {
					b.WriteString(" +")
					b.WriteString(strconv.Itoa(len(it.Fields) - j))
					break
				}
				if j > 0 {
					b.WriteString(", ")
				}
				b.WriteString(f)
			}
			b.WriteByte(')')
		}
	}
	return b.String()
}

// Diff computes the plan that turns old into new (both Normalize()d; nil is
// the empty normalized config). The order is deterministic:
//
//  1. frontends, then backends, then tuning, cpu_map, irq, certificates
//     ("certificate/<name>", in_place: only metadata is compared, and a
//     new chain or key always comes with a new chain_sha256), then node
//     sections ("node/<name>" by name; it changes nothing on other nodes,
//     and its apply is what that node does: restart_loops when the nbthread
//     it runs changes, else in_place);
//  2. within frontends and backends, creates and updates in the order of new
//     (each object's update item before the items of its binds or servers),
//     then deletes in the order of old;
//  3. the binds of a created or deleted frontend and the servers of a created
//     or deleted backend are not listed: the parent's item covers them, and
//     its Apply is the most disruptive action among them (a frontend with
//     binds is created or deleted with "rebind").
//
// A list whose kept objects changed order is a change too (a server's
// place is its turn in roundrobin; a document read back must be the one
// written): "update backend/web (servers)" when the
// servers kept moved ("binds" for a frontend's binds), "update backends
// (order)", "update frontends (order)" or "update certificates (order)"
// for the document's lists, in_place, before the items of the list's
// objects.
//
// Objects are matched by name; a change of name is a delete and a create.
// The generation is not compared. Route changes are a frontend update
// (field "routes"). Every bind change is "rebind" (address, port, shards,
// backlog and threads all need new sockets); a tuning change is
// "restart_loops" when nbthread changes, else "in_place"; cpu_map and irq
// changes are "in_place" (the loops re-pin themselves).
func Diff(old, new *Config) Plan {
	return diff(old, new, false, nil)
}

// diff is Diff; unique says that the names in every list of both configs
// are unique (both passed Validate), which lets servers skip the common
// prefix and suffix of a long list without building name indexes; spans,
// when not nil, are serverSpans(old, new) (then both must be valid), so
// that only the servers between them are compared.
func diff(old, new *Config, unique bool, spans []listSpan) Plan {
	if old == nil {
		old = &Config{}
		old.Normalize()
	}
	if new == nil {
		new = &Config{}
		new.Normalize()
	}
	d := differ{items: []PlanItem{}, unique: unique || spans != nil}
	if spans != nil {
		d.spans = make(map[*Backend]*listSpan, len(new.Backends))
		for i := range new.Backends {
			d.spans[&new.Backends[i]] = &spans[i]
		}
	}
	d.frontends(old.Frontends, new.Frontends)
	d.backends(old.Backends, new.Backends)
	if f := changedFields(old.Tuning, new.Tuning); len(f) > 0 {
		apply := ApplyInPlace
		if old.Tuning.Nbthread != new.Tuning.Nbthread {
			apply = ApplyRestartLoops
		}
		d.add("tuning", OpUpdate, apply, f)
	}
	if f := changedFields(old.CPUMap, new.CPUMap); len(f) > 0 {
		d.add("cpu_map", OpUpdate, ApplyInPlace, f)
	}
	if f := changedFields(old.IRQ, new.IRQ); len(f) > 0 {
		d.add("irq", OpUpdate, ApplyInPlace, f)
	}
	at := len(d.items)
	if diffNamed(old.Certificates, new.Certificates, func(c *Certificate) string { return c.Name },
		func(c *Certificate) { d.add("certificate/"+c.Name, OpCreate, ApplyInPlace, nil) },
		func(o, c *Certificate) {
			if f := changedFields(*o, *c, "name"); len(f) > 0 {
				d.add("certificate/"+c.Name, OpUpdate, ApplyInPlace, f)
			}
		},
		func(c *Certificate) { d.add("certificate/"+c.Name, OpDelete, ApplyInPlace, nil) }) {
		d.reordered(at, "certificates", "order")
	}
	d.nodes(old, new)
	return Plan{Items: d.items}
}

type differ struct {
	items  []PlanItem
	unique bool // names unique within each list (see diff)
	// spans of the new config's backends (see diff), nil when unknown
	spans map[*Backend]*listSpan
}

func (d *differ) add(object, op, apply string, fields []string) {
	d.items = append(d.items, PlanItem{Object: object, Op: op, Apply: apply, Fields: fields})
}

// index maps names to positions; the first of duplicate names wins (Diff
// must not fail on a config that did not validate).
func index[T any](s []T, name func(*T) string) map[string]int {
	m := make(map[string]int, len(s))
	for i := range s {
		if _, dup := m[name(&s[i])]; !dup {
			m[name(&s[i])] = i
		}
	}
	return m
}

func frontendName(f *Frontend) string { return f.Name }
func bindName(b *Bind) string         { return b.Name }
func backendName(b *Backend) string   { return b.Name }
func serverName(s **Server) string    { return (*s).Name }

// diffNamed matches the items of two lists by name and reports each
// difference in new's order, then old's: created for an item only in new,
// matched for an item in both, deleted for an item only in old. Of
// duplicate names (a config that did not validate) only the first counts.
// It serves frontends, binds, backends, servers and certificates. moved
// reports that the items in both lists are not in the same order in new as
// in old: the list changed although no item did (a server's place is its
// turn in roundrobin).
func diffNamed[T any](old, new []T, name func(*T) string, created func(n *T), matched func(o, n *T), deleted func(o *T)) (moved bool) {
	oldIdx, newIdx := index(old, name), index(new, name)
	last := -1 // old index of the last item of new found in old
	for i := range new {
		n := &new[i]
		if newIdx[name(n)] != i {
			continue // duplicate name in an invalid config
		}
		if j, ok := oldIdx[name(n)]; ok {
			moved = moved || j < last
			last = j
			matched(&old[j], n)
		} else {
			created(n)
		}
	}
	for i := range old {
		o := &old[i]
		if _, ok := newIdx[name(o)]; !ok && oldIdx[name(o)] == i {
			deleted(o)
		}
	}
	return moved
}

// reordered records that the list field of object obj (an update item at
// index at, or none) changed order only: the field joins the update item
// there, or an update item of that field alone is inserted at at, before
// the items of the list's own objects.
func (d *differ) reordered(at int, obj, field string) {
	if at < len(d.items) && d.items[at].Object == obj && d.items[at].Op == OpUpdate {
		d.items[at].Fields = append(d.items[at].Fields, field)
		return
	}
	d.items = slices.Insert(d.items, at, PlanItem{Object: obj, Op: OpUpdate, Apply: ApplyInPlace, Fields: []string{field}})
}

func (d *differ) frontends(old, new []Frontend) {
	at := len(d.items)
	if diffNamed(old, new, frontendName,
		func(f *Frontend) { d.add("frontend/"+f.Name, OpCreate, frontendApply(f), nil) },
		func(o, f *Frontend) {
			obj := "frontend/" + f.Name
			at := len(d.items)
			if fields := changedFields(*o, *f, "name", "binds"); len(fields) > 0 {
				d.add(obj, OpUpdate, ApplyInPlace, fields)
			}
			if d.binds(obj, o.Binds, f.Binds) {
				d.reordered(at, obj, "binds")
			}
		},
		func(f *Frontend) { d.add("frontend/"+f.Name, OpDelete, frontendApply(f), nil) }) {
		d.reordered(at, "frontends", "order")
	}
}

func frontendApply(f *Frontend) string {
	if len(f.Binds) > 0 {
		return ApplyRebind
	}
	return ApplyInPlace
}

// binds reports that the binds kept changed order.
func (d *differ) binds(parent string, old, new []Bind) bool {
	return diffNamed(old, new, bindName,
		func(b *Bind) { d.add(parent+"/bind/"+b.Name, OpCreate, ApplyRebind, nil) },
		func(o, b *Bind) {
			if fields := changedFields(*o, *b, "name"); len(fields) > 0 {
				d.add(parent+"/bind/"+b.Name, OpUpdate, ApplyRebind, fields)
			}
		},
		func(b *Bind) { d.add(parent+"/bind/"+b.Name, OpDelete, ApplyRebind, nil) })
}

func (d *differ) backends(old, new []Backend) {
	at := len(d.items)
	if diffNamed(old, new, backendName,
		func(b *Backend) { d.add("backend/"+b.Name, OpCreate, ApplyInPlace, nil) },
		func(o, b *Backend) {
			obj := "backend/" + b.Name
			at := len(d.items)
			if fields := changedFields(*o, *b, "name", "servers"); len(fields) > 0 {
				d.add(obj, OpUpdate, ApplyInPlace, fields)
			}
			os, ns := o.Servers, b.Servers
			if sp := d.spans[b]; sp != nil && sp.had {
				// outside the span the servers are the same
				os, ns = sp.window(b.Servers)
			}
			if d.servers(obj, os, ns) {
				d.reordered(at, obj, "servers")
			}
		},
		func(b *Backend) { d.add("backend/"+b.Name, OpDelete, ApplyInPlace, nil) }) {
		d.reordered(at, "backends", "order")
	}
}

// servers reports that the servers kept changed order.
func (d *differ) servers(parent string, old, new []*Server) bool {
	if d.unique {
		// With unique names, a server equal to the one at the same place
		// (from the start, or from the end) of the other list gives no
		// item, and no name of the rest appears among those skipped: a
		// change of one server among 10 000 compares instead of indexing.
		for len(old) > 0 && len(new) > 0 && old[0].Name == new[0].Name && sameServer(old[0], new[0]) {
			old, new = old[1:], new[1:]
		}
		for len(old) > 0 && len(new) > 0 && old[len(old)-1].Name == new[len(new)-1].Name &&
			sameServer(old[len(old)-1], new[len(new)-1]) {
			old, new = old[:len(old)-1], new[:len(new)-1]
		}
	}
	return diffNamed(old, new, serverName,
		func(s **Server) { d.add(parent+"/server/"+(*s).Name, OpCreate, ApplyInPlace, nil) },
		func(o, s **Server) {
			if sameServer(*o, *s) {
				return // the common case with many servers: skip reflection
			}
			if fields := changedFields(**o, **s, "name"); len(fields) > 0 {
				d.add(parent+"/server/"+(*s).Name, OpUpdate, ApplyInPlace, fields)
			}
		},
		func(s **Server) { d.add(parent+"/server/"+(*s).Name, OpDelete, ApplyInPlace, nil) })
}

// changedFields lists the JSON names of the top-level fields of two values
// of the same struct type that differ, skipping the names in skip.
func changedFields[T any](a, b T, skip ...string) []string {
	va, vb := reflect.ValueOf(a), reflect.ValueOf(b)
	t := va.Type()
	var out []string
	for i := range t.NumField() {
		name, _, _ := strings.Cut(t.Field(i).Tag.Get("json"), ",")
		if name == "" || name == "-" || contains(skip, name) {
			continue
		}
		if !equalValues(va.Field(i), vb.Field(i)) {
			out = append(out, name)
		}
	}
	return out
}

func contains(s []string, x string) bool {
	for _, e := range s {
		if e == x {
			return true
		}
	}
	return false
}

// equalValues is reflect.DeepEqual for the model's JSON-shaped values,
// except that a nil slice equals an empty one (both encode the same way
// once omitempty or Normalize has run).
func equalValues(a, b reflect.Value) bool {
	switch a.Kind() {
	case reflect.Pointer:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return equalValues(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := range a.NumField() {
			if !equalValues(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	case reflect.Slice:
		if a.Len() != b.Len() {
			return false
		}
		for i := range a.Len() {
			if !equalValues(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Map:
		return reflect.DeepEqual(a.Interface(), b.Interface())
	}
	return a.Equal(b)
}
