package proxy

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"io"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/stats"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// withServerCounters gives be's servers counters, as the engine does.
func withServerCounters(be *Backend) *Backend {
	for _, s := range be.B.Servers {
		s.Counters = stats.New(1)
	}
	return be
}

func serverTLSCounts(be *Backend) stats.TLSCounts { return be.B.Servers[0].Counters.Total(0).TLS() }

// TestTLSServerHandshakesCounted: the handshakes with a server are counted
// in its counters: tcp tunnels (full, then resumed), an http connection
// (full), a refused certificate (failed), a server silent past connect_ms
// (failed and a timeout, counted when the given-up handshake ends).
func TestTLSServerHandshakesCounted(t *testing.T) {
	certs := newUpstreamCerts(t)
	e := newEnv(t, defaultTuning())
	const answer = "HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"
	o := newTLSOrigin(t, certs.leaf, func(c *tls.Conn) { answerHeads(c, []byte(answer)) })
	good := config.ServerTLS{CAPEM: certs.ca.CertPEM, SNI: "origin.test"}
	noRetry := func(b *config.Backend) { r := 0; b.Retries = &r; b.Timeouts.ConnectMs = 200 }

	tun := withServerCounters(tlsBackend(t, good, nil, o.Addr))
	for i := range 3 {
		c := e.dial(tlsTCPFrontend(t, SpliceAuto, tun))
		c.SetDeadline(time.Now().Add(10 * time.Second))
		io.WriteString(c, "GET / HTTP/1.1\r\nHost: a\r\n\r\n")
		b := make([]byte, len(answer))
		if _, err := io.ReadFull(c, b); string(b) != answer {
			t.Fatalf("tunnel %d: %q, %v", i, b, err)
		}
		c.Close()
	}
	e.waitIdle()
	if got, want := serverTLSCounts(tun), (stats.TLSCounts{Full: 1, Resumed: 2}); got != want {
		t.Errorf("tunnels: %+v, want %+v", got, want)
	}

	get := func(be *Backend) int {
		t.Helper()
		hc := e.dialHTTP(tlsHTTPFrontend(t, be))
		defer hc.Close()
		resp, _ := exchangeOn(t, hc, bufio.NewReader(hc), "GET / HTTP/1.1\r\nHost: a\r\n\r\n", "GET")
		return resp.StatusCode
	}
	web := withServerCounters(tlsBackend(t, good, noRetry, o.Addr))
	if st := get(web); st != 200 {
		t.Fatalf("http: status %d", st)
	}
	wrongCA := withServerCounters(tlsBackend(t, config.ServerTLS{CAPEM: certs.other.CertPEM, SNI: "origin.test"}, noRetry, o.Addr))
	if st := get(wrongCA); st != 503 {
		t.Fatalf("wrong CA: status %d", st)
	}
	e.waitIdle()
	if got, want := serverTLSCounts(web), (stats.TLSCounts{Full: 1}); got != want {
		t.Errorf("http: %+v, want %+v", got, want)
	}
	if got, want := serverTLSCounts(wrongCA), (stats.TLSCounts{Failed: 1}); got != want {
		t.Errorf("wrong CA: %+v, want %+v", got, want)
	}

	hold := make(chan struct{})
	t.Cleanup(func() { close(hold) })
	silent := testutil.ServeOrigin(t, func(c *net.TCPConn) { <-hold })
	mute := withServerCounters(tlsBackend(t, config.ServerTLS{Verify: config.VerifyNone}, noRetry, silent.Addr))
	c := e.dial(tlsTCPFrontend(t, SpliceAuto, mute))
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Read(make([]byte, 1))
	c.Close()
	want := stats.TLSCounts{Failed: 1, Timeouts: 1}
	testutil.Eventually(t, 5*time.Second, func() bool { return serverTLSCounts(mute) == want },
		func() string { return fmt.Sprintf("silent server: %+v, want %+v", serverTLSCounts(mute), want) })
}
