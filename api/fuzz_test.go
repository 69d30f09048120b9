package api

import (
	"fmt"
	"net/http"
	"os"
	"testing"
	"time"
)

// fuzzWrites are the write endpoints FuzzAPIWrite sends bodies to, over the
// seeded fixture (backend web with server s1, frontend public with bind b1).
var fuzzWrites = [...]struct{ method, path string }{
	{"POST", "/api/v1/backends"},
	{"POST", "/api/v1/frontends"},
	{"POST", "/api/v1/backends/web/servers"},
	{"POST", "/api/v1/frontends/public/binds"},
	{"PUT", "/api/v1/config"},
	{"PUT", "/api/v1/backends/web"},
	{"PUT", "/api/v1/frontends/public"},
	{"PUT", "/api/v1/backends/web/servers/s1"},
	{"PUT", "/api/v1/frontends/public/binds/b1"},
	{"PUT", "/api/v1/tuning"},
	{"PATCH", "/api/v1/backends/web"},
	{"PATCH", "/api/v1/frontends/public"},
	{"PATCH", "/api/v1/backends/web/servers/s1"},
	{"PATCH", "/api/v1/tuning"},
	{"POST", "/api/v1/certificates"},
	{"PUT", "/api/v1/certificates/site"},
}

var fuzzTypes = [...]string{"application/json", "application/merge-patch+json", "application/json; charset=utf-8", "text/plain"}

// FuzzAPIWrite sends arbitrary bodies to every write endpoint. Whatever the
// body, the answer is never a 5xx; a refused write is a problem document and
// leaves the config untouched; an accepted one moves at most one generation.
func FuzzAPIWrite(f *testing.F) {
	for _, s := range []struct {
		route, ctype uint8
		body         string
	}{
		{0, 0, backendWeb},
		{1, 0, frontendPublic},
		{2, 0, `{"name":"s2","address":"127.0.0.1","port":8082}`},
		{3, 0, `{"name":"b2","address":"127.0.0.1","port":8443}`},
		{4, 0, `{"backends":[{"name":"x","servers":[{"name":"a","address":"::1","port":1}]}]}`},
		{12, 1, `{"admin_state":"drain","weight":null}`},
		{13, 1, `{"sched":{"urgent":1e400}}`},
		{11, 0, `{"binds":[{"name":"b1","address":"127.0.0.1","port":8080,"threads":[-1]}]}`},
		{10, 1, `{"health_check":{"type":"http","status_min":99}}`},
		{5, 0, "{\"name\":\"web\",\"mode\":\"\xff\"}"},
		{6, 0, `{"name":"public","name":"other"}`},
		{9, 3, `{}`},
		{7 | 0x80, 0, `{"address":"h","port":65535}`},
		{14, 0, `{"name":"site","cert_pem":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n","key_pem":""}`},
		{15, 0, `{"cert_pem":"x","key_pem":"-----BEGIN EC PRIVATE KEY-----\nMAA=\n-----END EC PRIVATE KEY-----\n"}`},
		{3, 0, `{"name":"b3","address":"127.0.0.1","port":8444,"tls":{"certificates":["site"],"alpn":["h2"],"min_version":"1.0","ciphers":["x"],"client_ca":"-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n","client_auth":"optional"}}`},
		{8, 0, `{"name":"b1","address":"127.0.0.1","port":8080,"tls":{"certificates":[],"client_cert_header_prefix":"X Y"}}`},
		{9, 0, `{"tls":{"max_handshakes":-1,"ticket_rotation_ms":1}}`},
		{0, 0, `{"name":"n","servers":[null]}`},
		{10, 1, `{"servers":[{"name":"s1","address":"127.0.0.1","port":8081},null]}`},
		{4, 0, `{"backends":[{"name":"x","servers":[null]}]}`},
		{2, 0, `null`},
	} {
		f.Add(s.route, s.ctype, []byte(s.body))
	}
	base := f.TempDir()
	var fx *fixture
	// fresh starts over from the seeded document in a new directory (t is
	// only used to report a failure: the directory lives as long as f).
	fresh := func(t testing.TB) {
		dir, err := os.MkdirTemp(base, "store")
		if err != nil {
			t.Fatal(err)
		}
		fx = newFixtureIn(t, dir)
		fx.seed(t)
	}
	fresh(f)
	f.Fuzz(func(t *testing.T, route, ctype uint8, body []byte) {
		wr := fuzzWrites[int(route&0x7f)%len(fuzzWrites)]
		path := wr.path
		if route&0x80 != 0 {
			path += "?dry_run=true"
		}
		before := fx.store.Current()
		// A request stuck for 10 s crashes the worker, so the fuzzer saves
		// the input instead of reporting a bare hang.
		wd := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("request hung: %s %s %q", wr.method, path, body)) })
		defer wd.Stop()
		w := fx.do(wr.method, path, string(body), hdr{"Content-Type": fuzzTypes[int(ctype)%len(fuzzTypes)]})
		after := fx.store.Current()
		switch {
		case w.Code >= 500:
			t.Fatalf("%s %s %q: %d %s", wr.method, path, body, w.Code, w.Body.String())
		case w.Code >= 400:
			problemOf(t, w)
			if after != before {
				t.Fatalf("refused write (%d) changed the config", w.Code)
			}
		default:
			if after.Generation != before.Generation && after.Generation != before.Generation+1 {
				t.Fatalf("generation jumped from %d to %d", before.Generation, after.Generation)
			}
			if w.Code != http.StatusOK && w.Code != http.StatusCreated {
				t.Fatalf("unexpected success status %d", w.Code)
			}
			if after != before {
				fresh(t) // keep exploring from the seeded document
			}
		}
	})
}
