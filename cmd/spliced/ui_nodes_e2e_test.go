package main

// Issue 17 in the browser: the Nodes page (the store, this node, every
// live node with its generation and state, read again every few seconds),
// which nodes applied a write in its toast, and on a single node nothing
// more than before.

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// uiClusterReads counts the page's reads of /api/v1/cluster so far.
func (u *uiTest) uiClusterReads() int {
	u.t.Helper()
	return evalJS[int](u, `performance.getEntriesByType('resource').filter((e) => /\/api\/v1\/cluster$/.test(e.name)).length`)
}

// TestUINodesPage: on a single node (the state directory) the Nodes page
// lists this node, says the store is the local directory, reads the list
// again every few seconds without redrawing it (the focus stays), fits
// 375 px; a write's toast says nothing of nodes; the answer of a cluster
// write (headers only, as a 204, or with the body's refusals) reads
// "applied on …", "refused on …: error", "pending on …".
func TestUINodesPage(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`)
	var cv clusterView
	in.MustDo(200, "GET", "/api/v1/cluster", nil).JSON(t, &cv)
	if cv.Store.Kind != "dir" || len(cv.Nodes) != 1 || cv.Nodes[0].Name != cv.Self.Name {
		t.Fatalf("GET /api/v1/cluster on a single node: %+v", cv)
	}
	name := cv.Self.Name

	u := newUITest(t, in)
	u.shotsTo()
	u.run("load the overview",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base+"#/overview"),
		chromedp.WaitVisible(chromedp.CSS(`#page-overview[data-ready="1"]`)))
	// The header names no node on a single node.
	if evalJS[bool](u, `!document.getElementById('node').hidden`) {
		t.Fatalf("the header names node %q on a single node", u.text(`#node`))
	}

	// By keyboard: the Nodes link, Enter; the focus goes to the page.
	u.run("open Nodes with the keyboard",
		chromedp.Focus(chromedp.CSS(`#nav a[data-route="nodes"]`)),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS(`#page-nodes[data-ready="1"]`)))
	u.waitJS(5*time.Second, "the focus on the page", `document.activeElement === document.getElementById('main')`)
	if s := u.text(`#self-name`); s != name {
		t.Fatalf("this node is %q on the page, want %q", s, name)
	}
	row := fmt.Sprintf(`#nodes-table tr[data-node=%q]`, name)
	gen := cv.Generation
	if s := u.text(row); !strings.Contains(s, "in sync") || !strings.Contains(s, fmt.Sprintf("%d of %d", gen, gen)) || !strings.Contains(s, "this node") {
		t.Fatalf("the node's row reads %q, want this node, in sync, generation %d of %d", s, gen, gen)
	}
	if s := u.text(`#nodes-store`); !strings.Contains(s, "dir") || !strings.Contains(s, "local state directory") || !strings.Contains(s, "Cluster section of the README") {
		t.Fatalf("the store panel reads %q, want kind dir, the local state directory and the README's Cluster section", s)
	}
	if !evalJS[bool](u, `document.getElementById('store-banner').hidden`) {
		t.Fatalf("the store banner is shown on a single node: %q", u.text(`#store-banner`))
	}
	u.shot("nodes-single-1280")

	// Tab reaches the node's admin link; the list is read again every few
	// seconds, not redrawn when unchanged, and the focus stays.
	u.run("Tab into the page", chromedp.KeyEvent(kb.Tab))
	if !u.focusIn(`a[data-action="admin-link"]`) {
		t.Fatalf("Tab from the page focuses %q, want the node's admin link", evalJS[string](u, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	evalJS[bool](u, `(() => { window.nodesTable = document.getElementById('nodes-table'); return true; })()`)
	reads := u.uiClusterReads()
	u.waitJS(10*time.Second, "two more reads of /api/v1/cluster", fmt.Sprintf(`performance.getEntriesByType('resource').filter((e) => /\/api\/v1\/cluster$/.test(e.name)).length >= %d`, reads+2))
	if !evalJS[bool](u, `document.getElementById('nodes-table') === window.nodesTable`) {
		t.Fatal("the nodes table was redrawn while nothing changed")
	}
	if !u.focusIn(`a[data-action="admin-link"]`) {
		t.Fatalf("after the page read the list again the focus is on %q", evalJS[string](u, `document.activeElement.outerHTML.slice(0, 120)`))
	}
	// A write elsewhere: the page shows the new generation, the focus stays.
	in.MustDo(200, "PATCH", "/api/v1/backends/web/servers/s1", `{"weight":7}`)
	u.waitJS(10*time.Second, "the next generation on the page", fmt.Sprintf(`(() => { const r = document.querySelector(%q); return !!r && r.textContent.includes('%d of %d'); })()`, row, gen+1, gen+1))
	u.waitJS(5*time.Second, "the focus on the admin link again", `!!document.activeElement && document.activeElement.matches('a[data-action="admin-link"]')`)

	// A write's toast on a single node: no nodes.
	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "5")
	u.run("set the weight", chromedp.Click(chromedp.CSS(`button[data-action="weight"][data-server="web/s1"]`)))
	u.waitJS(5*time.Second, "the write's toast", `[...document.querySelectorAll('#toasts .toast')].some((t) => t.textContent.includes('Weight of web/s1 set to 5'))`)
	if evalJS[bool](u, `!!document.querySelector('#toasts [data-nodes]')`) {
		t.Fatalf("a single node's write toast names nodes: %q", u.text(`#toasts`))
	}

	// What a cluster write's answer reads as: headers only (a 204), the
	// body's refusals with their errors, a single node's answer.
	got := evalJSAwait[string](u, `import('./js/cluster.js').then((m) => {
		const hd = (o) => new Headers(o);
		const a = m.nodesText(m.nodesOf({ status: 204, data: null, headers: hd({ 'X-Spliced-Nodes-Applied': 'edge-1,edge-3', 'X-Spliced-Nodes-Refused': 'edge-2', 'X-Spliced-Nodes-Pending': 'edge-4' }) }));
		const b = m.nodesText(m.nodesOf({ status: 200, headers: hd({ 'X-Spliced-Nodes-Applied': 'edge-1', 'X-Spliced-Nodes-Refused': 'edge-2', 'X-Spliced-Nodes-Pending': '' }),
			data: { generation: 9, nodes: { generation: 9, applied: ['edge-1'], refused: [{ name: 'edge-2', running_generation: 8, refused_generation: 9, error: 'bind 127.0.0.3:8080: address already in use' }], pending: [] } } }));
		const c = m.nodesOf({ status: 200, headers: hd({}), data: { generation: 9, plan: { items: [] } } });
		const k = m.nodesKind({ status: 204, headers: hd({ 'X-Spliced-Nodes-Applied': 'edge-1', 'X-Spliced-Nodes-Refused': '', 'X-Spliced-Nodes-Pending': '' }) });
		return [a, b, String(c), JSON.stringify(k)].join('\n');
	})`)
	want := strings.Join([]string{
		"applied on edge-1, edge-3 · refused on edge-2 · pending on edge-4",
		"applied on edge-1 · refused on edge-2: bind 127.0.0.3:8080: address already in use",
		"null",
		`""`,
	}, "\n")
	if got != want {
		t.Fatalf("write answers read as\n%s\nwant\n%s", got, want)
	}

	// 375 px: everything inside the viewport, no sideways scroll.
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.page("nodes")
	u.fitsWidth("nodes", `#nodes-table td, #nodes-store .kv span, #nodes-self .kv span, #nodes-dir-note, #nav a`)
	u.fullShot("nodes-single-375")
	u.errs.check(t, "nodes")
}

// evalJSAwait evaluates a JavaScript expression that yields a promise and
// returns what it resolves to.
func evalJSAwait[T any](u *uiTest, js string) T {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(u.ctx, 15*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](js, chromedp.EvalAwaitPromise))
	if err != nil {
		u.t.Fatalf("evaluate %s: %v%s", js, err, u.errs.String())
	}
	return v
}

// toastWith waits for a toast whose text holds every one of parts and
// returns its text and kind ("", "warn" or "bad").
func (u *uiTest) toastWith(what string, parts ...string) (string, string) {
	u.t.Helper()
	js := fmt.Sprintf(`[...document.querySelectorAll('#toasts .toast')].find((t) => %s.every((p) => t.textContent.includes(p)))`, jsonOf(u.t, parts))
	u.waitJS(15*time.Second, what, "!!"+js)
	return evalJS[string](u, js+".textContent"), evalJS[string](u, js+".className.replace('toast', '').trim()")
}

func jsonOf(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestUINodesCluster: two nodes (a, b) on an embedded etcd, the page of a.
// It lists both in sync and names a in the header; a node's local
// settings are edited from its row; a write made in the page says it was
// applied on a and b; with a port taken on b's address only, b refuses:
// its row is red with the error, and the next write's toast says "refused
// on b: …"; with etcd stopped a banner says the store is unreachable and
// a write's 503 is shown; once etcd is back the banner goes away.
func TestUINodesCluster(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	gen := generationOf(t, a.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`))
	c.waitRunning(gen, 15*time.Second, a, b)

	u := newUITest(t, a.instance)
	u.shotsTo()
	u.run("open the Nodes page",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base+"#/nodes"),
		chromedp.WaitVisible(chromedp.CSS(`#page-nodes[data-ready="1"]`)))
	u.waitJS(15*time.Second, "both nodes in sync", `(() => {
		const r = [...document.querySelectorAll('#nodes-table tr[data-node]')];
		return r.length === 2 && r.every((x) => x.dataset.state === 'in_sync');
	})()`)
	if s := u.text(`#node`); s != "a" {
		t.Fatalf("the header names node %q, want a", s)
	}
	if s := u.text(`#nodes-store`); !strings.Contains(s, "etcd") || !strings.Contains(s, "connected") || !strings.Contains(s, clusterPrefix) {
		t.Fatalf("the store panel reads %q, want etcd, connected, prefix %s", s, clusterPrefix)
	}
	if s := u.text(`#nodes-table tr[data-node="b"]`); !strings.Contains(s, b.Address) || strings.Contains(s, "this node") {
		t.Fatalf("node b's row reads %q, want its address %s and not this node", s, b.Address)
	}
	u.shot("nodes-cluster-1280")

	// b's local settings from its row: one loop on b only.
	settingsB := `button[data-action="node-settings"][data-node="b"]`
	u.run("open b's settings", chromedp.Focus(chromedp.CSS(settingsB)), chromedp.Click(chromedp.CSS(settingsB)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] #node-settings-form`)))
	u.fill(`dialog[open] input[name="nbthread"]`, "1")
	u.shot("nodes-cluster-settings")
	u.run("save b's settings", chromedp.Click(chromedp.CSS(`dialog[open] [data-action="submit"]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	text, kind := u.toastWith("the settings' toast", "Settings of b saved", "applied on a, b")
	if kind != "" {
		t.Fatalf("the settings' toast %q is %q, want a plain one", text, kind)
	}
	var ns struct {
		Nbthread *int `json:"nbthread"`
	}
	a.MustDo(200, "GET", "/api/v1/cluster/nodes/b/settings", nil).JSON(t, &ns)
	if ns.Nbthread == nil || *ns.Nbthread != 1 {
		t.Fatalf("b's settings after the form: %+v", ns)
	}
	u.waitJS(10*time.Second, "the focus back on b's Settings button", fmt.Sprintf(`!!document.activeElement && document.activeElement.matches(%q)`, settingsB))

	// A write in the page: its toast says both nodes applied it.
	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "5")
	u.run("set the weight", chromedp.Click(chromedp.CSS(`button[data-action="weight"][data-server="web/s1"]`)))
	u.toastWith("the weight's toast", "Weight of web/s1 set to 5", "applied on a, b")
	u.shot("nodes-cluster-write")

	// A port taken on b's address only: b refuses the frontend bound on
	// ${NODE_ADDRESS}, and every generation after it.
	port := testutil.FreePort(t)
	busy, err := net.Listen("tcp", fmt.Sprintf("%s:%d", b.Address, port))
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	a.MustDo(201, "POST", "/api/v1/frontends", fmt.Sprintf(`{"name":"pub","mode":"tcp","default_backend":"web","binds":[{"name":"b1","address":"${NODE_ADDRESS}","port":%d}]}`, port))
	u.page("nodes")
	u.waitJS(15*time.Second, "b refused, in red, with its error", `(() => {
		const r = document.querySelector('#nodes-table tr[data-node="b"]');
		const e = document.querySelector('#nodes-table tr[data-node-error="b"]');
		return !!r && r.dataset.state === 'refused' && r.classList.contains('down') && !!e && e.textContent.includes('refused generation');
	})()`)
	var cv clusterView
	a.MustDo(200, "GET", "/api/v1/cluster", nil).JSON(t, &cv)
	rb, _ := cv.row("b")
	if rb.Error == "" || !strings.Contains(u.text(`#nodes-table tr[data-node-error="b"] .node-err-text`), rb.Error) {
		t.Fatalf("b's error on the page %q, in the API %q", u.text(`#nodes-table tr[data-node-error="b"]`), rb.Error)
	}
	if s := u.text(`#nodes-summary`); !strings.Contains(s, "1 refused") {
		t.Fatalf("the page's summary reads %q, want 1 refused", s)
	}
	u.shot("nodes-cluster-refused-1280")
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.fitsWidth("nodes in a cluster", `#nodes-table td, #nodes-store .kv span, #nodes-self .kv span, #nav a`)
	u.fullShot("nodes-cluster-refused-375")
	u.run("wide viewport", chromedp.EmulateViewport(1280, 800))

	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "6")
	u.run("set the weight again", chromedp.Click(chromedp.CSS(`button[data-action="weight"][data-server="web/s1"]`)))
	text, kind = u.toastWith("the refusal in the weight's toast", "Weight of web/s1 set to 6", "applied on a", "refused on b: ")
	if kind != "warn" || !strings.Contains(text, rb.Error) {
		t.Fatalf("the toast of a write b refused reads %q (%q), want a warning with b's error %q", text, kind, rb.Error)
	}
	u.shot("nodes-cluster-write-refused")

	// etcd stopped: the banner, and a write's 503 said as such.
	u.page("nodes")
	c.etcd.Stop(0)
	u.waitJS(20*time.Second, "the store banner", `(() => { const b = document.getElementById('store-banner'); return !b.hidden && b.textContent.includes('Configuration store unreachable since') && b.textContent.includes('changes are refused'); })()`)
	// Since when: the time the store became unreachable (/api/v1/info).
	u.waitJS(10*time.Second, "the banner's time", `(() => { const t = document.querySelector('#store-banner #store-since time'); return !!t && !Number.isNaN(Date.parse(t.getAttribute('datetime'))) && !document.getElementById('store-banner').textContent.includes('[object'); })()`)
	u.waitJS(10*time.Second, "the store panel saying unreachable", `document.getElementById('nodes-store').textContent.includes('unreachable')`)
	u.shot("nodes-cluster-stale")
	u.page("backends")
	u.fill(`input[data-weight="web/s1"]`, "7")
	u.run("set the weight without the store", chromedp.Click(chromedp.CSS(`button[data-action="weight"][data-server="web/s1"]`)))
	u.waitJS(15*time.Second, "the 503 shown", `[...document.querySelectorAll('#toasts .toast.bad')].some((t) => t.textContent.includes('HTTP 503'))`)
	u.shot("nodes-cluster-503")
	c.etcd.Restart(0)
	u.waitJS(40*time.Second, "the banner gone once the store is back", `document.getElementById('store-banner').hidden`)
	u.errs.check(t, "cluster")
}
