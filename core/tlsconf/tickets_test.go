package tlsconf

import (
	"crypto/tls"
	"errors"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// resumes makes a full handshake with cli against first, then reports
// whether a second one against second (with the ticket of the first)
// resumes.
func resumes(t *testing.T, first, second *tls.Config, cli *tls.Config) bool {
	t.Helper()
	cli = cli.Clone()
	cli.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if r := handshake(t, first, cli); r.cerr != nil || r.serr != nil || r.client.DidResume {
		t.Fatalf("first handshake: client %v, server %v, resumed %v", r.cerr, r.serr, r.client.DidResume)
	}
	r := handshake(t, second, cli)
	if r.cerr != nil || r.serr != nil {
		t.Fatalf("second handshake: client %v, server %v", r.cerr, r.serr)
	}
	if r.client.DidResume != r.server.DidResume {
		t.Fatalf("client and server disagree on resumption")
	}
	return r.client.DidResume
}

var versions = []struct {
	name string
	v    uint16
}{{"tls1.2", tls.VersionTLS12}, {"tls1.3", tls.VersionTLS13}}

func TestTicketsResumeAcrossRebuiltConfigs(t *testing.T) {
	e := newEnv(t)
	cert := testutil.SelfSigned(t, "site.test")
	e.add(t, "site", cert)
	for _, ver := range versions {
		t.Run(ver.name, func(t *testing.T) {
			keys := newKeys(t)
			cli := client("site.test", cert)
			cli.MaxVersion = ver.v
			a := e.server(t, bind("site"), keys)
			b := e.server(t, bind("site"), keys) // an Apply rebuilt it
			if !resumes(t, a, b, cli) {
				t.Fatal("a ticket of one config does not resume on a later one with the same keys")
			}
			// Another TicketKeys (another node with its own keys) does not.
			if resumes(t, a, e.server(t, bind("site"), newKeys(t)), cli) {
				t.Fatal("resumed with other keys")
			}
			// Nor after Set with other keys...
			cli2 := cli.Clone()
			cli2.ClientSessionCache = tls.NewLRUClientSessionCache(4)
			if r := handshake(t, a, cli2); r.cerr != nil {
				t.Fatal(r.cerr)
			}
			if err := keys.Set([][32]byte{{1}, {2}}); err != nil {
				t.Fatal(err)
			}
			if r := handshake(t, b, cli2); r.cerr != nil || r.client.DidResume {
				t.Fatalf("resumed after Set with other keys (%v)", r.cerr)
			}
			// ... and two nodes with the same keys set resume each
			// other's sessions.
			other := newKeys(t)
			if err := other.Set([][32]byte{{1}, {2}}); err != nil {
				t.Fatal(err)
			}
			if !resumes(t, b, e.server(t, bind("site"), other), cli) {
				t.Fatal("a node with the same keys does not resume")
			}
		})
	}
}

// TestTicketsAreBoundToTheBind: a ticket does not resume on a bind with
// other certificates or another client certificate policy, even with the
// same keys.
func TestTicketsAreBoundToTheBind(t *testing.T) {
	e := newEnv(t)
	cert := testutil.SelfSigned(t, "site.test")
	cert2 := testutil.SelfSigned(t, "site.test")
	e.add(t, "site", cert)
	e.add(t, "site2", cert2)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"ca one"}})
	ca2 := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"ca two"}})
	alice := testutil.NewCert(t, testutil.CertSpec{Client: true, Names: []string{"alice"}, Parent: ca})
	mtls := func(cas ...*testutil.Cert) *config.BindTLS {
		b := bind("site")
		b.ClientAuth = config.ClientAuthOptional
		for _, c := range cas {
			b.ClientCA += c.CertPEM
		}
		return b
	}
	for _, ver := range versions {
		t.Run(ver.name, func(t *testing.T) {
			keys := newKeys(t)
			cli := client("site.test", cert, cert2)
			cli.MaxVersion = ver.v
			cli.Certificates = []tls.Certificate{alice.TLS()}
			if !resumes(t, e.server(t, mtls(ca), keys), e.server(t, mtls(ca), keys), cli) {
				t.Fatal("same bind settings: no resumption")
			}
			if resumes(t, e.server(t, mtls(ca), keys), e.server(t, mtls(ca2), keys), cli) {
				t.Fatal("a client verified by one CA resumed on a bind trusting another")
			}
			plain := cli.Clone()
			plain.Certificates = nil
			if resumes(t, e.server(t, bind("site"), keys), e.server(t, bind("site2"), keys), plain) {
				t.Fatal("resumed on a bind serving another certificate")
			}
		})
	}
}

func TestTicketRotationKeepsOldKeysDecrypting(t *testing.T) {
	e := newEnv(t)
	cert := testutil.SelfSigned(t, "site.test")
	e.add(t, "site", cert)
	keys := newKeys(t)
	srv := e.server(t, bind("site"), keys)
	cli := client("site.test", cert)
	cli.ClientSessionCache = tls.NewLRUClientSessionCache(4)
	if r := handshake(t, srv, cli); r.cerr != nil {
		t.Fatal(r.cerr)
	}
	first := keys.Info()[0].ID
	for i := 1; i <= KeptTicketKeys; i++ {
		keys.rotate()
		info := keys.Info()
		if info[0].ID == first || len(info) != min(i+1, KeptTicketKeys) || info[0].Source != SourceGenerated {
			t.Fatalf("after %d rotations: %+v", i, info)
		}
		if i < KeptTicketKeys {
			// Still decrypts the ticket of the first key. A resumed TLS 1.3
			// session gets a fresh ticket: keep the old one in the cache.
			probe := cli.Clone()
			probe.ClientSessionCache = &frozenCache{cli.ClientSessionCache}
			if r := handshake(t, srv, probe); r.cerr != nil || !r.client.DidResume {
				t.Fatalf("after %d rotations: not resumed (%v)", i, r.cerr)
			}
		}
	}
	if r := handshake(t, srv, cli); r.cerr != nil || r.client.DidResume {
		t.Fatalf("resumed with a key rotated out (%v)", r.cerr)
	}
}

// frozenCache serves the sessions of c and stores nothing new.
type frozenCache struct{ c tls.ClientSessionCache }

func (f *frozenCache) Get(k string) (*tls.ClientSessionState, bool) { return f.c.Get(k) }
func (f *frozenCache) Put(string, *tls.ClientSessionState)          {}

func TestTicketKeysRotateOnSchedule(t *testing.T) {
	keys, err := NewTicketKeys(t.TempDir(), 20*time.Millisecond, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	defer keys.Close()
	first := keys.Info()[0].ID
	testutil.Eventually(t, 5*time.Second, func() bool {
		info := keys.Info()
		return len(info) == KeptTicketKeys && info[0].ID != first
	}, "the keys never rotated")
}

func TestTicketKeysPersist(t *testing.T) {
	dir := t.TempDir()
	log := slog.New(slog.DiscardHandler)
	path := filepath.Join(dir, TicketKeysFile)
	leftover := filepath.Join(dir, "."+TicketKeysFile+".tmp-123")
	if err := os.WriteFile(leftover, []byte("keys of a write a crash cut"), 0o600); err != nil {
		t.Fatal(err)
	}
	a, err := NewTicketKeys(dir, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(leftover); err == nil {
		t.Fatal("the temporary file of an interrupted write is left")
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file: %v, %v", fi, err)
	}
	a.rotate()
	before := a.Info()
	a.Close()

	// A restart reads the same generated keys.
	b, err := NewTicketKeys(dir, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	if got := b.Info(); len(got) != 2 || got[0].ID != before[0].ID || got[1].ID != before[1].ID || !got[0].Created.Equal(before[0].Created) {
		t.Fatalf("after restart %+v, want %+v", got, before)
	}
	// Keys set through the API survive a restart and are not rotated,
	// however old they are.
	if err := b.Set([][32]byte{{7}, {8}, {9}}); err != nil {
		t.Fatal(err)
	}
	set := b.Info()
	b.Close()
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("key file after Set: %v, %v", fi, err)
	}
	c, err := NewTicketKeys(dir, time.Nanosecond, log)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	got := c.Info()
	if len(got) != 3 || got[0].ID != set[0].ID || got[0].Source != SourceAPI || c.timer != nil {
		t.Fatalf("api keys after restart: %+v (rotating: %v)", got, c.timer != nil)
	}
	if got[0].ID != keyID([32]byte{7}) || len(got[0].ID) != 8 {
		t.Fatalf("id %q", got[0].ID)
	}
	c.rotate()
	if c.Info()[0].ID != set[0].ID {
		t.Fatal("a rotation replaced keys set through the API")
	}

	// Generated keys older than the period are rotated at start.
	dir2 := t.TempDir()
	d, _ := NewTicketKeys(dir2, time.Hour, log)
	old := d.Info()[0].ID
	d.Close()
	d.keys[0].created = d.keys[0].created.Add(-61 * time.Minute)
	if err := d.persist(d.keys, SourceGenerated); err != nil {
		t.Fatal(err)
	}
	e, err := NewTicketKeys(dir2, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	e.Close()
	if info := e.Info(); info[0].ID == old || info[1].ID != old {
		t.Fatalf("stale generated keys not rotated at start: %+v", info)
	}
}

func TestTicketKeysRefusals(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	keys := newKeys(t)
	if err := keys.Set(nil); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("no key: %v", err)
	}
	if err := keys.Set(make([][32]byte, MaxTicketKeys+1)); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("too many keys: %v", err)
	}
	for name, content := range map[string]string{
		"not json":     "{",
		"no key":       `{"source":"api","keys":[]}`,
		"short key":    `{"source":"api","keys":[{"key":"AAAA","created":"2026-01-01T00:00:00Z"}]}`,
		"odd source":   `{"source":"x","keys":[{"key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","created":"2026-01-01T00:00:00Z"}]}`,
		"world read":   `{"source":"api","keys":[{"key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","created":"2026-01-01T00:00:00Z"}]}`,
		"symlink@link": "",
	} {
		dir := t.TempDir()
		path := filepath.Join(dir, TicketKeysFile)
		mode := os.FileMode(0o600)
		switch name {
		case "world read":
			mode = 0o644
		case "symlink@link":
			target := filepath.Join(dir, "elsewhere")
			_ = os.WriteFile(target, []byte("{}"), 0o600)
			if err := os.Symlink(target, path); err != nil {
				t.Fatal(err)
			}
		}
		if content != "" {
			if err := os.WriteFile(path, []byte(content), mode); err != nil {
				t.Fatal(err)
			}
			_ = os.Chmod(path, mode)
		}
		if k, err := NewTicketKeys(dir, time.Hour, log); err == nil {
			k.Close()
			t.Errorf("%s: key file accepted", name)
		}
	}
	// The good form of the same file is accepted.
	dir := t.TempDir()
	_ = os.WriteFile(filepath.Join(dir, TicketKeysFile),
		[]byte(`{"source":"api","keys":[{"key":"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA=","created":"2026-01-01T00:00:00Z"}]}`), 0o600)
	k, err := NewTicketKeys(dir, time.Hour, log)
	if err != nil {
		t.Fatal(err)
	}
	k.Close()
}

// TestTicketRotationFollowsTheConfig: Server applies
// tuning.tls.ticket_rotation_ms to the keys, so a shorter period set by an
// Apply takes effect without a restart.
func TestTicketRotationFollowsTheConfig(t *testing.T) {
	e := newEnv(t)
	e.add(t, "site", testutil.SelfSigned(t, "site.test"))
	keys := newKeys(t) // one hour
	first := keys.Info()[0].ID
	e.c.Tuning.TLS.TicketRotationMs = 20
	e.server(t, bind("site"), keys)
	testutil.Eventually(t, 5*time.Second, func() bool { return keys.Info()[0].ID != first }, "no rotation after the period shrank")
}
