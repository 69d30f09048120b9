package main

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// shotsTo makes u write its screenshots to $SPLICED_UI_SHOTS when set.
func (u *uiTest) shotsTo() {
	if d := os.Getenv("SPLICED_UI_SHOTS"); d != "" {
		os.MkdirAll(d, 0o755)
		u.shots = d
	}
}

// fullShot writes a screenshot of the whole page (not only the viewport).
func (u *uiTest) fullShot(name string) {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		u.t.Logf("screenshot %s: %v", name, err)
		return
	}
	if err := os.WriteFile(filepath.Join(u.shots, name+".png"), png, 0o644); err != nil {
		u.t.Fatal(err)
	}
}

// shotBoth takes a screenshot of the whole page at 1280 and at 375 px
// wide (back to 1280 after).
func (u *uiTest) shotBoth(name string) {
	u.t.Helper()
	u.fullShot(name + "-1280")
	u.run("narrow viewport", chromedp.EmulateViewport(375, 800))
	u.fullShot(name + "-375")
	u.run("wide viewport", chromedp.EmulateViewport(1280, 800))
}

// sentJSON decodes the body of the last request the page sent (see
// recordSent) into v.
func (u *uiTest) sentJSON(v any) {
	u.t.Helper()
	body := u.lastSent()
	if err := json.Unmarshal([]byte(body), v); err != nil {
		u.t.Fatalf("sent %q: %v", body, err)
	}
}

// TestUIFirstVisitAndForms: an empty install shows the guide; its links
// open the backend form, then the frontend form, which takes the mode of
// the backend chosen, binds on 127.0.0.1 (the admin page is on loopback)
// and sends the http options, the access log and the bind threads; the
// backend form sends the health check's method and expected statuses.
func TestUIFirstVisitAndForms(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	u := newUITest(t, in)
	u.shotsTo()
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"] #first-visit`)))
	u.shotBoth("first-visit")

	// Step 1: the guide's link opens the new backend form.
	u.run("guide: create a backend",
		chromedp.Click(chromedp.CSS(`#guide-backend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open][aria-label="New backend"] form`)))
	u.recordSent()
	u.fill(`dialog[open] [data-ptr="/name"] input`, "web")
	u.fill(`dialog[open] [data-ptr="/mode"] select`, "http")
	u.fill(`dialog[open] [data-ptr="/servers/0/address"] input`, "127.0.0.1")
	u.fill(`dialog[open] [data-ptr="/servers/0/port"] input`, strconv.Itoa(testutil.FreePort(t)))
	u.fill(`dialog[open] fieldset[data-ptr="/health_check"] select`, "http")
	u.fill(`dialog[open] [data-ptr="/health_check/method"] input`, "HEAD")
	u.fill(`dialog[open] [data-ptr="/health_check/path"] input`, "/ready")
	u.fill(`dialog[open] [data-ptr="/health_check/host"] input`, "app.example.com")
	u.fill(`dialog[open] [data-ptr="/health_check/status_min"] input`, "200")
	u.fill(`dialog[open] [data-ptr="/health_check/status_max"] input`, "204")
	u.shot("backend-form-check-1280")
	u.run("create backend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`tr[data-server="web/s1"]`)))
	type check struct {
		Type      string `json:"type"`
		Method    string `json:"method"`
		Path      string `json:"path"`
		Host      string `json:"host"`
		StatusMin int    `json:"status_min"`
		StatusMax int    `json:"status_max"`
	}
	var sentBe struct {
		HealthCheck *check `json:"health_check"`
	}
	u.sentJSON(&sentBe)
	want := check{Type: "http", Method: "HEAD", Path: "/ready", Host: "app.example.com", StatusMin: 200, StatusMax: 204}
	if sentBe.HealthCheck == nil || *sentBe.HealthCheck != want {
		t.Fatalf("the backend form sent health_check %+v, want %+v", sentBe.HealthCheck, want)
	}
	var be struct {
		HealthCheck check `json:"health_check"`
	}
	u.apiJSON("/api/v1/backends/web", &be)
	if be.HealthCheck != want {
		t.Fatalf("stored health_check %+v, want %+v", be.HealthCheck, want)
	}
	// The backend's panel says how its servers are checked.
	if s := u.text(`section[data-backend="web"] .check-settings`); !strings.Contains(s, "HEAD /ready") || !strings.Contains(s, "Host app.example.com") || !strings.Contains(s, "expects 200–204") {
		t.Fatalf("check settings shown = %q", s)
	}

	// Step 2: back on the overview, step 1 is done; the second link opens
	// the new frontend form.
	u.page("overview")
	u.waitJS(5*time.Second, "step 1 marked done", `!!document.querySelector('#first-visit li.done #guide-backend')`)
	u.run("guide: create a frontend",
		chromedp.Click(chromedp.CSS(`#guide-frontend`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open][aria-label="New frontend"] form`)))
	if m := evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/mode"] select').value`); m != "http" {
		t.Fatalf("mode preselected = %q, want http (the mode of backend web)", m)
	}
	if a := evalJS[string](u, `document.querySelector('dialog[open] [data-ptr="/binds/0/address"] input').value`); a != "127.0.0.1" {
		t.Fatalf("bind address default = %q, want 127.0.0.1 on a loopback admin page", a)
	}
	u.recordSent()
	port := testutil.FreePort(t)
	u.fill(`dialog[open] [data-ptr="/name"] input`, "pub")
	u.fill(`dialog[open] [data-ptr="/binds/0/port"] input`, strconv.Itoa(port))
	u.fill(`dialog[open] [data-ptr="/binds/0/threads"] input`, "0")
	// X-Forwarded-For is on by default: its box is ticked already.
	if !evalJS[bool](u, `document.querySelector('dialog[open] [data-ptr="/http/x_forwarded_for"] input').checked`) {
		t.Fatal("New frontend shows X-Forwarded-For off; the API's default is on")
	}
	for _, f := range []string{"/http/via", "/access_log"} {
		u.run("check "+f, chromedp.Click(chromedp.CSS(`dialog[open] [data-ptr="`+f+`"] input[type="checkbox"]`)))
	}
	u.fill(`dialog[open] [data-ptr="/http/max_body_size"] input`, "1048576")
	// HTTP versions: both ticked (the API's default); HTTP/2 unticked here,
	// and one HTTP/2 setting chosen (the others left to their defaults).
	if !evalJS[bool](u, `[...document.querySelectorAll('dialog[open] [data-ptr="/http/versions"] input[type="checkbox"]')].map((b) => b.dataset.version + ':' + b.checked).join() === '1.1:true,2:true'`) {
		t.Fatal("New frontend does not show HTTP/1.1 and HTTP/2 ticked")
	}
	u.run("untick HTTP/2", chromedp.Click(chromedp.CSS(`dialog[open] [data-ptr="/http/versions"] input[data-version="2"]`)))
	u.fill(`dialog[open] [data-ptr="/http/h2/max_concurrent_streams"] input`, "50")
	u.shot("frontend-form-http-1280")
	u.run("create frontend",
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`section[data-frontend="pub"] tr[data-bind="pub/b1"]`)))
	type h2Settings struct {
		Streams int `json:"max_concurrent_streams"`
		Window  int `json:"initial_window_size"`
		Frame   int `json:"max_frame_size"`
		List    int `json:"max_header_list_size"`
	}
	type httpOpts struct {
		XFF      bool       `json:"x_forwarded_for"`
		XFP      bool       `json:"x_forwarded_proto"`
		Via      bool       `json:"via"`
		Body     int64      `json:"max_body_size"`
		Versions []string   `json:"versions"`
		H2       h2Settings `json:"h2"`
	}
	type fe struct {
		Mode      string    `json:"mode"`
		AccessLog bool      `json:"access_log"`
		HTTP      *httpOpts `json:"http"`
		Binds     []struct {
			Address string `json:"address"`
			Port    int    `json:"port"`
			Threads []int  `json:"threads"`
		} `json:"binds"`
	}
	for _, from := range []string{"sent", "stored"} {
		var got fe
		// Sent: only the h2 member chosen; stored: the others defaulted.
		wantH2 := h2Settings{Streams: 50}
		if from == "sent" {
			u.sentJSON(&got)
		} else {
			u.apiJSON("/api/v1/frontends/pub", &got)
			wantH2 = h2Settings{50, 65535, 16384, 16384}
		}
		if got.HTTP != nil && (strings.Join(got.HTTP.Versions, ",") != "1.1" || got.HTTP.H2 != wantH2) {
			t.Fatalf("frontend %s: versions %q, h2 %+v; want [1.1], %+v", from, got.HTTP.Versions, got.HTTP.H2, wantH2)
		}
		if got.Mode != "http" || !got.AccessLog || got.HTTP == nil || !got.HTTP.XFF || got.HTTP.XFP || !got.HTTP.Via || got.HTTP.Body != 1048576 ||
			len(got.Binds) != 1 || got.Binds[0].Address != "127.0.0.1" || got.Binds[0].Port != port ||
			len(got.Binds[0].Threads) != 1 || got.Binds[0].Threads[0] != 0 {
			t.Fatalf("frontend %s: %+v (http %+v)", from, got, got.HTTP)
		}
	}
	// The edit form shows them back.
	u.run("open edit frontend",
		chromedp.Click(chromedp.CSS(`section[data-frontend="pub"] button[data-action="edit-frontend"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-ptr="/http/via"] input`)))
	if !evalJS[bool](u, `(() => { const q = (p) => document.querySelector('dialog[open] [data-ptr="' + p + '"] input');
		return q('/http/via').checked && q('/http/x_forwarded_for').checked && !q('/http/x_forwarded_proto').checked &&
			q('/access_log').checked && q('/http/max_body_size').value === '1048576' && q('/binds/0/threads').value === '0'; })()`) {
		t.Fatal("the edit form does not show the frontend's options back")
	}
	if !evalJS[bool](u, `(() => { const q = (p) => document.querySelector('dialog[open] [data-ptr="' + p + '"] input');
		const v = (x) => document.querySelector('dialog[open] [data-ptr="/http/versions"] input[data-version="' + x + '"]').checked;
		return v('1.1') && !v('2') && q('/http/h2/max_concurrent_streams').value === '50' && q('/http/h2/initial_window_size').value === '65535'; })()`) {
		t.Fatal("the edit form does not show the HTTP versions and HTTP/2 settings back")
	}
	// No version at all, and a window below 1024: the API's refusals land
	// on their fields.
	u.run("untick HTTP/1.1", chromedp.Click(chromedp.CSS(`dialog[open] [data-ptr="/http/versions"] input[data-version="1.1"]`)))
	u.fill(`dialog[open] [data-ptr="/http/h2/initial_window_size"] input`, "100")
	u.run("save without a version", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="submit"]`)))
	u.waitJS(5*time.Second, "errors on /http/versions and /http/h2/initial_window_size",
		`(() => { const e = (p) => (document.querySelector('dialog[open] [data-ptr="' + p + '"] > .err') || {}).textContent || '';
		return e('/http/versions') !== '' && e('/http/h2/initial_window_size') !== ''; })()`)
	u.run("close edit frontend", chromedp.Click(chromedp.CSS(`dialog[open] button[data-action="cancel"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.page("overview")
	u.waitJS(5*time.Second, "the guide gone once a frontend exists", `!document.querySelector('#first-visit')`)
	u.errs.check(t, "first visit and forms")
}

// TestUIErrorsHealthAndSafety: during a 503 period the overview shows the
// 5xx (per frontend and backend, the total, the chart), a backend without
// a usable server in red with the down server's check reason; a server
// without check says "no check"; draining or putting in maintenance the
// last usable server asks first (cancel keeps it ready); an nbthread
// change asks first.
func TestUIErrorsHealthAndSafety(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	origin := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusServiceUnavailable)
		io.WriteString(w, "busy\n")
	}))
	t.Cleanup(origin.Close)
	oport, _ := strconv.Atoi(origin.URL[strings.LastIndex(origin.URL, ":")+1:])
	// web: no check, its origin answers 503. chk: checked, down (L7STS 503).
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"web","mode":"http","servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, oport))
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"chk","mode":"http","health_check":{"type":"http","interval_ms":200,"timeout_ms":200,"rise":1,"fall":1},
		"servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, oport))
	// dead: its only server refuses connections (a port nothing listens
	// on), no check: connect errors and retries, then 503.
	in.MustDo(201, "POST", "/api/v1/backends", fmt.Sprintf(`{"name":"dead","mode":"http","retries":2,"servers":[{"name":"s1","address":"127.0.0.1","port":%d}]}`, testutil.FreePort(t)))
	p1, p2, p3 := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub3","mode":"http","default_backend":"dead","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, p3))
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub","mode":"http","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, p1))
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub2","mode":"http","default_backend":"chk","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, p2))
	testutil.Eventually(t, 10*time.Second, func() bool {
		var st struct {
			Backends []struct {
				Name  string `json:"name"`
				State string `json:"state"`
			} `json:"backends"`
		}
		in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &st)
		for _, b := range st.Backends {
			if b.Name == "chk" {
				return b.State == "down"
			}
		}
		return false
	}, "backend chk down by its check")

	u := newUITest(t, in)
	u.shotsTo()
	u.run("load overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	// The 503 period: requests while the overview is open, bounded.
	c := &http.Client{Timeout: 2 * time.Second}
	get := func(port int) int {
		resp, err := c.Get(fmt.Sprintf("http://127.0.0.1:%d/", port))
		if err != nil {
			return 0
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	deadline := time.Now().Add(20 * time.Second)
	for i := 0; i < 60 && time.Now().Before(deadline); i++ {
		if s := get(p1); s != 503 {
			t.Fatalf("pub answered %d, want the origin's 503", s)
		}
		if s := get(p2); s != 503 {
			t.Fatalf("pub2 answered %d, want 503 (no server)", s)
		}
		if i < 5 {
			if s := get(p3); s != 503 {
				t.Fatalf("pub3 answered %d, want 503 (connect refused)", s)
			}
		}
		if i%10 == 9 {
			time.Sleep(300 * time.Millisecond) // spread over a few stats ticks, for the chart
		}
	}
	num := func(sel string) int64 {
		s := strings.TrimSpace(strings.ReplaceAll(u.text(sel), ",", ""))
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return -1
		}
		return n
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		return num(`#fe-stats [data-stat="fe/pub/s5xx"]`) == 60 && num(`#be-stats [data-stat="be/web/s5xx"]`) == 60 &&
			num(`#be-stats [data-stat="be/chk/noServer"]`) == 60 && num(`#total-5xx`) == 125
	}, "the 503s in the overview: pub 60, web 60, chk 60 without server, 125 in all (pub3's 5)")
	// dead: 5 requests, each tried 3 times (2 retries), all refused.
	testutil.Eventually(t, 10*time.Second, func() bool {
		return num(`#be-stats [data-stat="be/dead/connectErrors"]`) == 15 && num(`#be-stats [data-stat="be/dead/retries"]`) == 10
	}, "dead's connect errors (15) and retries (10) in the overview")
	if !evalJS[bool](u, `document.querySelector('#fe-stats [data-stat="fe/pub/s5xx"]').classList.contains('bad-v')`) {
		t.Fatal("the 5xx count is not shown as an error")
	}
	u.waitJS(5*time.Second, "the 5xx chart drawn", `!!document.querySelector('#chart-5xx .uplot')`)
	// chk has no usable server: red, named, its server's reason listed.
	u.waitJS(5*time.Second, "chk shown down", `document.querySelector('#be-stats tr[data-backend="chk"]').classList.contains('down') &&
		document.querySelector('#be-stats tr[data-backend="chk"] .be-state').textContent.includes('DOWN')`)
	if s := u.text(`#backends-down`); !strings.Contains(s, "chk") || !strings.Contains(s, "503") {
		t.Fatalf("backends down notice = %q", s)
	}
	if s := u.text(`#down-list tr[data-server="chk/s1"]`); !strings.Contains(s, "L7STS 503") || !strings.Contains(s, "every 200 ms") {
		t.Fatalf("down list row of chk/s1 = %q, want its check's result and settings", s)
	}
	if evalJS[bool](u, `document.querySelector('#be-stats tr[data-backend="web"]').classList.contains('down')`) {
		t.Fatal("web (a server without check, up) shown down")
	}
	u.shotBoth("overview-503")

	// Backends page: web/s1 has no check, chk/s1 says why it is down.
	u.page("backends")
	u.waitJS(5*time.Second, "no check and the reason", `document.querySelector('tr[data-server="web/s1"]').textContent.includes('no check') &&
		(document.querySelector('tr[data-server="chk/s1"] .check-why') || {textContent: ''}).textContent.includes('L7STS 503')`)
	u.waitJS(5*time.Second, "web/s1's requests and 5xx", `document.querySelector('tr[data-server="web/s1"] [data-stat="srv/web/s1/requests"]').textContent === '60' &&
		document.querySelector('tr[data-server="web/s1"] [data-stat="srv/web/s1/s5xx"]').textContent === '60'`)
	u.waitJS(5*time.Second, "chk's panel red", `document.querySelector('section[data-backend="chk"]').classList.contains('down')`)
	u.shotBoth("backends-503")

	// web/s1 is web's last usable server: maintenance asks; cancel keeps it.
	adminState := func() string {
		var s struct {
			AdminState string `json:"admin_state"`
		}
		u.apiJSON("/api/v1/backends/web/servers/s1", &s)
		return s.AdminState
	}
	u.run("maint web/s1",
		chromedp.Click(chromedp.CSS(`button[data-action="maint"][data-server="web/s1"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)))
	if s := u.text(`dialog[open]`); !strings.Contains(s, "last usable server of web") || !strings.Contains(s, "503") {
		t.Fatalf("confirmation = %q", s)
	}
	u.shot("confirm-last-server-1280")
	u.run("cancel", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	if s := adminState(); s != "ready" {
		t.Fatalf("after cancel web/s1 is %q, want ready", s)
	}
	u.waitJS(5*time.Second, "focus back on the Maint button", `document.activeElement && document.activeElement.matches('button[data-action="maint"][data-server="web/s1"]')`)
	u.run("drain web/s1",
		chromedp.Click(chromedp.CSS(`button[data-action="drain"][data-server="web/s1"]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="yes"]`)),
		chromedp.WaitVisible(chromedp.CSS(`button[data-action="drain"][data-server="web/s1"][aria-pressed="true"]`)))
	if s := adminState(); s != "drain" {
		t.Fatalf("after confirm web/s1 is %q, want drain", s)
	}

	// Frontends page: the 5xx of pub.
	u.page("frontends")
	u.waitJS(5*time.Second, "pub's 5xx", `(document.querySelector('section[data-frontend="pub"] [data-stat="fe/pub/s5xx"]') || {}).textContent === '60'`)
	u.shotBoth("frontends-503")

	// nbthread asks first; cancel changes nothing.
	var tun struct {
		Nbthread int `json:"nbthread"`
	}
	u.apiJSON("/api/v1/tuning", &tun)
	u.page("tuning")
	u.fill(`#tuning-form [data-ptr="/nbthread"] input`, strconv.Itoa(tun.Nbthread+1))
	u.run("apply nbthread",
		chromedp.Click(chromedp.CSS(`#tuning-form button[data-action="submit"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)))
	if s := u.text(`dialog[open]`); !strings.Contains(s, "restarts loops") {
		t.Fatalf("nbthread confirmation = %q", s)
	}
	u.run("cancel", chromedp.Click(chromedp.CSS(`dialog[open] button[data-confirm="no"]`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	var after struct {
		Nbthread int `json:"nbthread"`
	}
	u.apiJSON("/api/v1/tuning", &after)
	if after.Nbthread != tun.Nbthread {
		t.Fatalf("nbthread %d after cancel, was %d", after.Nbthread, tun.Nbthread)
	}
	u.errs.check(t, "errors, health and safety")
}
