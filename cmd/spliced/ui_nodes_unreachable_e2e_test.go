package main

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestUINodesUnreachable: a node whose key was not renewed for longer than
// its renew_ms (here a key put by the test on a lease of its own, dated a
// minute ago, as a SIGSTOPped node's is after a few seconds:
// TestClusterStateOfAStoppedNode) is shown unreachable on the Nodes page,
// in red, with a note that says what it means and when it was last
// renewed; the summary counts it; the live nodes stay in sync. Once its
// key goes it leaves the page.
func TestUINodesUnreachable(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	gen := generationOf(t, a.MustDo(201, "POST", "/api/v1/backends?"+clusterWait, `{"name":"web","servers":[{"name":"s1","address":"127.0.0.1","port":9001}]}`))
	c.waitRunning(gen, 15*time.Second, a, b)

	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	lease, err := cli.Grant(ctx, 120)
	if err != nil {
		t.Fatal(err)
	}
	last := time.Now().Add(-time.Minute).UTC()
	rec, _ := json.Marshal(map[string]any{"name": "z", "address": "127.0.0.9", "running_generation": gen, "state": "in_sync",
		"renew_ms": 4000, "version": "test", "started": last.Add(-time.Hour), "updated": last, "instance": "test-z"})
	if _, err := cli.Put(ctx, clusterPrefix+"/nodes/z", string(rec), clientv3.WithLease(lease.ID)); err != nil {
		t.Fatal(err)
	}

	u := newUITest(t, a.instance)
	u.shotsTo()
	u.run("open the Nodes page",
		chromedp.EmulateViewport(1280, 800),
		chromedp.Navigate(u.base+"#/nodes"),
		chromedp.WaitVisible(chromedp.CSS(`#page-nodes[data-ready="1"]`)))
	u.waitJS(15*time.Second, "z unreachable in red with its note, a and b in sync", `(() => {
		const r = (n) => document.querySelector('#nodes-table tr[data-node="' + n + '"]');
		const z = r('z'), note = document.querySelector('#nodes-table tr[data-node-unreachable="z"]');
		return !!z && z.dataset.state === 'unreachable' && z.classList.contains('down') && !!note &&
			r('a') && r('a').dataset.state === 'in_sync' && r('b') && r('b').dataset.state === 'in_sync';
	})()`)
	if s := u.text(`#nodes-table tr[data-node="z"]`); !strings.Contains(s, "unreachable") {
		t.Fatalf("z's row reads %q, want unreachable", s)
	}
	if s := u.text(`#nodes-table tr[data-node-unreachable="z"]`); !strings.Contains(s, "z is unreachable") || !strings.Contains(s, "last renewed") ||
		!strings.Contains(s, "every 4 s") || !strings.Contains(s, "lease expires") {
		t.Fatalf("z's note reads %q, want what unreachable means and when it was last renewed", s)
	}
	if title := evalJS[string](u, `document.querySelector('#nodes-table tr[data-node="z"] [data-state]').title`); !strings.Contains(title, "renewed") {
		t.Fatalf("the unreachable badge's title is %q, want what it means", title)
	}
	if s := u.text(`#nodes-summary`); !strings.Contains(s, "3 live") || !strings.Contains(s, "2 in sync") || !strings.Contains(s, "1 unreachable") {
		t.Fatalf("the summary reads %q, want 3 live, 2 in sync, 1 unreachable", s)
	}
	u.shot("nodes-unreachable-1280")
	u.run("phone viewport", chromedp.EmulateViewport(375, 812, chromedp.EmulateMobile))
	u.fitsWidth("nodes with one unreachable", `#nodes-table td, #nodes-store .kv span, #nodes-self .kv span, #nav a`)
	u.fullShot("nodes-unreachable-375")
	u.run("wide viewport", chromedp.EmulateViewport(1280, 800))

	// A context of its own: the browser's steps above can outlast the
	// setup's 10 s on a loaded machine.
	rctx, rcancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer rcancel()
	if _, err := cli.Revoke(rctx, lease.ID); err != nil {
		t.Fatal(err)
	}
	u.waitJS(15*time.Second, "z gone once its key went", `!document.querySelector('#nodes-table tr[data-node="z"]') && !document.querySelector('#nodes-table tr[data-node-unreachable]')`)
	u.errs.check(t, "nodes unreachable")
}
