package config

import (
	"context"
	"errors"
)

// Storage is where a Store keeps its documents. Two implementations:
// the state directory (DirStorage, the default: one node, `make run`) and
// etcd (core/cluster: several nodes sharing one configuration). The same
// contract tests (core/config/storetest) run against both.
//
// Every method is safe from any goroutine. A Storage never validates or
// normalizes: the Store does, above it.
type Storage interface {
	// Kind names the storage for /api/v1/info: "dir" or "etcd".
	Kind() string

	// Load returns the current document as stored (decoded strictly,
	// normalized, validated with an empty Env) and its revision header;
	// (nil, RevisionInfo{}, nil) when the storage holds none yet.
	Load(ctx context.Context) (*Config, RevisionInfo, error)

	// Commit makes doc (the JSON of a normalized, validated Config of
	// generation info.Generation = prev+1) current, if and only if the
	// current generation is still prev (0: the storage holds none yet).
	// The certificate bundles (by chain_sha256), the revision (info + doc)
	// and the new current are written so that either all of them are
	// visible or none: the state directory in the order that makes
	// config.json the commit point, etcd in one transaction comparing the
	// current's mod revision. Another writer committed first → an error
	// wrapping ErrRace, nothing written. The store refusing the write →
	// *StorageError (dir) or an error wrapping ErrUnavailable (etcd).
	// The storage keeps MaxRevisions revisions; bundles that neither the
	// current document nor a kept revision refers to may be removed.
	Commit(ctx context.Context, prev int64, info RevisionInfo, doc []byte, certs map[string][]byte) error

	// Reseed is Commit without its rule info.Generation = prev+1: any
	// info.Generation > prev, conditional on prev (0: the storage holds
	// none) as Commit is. It is how a node's document becomes current
	// again, above the generation the nodes run, in a storage that went
	// back (etcd restored from an older snapshot, or wiped): Store.Reseed.
	Reseed(ctx context.Context, prev int64, info RevisionInfo, doc []byte, certs map[string][]byte) error

	// Revert undoes the Commit of generation gen when a single-node Store
	// could not apply it: prev (the document that was current before,
	// generation gen-1) is current again and revision gen is removed, if
	// gen is still current (ErrRace otherwise, nothing changed).
	Revert(ctx context.Context, prev *Config, gen int64) error

	// Revisions lists the kept revisions, newest first. Entries that
	// cannot be read are skipped.
	Revisions(ctx context.Context) ([]RevisionInfo, error)

	// Revision returns the config of a kept revision (an error wrapping
	// ErrNotFound when it is not kept).
	Revision(ctx context.Context, gen int64) (*Config, error)

	// CertificateBundle returns the stored bundle (chain then key, PEM) of
	// chain_sha256 (an error wrapping ErrNotFound when absent).
	CertificateBundle(ctx context.Context, chainSHA256 string) ([]byte, error)

	// Health is nil while the storage takes writes, else why not: a
	// *StorageError (the directory refused a write; see Store.StorageHealth)
	// or an error wrapping ErrUnavailable (etcd unreachable).
	Health() error

	// Close releases the storage (connections, watches). The Store does
	// not use it afterwards.
	Close() error
}

var (
	// ErrRace is a Commit that lost to another writer: the current
	// generation is no longer the one the write was built on. The Store
	// reloads and runs the write again (Update); it reaches the API only
	// when it keeps losing (409, retry).
	ErrRace = errors.New("another writer committed first")
	// ErrUnavailable is a storage that cannot be reached (etcd down or
	// without quorum): 503, the node keeps running what it runs.
	ErrUnavailable = errors.New("configuration store unavailable")
	// ErrStoreBehind is a write on a storage whose current generation is
	// older than the Store's (etcd restored from an older snapshot, its
	// keys deleted): the Store never goes back, so the write cannot be
	// built on the storage's current; 409, nothing changed.
	ErrStoreBehind = errors.New("the configuration store holds an older generation than this node")
	// ErrNotBehind is a reseed (Store.Reseed) of a storage that is not
	// behind the Store: nothing to recover; 409, nothing changed.
	ErrNotBehind = errors.New("the configuration store is not behind this node")
	// ErrTooLarge is a write the storage refuses for its size (a revision
	// over etcd's request limit even compressed): 413, nothing changed.
	ErrTooLarge = errors.New("larger than the configuration store accepts")
)
