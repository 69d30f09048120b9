package cluster

import (
	"context"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core/config"
)

// pruneEvery spaces the prunings of P/certs a storage starts after its
// commits: each reads the keys of the kept revisions and the certificates
// (and decodes each revision once), so not at every write of a busy
// cluster. pruneTimeout bounds one.
const (
	pruneEvery   = time.Minute
	pruneTimeout = 30 * time.Second
)

// cachedRefs are the chains a kept revision refers to, valid while its
// key's mod revision is the same.
type cachedRefs struct {
	mod  int64
	sums []string
}

// maybePruneCertificates starts pruneCertificates in the background after
// a commit that may have left bundles unreferenced (one that removed the
// oldest kept revision, or a revert), at most once every pruneEvery and
// one at a time.
func (s *EtcdStorage) maybePruneCertificates() {
	now := time.Now().UnixNano()
	last := s.lastPrune.Load()
	if now-last < int64(pruneEvery) || s.closed.Load() || !s.lastPrune.CompareAndSwap(last, now) {
		return
	}
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), pruneTimeout)
		defer cancel()
		if n, err := s.pruneCertificates(ctx); err != nil && !s.closed.Load() {
			s.log.Warn("certificate bundles not pruned", "err", err)
		} else if n > 0 {
			s.log.Info("removed certificate bundles no kept revision refers to", "bundles", n)
		}
	}()
}

// pruneCertificates removes the bundles of P/certs that no kept revision
// (the current one included) refers to: the private keys of replaced or
// deleted certificates do not stay in etcd longer than the history that
// can restore them, as in the state directory. It reads the keys of the
// certificates, the revisions and P/current at one etcd revision; the
// deletes are conditional on P/current being unchanged since (a commit
// meanwhile may refer to a bundle again: the pruning is left to the next
// round) and on each bundle's mod revision (one uploaded again is kept).
// A bundle written after P/current's last change is kept: a commit of
// many bundles writes them before the revision that refers to them.
// It returns how many bundles it removed.
func (s *EtcdStorage) pruneCertificates(ctx context.Context) (int, error) {
	s.pruneMu.Lock()
	defer s.pruneMu.Unlock()
	certsPfx, revPfx := s.prefix+keyCerts, s.prefix+keyRevisions
	snap, err := s.cli.Txn(ctx).Then(
		clientv3.OpGet(certsPfx, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(revPfx, clientv3.WithPrefix(), clientv3.WithKeysOnly()),
		clientv3.OpGet(s.CurrentKey(), clientv3.WithKeysOnly()),
	).Commit()
	if err != nil {
		return 0, s.failed(ctx, "list certificates and revisions", err)
	}
	certs := snap.Responses[0].GetResponseRange().Kvs
	revs := snap.Responses[1].GetResponseRange().Kvs
	cur := snap.Responses[2].GetResponseRange().Kvs
	if len(cur) == 0 {
		return 0, nil // nothing committed: nothing to prune against
	}
	keep := map[string]bool{}
	seen := map[int64]bool{}
	for _, kv := range revs {
		gen, err := strconv.ParseInt(strings.TrimPrefix(string(kv.Key), revPfx), 10, 64)
		if err != nil {
			continue
		}
		seen[gen] = true
		refs, err := s.revisionRefs(ctx, gen, kv.ModRevision, snap.Header.Revision)
		if err != nil {
			// Without all the references, nothing is removed.
			return 0, fmt.Errorf("%s: %w", kv.Key, err)
		}
		for _, sum := range refs {
			keep[sum] = true
		}
	}
	s.cacheMu.Lock()
	for g := range s.refs {
		if !seen[g] {
			delete(s.refs, g)
		}
	}
	s.cacheMu.Unlock()
	var dels []clientv3.Op
	var cmps []clientv3.Cmp
	for _, kv := range certs {
		sum := strings.TrimPrefix(string(kv.Key), certsPfx)
		// Written after P/current's last change: the bundles a commit
		// of more than a Txn takes writes before its revision (the
		// commit is under way, or failed: pruned after the next one).
		if keep[sum] || !isHexSHA256(sum) || kv.ModRevision > cur[0].ModRevision {
			continue
		}
		dels = append(dels, clientv3.OpDelete(string(kv.Key)))
		cmps = append(cmps, clientv3.Compare(clientv3.ModRevision(string(kv.Key)), "=", kv.ModRevision))
	}
	removed := 0
	curCmp := clientv3.Compare(clientv3.ModRevision(s.CurrentKey()), "=", cur[0].ModRevision)
	for i := 0; i < len(dels); i += txnBundles / 2 {
		j := min(i+txnBundles/2, len(dels))
		// All or none of a batch: one bundle uploaded again meanwhile
		// fails its batch, pruned at the next round.
		r, err := s.cli.Txn(ctx).If(append([]clientv3.Cmp{curCmp}, cmps[i:j]...)...).Then(dels[i:j]...).Commit()
		if err != nil {
			return removed, s.failed(ctx, "remove certificate bundles", err)
		}
		if !r.Succeeded {
			return removed, nil
		}
		removed += j - i
	}
	if removed > 0 {
		s.cacheMu.Lock()
		for _, kv := range certs {
			if sum := strings.TrimPrefix(string(kv.Key), certsPfx); !keep[sum] {
				delete(s.bundles, sum)
			}
		}
		s.cacheMu.Unlock()
	}
	return removed, nil
}

// revisionRefs are the chains revision gen (at mod revision mod) refers
// to, read at etcd revision rev, cached.
func (s *EtcdStorage) revisionRefs(ctx context.Context, gen, mod, rev int64) ([]string, error) {
	s.cacheMu.Lock()
	c, ok := s.refs[gen]
	s.cacheMu.Unlock()
	if ok && c.mod == mod {
		return c.sums, nil
	}
	r, err := s.cli.Get(ctx, s.revisionKey(gen), clientv3.WithRev(rev))
	if err != nil {
		return nil, s.failed(ctx, "read revision "+strconv.FormatInt(gen, 10), err)
	}
	if len(r.Kvs) == 0 || r.Kvs[0].ModRevision != mod {
		return nil, fmt.Errorf("changed while read")
	}
	rd, err := revisionReader(r.Kvs[0].Value)
	if err != nil {
		return nil, err
	}
	sums, err := config.RevisionCertificates(io.LimitReader(rd, maxRevisionBytes))
	if err != nil {
		return nil, fmt.Errorf("damaged revision: %w", err)
	}
	slices.Sort(sums)
	s.cacheMu.Lock()
	s.refs[gen] = cachedRefs{mod: mod, sums: sums}
	s.cacheMu.Unlock()
	return sums, nil
}
