package api

import (
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
)

// The "ktls" field of /api/v1/info follows the kernel's TCP ULP list, read
// on every request (loading the tls module adds the ULP at run time).
func TestInfoReportsKTLSFromTheULPList(t *testing.T) {
	ulp := filepath.Join(t.TempDir(), "tcp_available_ulp")
	st, err := config.Open(t.TempDir(), "", slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	nop := &coretest.Nop{}
	f := &fixture{store: st, core: nop,
		h: New(Options{Store: st, Core: nop, AdminAddr: "127.0.0.1:0",
			AdminHosts: []string{"example.com:80"}, TCPULPPath: ulp})}
	write := func(body string) {
		if err := os.WriteFile(ulp, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	ktls := func() string {
		return decodeJSON[Info](t, f.must(t, 200, "GET", "/api/v1/info", "")).KTLS
	}
	write("mptcp\n")
	if got := ktls(); got != "unavailable: no tls ULP" {
		t.Errorf("mptcp only: %q", got)
	}
	write("mptcp tls\n")
	if got := ktls(); got != "available" {
		t.Errorf("tls listed: %q", got)
	}
	if err := os.Remove(ulp); err != nil {
		t.Fatal(err)
	}
	if got := ktls(); !strings.HasPrefix(got, "unknown: ") {
		t.Errorf("no file: %q", got)
	}
}

// Without Options.TCPULPPath the host's list is read: the field is never
// empty.
func TestInfoKTLSDefaultsToTheHostList(t *testing.T) {
	f := newFixture(t)
	if got := decodeJSON[Info](t, f.must(t, 200, "GET", "/api/v1/info", "")).KTLS; got == "" {
		t.Fatal("empty ktls")
	}
}
