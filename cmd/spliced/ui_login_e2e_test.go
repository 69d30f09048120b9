package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
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

	u := newUITest(t, in, 60*time.Second)
	u.signIn(viewer)
	u.waitJS(10*time.Second, "live data over the event stream", `document.getElementById('live').textContent === 'live'`)

	if _, errs, err := tokenCLI(t, dir, "revoke", "stale"); err != nil {
		t.Fatal(err, errs)
	}
	// The stream ends, the page reconnects, gets a 401 and asks for a token.
	u.run("the login box opens", chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-token`)))
	// Requests already sent when the box opened are answered and logged
	// within a moment; from then on nothing more may come.
	testutil.Eventually(t, 5*time.Second, func() bool {
		n := apiRequests(in)
		time.Sleep(500 * time.Millisecond)
		return apiRequests(in) == n
	}, "the requests in flight to be logged")
	before := apiRequests(in)
	select {
	case <-time.After(7 * time.Second): // three polling periods (live.js POLL_MS 2 s), two reconnects
	case <-u.ctx.Done():
		t.Fatal(u.ctx.Err())
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
