package cluster

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/config/storetest"
	"github.com/spliced-proxy/spliced/internal/etcdtest"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

var bg = context.Background()

// prefixes numbers the prefixes of one test binary: each storage of a
// shared etcd is empty.
var prefixes atomic.Int64

// openStorage opens an EtcdStorage on c under a new prefix (or prefix),
// with cacheDir, closed at t.Cleanup.
func openStorage(t testing.TB, c *etcdtest.Cluster, prefix, cacheDir string) *EtcdStorage {
	t.Helper()
	if prefix == "" {
		prefix = "/t" + strconv.FormatInt(prefixes.Add(1), 10)
	}
	s, err := OpenEtcd(bg, Options{Endpoints: c.Endpoints(), Prefix: prefix, CacheDir: cacheDir, DialTimeout: 2 * time.Second})
	if err != nil {
		t.Fatalf("OpenEtcd: %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// testConfig is a valid, normalized config of generation gen with these
// backends, n servers each.
func testConfig(t testing.TB, gen int64, servers int, backends ...string) *config.Config {
	t.Helper()
	c := &config.Config{}
	for _, b := range backends {
		be := config.Backend{Name: b}
		for i := range servers {
			be.Servers = append(be.Servers, &config.Server{Name: "s" + strconv.Itoa(i), Address: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255), Port: 8080})
		}
		c.Backends = append(c.Backends, be)
	}
	c.Normalize()
	if err := config.Validate(c, config.Env{}); err != nil {
		t.Fatalf("test config: %v", err)
	}
	c.Generation = gen
	return c
}

func commitConfig(t testing.TB, s *EtcdStorage, c *config.Config, certs map[string][]byte) error {
	t.Helper()
	doc, err := json.Marshal(c)
	if err != nil {
		t.Fatal(err)
	}
	return s.Commit(bg, c.Generation-1, config.RevisionInfo{Generation: c.Generation, Time: time.Now(), Summary: "gen " + strconv.FormatInt(c.Generation, 10), Actor: "test"}, doc, certs)
}

func mustCommit(t testing.TB, s *EtcdStorage, c *config.Config, certs map[string][]byte) {
	t.Helper()
	if err := commitConfig(t, s, c, certs); err != nil {
		t.Fatalf("Commit of generation %d: %v", c.Generation, err)
	}
}

// testCertificate is a self-signed certificate as ParseCertificate makes it.
func testCertificate(t testing.TB, name string) (config.Certificate, []byte) {
	t.Helper()
	c := testutil.SelfSigned(t, name+".example")
	meta, bundle, err := config.ParseCertificate(name, c.CertPEM, c.KeyPEM, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return meta, bundle
}

func TestParseStoreURL(t *testing.T) {
	tests := []struct {
		in        string
		endpoints string
		prefix    string
		err       string
	}{
		{in: "etcd://127.0.0.1:2379/spliced", endpoints: "127.0.0.1:2379", prefix: "/spliced"},
		{in: "etcd://a:2379,b:2379,c:12379/spliced/prod/", endpoints: "a:2379,b:2379,c:12379", prefix: "/spliced/prod"},
		{in: "etcd://[::1]:2379/p", endpoints: "[::1]:2379", prefix: "/p"},
		{in: "http://127.0.0.1:2379/spliced", err: `scheme "http" is not supported`},
		{in: "127.0.0.1:2379/spliced", err: "not a URL"},
		{in: "etcd:///spliced", err: "no host"},
		{in: "etcd://127.0.0.1/spliced", err: "needs a port, as in 127.0.0.1:2379"},
		{in: "etcd://127.0.0.1:0/spliced", err: "bad port"},
		{in: "etcd://127.0.0.1:70000/spliced", err: "bad port"},
		{in: "etcd://127.0.0.1:http/spliced", err: "bad port"},
		{in: "etcd://:2379/spliced", err: "no host"},
		{in: "etcd://a:2379,,b:2379/spliced", err: "empty host"},
		{in: "etcd://127.0.0.1:2379", err: "no key prefix"},
		{in: "etcd://127.0.0.1:2379/", err: "no key prefix"},
		{in: "etcd://127.0.0.1:2379//", err: "no key prefix"},
		{in: "etcd://127.0.0.1:2379/a//b", err: "empty"},
		{in: "etcd://127.0.0.1:2379/a/../b", err: `".."`},
		{in: "etcd://127.0.0.1:2379/a b", err: "space"},
		{in: "etcd://user:pw@127.0.0.1:2379/p", err: "credentials"},
		{in: "etcd://127.0.0.1:2379/p?x=1", err: "query"},
	}
	for _, tc := range tests {
		eps, prefix, err := ParseStoreURL(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) || !strings.Contains(err.Error(), "etcd://127.0.0.1:2379/spliced") {
				t.Errorf("ParseStoreURL(%q) = %v, %q, %v; want an error saying %q and what a good URL is", tc.in, eps, prefix, err, tc.err)
			}
			continue
		}
		if err != nil || strings.Join(eps, ",") != tc.endpoints || prefix != tc.prefix {
			t.Errorf("ParseStoreURL(%q) = %v, %q, %v; want %s %s", tc.in, eps, prefix, err, tc.endpoints, tc.prefix)
		}
	}
}

func TestClientTLS(t *testing.T) {
	if c, err := ClientTLS("", "", ""); c != nil || err != nil {
		t.Fatalf("no files: %v, %v; want nil, nil", c, err)
	}
	if _, err := ClientTLS("", "cert.pem", ""); err == nil || !strings.Contains(err.Error(), "--etcd-key") {
		t.Fatalf("a cert without a key: %v", err)
	}
	dir := t.TempDir()
	bad := filepath.Join(dir, "ca.pem")
	os.WriteFile(bad, []byte("not pem"), 0o600)
	if _, err := ClientTLS(bad, "", ""); err == nil || !strings.Contains(err.Error(), "no PEM certificate") {
		t.Fatalf("a CA file without a certificate: %v", err)
	}
	cert := testutil.SelfSigned(t, "etcd.example")
	ca, certFile, keyFile := filepath.Join(dir, "ca2.pem"), filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	os.WriteFile(ca, []byte(cert.CertPEM), 0o600)
	os.WriteFile(certFile, []byte(cert.CertPEM), 0o600)
	os.WriteFile(keyFile, []byte(cert.KeyPEM), 0o600)
	if c, err := ClientTLS(ca, certFile, keyFile); err != nil || c.RootCAs == nil || len(c.Certificates) != 1 {
		t.Fatalf("CA, cert and key: %v, %v", c, err)
	}
}

func TestEtcdStorageCommitLoadRevert(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	if c, info, err := s.Load(bg); c != nil || info.Generation != 0 || err != nil {
		t.Fatalf("Load of an empty prefix: %v %+v %v", c, info, err)
	}
	meta, bundle := testCertificate(t, "site")
	c1 := testConfig(t, 1, 1, "web")
	c1.Certificates = []config.Certificate{meta}
	mustCommit(t, s, c1, map[string][]byte{meta.ChainSHA256: bundle})
	if err := commitConfig(t, s, testConfig(t, 1, 1, "other"), nil); !errors.Is(err, config.ErrRace) {
		t.Fatalf("a second commit on 0: %v, want ErrRace", err)
	}
	c2 := testConfig(t, 2, 1, "web", "api")
	mustCommit(t, s, c2, nil)
	// Another storage (another node) sees it, and its commit on a stale
	// generation loses.
	o := openStorage(t, e, s.Prefix(), "")
	got, info, err := o.Load(bg)
	if err != nil || got.Generation != 2 || len(got.Backends) != 2 || info.Summary != "gen 2" || info.Actor != "test" {
		t.Fatalf("Load from another storage: %+v %+v %v", got, info, err)
	}
	if err := commitConfig(t, o, testConfig(t, 2, 1, "stale"), nil); !errors.Is(err, config.ErrRace) {
		t.Fatalf("commit on 1 while 2 is current: %v, want ErrRace", err)
	}
	if b, err := o.CertificateBundle(bg, meta.ChainSHA256); err != nil || !bytes.Equal(b, bundle) {
		t.Fatalf("CertificateBundle: %v", err)
	}
	if _, err := o.CertificateBundle(bg, strings.Repeat("ab", 32)); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("CertificateBundle of an absent chain: %v", err)
	}
	revs, err := o.Revisions(bg)
	if err != nil || len(revs) != 2 || revs[0].Generation != 2 || revs[1].Generation != 1 || revs[1].Summary != "gen 1" {
		t.Fatalf("Revisions: %+v %v", revs, err)
	}
	// The other storage commits 3 on 2; s, whose last known is 2, still
	// commits 4 on 3 (it reads the current it did not see).
	mustCommit(t, o, testConfig(t, 3, 1, "x"), nil)
	mustCommit(t, s, testConfig(t, 4, 1, "y"), nil)
	// Revert 4 from o; then o's commit of 4 again and s's stale one.
	prev, err := o.Revision(bg, 3)
	if err != nil {
		t.Fatal(err)
	}
	if err := o.Revert(bg, prev, 4); err != nil {
		t.Fatalf("Revert: %v", err)
	}
	if c, _, _ := s.Load(bg); c.Generation != 3 {
		t.Fatalf("after Revert, current is %d", c.Generation)
	}
	if _, err := s.Revision(bg, 4); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("reverted revision: %v", err)
	}
	mustCommit(t, o, testConfig(t, 4, 1, "z"), nil)
	if revs, _ := s.Revisions(bg); len(revs) != 4 || revs[0].Summary != "gen 4" {
		t.Fatalf("Revisions after a revert and a new 4: %+v", revs)
	}
	// s knew 4 at an older mod revision: a commit on 4 still works.
	mustCommit(t, s, testConfig(t, 5, 1, "w"), nil)
	if err := s.Health(); err != nil {
		t.Fatalf("Health: %v", err)
	}
}

// TestRevisionsPrunedInTheCommit: the Txn that commits N deletes the
// revisions older than the 100 kept.
func TestRevisionsPrunedInTheCommit(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	last := int64(config.MaxRevisions + 3)
	for g := int64(1); g <= last; g++ {
		mustCommit(t, s, testConfig(t, g, 1, "b"+strconv.FormatInt(g%3, 10)), nil)
	}
	revs, err := s.Revisions(bg)
	if err != nil || len(revs) != config.MaxRevisions || revs[0].Generation != last || revs[len(revs)-1].Generation != 4 {
		t.Fatalf("%d revisions (%v), want %d from %d to 4", len(revs), err, config.MaxRevisions, last)
	}
	if _, err := s.Revision(bg, 3); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("Revision(3): %v, want pruned", err)
	}
}

// TestStoppedEtcdFailsWritesWithinTheTimeout: etcd down, a write fails
// with ErrUnavailable within WriteTimeout, Health says so; etcd back,
// both recover.
func TestStoppedEtcdFailsWritesWithinTheTimeout(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
	e.Stop(0)
	start := time.Now()
	err := commitConfig(t, s, testConfig(t, 2, 1, "web", "api"), nil)
	took := time.Since(start)
	if !errors.Is(err, config.ErrUnavailable) || !strings.Contains(err.Error(), e.Endpoints()[0]) {
		t.Fatalf("commit with etcd stopped: %v, want ErrUnavailable naming the endpoint", err)
	}
	if took > WriteTimeout+time.Second {
		t.Fatalf("the failed commit took %v, more than %v", took, WriteTimeout)
	}
	t.Logf("failed commit answered in %v: %v", took.Round(time.Millisecond), err)
	if err := s.Health(); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("Health with etcd stopped: %v", err)
	}
	e.Restart(0)
	testutil.Eventually(t, 10*time.Second, func() bool { return s.Health() == nil }, "Health once etcd is back")
	mustCommit(t, s, testConfig(t, 2, 1, "web", "api"), nil)
}

// TestHealthProbeNoticesAStop: without any call, Health's probe finds etcd
// gone within a few seconds.
func TestHealthProbeNoticesAStop(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	if err := s.Health(); err != nil {
		t.Fatal(err)
	}
	e.Stop(0)
	testutil.Eventually(t, 10*time.Second, func() bool { return errors.Is(s.Health(), config.ErrUnavailable) }, "Health to report the stopped etcd")
}

// TestLoadFallsBackToTheNodeCache: a node restarted while etcd is down
// loads the generation it last applied, with its certificates.
func TestLoadFallsBackToTheNodeCache(t *testing.T) {
	e := etcdtest.Start(t, 1)
	stateDir := t.TempDir()
	s := openStorage(t, e, "/spliced", stateDir)
	meta, bundle := testCertificate(t, "site")
	c1 := testConfig(t, 1, 1, "web")
	c1.Certificates = []config.Certificate{meta}
	mustCommit(t, s, c1, map[string][]byte{meta.ChainSHA256: bundle})
	applied, _, err := s.Load(bg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.RememberApplied(bg, applied); err != nil {
		t.Fatalf("RememberApplied: %v", err)
	}
	for _, p := range []string{filepath.Join(stateDir, CacheFile), filepath.Join(stateDir, CacheCertsDir, meta.ChainSHA256+".pem")} {
		if fi, err := os.Stat(p); err != nil || fi.Mode().Perm() != 0o600 {
			t.Fatalf("%s: %v, mode %v; want 0600", p, err, fi.Mode())
		}
	}
	if fi, _ := os.Stat(filepath.Join(stateDir, CacheCertsDir)); fi.Mode().Perm() != 0o700 {
		t.Fatalf("cache certs dir mode %v, want 0700", fi.Mode())
	}
	e.Stop(0)

	// Each Load first waits for etcd: not 5 s each in this test.
	short := func(s *EtcdStorage) *EtcdStorage { s.readTimeout = 500 * time.Millisecond; return s }
	restarted := short(openStorage(t, e, "/spliced", stateDir))
	c, info, err := restarted.Load(bg)
	if err != nil || c.Generation != 1 || len(c.Backends) != 1 || len(c.Certificates) != 1 || info.Generation != 1 {
		t.Fatalf("Load with etcd down and a cache: %+v %+v %v", c, info, err)
	}
	if b, err := restarted.CertificateBundle(bg, meta.ChainSHA256); err != nil || !bytes.Equal(b, bundle) {
		t.Fatalf("CertificateBundle from the cache: %v", err)
	}
	if err := restarted.Health(); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("Health while running from the cache: %v", err)
	}
	other := short(openStorage(t, e, "/other", stateDir))
	if _, _, err := other.Load(bg); !errors.Is(err, config.ErrUnavailable) || !strings.Contains(err.Error(), `prefix "/spliced", not "/other"`) {
		t.Fatalf("Load of another prefix from the cache: %v", err)
	}
	none := short(openStorage(t, e, "/spliced", t.TempDir()))
	if _, _, err := none.Load(bg); !errors.Is(err, config.ErrUnavailable) || !strings.Contains(err.Error(), "no copy of a configuration") {
		t.Fatalf("Load without etcd and without a cache: %v", err)
	}
	// A start (default read timeouts): one bounded wait, Reach (a second
	// with a cache, not DialTimeout), then Load from the cache at once
	// (readBudget), not 5 s each.
	start := time.Now()
	starting := openStorage(t, e, "/spliced", stateDir)
	if err := starting.Reach(bg); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("Reach with etcd down: %v", err)
	}
	if took := time.Since(start); took >= starting.dialTimeout {
		t.Errorf("Reach with etcd down and a cache took %v, want less than DialTimeout (%v)", took, starting.dialTimeout)
	}
	if c, _, err := starting.Load(bg); err != nil || c.Generation != 1 {
		t.Fatalf("Load after Reach: %v", err)
	}
	if took := time.Since(start); took > 4*time.Second {
		t.Errorf("Reach and Load with etcd down took %v, want about 2 s", took)
	}

	// A later apply without the certificate drops its bundle.
	e.Restart(0)
	c2 := testConfig(t, 2, 1, "web")
	mustCommit(t, s, c2, nil)
	if err := s.RememberApplied(bg, c2); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(stateDir, CacheCertsDir, meta.ChainSHA256+".pem")); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("bundle of a certificate no longer used: %v", err)
	}
}

// TestLargeDocumentCommits: a document of 10 000 servers, megabytes of
// JSON, fits etcd's request limit once gzipped, and loads back.
func TestLargeDocumentCommits(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	c := testConfig(t, 1, 10000, "big")
	doc, _ := json.Marshal(c)
	start := time.Now()
	mustCommit(t, s, c, nil)
	took := time.Since(start)
	start = time.Now()
	got, _, err := s.Load(bg)
	if err != nil || len(got.Backends[0].Servers) != 10000 {
		t.Fatalf("Load: %v", err)
	}
	var enc revisionEncoder
	val, _ := enc.encode(config.RevisionInfo{Generation: 1}, doc)
	t.Logf("10 000 servers: %d bytes of JSON, %d gzipped; commit %v, load %v", len(doc), len(val), took.Round(time.Millisecond), time.Since(start).Round(time.Millisecond))
}

// TestThreeMembersOneStoppedStillCommits: quorum is two of three, even
// when the member stopped (as by a crash) is the leader: the write that
// follows waits for the election, within the write's budget.
func TestThreeMembersOneStoppedStillCommits(t *testing.T) {
	t.Parallel()
	for _, stop := range []string{"follower", "leader"} {
		t.Run(stop, func(t *testing.T) {
			e := etcdtest.Start(t, 3)
			s := openStorage(t, e, "", "")
			mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
			var victim int
			testutil.Eventually(t, 10*time.Second, func() bool { victim = e.Leader(); return victim >= 0 }, "a leader")
			if stop == "follower" {
				victim = (victim + 1) % 3
			}
			e.Stop(victim)
			start := time.Now()
			mustCommit(t, s, testConfig(t, 2, 1, "web", "api"), nil)
			t.Logf("%s (member %d) stopped; the next commit took %v", stop, victim, time.Since(start).Round(time.Millisecond))
			if c, _, err := s.Load(bg); err != nil || c.Generation != 2 {
				t.Fatalf("Load with one member stopped: %v", err)
			}
			e.Restart(victim)
			mustCommit(t, s, testConfig(t, 3, 1, "web"), nil)
		})
	}
}

// TestEditKeyConcurrentEditsAllApply: each edit is conditional on the
// key's mod revision and retried: none is lost.
func TestEditKeyConcurrentEditsAllApply(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	if v, mod, err := s.GetKey(bg, TokensKey); v != nil || mod != 0 || err != nil {
		t.Fatalf("GetKey of an absent key: %q %d %v", v, mod, err)
	}
	const editors = 4
	var wg sync.WaitGroup
	errs := make([]error, editors)
	for i := range editors {
		wg.Go(func() {
			errs[i] = s.EditKey(bg, TokensKey, func(old []byte) ([]byte, error) {
				n, _ := strconv.Atoi(string(old))
				return []byte(strconv.Itoa(n + 1)), nil
			})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("editor %d: %v", i, err)
		}
	}
	v, mod, err := s.GetKey(bg, TokensKey)
	if err != nil || string(v) != strconv.Itoa(editors) || mod == 0 {
		t.Fatalf("after %d edits: %q %d %v", editors, v, mod, err)
	}
	refuse := errors.New("refused")
	if err := s.EditKey(bg, TokensKey, func([]byte) ([]byte, error) { return nil, refuse }); err != refuse {
		t.Fatalf("an edit's error: %v", err)
	}
	if err := s.EditKey(bg, TokensKey, func([]byte) ([]byte, error) { return nil, nil }); err != nil {
		t.Fatal(err)
	}
	if v, _, _ := s.GetKey(bg, TokensKey); v != nil {
		t.Fatalf("an edit returning nil left %q", v)
	}
}

// TestCommitWithMoreBundlesThanATxnTakes: bundles beyond etcd's
// --max-txn-ops are written before the commit's Txn.
func TestCommitWithMoreBundlesThanATxnTakes(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	certs := map[string][]byte{}
	for i := range 130 {
		sum := sha256.Sum256([]byte{byte(i)})
		certs[hex.EncodeToString(sum[:])] = []byte("bundle " + strconv.Itoa(i))
	}
	mustCommit(t, s, testConfig(t, 1, 1, "web"), certs)
	o := openStorage(t, e, s.Prefix(), "")
	for sum, want := range certs {
		if b, err := o.CertificateBundle(bg, sum); err != nil || !bytes.Equal(b, want) {
			t.Fatalf("bundle %s: %q %v", sum, b, err)
		}
	}
}

// TestEtcdStorageContract runs the contract of config.Storage (the same
// as the state directory's) on one etcd, a prefix per subtest.
func TestEtcdStorageContract(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	storetest.Run(t, func(t *testing.T) config.Storage { return openStorage(t, e, "", "") })
}

// BenchmarkEtcdStorageCommit is the time of one Commit (gzip, one Txn) on
// a one-member embedded etcd, with fsync (as etcd runs) and without (as
// the tests run it), for a document of one server and of 10 000:
//
//	go test -run '^$' -bench EtcdStorageCommit -benchtime 50x ./core/cluster/
func BenchmarkEtcdStorageCommit(b *testing.B) {
	for _, fsync := range []bool{true, false} {
		e, err := etcdtest.Launch(etcdtest.Options{Dir: b.TempDir(), Fsync: fsync})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(e.Close)
		for _, servers := range []int{1, 10000} {
			b.Run(fmt.Sprintf("fsync=%v/servers=%d", fsync, servers), func(b *testing.B) {
				s := openStorage(b, e, "", "")
				doc, err := json.Marshal(testConfig(b, 1, servers, "web"))
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(doc)))
				b.ReportAllocs()
				var gen int64
				for b.Loop() {
					if err := s.Commit(bg, gen, config.RevisionInfo{Generation: gen + 1, Time: time.Now(), Summary: "bench"}, doc, nil); err != nil {
						b.Fatal(err)
					}
					gen++
				}
			})
		}
	}
}

// TestEtcdWithClientCertificates: an etcd that requires client
// certificates (as doc.go recommends) takes the commits of a storage
// given ClientTLS's configuration, and none without a certificate.
func TestEtcdWithClientCertificates(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ca := testutil.NewCert(t, testutil.CertSpec{Names: []string{"etcd test CA"}, CA: true})
	server := testutil.NewCert(t, testutil.CertSpec{Names: []string{"127.0.0.1"}, Parent: ca})
	client := testutil.NewCert(t, testutil.CertSpec{Names: []string{"spliced"}, Client: true, Parent: ca})
	write := func(name, pem string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(pem), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	caFile := write("ca.pem", ca.CertPEM)
	e := etcdtest.StartOptions(t, etcdtest.Options{ClientTLS: &etcdtest.TLSFiles{
		CertFile: write("server.pem", server.CertPEM), KeyFile: write("server.key", server.KeyPEM), TrustedCAFile: caFile}})

	cfg, err := ClientTLS(caFile, write("client.pem", client.CertPEM), write("client.key", client.KeyPEM))
	if err != nil {
		t.Fatal(err)
	}
	s, err := OpenEtcd(bg, Options{Endpoints: e.Endpoints(), Prefix: "/spliced", TLS: cfg})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)

	noCert, err := ClientTLS(caFile, "", "")
	if err != nil {
		t.Fatal(err)
	}
	anon, err := OpenEtcd(bg, Options{Endpoints: e.Endpoints(), Prefix: "/spliced", TLS: noCert})
	if err != nil {
		t.Fatal(err)
	}
	defer anon.Close()
	anon.readTimeout = time.Second
	if _, _, err := anon.Load(bg); !errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("Load without a client certificate: %v, want ErrUnavailable", err)
	}
}

// TestDamagedCurrentIsCorruptNotUnavailable: a P/current that is not
// {"generation":N} is the store's damage (ErrCorrupt), not etcd being
// down: Load does not fall back to the node's cache, Health stays nil.
func TestDamagedCurrentIsCorruptNotUnavailable(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", t.TempDir())
	c := testConfig(t, 1, 1, "web")
	mustCommit(t, s, c, nil)
	if err := s.RememberApplied(bg, c); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Client().Put(bg, s.CurrentKey(), "garbage"); err != nil {
		t.Fatal(err)
	}
	if _, _, err := s.Load(bg); !errors.Is(err, config.ErrCorrupt) || errors.Is(err, config.ErrUnavailable) {
		t.Fatalf("Load of a damaged current: %v, want ErrCorrupt", err)
	}
	if err := commitConfig(t, s, testConfig(t, 2, 1, "web", "api"), nil); !errors.Is(err, config.ErrCorrupt) {
		t.Fatalf("Commit on a damaged current: %v, want ErrCorrupt", err)
	}
	if err := s.Health(); err != nil {
		t.Fatalf("Health: %v", err)
	}
}

// TestBundlesNoKeptRevisionUsesArePruned: a certificate's bundle (its
// private key) goes once the last revision referring to it is pruned;
// the bundles of kept revisions stay.
func TestBundlesNoKeptRevisionUsesArePruned(t *testing.T) {
	t.Parallel()
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	old, oldBundle := testCertificate(t, "old")
	kept, keptBundle := testCertificate(t, "kept")
	c := testConfig(t, 1, 1, "web")
	c.Certificates = []config.Certificate{old}
	mustCommit(t, s, c, map[string][]byte{old.ChainSHA256: oldBundle})
	c = testConfig(t, 2, 1, "web")
	c.Certificates = []config.Certificate{kept}
	mustCommit(t, s, c, map[string][]byte{kept.ChainSHA256: keptBundle})
	for g := int64(3); g <= config.MaxRevisions; g++ {
		c := testConfig(t, g, 1, "web")
		mustCommit(t, s, c, nil)
	}
	// 100 revisions, 1 to 100: both bundles referred to.
	if n, err := s.pruneCertificates(bg); n != 0 || err != nil {
		t.Fatalf("pruning with every bundle referred to: %d removed, %v", n, err)
	}
	// Generation 101 prunes revision 1, the last to use "old"; the
	// commit starts the pruning.
	mustCommit(t, s, testConfig(t, config.MaxRevisions+1, 1, "web"), nil)
	// Polled in etcd itself: CertificateBundle keeps what it read.
	testutil.Eventually(t, 10*time.Second, func() bool {
		v, _, err := s.GetKey(bg, "certs/"+old.ChainSHA256)
		return v == nil && err == nil
	}, "the bundle of the certificate no kept revision uses to be removed")
	o := openStorage(t, e, s.Prefix(), "")
	if _, err := o.CertificateBundle(bg, old.ChainSHA256); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("the removed bundle: %v, want ErrNotFound", err)
	}
	if b, err := o.CertificateBundle(bg, kept.ChainSHA256); err != nil || !bytes.Equal(b, keptBundle) {
		t.Fatalf("the bundle revision 2 uses: %v", err)
	}
}
