package config_test

import (
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/config/storetest"
)

// TestDirStorageContract: the state directory passes the Storage contract.
func TestDirStorageContract(t *testing.T) {
	storetest.Run(t, func(t *testing.T) config.Storage {
		d, err := config.NewDirStorage(t.TempDir(), nil)
		if err != nil {
			t.Fatal(err)
		}
		return d
	})
}
