package cluster

import (
	"context"
	"log/slog"
	"sync"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/spliced-proxy/spliced/core/tlsconf"
)

// TicketKeysKey is the name (Key, GetKey, EditKey) of the session ticket
// keys every node of the cluster uses: the JSON of the state directory's
// tls-ticket-keys.json, keys included (a secret, like the certificates).
const TicketKeysKey = "tls/ticket-keys"

// ticketRetry spaces the attempts to read and watch P/tls/ticket-keys
// while etcd does not answer; ticketFirstWait bounds how long
// ShareTicketKeys waits for the stored set before the node starts with
// its own.
// ticketCheckEvery spaces the reads that find a set the watch cannot see
// (etcd wiped or restored under it: watchFrom), ticketCheckTimeout bounds
// one.
const (
	ticketRetry        = time.Second
	ticketFirstWait    = 2 * time.Second
	ticketCheckEvery   = time.Second
	ticketCheckTimeout = 900 * time.Millisecond
)

// ShareTicketKeys makes tk use the cluster's session ticket keys
// (P/tls/ticket-keys): it installs the stored set (seeding it with tk's
// own when absent, a conditional create), then each set written there
// (a rotation by any node, a PUT /api/v1/tls/ticket-keys on any node);
// tk's rotation and Set go through the store (tlsconf.TicketKeys.Share;
// a node makes tk with tlsconf.NewSharedTicketKeys and TicketKeyStore, so
// that a rotation due at its start is not made locally either).
// It waits up to ticketFirstWait for the first set (not at all when etcd
// is known unreachable: the node starts with its state directory's keys);
// while etcd does not answer tk keeps its keys, and the watch resumes
// when etcd is back. The key is read every ticketCheckEvery besides the
// watch: gone (etcd wiped) it is seeded again with tk's keys. stop ends the watch (before tk.Close and es.Close).
func ShareTicketKeys(es *EtcdStorage, tk *tlsconf.TicketKeys, log *slog.Logger) (stop func()) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	tk.Share(TicketKeyStore(es))
	ctx, cancel := context.WithCancel(context.Background())
	first := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		watchTicketKeys(ctx, es, tk, log, first)
	}()
	wait := ticketFirstWait
	if es.Health() != nil {
		wait = 0 // etcd known unreachable (the node started from its cache): start now
	}
	select {
	case <-first:
	case <-time.After(wait):
		log.Warn("the cluster's session ticket keys could not be read yet: using this node's until etcd answers", "key", es.Key(TicketKeysKey))
	}
	return func() {
		cancel()
		wg.Wait()
	}
}

// watchTicketKeys reads P/tls/ticket-keys (seeding it when absent),
// installs it and watches it from the revision read, until ctx ends; a
// broken watch (etcd unreachable, compaction) is restarted by reading
// again. first is closed after the first install.
func watchTicketKeys(ctx context.Context, es *EtcdStorage, tk *tlsconf.TicketKeys, log *slog.Logger, first chan struct{}) {
	key := es.Key(TicketKeysKey)
	installed := false
	install := func(doc []byte) {
		if err := tk.Install(doc); err != nil {
			log.Error("the cluster's session ticket keys cannot be used: keeping the current ones", "key", key, "err", err)
		}
		if !installed {
			installed = true
			close(first)
		}
	}
	wait := func() bool {
		select {
		case <-ctx.Done():
			return false
		case <-time.After(ticketRetry):
			return true
		}
	}
	for ctx.Err() == nil {
		doc, rev, err := es.GetKey(ctx, TicketKeysKey)
		if err == nil && doc == nil {
			if err = tk.Seed(ctx); err == nil {
				continue // read what is stored now
			}
		}
		if err != nil {
			if !wait() {
				return
			}
			continue
		}
		install(doc)
		watchFrom(ctx, es, key, rev, install)
		// Ended: etcd unreachable, compacted, the key deleted or gone
		// (read again: seeded again) or ctx done.
		if !wait() {
			return
		}
	}
}

// watchFrom installs each set put at key after mod revision mod, until the
// watch ends (etcd unreachable, compacted, the key deleted) or a read of
// the key, every ticketCheckEvery, finds it absent or at another mod
// revision than the last installed: the client resumes a broken watch by
// itself from the revision it reached, so a watch on an etcd wiped (or
// restored from an older snapshot) under it waits for revisions the new
// etcd has not reached, and sees no delete. Without the read the set
// would stay absent until a node restarts (the configuration and the
// tokens are read each second by the node's probe for the same reason).
func watchFrom(ctx context.Context, es *EtcdStorage, key string, mod int64, install func([]byte)) {
	wctx, cancel := context.WithCancel(clientv3.WithRequireLeader(ctx))
	defer cancel()
	wch := es.Client().Watch(wctx, key, clientv3.WithRev(mod+1))
	check := time.NewTicker(ticketCheckEvery)
	defer check.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case wr, ok := <-wch:
			if !ok || wr.Err() != nil {
				return
			}
			for _, ev := range wr.Events {
				if ev.Type != clientv3.EventTypePut {
					return
				}
				install(ev.Kv.Value)
				mod = ev.Kv.ModRevision
			}
		case <-check.C:
			rctx, rcancel := context.WithTimeout(ctx, ticketCheckTimeout)
			r, err := es.Client().Get(rctx, key, clientv3.WithKeysOnly())
			rcancel()
			if err == nil && (len(r.Kvs) == 0 || r.Kvs[0].ModRevision != mod) {
				return // read it again (and seed it when absent)
			}
			// Unanswered: the watch resumes when etcd is back.
		}
	}
}

// TicketKeyStore is P/tls/ticket-keys as a tlsconf.KeyStore, for
// tlsconf.NewSharedTicketKeys.
func TicketKeyStore(es *EtcdStorage) tlsconf.KeyStore { return ticketKeyStore{es} }

type ticketKeyStore struct{ es *EtcdStorage }

func (s ticketKeyStore) Edit(ctx context.Context, edit func(old []byte) ([]byte, error)) error {
	return s.es.EditKey(ctx, TicketKeysKey, edit)
}

func (s ticketKeyStore) Read(ctx context.Context) ([]byte, error) {
	doc, _, err := s.es.GetKey(ctx, TicketKeysKey)
	return doc, err
}
