package main

// Issue 17 in the browser: the Nodes page (the store, this node, every
// live node with its generation and state, read again every few seconds),
// which nodes applied a write in its toast, and on a single node nothing
// more than before.

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// uiClusterView is GET /api/v1/cluster, the members the tests look at.
type uiClusterView struct {
	Store struct {
		Kind       string `json:"kind"`
		Connected  bool   `json:"connected"`
		Generation int64  `json:"generation"`
	} `json:"store"`
	Self struct {
		Name    string `json:"name"`
		Address string `json:"address"`
	} `json:"self"`
	Generation int64 `json:"generation"`
	Nodes      []struct {
		Name              string `json:"name"`
		RunningGeneration int64  `json:"running_generation"`
		State             string `json:"state"`
	} `json:"nodes"`
}

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
	chromiumPath(t)
	in := startSpliced(t, "")
	in.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`)
	var cv uiClusterView
	in.MustDo(200, "GET", "/api/v1/cluster", nil).JSON(t, &cv)
	if cv.Store.Kind != "dir" || len(cv.Nodes) != 1 || cv.Nodes[0].Name != cv.Self.Name {
		t.Fatalf("GET /api/v1/cluster on a single node: %+v", cv)
	}
	name := cv.Self.Name

	u := newUITest(t, in, 120*time.Second)
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
