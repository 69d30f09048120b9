package tokens

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
)

var now = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func TestAddStoresOnlyTheHashAndLookupFindsTheToken(t *testing.T) {
	dir := t.TempDir()
	secret, err := Add(dir, "ci", Operator, now)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(secret, "spliced_") || len(secret) != len("spliced_")+43 {
		t.Fatalf("secret %q: want spliced_ + 43 base64url characters", secret)
	}
	data, err := os.ReadFile(filepath.Join(dir, FileName))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(data), secret) || strings.Contains(string(data), secret[len("spliced_"):]) {
		t.Fatalf("the token file holds the secret:\n%s", data)
	}
	fi, _ := os.Stat(filepath.Join(dir, FileName))
	if fi.Mode().Perm() != 0o600 {
		t.Fatalf("mode %v, want 0600", fi.Mode().Perm())
	}
	c, err := NewChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	e, ok, err := c.Lookup(secret)
	if err != nil || !ok || e.Name != "ci" || e.Role != Operator || !e.Created.Equal(now) {
		t.Fatalf("Lookup = %+v %v %v", e, ok, err)
	}
	for _, bad := range []string{"", secret[:len(secret)-1], secret + "x", strings.ToUpper(secret), strings.Repeat("a", 10000)} {
		if _, ok, err := c.Lookup(bad); ok || err != nil {
			t.Errorf("Lookup(%.20q) = %v, %v; want not found", bad, ok, err)
		}
	}
}

func TestCheckerSeesAddAndRevokeWithoutRestart(t *testing.T) {
	dir := t.TempDir()
	c, err := NewChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	if empty, err := c.Empty(); !empty || err != nil {
		t.Fatalf("Empty() = %v, %v on a directory without a token file", empty, err)
	}
	a, _ := Add(dir, "a", Admin, now)
	b, _ := Add(dir, "b", Viewer, now)
	if empty, _ := c.Empty(); empty {
		t.Fatal("Empty() after Add")
	}
	if _, ok, _ := c.Lookup(b); !ok {
		t.Fatal("second token not found")
	}
	if err := Revoke(dir, "b"); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := c.Lookup(b); ok {
		t.Fatal("revoked token still accepted")
	}
	if e, ok, _ := c.Lookup(a); !ok || e.Name != "a" {
		t.Fatal("the other token was lost by the revoke")
	}
	if err := Revoke(dir, "b"); !errors.Is(err, config.ErrNotFound) {
		t.Fatalf("second revoke: %v, want ErrNotFound", err)
	}
	if _, err := Add(dir, "a", Viewer, now); !errors.Is(err, config.ErrConflict) {
		t.Fatalf("duplicate add: %v, want ErrConflict", err)
	}
}

func TestAddRefusesBadNamesAndRoles(t *testing.T) {
	dir := t.TempDir()
	for _, name := range []string{"", "UP", "../x", "a b", "a\r\nb", "-a", strings.Repeat("a", 200)} {
		if _, err := Add(dir, name, Admin, now); !errors.Is(err, config.ErrInvalid) {
			t.Errorf("Add(%q) = %v, want ErrInvalid", name, err)
		}
	}
	if _, err := Add(dir, "x", Role("root"), now); !errors.Is(err, config.ErrInvalid) {
		t.Errorf("unknown role: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, FileName)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused adds wrote a file: %v", err)
	}
}

func TestConcurrentAddsLoseNothing(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := Add(dir, "t"+strings.Repeat("x", i), Viewer, now); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	es, err := List(dir)
	if err != nil || len(es) != 20 {
		t.Fatalf("List = %d entries, %v; want 20", len(es), err)
	}
}

func TestCorruptFileFailsClosed(t *testing.T) {
	dir := t.TempDir()
	secret, _ := Add(dir, "a", Admin, now)
	c, err := NewChecker(dir)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, FileName)
	if err := os.WriteFile(p, []byte(`{"version":1,"tokens":[`), 0o600); err != nil {
		t.Fatal(err)
	}
	if empty, err := c.Empty(); empty || err == nil {
		t.Fatalf("Empty() = %v, %v on a corrupt file; want false and an error", empty, err)
	}
	if _, ok, err := c.Lookup(secret); ok || !errors.Is(err, ErrCorrupt) {
		t.Fatalf("Lookup on a corrupt file = %v, %v", ok, err)
	}
	if _, err := NewChecker(dir); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("NewChecker on a corrupt file: %v", err)
	}
}

func TestParse(t *testing.T) {
	h := HashOf("spliced_x")
	tests := []struct {
		name, doc string
		ok        bool
	}{
		{"empty list", `{"version":1,"tokens":[]}`, true},
		{"one token", `{"version":1,"tokens":[{"name":"a","role":"viewer","hash":"` + h + `","created":"2026-01-01T00:00:00Z"}]}`, true},
		{"no version", `{"tokens":[]}`, false},
		{"version 2", `{"version":2,"tokens":[]}`, false},
		{"unknown member", `{"version":1,"tokens":[],"x":1}`, false},
		{"unknown role", `{"version":1,"tokens":[{"name":"a","role":"root","hash":"` + h + `"}]}`, false},
		{"bad name", `{"version":1,"tokens":[{"name":"../a","role":"admin","hash":"` + h + `"}]}`, false},
		{"duplicate name", `{"version":1,"tokens":[{"name":"a","role":"admin","hash":"` + h + `"},{"name":"a","role":"admin","hash":"` + h + `"}]}`, false},
		{"short hash", `{"version":1,"tokens":[{"name":"a","role":"admin","hash":"sha256:00"}]}`, false},
		{"plain secret instead of hash", `{"version":1,"tokens":[{"name":"a","role":"admin","hash":"spliced_abc"}]}`, false},
		{"trailing data", `{"version":1,"tokens":[]} {}`, false},
		{"not json", `tokens`, false},
		{"empty", ``, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := Parse([]byte(tc.doc))
			if (err == nil) != tc.ok {
				t.Fatalf("Parse: %v, want ok=%v", err, tc.ok)
			}
			if err != nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("error %v does not wrap ErrCorrupt", err)
			}
		})
	}
}

func TestParseErrorsNeverQuoteAHash(t *testing.T) {
	h := HashOf("spliced_secret")
	doc := `{"version":1,"tokens":[{"name":"a","role":"root","hash":"` + h + `"}],"x":"` + h + `"}`
	for _, d := range []string{doc, doc[:len(doc)-5], strings.Replace(doc, `"hash":"`, `"hash":`, 1)} {
		_, err := Parse([]byte(d))
		if err == nil || strings.Contains(err.Error(), h[7:20]) {
			t.Fatalf("Parse error %v quotes the hash", err)
		}
	}
}

func TestRoleOrder(t *testing.T) {
	tests := []struct {
		have, need Role
		ok         bool
	}{
		{Viewer, Viewer, true}, {Viewer, Operator, false}, {Viewer, Admin, false},
		{Operator, Viewer, true}, {Operator, Operator, true}, {Operator, Admin, false},
		{Admin, Viewer, true}, {Admin, Operator, true}, {Admin, Admin, true},
		{Role(""), Viewer, false}, {Role("root"), Viewer, false},
	}
	for _, tc := range tests {
		if got := tc.have.Allows(tc.need); got != tc.ok {
			t.Errorf("%q.Allows(%q) = %v", tc.have, tc.need, got)
		}
	}
}

func BenchmarkLookup(b *testing.B) {
	dir := b.TempDir()
	var secret string
	for i := range 10 {
		secret, _ = Add(dir, "t"+strings.Repeat("x", i), Viewer, now)
	}
	c, err := NewChecker(dir)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		if _, ok, _ := c.Lookup(secret); !ok {
			b.Fatal("not found")
		}
	}
}

func TestAddAsRootKeepsTheOwnerOfTheStateDirectory(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root: only root can give a file to another user")
	}
	dir := t.TempDir()
	const uid, gid = 65534, 65534 // nobody
	if err := os.Chown(dir, uid, gid); err != nil {
		t.Fatal(err)
	}
	owner := func() (int, int) {
		t.Helper()
		fi, err := os.Stat(filepath.Join(dir, FileName))
		if err != nil {
			t.Fatal(err)
		}
		st := fi.Sys().(*syscall.Stat_t)
		return int(st.Uid), int(st.Gid)
	}
	if _, err := Add(dir, "ci", Admin, now); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(); u != uid || g != gid {
		t.Fatalf("new token file owned by %d:%d, want the directory's %d:%d", u, g, uid, gid)
	}
	// The next write keeps the owner of the file it replaces.
	if err := os.Chown(dir, 0, 0); err != nil {
		t.Fatal(err)
	}
	if _, err := Add(dir, "ops", Operator, now); err != nil {
		t.Fatal(err)
	}
	if u, g := owner(); u != uid || g != gid {
		t.Fatalf("rewritten token file owned by %d:%d, want the old file's %d:%d", u, g, uid, gid)
	}
}

func TestPlantedSymlinkTokenFileIsRefused(t *testing.T) {
	src := t.TempDir()
	if _, err := Add(src, "ci", Admin, now); err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(src, FileName), filepath.Join(dir, FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := NewChecker(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("NewChecker on a symlinked tokens.json: %v, want a refusal", err)
	}
	if _, err := List(dir); err == nil || !strings.Contains(err.Error(), "symbolic link") {
		t.Fatalf("List on a symlinked tokens.json: %v, want a refusal", err)
	}
	// A link planted while the server runs: every lookup fails closed.
	live := t.TempDir()
	c, err := NewChecker(live)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(src, FileName), filepath.Join(live, FileName)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Empty(); err == nil {
		t.Fatal("the Checker followed a symlink planted at run time")
	}
}

func TestTokenFileReadableByOthersRefusesStart(t *testing.T) {
	dir := t.TempDir()
	if _, err := Add(dir, "ci", Admin, now); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(dir, FileName)
	if err := os.Chmod(p, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := NewChecker(dir)
	if err == nil || !strings.Contains(err.Error(), "chmod 600 "+p) {
		t.Fatalf("NewChecker on a 0644 tokens.json: %v, want a refusal saying chmod 600", err)
	}
	if err := os.Chmod(p, 0o640); err != nil {
		t.Fatal(err)
	}
	if _, err := NewChecker(dir); err != nil {
		t.Fatalf("0640 (group of the service) is allowed: %v", err)
	}
}
