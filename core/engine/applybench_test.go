package engine

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// memStorage is a config.Storage that keeps nothing but the generation:
// a change costs what it costs in memory (the store's copy, validation,
// plan, the delta made and encoded as the state directory would write it,
// the engine's apply), without the files and fsyncs of the durable side.
type memStorage struct {
	config.Storage // nil: a method the benchmark does not expect panics
	gen            int64
	bytes          int
}

func (m *memStorage) Kind() string { return "mem" }
func (m *memStorage) Load(context.Context) (*config.Config, config.RevisionInfo, error) {
	return nil, config.RevisionInfo{}, nil
}
func (m *memStorage) Health() error { return nil }
func (m *memStorage) Commit(_ context.Context, prev int64, info config.RevisionInfo, doc []byte, _ map[string][]byte) error {
	m.gen, m.bytes = info.Generation, len(doc)
	return nil
}
func (m *memStorage) CommitDelta(_ context.Context, cur, next *config.Config, info config.RevisionInfo, _ map[string][]byte) error {
	d, ok, err := config.MakeDelta(cur, next)
	if err != nil {
		return err
	}
	var b []byte
	if ok {
		b, err = json.Marshal(d)
	} else { // a server moved or inserted: the whole document
		b, err = json.Marshal(next)
	}
	if err != nil {
		return err
	}
	m.gen, m.bytes = info.Generation, len(b)
	return nil
}

// BenchmarkApplyServerChange10k measures one server change (weight,
// admin_state, a server added, one deleted) in a backend of 10 000 servers,
// in memory: Store.Update with UpdateOptions.ShareServers and the API's
// mutate (Config.OwnServers), the delta encoded, Engine.Apply on 1 loop.
// allocs/op and B/op do not depend on the machine's load.
func BenchmarkApplyServerChange10k(b *testing.B) {
	e, err := New(Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	st, err := config.OpenStore(&memStorage{}, "", nil, config.StoreOptions{})
	if err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	opts := config.UpdateOptions{ShareServers: true, Apply: e.Apply}
	if _, err := st.Update(ctx, func(c *config.Config) error {
		c.Tuning.Nbthread = 1
		be := config.Backend{Name: "big"}
		for i := range 10000 {
			be.Servers = append(be.Servers, &config.Server{Name: "s" + strconv.Itoa(i),
				Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 80, AdminState: config.AdminMaint})
		}
		c.Backends = append(c.Backends, be)
		return nil
	}, config.UpdateOptions{Apply: e.Apply}); err != nil {
		b.Fatal(err)
	}
	change := func(b *testing.B, fn func(i int, s *[]*config.Server)) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			i++
			if _, err := st.Update(ctx, func(c *config.Config) error {
				fn(i, c.OwnServers(c.FindBackend("big")))
				return nil
			}, opts); err != nil {
				b.Fatal(err)
			}
		}
	}
	b.Run("weight", func(b *testing.B) {
		change(b, func(i int, s *[]*config.Server) {
			w := 1 + i%2
			sv := *(*s)[5000] // a copy: the server is Current's too
			sv.Weight = &w
			(*s)[5000] = &sv
		})
	})
	b.Run("admin_state", func(b *testing.B) {
		change(b, func(i int, s *[]*config.Server) {
			sv := *(*s)[5000]
			sv.AdminState = []string{config.AdminMaint, config.AdminDrain}[i%2]
			(*s)[5000] = &sv
		})
	})
	b.Run("add+delete", func(b *testing.B) {
		change(b, func(_ int, s *[]*config.Server) {
			// by what the list holds, not by i's parity: a run of
			// -count or a b.Loop restart begins where the last ended
			if l := *s; l[len(l)-1].Name != "added" {
				*s = append(*s, &config.Server{Name: "added", Address: "10.9.9.9", Port: 80, AdminState: config.AdminMaint})
			} else {
				*s = l[:len(l)-1]
			}
		})
	})
}
