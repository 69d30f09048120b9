package tokens

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

func TestWriteMirrorReplacesTheFileWithAValidDocumentOnly(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	es, err := AddTo(nil, "ops", Admin, HashOf("spliced_x"), time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMirror(dir, Marshal(es)); err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(filepath.Join(dir, FileName))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("mirror %v %v", fi, err)
	}
	chk, err := NewChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	if e, ok, err := chk.Lookup("spliced_x"); err != nil || !ok || e.Name != "ops" {
		t.Fatalf("lookup %+v %v %v", e, ok, err)
	}
	// A corrupt document leaves the mirror as it was.
	if err := WriteMirror(dir, []byte(`{"version":1,"tokens":[{"name":"x"}]}`)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("corrupt doc: %v", err)
	}
	if got, err := List(dir); err != nil || len(got) != 1 {
		t.Fatalf("after a refused mirror: %+v %v", got, err)
	}
}

func TestAddToAndRevokeFromLeaveTheirInputAlone(t *testing.T) {
	es, _ := AddTo(nil, "a", Viewer, HashOf("1"), time.Now())
	es, _ = AddTo(es, "b", Viewer, HashOf("2"), time.Now())
	if _, err := AddTo(es, "a", Admin, HashOf("3"), time.Now()); !errors.Is(err, config.ErrConflict) {
		t.Fatalf("taken name: %v", err)
	}
	out, err := RevokeFrom(es, "a")
	if err != nil || len(out) != 1 || out[0].Name != "b" || es[0].Name != "a" || es[1].Name != "b" {
		t.Fatalf("revoke: %+v, input now %+v (%v)", out, es, err)
	}
	if _, err := RevokeFrom(es, "zz"); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("unknown: %v", err)
	}
}
