package proxy

import (
	"bytes"
	"io"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/rules"
)

func tcpRules(t *testing.T, js string) *rules.Set {
	t.Helper()
	var f config.Frontend
	if err := config.DecodeBytes([]byte(`{"name":"f","mode":"tcp","rules":{"request":`+js+`}}`), &f); err != nil {
		t.Fatal(err)
	}
	s, err := rules.Compile(config.PhaseRequest, f.Rules.Request, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestTCPRulesDenyBySrc(t *testing.T) {
	e := newEnv(t, defaultTuning())
	got := make(chan []byte, 4)
	fe := frontend(t, SpliceAuto, sniOrigin(t, "D", got))
	fe.Rules = tcpRules(t, `[{"when":{"src":["127.0.0.0/8"]},"do":{"deny":{}}}]`)
	c := e.dial(fe)
	expectClosed(t, c)
	e.waitIdle()
	if fe.Stats.Loop(0).RuleDenied.Load() != 1 || fe.Stats.Loop(0).Denied.Load() != 1 {
		t.Fatal("denial not counted")
	}
	fe.Rules = tcpRules(t, `[{"when":{"not":{"src":["127.0.0.0/8"]}},"do":{"deny":{}}}]`)
	c = e.dial(fe)
	hello := clientHello(t, "a.example.com")
	c.Write(hello)
	if b := <-got; !bytes.Equal(b, hello) {
		t.Fatal("allowed connection not forwarded")
	}
	ans := make([]byte, 1)
	if _, err := io.ReadFull(c, ans); err != nil || string(ans) != "D" {
		t.Fatalf("answer %q %v", ans, err)
	}
	c.Close()
	e.waitIdle()
}

func TestTCPRulesDenyBySNI(t *testing.T) {
	e := newEnv(t, defaultTuning())
	got := make(chan []byte, 4)
	fe := frontend(t, SpliceAuto, sniOrigin(t, "D", got))
	fe.InspectTimeout = 5 * time.Second
	fe.Rules = tcpRules(t, `[{"when":{"sni":"*.internal.example"},"do":{"deny":{}}}]`)
	c := e.dial(fe)
	c.Write(clientHello(t, "db.internal.example"))
	expectClosed(t, c)
	e.waitIdle()
	c = e.dial(fe)
	hello := clientHello(t, "www.example")
	c.Write(hello)
	if b := <-got; !bytes.Equal(b, hello) {
		t.Fatal("allowed connection not forwarded whole")
	}
	c.Close()
	e.waitIdle()
	if fe.Stats.Loop(0).RuleDenied.Load() != 1 {
		t.Fatal("denial not counted")
	}
}
