package api

import (
	"io/fs"
	"regexp"
	"strings"
	"testing"

	"github.com/spliced-proxy/spliced/openapi"
	"github.com/spliced-proxy/spliced/web"
)

// Every answer says: not to be framed, not to be sniffed, not to be
// stored; the two pages get the strict script and style policy.
func TestSecurityHeaders(t *testing.T) {
	f := newFixture(t)
	tests := []struct {
		name, method, path string
		status             int
		csp, cache         string
	}{
		{"admin page", "GET", "/ui/", 200, cspPage, "no-store"},
		{"admin page script", "GET", "/ui/js/app.js", 200, cspPage, "no-cache"},
		{"admin page style", "GET", "/ui/app.css", 200, cspPage, "no-cache"},
		{"reference page", "GET", "/docs/", 200, cspPage, "no-store"},
		{"reference script", "GET", "/docs/init.js", 200, cspPage, "no-cache"},
		{"API answer", "GET", "/api/v1/info", 200, cspOther, "no-store"},
		{"API write", "POST", "/api/v1/backends", 201, cspOther, "no-store"},
		{"openapi document", "GET", "/openapi.json", 200, cspOther, "no-store"},
		{"refused origin", "POST", "/api/v1/backends", 403, cspOther, "no-store"},
		{"not found", "GET", "/nope", 404, cspOther, "no-store"},
		{"redirect", "GET", "/docs", 301, cspOther, "no-store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var h []hdr
			body := ""
			if tc.method == "POST" {
				body = `{"name":"b1"}`
			}
			if tc.status == 403 {
				h = append(h, hdr{"Origin": "http://evil.example"})
			}
			w := f.must(t, tc.status, tc.method, tc.path, body, h...)
			want := map[string]string{
				"Content-Security-Policy": tc.csp,
				"X-Frame-Options":         "DENY",
				"X-Content-Type-Options":  "nosniff",
				"Cache-Control":           tc.cache,
			}
			for k, v := range want {
				if got := w.Header().Get(k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
			if !strings.Contains(w.Header().Get("Content-Security-Policy"), "frame-ancestors 'none'") {
				t.Errorf("CSP without frame-ancestors 'none'")
			}
		})
	}
	for _, d := range []string{"script-src 'self';", "style-src 'self';", "default-src 'none';"} {
		if !strings.Contains(cspPage, d) {
			t.Errorf("page CSP %q lacks %q", cspPage, d)
		}
	}
	if strings.Contains(cspPage, "unsafe-") {
		t.Errorf("page CSP %q allows something unsafe", cspPage)
	}
}

// The pages run under script-src 'self' and style-src 'self': nothing
// inline may be in their HTML (the browser would refuse it; this says
// where, before a browser runs).
func TestPagesHaveNothingInline(t *testing.T) {
	inline := []*regexp.Regexp{
		regexp.MustCompile(`(?i)<script(\s[^>]*)?>\s*[^<\s]`), // a script with a body
		regexp.MustCompile(`(?i)<style\b`),
		regexp.MustCompile(`(?i)\sstyle\s*=`),
		regexp.MustCompile(`(?i)\son[a-z]+\s*=`),
		regexp.MustCompile(`(?i)javascript:`),
	}
	for name, fsys := range map[string]fs.FS{"web": web.FS(), "openapi docs": openapi.Docs()} {
		err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(p, ".html") {
				return err
			}
			b, err := fs.ReadFile(fsys, p)
			if err != nil {
				return err
			}
			for _, re := range inline {
				if m := re.Find(b); m != nil {
					t.Errorf("%s %s: inline %q", name, p, m)
				}
			}
			for _, tag := range regexp.MustCompile(`(?i)<script\b[^>]*>`).FindAll(b, -1) {
				if !strings.Contains(string(tag), "src=") {
					t.Errorf("%s %s: inline script %q", name, p, tag)
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
}

// The edit forms of the web page are built from these GETs and send their
// ETag back as If-Match with the PUT: each GET has an ETag, the PUT with it
// is accepted, the same PUT with the tag of before a concurrent change is
// 412 and changes nothing.
func TestEditFormReadsHaveETagsTheirWritesHonour(t *testing.T) {
	f := newFixture(t)
	f.seed(t)
	tests := []struct{ path, other string }{
		{"/api/v1/backends/web", `{"retries":5}`},
		{"/api/v1/backends/web/servers/s1", `{"weight":7}`},
		{"/api/v1/frontends/public", `{"maxconn":77}`},
		{"/api/v1/tuning", `{"maxaccept":33}`},
	}
	for _, tc := range tests {
		t.Run(tc.path, func(t *testing.T) {
			w := f.must(t, 200, "GET", tc.path, "")
			tag, body := w.Header().Get("ETag"), w.Body.String()
			if tag == "" {
				t.Fatal("no ETag")
			}
			f.must(t, 200, "PATCH", tc.path, tc.other) // someone else, meanwhile
			now := f.must(t, 200, "GET", tc.path, "").Body.String()
			f.must(t, 412, "PUT", tc.path, body, hdr{"If-Match": tag})
			if after := f.must(t, 200, "GET", tc.path, "").Body.String(); after != now {
				t.Fatalf("a 412 changed %s:\n%s\nwas\n%s", tc.path, after, now)
			}
			cur := f.must(t, 200, "GET", tc.path, "").Header().Get("ETag")
			f.must(t, 200, "PUT", tc.path, body, hdr{"If-Match": cur}) // overwrite
		})
	}
}
