package main

import (
	"io"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestUIRulesEditor: the frontend form edits rules as JSON: text that is
// not JSON is flagged at once, a rule the API refuses shows its problem on
// the rules field (with the member's pointer), a valid list is saved; the
// frontend's card lists the rules with their live hits and the frontend's
// rule totals.
func TestUIRulesEditor(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	web := newHTTPOrigin(t, "web", nil)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{"name": "web", "mode": "http", "servers": []map[string]any{web.server("s1")}})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{"name": "edge", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}}})

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("frontends")
	u.run("open edit frontend form",
		chromedp.Click(chromedp.CSS(`section[data-frontend="edge"] button[data-action="edit-frontend"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/rules"] textarea`)))
	const area = `dialog[open] [data-ptr="/rules"] textarea`
	u.fill(area, `{"request": [`)
	if msg := u.text(`dialog[open] [data-ptr="/rules"] .err`); !strings.HasPrefix(msg, "not JSON") {
		t.Fatalf("invalid JSON: %q", msg)
	}
	u.fill(area, `{"request": [{"do": {"set_header": {"name": "Content-Length", "value": "0"}}}]}`)
	u.run("submit a refused rule",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/rules"].invalid .err`)))
	if msg := u.text(`dialog[open] [data-ptr="/rules"] .err`); !strings.Contains(msg, "/rules/request/0/do/set_header/name") || !strings.Contains(msg, "Content-Length") {
		t.Fatalf("problem shown: %q", msg)
	}
	u.fill(area, `{"request": [{"when": {"path_prefix": "/private/"}, "do": {"deny": {"status": 403}}}, {"do": {"set_header": {"name": "X-Edge", "value": "1"}}}]}`)
	u.run("save the rules",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var fe struct {
		Rules *struct {
			Request []map[string]any `json:"request"`
		} `json:"rules"`
	}
	in.MustDo(200, "GET", "/api/v1/frontends/edge", nil).JSON(t, &fe)
	if fe.Rules == nil || len(fe.Rules.Request) != 2 {
		t.Fatalf("stored rules: %+v", fe.Rules)
	}
	u.waitJS(10*time.Second, "the rules on the frontend's card",
		`document.querySelectorAll('[data-rules="edge"] tr[data-rule]').length === 2`)

	// Traffic: one denied request, one rewritten; the hits follow live.
	for _, path := range []string{"/private/x", "/ok"} {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		io.ReadAll(c)
		c.Close()
	}
	u.waitJS(15*time.Second, "each rule's hits",
		`(document.querySelector('tr[data-rule="edge/request/0"] td.num') || {}).textContent === '1' && (document.querySelector('tr[data-rule="edge/request/1"] td.num') || {}).textContent === '1'`)
	u.waitJS(15*time.Second, "the frontend's rule totals",
		`(document.querySelector('[data-rule-counts="edge"]') || {}).textContent === 'denied 1redirected 0rewritten 1'`)
	u.errs.check(t, "frontends")
}
