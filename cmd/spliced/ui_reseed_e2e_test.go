package main

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

// TestUINodesReseed: with etcd gone back to an older generation, the
// Nodes page says the store is behind and offers Reseed…; its dialog says
// what the dry run says, and once confirmed the toast says both nodes
// applied the new generation and the warning goes away.
func TestUINodesReseed(t *testing.T) {
	t.Parallel()
	chromiumPath(t)
	c := newTestCluster(t, 1, "a", "b")
	a, b := c.nodes["a"], c.nodes["b"]
	a.MustDo(201, "POST", "/api/v1/backends", `{"name":"web","servers":[]}`)
	gen := generationOf(t, a.MustDo(201, "POST", "/api/v1/backends", `{"name":"api","servers":[]}`))
	c.waitRunning(gen, 15*time.Second, a, b)

	u := newUITest(t, a.instance)
	u.run("open the Nodes page", chromedp.EmulateViewport(1280, 800), chromedp.Navigate(u.base+"#/nodes"),
		chromedp.WaitVisible(chromedp.CSS(`#page-nodes[data-ready="1"]`)))
	if u.text(`#nodes-store`) == "" || evalJSAwait[bool](u, `!!document.getElementById('store-behind')`) {
		t.Fatal("the store is said behind while it is not")
	}
	cli, err := clientv3.New(clientv3.Config{Endpoints: c.etcd.Endpoints(), DialTimeout: 5 * time.Second, Logger: zap.NewNop()})
	if err != nil {
		t.Fatal(err)
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := cli.Txn(ctx).Then(clientv3.OpPut(clusterPrefix+"/current", `{"generation":1}`),
		clientv3.OpDelete(clusterPrefix+"/revisions/00000000000000000002")).Commit(); err != nil {
		t.Fatal(err)
	}
	u.waitJS(15*time.Second, "the store said behind, with Reseed…", `(() => {
		const e = document.getElementById('store-behind');
		return !!e && e.textContent.includes('older generation') && !!e.querySelector('button[data-action="reseed"]');
	})()`)
	u.run("reseed", chromedp.Click(chromedp.CSS(`button[data-action="reseed"]`)),
		chromedp.WaitVisible(chromedp.CSS(`dialog[open] #reseed-preview`)))
	if s := u.text(`dialog[open] #reseed-preview`); s == "" || !contains(s, "generation 2", "generation 3", "generation 1") {
		t.Fatalf("the reseed dialog reads %q", s)
	}
	u.run("confirm", chromedp.Click(chromedp.CSS(`dialog[open] [data-confirm="yes"]`)), chromedp.WaitNotPresent(chromedp.CSS(`dialog[open]`)))
	u.toastWith("the reseed's toast", "Store reseeded", "generation 3", "applied on a, b")
	u.waitJS(15*time.Second, "the warning gone", `!document.getElementById('store-behind')`)
	c.waitRunning(3, 10*time.Second, a, b)
	u.errs.check(t, "reseed")
}

func contains(s string, parts ...string) bool {
	for _, p := range parts {
		if !strings.Contains(s, p) {
			return false
		}
	}
	return true
}
