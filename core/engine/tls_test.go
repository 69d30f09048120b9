package engine

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"log/slog"
	"net"
	"strconv"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/core/config"
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
