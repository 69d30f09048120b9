package tlsconf

import (
	"crypto/tls"
	"errors"
	"net"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// origin serves TLS with cert on 127.0.0.1 and reports whether each
// handshake resumed.
func origin(t *testing.T, cert *testutil.Cert) (addr string, resumed chan bool) {
	t.Helper()
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.TLS()}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	resumed = make(chan bool, 16)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer c.Close()
				tc := c.(*tls.Conn)
				_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
				if tc.Handshake() != nil {
					return
				}
				// One byte after the handshake: TLS 1.3 sends its tickets
				// first, so a client that read it has them. Then wait for
				// the client's close.
				if _, err := tc.Write([]byte{'x'}); err != nil {
					return
				}
				var b [1]byte
				_, _ = tc.Read(b[:])
				resumed <- tc.ConnectionState().DidResume
			}()
		}
	}()
	return ln.Addr().String(), resumed
}

func dial(t *testing.T, addr string, c *tls.Config) error {
	t.Helper()
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, c)
	if err != nil {
		return err
	}
	defer tc.Close()
	// The origin's byte comes after its session tickets (TLS 1.3).
	_ = tc.SetReadDeadline(time.Now().Add(5 * time.Second))
	var b [1]byte
	_, err = tc.Read(b[:])
	return err
}

func server(address string, tl config.ServerTLS) *config.Server {
	s := &config.Server{Name: "s1", Address: address, Port: 443, TLS: &tl}
	s.Normalize()
	return s
}

func TestClientVerifies(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{Names: []string{"test ca"}, CA: true})
	leaf := testutil.NewCert(t, testutil.CertSpec{Names: []string{"origin.test", "127.0.0.1"}, Parent: ca})
	other := testutil.NewCert(t, testutil.CertSpec{Names: []string{"other ca"}, CA: true})
	addr, _ := origin(t, leaf)
	tests := []struct {
		name string
		s    *config.Server
		ok   bool
	}{
		{"right CA and sni", server("127.0.0.1", config.ServerTLS{CAPEM: ca.CertPEM, SNI: "origin.test"}), true},
		{"right CA, IP address in the SANs", server("127.0.0.1", config.ServerTLS{CAPEM: ca.CertPEM}), true},
		{"right CA, host-name address", server("origin.test", config.ServerTLS{CAPEM: ca.CertPEM}), true},
		{"wrong CA", server("127.0.0.1", config.ServerTLS{CAPEM: other.CertPEM, SNI: "origin.test"}), false},
		{"wrong name", server("127.0.0.1", config.ServerTLS{CAPEM: ca.CertPEM, SNI: "evil.test"}), false},
		{"system roots do not know a test CA", server("127.0.0.1", config.ServerTLS{SNI: "origin.test"}), false},
		{"verify none", server("127.0.0.1", config.ServerTLS{Verify: config.VerifyNone, SNI: "evil.test"}), true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Client(tt.s)
			if err != nil {
				t.Fatal(err)
			}
			if c.InsecureSkipVerify != (tt.s.TLS.Verify == config.VerifyNone) {
				t.Fatalf("InsecureSkipVerify %v with verify %q", c.InsecureSkipVerify, tt.s.TLS.Verify)
			}
			if c.MinVersion != tls.VersionTLS12 {
				t.Fatalf("MinVersion %x", c.MinVersion)
			}
			if err := dial(t, addr, c); (err == nil) != tt.ok {
				t.Fatalf("handshake error %v, want success %v", err, tt.ok)
			}
		})
	}
}

func TestClientResumesOnReconnect(t *testing.T) {
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		cert := testutil.SelfSigned(t, "origin.test")
		addr, resumed := origin(t, cert)
		c, err := Client(server("127.0.0.1", config.ServerTLS{CAPEM: cert.CertPEM, SNI: "origin.test"}))
		if err != nil {
			t.Fatal(err)
		}
		c.MaxVersion = v
		var got []bool
		for range 3 {
			if err := dial(t, addr, c); err != nil {
				t.Fatal(err)
			}
			got = append(got, <-resumed)
		}
		if got[0] || !got[1] || !got[2] {
			t.Fatalf("TLS %x: resumed %v, want [false true true]", v, got)
		}
	}
}

func TestClientRefusesBadInput(t *testing.T) {
	if _, err := Client(&config.Server{Name: "s"}); err == nil {
		t.Fatal("no tls accepted")
	}
	if _, err := Client(&config.Server{Name: "s", TLS: &config.ServerTLS{Verify: "maybe"}}); err == nil {
		t.Fatal("unknown verify accepted")
	}
	if _, err := Client(&config.Server{Name: "s", TLS: &config.ServerTLS{Verify: config.VerifyRequired, CAPEM: "x"}}); err == nil {
		t.Fatal("bad ca_pem accepted")
	}
}

// TestClientH2RequiresALPN: a server with proto h2 is offered "h2" alone
// and must select it, on full and resumed handshakes of TLS 1.2 and 1.3;
// one that ignores ALPN, or knows only http/1.1, fails the handshake. An
// h1 server offers no ALPN.
func TestClientH2RequiresALPN(t *testing.T) {
	cert := testutil.SelfSigned(t, "origin.test")
	serve := func(t *testing.T, protos []string) (string, chan string) {
		ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{Certificates: []tls.Certificate{cert.TLS()}, NextProtos: protos})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { ln.Close() })
		offered := make(chan string, 16)
		go func() {
			for {
				c, err := ln.Accept()
				if err != nil {
					return
				}
				go func() {
					defer c.Close()
					tc := c.(*tls.Conn)
					_ = tc.SetDeadline(time.Now().Add(5 * time.Second))
					if tc.Handshake() != nil {
						return
					}
					offered <- tc.ConnectionState().NegotiatedProtocol
					if _, err := tc.Write([]byte{'x'}); err != nil {
						return
					}
					var b [1]byte
					_, _ = tc.Read(b[:])
				}()
			}
		}()
		return ln.Addr().String(), offered
	}
	for _, v := range []uint16{tls.VersionTLS12, tls.VersionTLS13} {
		h2 := server("127.0.0.1", config.ServerTLS{CAPEM: cert.CertPEM, SNI: "origin.test"})
		h2.Proto = config.ProtoH2
		c, err := Client(h2)
		if err != nil {
			t.Fatal(err)
		}
		c.MaxVersion = v
		addr, negotiated := serve(t, []string{"http/1.1", "h2"})
		for i := range 2 { // full, then resumed
			if err := dial(t, addr, c); err != nil {
				t.Fatalf("TLS %x handshake %d with an h2 server: %v", v, i, err)
			}
			if p := <-negotiated; p != "h2" {
				t.Fatalf("TLS %x: negotiated %q", v, p)
			}
		}
		addr, _ = serve(t, nil)
		if err := dial(t, addr, c); !errors.Is(err, ErrServerNotH2) {
			t.Fatalf("TLS %x: a server without ALPN: %v, want ErrServerNotH2", v, err)
		}
		addr, _ = serve(t, []string{"http/1.1"})
		if err := dial(t, addr, c); err == nil {
			t.Fatalf("TLS %x: an http/1.1-only server accepted", v)
		}
	}
	c, err := Client(server("127.0.0.1", config.ServerTLS{CAPEM: cert.CertPEM, SNI: "origin.test"}))
	if err != nil {
		t.Fatal(err)
	}
	if c.NextProtos != nil || c.VerifyConnection != nil {
		t.Fatalf("an h1 server offers ALPN %v", c.NextProtos)
	}
}
