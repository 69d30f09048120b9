package balance

import "maps"

// nameIndex maps server names to the servers of one generation of a
// backend. Like the Backend that holds it, it is immutable once built, and
// a generation built on the one before (buildFrom: one server added,
// removed or replaced among thousands) shares its predecessor's index:
// base, a map that is never written after it was built, and over, the
// names changed since base (a nil server: removed). A change copies over,
// not the 10 000 names of base; when over grows past maxOverlay, or
// past base's size, the next change folds it into a new base (one copy of
// the map per maxOverlay changes).
type nameIndex struct {
	base map[string]*Server
	over map[string]*Server
	n    int // names with a server
}

// maxOverlay bounds the names a derived index holds apart from its base.
const maxOverlay = 128

// newNameIndex is an empty index with room for n names; add fills it
// (only while it is being built, before anyone else sees it).
func newNameIndex(n int) *nameIndex {
	return &nameIndex{base: make(map[string]*Server, n)}
}

// add sets name in an index being built by Build's general path.
func (x *nameIndex) add(name string, s *Server) {
	if _, ok := x.base[name]; !ok {
		x.n++
	}
	x.base[name] = s
}

// get returns the server of that name, or nil.
func (x *nameIndex) get(name string) *Server {
	if x == nil {
		return nil
	}
	if s, ok := x.over[name]; ok {
		return s
	}
	return x.base[name]
}

// len is the number of names with a server.
func (x *nameIndex) len() int {
	if x == nil {
		return 0
	}
	return x.n
}

// all calls fn for each name with its server.
func (x *nameIndex) all(fn func(name string, s *Server)) {
	if x == nil {
		return
	}
	for n, s := range x.base {
		if o, ok := x.over[n]; ok {
			s = o
		}
		if s != nil {
			fn(n, s)
		}
	}
	for n, s := range x.over {
		if _, ok := x.base[n]; !ok && s != nil {
			fn(n, s)
		}
	}
}

// derive returns a new index: x with the names of set (a nil server:
// removed). x is not changed.
func (x *nameIndex) derive(set map[string]*Server) *nameIndex {
	if len(set) == 0 {
		return x
	}
	out := &nameIndex{base: x.base, n: x.n}
	for name, s := range set {
		was := x.get(name) != nil
		switch {
		case was && s == nil:
			out.n--
		case !was && s != nil:
			out.n++
		}
	}
	if len(x.over)+len(set) > min(maxOverlay, max(len(x.base), 8)) {
		// fold: a new base of its own
		base := make(map[string]*Server, out.n)
		x.all(func(n string, s *Server) { base[n] = s })
		for n, s := range set {
			if s == nil {
				delete(base, n)
			} else {
				base[n] = s
			}
		}
		out.base = base
		return out
	}
	out.over = make(map[string]*Server, len(x.over)+len(set))
	maps.Copy(out.over, x.over)
	for n, s := range set {
		if s == nil {
			if _, inBase := x.base[n]; !inBase {
				delete(out.over, n) // never in base: nothing to hide
				continue
			}
		}
		out.over[n] = s
	}
	return out
}
