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

// TestUILimitsEditor: the frontend form edits the limits per client as
// JSON (a limit the API refuses shows its problem, with the member's
// pointer, on the field); the frontend's card lists the limits with their
// live counters; "Top entries" shows the clients with their counters and
// an admin forgets one.
func TestUILimitsEditor(t *testing.T) {
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
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/limits"] textarea`)))
	const area = `dialog[open] [data-ptr="/limits"] textarea`
	u.fill(area, `[{"name": `)
	if msg := u.text(`dialog[open] [data-ptr="/limits"] .err`); !strings.HasPrefix(msg, "not JSON") {
		t.Fatalf("invalid JSON: %q", msg)
	}
	u.fill(area, `[{"name": "per_ip", "key": "header:X-Api-Key", "conn_cur": 3}]`)
	u.run("submit a refused limit",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/limits"].invalid .err`)))
	if msg := u.text(`dialog[open] [data-ptr="/limits"] .err`); !strings.Contains(msg, "/limits/0/conn_cur") {
		t.Fatalf("problem shown: %q", msg)
	}
	u.fill(area, `[{"name": "per_ip", "req_rate": {"count": 2, "period_ms": 60000}}]`)
	u.run("save the limits",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var fe struct {
		Limits []map[string]any `json:"limits"`
	}
	in.MustDo(200, "GET", "/api/v1/frontends/edge", nil).JSON(t, &fe)
	if len(fe.Limits) != 1 || fe.Limits[0]["action"] != "deny" {
		t.Fatalf("stored limits: %+v", fe.Limits)
	}
	u.waitJS(10*time.Second, "the limit on the frontend's card",
		`document.querySelectorAll('[data-limits="edge"] tr[data-limit="edge/per_ip"]').length === 1`)

	// Three requests: the third is over (429); the counters follow live.
	for i := 0; i < 3; i++ {
		c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\nConnection: close\r\n\r\n")
		io.ReadAll(c)
		c.Close()
	}
	u.waitJS(15*time.Second, "the limit's counters",
		`(() => { const c = document.querySelectorAll('tr[data-limit="edge/per_ip"] td.num'); return c.length === 4 && c[0].textContent === '1' && c[3].textContent === '1'; })()`)
	u.run("open the top entries",
		chromedp.Click(chromedp.CSS(`tr[data-limit="edge/per_ip"] button[data-action="limit-entries"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] tr[data-entry="127.0.0.1"]`)))
	if row := u.text(`dialog[open] tr[data-entry="127.0.0.1"]`); !strings.HasPrefix(row, "127.0.0.103") {
		t.Fatalf("entry row %q, want the client, 0 connections, 3 requests", row)
	}
	u.run("forget the client",
		chromedp.Click(chromedp.CSS(`dialog[open] tr[data-entry="127.0.0.1"] button[data-action="forget-entry"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open] tr[data-entry="127.0.0.1"]`)))
	in.MustDo(404, "DELETE", "/api/v1/frontends/edge/limits/per_ip/entries/127.0.0.1", nil)
	u.errs.check(t, "frontends")
}
