package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestStateDirIsCreatedPrivate(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "new", "state")
	l, err := openStateDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	fi, err := os.Stat(dir)
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("state directory mode %v (%v), want 0700", fi.Mode().Perm(), err)
	}
}

func TestStateDirWritableByOthersRefusesStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	_, err := openStateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Fatalf("openStateDir on a 0777 directory: %v, want a refusal saying chmod 700", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "spliced.lock")); err == nil {
		t.Fatal("the refused directory was written to")
	}
}
