package main

// Issue 16, the operator's pages: audit (dry runs marked, filters),
// revisions (actor, "restore of #N", old → new values before a restore),
// CPU & IRQs (live rates, network filter, pin with the dry-run plan
// first), focus after each action, 375 px reachability, the header's
// token name and a viewer without the Audit link.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// signIn opens the page in the tab of u and signs in with secret.
func (u *uiTest) signIn(secret string) {
	u.t.Helper()
	u.run("sign in",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base),
		chromedp.WaitVisible(chromedp.CSS(`dialog#login[open] #login-token`)),
		chromedp.SendKeys(chromedp.CSS(`#login-token`), secret),
		chromedp.Click(chromedp.CSS(`#login-submit`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog#login[open]`)),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
}

// focusIn says whether the focused element matches sel.
func (u *uiTest) focusIn(sel string) bool {
	u.t.Helper()
	return evalJS[bool](u, fmt.Sprintf(`(() => { const a = document.activeElement; return !!a && a.matches(%q); })()`, sel))
}

// fitsWidth fails unless every element matching sel lies inside the
// viewport's width and the document does not scroll sideways.
func (u *uiTest) fitsWidth(what, sel string) {
	u.t.Helper()
	got := evalJS[string](u, fmt.Sprintf(`(() => {
		const w = window.innerWidth;
		if (document.documentElement.scrollWidth > w) return 'the document is ' + document.documentElement.scrollWidth + ' px wide';
		const els = [...document.querySelectorAll(%q)];
		if (!els.length) return 'nothing matches';
		for (const e of els) {
			const r = e.getBoundingClientRect();
			if (r.width > 0 && (r.right > w + 0.5 || r.left < -0.5)) return (e.id || e.tagName) + ' "' + e.textContent.slice(0, 40) + '" spans ' + r.left + '..' + r.right;
		}
		return '';
	})()`, sel))
	if got != "" {
		u.shot("ops-overflow-" + what)
		u.t.Fatalf("%s at %d px: %s", what, 375, got)
	}
}

func TestUIOperatorPages(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	dir := t.TempDir()
	admin := newToken(t, dir, "admin", "ops-alice")
	viewer := newToken(t, dir, "viewer", "watcher")
	in := startSpliced(t, dir)
	auth := "Authorization: Bearer " + admin

	// Generations 1 and 2 by ops-alice, a dry run, a refused write.
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`, auth)
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub","mode":"tcp","default_backend":"web","binds":[{"name":"b1","address":"127.0.0.1","port":%d}]}`, port), auth)
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1?dry_run=true", `{"weight":42}`, auth)
	in.MustDo(422, "PATCH", "/api/v1/backends/web/servers/s1", `{"port":0}`, auth)

	u := newUITest(t, in)
	u.shotsTo()
	u.signIn(admin)
	// The header names the token and its role.
	u.waitJS(5*time.Second, "the header to show the token name", `document.getElementById('who').textContent === 'ops-alice · admin'`)

	// Audit: the dry run is hidden by default, and marked when shown.
	u.page("audit")
	u.waitJS(5*time.Second, "the audit table", `!!document.querySelector('#audit-table > tbody > tr')`)
	if n := evalJS[int](u, `document.querySelectorAll('#audit-table > tbody > tr').length`); n != 3 {
		u.shot("ops-failure")
		t.Fatalf("%d audit rows, want 3 (the dry run hidden): %s", n, u.text(`#audit-table tbody`))
	}
	if n := evalJS[int](u, `document.querySelectorAll('#audit-table > tbody > tr[data-dry="1"]').length`); n != 0 {
		t.Fatalf("%d dry runs listed by default", n)
	}
	if s := u.text(`#audit-shown`); !strings.Contains(s, "dry runs hidden") {
		t.Fatalf("the filter line says %q, want the dry runs said hidden", s)
	}
	u.run("show dry runs", chromedp.Click(chromedp.CSS(`#audit-dry`)))
	u.waitJS(5*time.Second, "the dry run marked", `(() => { const r = document.querySelector('#audit-table > tbody > tr.dry[data-dry="1"]'); return !!r && r.textContent.includes('dry run') && r.textContent.includes('would change'); })()`)
	u.shot("ops-audit-1280")
	u.fill(`#audit-result`, "refused")
	u.waitJS(5*time.Second, "only the refused write", `(() => { const r = [...document.querySelectorAll('#audit-table > tbody > tr')]; return r.length === 1 && r[0].textContent.includes('422'); })()`)
	u.fill(`#audit-result`, "")
	u.fill(`#audit-object`, "frontend")
	u.waitJS(5*time.Second, "only the frontend's creation", `(() => { const r = [...document.querySelectorAll('#audit-table > tbody > tr')]; return r.length === 1 && r[0].textContent.includes('/api/v1/frontends'); })()`)
	u.fill(`#audit-object`, "")
	u.fill(`#audit-actor`, "ops-alice")
	// The actor list offers the actors read (the value took).
	if v := evalJS[string](u, `document.getElementById('audit-actor').value`); v != "ops-alice" {
		t.Fatalf("the actor filter is %q after choosing ops-alice: options %s", v, evalJS[string](u, `[...document.querySelectorAll('#audit-actor option')].map((o) => o.value).join(',')`))
	}
	u.waitJS(5*time.Second, "ops-alice's four writes", `document.querySelectorAll('#audit-table > tbody > tr').length === 4`)

	// Revisions: the actor; a restore shows old → new values; Escape gives
	// the focus back to the Restore button, a restore to the new row.
	u.page("revisions")
	if s := u.text(`#revisions tr[data-generation="1"] td.actor`); s != "ops-alice" {
		t.Fatalf("revision 1 made by %q, want ops-alice", s)
	}
	restore1 := `button[data-action="restore"][data-generation="1"]`
	u.run("ask to restore #1", chromedp.Focus(chromedp.CSS(restore1)), chromedp.Click(chromedp.CSS(restore1)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] #restore-diff`)))
	// Restoring #1 drops the frontend: now it exists, after it does not.
	if s := u.text(`dialog[open] #restore-diff`); !strings.Contains(s, "frontends") || !strings.Contains(s, "after restore") {
		t.Fatalf("the restore dialog shows %q, want the frontend's removal with now/after values", s)
	}
	u.shot("ops-restore-confirm-1280")
	u.run("cancel with Escape", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	if !u.focusIn(restore1) {
		t.Fatalf("after the dialog closed the focus is on %q, want the Restore button", evalJS[string](u, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	u.run("restore #1", chromedp.Click(chromedp.CSS(restore1)), chromedp.WaitVisible(chromedp.CSS(`dialog[open] [data-confirm="yes"]`)),
		chromedp.Click(chromedp.CSS(`dialog[open] [data-confirm="yes"]`)))
	u.waitJS(10*time.Second, "generation 3 marked as the restore of #1", `(() => { const r = document.querySelector('#revisions tbody tr:first-child'); return !!r && r.dataset.generation === '3' && r.textContent.includes('restore of #1') && r.textContent.includes('ops-alice'); })()`)
	u.waitJS(5*time.Second, "the focus on the new current row", `!!document.activeElement && !!document.activeElement.closest('#revisions tbody tr:first-child')`)
	u.shot("ops-revisions-1280")

	// A quick action redraws the page: the focus goes to the same control
	// of the new page (app.js refresh), here the server's weight button.
	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "5")
	setW := `button[data-action="weight"][data-server="web/s1"]`
	u.run("set the weight", chromedp.Click(chromedp.CSS(setW)))
	testutil.Eventually(t, 5*time.Second, func() bool {
		var s struct {
			Weight int `json:"weight"`
		}
		u.apiJSON("/api/v1/backends/web/servers/s1", &s, auth)
		return s.Weight == 5
	}, "the weight to be 5")
	u.waitJS(5*time.Second, "the focus on the new page's weight button", fmt.Sprintf(`(() => { const a = document.activeElement; return !!a && a.matches(%q) && a.closest('#page-backends[data-ready="1"]') !== null; })()`, setW))

	// CPU & IRQs: the rates come from two reads and keep refreshing.
	u.page("cpu")
	u.waitJS(10*time.Second, "three reads of the IRQs", `Number(document.getElementById('page-cpu').dataset.reads || 0) >= 3`)
	rates := evalJS[string](u, `[...document.querySelectorAll('[data-irq-rate]')].map((e) => e.textContent).join(' ')`)
	if rates == "" || strings.Contains(rates, "…") || !strings.Contains(rates, "/s") {
		t.Fatalf("IRQ rates %q, want a rate per IRQ", rates)
	}
	if n := evalJS[int](u, `[...document.querySelectorAll('[data-cpu-rate]')].filter((e) => /^[0-9.,]+$/.test(e.textContent)).length`); n == 0 {
		t.Fatal("no CPU shows an interrupt rate")
	}
	// The network filter shows the IRQs whose nic is known, only.
	nics := evalJS[int](u, `document.querySelectorAll('#irq-table tr[data-nic]:not([data-nic=""])').length`)
	u.run("network IRQs only", chromedp.Click(chromedp.CSS(`#irq-nic-only`)))
	if !evalJS[bool](u, `document.getElementById('irq-nic-only').checked`) {
		u.run("network IRQs only", chromedp.Click(chromedp.CSS(`#irq-nic-only`)))
	}
	visible := evalJS[int](u, `[...document.querySelectorAll('#irq-table tbody tr')].filter((r) => !r.hidden).length`)
	if visible != nics || (nics == 0 && !evalJS[bool](u, `!document.getElementById('irq-no-nic').hidden`)) {
		t.Fatalf("network filter: %d rows shown, %d IRQs with a nic", visible, nics)
	}
	// Pin loop 0 to CPU 0: the plan of a dry run first, then apply.
	pin0 := `button[data-action="pin-loop"][data-thread="0"]`
	u.run("open the pin dialog", chromedp.Click(chromedp.CSS(pin0)), chromedp.WaitVisible(chromedp.CSS(`dialog[open] #pin-value`)))
	u.fill(`#pin-value`, "0")
	u.run("show the plan", chromedp.Click(chromedp.CSS(`#pin-preview`)), chromedp.WaitVisible(chromedp.CSS(`#pin-plan .plan`)))
	var cm struct {
		Mode string `json:"mode"`
	}
	u.apiJSON("/api/v1/cpu-map", &cm, auth)
	if cm.Mode == "manual" {
		t.Fatal("the plan's dry run changed the CPU map")
	}
	u.shot("ops-cpu-pin-1280")
	u.run("apply the pin", chromedp.Click(chromedp.CSS(`#pin-apply`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	testutil.Eventually(t, 5*time.Second, func() bool {
		u.apiJSON("/api/v1/cpu-map", &cm, auth)
		return cm.Mode == "manual"
	}, "the CPU map to be manual")
	u.waitJS(5*time.Second, "the focus back on the loop's Pin button", fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, pin0))
	u.shot("ops-cpu-1280")
	// Another write (seen on the events stream) redraws the page: the
	// focus stays on the control that had it.
	evalJS[bool](u, `(() => { window.oldCPUPage = document.getElementById('page-cpu'); return true; })()`)
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":43}`, auth)
	u.waitJS(5*time.Second, "the page redrawn for the other write", `(() => { const p = document.getElementById('page-cpu'); return !!p && p !== window.oldCPUPage && p.dataset.ready === '1'; })()`)
	if !u.focusIn(pin0) {
		t.Fatalf("after a redraw for another write the focus is on %q, want the loop's Pin button", evalJS[string](u, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	// The map's mode: auto, again with the plan first.
	u.run("open the mode dialog", chromedp.Click(chromedp.CSS(`#cpu-mode`)), chromedp.WaitVisible(chromedp.CSS(`dialog[open] select#pin-value`)))
	u.fill(`#pin-value`, "auto")
	u.run("show the mode's plan", chromedp.Click(chromedp.CSS(`#pin-preview`)), chromedp.WaitVisible(chromedp.CSS(`#pin-plan .plan`)))
	u.run("apply the mode", chromedp.Click(chromedp.CSS(`#pin-apply`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	testutil.Eventually(t, 5*time.Second, func() bool {
		u.apiJSON("/api/v1/cpu-map", &cm, auth)
		return cm.Mode == "auto"
	}, "the CPU map to be auto")
	u.waitJS(5*time.Second, "the focus back on the mode button", `!!document.activeElement && document.activeElement.id === 'cpu-mode'`)

	// 375 px: every action and column inside the viewport, no sideways scroll.
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.page("audit")
	u.run("show dry runs", chromedp.Click(chromedp.CSS(`#audit-dry`)))
	u.waitJS(5*time.Second, "the audit rows", `document.querySelectorAll('#audit-table > tbody > tr').length >= 5`)
	// The changes unfolded too: their before/after tables fit as well.
	evalJS[bool](u, `(() => { document.querySelectorAll('#audit-table details').forEach((d) => { d.open = true; }); return true; })()`)
	u.fitsWidth("audit", `#audit-table td, #audit-filters select, #audit-filters input, #nav a`)
	u.fullShot("ops-audit-375")
	evalJS[bool](u, `(() => { const d = [...document.querySelectorAll('#audit-table details.long')].pop(); if (d) d.scrollIntoView(); return true; })()`)
	u.shot("ops-audit-diff-375")
	u.page("revisions")
	u.fitsWidth("revisions", `#revisions td, button[data-action="restore"], #diff-out td`)
	u.fullShot("ops-revisions-375")
	u.run("ask to restore #2 at 375 px", chromedp.Click(chromedp.CSS(`button[data-action="restore"][data-generation="2"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] #restore-diff`)))
	u.fitsWidth("restore dialog", `dialog[open] #restore-diff td, dialog[open] [data-confirm]`)
	u.shot("ops-restore-confirm-375")
	u.run("cancel", chromedp.KeyEvent(kb.Escape), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.page("cpu")
	u.fitsWidth("cpu", `#irq-table td, #loops-cpus td, button[data-action^="pin"]`)
	u.fullShot("ops-cpu-375")
	u.page("overview")
	u.shot("ops-overview-375")
	// Time labels 20 px apart are thinned so that none overlaps; 120 px
	// apart all are drawn.
	for _, gap := range []int{20, 120} {
		js := fmt.Sprintf(`import('./js/chart.js').then((m) => {
			const gap = %d, t0 = 1764547200, dpr = window.devicePixelRatio || 1;
			const splits = [...Array(12).keys()].map((i) => t0 + 5 * i);
			const c = document.createElement('canvas').getContext('2d');
			const u = { valToPos: (v) => (v - t0) / 5 * gap, ctx: c, axes: [{ font: [(12 * dpr) + 'px system-ui'] }] };
			const l = m.timeLabels(u, splits, 0, 50, 5);
			c.font = (12 * dpr) + 'px system-ui';
			const shown = l.map((s, i) => [s, i]).filter(([s]) => s !== '');
			for (let k = 1; k < shown.length; k++) {
				const [a, i] = shown[k - 1]; const j = shown[k][1];
				if ((j - i) * gap < c.measureText(a).width / dpr) return 'labels ' + i + ' and ' + j + ' overlap: ' + l.join('|');
			}
			if (gap >= 120 && shown.length !== splits.length) return 'labels dropped with room for all: ' + l.join('|');
			if (shown.length < 2) return 'fewer than two labels: ' + l.join('|');
			return '';
		})`, gap)
		ctx, cancel := context.WithTimeout(u.ctx, 10*time.Second)
		got, err := chromedp.Run(ctx, chromedp.Evaluate[string](js, chromedp.EvalAwaitPromise))
		cancel()
		if err != nil || got != "" {
			t.Fatalf("chart time labels %d px apart: %v %s", gap, err, got)
		}
	}

	// Relative times are rewritten while the page stays open.
	u.page("revisions")
	first := u.text(`#revisions [data-ago]`)
	u.waitJS(20*time.Second, "the relative time to update", fmt.Sprintf(`document.querySelector('#revisions [data-ago]').textContent !== %q`, first))
	u.errs.check(t, "admin")

	// A viewer: its token name in the header, no Audit link.
	tab, cancelTab := chromedp.NewContext(u.ctx) // a new tab: its own sessionStorage
	defer cancelTab()
	tab, cancelTab2 := context.WithTimeout(tab, 30*time.Second)
	defer cancelTab2()
	errs2 := &pageErrors{}
	errs2.watch(tab)
	v := &uiTest{t: t, ctx: tab, in: in, base: u.base, shots: u.shots, errs: errs2}
	v.signIn(viewer)
	v.waitJS(5*time.Second, "the header to name the viewer", `document.getElementById('who').textContent === 'watcher · viewer'`)
	if evalJS[bool](v, `(() => { const a = document.querySelector('#nav a[data-route="audit"]'); return !!a && a.offsetParent !== null; })()`) {
		t.Fatal("a viewer sees the Audit link")
	}
	if !evalJS[bool](v, `document.querySelector('#nav a[data-route="revisions"]').offsetParent !== null`) {
		t.Fatal("a viewer lost the Revisions link")
	}
	v.page("cpu")
	if n := evalJS[int](v, `document.querySelectorAll('[data-action^="pin"]').length`); n != 0 {
		t.Fatalf("a viewer sees %d pin buttons", n)
	}
	v.shot("ops-viewer-1280")
	errs2.check(t, "viewer")
}
