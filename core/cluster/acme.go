package cluster

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core/config"
)

// ACME coordination (issue 29): in a cluster exactly one node orders a
// managed certificate, and every node answers its challenges, since the CA
// reaches whichever node its DNS names.
//
//   - P/acme/locks/<certificate>: the order lock, the name of the node
//     that orders, bound to a lease of ACMELockTTL the node keeps alive
//     while it orders. Taken by a Txn that puts it only if it does not
//     exist; released by revoking the lease. A node that dies mid-order
//     stops keeping it alive: the key goes with the lease, and another
//     node takes the lock at its next try.
//   - P/acme/challenges/http-01/<token> and
//     P/acme/challenges/tls-alpn-01/<name>: the key authorization of a
//     challenge under way, bound to a lease of the order's length, so a
//     challenge its node did not withdraw (killed) does not stay. Every
//     node watches the prefix and answers them.

// ACMELockTTL is how long an order lock outlives the node that holds it.
const ACMELockTTL = 10 * time.Second

// challengeTTL bounds a published challenge (an order takes minutes at
// most: core/acme's orderTimeout).
const challengeTTL = 5 * time.Minute

// ACMECoordinator is core/acme's Coordinator on a cluster store.
type ACMECoordinator struct {
	cli    *clientv3.Client
	prefix string
	node   string
	ttl    time.Duration
}

// NewACMECoordinator coordinates the orders of node through s's etcd.
func NewACMECoordinator(s *EtcdStorage, node string) *ACMECoordinator {
	return &ACMECoordinator{cli: s.cli, prefix: s.prefix, node: node, ttl: ACMELockTTL}
}

func (a *ACMECoordinator) lockKey(name string) string { return a.prefix + "/acme/locks/" + name }
func (a *ACMECoordinator) challengesPrefix() string   { return a.prefix + "/acme/challenges/" }

// Lock takes the order lock of the certificate name. ok false: another
// node holds it (holder). release revokes the lease (the lock is gone at
// once, not after the TTL).
func (a *ACMECoordinator) Lock(ctx context.Context, name string) (release func(), holder string, ok bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	g, err := a.cli.Grant(ctx, int64((a.ttl+time.Second-1)/time.Second))
	if err != nil {
		return nil, "", false, fmt.Errorf("%w: grant a lease: %v", config.ErrUnavailable, err)
	}
	revoke := func() {
		rctx, rcancel := context.WithTimeout(context.Background(), opTimeout)
		defer rcancel()
		_, _ = a.cli.Revoke(rctx, g.ID) // best effort: it expires anyway
	}
	key := a.lockKey(name)
	resp, err := a.cli.Txn(ctx).If(clientv3.Compare(clientv3.CreateRevision(key), "=", 0)).
		Then(clientv3.OpPut(key, a.node, clientv3.WithLease(g.ID))).
		Else(clientv3.OpGet(key)).Commit()
	if err != nil {
		revoke()
		return nil, "", false, fmt.Errorf("%w: take the order lock: %v", config.ErrUnavailable, err)
	}
	if !resp.Succeeded {
		revoke()
		if kvs := resp.Responses[0].GetResponseRange().Kvs; len(kvs) > 0 {
			holder = string(kvs[0].Value)
		}
		return nil, holder, false, nil
	}
	kctx, kcancel := context.WithCancel(context.Background())
	ch, err := a.cli.KeepAlive(kctx, g.ID)
	if err != nil {
		kcancel()
		revoke()
		return nil, "", false, fmt.Errorf("%w: keep the order lock: %v", config.ErrUnavailable, err)
	}
	go func() {
		for range ch { // drained until kcancel; a lost lease ends it
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { kcancel(); revoke() }) }, a.node, true, nil
}

// Publish makes a challenge answer visible to every node (kind
// "http-01": key is the token; "tls-alpn-01": the name).
func (a *ACMECoordinator) Publish(ctx context.Context, kind, key, value string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	g, err := a.cli.Grant(ctx, int64(challengeTTL/time.Second))
	if err != nil {
		return fmt.Errorf("%w: grant a lease: %v", config.ErrUnavailable, err)
	}
	if _, err := a.cli.Put(ctx, a.challengesPrefix()+kind+"/"+key, value, clientv3.WithLease(g.ID)); err != nil {
		return fmt.Errorf("%w: publish a challenge: %v", config.ErrUnavailable, err)
	}
	return nil
}

// Withdraw removes a challenge answer.
func (a *ACMECoordinator) Withdraw(ctx context.Context, kind, key string) error {
	ctx, cancel := context.WithTimeout(ctx, opTimeout)
	defer cancel()
	_, err := a.cli.Delete(ctx, a.challengesPrefix()+kind+"/"+key)
	return err
}

// Watch calls fn with every published challenge answer, by kind then key,
// at start and after each change, until ctx ends; a lost watch reads the
// prefix again.
func (a *ACMECoordinator) Watch(ctx context.Context, fn func(map[string]map[string]string)) {
	pfx := a.challengesPrefix()
	for ctx.Err() == nil {
		rctx, cancel := context.WithTimeout(ctx, opTimeout)
		resp, err := a.cli.Get(rctx, pfx, clientv3.WithPrefix())
		cancel()
		if err != nil {
			select {
			case <-ctx.Done():
			case <-time.After(time.Second):
			}
			continue
		}
		set := map[string]map[string]string{}
		put := func(k, v []byte) {
			kind, key, ok := strings.Cut(strings.TrimPrefix(string(k), pfx), "/")
			if !ok {
				return
			}
			if set[kind] == nil {
				set[kind] = map[string]string{}
			}
			set[kind][key] = string(v)
		}
		for _, kv := range resp.Kvs {
			put(kv.Key, kv.Value)
		}
		fn(copySet(set))
		wctx, wcancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
		for wr := range a.cli.Watch(wctx, pfx, clientv3.WithPrefix(), clientv3.WithRev(resp.Header.Revision+1)) {
			if wr.Err() != nil {
				break
			}
			for _, ev := range wr.Events {
				if ev.Type == clientv3.EventTypeDelete {
					kind, key, _ := strings.Cut(strings.TrimPrefix(string(ev.Kv.Key), pfx), "/")
					delete(set[kind], key)
				} else {
					put(ev.Kv.Key, ev.Kv.Value)
				}
			}
			fn(copySet(set))
		}
		wcancel()
	}
}

func copySet(set map[string]map[string]string) map[string]map[string]string {
	out := make(map[string]map[string]string, len(set))
	for k, m := range set {
		c := make(map[string]string, len(m))
		for kk, v := range m {
			c[kk] = v
		}
		out[k] = c
	}
	return out
}
