package faults

// SIGTERM with idle, in-flight and long tcp connections.

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// waitExit waits up to d for the process to exit and returns when it did.
func (p *proc) waitExit(t *testing.T, d time.Duration) time.Time {
	t.Helper()
	select {
	case <-p.exited:
		return time.Now()
	case <-time.After(d):
		t.Fatalf("spliced still running %v after SIGTERM", d)
		return time.Time{}
	}
}

// TestSIGTERM: with grace_ms 1500, SIGTERM closes idle keep-alive clients
// at once, lets a request in flight finish with Connection: close, refuses
// new connections, keeps a tcp tunnel working until the grace ends, then
// closes it and exits with status 0. With idle clients only, it exits at
// once.
func TestSIGTERM(t *testing.T) {
	t.Parallel()
	t.Run("idle, in flight and tcp", func(t *testing.T) {
		p := start(t, startOpts{})
		p.must("PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 1500, "nbthread": 2, "distribution": "round-robin"})
		atOrigin := make(chan struct{}, 1)
		release := make(chan struct{})
		port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
			if r.URL.Path == "/slow" {
				atOrigin <- struct{}{}
				select {
				case <-release:
				case <-time.After(5 * time.Second):
				}
			}
			_, err := io.WriteString(c, okResp("done"+r.URL.Path))
			return err == nil
		})
		echo, _ := listen(t, func(c net.Conn) { io.Copy(c, c); c.Close() })
		p.backend("web", "http", map[string]any{"server_ms": 5000}, srv{"s1", port})
		p.backend("tweb", "tcp", nil, srv{"t1", echo})
		fp := p.frontend("pub", "http", "web", nil)
		tp := p.frontend("tpub", "tcp", "tweb", nil)

		var idle []net.Conn
		for i := 0; i < 4; i++ { // round-robin: 2 on each loop, so once all are closed both loops are soft-stopped
			c := dial(t, fp)
			io.WriteString(c, "GET /idle HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, _, err := readResp(bufio.NewReader(c), "GET"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("idle client's request: %v %v", resp, err)
			}
			idle = append(idle, c)
		}
		slow := dial(t, fp)
		io.WriteString(slow, "GET /slow HTTP/1.1\r\nHost: a\r\n\r\n")
		<-atOrigin
		tun := dial(t, tp)
		echoOK := func(msg string) error {
			tun.SetDeadline(time.Now().Add(2 * time.Second))
			if _, err := io.WriteString(tun, msg); err != nil {
				return err
			}
			b := make([]byte, len(msg))
			_, err := io.ReadFull(tun, b)
			return err
		}
		if err := echoOK("before"); err != nil {
			t.Fatal(err)
		}
		p.healthy(t)

		t0 := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		for i, c := range idle {
			c.SetReadDeadline(time.Now().Add(3 * time.Second))
			b, err := io.ReadAll(c)
			if len(b) > 0 || err != nil {
				t.Fatalf("idle client %d: got %q, %v; want a clean close", i, b, err)
			}
			if el := time.Since(t0); el > time.Second {
				t.Fatalf("idle client %d closed %v after SIGTERM, want at once", i, el)
			}
		}
		testutil.Eventually(t, 2*time.Second, func() bool {
			c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second)
			if err == nil {
				c.Close()
			}
			return err != nil
		}, "the http bind to refuse")
		close(release)
		br := bufio.NewReader(slow)
		resp, b, err := readResp(br, "GET")
		if err != nil || resp.StatusCode != 200 || string(b) != "done/slow" || !resp.Close {
			t.Fatalf("request in flight: %v %q, %v; want 200 done/slow with Connection: close", resp, b, err)
		}
		closedAfter(t, slow, br, time.Second)
		if err := echoOK("during the grace"); err != nil {
			t.Fatalf("tcp tunnel during the grace (%v after SIGTERM): %v", time.Since(t0), err)
		}
		tun.SetReadDeadline(time.Now().Add(5 * time.Second))
		io.ReadAll(tun)
		el := time.Since(t0)
		if el < 1400*time.Millisecond || el > 3*time.Second {
			t.Fatalf("tcp tunnel closed %v after SIGTERM, want at grace_ms (1.5 s)", el)
		}
		end := p.waitExit(t, 3*time.Second)
		t.Logf("tunnel closed %v, exit %v after SIGTERM (grace_ms 1500)", el, end.Sub(t0))
		if p.exitErr != nil {
			t.Fatalf("exit: %v", p.exitErr)
		}
	})
	t.Run("idle only", func(t *testing.T) {
		p := start(t, startOpts{})
		p.backend("web", "http", nil, named(t, "a"))
		fp := p.frontend("pub", "http", "web", nil)
		for i := 0; i < 3; i++ {
			c := dial(t, fp)
			io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
			if resp, _, err := readResp(bufio.NewReader(c), "GET"); err != nil || resp.StatusCode != 200 {
				t.Fatalf("request: %v %v", resp, err)
			}
		}
		p.healthy(t)
		t0 := time.Now()
		p.cmd.Process.Signal(syscall.SIGTERM)
		end := p.waitExit(t, 5*time.Second)
		if el := end.Sub(t0); el > 2*time.Second {
			t.Fatalf("exit %v after SIGTERM with idle clients only, want at once", el)
		}
		if p.exitErr != nil {
			t.Fatalf("exit: %v", p.exitErr)
		}
	})
}

// TestUpgradedConnectionsOnStopAndReset: an upgraded (WebSocket-style)
// connection is a tunnel: it keeps working during the grace of a SIGTERM
// and is closed when the grace ends; one whose server resets is closed.
func TestUpgradedConnectionsOnStopAndReset(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 1500})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		if r.URL.Path == "/reset" {
			rst(c)
			return false
		}
		io.Copy(c, c)
		return false
	})
	p.backend("web", "http", nil, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", nil)
	upgrade := func(path string) (net.Conn, *bufio.Reader) {
		c := dial(t, fp)
		io.WriteString(c, "GET "+path+" HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		resp, err := http.ReadResponse(br, &http.Request{Method: "GET"})
		if err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		return c, br
	}
	echo := func(c net.Conn, br *bufio.Reader, msg string) error {
		c.SetDeadline(time.Now().Add(2 * time.Second))
		io.WriteString(c, msg)
		b := make([]byte, len(msg))
		_, err := io.ReadFull(br, b)
		return err
	}
	rc, rbr := upgrade("/reset")
	closedAfter(t, rc, rbr, 3*time.Second)

	c, br := upgrade("/ws")
	if err := echo(c, br, "before"); err != nil {
		t.Fatal(err)
	}
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if err := echo(c, br, "during the grace"); err != nil {
		t.Fatalf("upgraded connection during the grace: %v", err)
	}
	c.SetReadDeadline(time.Now().Add(5 * time.Second))
	io.ReadAll(br)
	if el := time.Since(t0); el < 1400*time.Millisecond || el > 3*time.Second {
		t.Fatalf("upgraded connection closed %v after SIGTERM, want at grace_ms (1.5 s)", el)
	}
	p.waitExit(t, 3*time.Second)
}

// TestRemovedLoopKeepsTunnelsForTheGrace: nbthread 2 -> 1 with grace_ms
// 1500 and 8 tcp tunnels spread over both loops: every tunnel works for
// the first second; after the grace, those of the removed loop are closed
// and the others still work.
func TestRemovedLoopKeepsTunnelsForTheGrace(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 2, "grace_ms": 1500, "distribution": "round-robin"})
	echo, _ := listen(t, func(c net.Conn) { io.Copy(c, c); c.Close() })
	p.backend("tweb", "tcp", map[string]any{"tunnel_ms": 30000}, srv{"t1", echo})
	tp := p.frontend("tpub", "tcp", "tweb", nil)
	var tuns []net.Conn
	for i := 0; i < 8; i++ {
		tuns = append(tuns, dial(t, tp))
	}
	works := func(c net.Conn) bool {
		c.SetDeadline(time.Now().Add(time.Second))
		if _, err := io.WriteString(c, "p"); err != nil {
			return false
		}
		_, err := io.ReadFull(c, make([]byte, 1))
		return err == nil
	}
	for i, c := range tuns {
		if !works(c) {
			t.Fatalf("tunnel %d before the change", i)
		}
	}
	t0 := time.Now()
	p.must("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1})
	testutil.Eventually(t, 2*time.Second, func() bool { return time.Since(t0) > time.Second }, "a second into the grace")
	for i, c := range tuns {
		if !works(c) {
			t.Fatalf("tunnel %d closed %v into a 1.5 s grace", i, time.Since(t0))
		}
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		var cm struct {
			Loops []struct{ State string } `json:"loops"`
		}
		json.Unmarshal(p.must("GET", "/api/v1/cpu-map", nil), &cm)
		return len(cm.Loops) == 1
	}, "the grace to end")
	alive := 0
	for _, c := range tuns {
		if works(c) {
			alive++
		}
	}
	t.Logf("%d of 8 tunnels alive after the removed loop's grace (%v)", alive, time.Since(t0))
	if alive == 0 || alive == 8 {
		t.Fatalf("%d of 8 tunnels alive: want those of the kept loop only", alive)
	}
	p.healthy(t)
}

// TestSIGTERMDuringWritesAndLoad: SIGTERM while writers change the
// configuration and clients run: the process exits with status 0 within
// grace_ms plus a second, and what it persisted is a valid state that a
// new process starts from.
func TestSIGTERMDuringWritesAndLoad(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	p.must("PATCH", "/api/v1/tuning", map[string]any{"grace_ms": 1000})
	p.backend("web", "http", map[string]any{"server_ms": 5000}, named(t, "a"))
	fp := p.frontend("pub", "http", "web", nil)
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < 2; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ; n++ {
				select {
				case <-stop:
					return
				default:
				}
				p.api("PATCH", "/api/v1/backends/web/servers/s1", map[string]any{"weight": 1 + n%100})
				p.api("PATCH", "/api/v1/tuning", map[string]any{"nbthread": 1 + n%2})
			}
		}()
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(fp), time.Second)
				if err != nil {
					continue
				}
				c.SetDeadline(time.Now().Add(3 * time.Second))
				io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
				readResp(bufio.NewReader(c), "GET")
				c.Close()
			}
		}()
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		f, _ := p.stats("pub", "")
		return f.Requests > 50
	}, "writes and requests under way")
	t0 := time.Now()
	p.cmd.Process.Signal(syscall.SIGTERM)
	end := p.waitExit(t, 8*time.Second)
	close(stop)
	wg.Wait()
	t.Logf("exit %v after SIGTERM: %v", end.Sub(t0), p.exitErr)
	if p.exitErr != nil {
		t.Fatalf("exit: %v\n%s", p.exitErr, tail(p.logs.String(), 3000))
	}
	if el := end.Sub(t0); el > 3*time.Second {
		t.Fatalf("exit %v after SIGTERM with grace_ms 1000", el)
	}
	// the same state directory starts again
	q := startIn(t, p.stateDir)
	q.healthy(t)
	if st, b, err := q.api("GET", "/api/v1/backends/web", nil); err != nil || st != 200 {
		t.Fatalf("after the restart: %d %s %v", st, b, err)
	}
}

// TestIdleUpgradedConnectionTimesOut: an upgraded connection with no
// traffic is closed after tunnel_ms (1 000), like a tcp tunnel; one that
// keeps talking (a byte every 100 ms, for 2.5 tunnel_ms) is not. The
// talker is upgraded last and talks at once: with 300 ms and the idle
// one upgraded after it, a loaded machine (-race, other lanes) took
// longer than tunnel_ms for that upgrade and the talker, silent
// meanwhile, was closed as idle, rightly.
func TestIdleUpgradedConnectionTimesOut(t *testing.T) {
	t.Parallel()
	p := start(t, startOpts{})
	port, _ := httpOrigin(t, func(c net.Conn, r *http.Request) bool {
		io.WriteString(c, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n")
		io.Copy(c, c)
		return false
	})
	p.backend("web", "http", map[string]any{"tunnel_ms": 1000}, srv{"s1", port})
	fp := p.frontend("pub", "http", "web", map[string]any{"timeouts": map[string]any{"tunnel_ms": 1000}})
	upgrade := func() (net.Conn, *bufio.Reader) {
		c := dial(t, fp)
		io.WriteString(c, "GET /ws HTTP/1.1\r\nHost: a\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n\r\n")
		br := bufio.NewReader(c)
		if resp, err := http.ReadResponse(br, &http.Request{Method: "GET"}); err != nil || resp.StatusCode != 101 {
			t.Fatalf("upgrade: %v %v", resp, err)
		}
		return c, br
	}
	idle, ibr := upgrade()
	talk, tbr := upgrade()
	t0 := time.Now()
	for time.Since(t0) < 2500*time.Millisecond {
		talk.SetDeadline(time.Now().Add(time.Second))
		io.WriteString(talk, "x")
		if _, err := io.ReadFull(tbr, make([]byte, 1)); err != nil {
			t.Fatalf("a talking upgraded connection cut after %v: %v", time.Since(t0), err)
		}
		time.Sleep(100 * time.Millisecond) // the pace of the talker
	}
	closedAfter(t, idle, ibr, 2*time.Second)
	p.healthy(t)
}
