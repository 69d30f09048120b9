package main

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// recordSent makes the page record the bodies of the requests it sends
// from now on (until it navigates).
func (u *uiTest) recordSent() {
	u.t.Helper()
	evalJS[bool](u, `(() => { window.__sent = []; const f = window.fetch;
		window.fetch = (u, o) => { if (o && o.body) window.__sent.push(o.body); return f(u, o); }; return true; })()`)
}

// lastSent is the body of the last request recorded since recordSent.
func (u *uiTest) lastSent() string {
	u.t.Helper()
	return evalJS[string](u, `window.__sent[window.__sent.length - 1] || ''`)
}

// TestUIServerTLSFields: the server form's TLS section sends the tls
// member the API expects (verify, sni, ca_pem), a refusal of one of its
// fields is shown next to that field, the servers table shows the
// server's TLS, and switching verify to none drops the CA from the form
// and from what it sends.
func TestUIServerTLSFields(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	caPEM := testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin ca"}, CA: true}).CertPEM
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","mode":"http","servers":[]}`)

	u := newUITest(t, in)
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	u.page("backends")
	u.recordSent()
	type sentTLS struct {
		Verify string  `json:"verify"`
		CAPEM  *string `json:"ca_pem"`
		SNI    string  `json:"sni"`
	}
	lastSent := func() sentTLS {
		t.Helper()
		var sent struct {
			TLS *sentTLS `json:"tls"`
		}
		body := u.lastSent()
		if err := json.Unmarshal([]byte(body), &sent); err != nil || sent.TLS == nil {
			t.Fatalf("sent %q: %v", body, err)
		}
		return *sent.TLS
	}

	u.run("open add server form",
		chromedp.Click(chromedp.CSS(`section[data-backend="web"] button[data-action="add-server"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] form`)))
	u.fill(`dialog[open] [data-ptr="/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/port"] input`, strconv.Itoa(port))
	u.run("turn TLS on",
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/tls"] input[type="checkbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/verify"] select`)))
	u.fill(`dialog[open] [data-ptr="/tls/sni"] input`, "not a name")
	u.fill(`dialog[open] [data-ptr="/tls/ca_pem"] textarea`, caPEM)
	u.run("submit a bad sni",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/sni"].invalid .err`)))
	if msg := u.text(`dialog[open] [data-ptr="/tls/sni"] .err`); !strings.Contains(msg, "host name") {
		t.Fatalf("error next to the sni field = %q", msg)
	}
	u.fill(`dialog[open] [data-ptr="/tls/sni"] input`, "origin.test")
	u.run("add server",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	if s := lastSent(); s.Verify != "required" || s.SNI != "origin.test" || s.CAPEM == nil || *s.CAPEM != caPEM {
		t.Fatalf("the form sent %+v", s)
	}
	var got struct {
		TLS struct {
			Verify string `json:"verify"`
			CAPEM  string `json:"ca_pem"`
			SNI    string `json:"sni"`
		} `json:"tls"`
	}
	in.MustDo(200, "GET", "/api/v1/backends/web/servers/s1", nil).JSON(t, &got)
	if got.TLS.Verify != "required" || got.TLS.SNI != "origin.test" || got.TLS.CAPEM != caPEM {
		t.Fatalf("stored server: %+v", got)
	}
	u.waitJS(10*time.Second, "the server's TLS in the table",
		`(document.querySelector('tr[data-server="web/s1"] td.tls') || {}).textContent === 'verify required · sni origin.test · own CA'`)

	// Edit: verify none hides the CA field and drops ca_pem from the body.
	u.run("open edit server form",
		chromedp.Click(chromedp.CSS(`button[data-action="edit-server"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/ca_pem"] textarea`)))
	u.fill(`dialog[open] [data-ptr="/tls/verify"] select`, "none")
	u.waitJS(5*time.Second, "the CA field gone", `!document.querySelector('dialog[open] [data-ptr="/tls/ca_pem"]')`)
	u.run("save server",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	if s := lastSent(); s.Verify != "none" || s.SNI != "origin.test" || s.CAPEM != nil {
		t.Fatalf("the form sent %+v", s)
	}
	u.waitJS(10*time.Second, "the server's TLS in the table",
		`(document.querySelector('tr[data-server="web/s1"] td.tls') || {}).textContent === 'verify none · sni origin.test'`)
	u.errs.check(t, "backends")
}
