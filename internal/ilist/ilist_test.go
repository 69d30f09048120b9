package ilist

import (
	"slices"
	"testing"
	"unsafe"
)

type item struct {
	link Link[item]
	id   int
}

var _ = [1]struct{}{}[unsafe.Offsetof(item{}.link)] // Link first: see the package doc

func ids(l *List[item]) []int {
	var out []int
	for e := l.Front(); e != nil; e = e.link.Next() {
		out = append(out, e.id)
	}
	return out
}

func TestListKeepsOrderThroughEveryOperation(t *testing.T) {
	var it [5]item
	for i := range it {
		it[i].id = i
	}
	var l List[item]
	if !l.Empty() || l.Front() != nil || l.PopFront() != nil {
		t.Fatal("zero List is not empty")
	}
	steps := []struct {
		name string
		do   func()
		want []int
	}{
		{"push back", func() {
			l.PushBack(&it[0].link)
			l.PushBack(&it[1].link)
			l.PushBack(&it[2].link)
		}, []int{0, 1, 2}},
		{"remove middle", func() { l.Remove(&it[1].link) }, []int{0, 2}},
		{"insert before head", func() { l.InsertBefore(&it[3].link, &it[0].link) }, []int{3, 0, 2}},
		{"insert before tail", func() { l.InsertBefore(&it[4].link, &it[2].link) }, []int{3, 0, 4, 2}},
		{"remove tail", func() { l.Remove(&it[2].link) }, []int{3, 0, 4}},
		{"push back after removing tail", func() { l.PushBack(&it[1].link) }, []int{3, 0, 4, 1}},
		{"pop front", func() {
			if e := l.PopFront(); e != &it[3] {
				t.Errorf("PopFront = %v, want item 3", e)
			}
		}, []int{0, 4, 1}},
		{"remove head", func() { l.Remove(&it[0].link) }, []int{4, 1}},
		{"push front", func() { l.PushFront(&it[0].link) }, []int{0, 4, 1}},
		{"remove front", func() { l.Remove(&it[0].link) }, []int{4, 1}},
		{"remove all", func() { l.Remove(&it[1].link); l.Remove(&it[4].link) }, nil},
		{"push front on empty", func() { l.PushFront(&it[2].link) }, []int{2}},
		{"remove the only one", func() { l.Remove(&it[2].link) }, nil},
	}
	for _, s := range steps {
		s.do()
		if got := ids(&l); !slices.Equal(got, s.want) {
			t.Fatalf("after %s: %v, want %v", s.name, got, s.want)
		}
		// walking backwards from the tail finds the same elements
		var back []int
		for lk := l.tail; lk != nil; lk = lk.prev {
			back = append([]int{elem(lk).id}, back...)
		}
		if !slices.Equal(back, s.want) {
			t.Fatalf("after %s: backwards %v, want %v", s.name, back, s.want)
		}
	}
	if !l.Empty() || l.head != nil || l.tail != nil {
		t.Fatal("list not empty after removing everything")
	}
	for i := range it {
		if it[i].link.prev != nil || it[i].link.next != nil {
			t.Fatalf("item %d still linked after removal", i)
		}
	}
}

func TestListDoesNotAllocate(t *testing.T) {
	var it [4]item
	var l List[item]
	allocs := testing.AllocsPerRun(100, func() {
		for i := range it {
			l.PushBack(&it[i].link)
		}
		l.Remove(&it[0].link)
		l.PushFront(&it[0].link)
		l.Remove(&it[2].link)
		l.InsertBefore(&it[2].link, &it[0].link)
		for l.PopFront() != nil {
		}
	})
	if allocs != 0 {
		t.Fatalf("%v allocations per run, want 0", allocs)
	}
}

func BenchmarkPushPop(b *testing.B) {
	var it [64]item
	var l List[item]
	b.ReportAllocs()
	for b.Loop() {
		for i := range it {
			l.PushBack(&it[i].link)
		}
		for l.PopFront() != nil {
		}
	}
}
