package api

import (
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/api/tokens"
)

// FuzzGuardHeaders feeds arbitrary Host, Origin, Authorization and
// Sec-Fetch-Site values to the security middleware: it never panics or
// answers 5xx; a request it lets through had a Host and Origin the guard
// accepts, and an accepted Host holds no separator or control character;
// a refused write changes nothing.
func FuzzGuardHeaders(f *testing.F) {
	f.Add("127.0.0.1:9900", "", "", "", "GET")
	f.Add("localhost:9900", "http://localhost:9900", "Bearer x", "same-origin", "POST")
	f.Add("[::1]:9900", "null", "bearer  spliced_x", "cross-site", "DELETE")
	f.Add("evil.example:9900", "http://evil.example:9900", "Basic Zm9vOmJhcg==", "", "PATCH")
	f.Add("127.0.0.1", "http://127.0.0.1:9900/", "Bearer", "none", "PUT")
	f.Add("[::ffff:127.0.0.1]:9900", "http://[::1]:9900", "Bearer a b", "", "POST")
	f.Add("admin.lan", "https://admin.lan", "", "", "POST")
	f.Add("127.0.0.1:99999", "http://user@127.0.0.1:9900", strings.Repeat("Bearer ", 100), "", "GET")
	fx := newSecFixture(f, true, Options{Open: true, AdminHosts: []string{"admin.lan"}})
	g := newGuard(Options{AdminAddr: secAddr, AdminHosts: []string{"admin.lan"}}, nil, nil)
	f.Fuzz(func(t *testing.T, host, origin, auth, site, method string) {
		switch method {
		case "GET", "POST", "PUT", "PATCH", "DELETE":
		default:
			method = "POST"
		}
		r := httptest.NewRequest(method, "/api/v1/backends", strings.NewReader(`{"name":"fz"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Host = host
		if origin != "" {
			r.Header.Set("Origin", origin)
		}
		if auth == "" {
			auth = "Bearer " + fx.secrets[tokens.Admin]
		}
		r.Header.Set("Authorization", auth)
		if site != "" {
			r.Header.Set("Sec-Fetch-Site", site)
		}
		gen := fx.store.Current().Generation
		w := httptest.NewRecorder()
		fx.h.ServeHTTP(w, r)
		if w.Code >= 500 {
			t.Fatalf("%d for host %q origin %q auth %q: %s", w.Code, host, origin, auth, w.Body)
		}
		if g.hostOK(host) && strings.ContainsAny(host, "\r\n\t /@\\") {
			t.Fatalf("Host %q accepted", host)
		}
		switch w.Code {
		case 401, 403, 429:
			if fx.store.Current().Generation != gen {
				t.Fatalf("a refused request (%d) changed the config", w.Code)
			}
		default:
			if !g.hostOK(host) {
				t.Fatalf("let through (%d) with Host %q", w.Code, host)
			}
			if origin != "" && !g.originOK(origin, host) {
				t.Fatalf("let through (%d) with Origin %q for Host %q", w.Code, origin, host)
			}
		}
	})
}
