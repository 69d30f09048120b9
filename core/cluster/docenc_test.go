package cluster

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"strconv"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// docEncoder gives json.Marshal's bytes, whatever the writes between two
// documents: servers changed, added, deleted at either end or in the
// middle, backends added, deleted, changed, emptied.
func TestDocEncoderIsJSONMarshal(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	c := testConfig(t, 1, 50, "a", "b")
	var e docEncoder
	check := func(step int, what string) {
		t.Helper()
		got, err := e.encode(c)
		if err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(c)
		if !bytes.Equal(got, want) {
			t.Fatalf("step %d (%s): encoded\n%s\nwant\n%s", step, what, got, want)
		}
	}
	check(0, "first")
	check(0, "again, unchanged")
	n := 0
	for step := 1; step <= 400; step++ {
		next := c.CloneSharingServers()
		bi := rng.IntN(len(next.Backends))
		var what string
		switch k := rng.IntN(8); {
		case k == 0 && len(next.Backends) < 5:
			n++
			next.Backends = append(next.Backends, testConfig(t, 0, rng.IntN(4), "n"+strconv.Itoa(n)).Backends...)
			what = "backend added"
		case k == 1 && len(next.Backends) > 1:
			next.Backends = append(next.Backends[:bi:bi], next.Backends[bi+1:]...)
			what = "backend deleted"
		case k == 2:
			next.Backends[bi].Balance = []string{"roundrobin", "leastconn", "source"}[rng.IntN(3)]
			what = "backend head changed"
		default:
			list := next.OwnServers(bi)
			switch j := rng.IntN(4); {
			case j == 0 || len(*list) == 0:
				n++
				s := config.Server{Name: "x" + strconv.Itoa(n), Address: "10.9.9.9", Port: 1 + rng.IntN(60000)}
				s.Normalize()
				at := rng.IntN(len(*list) + 1)
				*list = append((*list)[:at], append([]*config.Server{&s}, (*list)[at:]...)...)
				what = "server added at " + strconv.Itoa(at)
			case j == 1:
				at := rng.IntN(len(*list))
				*list = append((*list)[:at], (*list)[at+1:]...)
				what = "server deleted at " + strconv.Itoa(at)
			default:
				at := rng.IntN(len(*list))
				w := rng.IntN(257)
				next.OwnServer(bi, at).Weight = &w
				what = "server changed at " + strconv.Itoa(at)
			}
		}
		c = next
		check(step, what)
	}
}

// The writer's encoding of the next document at 10 000 servers, one
// server changed: BenchmarkMarshalDocument is what it replaced.
func BenchmarkDocEncoder(b *testing.B) {
	cur, next := weightChange(b)
	var e docEncoder
	b.ReportAllocs()
	for i := 0; b.Loop(); i++ {
		c := cur
		if i%2 == 1 {
			c = next
		}
		if _, err := e.encode(c); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkMarshalDocument(b *testing.B) {
	_, next := weightChange(b)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := json.Marshal(next); err != nil {
			b.Fatal(err)
		}
	}
}
