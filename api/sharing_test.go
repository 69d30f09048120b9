package api

import (
	"reflect"
	"testing"
)

// A write shares the lists of servers it does not change with the config
// it starts from (config.UpdateOptions.ShareServers): a server created,
// changed or deleted must land in a list of the new generation's own,
// never in the previous generation's, which the data plane and readers
// may still hold.
func TestServerWritesLeaveThePreviousGenerationAlone(t *testing.T) {
	f := newFixture(t)
	f.must(t, 201, "POST", "/api/v1/backends", `{"name":"web","servers":[
		{"name":"s1","address":"127.0.0.1","port":8081},
		{"name":"s2","address":"127.0.0.1","port":8082},
		{"name":"s3","address":"127.0.0.1","port":8083}]}`)
	f.must(t, 201, "POST", "/api/v1/backends", `{"name":"other","servers":[{"name":"o1","address":"127.0.0.1","port":9001}]}`)
	for _, tc := range []struct{ method, path, body string }{
		{"PATCH", "/api/v1/backends/web/servers/s2", `{"admin_state":"drain","weight":7}`},
		{"PUT", "/api/v1/backends/web/servers/s1", `{"address":"127.0.0.2","port":8081}`},
		{"POST", "/api/v1/backends/web/servers", `{"name":"s4","address":"127.0.0.1","port":8084}`},
		{"DELETE", "/api/v1/backends/web/servers/s1", ""},
		{"PATCH", "/api/v1/frontends/none", `{"maxconn":5}`}, // 404: nothing written
	} {
		prev := f.store.Current()
		want := prev.Clone()
		f.do(tc.method, tc.path, tc.body)
		if !reflect.DeepEqual(prev, want) {
			t.Fatalf("%s %s changed the previous generation's config:\n%+v\nwant %+v", tc.method, tc.path, prev.Backends, want.Backends)
		}
		cur := f.store.Current()
		if o := cur.Backends[cur.FindBackend("other")].Servers; &o[0] != &prev.Backends[prev.FindBackend("other")].Servers[0] {
			t.Errorf("%s %s copied the servers of a backend it did not change", tc.method, tc.path)
		}
	}
}
