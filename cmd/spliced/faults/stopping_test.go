package faults

import (
	"encoding/json"
	"io"
	"net"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestStoppingDuringTheGrace: from the moment SIGTERM starts the stop
// (a tcp tunnel keeps the grace open), /readyz answers 503 "stopping" so
// that load balancers take the node out, and an admin write is refused at
// once with 503 "stopping", nothing changed nor persisted.
func TestStoppingDuringTheGrace(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 20000})
	echo, _ := listen(t, func(c net.Conn) { io.Copy(c, c); c.Close() })
	p.backend("tweb", "tcp", nil, srv{"t1", echo})
	tp := p.frontend("tpub", "tcp", "tweb", nil)
	tun := dial(t, tp)
	tun.SetDeadline(time.Now().Add(5 * time.Second))
	if _, err := io.WriteString(tun, "x"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(tun, make([]byte, 1)); err != nil {
		t.Fatal(err)
	}
	generation := func(p *proc) (int, float64) {
		t.Helper()
		var doc struct {
			Generation int `json:"generation"`
			Tuning     struct {
				GraceMs float64 `json:"grace_ms"`
			} `json:"tuning"`
		}
		if err := json.Unmarshal(p.must("GET", "/api/v1/config", nil), &doc); err != nil {
			t.Fatal(err)
		}
		return doc.Generation, doc.Tuning.GraceMs
	}
	gen, _ := generation(p)
	if st, b, err := p.api("GET", "/readyz", nil); err != nil || st != 200 {
		t.Fatalf("/readyz before the stop: %d %s %v", st, b, err)
	}

	p.cmd.Process.Signal(syscall.SIGTERM)
	testutil.Eventually(t, 2*time.Second, func() bool {
		st, b, err := p.api("GET", "/readyz", nil)
		return err == nil && st == 503 && strings.Contains(string(b), "urn:spliced:problem:stopping")
	}, "/readyz to answer 503 stopping")
	t0 := time.Now()
	st, b, err := p.api("PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 1234})
	if el := time.Since(t0); err != nil || st != 503 || !strings.Contains(string(b), "urn:spliced:problem:stopping") || el > time.Second {
		t.Fatalf("write during the stop: %d %s %v after %v; want 503 stopping at once", st, b, err, el)
	}
	if g, grace := generation(p); g != gen || grace != 20000 {
		t.Fatalf("after the refused write: generation %d grace_ms %v; want %d and 20000", g, grace, gen)
	}
	// the tunnel still works: the grace is still open
	if _, err := io.WriteString(tun, "y"); err != nil {
		t.Fatal(err)
	}
	if _, err := io.ReadFull(tun, make([]byte, 1)); err != nil {
		t.Fatalf("tcp tunnel during the grace: %v", err)
	}
	p.cmd.Process.Signal(syscall.SIGTERM) // a second signal stops at once
	p.waitExit(t, 5*time.Second)
	q := startIn(t, p.stateDir)
	if g, grace := generation(q); g != gen || grace != 20000 {
		t.Fatalf("after a restart: generation %d grace_ms %v; want %d and 20000 (nothing persisted)", g, grace, gen)
	}
}
