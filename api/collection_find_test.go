package api

import (
	"strconv"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// BenchmarkServerFind10k: the look-up of a server by name in a backend of
// 10 000 (a create checks the name is free, its answer and its audit
// record find it again: each a scan of the list).
func BenchmarkServerFind10k(b *testing.B) {
	items := make([]*config.Server, 10000)
	for i := range items {
		items[i].Name = "s" + strconv.Itoa(i)
	}
	k := newCollections().servers
	b.Run("index", func(b *testing.B) {
		for b.Loop() {
			if k.find(items, "absent") != -1 {
				b.Fatal("found")
			}
		}
	})
	b.Run("nameOf", func(b *testing.B) {
		slow := *k
		slow.index = nil
		for b.Loop() {
			if slow.find(items, "absent") != -1 {
				b.Fatal("found")
			}
		}
	})
}

// TestServerFindAsNameOf: the servers' index finds what the generic
// look-up finds.
func TestServerFindAsNameOf(t *testing.T) {
	items := []*config.Server{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	k := newCollections().servers
	slow := *k
	slow.index = nil
	for _, n := range []string{"a", "b", "c", "d", ""} {
		if i := k.find(items, n); i >= 0 && items[i].Name != n {
			t.Fatalf("find(%q) = %d, which is %q", n, i, items[i].Name)
		}
		if got, want := k.find(items, n), slow.find(items, n); got != want {
			t.Fatalf("find(%q) = %d, want %d", n, got, want)
		}
	}
}
