package api

import (
	"net/http"
	"strings"
)

// The security headers of every answer of the admin server. The admin page
// (/ui/) and the API reference (/docs/) are same-origin pages that can
// reconfigure every listener on the box: they must not be framed
// (clickjacking), must not run any script the server did not send as a
// file, and must not be kept by a shared cache or the browser's history
// after the token that fetched them is gone.

// cspPage is the policy of /ui/ and /docs/. Scripts and stylesheets come
// from this origin as files only: no inline <script>, no on* attribute, no
// eval, no <style> element and no style="" attribute (the pages set styles
// through the CSSOM, el.style, which a policy does not restrict). img-src
// allows data: for the icons Swagger UI's stylesheet inlines and the empty
// favicon of the admin page; connect-src 'self' covers fetch and the event
// stream. Nothing is loaded from anywhere else.
const cspPage = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"font-src 'self'; connect-src 'self'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"

// cspOther is the policy of everything else (JSON, problem documents,
// metrics, redirects): nothing of it is a page, so nothing may load or run,
// should a browser ever render it.
const cspOther = "default-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

// securityHeaders sets the security headers before the handler runs, so
// that every answer has them, refusals and errors included; a handler may
// still replace Cache-Control (the event stream says no-cache).
//
// Cache-Control: API answers and the two HTML pages are no-store (they
// carry configuration, and the page must follow the binary it talks to).
// The scripts, stylesheets and vendored libraries under /ui/ and /docs/ are
// embedded in the binary under names without a version, so they are
// no-cache: a browser may keep a copy but asks again before using it, and a
// new binary never runs with an old script.
func securityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		h.Set("Referrer-Policy", "no-referrer")
		p := r.URL.Path
		page := strings.HasPrefix(p, "/ui/") || strings.HasPrefix(p, "/docs/")
		if page {
			h.Set("Content-Security-Policy", cspPage)
		} else {
			h.Set("Content-Security-Policy", cspOther)
		}
		if page && !isPageHTML(p) {
			h.Set("Cache-Control", "no-cache")
		} else {
			h.Set("Cache-Control", "no-store")
		}
		next.ServeHTTP(w, r)
	})
}

// isPageHTML tells whether a path under /ui/ or /docs/ is an HTML page
// (the directory itself is served as its index.html).
func isPageHTML(p string) bool {
	return strings.HasSuffix(p, "/") || strings.HasSuffix(p, ".html")
}
