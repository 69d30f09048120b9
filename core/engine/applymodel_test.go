package engine

import (
	"context"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// TestApplyServerChangesAsAMap: random sequences of server changes
// (weight, admin_state, appended, inserted, deleted) through Store.Update
// with UpdateOptions.ShareServers and Engine.Apply (the spans the store
// hands the engine, the in-place path, BuildChange and the derived name
// index) leave the running backend as a plain model says: the servers in
// order, each with its values, found by name, and a deleted one not.
func TestApplyServerChangesAsAMap(t *testing.T) {
	e, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	st, err := config.OpenStore(&memStorage{}, "", nil, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	type srv struct {
		w     int
		state string
	}
	model := map[string]srv{}
	var order []string
	next := 0
	newServer := func() config.Server {
		n := "s" + strconv.Itoa(next)
		next++
		model[n] = srv{config.DefaultWeight, config.AdminMaint}
		return config.Server{Name: n, Address: "10.0." + strconv.Itoa(next>>8&255) + "." + strconv.Itoa(next&255), Port: 80, AdminState: config.AdminMaint}
	}
	ctx := context.Background()
	if _, err := st.Update(ctx, func(c *config.Config) error {
		c.Tuning.Nbthread = 1
		be := config.Backend{Name: "big", Balance: config.BalanceSource}
		for range 300 {
			s := newServer()
			order = append(order, s.Name)
			be.Servers = append(be.Servers, &s)
		}
		c.Backends = append(c.Backends, be)
		return nil
	}, config.UpdateOptions{Apply: e.Apply}); err != nil {
		t.Fatal(err)
	}
	rng := rand.New(rand.NewPCG(5, 6))
	var gone []string
	structural, derived := 0, 0 // servers added or deleted; of those, built on the previous backend (buildFrom)
	for step := range 400 {
		var desc string
		prevBB := e.backends["big"].bb
		if _, err := st.Update(ctx, func(c *config.Config) error {
			bi := c.FindBackend("big")
			l := c.OwnServers(bi)
			i := rng.IntN(len(*l))
			s := c.OwnServer(bi, i) // a copy: (*l)[i] is Current's too
			switch op := rng.IntN(6); {
			case op == 0:
				w := rng.IntN(257)
				s.Weight = &w
				model[s.Name] = srv{w, model[s.Name].state}
				desc = "weight " + s.Name
			case op == 1:
				st := []string{config.AdminReady, config.AdminDrain, config.AdminMaint}[rng.IntN(3)]
				s.AdminState = st
				model[s.Name] = srv{model[s.Name].w, st}
				desc = "admin_state " + s.Name
			case op == 2:
				ns := newServer()
				*l = append(*l, &ns)
				order = append(order, ns.Name)
				desc = "append " + ns.Name
			case op == 3:
				ns := newServer()
				*l = slices.Insert(*l, i, &ns)
				order = slices.Insert(order, i, ns.Name)
				desc = "insert " + ns.Name
			case len(*l) > 2:
				desc = "delete " + s.Name
				delete(model, s.Name)
				gone = append(gone, s.Name)
				order = slices.Delete(order, i, i+1)
				*l = slices.Delete(*l, i, i+1)
			}
			return nil
		}, config.UpdateOptions{ShareServers: true, Apply: e.Apply}); err != nil {
			t.Fatalf("step %d (%s): %v", step, desc, err)
		}
		bb := e.backends["big"].bb
		if !strings.HasPrefix(desc, "weight") && !strings.HasPrefix(desc, "admin_state") {
			structural++
			if bb.DerivedFrom(prevBB) {
				derived++
			}
		}
		if len(bb.Servers) != len(order) {
			t.Fatalf("step %d (%s): %d servers, want %d", step, desc, len(bb.Servers), len(order))
		}
		for i, s := range bb.Servers {
			m := model[order[i]]
			if s.Name != order[i] || s.Weight() != m.w || s.AdminState() != m.state || s.Retired() {
				t.Fatalf("step %d (%s): server %d is %s w%d %s retired %v, want %s w%d %s", step, desc, i,
					s.Name, s.Weight(), s.AdminState(), s.Retired(), order[i], m.w, m.state)
			}
			if bb.Server(s.Name) != s {
				t.Fatalf("step %d (%s): the name index does not give %s", step, desc, s.Name)
			}
		}
		for _, n := range gone {
			if _, back := model[n]; !back && bb.Server(n) != nil {
				t.Fatalf("step %d (%s): the name index still gives deleted %s", step, desc, n)
			}
		}
	}
	t.Logf("%d of %d structural changes built on the previous backend", derived, structural)
	if derived < structural*9/10 {
		t.Fatalf("only %d of %d servers added or deleted were applied on the previous backend (buildFrom)", derived, structural)
	}
}
