package config

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
)

// naiveSpan is ServerSpan by its definition.
func naiveSpan(a, b []*Server) (head, tail int) {
	n := min(len(a), len(b))
	for head < n && a[head].equal(b[head]) {
		head++
	}
	for tail < n-head && a[len(a)-1-tail].equal(b[len(b)-1-tail]) {
		tail++
	}
	return head, tail
}

func spanServers(n int) []*Server {
	out := make([]*Server, n)
	for i := range out {
		w := 1 + i%7
		out[i] = &Server{Name: fmt.Sprintf("s%d", i), Address: "10.0.0.1", Port: 1000 + i, Weight: &w, AdminState: AdminReady}
	}
	return out
}

// ServerSpan compares pointers first and Server.equal where they differ:
// it must give the span its definition gives, whatever the sizes and
// wherever the changes fall, for lists that share their servers (a copy
// by OwnServers, changed servers replaced by changed copies) and for lists
// of equal servers at other addresses.
func TestServerSpanAsItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := rng.IntN(300)
		a := spanServers(n)
		var b []*Server
		if rng.IntN(4) == 0 {
			b = spanServers(n) // equal values, other pointers
		} else {
			b = append([]*Server(nil), a...)
		}
		for range rng.IntN(4) {
			switch op := rng.IntN(4); {
			case op == 0 && len(b) > 0: // a's servers are never written: copies
				i := rng.IntN(len(b))
				s := *b[i]
				s.Port = 1
				b[i] = &s
			case op == 1 && len(b) > 0:
				w := 99
				i := rng.IntN(len(b))
				s := *b[i]
				s.Weight = &w
				b[i] = &s
			case op == 2:
				b = append(b, &Server{Name: "new", Address: "10.0.0.2", Port: 9})
			case op == 3 && len(b) > 0:
				i := rng.IntN(len(b))
				b = append(b[:i:i], b[i+1:]...)
			}
		}
		if rng.IntN(8) == 0 && len(b) > 0 && b[0].Weight != nil { // the same server at another address
			s := *b[0]
			w := *s.Weight
			s.Weight = &w
			b[0] = &s
		}
		h, tl := ServerSpan(a, b)
		wh, wt := naiveSpan(a, b)
		if h != wh || tl != wt {
			t.Fatalf("round %d: ServerSpan = %d, %d; want %d, %d (len %d, %d)", round, h, tl, wh, wt, len(a), len(b))
		}
	}
}

func BenchmarkServerSpanOfACopy(b *testing.B) {
	a := spanServers(10000)
	c := append([]*Server(nil), a...)
	s := *c[5000]
	s.AdminState = AdminDrain
	c[5000] = &s
	for b.Loop() {
		if h, t := ServerSpan(a, c); h != 5000 || t != 4999 {
			b.Fatal(h, t)
		}
	}
}

// TestChangeSpansHandedToApply: Update hands Apply the spans it found
// (SpansOf), which give for each backend what ServerSpan gives against the
// config the write was built on; asked about other configs, or about a
// backend of another list, Servers computes the span instead of answering
// with the store's.
func TestChangeSpansHandedToApply(t *testing.T) {
	s := openStore(t, t.TempDir(), "")
	mustUpdate(t, s, func(c *Config) error {
		c.Backends = append(c.Backends, Backend{Name: "a", Servers: spanServers(300)}, Backend{Name: "b", Servers: spanServers(5)})
		return nil
	})
	for round, change := range []func(c *Config){
		func(c *Config) { c.OwnServer(0, 150).Port = 7 },                                                       // one server of a
		func(c *Config) { l := c.OwnServers(0); *l = append((*l)[:10], (*l)[11:]...) },                         // one deleted
		func(c *Config) { l := c.OwnServers(1); *l = append(*l, &Server{Name: "n", Address: "::1", Port: 1}) }, // one added to b
		func(c *Config) { c.Backends = append(c.Backends[1:], c.Backends[0]); c.OwnServer(0, 0).Port = 9 },     // backends moved, b changed
	} {
		cur := s.Current()
		var checked bool
		_, err := s.Update(t.Context(), func(c *Config) error { change(c); return nil }, UpdateOptions{ShareServers: true,
			Apply: func(ctx context.Context, next *Config) error {
				sp := SpansOf(ctx)
				if sp == nil {
					return fmt.Errorf("round %d: no spans in the context", round)
				}
				for i := range next.Backends {
					k := cur.FindBackend(next.Backends[i].Name)
					old := &cur.Backends[k]
					h, tl := sp.Servers(cur, old, next, i)
					if wh, wt := naiveSpan(old.Servers, next.Backends[i].Servers); h != wh || tl != wt {
						return fmt.Errorf("round %d backend %d: span %d,%d, want %d,%d", round, i, h, tl, wh, wt)
					}
					// another config than the store's: computed
					other := &Backend{Servers: spanServers(len(old.Servers))}
					h, tl = sp.Servers(cur, other, next, i)
					if wh, wt := naiveSpan(other.Servers, next.Backends[i].Servers); h != wh || tl != wt {
						return fmt.Errorf("round %d backend %d: span against another list %d,%d, want %d,%d", round, i, h, tl, wh, wt)
					}
					if h, tl = sp.Servers(next, old, next, i); h != len(old.Servers) && len(next.Backends[i].Servers) == len(old.Servers) && sameList(old.Servers, next.Backends[i].Servers) {
						return fmt.Errorf("round %d: a list against itself: %d,%d", round, h, tl)
					}
				}
				checked = true
				return nil
			}})
		if err != nil {
			t.Fatal(err)
		}
		if !checked {
			t.Fatalf("round %d: Apply not called", round)
		}
	}
	var nilSpans *ChangeSpans // no spans (a cluster node's Apply): computed
	c := s.Current()
	if h, tl := nilSpans.Servers(c, &c.Backends[0], c, 0); h != len(c.Backends[0].Servers) || tl != 0 {
		t.Fatalf("nil spans of a list against itself: %d,%d", h, tl)
	}
}
