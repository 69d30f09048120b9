package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// apiRequests counts the API requests in the access log of in.
func apiRequests(in *instance) int {
	n := 0
	for _, l := range strings.Split(in.Logs(), "\n") {
		if strings.Contains(l, `"msg":"admin request"`) && strings.Contains(l, `"path":"/api/v1/`) {
			n++
		}
	}
	return n
}

// Issue 13: a stale tab whose token was revoked kept polling with it
// (a 401 every 2 s), which kept its address rate-limited for everyone.
// While the login box is shown the page sends nothing.
func TestUIStaleTabSendsNothingWhileLoginShown(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	newToken(t, dir, "admin", "root")
	viewer := newToken(t, dir, "viewer", "stale")
	in := startSpliced(t, dir)

	u := newUITest(t, in)
	u.signIn(viewer)
	u.waitJS(10*time.Second, "live data over the event stream", `document.getElementById('live').textContent === 'live'`)
	// The page's own count of its API requests: sent, and answered or
	// failed (every request of the page goes through window.fetch).
	evalJS[bool](u, `(() => { const c = window.__api = { sent: 0, settled: 0 }; const f = window.fetch;
		window.fetch = (url, o) => { const api = String(url).includes('/api/v1/'); if (api) c.sent++;
			const p = f(url, o); if (api) p.then(() => c.settled++, () => c.settled++); return p; }; return true; })()`)

	if _, errs, err := tokenCLI(t, dir, "revoke", "stale"); err != nil {
		t.Fatal(err, errs)
	}
	// The stream ends, the page reconnects, gets a 401 and asks for a token.
	u.run("the login box opens", chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-token`)))
	// Requests the page sent before the box opened are answered; the
	// server logs a request before it answers it (the event stream, which
	// answers as it goes, ended before the reconnect that got the 401), so
	// they are all in its log then.
	u.waitJS(10*time.Second, "the page's requests in flight answered", `window.__api.settled === window.__api.sent`)
	sent := evalJS[int](u, `window.__api.sent`)
	before := apiRequests(in)
	// Three polling periods (live.js POLL_MS 2 s) and two reconnects on
	// the page's own clock: a timer of the page, had it been left, would
	// have fired (and polled) before seven of these ticks.
	evalJS[bool](u, `(() => { window.__ticks = 0; setInterval(() => window.__ticks++, 1000); return true; })()`)
	u.waitJS(30*time.Second, "seven seconds of the page's timers", `window.__ticks >= 7`)
	if n := evalJS[int](u, `window.__api.sent`); n != sent {
		t.Errorf("the page sent %d API requests while the login box was shown, want none", n-sent)
	}
	if after := apiRequests(in); after != before {
		var tail []string
		for _, l := range strings.Split(in.Logs(), "\n") {
			if strings.Contains(l, `"path":"/api/v1/`) {
				tail = append(tail, l)
			}
		}
		t.Fatalf("%d API requests while the login box was shown, want none:\n%s", after-before, strings.Join(tail[max(0, len(tail)-(after-before)):], "\n"))
	}
}
