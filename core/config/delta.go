package config

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
)

// Delta is a generation as the change from the one before it, the way a
// state directory's revision stores it between two snapshots: keyed by
// name, not a JSON merge patch (RFC 7386 replaces an array whole, and one
// server's weight would then rewrite every server of its backend).
//
//   - Rest: the document without its frontends and backends, whole, when
//     any of it (tuning, cpu_map, irq, certificates, nodes...) changed;
//   - Frontends, Backends: objects added (whole, appended in this order),
//     changed (whole; for a backend, all but its servers) and deleted (by
//     name);
//   - Servers: per backend that was there before, its servers added
//     (appended), changed and deleted.
//
// A delta is made only when the order of what stays is unchanged, so that
// applying it gives back the document byte for byte (MakeDelta says when
// it cannot; the caller then stores the whole document).
type Delta struct {
	Rest      json.RawMessage       `json:"rest,omitempty"`
	Frontends *ListDelta            `json:"frontends,omitempty"`
	Backends  *ListDelta            `json:"backends,omitempty"`
	Servers   map[string]*ListDelta `json:"servers,omitempty"`
}

// ListDelta is the change of a list of named objects.
type ListDelta struct {
	Add    []json.RawMessage `json:"add,omitempty"`
	Change []json.RawMessage `json:"change,omitempty"`
	Delete []string          `json:"delete,omitempty"`
}

func (l *ListDelta) empty() bool {
	return l == nil || len(l.Add) == 0 && len(l.Change) == 0 && len(l.Delete) == 0
}

// rest is c without frontends, backends and generation.
func rest(c *Config) Config {
	r := *c
	r.Frontends, r.Backends, r.Generation = nil, nil, 0
	return r
}

// MakeDelta returns the change from cur to next (both normalized), ok
// false when it is not expressible as a Delta (an object moved). Its cost
// is that of the changed objects' encoding plus one comparison per object
// (Server.equal for servers), not an encoding of the document.
func MakeDelta(cur, next *Config) (d *Delta, ok bool, err error) {
	return makeDelta(cur, next, nil)
}

// makeDelta is MakeDelta; spans, when not nil, are serverSpans(cur, next).
func makeDelta(cur, next *Config, spans []listSpan) (d *Delta, ok bool, err error) {
	if spans == nil {
		spans = serverSpans(cur, next)
	}
	at := make(map[*Backend]int, len(next.Backends)) // next's backends by address, for their spans
	for i := range next.Backends {
		at[&next.Backends[i]] = i
	}
	d = &Delta{}
	rc, rn := rest(cur), rest(next)
	a, err := json.Marshal(&rc)
	if err != nil {
		return nil, false, err
	}
	b, err := json.Marshal(&rn)
	if err != nil {
		return nil, false, err
	}
	if !bytes.Equal(a, b) {
		d.Rest = b
	}
	var fok, bok bool
	d.Frontends, fok, err = listDelta(cur.Frontends, next.Frontends, frontendName,
		func(o, n *Frontend) bool { return reflect.DeepEqual(o, n) }, nil)
	if err != nil || !fok {
		return nil, false, err
	}
	d.Backends, bok, err = listDelta(cur.Backends, next.Backends, backendName, backendHeadEqual,
		func(o, n *Backend) (bool, error) {
			// Only the servers between the equal head and tail can
			// differ; one added there must come last (appended).
			os, ns, tail := o.Servers, n.Servers, 0
			if i, ok := at[n]; ok && spans[i].had {
				os, ns = spans[i].window(n.Servers)
				tail = spans[i].tail
			}
			sd, ok, err := listDelta(os, ns, serverName,
				func(a, b **Server) bool { return sameServer(*a, *b) }, nil)
			if err != nil || !ok || len(sd.Add) > 0 && tail > 0 {
				return false, err
			}
			if !sd.empty() {
				if d.Servers == nil {
					d.Servers = map[string]*ListDelta{}
				}
				d.Servers[n.Name] = sd
			}
			return true, nil
		})
	if err != nil || !bok {
		return nil, false, err
	}
	if d.Frontends.empty() {
		d.Frontends = nil
	}
	if d.Backends.empty() {
		d.Backends = nil
	}
	return d, true, nil
}

// backendHeadEqual compares two backends but for their servers.
func backendHeadEqual(o, n *Backend) bool {
	a, b := *o, *n
	a.Servers, b.Servers = nil, nil
	return reflect.DeepEqual(&a, &b)
}

// marshalHead encodes a changed object; a backend without its servers
// (they are in Delta.Servers).
func marshalHead(v any) ([]byte, error) {
	if b, ok := v.(*Backend); ok {
		h := *b
		h.Servers = nil
		return json.Marshal(&h)
	}
	return json.Marshal(v)
}

// listDelta compares the named lists old and new: objects of old in new
// must keep their order, new ones come after them. inner, when set, runs
// on each pair of the same name (a backend's servers). Names are unique
// in each list (both validated).
func listDelta[T any](old, new []T, name func(*T) string, equal func(o, n *T) bool,
	inner func(o, n *T) (bool, error)) (*ListDelta, bool, error) {
	l := &ListDelta{}
	pair := func(o, n *T) (bool, error) {
		if !equal(o, n) {
			b, err := marshalHead(n)
			if err != nil {
				return false, err
			}
			l.Change = append(l.Change, b)
		}
		if inner != nil {
			return inner(o, n)
		}
		return true, nil
	}
	// A write keeps nearly every name in place (a field changed, one
	// added at the end, one deleted): the common head and tail are
	// compared by position, only what lies between is indexed.
	p := 0
	for p < len(old) && p < len(new) && name(&old[p]) == name(&new[p]) {
		if ok, err := pair(&old[p], &new[p]); err != nil || !ok {
			return nil, false, err
		}
		p++
	}
	t := 0
	for t < len(old)-p && t < len(new)-p && name(&old[len(old)-1-t]) == name(&new[len(new)-1-t]) {
		t++
	}
	om, nm := old[p:len(old)-t], new[p:len(new)-t]
	at := make(map[string]int, len(om))
	for i := range om {
		at[name(&om[i])] = i
	}
	seen := make([]bool, len(om))
	last := -1 // index in om of the last object of nm found there
	added := false
	for i := range nm {
		n := &nm[i]
		j, ok := at[name(n)]
		if !ok {
			b, err := json.Marshal(n)
			if err != nil {
				return nil, false, err
			}
			l.Add = append(l.Add, b)
			added = true
			continue
		}
		if added || j < last {
			return nil, false, nil // moved, or an old one after a new one
		}
		last, seen[j] = j, true
		if ok, err := pair(&om[j], n); err != nil || !ok {
			return nil, false, err
		}
	}
	if added && t > 0 {
		return nil, false, nil // old ones after the new ones
	}
	for i := range om {
		if !seen[i] {
			l.Delete = append(l.Delete, name(&om[i]))
		}
	}
	for i := range t {
		if ok, err := pair(&old[len(old)-t+i], &new[len(new)-t+i]); err != nil || !ok {
			return nil, false, err
		}
	}
	return l, true, nil
}

// Apply applies d to c (the generation d was made on, decoded as stored)
// in place; c.Generation is the caller's to set. Objects are decoded with
// the same strictness as a stored document.
func (d *Delta) Apply(c *Config) error {
	if len(d.Rest) > 0 {
		var r Config
		if err := DecodeBytes(d.Rest, &r); err != nil {
			return fmt.Errorf("delta: rest: %w", err)
		}
		r.Frontends, r.Backends, r.Generation = c.Frontends, c.Backends, c.Generation
		*c = r
	}
	var err error
	if c.Frontends, err = applyList(c.Frontends, d.Frontends, frontendName, nil); err != nil {
		return fmt.Errorf("delta: frontends: %w", err)
	}
	if c.Backends, err = applyList(c.Backends, d.Backends, backendName, func(o, n *Backend) { n.Servers = o.Servers }); err != nil {
		return fmt.Errorf("delta: backends: %w", err)
	}
	for bname, sd := range d.Servers {
		i := c.FindBackend(bname)
		if i < 0 {
			return fmt.Errorf("delta: servers of backend %q, which is not there", bname)
		}
		b := &c.Backends[i]
		if b.Servers, err = applyList(b.Servers, sd, serverName, nil); err != nil {
			return fmt.Errorf("delta: servers of backend %q: %w", bname, err)
		}
	}
	return nil
}

// applyList applies l to list: deletions, changes in place (keep copies
// what the change does not carry from the old object), additions at the
// end. The list is copied, never changed in place: c may share it with a
// snapshot. A change of a few servers among 10 000 (a cluster node
// applies one per write) looks them up by a scan, not by a name index of
// the 10 000.
func applyList[T any](list []T, l *ListDelta, name func(*T) string, keep func(o, n *T)) ([]T, error) {
	if l.empty() {
		return list, nil
	}
	out := make([]T, 0, len(list)+len(l.Add))
	switch {
	case len(l.Delete) == 0:
		out = append(out, list...)
	case len(l.Delete) <= fewByScan:
		gone := make([]int, 0, len(l.Delete)) // their indexes in list
		for _, n := range l.Delete {
			i := indexOf(list, n, name)
			if i < 0 || slices.Contains(gone, i) {
				return nil, fmt.Errorf("a deleted object is not there")
			}
			gone = append(gone, i)
		}
		slices.Sort(gone)
		from := 0
		for _, i := range gone {
			out = append(out, list[from:i]...)
			from = i + 1
		}
		out = append(out, list[from:]...)
	default:
		gone := make(map[string]bool, len(l.Delete))
		for _, n := range l.Delete {
			gone[n] = true
		}
		for i := range list {
			if !gone[name(&list[i])] {
				out = append(out, list[i])
			}
		}
		if len(out) != len(list)-len(l.Delete) {
			return nil, fmt.Errorf("a deleted object is not there")
		}
	}
	if len(l.Change) > 0 {
		var at map[string]int
		if len(l.Change) > fewByScan {
			at = make(map[string]int, len(out))
			for i := range out {
				at[name(&out[i])] = i
			}
		}
		for _, raw := range l.Change {
			var n T
			if err := DecodeBytes(raw, &n); err != nil {
				return nil, err
			}
			var i int
			if at != nil {
				k, ok := at[name(&n)]
				if !ok {
					k = -1
				}
				i = k
			} else {
				i = indexOf(out, name(&n), name)
			}
			if i < 0 {
				return nil, fmt.Errorf("changed object %q is not there", name(&n))
			}
			if keep != nil {
				keep(&out[i], &n)
			}
			out[i] = n
		}
	}
	for _, raw := range l.Add {
		var n T
		if err := DecodeBytes(raw, &n); err != nil {
			return nil, err
		}
		out = append(out, n)
	}
	return out, nil
}

// fewByScan is how many names applyList looks up by scanning the list
// rather than by indexing it (a scan of 10 000 names costs about what
// inserting 100 of them in a map does).
const fewByScan = 4

// indexOf returns the index of the object named n in list, or -1.
func indexOf[T any](list []T, n string, name func(*T) string) int {
	for i := range list {
		if name(&list[i]) == n {
			return i
		}
	}
	return -1
}
