package api

import (
	"fmt"
	"log/slog"
	"testing"

	"github.com/spliced-proxy/spliced/core"
	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/coretest"
)

// limitCore is a Nop with one limit, "per_ip" of frontend "public",
// holding one entry per key of keys.
type limitCore struct {
	*coretest.Nop
	keys    map[string]bool
	asked   int
	cleared []string
}

func (c *limitCore) LimitEntries(fe, lim string, n int) (core.LimitTable, error) {
	if fe != "public" || lim != "per_ip" {
		return core.LimitTable{}, fmt.Errorf("%w: no such limit", config.ErrNotFound)
	}
	c.asked = n
	t := core.LimitTable{Frontend: fe, Limit: lim, Key: "src", Capacity: 8, Nodes: 1, Top: []core.LimitEntry{}}
	for k := range c.keys {
		t.Top = append(t.Top, core.LimitEntry{Key: k, ReqRate: 3})
	}
	t.Entries = len(t.Top)
	return t, nil
}

func (c *limitCore) ClearLimitEntry(fe, lim, key string, dry bool) error {
	if _, err := c.LimitEntries(fe, lim, 1); err != nil {
		return err
	}
	if key == "not-a-key" {
		return fmt.Errorf("%w: not a key", config.ErrInvalid)
	}
	if !c.keys[key] {
		return fmt.Errorf("%w: no entry", config.ErrNotFound)
	}
	if !dry {
		delete(c.keys, key)
		c.cleared = append(c.cleared, key)
	}
	return nil
}

func TestLimitEntriesEndpoints(t *testing.T) {
	log := slog.New(slog.DiscardHandler)
	st, err := config.Open(t.TempDir(), "", log)
	if err != nil {
		t.Fatal(err)
	}
	lc := &limitCore{Nop: &coretest.Nop{}, keys: map[string]bool{"10.0.0.1": true, "a/b %x": true, "2001:db8::1": true}}
	f := &fixture{h: New(Options{Store: st, Core: lc, Version: "test", StateDir: st.Dir(), AdminAddr: "127.0.0.1:0", Logger: log,
		AdminHosts: []string{"example.com:80"}}), store: st}
	const p = "/api/v1/frontends/public/limits/per_ip/entries"

	tab := decodeJSON[core.LimitTable](t, f.must(t, 200, "GET", p, ""))
	if tab.Entries != 3 || len(tab.Top) != 3 || lc.asked != defaultLimitEntries {
		t.Fatalf("table %+v, asked for %d", tab, lc.asked)
	}
	f.must(t, 200, "GET", p+"?limit=1000", "")
	if lc.asked != 1000 {
		t.Fatalf("?limit=1000 asked for %d", lc.asked)
	}
	for _, bad := range []string{"?limit=0", "?limit=1001", "?limit=x", "?limit=1&limit=2", "?top=3"} {
		problemOf(t, f.must(t, 400, "GET", p+bad, ""))
	}
	problemOf(t, f.must(t, 404, "GET", "/api/v1/frontends/public/limits/nope/entries", ""))
	problemOf(t, f.must(t, 404, "GET", "/api/v1/frontends/nope/limits/per_ip/entries", ""))

	// Keys come back percent-decoded once: "/" and "%" escaped, ":" as is.
	f.must(t, 204, "DELETE", p+"/a%2Fb%20%25x?dry_run=true", "")
	if len(lc.cleared) != 0 || !lc.keys["a/b %x"] {
		t.Fatal("dry_run cleared the entry")
	}
	f.must(t, 204, "DELETE", p+"/a%2Fb%20%25x", "")
	f.must(t, 204, "DELETE", p+"/2001:db8::1", "")
	f.must(t, 204, "DELETE", p+"/10.0.0.1", "")
	if fmt.Sprint(lc.cleared) != "[a/b %x 2001:db8::1 10.0.0.1]" {
		t.Fatalf("cleared %q", lc.cleared)
	}
	problemOf(t, f.must(t, 404, "DELETE", p+"/10.0.0.1", ""))
	problemOf(t, f.must(t, 422, "DELETE", p+"/not-a-key", ""))
	problemOf(t, f.must(t, 400, "DELETE", p+"/10.0.0.9?dry_run=maybe", ""))
}
