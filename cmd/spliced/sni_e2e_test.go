package main

// End-to-end test of SNI routing in tcp mode: the real binary routes TLS
// connections on the ClientHello's server name, without terminating TLS.

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"math/big"
	"net"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsOrigin is a TLS server whose self-signed certificate names dnsName;
// it answers every connection's first line with dnsName.
func tlsOrigin(t *testing.T, dnsName string) int {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: dnsName}, DNSNames: []string{dnsName},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{{Certificate: [][]byte{der}, PrivateKey: key}}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				c.SetDeadline(time.Now().Add(10 * time.Second))
				c.Write([]byte(dnsName + "\n"))
			}()
		}
	}()
	return ln.Addr().(*net.TCPAddr).Port
}

func TestSNIRoutingEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	portA, portB, portD := tlsOrigin(t, "a.example.com"), tlsOrigin(t, "b.example.com"), tlsOrigin(t, "default.example.com")
	for name, port := range map[string]int{"a": portA, "b": portB, "def": portD} {
		in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
			"name": name, "mode": "tcp",
			"servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": port}},
		})
	}
	port := testutil.FreePort(t)
	// Refused first: an sni that is not a host name (422, JSON pointer).
	bad := in.Do("POST", "/api/v1/frontends", map[string]any{
		"name": "tls", "mode": "tcp", "default_backend": "def",
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
		"routes": []map[string]any{{"sni": "A.example.com", "backend": "a"}},
	})
	if bad.Status != 422 || !strings.Contains(string(bad.Body), `"field":"/routes/0/sni"`) {
		t.Fatalf("upper-case sni: status %d: %s", bad.Status, bad.Body)
	}
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "tls", "mode": "tcp", "default_backend": "def",
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
		"routes": []map[string]any{{"sni": "a.example.com", "backend": "a"}, {"sni": "*.b.example.com", "backend": "b"}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	check := func(sni, want string) {
		t.Helper()
		d := &net.Dialer{Timeout: 2 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: sni, InsecureSkipVerify: true})
		if err != nil {
			t.Fatalf("sni %q: %v", sni, err)
		}
		if got := c.ConnectionState().PeerCertificates[0].DNSNames[0]; got != want {
			t.Fatalf("sni %q: certificate of %q, want %q", sni, got, want)
		}
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		line := make([]byte, len(want)+1)
		if _, err := readFull(c, line); err != nil || string(line) != want+"\n" {
			t.Fatalf("sni %q: read %q %v", sni, line, err)
		}
		c.Close()
	}
	check("a.example.com", "a.example.com")
	check("x.b.example.com", "b.example.com")
	check("y.x.b.example.com", "b.example.com")
	check("b.example.com", "default.example.com") // the suffix alone does not match
	check("other.example.com", "default.example.com")
	check("", "default.example.com")
	// A new generation: new connections follow the changed routes.
	in.MustDo(200, "PUT", "/api/v1/frontends/tls", map[string]any{
		"name": "tls", "mode": "tcp", "default_backend": "def",
		"binds":  []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port}},
		"routes": []map[string]any{{"sni": "a.example.com", "backend": "b"}},
	})
	check("a.example.com", "b.example.com")
	check("x.b.example.com", "default.example.com")
	// Plain HTTP on the TLS port: closed without an answer.
	c, err := net.DialTimeout("tcp", addr, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte("GET / HTTP/1.1\r\nHost: a.example.com\r\n\r\n"))
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	n, err := c.Read(make([]byte, 1))
	if ne, ok := err.(net.Error); n != 0 || err == nil || ok && ne.Timeout() {
		t.Fatalf("plain http: read %d, %v: want the connection closed", n, err)
	}
}
