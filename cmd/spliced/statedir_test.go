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

// A group-writable state directory lets every member of the group plant a
// token file (an admin token of their own) or a config: refused like a
// world-writable one.
func TestStateDirWritableByGroupRefusesStart(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o770); err != nil {
		t.Fatal(err)
	}
	_, err := openStateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 700 "+dir) {
		t.Fatalf("openStateDir on a 0770 directory: %v, want a refusal saying chmod 700", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "spliced.lock")); err == nil {
		t.Fatal("the refused directory was written to")
	}
}

// A state directory owned by another user (not root) is that user's to
// fill: refused, whatever its mode.
func TestStateDirOwnedByAnotherUserRefusesStart(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give a directory to another user")
	}
	dir := t.TempDir()
	if err := os.Chown(dir, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, err := openStateDir(dir)
	if err == nil || !strings.Contains(err.Error(), "belongs to uid 65534") {
		t.Fatalf("openStateDir on a directory of uid 65534: %v, want a refusal naming its owner", err)
	}
	if _, err := os.Lstat(filepath.Join(dir, "spliced.lock")); err == nil {
		t.Fatal("the refused directory was written to")
	}
}
