package cluster

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// TestStoredDocumentsOfSchema0AreMigrated: etcd's revisions (plain or
// gzip) and a node's copy of the last applied generation are stored
// documents too: one written before schemas (core/config's
// testdata/schema0, written by that version's binary) comes out migrated,
// the old default alpn ["http/1.1"] gone from the http frontend's TLS bind
// and other lists kept, as config.json does (config.Migrate).
func TestStoredDocumentsOfSchema0AreMigrated(t *testing.T) {
	rev, err := os.ReadFile("../config/testdata/schema0/revisions/00000000000000000005.json")
	if err != nil {
		t.Fatal(err)
	}
	check := func(what string, c *config.Config) {
		t.Helper()
		pub, tun := &c.Frontends[c.FindFrontend("public")], &c.Frontends[c.FindFrontend("tunnel")]
		if a := pub.Binds[1].TLS.ALPN; a != nil {
			t.Errorf("%s: public/tls alpn %q, want unset", what, a)
		}
		if a := pub.Binds[2].TLS.ALPN; !slices.Equal(a, []string{"http/1.1", "http/1.0"}) {
			t.Errorf("%s: public/both alpn %q, want kept", what, a)
		}
		if a := tun.Binds[0].TLS.ALPN; !slices.Equal(a, []string{"http/1.1"}) {
			t.Errorf("%s: tunnel (tcp) alpn %q, want kept", what, a)
		}
		if c.Schema != config.SchemaVersion {
			t.Errorf("%s: schema %d", what, c.Schema)
		}
	}
	var gz bytes.Buffer
	zw := gzip.NewWriter(&gz)
	zw.Write(rev)
	zw.Close()
	for what, v := range map[string][]byte{"plain revision": rev, "gzip revision": gz.Bytes()} {
		info, c, err := decodeRevision(v, true)
		if err != nil || info.Generation != 5 {
			t.Fatalf("%s: generation %d, %v", what, info.Generation, err)
		}
		check(what, c)
	}

	var parts struct {
		Config json.RawMessage `json:"config"`
	}
	if err := json.Unmarshal(rev, &parts); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	cf, err := json.Marshal(cacheFile{Prefix: "/spliced", Generation: 5, Config: parts.Config})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, CacheFile), cf, 0o600); err != nil {
		t.Fatal(err)
	}
	s := &EtcdStorage{cacheDir: dir, prefix: "/spliced"}
	c, path, err := s.readCache()
	if err != nil {
		t.Fatalf("readCache %s: %v", path, err)
	}
	check("node copy", c)
}
