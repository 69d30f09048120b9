package main

import (
	"bufio"
	"bytes"
	"io"
	"net"
	"strings"
	"sync"
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
	t.Parallel()
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
	t.Parallel()
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
	t.Parallel()
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

// trailerOrigin records what each connection sends and answers 200 once a
// chunked body with its trailer section has come.
type trailerOrigin struct {
	port int
	mu   sync.Mutex
	got  strings.Builder
}

func newTrailerOrigin(t *testing.T) *trailerOrigin {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	o := &trailerOrigin{port: ln.Addr().(*net.TCPAddr).Port}
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				var seen []byte
				buf := make([]byte, 4096)
				for {
					n, err := c.Read(buf)
					o.mu.Lock()
					o.got.Write(buf[:n])
					o.mu.Unlock()
					seen = append(seen, buf[:n]...)
					if i := bytes.Index(seen, []byte("\r\n0\r\n")); i >= 0 && bytes.HasSuffix(seen, []byte("\r\n\r\n")) && len(seen) > i+5 {
						io.WriteString(c, "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n")
						seen = nil
					}
					if err != nil {
						return
					}
				}
			}()
		}
	}()
	return o
}

func (o *trailerOrigin) received() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.got.String()
}

// TestHTTPRequestTrailersCannotForgeProxyFields: a chunked request whose
// trailers carry X-Forwarded-Proto or X-Forwarded-For (which spliced sets
// in the head) or a framing field is refused with 400, and the field never
// reaches the server, whether the trailer comes with the head or after
// the server got the head; an ordinary trailer passes. Before, such
// trailers reached the server unchanged, and frameworks that merge
// trailers into the header fields believed them.
func TestHTTPRequestTrailersCannotForgeProxyFields(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	o := newTrailerOrigin(t)
	port := setupHTTP(t, in, httpSetup{
		backends: []map[string]any{httpBackend("web", "roundrobin", map[string]any{"name": "s1", "address": "127.0.0.1", "port": o.port})},
		frontend: map[string]any{"default_backend": "web", "http": map[string]any{"x_forwarded_proto": true}},
	})
	const head = "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"
	for _, tc := range []struct {
		trailer string
		status  int
	}{
		{"Checksum: 1\r\n", 200},
		{"X-Forwarded-Proto: https\r\n", 400},
		{"x_forwarded_proto: https\r\n", 400},
		{"Checksum: 1\r\nX-Forwarded-For: 203.0.113.9\r\n", 400},
		{"Content-Length: 10\r\n", 400},
	} {
		for _, later := range []bool{false, true} {
			before := len(o.received())
			c := dialProxy(t, port)
			if !later {
				io.WriteString(c, head+tc.trailer+"\r\n")
			} else {
				// The server has the head and the chunks before the
				// trailer comes: the refusal is mid-body.
				io.WriteString(c, head)
				testutil.Eventually(t, 5*time.Second, func() bool {
					return strings.Contains(o.received()[before:], "abc\r\n0\r\n")
				}, "the origin got the head and the chunks")
				io.WriteString(c, tc.trailer+"\r\n")
			}
			resp, _ := readResp(t, bufio.NewReader(c), "POST")
			if resp.StatusCode != tc.status {
				t.Fatalf("trailer %q (later %v): status %d, want %d", tc.trailer, later, resp.StatusCode, tc.status)
			}
			got := strings.ToLower(o.received()[before:])
			for _, bad := range []string{"x-forwarded-proto: https", "x_forwarded_proto: https", "203.0.113.9", "content-length: 10"} {
				if strings.Contains(got, bad) {
					t.Fatalf("trailer %q (later %v): the origin got %q: %q", tc.trailer, later, bad, got)
				}
			}
			if tc.status == 200 && !strings.Contains(got, "checksum: 1\r\n\r\n") {
				t.Fatalf("an ordinary trailer did not pass: %q", got)
			}
		}
	}
}

// TestHTTPRequestTrailersCannotForgeClientCertFields: on a frontend that
// verifies client certificates on one bind, a request trailer with the
// client-certificate prefix is refused on its plain bind too, as the head
// drops such fields there.
func TestHTTPRequestTrailersCannotForgeClientCertFields(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	o := newTrailerOrigin(t)
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	in.MustDo(201, "POST", "/api/v1/backends", httpBackend("web", "roundrobin", map[string]any{"name": "s1", "address": "127.0.0.1", "port": o.port}))
	plain := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "mtls", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{
			{"name": "tls", "address": "127.0.0.1", "port": testutil.FreePort(t),
				"tls": map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM}},
			{"name": "plain", "address": "127.0.0.1", "port": plain}},
	})
	for _, tc := range []struct {
		trailer string
		status  int
	}{{"Checksum: 1\r\n", 200}, {"X-Client-Cert-Verified: SUCCESS\r\n", 400}, {"x_client_cert_subject: CN=admin\r\n", 400}} {
		before := len(o.received())
		resp, _ := roundTrip(t, plain, "POST /t HTTP/1.1\r\nHost: a\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n"+tc.trailer+"\r\n")
		if resp.StatusCode != tc.status {
			t.Fatalf("trailer %q: status %d, want %d", tc.trailer, resp.StatusCode, tc.status)
		}
		if got := strings.ToLower(o.received()[before:]); strings.Contains(got, "client") {
			t.Fatalf("trailer %q: the origin got %q", tc.trailer, got)
		}
	}
}
