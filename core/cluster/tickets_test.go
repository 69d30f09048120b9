package cluster

import (
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"log/slog"
	"net"
	"os"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// ticketNode is one node's ticket keys shared through es, and a bind's
// server configuration built with them (as core/engine builds it).
func ticketNode(t *testing.T, es *EtcdStorage, cert *testutil.Cert, log *slog.Logger) (*tlsconf.TicketKeys, *tls.Config) {
	t.Helper()
	tk, err := tlsconf.NewTicketKeys(t.TempDir(), time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(tk.Close)
	t.Cleanup(ShareTicketKeys(es, tk, nil)) // runs before tk.Close
	meta, bundle, err := config.ParseCertificate("site", cert.ChainPEM, cert.KeyPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c := &config.Config{Certificates: []config.Certificate{meta}}
	c.Normalize()
	f := config.Frontend{Name: "fe", Mode: config.ModeHTTP, Binds: []config.Bind{{Name: "b", TLS: &config.BindTLS{Certificates: []string{"site"}}}}}
	f.Normalize()
	certs := tlsconf.NewCerts(func(config.Certificate) ([]byte, error) { return bundle, nil })
	srv, err := certs.Server(c, f.Binds[0].TLS, tk)
	if err != nil {
		t.Fatal(err)
	}
	return tk, srv
}

// resumed runs a TLS handshake of cli with srv over loopback TCP (and one
// byte from the server, which makes the client read the TLS 1.3 tickets)
// and says whether it resumed a session.
func resumed(t *testing.T, srv, cli *tls.Config) bool {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	errc := make(chan error, 1)
	var state tls.ConnectionState
	go func() {
		sc, err := ln.Accept()
		if err != nil {
			errc <- err
			return
		}
		defer sc.Close()
		_ = sc.SetDeadline(time.Now().Add(10 * time.Second))
		s := tls.Server(sc, srv)
		if err = s.Handshake(); err == nil {
			_, err = s.Write([]byte{'x'})
		}
		state = s.ConnectionState()
		errc <- err
	}()
	c, err := tls.Dial("tcp", ln.Addr().String(), cli)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Read(make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	if state.DidResume != c.ConnectionState().DidResume {
		t.Fatal("client and server disagree on resumption")
	}
	return state.DidResume
}

func sameKeys(a, b *tlsconf.TicketKeys) bool {
	x, y := a.Info(), b.Info()
	if len(x) != len(y) {
		return false
	}
	for i := range x {
		if x[i].ID != y[i].ID {
			return false
		}
	}
	return true
}

// TestTicketKeysSharedByNodes: two nodes of one store use the same session
// ticket keys: a session of node a resumes on node b, before and after a
// rotation (made once for both) and after keys set on one of them.
func TestTicketKeysSharedByNodes(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	esA := openStorage(t, c, "", "")
	esB := openStorage(t, c, esA.Prefix(), "")
	cert := testutil.SelfSigned(t, "site.example")
	a, srvA := ticketNode(t, esA, cert, slog.New(slog.DiscardHandler))
	b, srvB := ticketNode(t, esB, cert, slog.New(slog.DiscardHandler))
	testutil.Eventually(t, 10*time.Second, func() bool { return sameKeys(a, b) }, "the nodes do not share their ticket keys")

	pool := x509.NewCertPool()
	pool.AddCert(cert.X509)
	crossResume := func(why string) {
		t.Helper()
		for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
			cli := &tls.Config{ServerName: "site.example", RootCAs: pool, MaxVersion: v, ClientSessionCache: tls.NewLRUClientSessionCache(4)}
			if resumed(t, srvA, cli) {
				t.Fatal("the first handshake resumed")
			}
			if !resumed(t, srvB, cli) {
				t.Fatalf("TLS %x: a session of node a does not resume on node b %s", v, why)
			}
		}
	}
	crossResume("with the shared keys")

	// Rotation: once per period for both (the config sets the same period
	// on every node).
	const rotation = 300 * time.Millisecond
	before := a.Info()[0].ID
	a.SetRotation(int(rotation / time.Millisecond))
	b.SetRotation(int(rotation / time.Millisecond))
	testutil.Eventually(t, 10*time.Second, func() bool {
		return len(a.Info()) == tlsconf.KeptTicketKeys && a.Info()[0].ID != before && sameKeys(a, b)
	}, "the nodes did not both take the rotated keys")
	doc, _, err := esA.GetKey(bg, TicketKeysKey)
	if err != nil {
		t.Fatal(err)
	}
	var stored struct {
		Keys []struct{ Created time.Time } `json:"keys"`
	}
	if err := json.Unmarshal(doc, &stored); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < len(stored.Keys); i++ {
		if gap := stored.Keys[i-1].Created.Sub(stored.Keys[i].Created); gap < rotation {
			t.Fatalf("stored keys %d and %d made %v apart: rotated twice in a period of %v", i-1, i, gap, rotation)
		}
	}
	crossResume("after a rotation")

	// Keys set through the API of node b: node a uses them too.
	if err := b.Set([][32]byte{{7}, {8}}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		info := a.Info()
		return len(info) == 2 && info[0].Source == tlsconf.SourceAPI && sameKeys(a, b)
	}, "keys set on node b are not used by node a")
	crossResume("after keys set on node b")
}

// TestTicketKeysNotRotatedWhileEtcdIsDown: with etcd stopped the nodes keep
// their shared keys (a rotation fails and makes no key of one node only);
// once etcd is back the rotation resumes, shared again.
func TestTicketKeysNotRotatedWhileEtcdIsDown(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	esA := openStorage(t, c, "", "")
	esB := openStorage(t, c, esA.Prefix(), "")
	cert := testutil.SelfSigned(t, "site.example")
	var failedA, failedB atomic.Int64
	logTo := func(n *atomic.Int64) *slog.Logger {
		return slog.New(countHandler{slog.NewTextHandler(t.Output(), nil), "session ticket keys not rotated", n})
	}
	a, _ := ticketNode(t, esA, cert, logTo(&failedA))
	b, _ := ticketNode(t, esB, cert, logTo(&failedB))
	testutil.Eventually(t, 10*time.Second, func() bool { return sameKeys(a, b) }, "the nodes do not share their ticket keys")
	before := a.Info()

	c.Stop(0)
	a.SetRotation(200) // due at once: the keys are older than that
	b.SetRotation(200)
	testutil.Eventually(t, 20*time.Second, func() bool { return failedA.Load() > 0 && failedB.Load() > 0 },
		"no rotation attempted while etcd is down")
	for _, n := range []*tlsconf.TicketKeys{a, b} {
		if got := n.Info(); len(got) != len(before) || got[0].ID != before[0].ID {
			t.Fatalf("keys changed while etcd was down: %+v, were %+v", got, before)
		}
	}

	c.Restart(0)
	testutil.Eventually(t, 30*time.Second, func() bool { return a.Info()[0].ID != before[0].ID && sameKeys(a, b) },
		"the nodes did not rotate their shared keys once etcd was back")
}

// TestTicketKeysInstalledAfterEtcdWentBack: etcd wiped (a restore from an
// old snapshot does the same to revisions) restarts its revisions below
// the one the nodes' watches had reached; a set stored afterwards (a PUT
// on a third node) is still installed by the running nodes: their watch
// ends when etcd goes away and starts again from a fresh read, not from
// the old revision (which the new etcd would not reach for a while).
func TestTicketKeysInstalledAfterEtcdWentBack(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	esA := openStorage(t, c, "", "")
	esB := openStorage(t, c, esA.Prefix(), "")
	cert := testutil.SelfSigned(t, "site.example")
	quiet := slog.New(slog.DiscardHandler)
	a, _ := ticketNode(t, esA, cert, quiet)
	b, _ := ticketNode(t, esB, cert, quiet)
	testutil.Eventually(t, 10*time.Second, func() bool { return sameKeys(a, b) }, "the nodes do not share their ticket keys")
	// Revisions well above what the wiped etcd reaches during the test.
	for i := range 200 {
		if err := esA.EditKey(t.Context(), "filler", func([]byte) ([]byte, error) { return []byte{byte(i)}, nil }); err != nil {
			t.Fatal(err)
		}
	}

	c.Stop(0)
	if err := os.RemoveAll(c.DataDir(0)); err != nil {
		t.Fatal(err)
	}
	c.Restart(0)
	esC := openStorage(t, c, esA.Prefix(), "")
	cn, _ := ticketNode(t, esC, cert, quiet)
	var key [32]byte
	key[0] = 7
	if err := cn.Set([][32]byte{key}); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() bool { return sameKeys(a, cn) && sameKeys(b, cn) },
		"the running nodes did not install the set stored after etcd went back")
}

// TestTicketKeysSeededAgainAfterEtcdWiped: etcd wiped under running nodes
// (nothing written afterwards) gets its P/tls/ticket-keys back from them,
// as it gets the configuration and the tokens, and the nodes keep sharing
// one set: a node's watch resumed by the client on the new etcd waits for
// a revision it will not reach soon and sees no delete, so the absence is
// found by reading, not by the watch.
func TestTicketKeysSeededAgainAfterEtcdWiped(t *testing.T) {
	t.Parallel()
	c := etcdtest.Start(t, 1)
	esA := openStorage(t, c, "", "")
	esB := openStorage(t, c, esA.Prefix(), "")
	cert := testutil.SelfSigned(t, "site.example")
	quiet := slog.New(slog.DiscardHandler)
	a, _ := ticketNode(t, esA, cert, quiet)
	b, _ := ticketNode(t, esB, cert, quiet)
	testutil.Eventually(t, 10*time.Second, func() bool { return sameKeys(a, b) }, "the nodes do not share their ticket keys")
	before := a.Info()

	c.Stop(0)
	if err := os.RemoveAll(c.DataDir(0)); err != nil {
		t.Fatal(err)
	}
	c.Restart(0)
	var doc []byte
	testutil.Eventually(t, 15*time.Second, func() bool {
		var err error
		doc, _, err = esA.GetKey(t.Context(), TicketKeysKey)
		return err == nil && doc != nil
	}, "P/tls/ticket-keys not seeded again by the running nodes after etcd was wiped")
	testutil.Eventually(t, 10*time.Second, func() bool { return sameKeys(a, b) }, "the nodes do not share their ticket keys after the wipe")
	if got := a.Info(); got[0].ID != before[0].ID {
		t.Errorf("keys after the wipe %+v, want the nodes' own %+v seeded again", got, before)
	}
}
