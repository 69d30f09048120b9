package cluster

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

// Names of the node's cache in its state directory (Options.CacheDir).
const (
	// CacheFile holds the last generation this node applied.
	CacheFile = "cluster-cache.json"
	// CacheCertsDir holds the bundles of the certificates it uses, one
	// <chain_sha256>.pem each (0600 in a 0700 directory: private keys).
	CacheCertsDir = "cluster-certs"
	// CacheChangesFile holds the changes (config.Delta) from CacheFile's
	// generation to the last one this node applied, in order: a
	// generation adopted from its change is remembered by writing the
	// changes (a few hundred bytes each), not the whole document (2 MB
	// of JSON and its encoding at 10 000 servers: most of a node's CPU
	// per write). Ignored unless its base is CacheFile's generation.
	CacheChangesFile = "cluster-cache-changes.json"
	// maxCachedChanges and maxCachedChangesBytes bound the changes file:
	// past them the whole document is written again (and what a start
	// from the cache replays stays small).
	maxCachedChanges      = 256
	maxCachedChangesBytes = 1 << 20
)

// cacheChanges is the content of CacheChangesFile.
type cacheChanges struct {
	Prefix  string        `json:"prefix"`
	Base    int64         `json:"base"` // CacheFile's generation
	Changes []cacheChange `json:"changes"`
}

// cacheChange is one generation as the change from the one before.
type cacheChange struct {
	Generation int64           `json:"generation"`
	Delta      json.RawMessage `json:"delta"`
}

// cacheState is what the cache files hold (RememberApplied): the
// generation of CacheFile, and the changes after it.
type cacheState struct {
	base    int64 // 0: not written by this process (written whole first)
	changes []cacheChange
	size    int
}

// newest is the generation the cache holds.
func (c *cacheState) newest() int64 {
	if n := len(c.changes); n > 0 {
		return c.changes[n-1].Generation
	}
	return c.base
}

// noteChange records that generation gen is the change delta (a
// config.Delta's JSON) from generation base, for RememberApplied.
func (s *EtcdStorage) noteChange(gen, base int64, delta []byte) {
	s.cacheWriteMu.Lock()
	s.lastChange = deltaNote{gen: gen, base: base, delta: delta}
	s.cacheWriteMu.Unlock()
}

// cacheFile is the content of CacheFile.
type cacheFile struct {
	// Prefix and Endpoints say which cluster the config came from: a
	// cache of another prefix is refused (another cluster's config).
	Prefix     string          `json:"prefix"`
	Endpoints  []string        `json:"endpoints"`
	Generation int64           `json:"generation"`
	Config     json.RawMessage `json:"config"`
}

// RememberApplied keeps c, the generation this node applies now, and the
// bundles of its certificates in the node's state directory, so that the
// node restarted while etcd is unreachable starts with it (Load). Bundles
// of certificates c no longer uses are removed. Call it after each
// successful apply; without a CacheDir it does nothing. A generation made
// by a change from the one the cache holds (noteChange: adopted as a
// change, or written by this node) is kept as that change
// (CacheChangesFile); any other, the whole document.
func (s *EtcdStorage) RememberApplied(ctx context.Context, c *config.Config) error {
	if s.cacheDir == "" || c == nil {
		return nil
	}
	s.cacheWriteMu.Lock()
	defer s.cacheWriteMu.Unlock()
	dir := filepath.Join(s.cacheDir, CacheCertsDir)
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cluster cache: %w", err)
	}
	if fi, err := os.Lstat(dir); err != nil || !fi.IsDir() {
		return fmt.Errorf("cluster cache: %s must be a directory, not a symbolic link or a file (remove it)", dir)
	}
	keep := map[string]bool{}
	for i := range c.Certificates {
		for _, sum := range c.Certificates[i].Files() {
			keep[sum+".pem"] = true
			if _, err := os.Lstat(filepath.Join(dir, sum+".pem")); err == nil {
				continue // a bundle never changes
			}
			b, err := s.CertificateBundle(ctx, sum)
			if err != nil {
				return fmt.Errorf("cluster cache: certificate %q: %w", c.Certificates[i].Name, err)
			}
			if err := config.WriteFileAtomic(dir, sum+".pem", b, nil); err != nil {
				return fmt.Errorf("cluster cache: %w", err)
			}
		}
	}
	if err := s.rememberDocument(c); err != nil {
		return err
	}
	// Bundles of certificates c does not use are read again from etcd
	// if ever needed (a restore): memory holds those of the running
	// generation, not of every certificate ever seen.
	s.cacheMu.Lock()
	for sum := range s.bundles {
		if !keep[sum+".pem"] {
			delete(s.bundles, sum)
		}
	}
	s.cacheMu.Unlock()
	// After the config that no longer refers to them.
	if ents, err := os.ReadDir(dir); err == nil {
		for _, e := range ents {
			if !keep[e.Name()] {
				_ = os.Remove(filepath.Join(dir, e.Name()))
			}
		}
	}
	return nil
}

// rememberDocument writes c in the cache: as the change from the
// generation it holds when c is that change (lastChange), within the
// bounds of the changes file; else whole, in CacheFile, whose generation
// the changes file then no longer names (it is removed). cacheWriteMu held.
func (s *EtcdStorage) rememberDocument(c *config.Config) error {
	st := &s.cacheState
	ch := s.lastChange
	if st.base > 0 && ch.gen == c.Generation && ch.base == st.newest() && ch.delta != nil &&
		len(st.changes) < maxCachedChanges && st.size+len(ch.delta) <= maxCachedChangesBytes {
		changes := append(st.changes[:len(st.changes):len(st.changes)], cacheChange{Generation: c.Generation, Delta: ch.delta})
		b, err := json.Marshal(cacheChanges{Prefix: s.prefix, Base: st.base, Changes: changes})
		if err != nil {
			return fmt.Errorf("cluster cache: %w", err)
		}
		if err := config.WriteFileAtomic(s.cacheDir, CacheChangesFile, b, nil); err != nil {
			st.base = 0 // what the file holds is unknown: whole next time
			return fmt.Errorf("cluster cache: %w", err)
		}
		st.changes, st.size = changes, st.size+len(ch.delta)
		return nil
	}
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("cluster cache: encode generation %d: %w", c.Generation, err)
	}
	// cacheFile's JSON, with doc as it is: json.Marshal of a
	// RawMessage would check and compact it again.
	hdr, err := json.Marshal(cacheFile{Prefix: s.prefix, Endpoints: s.endpoints, Generation: c.Generation, Config: json.RawMessage("null")})
	if err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	hdr = bytes.TrimSuffix(hdr, []byte("null}"))
	b := make([]byte, 0, len(hdr)+len(doc)+1)
	b = append(append(append(b, hdr...), doc...), '}')
	st.base, st.changes, st.size = 0, nil, 0
	if err := config.WriteFileAtomic(s.cacheDir, CacheFile, b, nil); err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	// The changes file names the generation before: ignored from now
	// on, removed so that it does not linger.
	if err := os.Remove(filepath.Join(s.cacheDir, CacheChangesFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("cluster cache: %w", err)
	}
	st.base = c.Generation
	return nil
}

// loadCache is Load while etcd is unreachable (unavailable says why): the
// generation this node last applied, if it remembered one of this prefix.
func (s *EtcdStorage) loadCache(unavailable error) (*config.Config, config.RevisionInfo, error) {
	if s.cacheDir == "" {
		return nil, config.RevisionInfo{}, unavailable
	}
	c, path, err := s.readCache()
	if errors.Is(err, fs.ErrNotExist) {
		return nil, config.RevisionInfo{}, fmt.Errorf("%w; and this node has no copy of a configuration in %s (it never applied one from this store): start etcd, or check --store", unavailable, path)
	}
	if err != nil {
		return nil, config.RevisionInfo{}, fmt.Errorf("%w; and %v", unavailable, err)
	}
	if !s.fromCache.Swap(true) {
		s.log.Warn("etcd unreachable: loading this node's copy of the generation it last applied", "generation", c.Generation, "file", path, "err", unavailable)
	}
	return c, config.RevisionInfo{Generation: c.Generation, Summary: "this node's copy (etcd unreachable)"}, nil
}

// readCache reads the generation RememberApplied kept (an error wrapping
// fs.ErrNotExist when there is none) and says where.
func (s *EtcdStorage) readCache() (*config.Config, string, error) {
	path := filepath.Join(s.cacheDir, CacheFile)
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, path, fmt.Errorf("the node's copy is unreadable: %w", err)
	}
	var cf cacheFile
	if err := json.Unmarshal(data, &cf); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s is damaged: %v", path, err)
	}
	if cf.Prefix != s.prefix {
		return nil, path, fmt.Errorf("the node's copy %s is of prefix %q, not %q: not used", path, cf.Prefix, s.prefix)
	}
	var c config.Config
	if err := config.DecodeBytes(cf.Config, &c); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s is damaged: %v", path, err)
	}
	if c.Generation != cf.Generation {
		return nil, path, fmt.Errorf("the node's copy %s holds generation %d as %d", path, c.Generation, cf.Generation)
	}
	// The changes since, when they were made on this generation (a
	// changes file of an earlier one is what a crash between the two
	// writes of rememberDocument leaves: the document alone is the
	// newest).
	cpath := filepath.Join(s.cacheDir, CacheChangesFile)
	if data, err := os.ReadFile(cpath); err == nil {
		var cc cacheChanges
		if err := json.Unmarshal(data, &cc); err != nil {
			return nil, cpath, fmt.Errorf("the node's copy %s is damaged: %v", cpath, err)
		}
		if cc.Prefix == s.prefix && cc.Base == c.Generation {
			for _, ch := range cc.Changes {
				var d config.Delta
				if err := config.DecodeBytes(ch.Delta, &d); err != nil {
					return nil, cpath, fmt.Errorf("the node's copy %s is damaged: generation %d: %v", cpath, ch.Generation, err)
				}
				if err := d.Apply(&c); err != nil || ch.Generation <= c.Generation {
					return nil, cpath, fmt.Errorf("the node's copy %s is damaged: generation %d on %d: %v", cpath, ch.Generation, c.Generation, err)
				}
				c.Generation = ch.Generation
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return nil, cpath, fmt.Errorf("the node's copy is unreadable: %w", err)
	}
	if err := c.Migrate(); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s: %v", path, err)
	}
	c.Normalize()
	if err := config.Validate(&c, config.Env{}); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s is not valid: %v", path, err)
	}
	return &c, path, nil
}

// SeedFromCache is SeedEmpty with the generation this node last applied
// (its cache, RememberApplied): what a node starting has. Without a cache
// of this prefix, or of generation 0, it does nothing (0, nil).
func (s *EtcdStorage) SeedFromCache(ctx context.Context, node string) (int64, error) {
	if s.cacheDir == "" {
		return 0, nil
	}
	return s.SeedEmpty(ctx, node, nil)
}

// SeedEmpty makes c, of generation G (nil: the node's cache), the store's
// again, as generation G+1, when the store holds no document (P/current
// absent: etcd wiped, or restored from a snapshot older than the cluster)
// — never when it holds one: the create is conditional on P/current's
// absence, and another node that seeded it first wins (0, nil: the caller
// adopts what it wrote). It returns the generation it committed. node
// names the node in the revision. A running node gives its Store's
// current document: the newest it knows, which a node that refused it
// does not run (its cache is older).
func (s *EtcdStorage) SeedEmpty(ctx context.Context, node string, c *config.Config) (int64, error) {
	rctx, cancel := context.WithTimeout(ctx, s.readTimeout)
	cur, err := s.readCurrent(rctx)
	cancel()
	if err != nil {
		return 0, s.failed(ctx, "read "+s.CurrentKey(), err)
	}
	if cur.gen != 0 {
		if c == nil { // a node starting: it will run the store's
			if cached, _, err := s.readCache(); err == nil && cached.Generation > cur.gen {
				s.log.Warn("the store holds an older generation than this node last applied (etcd restored from an older snapshot?): "+
					"running the store's; POST /api/v1/cluster/reseed on a node that still runs the newer one makes it the store's again",
					"store_generation", cur.gen, "cached_generation", cached.Generation)
			}
		}
		return 0, nil
	}
	from := "its generation"
	if c == nil {
		var err error
		if c, _, err = s.readCache(); errors.Is(err, fs.ErrNotExist) {
			return 0, nil
		} else if err != nil {
			return 0, err
		}
		from = "its cached generation"
	} else {
		c = c.Clone()
	}
	if c.Generation == 0 {
		return 0, nil
	}
	certs := make(map[string][]byte, len(c.Certificates))
	for i := range c.Certificates {
		for _, sum := range c.Certificates[i].Files() {
			b, err := s.CertificateBundle(ctx, sum)
			if err != nil {
				return 0, fmt.Errorf("cluster store: seed from the node's copy: certificate %q: %w", c.Certificates[i].Name, err)
			}
			certs[sum] = b
		}
	}
	was := c.Generation
	c.Generation = was + 1
	doc, err := json.Marshal(c)
	if err != nil {
		return 0, fmt.Errorf("cluster store: encode generation %d: %w", c.Generation, err)
	}
	by := "seeded"
	if node != "" {
		by += " by node " + node
	}
	info := config.RevisionInfo{Generation: c.Generation, Time: time.Now(), Node: node,
		Summary: fmt.Sprintf("%s from %s %d (the store held no document)", by, from, was)}
	switch err := s.Reseed(ctx, 0, info, doc, certs); {
	case errors.Is(err, config.ErrRace):
		return 0, nil
	case err != nil:
		return 0, err
	}
	s.log.Warn("the store held no configuration: seeded with this node's, as the next generation",
		"node_generation", was, "generation", c.Generation)
	return c.Generation, nil
}

// cachedBundle reads a bundle RememberApplied kept.
func (s *EtcdStorage) cachedBundle(sum string) ([]byte, error) {
	if s.cacheDir == "" || !isHexSHA256(sum) || strings.ContainsAny(sum, "/.") {
		return nil, fs.ErrNotExist
	}
	return os.ReadFile(filepath.Join(s.cacheDir, CacheCertsDir, sum+".pem"))
}
