package config_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// countingLoads counts the documents a Store loads from its storage.
type countingLoads struct {
	config.Storage
	loads atomic.Int64
}

func (c *countingLoads) Load(ctx context.Context) (*config.Config, config.RevisionInfo, error) {
	c.loads.Add(1)
	return c.Storage.Load(ctx)
}

// RefreshIfBehind loads nothing when the Store holds the generation
// already (a cluster node's own write, announced by its watch), and adopts
// a newer one another Store committed.
func TestRefreshIfBehindLoadsOnlyWhenBehind(t *testing.T) {
	st := &countingLoads{Storage: newDir(t)}
	a, err := config.OpenStore(st, "", nil, config.StoreOptions{Node: "a"})
	if err != nil {
		t.Fatal(err)
	}
	b, err := config.OpenStore(st, "", nil, config.StoreOptions{Node: "b"})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	res, err := a.Update(ctx, func(c *config.Config) error {
		c.Backends = append(c.Backends, config.Backend{Name: "web", Mode: config.ModeHTTP})
		return nil
	}, config.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	before := st.loads.Load()
	if changed, err := a.RefreshIfBehind(ctx, res.Generation); err != nil || changed {
		t.Fatalf("own generation: changed %v, err %v", changed, err)
	}
	if n := st.loads.Load() - before; n != 0 {
		t.Fatalf("the writer loaded its own generation %d again (%d loads)", res.Generation, n)
	}
	if changed, err := b.RefreshIfBehind(ctx, res.Generation); err != nil || !changed || b.Current().Generation != res.Generation {
		t.Fatalf("the other store did not adopt generation %d: changed %v, err %v, at %d", res.Generation, changed, err, b.Current().Generation)
	}
}
