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

// TestUIProxyProtocolFields: the bind form's PROXY protocol section sends
// accept_proxy with its trusted peers (an empty list is refused next to
// the field), the binds table shows it, and the server form's PROXY
// protocol select sends send_proxy, shown in the servers table.
func TestUIProxyProtocolFields(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":8081}]}`)
	in.MustDo(201, "POST", "/api/v1/frontends", `{"name":"edge","mode":"http","default_backend":"web","binds":[]}`)
	port := testutil.FreePort(t)

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("frontends")
	u.run("open add bind form",
		chromedp.Click(chromedp.CSS(`section[data-frontend="edge"] button[data-action="add-bind"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.fill(`dialog[open] [data-ptr="/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/port"] input`, strconv.Itoa(port))
	u.run("turn the PROXY protocol on",
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/accept_proxy"] input[type="checkbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/accept_proxy/trusted"] input`)))
	if note := u.text(`dialog[open] [data-proxy-note]`); !strings.Contains(note, "5,000 ms") && !strings.Contains(note, "5000 ms") {
		t.Fatalf("deadline note %q", note)
	}
	u.run("submit without trusted peers",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/accept_proxy/trusted"].invalid .err`)))
	u.fill(`dialog[open] [data-ptr="/accept_proxy/trusted"] input`, "10.0.0.0/8, 127.0.0.1")
	u.run("add bind",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var got struct {
		AcceptProxy *struct {
			Trusted []string `json:"trusted"`
		} `json:"accept_proxy"`
	}
	in.MustDo(200, "GET", "/api/v1/frontends/edge/binds/b1", nil).JSON(t, &got)
	if got.AcceptProxy == nil || strings.Join(got.AcceptProxy.Trusted, " ") != "10.0.0.0/8 127.0.0.1" {
		t.Fatalf("stored bind: %+v", got.AcceptProxy)
	}
	u.waitJS(10*time.Second, "the bind's PROXY protocol in the table",
		`(document.querySelector('[data-proxy="edge/b1"]') || {}).textContent === ' · PROXY from 10.0.0.0/8, 127.0.0.1'`)

	// The frontend's PROXY header counts follow the traffic (live stats).
	c, err := net.Dial("tcp", "127.0.0.1:"+strconv.Itoa(port))
	if err != nil {
		t.Fatal(err)
	}
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("PROXY TCP4 203.0.113.9 198.51.100.1 4242 80\r\nGET / HTTP/1.1\r\nHost: a\r\n\r\n"))
	io.ReadAll(c) // a 503: the server does not exist
	c.Close()
	u.waitJS(15*time.Second, "one accepted header on the frontend's card",
		`(document.querySelector('[data-proxy-counts="edge"]') || {}).textContent === 'PROXY headers accepted 1refused (untrusted peer) 0invalid 0timeouts 0'`)

	u.page("backends")
	u.run("open edit server form",
		chromedp.Click(chromedp.CSS(`button[data-action="edit-server"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/send_proxy"] select`)))
	u.fill(`dialog[open] [data-ptr="/send_proxy"] select`, "v2")
	u.run("save server",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var srv struct {
		SendProxy string `json:"send_proxy"`
	}
	in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).JSON(t, &srv)
	if srv.SendProxy != "v2" {
		t.Fatalf("stored send_proxy %q", srv.SendProxy)
	}
	u.waitJS(10*time.Second, "the server's PROXY protocol in the table",
		`(document.querySelector('tr[data-server="web/s1"] td.tls') || {}).textContent === 'PROXY v2'`)
	u.errs.check(t, "frontends")
}
