package config_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// cutOff is a cluster storage that answered a commit's race, then went
// away: Load answers the node's cache (an older generation, no error, as
// EtcdStorage does), Health says it is unreachable.
type cutOff struct {
	config.Storage
	cache *config.Config
	down  bool
}

func (s *cutOff) Commit(ctx context.Context, prev int64, info config.RevisionInfo, doc []byte, certs map[string][]byte) error {
	if !s.down {
		return s.Storage.Commit(ctx, prev, info, doc, certs)
	}
	return fmt.Errorf("commit: %w", config.ErrRace)
}

func (s *cutOff) Load(ctx context.Context) (*config.Config, config.RevisionInfo, error) {
	if !s.down {
		return s.Storage.Load(ctx)
	}
	return s.cache, config.RevisionInfo{Generation: s.cache.Generation}, nil
}

func (s *cutOff) Health() error {
	if !s.down {
		return nil
	}
	return fmt.Errorf("etcd 127.0.0.1:2379: %w", config.ErrUnavailable)
}

// TestWriteRacedThenCutOffIsUnavailable: a write that lost a race and
// then found the store unreachable (its Load answered the node's older
// cache) is ErrUnavailable (503), not ErrStoreBehind (the store did not go
// back: it cannot be asked).
func TestWriteRacedThenCutOffIsUnavailable(t *testing.T) {
	cut := &cutOff{Storage: newDir(t)}
	s, err := config.OpenStore(cut, "", nil, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := s.Update(context.Background(), func(c *config.Config) error {
			c.Backends = append(c.Backends, config.Backend{Name: name, Mode: "tcp"})
			return nil
		}, config.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cut.cache = s.Current().Clone()
	cut.cache.Generation = 1 // the last generation this node applied
	cut.down = true
	_, err = s.Update(context.Background(), func(c *config.Config) error {
		c.Backends = append(c.Backends, config.Backend{Name: "c", Mode: "tcp"})
		return nil
	}, config.UpdateOptions{})
	if !errors.Is(err, config.ErrUnavailable) || errors.Is(err, config.ErrStoreBehind) {
		t.Fatalf("Update: %v, want ErrUnavailable, not ErrStoreBehind", err)
	}
}
