package engine

import (
	"testing"

	"github.com/spliced-proxy/spliced/core/config"
)

// TestEngineBuildsServerTLSOncePerServer: Apply gives a server with tls its
// client config; an Apply that leaves the server's tls alone keeps the same
// config (its session cache: reconnects keep resuming), one that changes it
// gives a new server a new config, and a plain server has none.
func TestEngineBuildsServerTLSOncePerServer(t *testing.T) {
	e := newTestEngine(t)
	port := greeter(t, "x")
	c := tcpConfig(1, port)
	c.Backends[0].Servers[0].TLS = &config.ServerTLS{Verify: config.VerifyNone, SNI: "a.test"}
	c.Backends[0].Servers = append(c.Backends[0].Servers, &config.Server{Name: "plain", Address: "127.0.0.1", Port: port})
	c.Normalize()
	apply(t, e, c)
	srv := func(name string) (tlsSet bool, cfg any, sni string) {
		e.mu.Lock()
		defer e.mu.Unlock()
		s := e.backends["be"].bb.Server(name)
		if s.TLS == nil {
			return false, nil, ""
		}
		return true, s.TLS, s.TLS.ServerName
	}
	ok, first, sni := srv("s1")
	if !ok || sni != "a.test" {
		t.Fatalf("s1: tls config %v, server name %q", ok, sni)
	}
	if ok, _, _ := srv("plain"); ok {
		t.Fatal("a plain server got a tls config")
	}
	c2 := c.Clone()
	c2.Generation = 2
	w := 7
	c2.Backends[0].Servers[0].Weight = &w // an unrelated change
	apply(t, e, c2)
	if _, again, _ := srv("s1"); again != first {
		t.Fatal("an Apply that left tls alone rebuilt the server's tls config")
	}
	c3 := c2.Clone()
	c3.Generation = 3
	c3.Backends[0].Servers[0].TLS.SNI = "b.test"
	apply(t, e, c3)
	if _, next, sni := srv("s1"); next == first || sni != "b.test" {
		t.Fatalf("a tls change kept the old config (server name %q)", sni)
	}
}
