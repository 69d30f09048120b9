package main

import (
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPForwardedForOnWithAnyHTTPObject: x_forwarded_for defaults to
// true on its own, not only when the whole http object is absent. Before,
// {"max_body_size":100}, {} or {"x_forwarded_proto":true} stored
// x_forwarded_for false, and a client's forged X-Forwarded-For reached
// the server alone. An explicit false is kept.
func TestHTTPForwardedForOnWithAnyHTTPObject(t *testing.T) {
	in := startSpliced(t, "")
	o := newHTTPOrigin(t, "A", nil)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", o.server("s1"))},
		frontend: map[string]any{"default_backend": "web", "http": map[string]any{"max_body_size": 100}},
	})
	for _, tc := range []struct {
		http map[string]any
		want bool
	}{
		{map[string]any{"max_body_size": 100}, true},
		{map[string]any{}, true},
		{map[string]any{"x_forwarded_proto": true}, true},
		{map[string]any{"via": true, "max_body_size": 100}, true},
		{map[string]any{"x_forwarded_for": false}, false},
		{map[string]any{"x_forwarded_for": false, "max_body_size": 100}, false},
	} {
		var fe map[string]any
		in.MustDo(200, "GET", "/api/v1/frontends/pub", nil).JSON(t, &fe)
		fe["http"] = tc.http
		in.MustDo(200, "PUT", "/api/v1/frontends/pub", fe)
		var got struct {
			HTTP struct {
				XFF *bool `json:"x_forwarded_for"`
			} `json:"http"`
		}
		in.MustDo(200, "GET", "/api/v1/frontends/pub", nil).JSON(t, &got)
		if got.HTTP.XFF == nil || *got.HTTP.XFF != tc.want {
			t.Fatalf("http %v: stored x_forwarded_for %v, want %v", tc.http, got.HTTP.XFF, tc.want)
		}
		before := len(o.received())
		testutil.Eventually(t, 5*time.Second, func() bool {
			resp, _ := roundTrip(t, port, "GET /x HTTP/1.1\r\nHost: a\r\nX-Forwarded-For: 198.51.100.7\r\n\r\n")
			if resp.StatusCode != 200 {
				t.Fatalf("status %d", resp.StatusCode)
			}
			seen := o.received()[before:]
			before = len(o.received())
			return strings.Contains(seen, "\r\nX-Forwarded-For: 198.51.100.7\r\nX-Forwarded-For: 127.0.0.1\r\n") == tc.want
		}, "http %v: X-Forwarded-For appended is not %v", tc.http, tc.want)
	}
}

// TestTLSClientCertPrefixSparesCommonFieldsAPI: through the API, a
// client_cert_header_prefix that would strip an ordinary field from every
// client (Cookie, X-Forwarded-, a 1-letter X) is refused with 422 naming
// the field; the default prefix is still accepted.
func TestTLSClientCertPrefixSparesCommonFieldsAPI(t *testing.T) {
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http"})
	const ptr = "/binds/0/tls/client_cert_header_prefix"
	for _, tc := range []struct {
		prefix string
		status int
	}{
		{"Cookie", 422}, {"Authorization", 422}, {"X", 422}, {"X-Forwarded-", 422},
		{"Connection", 422}, {"Te", 422}, {"X-Client-Cert-", 201},
	} {
		r := in.Do("POST", "/api/v1/frontends", map[string]any{
			"name": "mtls", "mode": "http", "default_backend": "web",
			"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": testutil.FreePort(t),
				"tls": map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM, "client_cert_header_prefix": tc.prefix}}},
		})
		if r.Status != tc.status {
			t.Fatalf("prefix %q: status %d, want %d: %s", tc.prefix, r.Status, tc.status, r.Body)
		}
		if tc.status == 422 && !strings.Contains(string(r.Body), ptr) {
			t.Fatalf("prefix %q: the problem does not point at %s: %s", tc.prefix, ptr, r.Body)
		}
	}
}

// TestDrainedDownServerReadsDown: a server its check sees down reads
// "down" in /api/v1/stats and /metrics whatever its admin state, with
// admin_state saying drain; before, a drained down server read "drain"
// (spliced_server_state{state="down"} 0), so an alert on down missed it.
func TestDrainedDownServerReadsDown(t *testing.T) {
	in := startSpliced(t, "")
	dead := testutil.FreePort(t) // nothing listens there
	setupHealth(t, in, map[string]any{"type": "tcp", "interval_ms": 100, "timeout_ms": 100, "rise": 1, "fall": 1},
		map[string]any{"name": "s1", "address": "127.0.0.1", "port": dead})
	testutil.Eventually(t, 5*time.Second, func() bool { return serverState(t, in, "s1") == "down" }, "s1 down")
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"admin_state": "drain"})
	var snap struct {
		Backends []struct {
			Servers []struct {
				State      string `json:"state"`
				Up         bool   `json:"up"`
				AdminState string `json:"admin_state"`
			} `json:"servers"`
		} `json:"backends"`
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &snap)
		return len(snap.Backends) == 1 && len(snap.Backends[0].Servers) == 1 && snap.Backends[0].Servers[0].AdminState == "drain"
	}, "s1 drained in the stats")
	if s := snap.Backends[0].Servers[0]; s.State != "down" || s.Up {
		t.Fatalf("a drained down server: state %q up %v, want down, false", s.State, s.Up)
	}
	metrics := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	for _, want := range []string{
		`spliced_server_state{backend="web",server="s1",state="down"} 1`,
		`spliced_server_state{backend="web",server="s1",state="drain"} 0`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}
