package main

// Browser tests of issue 23's web UI items: each one failed on the page
// as it was before its fix.

import (
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// openUI starts chromium on in's admin page and waits for the overview.
func openUI(t *testing.T, in *instance) *uiTest {
	t.Helper()
	chromiumPath(t)
	u := newUITest(t, in)
	u.shotsTo()
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	return u
}

// TestUIFrontendXFFOff (issue 23, item 10): the "Add X-Forwarded-For" box
// of New frontend shows what the server will do (ticked: the API's default
// is on), and left unticked the form sends x_forwarded_for false, so that
// the frontend is created without the header; Edit shows the box unticked.
func TestUIFrontendXFFOff(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var xff []string
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		xff = append(xff, strings.Join(r.Header.Values("X-Forwarded-For"), ","))
		mu.Unlock()
		io.WriteString(w, "ok\n")
	}))
	t.Cleanup(origin.Close)
	oport, _ := strconv.Atoi(origin.URL[strings.LastIndex(origin.URL, ":")+1:])
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, oport))

	u := openUI(t, in)
	u.page("frontends")
	u.run("open new frontend",
		chromedp.Click(chromedp.CSS(`#new-frontend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/http/x_forwarded_for"] input`)))
	box := `dialog[open] [data-ptr="/http/x_forwarded_for"] input`
	shownOn := evalJS[bool](u, `document.querySelector('`+box+`').checked`)
	if shownOn {
		u.run("untick X-Forwarded-For", chromedp.Click(chromedp.CSS(box)))
	}
	if evalJS[bool](u, `document.querySelector('`+box+`').checked`) {
		t.Fatal("the X-Forwarded-For box is still ticked")
	}
	u.recordSent()
	port := testutil.FreePort(t)
	u.fill(`dialog[open] [data-ptr="/name"] input`, "pub")
	u.fill(`dialog[open] [data-ptr="/binds/0/port"] input`, strconv.Itoa(port))
	u.run("create frontend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-frontend="pub"] tr[data-bind="pub/b1"]`)))
	type opts struct {
		HTTP *struct {
			XFF *bool `json:"x_forwarded_for"`
		} `json:"http"`
	}
	var sent, stored opts
	u.sentJSON(&sent)
	u.apiJSON("/api/v1/frontends/pub", &stored)
	if stored.HTTP == nil || stored.HTTP.XFF == nil || *stored.HTTP.XFF {
		t.Fatalf("X-Forwarded-For left unticked, the frontend was stored with it on (sent %s)", u.lastSent())
	}
	if sent.HTTP == nil || sent.HTTP.XFF == nil || *sent.HTTP.XFF {
		t.Fatalf("the form sent %s, want http.x_forwarded_for false", u.lastSent())
	}
	if !shownOn {
		t.Fatal("New frontend showed the X-Forwarded-For box unticked while the API's default is on")
	}
	// The data plane adds no X-Forwarded-For.
	resp, err := http.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	mu.Lock()
	got := append([]string(nil), xff...)
	mu.Unlock()
	if len(got) != 1 || got[0] != "" {
		t.Fatalf("the origin saw X-Forwarded-For %q, want none", got)
	}
	u.run("open edit frontend",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="edit-frontend"]`)),
		chromedp.WaitVisible(chromedp.CSS(box)))
	if evalJS[bool](u, `document.querySelector('`+box+`').checked`) {
		t.Fatal("Edit shows X-Forwarded-For ticked on a frontend stored without it")
	}
	u.errs.check(t, "xff off")
}

// nextLiveSamples waits until the page has drawn n more stats samples
// from the events stream (the header says "live"), so that what is
// checked after it is what the stream says, not a first poll of
// /api/v1/stats.
func (u *uiTest) nextLiveSamples(n int) {
	u.t.Helper()
	for range n {
		at := evalJS[float64](u, `Number(document.getElementById('live').dataset.statsAt || 0)`)
		u.waitJS(10*time.Second, "a new stats sample from the events stream", fmt.Sprintf(
			`Number(document.getElementById('live').dataset.statsAt || 0) > %f && document.getElementById('live').textContent === 'live'`, at))
	}
}

// TestUIHealthAndAdminStateApart (issue 23, item 8): a server's health and
// its admin state are two facts, and the page shows both: a down server
// that is drained reads "down" and "drain" (it used to read "drain", and
// the Overview "all up"), an up server in maintenance "up" and "maint";
// the Overview lists the down one with its admin state and does not say
// "all up".
func TestUIHealthAndAdminStateApart(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	t.Cleanup(origin.Close)
	oport, _ := strconv.Atoi(origin.URL[strings.LastIndex(origin.URL, ":")+1:])
	in := startSpliced(t, "")
	// Checks within 2 s: web/s2 must stay up for the whole walk (a 200 ms
	// timeout is missed on a loaded machine: TestUIStatusPage's was).
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"web","mode":"http",
		"health_check":{"type":"tcp","interval_ms":2000,"timeout_ms":2000,"rise":1,"fall":1},
		"servers":[{"name":"s1","address":"127.0.0.1","port":%d,"admin_state":"drain"},
		{"name":"s2","address":"127.0.0.1","port":%d,"admin_state":"maint"},
		{"name":"s3","address":"127.0.0.1","port":%d}]}`, testutil.FreePort(t), oport, oport))
	type srv struct {
		Up         bool   `json:"up"`
		AdminState string `json:"admin_state"`
		Check      *struct {
			Status string `json:"status"`
		} `json:"check"`
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		var st struct {
			Backends []struct {
				Servers []srv `json:"servers"`
			} `json:"backends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		s := st.Backends[0].Servers
		return len(s) == 3 && !s[0].Up && s[0].Check != nil && s[0].Check.Status == "L4CON" && s[1].Up && s[1].Check.Status == "L4OK"
	}, "web/s1 down by its check, web/s2 up")

	u := openUI(t, in)
	u.waitJS(10*time.Second, "the down list", `!!document.querySelector('#down-list tr[data-server="web/s1"]')`)
	u.nextLiveSamples(2)
	if s := u.text(`#health`); strings.Contains(s, "all up") {
		t.Fatalf("the Overview's health says %q while web/s1 is down (and drained)", s)
	}
	if s := u.text(`#down-list tr[data-server="web/s1"]`); !strings.Contains(s, "drain") || !strings.Contains(s, "L4CON") {
		t.Fatalf("down list row of web/s1 = %q, want its admin state (drain) and its check", s)
	}
	if s := u.text(`#be-stats tr[data-backend="web"] .be-state`); !strings.Contains(s, "1 down") || !strings.Contains(s, "1 drain") || !strings.Contains(s, "1 maint") {
		t.Fatalf("backend web's state = %q, want 1 down, 1 drain, 1 maint", s)
	}
	u.shot("overview-down-drained")

	u.page("backends")
	u.nextLiveSamples(2)
	cellText := func(server, col string) string {
		return evalJS[string](u, fmt.Sprintf(`(() => { const td = document.querySelector('tr[data-server=%q] td[data-label=%q]'); return td ? td.textContent : ''; })()`, server, col))
	}
	for _, c := range []struct{ server, health, admin string }{{"web/s1", "down", "drain"}, {"web/s2", "up", "maint"}, {"web/s3", "up", "ready"}} {
		if h, a := cellText(c.server, "Health"), cellText(c.server, "State"); !strings.HasPrefix(h, c.health) || !strings.Contains(a, c.admin) {
			t.Fatalf("%s: health %q, state %q; want %s and %s", c.server, h, a, c.health, c.admin)
		}
	}
	u.shot("backends-down-drained")
	u.errs.check(t, "health and admin state")
}

// TestUICertificatesUpload (issue 23, item 12): an admin uploads a
// certificate from the page (a chosen file with chain and key), sees what
// the API parsed (names, expiry) from a dry run before anything is stored,
// replaces it (pasted PEM), and deletes it; deleting one a bind uses is
// refused and the page says which bind; the bind form's certificate list
// is read again without leaving the form.
func TestUICertificatesUpload(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[]}`)
	in.MustDo(201, "POST", "/api/v1/frontends", `{"name":"pub","default_backend":"web","binds":[]}`)
	u := openUI(t, in)
	certNames := func() []string {
		var list []struct {
			Name    string `json:"name"`
			Subject string `json:"subject"`
		}
		u.apiJSON("/api/v1/certificates", &list)
		var out []string
		for _, c := range list {
			out = append(out, c.Name+"="+c.Subject)
		}
		return out
	}

	// The bind form is open, TLS on, no certificate yet; one is uploaded
	// meanwhile (another tab): "Reload the list" offers it.
	u.page("frontends")
	u.run("open add bind form",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="add-bind"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] fieldset[data-ptr="/tls"] input[type="checkbox"]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/tls"] input[type="checkbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/certificates"] select`)))
	cp, kp := certPEMFor(t, "site.test", 90*24*time.Hour)
	body := fmt.Sprintf(`{"name":"site","cert_pem":%q,"key_pem":%q}`, cp, kp)
	in.MustDo(201, "POST", "/api/v1/certificates", body)
	u.run("reload the certificate list", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="reload-certs"]`)))
	u.waitJS(5*time.Second, "site offered in the bind form",
		`[...document.querySelectorAll('dialog[open] [data-ptr="/tls/certificates"] option')].some((o) => o.value === 'site')`)
	u.run("close the bind form", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends/pub/binds", fmt.Sprintf(`{"name":"b1","address":"127.0.0.1","port":%d,"tls":{"certificates":["site"]}}`, port))

	// Upload from one chosen file holding the chain and the key.
	u.page("certificates")
	u.run("open the upload form",
		chromedp.Click(chromedp.CSS(`#upload-cert`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] #cert-files`)))
	acp, akp := certPEMFor(t, "api.test", 40*24*time.Hour)
	file := t.TempDir() + "/api.pem"
	if err := os.WriteFile(file, []byte(acp+akp), 0o600); err != nil {
		t.Fatal(err)
	}
	u.fill(`dialog[open] [data-ptr="/name"] input`, "api")
	u.run("choose the PEM file", chromedp.SetUploadFiles(chromedp.CSS(`dialog[open] #cert-files`), []string{file}))
	// Choosing both runs the check (a dry run): the parsed names and expiry.
	u.waitJS(10*time.Second, "the parsed certificate", `!!document.querySelector('dialog[open] #cert-parsed')`)
	if s := u.text(`dialog[open] #cert-parsed`); !strings.Contains(s, "CN=api.test") || !strings.Contains(s, "api.test") || !strings.Contains(s, "(40 days)") {
		t.Fatalf("parsed = %q, want the subject, the SANs and the days left", s)
	}
	if got := certNames(); len(got) != 1 {
		t.Fatalf("the check stored something: %v", got)
	}
	if s := evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/key_pem"] textarea').value`); !strings.Contains(s, "PRIVATE KEY") ||
		strings.Contains(evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/cert_pem"] textarea').value`), "PRIVATE KEY") {
		t.Fatal("the file's key and chain were not split into their fields")
	}
	u.shot("cert-upload-checked")
	u.run("upload",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`#cert-table tr[data-name="api"]`)))

	// Replace it with pasted PEM: the check shows the new names and the old.
	ncp, nkp := certPEMFor(t, "api2.test", 200*24*time.Hour)
	u.run("open replace",
		chromedp.Click(chromedp.CSS(`#cert-table button[data-action="replace-cert"][data-name="api"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/cert_pem"] textarea`)))
	if l := evalJS[string](u, `document.querySelector('#cert-table button[data-action="replace-cert"][data-name="api"]').getAttribute('aria-label')`); l != "Replace certificate api" {
		t.Fatalf("replace button's name = %q", l)
	}
	u.fill(`dialog[open] [data-ptr="/cert_pem"] textarea`, ncp)
	u.fill(`dialog[open] [data-ptr="/key_pem"] textarea`, nkp)
	u.run("check", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="preview"]`)))
	u.waitJS(10*time.Second, "the parsed replacement", `!!(document.querySelector('dialog[open] #cert-parsed') || {}).textContent?.includes('CN=api2.test')`)
	if s := u.text(`dialog[open] #cert-parsed`); !strings.Contains(s, "Names before") || !strings.Contains(s, "api.test") {
		t.Fatalf("parsed replacement = %q, want the names before", s)
	}
	u.run("replace",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.waitJS(10*time.Second, "the new subject listed", `!!(document.querySelector('#cert-table tr[data-name="api"]') || {}).textContent?.includes('CN=api2.test')`)

	// Delete site, used by pub/b1: refused, and the page says by what.
	u.run("delete site",
		chromedp.Click(chromedp.CSS(`#cert-table button[data-action="delete-cert"][data-name="site"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	if s := u.text(`dialog[open]`); !strings.Contains(s, "frontend/pub/bind/b1") {
		t.Fatalf("delete question = %q, want the bind that uses it", s)
	}
	u.run("confirm", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	u.waitJS(10*time.Second, "the in-use notice", `!!document.querySelector('#cert-notice [data-in-use="site"]')`)
	if s := u.text(`#cert-notice`); !strings.Contains(s, "409") || !strings.Contains(s, "frontend/pub/bind/b1") {
		t.Fatalf("in-use notice = %q", s)
	}
	u.shot("cert-in-use")
	u.errs.reset() // the 409 is logged by the browser as a failed request
	// Delete api, unused.
	u.run("delete api",
		chromedp.Click(chromedp.CSS(`#cert-table button[data-action="delete-cert"][data-name="api"]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`#cert-table tr[data-name="api"]`)))
	if got := certNames(); len(got) != 1 || got[0] != "site=CN=site.test" {
		t.Fatalf("certificates after the deletes: %v", got)
	}
	u.errs.check(t, "certificates upload")
}

// soonJS polls a JavaScript condition for up to d; when it stays false
// the test is marked failed (and goes on, so that one run lists every
// part that fails).
func (u *uiTest) soonJS(d time.Duration, what, js string) bool {
	u.t.Helper()
	deadline := time.Now().Add(d)
	for {
		if evalJS[bool](u, js) {
			return true
		}
		if time.Now().After(deadline) {
			u.t.Errorf("%s: not true within %v: %s", what, d, js)
			return false
		}
		time.Sleep(50 * time.Millisecond) // poll interval of a condition with a deadline
	}
}

// TestUINewOperatorDetails (issue 23, item 14): the smaller things a new
// operator met, each checked on its own (a failing part does not hide the
// others): Escape asks before throwing a filled form away; a restore that
// closes listeners says which; a bind on a taken port names the address
// at the Port field; a TLS bind shows its handshake timeout; revisions
// name the fields an update changed; an audit entry's "gen N" links to
// the revision; the loop table's jargon has explanations; times have one
// format; badges reach 4.5:1 contrast; row buttons have names that tell
// them apart.
func TestUINewOperatorDetails(t *testing.T) {
	t.Parallel()
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "ok\n") }))
	t.Cleanup(origin.Close)
	oport, _ := strconv.Atoi(origin.URL[strings.LastIndex(origin.URL, ":")+1:])
	in := startSpliced(t, "")
	cp, kp := certPEMFor(t, "site.test", 90*24*time.Hour)
	in.MustDo(201, "POST", "/api/v1/certificates", fmt.Sprintf(`{"name":"site","cert_pem":%q,"key_pem":%q}`, cp, kp))                          // gen 1
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, oport)) // gen 2
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, port)) // gen 3
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7}`)                                                                                       // gen 4
	taken, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	takenAddr := taken.Addr().String()

	u := openUI(t, in)

	// Jargon of the loop table: explained on hover and focus.
	u.soonJS(5*time.Second, "the loop table's Tasklets and Accq full explained",
		`(() => { const th = [...document.querySelectorAll('#loops-table th')];
			const tip = (w) => { const x = th.find((e) => e.textContent === w); const a = x && x.querySelector('abbr[data-tip]'); return a ? a.dataset.tip : ''; };
			return /urgent/.test(tip('Tasklets u/n/b')) && /accept queue/.test(tip('Accq full')); })()`)
	// ... and the explanation is shown on keyboard focus (not a title a
	// mouse alone can read), and stays while the table is redrawn.
	// A tap on the first heading gives the page the focus (a headless page
	// has none: :focus would not match); the keyboard then moves it.
	u.run("tap Loop", chromedp.Click(chromedp.CSS(`#loops-table th:first-child abbr`)))
	evalJS[bool](u, `(() => { const a = [...document.querySelectorAll('#loops-table abbr')].find((e) => e.textContent === 'Accq full'); if (a) a.focus(); window.__loopRow = document.querySelector('#loops-table tbody tr'); return true; })()`)
	u.soonJS(5*time.Second, "the loop table redrawn", `document.querySelector('#loops-table tbody tr') !== window.__loopRow`)
	u.soonJS(3*time.Second, "Accq full's explanation visible on focus, after a redraw",
		`(() => { const a = document.activeElement; return !!a && a.matches('#loops-table abbr.tip') && a.textContent === 'Accq full' && !a.title && /accept queue/.test(getComputedStyle(a, '::after').content); })()`)
	// The class shares (seed 000's TC0/TC1/TC2) per loop.
	u.soonJS(10*time.Second, "the loop table shows each class's share of the time",
		`[...document.querySelectorAll('#loops-table td[data-col=shares]')].some((e) => /^\d+% \/ \d+% \/ \d+%$/.test(e.textContent))`)

	// Badges: ink on ground at 4.5:1 at least (WCAG AA), green and blue too.
	evalJS[bool](u, `(() => { const p = document.createElement('p'); p.id = 'badge-probe';
		for (const k of ['ok', 'accent', 'warn', 'bad', '']) { const b = document.createElement('span'); b.className = 'badge ' + k; b.textContent = 'x'; p.append(b); }
		document.getElementById('main').append(p); return true; })()`)
	low := evalJS[string](u, `(() => {
		const rgb = (s) => s.match(/[\d.]+/g).slice(0, 3).map(Number);
		const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.03928 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; }; const [r, g, b] = c.map(f); return 0.2126 * r + 0.7152 * g + 0.0722 * b; };
		const out = [];
		for (const b of document.querySelectorAll('#badge-probe .badge')) {
			const cs = getComputedStyle(b); const a = lum(rgb(cs.color)); const z = lum(rgb(cs.backgroundColor));
			const r = (Math.max(a, z) + 0.05) / (Math.min(a, z) + 0.05);
			if (r < 4.5) out.push(b.className + ' ' + r.toFixed(2));
		}
		document.getElementById('badge-probe').remove();
		return out.join('; '); })()`)
	if low != "" {
		t.Errorf("badges under 4.5:1 contrast: %s", low)
	}

	// Escape on a filled form asks; "Keep editing" keeps it, "Discard" closes.
	u.page("backends")
	u.run("type in a new backend form",
		chromedp.Click(chromedp.CSS(`#new-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`)),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`), "api"),
		chromedp.KeyEvent(kb.Escape))
	if u.soonJS(3*time.Second, "Escape on a filled form asks first", `!!document.querySelector('dialog[open] button[data-confirm="no"]')`) {
		if s := u.text(`dialog[open] .body`); !strings.Contains(s, "Discard") {
			t.Errorf("the question reads %q", s)
		}
		u.run("keep editing", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog[open] button[data-confirm]`)))
		if v := evalJS[string](u, `(document.querySelector('dialog[open] [data-ptr="/name"] input') || {}).value || ''`); v != "api" {
			t.Errorf("after Keep editing the form holds %q, want api", v)
		}
		u.run("Escape again, discard",
			chromedp.Click(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`)),
			chromedp.KeyEvent(kb.Escape),
			chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
			chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	}
	in.MustDo(404, "GET", "/api/v1/backends/api", nil)

	// The browser's Back leaves a form as Escape does: an untouched one
	// closes; an edited one asks, "Keep editing" stays on the page.
	u.run("open a new backend form",
		chromedp.Click(chromedp.CSS(`#new-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`)))
	evalJS[bool](u, `(history.back(), true)`)
	u.soonJS(5*time.Second, "Back closes an untouched form", `!document.querySelector('dialog[open]')`)
	u.page("backends")
	u.run("type in a new backend form again",
		chromedp.Click(chromedp.CSS(`#new-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`)),
		chromedp.SendKeys(chromedp.CSS(`dialog[open] [data-ptr="/name"] input`), "api"))
	evalJS[bool](u, `(history.back(), true)`)
	if u.soonJS(5*time.Second, "Back on a filled form asks first", `!!document.querySelector('dialog[open] button[data-confirm="no"]')`) {
		u.run("keep editing", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)),
			chromedp.WaitNotPresent(chromedp.CSS(`dialog[open] button[data-confirm]`)))
		u.soonJS(5*time.Second, "the form kept, on the backends page", `location.hash === '#/backends' && (document.querySelector('dialog[open] [data-ptr="/name"] input') || {}).value === 'api'`)
		evalJS[bool](u, `(history.back(), true)`)
		if u.soonJS(5*time.Second, "Back again asks", `!!document.querySelector('dialog[open] button[data-confirm="yes"]')`) {
			u.run("discard", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
				chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
		}
	}
	u.page("backends")

	// Row buttons: each one's accessible name says which object it acts on.
	names := evalJS[[]string](u, `[...document.querySelectorAll('tr[data-server="web/s1"] button, section[data-backend="web"] .obj-head button')].map((b) => b.getAttribute('aria-label') || b.textContent)`)
	for _, want := range []string{"Edit server web/s1", "Remove server web/s1", "Edit backend web", "Delete backend web", "Drain web/s1"} {
		if !slices.Contains(names, want) {
			t.Errorf("no button named %q among %q", want, names)
		}
	}

	// A bind on a taken port: the Port field says which address is taken.
	u.page("frontends")
	if !slices.Contains(evalJS[[]string](u, `[...document.querySelectorAll('section[data-frontend="pub"] button')].map((b) => b.getAttribute('aria-label') || b.textContent)`), "Remove bind pub/b1") {
		t.Error("the Remove button of bind pub/b1 is not named after it")
	}
	if s := u.text(`section[data-frontend="pub"] [data-handshake="pub"]`); s != "" {
		t.Errorf("a frontend without TLS shows a handshake timeout %q", s)
	}
	_, tport, _ := net.SplitHostPort(takenAddr)
	u.run("open add bind",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="add-bind"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/port"] input`)))
	u.fill(`dialog[open] [data-ptr="/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/port"] input`, tport)
	// A TLS bind: the handshake timeout it brings is shown.
	u.run("turn TLS on",
		chromedp.Click(chromedp.CSS(`dialog[open] fieldset[data-ptr="/tls"] input[type="checkbox"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/tls/certificates"] select`)))
	if s := u.text(`dialog[open] fieldset[data-ptr="/tls"]`); !strings.Contains(s, "5,000 ms") || !strings.Contains(s, "handshake_ms") {
		t.Errorf("the TLS section does not say the handshake timeout it sets: %q", s)
	}
	u.run("submit", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)))
	u.waitJS(10*time.Second, "the refusal shown", `!!document.querySelector('dialog[open] .summary, dialog[open] .invalid')`)
	if s := u.text(`dialog[open] [data-ptr="/port"] .err`); !strings.Contains(s, takenAddr) || !strings.Contains(s, "in use") {
		t.Errorf("the Port field says %q, want the address %s in use (summary %q)", s, takenAddr, u.text(`dialog[open] .summary`))
	}
	u.errs.reset() // the 409 is logged by the browser as a failed request
	u.run("close", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="cancel"]`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	// With a TLS bind (added by the API), the frontend shows its timeout.
	in.MustDo(201, "POST", "/api/v1/frontends/pub/binds", fmt.Sprintf(`{"name":"b2","address":"127.0.0.1","port":%d,"tls":{"certificates":["site"]}}`, testutil.FreePort(t))) // gen 5
	u.page("overview")
	u.page("frontends")
	if s := u.text(`section[data-frontend="pub"] [data-handshake="pub"]`); !strings.Contains(s, "5,000 ms") {
		t.Errorf("the frontend's handshake timeout shown = %q, want 5,000 ms", s)
	}

	// Revisions: the weight change names its field; one time format.
	u.page("revisions")
	if s := u.text(`#revisions tr[data-generation="4"] .summary-cell`); !strings.Contains(s, "weight") {
		t.Errorf("revision 4 reads %q, want the field it changed (weight)", s)
	}
	stamp := `/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/`
	if s := evalJS[string](u, `document.querySelector('#revisions tr[data-generation="4"] td[data-label="When"]').title`); !evalJS[bool](u, stamp+`.test(`+strconv.Quote(s)+`)`) {
		t.Errorf("revision time %q, want YYYY-MM-DD hh:mm:ss", s)
	}
	if l := evalJS[string](u, `(document.querySelector('button[data-action="restore"][data-generation="2"]') || {getAttribute: () => ''}).getAttribute('aria-label') || ''`); l != "Restore generation 2" {
		t.Errorf("the Restore… button of generation 2 is named %q", l)
	}
	// A restore that closes listeners says which, and its button too.
	u.run("ask to restore #2", chromedp.Click(chromedp.CSS(`button[data-action="restore"][data-generation="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)))
	if s := u.text(`dialog[open]`); !strings.Contains(s, "closes 2 listeners") || !strings.Contains(s, fmt.Sprintf("127.0.0.1:%d", port)) || !strings.Contains(s, "pub/b1") {
		t.Errorf("the restore question does not say what it closes: %q", s)
	}
	if s := u.text(`dialog[open] button[data-confirm="yes"]`); !strings.Contains(s, "close 2 listeners") {
		t.Errorf("the restore button reads %q", s)
	}
	u.run("cancel", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))

	// Audit: "gen 4" links to revision 4, shown with what it changed.
	u.page("audit")
	u.waitJS(10*time.Second, "the audit entries", `!!document.querySelector('#audit-table tbody tr')`)
	if s := evalJS[string](u, `(document.querySelector('#audit-table td[data-label="When"]') || {}).title || ''`); !evalJS[bool](u, stamp+`.test(`+strconv.Quote(s)+`)`) {
		t.Errorf("audit time %q, want YYYY-MM-DD hh:mm:ss", s)
	}
	if u.soonJS(3*time.Second, "gen 4 is a link", `!!document.querySelector('#audit-table a[href="#/revisions/4"]')`) {
		u.run("follow gen 4",
			chromedp.Click(chromedp.CSS(`#audit-table a[href="#/revisions/4"]`)),
			chromedp.WaitVisible(chromedp.CSS(`#page-revisions[data-ready="1"]`)))
		u.soonJS(5*time.Second, "revision 4 marked and compared with 3",
			`document.querySelector('#revisions tr[data-generation="4"]').classList.contains('picked') && document.getElementById('diff-from').value === '3' && document.getElementById('diff-to').value === '4'`)
	}
	u.shot("details")

	// Long names (valid: 63 and 54 characters) at 375 px: they wrap, the
	// values beside them stay in view and no page scrolls sideways.
	longBe, longSrv := strings.Repeat("b", 63), strings.Repeat("s", 54)
	longDown := strings.Repeat("d", 54) // checked and down: listed on the Overview
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":%q,"health_check":{"type":"tcp","interval_ms":200,"timeout_ms":200,"rise":1,"fall":1},
		"servers":[{"name":%q,"address":"127.0.0.1","port":%d},{"name":%q,"address":"127.0.0.1","port":%d}]}`, longBe, longSrv, oport, longDown, testutil.FreePort(t)))
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	// By the address, not the nav bar: the new generation's toast may lie
	// over the phone's nav links.
	goTo := func(pg string) {
		t.Helper()
		evalJS[bool](u, fmt.Sprintf(`(location.hash = '#/%s', true)`, pg))
		u.waitJS(15*time.Second, "the "+pg+" page", fmt.Sprintf(`!!document.querySelector('#page-%s[data-ready="1"]')`, pg))
	}
	for _, pg := range []string{"overview", "backends", "revisions", "status"} {
		goTo(pg)
		if pg == "overview" {
			u.waitJS(10*time.Second, "the long-named server listed down", fmt.Sprintf(`!!document.querySelector('#down-list tr[data-server=%q]')`, longBe+"/"+longDown))
		}
		if w := evalJS[int](u, `document.documentElement.scrollWidth`); w > 375 {
			u.shot("long-375-" + pg)
			t.Errorf("at 375 px with long names, the %s page is %d px wide", pg, w)
		}
	}
	goTo("backends")
	if out := evalJS[string](u, fmt.Sprintf(`[...document.querySelectorAll('section[data-backend=%q] td')].filter((td) => td.getClientRects().length && td.getBoundingClientRect().right > 376).map((td) => td.dataset.label).join(', ')`, longBe)); out != "" {
		t.Errorf("at 375 px, the long backend's cells past the right edge: %s", out)
	}
	goTo("revisions")
	if out := evalJS[string](u, `[...document.querySelectorAll('#revisions td')].filter((td) => td.getClientRects().length && td.getBoundingClientRect().right > 376).map((td) => td.dataset.label).join(', ')`); out != "" {
		t.Errorf("at 375 px, revision cells past the right edge: %s", out)
	}
	u.errs.check(t, "new operator details")
}
