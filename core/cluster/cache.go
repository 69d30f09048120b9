package cluster

import (
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
)

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
// successful apply; without a CacheDir it does nothing.
func (s *EtcdStorage) RememberApplied(ctx context.Context, c *config.Config) error {
	if s.cacheDir == "" || c == nil {
		return nil
	}
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
	doc, err := json.Marshal(c)
	if err != nil {
		return fmt.Errorf("cluster cache: encode generation %d: %w", c.Generation, err)
	}
	b, err := json.Marshal(cacheFile{Prefix: s.prefix, Endpoints: s.endpoints, Generation: c.Generation, Config: doc})
	if err != nil {
		return fmt.Errorf("cluster cache: %w", err)
	}
	if err := config.WriteFileAtomic(s.cacheDir, CacheFile, b, nil); err != nil {
		return fmt.Errorf("cluster cache: %w", err)
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
	if err := c.Migrate(); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s: %v", path, err)
	}
	c.Normalize()
	if err := config.Validate(&c, config.Env{}); err != nil {
		return nil, path, fmt.Errorf("the node's copy %s is not valid: %v", path, err)
	}
	if c.Generation != cf.Generation {
		return nil, path, fmt.Errorf("the node's copy %s holds generation %d as %d", path, c.Generation, cf.Generation)
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
