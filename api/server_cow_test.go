package api

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// A PATCH of a server's weight replaces that server in the new config with
// a changed copy (config.Backend.Servers: servers reachable from a
// published config are never written): the config that was current before
// the PATCH, and the revision of that generation, keep the old weight, and
// its other servers are the new config's, shared.
func TestServerPatchLeavesThePreviousConfigAlone(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	f.must(t, http.StatusCreated, "POST", "/api/v1/backends/web/servers", `{"name":"s2","address":"127.0.0.1","port":8082,"weight":3}`)
	before := f.store.Current()
	f.must(t, http.StatusOK, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7,"admin_state":"drain"}`)
	after := f.store.Current()
	if after.Generation != before.Generation+1 {
		t.Fatalf("generation %d after %d", after.Generation, before.Generation)
	}
	old, cur := before.Backends[0].Servers, after.Backends[0].Servers
	if *old[0].Weight != 100 || old[0].AdminState != "ready" {
		t.Fatalf("the previous Current's server was written: weight %d, admin_state %s", *old[0].Weight, old[0].AdminState)
	}
	if *cur[0].Weight != 7 || cur[0].AdminState != "drain" || cur[0] == old[0] {
		t.Fatalf("the new Current's server: weight %d, admin_state %s, shared %v", *cur[0].Weight, cur[0].AdminState, cur[0] == old[0])
	}
	if cur[1] != old[1] {
		t.Fatal("the unchanged server was copied: the configs should share it")
	}
	rev, err := f.store.Revision(before.Generation)
	if err != nil {
		t.Fatal(err)
	}
	if w := *rev.Backends[0].Servers[0].Weight; w != 100 {
		t.Fatalf("revision %d has weight %d", before.Generation, w)
	}
	// the answer of the PATCH and a GET agree with the new config
	if got := f.must(t, http.StatusOK, "GET", "/api/v1/backends/web/servers/s1", "").Body.String(); !strings.Contains(got, `"weight":7`) {
		t.Fatalf("GET after PATCH: %s", got)
	}
}

// Every kind of write the API makes leaves the configs published before it
// as they were (config.Backend.Servers: a server reachable from a
// published config is never written): each Current, kept as a pointer and
// read by another goroutine while the writes run (-race sees a write into
// one), still encodes as it did when it was current, and so does the
// store's revision of its generation. The writes: a server posted, patched
// (weight, admin_state, a field set to null, tls), replaced (with an empty
// tls.verify that Normalize fills), deleted; a backend patched with and
// without its servers, replaced in another order; the whole document
// replaced; a revision restored; a dry run; a refused write.
func TestNoWriteReachesAPublishedServer(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	type kept struct {
		c   *config.Config
		doc string
	}
	var (
		mu    sync.Mutex
		all   []kept
		done  = make(chan struct{})
		reads = make(chan int)
	)
	keep := func() {
		c := f.store.Current()
		b, err := json.Marshal(c)
		if err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		all = append(all, kept{c, string(b)})
		mu.Unlock()
	}
	keep()
	go func() { // reads the published configs while the writes run
		n := 0
		for ; n < 100000; n++ {
			select {
			case <-done:
				reads <- n
				return
			default:
			}
			mu.Lock()
			k := all[n%len(all)]
			mu.Unlock()
			for _, b := range k.c.Backends {
				for _, s := range b.Servers {
					_ = s.Weight != nil && len(s.AdminState) > 0 && s.TLS != nil && s.TLS.Verify != ""
				}
			}
		}
		<-done
		reads <- n
	}()
	mp := hdr{"Content-Type": "application/merge-patch+json"}
	web := "/api/v1/backends/web"
	for _, w := range []struct {
		status             int
		method, path, body string
		h                  []hdr
	}{
		{201, "POST", web + "/servers", `{"name":"s2","address":"127.0.0.1","port":8082,"weight":3}`, nil},
		{201, "POST", web + "/servers", `{"name":"s3","address":"127.0.0.1","port":8083,"tls":{"verify":"none"}}`, nil},
		{200, "PATCH", web + "/servers/s1", `{"weight":7,"admin_state":"drain"}`, []hdr{mp}},
		{200, "PATCH", web + "/servers/s1", `{"weight":null,"admin_state":null}`, []hdr{mp}},
		{200, "PATCH", web + "/servers/s3", `{"tls":null}`, []hdr{mp}},
		{200, "PUT", web + "/servers/s2", `{"address":"127.0.0.2","port":8082,"tls":{"verify":""}}`, nil},
		{200, "PATCH", web + "/servers/s2?dry_run=true", `{"weight":1,"tls":{"verify":"none"}}`, []hdr{mp}},
		{422, "PATCH", web + "/servers/s2", `{"port":0}`, []hdr{mp}},
		{204, "DELETE", web + "/servers/s1", "", nil},
		{200, "PATCH", web, `{"retries":5}`, []hdr{mp}},
		{200, "PATCH", web, `{"servers":[{"name":"s3","address":"127.0.0.1","port":8083},{"name":"s2","address":"127.0.0.2","port":8082,"weight":9}]}`, []hdr{mp}},
		{200, "PUT", web, `{"name":"web","mode":"http","servers":[{"name":"s2","address":"127.0.0.2","port":8082},{"name":"s3","address":"127.0.0.1","port":8083}]}`, nil},
		{200, "POST", "/api/v1/config/revisions/5/restore", "", nil},
		{200, "PATCH", web + "/servers/s2", `{"admin_state":"maint"}`, []hdr{mp}},
	} {
		f.must(t, w.status, w.method, w.path, w.body, w.h...)
		keep()
	}
	// the whole document, one server changed
	doc := strings.Replace(f.snapshot(t), `"admin_state":"maint"`, `"admin_state":"ready"`, 1)
	f.must(t, http.StatusOK, "PUT", "/api/v1/config", doc)
	keep()
	f.must(t, http.StatusOK, "PATCH", web+"/servers/s3", `{"weight":1}`, mp)
	keep()
	close(done)
	if n := <-reads; n == 0 {
		t.Log("the reader read nothing while the writes ran")
	}
	gens := map[int64]bool{}
	for i, k := range all {
		b, err := json.Marshal(k.c)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != k.doc {
			t.Errorf("config %d (generation %d) changed after it was published:\nwas %s\nnow %s", i, k.c.Generation, k.doc, b)
		}
		if gens[k.c.Generation] {
			continue
		}
		gens[k.c.Generation] = true
		rev, err := f.store.Revision(k.c.Generation)
		if err != nil {
			t.Fatalf("revision %d: %v", k.c.Generation, err)
		}
		if b, _ := json.Marshal(rev); string(b) != k.doc {
			t.Errorf("revision %d differs from the config published as that generation:\nrev %s\nwas %s", k.c.Generation, b, k.doc)
		}
	}
	if len(gens) < 14 {
		t.Errorf("%d generations: a write made none", len(gens))
	}
}
