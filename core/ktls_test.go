package core

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestKTLSSupportReadsTheULPList(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, path, want string
	}{
		{"tls listed", write("both", "mptcp tls\n"), "available"},
		{"tls alone", write("tls", "tls\n"), "available"},
		{"mptcp only", write("mptcp", "mptcp\n"), "unavailable: no tls ULP"},
		{"empty", write("empty", ""), "unavailable: no tls ULP"},
		{"tls as a prefix only", write("tlsx", "tlsx mptcp\n"), "unavailable: no tls ULP"},
	} {
		if got := KTLSSupport(tc.path); got != tc.want {
			t.Errorf("%s: %q, want %q", tc.name, got, tc.want)
		}
	}
	got := KTLSSupport(filepath.Join(dir, "absent"))
	if !strings.HasPrefix(got, "unknown: ") || !strings.Contains(got, "no such file") {
		t.Errorf("absent file: %q", got)
	}
}
