package config

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// naiveSpan is ServerSpan by its definition.
func naiveSpan(a, b []Server) (head, tail int) {
	n := min(len(a), len(b))
	for head < n && a[head].equal(&b[head]) {
		head++
	}
	for tail < n-head && a[len(a)-1-tail].equal(&b[len(b)-1-tail]) {
		tail++
	}
	return head, tail
}

func spanServers(n int) []Server {
	out := make([]Server, n)
	for i := range out {
		w := 1 + i%7
		out[i] = Server{Name: fmt.Sprintf("s%d", i), Address: "10.0.0.1", Port: 1000 + i, Weight: &w, AdminState: AdminReady}
	}
	return out
}

// ServerSpan compares copies by blocks of bytes and anything else server
// by server: both must give the span its definition gives, whatever the
// sizes and wherever the changes fall (block edges included).
func TestServerSpanAsItsDefinition(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 2000 {
		n := rng.IntN(300)
		a := spanServers(n)
		var b []Server
		if rng.IntN(4) == 0 {
			b = spanServers(n) // equal values, other pointers: no block is the same bytes
		} else {
			b = append([]Server(nil), a...)
		}
		for range rng.IntN(4) {
			switch op := rng.IntN(4); {
			case op == 0 && len(b) > 0:
				b[rng.IntN(len(b))].Port = 1
			case op == 1 && len(b) > 0:
				w := 99
				b[rng.IntN(len(b))].Weight = &w
			case op == 2:
				b = append(b, Server{Name: "new", Address: "10.0.0.2", Port: 9})
			case op == 3 && len(b) > 0:
				i := rng.IntN(len(b))
				b = append(b[:i:i], b[i+1:]...)
			}
		}
		if rng.IntN(8) == 0 && len(b) > 0 && b[0].Weight != nil { // the same value at another address
			w := *b[0].Weight
			b[0].Weight = &w
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
	c := append([]Server(nil), a...)
	c[5000].AdminState = AdminDrain
	for b.Loop() {
		if h, t := ServerSpan(a, c); h != 5000 || t != 4999 {
			b.Fatal(h, t)
		}
	}
}
