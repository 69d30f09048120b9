package config_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/config/storetest"
)

// TestDirStorageContract: the state directory passes the Storage contract.
func TestDirStorageContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) config.Storage {
		return newDir(t)
	})
}

// unreachable is a storage that cannot be reached (etcd down, no cache).
type unreachable struct{ config.Storage }

func (unreachable) Kind() string { return "etcd" }
func (unreachable) Load(context.Context) (*config.Config, config.RevisionInfo, error) {
	return nil, config.RevisionInfo{}, fmt.Errorf("etcd 127.0.0.1:2379: %w", config.ErrUnavailable)
}

// TestOpenStoreFailsOnAnUnreachableStorage: OpenStore returns the Load's
// ErrUnavailable as is (nothing is bootstrapped over a storage that could
// hold a document), and StorageHealth is the storage's Health unchanged.
func TestOpenStoreFailsOnAnUnreachableStorage(t *testing.T) {
	boot := filepath.Join(t.TempDir(), "boot.json")
	if err := os.WriteFile(boot, []byte(`{"backends":[{"name":"web"}]}`), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := config.OpenStore(unreachable{}, boot, nil, config.StoreOptions{}); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("OpenStore over an unreachable storage: %v, want ErrUnavailable", err)
	}
	down := fmt.Errorf("etcd: %w", config.ErrUnavailable)
	s, err := config.OpenStore(&healthOf{Storage: newDir(t), err: down}, "", nil, config.StoreOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if h := s.StorageHealth(); h != down {
		t.Fatalf("StorageHealth = %v, want the storage's Health as is", h)
	}
	if s.Dir() != "" {
		t.Fatalf("Dir() of a storage that is not a DirStorage: %q, want empty", s.Dir())
	}
}

type healthOf struct {
	config.Storage
	err error
}

func (h *healthOf) Health() error { return h.err }

func newDir(t *testing.T) *config.DirStorage {
	d, err := config.NewDirStorage(t.TempDir(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = d.Close() }) // before t.TempDir's removal: a snapshot may still be written
	return d
}
