package balance

import (
	"maps"
	"math/rand/v2"
	"strconv"
	"testing"
)

// TestNameIndexAsMap: a lineage of indexes derived one from the other
// (names added, removed, replaced, as buildFrom derives them) answers as a
// plain map would, and deriving never changes an index already made: each
// generation kept still answers as its own map.
func TestNameIndexAsMap(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	model := map[string]*Server{}
	x := newNameIndex(500)
	for i := range 500 {
		s := &Server{Name: "s" + strconv.Itoa(i)}
		x.add(s.Name, s)
		model[s.Name] = s
	}
	type gen struct {
		x     *nameIndex
		model map[string]*Server
	}
	var kept []gen
	check := func(step int, x *nameIndex, model map[string]*Server) {
		t.Helper()
		if x.len() != len(model) {
			t.Fatalf("step %d: len %d, want %d", step, x.len(), len(model))
		}
		got := map[string]*Server{}
		x.all(func(n string, s *Server) {
			if _, dup := got[n]; dup {
				t.Fatalf("step %d: all gives %s twice", step, n)
			}
			got[n] = s
		})
		if !maps.Equal(got, model) {
			t.Fatalf("step %d: all gives %d names, want %d", step, len(got), len(model))
		}
		for n, s := range model {
			if x.get(n) != s {
				t.Fatalf("step %d: get(%s) wrong", step, n)
			}
		}
		for i := range 20 {
			if n := "absent" + strconv.Itoa(i); x.get(n) != nil {
				t.Fatalf("step %d: get(%s) not nil", step, n)
			}
		}
	}
	next := 500
	for step := range 2000 {
		set := map[string]*Server{}
		for range 1 + rng.IntN(4) {
			switch rng.IntN(3) {
			case 0: // add a new name
				s := &Server{Name: "s" + strconv.Itoa(next)}
				next++
				set[s.Name] = s
			case 1: // remove one (or a name not there)
				set["s"+strconv.Itoa(rng.IntN(next))] = nil
			case 2: // replace one
				n := "s" + strconv.Itoa(rng.IntN(next))
				set[n] = &Server{Name: n}
			}
		}
		x = x.derive(set)
		for n, s := range set {
			if s == nil {
				delete(model, n)
			} else {
				model[n] = s
			}
		}
		check(step, x, model)
		if step%97 == 0 {
			kept = append(kept, gen{x, maps.Clone(model)})
		}
	}
	for i, g := range kept {
		check(-i, g.x, g.model)
	}
}
