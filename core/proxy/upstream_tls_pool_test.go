package proxy

import (
	"bufio"
	"crypto/tls"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestTLSServerHandshakesNotQueuedBehindClients: clients of a TLS bind
// can hold every slot of the loop's bind handshake pool (half a
// ClientHello, then silence, until handshake_ms: cheap for them), and
// then an http request of any frontend to an https server must still get
// its server handshake at once, not wait behind them until its connect_ms
// runs out (a 503). The handshakes the proxy makes as a client (servers,
// health checks) have a pool of their own.
func TestTLSServerHandshakesNotQueuedBehindClients(t *testing.T) {
	tu := defaultTuning()
	tu.TLSMaxHandshakes = 1
	e := newEnv(t, tu)
	srv, _ := tlsPair(t, tls.VersionTLS13)
	bind := &Frontend{Name: "tls", Stats: new(Counters)}
	tlsFront(bind, srv, 10*time.Second)
	stalled := e.dialTLS(bind)
	if _, err := stalled.Write([]byte{22, 3, 1, 2, 0, 1, 0, 1}); err != nil { // half a ClientHello
		t.Fatal(err)
	}
	testutil.Eventually(t, 5*time.Second, func() bool {
		_, parked, _, _ := hsState(e, e.w.tls)
		return parked == 1
	}, "the stalled client handshake parked in the bind pool")

	certs := newUpstreamCerts(t)
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { answerHeads(c, []byte(rawResponse)) })
	be := tlsBackend(t, config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"},
		func(b *config.Backend) { r := 0; b.Retries = &r; b.Timeouts.ConnectMs = 2000 }, o.Addr)
	c := e.dialHTTP(tlsHTTPFrontend(t, be))
	start := time.Now()
	resp, body := exchangeOn(t, c, bufio.NewReader(c), "GET /x HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
	if resp.StatusCode != 200 || body != "hello" {
		t.Fatalf("https server behind a stalled client handshake: %d %q after %v", resp.StatusCode, body, time.Since(start))
	}
	c.Close()
	stalled.Close()
	e.waitIdle()
}
