package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
	"github.com/spliced-proxy/spliced/core/proxy"
	"github.com/spliced-proxy/spliced/core/tlsconf"
	"github.com/spliced-proxy/spliced/internal/testutil"
)

// tlsEngine is an engine whose certificate bundles come from bundles (by
// name; a missing one fails to load).
func tlsEngine(t *testing.T, bundles map[string]*testutil.Cert) *Engine {
	t.Helper()
	keys, err := tlsconf.NewTicketKeys(t.TempDir(), time.Hour, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(keys.Close)
	certs := tlsconf.NewCerts(func(m config.Certificate) ([]byte, error) {
		c := bundles[m.Name]
		if c == nil {
			return nil, errors.New("no bundle")
		}
		return []byte(c.ChainPEM + c.KeyPEM), nil
	})
	e, err := New(Options{Certs: certs, TicketKeys: keys})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		e.Close(ctx)
	})
	return e
}

// tlsConfigOn is tcpConfig whose bind b1 terminates TLS with certificate
// name (chain hash h: a new hash is a replaced certificate).
func tlsConfigOn(gen int64, serverPort, port int, name, h string) *config.Config {
	c := tcpConfig(gen, serverPort, port)
	c.Certificates = []config.Certificate{{Name: name, ChainSHA256: h}}
	c.Frontends[0].Binds[0].TLS = &config.BindTLS{Certificates: []string{name}}
	c.Normalize()
	return c
}

// TestApplyTLSBind: a bind with tls terminates TLS; a configuration whose
// certificate cannot be loaded is refused at the bind's tls member and
// changes nothing (the previous certificate still serves); a replaced
// certificate serves the next handshakes.
func TestApplyTLSBind(t *testing.T) {
	one := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.test"}})
	two := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.test"}})
	bundles := map[string]*testutil.Cert{"one": one, "two": two}
	e := tlsEngine(t, bundles)
	srv := greeter(t, "hi")
	port := testutil.FreePort(t)
	apply(t, e, tlsConfigOn(1, srv, port, "one", hash64("1")))
	serial := func() string {
		t.Helper()
		c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(port),
			&tls.Config{InsecureSkipVerify: true, ServerName: "a.test"})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		b := make([]byte, 2)
		if _, err := io.ReadFull(c, b); err != nil || string(b) != "hi" {
			t.Fatalf("greeting %q %v", b, err)
		}
		return c.ConnectionState().PeerCertificates[0].SerialNumber.String()
	}
	if got := serial(); got != one.X509.SerialNumber.String() {
		t.Fatalf("serial %s, want %s", got, one.X509.SerialNumber)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.Apply(ctx, tlsConfigOn(2, srv, port, "missing", hash64("2")))
	var ae *config.ApplyError
	if !errors.As(err, &ae) || ae.Field != "/frontends/0/binds/0/tls" {
		t.Fatalf("apply with a certificate that does not load: %v", err)
	}
	if got := serial(); got != one.X509.SerialNumber.String() {
		t.Errorf("after a refused apply: serial %s, want the previous %s", got, one.X509.SerialNumber)
	}

	apply(t, e, tlsConfigOn(3, srv, port, "two", hash64("3")))
	if got := serial(); got != two.X509.SerialNumber.String() {
		t.Errorf("after the swap: serial %s, want %s", got, two.X509.SerialNumber)
	}
}

// TestApplyTLSBindWithoutTLSSupport: an engine built without Certs refuses
// a tls bind instead of serving it in clear.
func TestApplyTLSBindWithoutTLSSupport(t *testing.T) {
	e := newTestEngine(t)
	port := testutil.FreePort(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := e.Apply(ctx, tlsConfigOn(1, greeter(t, "hi"), port, "one", hash64("1")))
	var ae *config.ApplyError
	if !errors.As(err, &ae) || ae.Field != "/frontends/0/binds/0/tls" {
		t.Fatalf("apply: %v", err)
	}
	if c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), time.Second); err == nil {
		c.Close()
		t.Error("the bind was opened")
	}
}

// hash64 makes a 64-hex-digit chain hash from s.
func hash64(s string) string {
	h := []byte("0000000000000000000000000000000000000000000000000000000000000000")
	copy(h[64-len(s):], s)
	return string(h)
}

// TestTLSBindALPNFollowsHTTPVersions: the ALPN list a TLS bind of an http
// frontend offers (its *tls.Config's NextProtos, and what a client
// offering h2 and http/1.1 negotiates) for each combination of
// http.versions and a set alpn, with the data plane speaking HTTP/2 or
// not (proxy.HTTP2Supported, forced both ways through Engine.h2): never h2
// without it; derived from the versions, h2 first, when alpn is unset;
// the bind's alpn when set. A change of http.versions alone reaches the
// bind at the next Apply (connections accepted after it).
func TestTLSBindALPNFollowsHTTPVersions(t *testing.T) {
	cert := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.test"}})
	srv := greeter(t, "hi")
	binds := []struct {
		versions []string
		alpn     []string
		want     [2][]string // offered without, with HTTP/2
	}{
		{[]string{"1.1", "2"}, nil, [2][]string{{"http/1.1"}, {"h2", "http/1.1"}}},
		{[]string{"1.1"}, nil, [2][]string{{"http/1.1"}, {"http/1.1"}}},
		{[]string{"2"}, nil, [2][]string{{"http/1.1"}, {"h2"}}},
		{[]string{"1.1", "2"}, []string{"http/1.1"}, [2][]string{{"http/1.1"}, {"http/1.1"}}},
		{[]string{"1.1", "2"}, []string{"http/1.1", "h2"}, [2][]string{{"http/1.1"}, {"http/1.1", "h2"}}},
		{[]string{"2"}, []string{"h2"}, [2][]string{{"http/1.1"}, {"h2"}}},
	}
	for _, h2 := range []bool{false, true} {
		e := tlsEngine(t, map[string]*testutil.Cert{"site": cert})
		e.h2 = h2
		c := &config.Config{
			Generation:   1,
			Tuning:       config.Tuning{Nbthread: 1},
			Certificates: []config.Certificate{{Name: "site", ChainSHA256: hash64("5")}},
			Backends: []config.Backend{{Name: "be", Mode: config.ModeHTTP, Servers: []*config.Server{
				{Name: "s1", Address: "127.0.0.1", Port: srv}}}},
		}
		ports := make([]int, len(binds))
		for i, b := range binds {
			ports[i] = testutil.FreePort(t)
			c.Frontends = append(c.Frontends, config.Frontend{
				Name: "fe" + strconv.Itoa(i), Mode: config.ModeHTTP, DefaultBackend: "be",
				HTTP:  &config.FrontendHTTPOpts{Versions: b.versions},
				Binds: []config.Bind{{Name: "b", Address: "127.0.0.1", Port: ports[i], TLS: &config.BindTLS{Certificates: []string{"site"}, ALPN: b.alpn}}},
			})
		}
		c.Normalize()
		if err := config.Validate(c, config.Env{}); err != nil {
			t.Fatal(err)
		}
		apply(t, e, c)
		k := 0
		if h2 {
			k = 1
		}
		for i, b := range binds {
			want := b.want[k]
			front := e.binds[bindID{"fe" + strconv.Itoa(i), "b"}].front.Load()
			if got := front.TLS.NextProtos; !slices.Equal(got, want) {
				t.Errorf("h2 %v, versions %q, alpn %q: NextProtos %q, want %q", h2, b.versions, b.alpn, got, want)
			}
			if v := front.HTTP.Versions; (v&proxy.HTTPVersion1 != 0) != slices.Contains(b.versions, "1.1") || (v&proxy.HTTPVersion2 != 0) != slices.Contains(b.versions, "2") {
				t.Errorf("versions %q: HTTPFront.Versions %b", b.versions, v)
			}
			if got := negotiate(t, ports[i], "h2", "http/1.1"); got != want[0] {
				t.Errorf("h2 %v, versions %q, alpn %q: negotiated %q, want %q", h2, b.versions, b.alpn, got, want[0])
			}
		}
		// http.versions changed alone: the derived list follows.
		c2 := c.Clone()
		c2.Generation = 2
		c2.Frontends[0].HTTP.Versions = []string{"1.1"}
		apply(t, e, c2)
		if got := negotiate(t, ports[0], "h2", "http/1.1"); got != "http/1.1" {
			t.Errorf("h2 %v: after versions [1.1], negotiated %q", h2, got)
		}
	}
}

// negotiate makes a TLS handshake with the bind on port offering protos
// and returns the protocol agreed.
func negotiate(t *testing.T, port int, protos ...string) string {
	t.Helper()
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 2 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(port),
		&tls.Config{InsecureSkipVerify: true, ServerName: "a.test", NextProtos: protos})
	if err != nil {
		t.Fatalf("handshake with :%d offering %q: %v", port, protos, err)
	}
	defer c.Close()
	return c.ConnectionState().NegotiatedProtocol
}
