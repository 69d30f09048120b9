package cluster

import (
	"testing"

	"github.com/spliced-proxy/spliced/internal/etcdtest"
)

// A commit of more bundles than a Txn takes writes them first, in Txns of
// their own, then commits the revision that refers to them. A pruning
// between the two (another node's commit started it) saw them unreferenced
// and removed them: the revision then named bundles etcd no longer held,
// and every node refused it. Bundles written after P/current's last change
// are kept until a later commit; then, still unreferenced, they go.
func TestPruningKeepsBundlesUploadedForACommitUnderWay(t *testing.T) {
	e := etcdtest.Start(t, 1)
	s := openStorage(t, e, "", "")
	mustCommit(t, s, testConfig(t, 1, 1, "web"), nil)
	meta, bundle := testCertificate(t, "coming")
	// The first step of a large commit: its bundles, not yet referred to.
	if _, err := s.Client().Put(bg, s.certKey(meta.ChainSHA256), string(bundle)); err != nil {
		t.Fatal(err)
	}
	if n, err := s.pruneCertificates(bg); n != 0 || err != nil {
		t.Fatalf("pruning during a commit under way: %d bundle(s) removed, %v; want none", n, err)
	}
	if v, _, err := s.GetKey(bg, "certs/"+meta.ChainSHA256); v == nil || err != nil {
		t.Fatalf("the bundle of the commit under way: %q, %v", v, err)
	}
	// That commit failed (never made): the next commit leaves the bundle
	// unreferenced and older than P/current, pruned then.
	mustCommit(t, s, testConfig(t, 2, 1, "web"), nil)
	if n, err := s.pruneCertificates(bg); n != 1 || err != nil {
		t.Fatalf("pruning after a later commit: %d bundle(s) removed, %v; want the one no revision uses", n, err)
	}
}
