package main

// Issue 16, the Logs page: the access log's last entries (GET
// /api/v1/logs) with status and termination, live from its event stream
// (?follow=1), pause/resume, filters, the empty state, the stream closed
// when the page is left (per-token stream cap), polling when the server
// refuses the stream, 375 px, and a viewer without the page. Issue 23
// item 11: the filters are the server's, so a 5xx pushed out of the
// page's last 500 rows by a burst is still found by the status filter.

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

func TestUILogsPage(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "ops-alice")
	viewer := newToken(t, dir, "viewer", "watcher")
	// The browser reaches the admin API through a forwarder the test can
	// cut, to drop the page's stream (the admin address accepts its Host).
	fw := newCutProxy(t)
	in := startSpliced(t, dir, "--admin-host", fmt.Sprintf("127.0.0.1:%d", fw.port))
	fw.mu.Lock()
	fw.target = in.Admin
	fw.mu.Unlock()
	auth := bearerHdr(admin)

	// The origin answers 503 under /fail, 200 elsewhere.
	web := newHTTPOrigin(t, "web", func(_ net.Conn, r *rawReq) string {
		if strings.HasPrefix(r.Path, "/fail") {
			return "HTTP/1.1 503 Service Unavailable\r\nContent-Length: 5\r\n\r\nbusy\n"
		}
		return okResp("web")
	})
	in.MustDo(201, "POST", "/api/v1/backends", httpBackend("web", "roundrobin", web.server("s1")), auth)
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub","mode":"http","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, port), auth)
	get := func(path string) {
		t.Helper()
		resp, _ := roundTrip(t, port, "GET "+path+" HTTP/1.1\r\nHost: x\r\n\r\n")
		resp.Body.Close()
	}

	u := newUITest(t, in)
	u.shotsTo()
	u.base = fmt.Sprintf("http://127.0.0.1:%d/ui/", fw.port)
	u.signIn(admin)

	// No frontend logs: the page says how to turn the access log on.
	u.page("logs")
	u.waitJS(5*time.Second, "the empty state", `!!document.querySelector('#logs-off a[href="#/frontends"]') && document.getElementById('logs-off').textContent.includes('"access_log": true')`)
	u.shot("logs-empty-1280")
	in.MustDo(200, "PATCH", "/api/v1/frontends/pub", `{"access_log":true}`, auth)
	// The configuration change redraws the page: pub now logs.
	u.waitJS(5*time.Second, "the empty state naming pub", `(() => { const e = document.getElementById('logs-empty'); return !!e && e.textContent.includes('No entry yet: pub logs'); })()`)

	// A 200, a 503 from the server, a client that leaves during its body.
	get("/ok")
	get("/fail?token=secret")
	a := dialProxy(t, port)
	io.WriteString(a, "POST /up HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\npart")
	testutil.Eventually(t, 5*time.Second, func() bool { return strings.Contains(web.received(), "POST /up") }, "the origin to get the POST head")
	a.(*net.TCPConn).SetLinger(0)
	a.Close()

	rows := `#logs-table > tbody > tr`
	u.waitJS(10*time.Second, "three entries, live", fmt.Sprintf(`document.querySelectorAll(%q).length === 3`, rows))
	// Newest first: the abort, the 503, the 200.
	type rowInfo struct {
		Status, Term, Cls, Req, Title, Route string
	}
	rowsNow := func() []rowInfo {
		return evalJS[[]rowInfo](u, fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((r) => !r.hidden).map((r) => ({
			Status: r.querySelector('td.st').textContent, Term: r.querySelector('td.term abbr').textContent, Cls: r.dataset.cls,
			Req: r.querySelector('td.req').textContent, Title: r.querySelector('td.term abbr').title, Route: r.querySelector('td.route').textContent }))`, rows))
	}
	got := rowsNow()
	want := []struct{ status, term, cls, req string }{
		{"—", "CD", "none", "POST /up HTTP/1.1"},
		{"503", "--", "5xx", "GET /fail?token=REDACTED HTTP/1.1"},
		{"200", "--", "2xx", "GET /ok HTTP/1.1"},
	}
	for i, w := range want {
		g := got[i]
		if g.Status != w.status || g.Term != w.term || g.Cls != w.cls || g.Req != w.req || g.Route != "pub → web/s1" {
			u.shot("logs-failure")
			t.Fatalf("row %d: %+v, want status %s termination %s class %s request %q via pub → web/s1", i, g, w.status, w.term, w.cls, w.req)
		}
	}
	if !strings.Contains(got[0].Title, "ended by the client, in the data phase") {
		t.Fatalf("the CD tooltip says %q", got[0].Title)
	}
	if !evalJS[bool](u, `document.querySelector('#logs-table td.st .badge').classList.length > 0 && [...document.querySelectorAll('#logs-table td.st .badge')][1].classList.contains('bad') && [...document.querySelectorAll('#logs-table td.st .badge')][2].classList.contains('ok')`) {
		t.Fatal("the 503 is not red or the 200 not green")
	}
	u.shot("logs-1280")
	// One time format (issue 23, item 14): the Time cell reads the date
	// and time as every page does; the relative time has it as tooltip.
	if bad := evalJS[string](u, fmt.Sprintf(`(() => { const stamp = /^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d$/;
		const td = document.querySelector(%q + ' td[data-label="Time"]'); const at = td.querySelector('[data-stamp]'); const ago = td.querySelector('[data-ago]');
		if (!at || !stamp.test(at.textContent)) return 'time reads ' + td.textContent;
		if (!ago || ago.title !== at.textContent) return 'the relative time has the tooltip ' + (ago && ago.title);
		return ''; })()`, rows)); bad != "" {
		t.Errorf("the Time cell: %s", bad)
	}

	// A new request appears without a reload.
	evalJS[bool](u, `(window.__noReload = true)`)
	get("/live")
	u.waitJS(5*time.Second, "the new request on top", fmt.Sprintf(`document.querySelector(%q).textContent.includes('GET /live')`, rows))
	if !evalJS[bool](u, `window.__noReload === true`) {
		t.Fatal("the page was reloaded")
	}

	// Filters (the server's: the page reads what they select, then
	// streams it): 5xx shows the 503 alone; abnormal only, the 503 and
	// the abort; termination CD, the abort.
	visible := fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((r) => !r.hidden)`, rows)
	waitRows := func(what string, want ...string) { // the visible rows' requests, newest first
		t.Helper()
		js, _ := json.Marshal(want)
		u.waitJS(10*time.Second, what, fmt.Sprintf(`(() => { const r = %s.map((tr) => tr.querySelector('td.req').textContent);
			return JSON.stringify(r) === %q && document.getElementById('logs-state').dataset.state === 'live'; })()`, visible, js))
	}
	u.fill(`#logs-class`, "5xx")
	waitRows("the 503 alone", "GET /fail?token=REDACTED HTTP/1.1")
	if s := u.text(`#logs-shown`); s != "1 entry shown (filtered)" {
		t.Fatalf("the count says %q, want 1 entry shown (filtered)", s)
	}
	u.shot("logs-5xx-1280")
	u.fill(`#logs-class`, "")
	u.run("abnormal only", chromedp.Click(chromedp.CSS(`#logs-abnormal`)))
	waitRows("the abort and the 503", "POST /up HTTP/1.1", "GET /fail?token=REDACTED HTTP/1.1")
	u.run("all ends", chromedp.Click(chromedp.CSS(`#logs-abnormal`)))
	u.fill(`#logs-term`, "CD")
	waitRows("the abort alone", "POST /up HTTP/1.1")
	u.fill(`#logs-term`, "")
	waitRows("every entry again", "GET /live HTTP/1.1", "POST /up HTTP/1.1", "GET /fail?token=REDACTED HTTP/1.1", "GET /ok HTTP/1.1")
	u.fill(`#logs-q`, "/fail")
	if g := rowsNow(); len(g) != 1 || g[0].Status != "503" {
		t.Fatalf("search /fail shows %+v", g)
	}
	u.fill(`#logs-q`, "")

	// Pause: new entries wait (counted on the button), Resume shows them.
	u.run("pause", chromedp.Click(chromedp.CSS(`#logs-pause`)))
	get("/while-paused")
	u.waitJS(5*time.Second, "the button to count one new entry", `document.getElementById('logs-pause').textContent === 'Resume (1 new)'`)
	if evalJS[bool](u, `document.getElementById('logs-table').textContent.includes('/while-paused')`) {
		t.Fatal("a new entry was drawn while paused")
	}
	u.run("resume", chromedp.Click(chromedp.CSS(`#logs-pause`)))
	u.waitJS(5*time.Second, "the held entry drawn", fmt.Sprintf(`document.querySelector(%q).textContent.includes('/while-paused')`, rows))
	if !u.focusIn(`#logs-pause`) {
		t.Fatal("the focus left the pause button")
	}

	// Leaving the page closes its stream: more visits than the per-token
	// cap (4, one held by /api/v1/events) each get a live stream.
	for i := 0; i < 5; i++ {
		u.page("overview")
		u.page("logs")
		u.waitJS(5*time.Second, "the stream live", `document.getElementById('logs-state').dataset.state === 'live'`)
	}

	// A dropped stream is reconnected, and what ended while it was down
	// is read on reconnect.
	fw.cut(true)
	u.waitJS(5*time.Second, "the drop seen", `document.getElementById('logs-state').dataset.state === 'reconnecting'`)
	get("/while-down")
	u.shot("logs-reconnecting-1280")
	fw.cut(false)
	u.waitJS(15*time.Second, "the stream live again", `document.getElementById('logs-state').dataset.state === 'live'`)
	u.waitJS(5*time.Second, "the entry of the outage", fmt.Sprintf(`document.querySelector(%q).textContent.includes('GET /while-down')`, rows))
	get("/after-reconnect")
	u.waitJS(5*time.Second, "a live entry after the reconnect", fmt.Sprintf(`document.querySelector(%q).textContent.includes('GET /after-reconnect')`, rows))
	if n := evalJS[int](u, fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((r) => r.textContent.includes('/while-down')).length`, rows)); n != 1 {
		t.Fatalf("the outage's entry is listed %d times", n)
	}

	// A tcp frontend's connection: no status, no request line; the
	// frontend filter keeps it alone.
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"raw","mode":"tcp","servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, web.port), auth)
	tport := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"rawfe","mode":"tcp","default_backend":"raw","access_log":true,"binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, tport), auth)
	tc := dialProxy(t, tport)
	io.WriteString(tc, "GET /tcp HTTP/1.1\r\nHost: x\r\n\r\n")
	readResp(t, bufio.NewReader(tc), "GET")
	tc.Close() // the entry is written when the connection ends
	u.waitJS(10*time.Second, "the tcp connection listed", fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && r.dataset.fe === 'rawfe'; })()`, rows))
	if s := u.text(rows+` td.st`) + "|" + u.text(rows+` td.req`) + "|" + u.text(rows+` td.route`); s != "tcp|tcp connection|rawfe → raw/s1" {
		t.Fatalf("the tcp row shows %q", s)
	}
	u.fill(`#logs-frontend`, "rawfe")
	waitRows("the tcp connection alone", "tcp connection")
	if g := rowsNow(); len(g) != 1 || g[0].Cls != "none" {
		t.Fatalf("the frontend filter shows %+v, want the tcp connection alone", g)
	}
	u.fill(`#logs-frontend`, "")
	u.waitJS(10*time.Second, "every frontend again, live", fmt.Sprintf(`%s.length > 5 && document.getElementById('logs-state').dataset.state === 'live'`, visible))

	// At most 500 rows: the oldest go as new ones come.
	for i := 0; i < 510; i++ {
		get(fmt.Sprintf("/burst-%d", i))
	}
	u.waitJS(10*time.Second, "the last of the burst on top", fmt.Sprintf(`document.querySelector(%q).textContent.includes('GET /burst-509 ')`, rows))
	// The stream loses what it cannot take at once; the page reads the
	// last entries again after a burst: all of them, in order, no hole.
	inOrder := fmt.Sprintf(`(() => {
		const r = [...document.querySelectorAll(%q)].map((tr) => tr.querySelector('td.req').textContent);
		return r.length === 500 && r.every((q, i) => q === 'GET /burst-' + (509 - i) + ' HTTP/1.1');
	})()`, rows)
	testutil.Eventually(t, 5*time.Second, func() bool { return evalJS[bool](u, inOrder) }, func() string {
		// Which of the page and the server lost the order, if either.
		var recs []struct{ Request string }
		u.apiJSON("/api/v1/logs?limit=500", &recs, auth)
		api := make([]string, len(recs))
		for i, r := range recs {
			api[i] = strings.TrimSuffix(strings.TrimPrefix(r.Request, "GET /burst-"), " HTTP/1.1")
		}
		return fmt.Sprintf("the 500 newest in order; the page, newest first: %s\nthe API, oldest first: %s", evalJS[string](u, fmt.Sprintf(`[...document.querySelectorAll(%q)].map((tr) => tr.querySelector('td.req').textContent.replace('GET /burst-', '').replace(' HTTP/1.1', '')).join(',')`, rows)), strings.Join(api, ","))
	})
	if s := u.text(`#logs-shown`); s != "500 entries shown" {
		t.Fatalf("the count says %q", s)
	}
	// The 503 and the abort are no longer among the page's 500 rows; the
	// server still keeps them: the filters find them.
	u.fill(`#logs-class`, "5xx")
	waitRows("the 503 after the burst", "GET /fail?token=REDACTED HTTP/1.1")
	u.shot("logs-5xx-after-burst-1280")
	u.fill(`#logs-class`, "")
	u.run("abnormal only", chromedp.Click(chromedp.CSS(`#logs-abnormal`)))
	waitRows("the abort and the 503 after the burst", "POST /up HTTP/1.1", "GET /fail?token=REDACTED HTTP/1.1")
	u.run("all ends", chromedp.Click(chromedp.CSS(`#logs-abnormal`)))
	u.waitJS(10*time.Second, "the 500 newest again", fmt.Sprintf(`%s.length === 500 && document.getElementById('logs-state').dataset.state === 'live'`, visible))

	// When the server refuses the stream (this token's streams at the
	// cap), the page polls and still shows new entries.
	u.page("overview")
	for i := 0; i < 3; i++ { // /api/v1/events of the page + 3 = 4
		testutil.Eventually(t, 5*time.Second, func() bool {
			req, _ := http.NewRequest("GET", "http://"+in.Admin+"/api/v1/logs?follow=1", nil)
			req.Header.Set("Authorization", "Bearer "+admin)
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			if resp.StatusCode != 200 { // the page's last stream not released yet
				resp.Body.Close()
				return false
			}
			bufio.NewReader(resp.Body).ReadString('\n')
			t.Cleanup(func() { resp.Body.Close() })
			return true
		}, "a stream slot")
	}
	u.page("logs")
	u.waitJS(5*time.Second, "polling", `document.getElementById('logs-state').dataset.state === 'polling'`)
	u.shot("logs-polling-1280")
	get("/polled")
	u.waitJS(10*time.Second, "the polled entry", fmt.Sprintf(`document.querySelector(%q).textContent.includes('/polled')`, rows))
	if n := evalJS[int](u, fmt.Sprintf(`[...document.querySelectorAll(%q)].filter((r) => r.textContent.includes('/polled')).length`, rows)); n != 1 {
		t.Fatalf("the polled entry is listed %d times", n)
	}

	// 375 px: every column inside the viewport, no sideways scroll.
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.waitJS(5*time.Second, "rows", fmt.Sprintf(`document.querySelectorAll(%q).length === 500`, rows))
	evalJS[bool](u, `(document.getElementById('logs-legend').open = true)`)
	u.fitsWidth("logs", `#logs-table td, #logs-filters select, #logs-filters input, #logs-pause, #logs-legend td, #nav a`)
	if w := evalJS[int](u, `window.innerWidth`); w != 375 {
		t.Fatalf("the phone viewport is %d px wide", w)
	}
	u.fullShot("logs-375")
	evalJS[bool](u, `(window.scrollTo(0, 0), true)`)
	u.shot("logs-top-375")
	evalJS[bool](u, `(document.getElementById('logs-legend').open = false)`)
	evalJS[bool](u, `(document.getElementById('logs').scrollIntoView(), true)`)
	u.shot("logs-rows-375")
	u.errs.check(t, "admin")

	// A viewer: no Logs link, and the URL says it may not read the log.
	v := u.newTab(30 * time.Second)
	v.signIn(viewer)
	if evalJS[bool](v, `(() => { const a = document.querySelector('#nav a[data-route="logs"]'); return !!a && a.offsetParent !== null; })()`) {
		t.Fatal("a viewer sees the Logs link")
	}
	evalJS[string](v, `(location.hash = '#/logs')`)
	v.waitJS(5*time.Second, "the refusal", `!!document.querySelector('#page-logs[data-ready="1"] #logs-refused')`)
	v.shot("logs-viewer-1280")
	v.errs.check(t, "viewer")
}

// newTab opens a new tab of u's browser (its own sessionStorage: signed
// out), its actions bounded by timeout, its console watched.
func (u *uiTest) newTab(timeout time.Duration) *uiTest {
	u.t.Helper()
	tab, cancel := chromedp.NewContext(u.ctx)
	u.t.Cleanup(cancel)
	tab, cancelT := context.WithTimeout(tab, timeout)
	u.t.Cleanup(cancelT)
	errs := &pageErrors{}
	errs.watch(tab)
	return &uiTest{t: u.t, ctx: tab, in: u.in, base: u.base, shots: u.shots, errs: errs}
}

// cutProxy forwards connections to target (set before the first one)
// until cut(true), which closes every connection forwarded and refuses
// new ones until cut(false).
type cutProxy struct {
	port   int
	target string
	mu     sync.Mutex
	down   bool
	conns  map[net.Conn]bool
}

func newCutProxy(t *testing.T) *cutProxy {
	p := &cutProxy{conns: map[net.Conn]bool{}}
	o := testutil.ServeOrigin(t, func(c *net.TCPConn) {
		p.mu.Lock()
		if p.down {
			p.mu.Unlock()
			c.Close()
			return
		}
		up, err := net.Dial("tcp", p.target)
		if err != nil {
			p.mu.Unlock()
			c.Close()
			return
		}
		p.conns[c], p.conns[up] = true, true
		p.mu.Unlock()
		go func() { io.Copy(up, c); up.Close() }()
		io.Copy(c, up)
		c.Close()
		p.mu.Lock()
		delete(p.conns, c)
		delete(p.conns, up)
		p.mu.Unlock()
	})
	p.port = o.Port()
	return p
}

func (p *cutProxy) cut(down bool) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = down
	if down {
		for c := range p.conns {
			c.Close()
		}
	}
}
