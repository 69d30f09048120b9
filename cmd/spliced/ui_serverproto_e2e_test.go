package main

import (
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

// TestUIServerProtoField: the server form's HTTP version select sends
// proto, the servers table shows HTTP/2 (h2c on a clear server), and the
// API's refusal of h2 on a tcp backend is shown next to the field.
func TestUIServerProtoField(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":8081}]}`)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"db","mode":"tcp","servers":[{"name":"p1","address":"127.0.0.1","port":5432}]}`)

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("backends")
	u.waitJS(10*time.Second, "a plain h1 server shows a dash",
		`(document.querySelector('tr[data-server="web/s1"] td.tls') || {}).textContent === '—'`)
	u.run("open edit server form",
		chromedp.Click(chromedp.CSS(`button[data-action="edit-server"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/proto"] select`)))
	u.fill(`dialog[open] [data-ptr="/proto"] select`, "h2")
	u.run("save server",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var srv struct {
		Proto string `json:"proto"`
	}
	in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).JSON(t, &srv)
	if srv.Proto != "h2" {
		t.Fatalf("stored proto %q", srv.Proto)
	}
	u.waitJS(10*time.Second, "the server's HTTP/2 in the table",
		`(document.querySelector('tr[data-server="web/s1"] td.tls') || {}).textContent === 'HTTP/2 (h2c)'`)

	u.run("open edit server form of the tcp backend",
		chromedp.Click(chromedp.CSS(`button[data-action="edit-server"][data-server="db/p1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/proto"] select`)))
	u.fill(`dialog[open] [data-ptr="/proto"] select`, "h2")
	u.run("submit h2 on a tcp backend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/proto"].invalid .err`)))
	if msg := u.text(`dialog[open] [data-ptr="/proto"] .err`); !strings.Contains(msg, "mode http") {
		t.Fatalf("error next to the proto field = %q", msg)
	}
	u.errs.check(t, "backends")
}
