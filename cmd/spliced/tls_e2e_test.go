package main

// End-to-end tests of TLS termination on binds: the real binary, its
// certificates uploaded through the API, clients speaking TLS to it.

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// headerOrigin is a plain HTTP origin that answers every request with the
// request headers it got that the tests look at, one per line.
func headerOrigin(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var b strings.Builder
		for _, h := range []string{"X-Forwarded-Proto", "X-Client-Cert-Subject", "X-Client-Cert-Issuer",
			"X-Client-Cert-Sha256", "X-Client-Cert-Verified"} {
			fmt.Fprintf(&b, "%s=%s\n", h, strings.Join(r.Header.Values(h), "|"))
		}
		io.WriteString(w, b.String())
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().(*net.TCPAddr).Port
}

// echoOrigin echoes every connection's bytes.
func echoOrigin(t *testing.T) int {
	return testutil.ServeOrigin(t, func(c *net.TCPConn) {
		defer c.Close()
		io.Copy(c, c)
	}).Port()
}

// uploadCert stores c under name (POST, or PUT when replace).
func uploadCert(in *instance, name string, c *testutil.Cert, replace bool) {
	in.t.Helper()
	body := map[string]string{"name": name, "cert_pem": c.ChainPEM, "key_pem": c.KeyPEM}
	if replace {
		in.MustDo(200, "PUT", "/api/v1/certificates/"+name, body)
		return
	}
	in.MustDo(201, "POST", "/api/v1/certificates", body)
}

// tlsStats is the tls member of frontend name in /api/v1/stats.
func tlsStats(t *testing.T, in *instance, name string) map[string]int64 {
	t.Helper()
	var s struct {
		Frontends []struct {
			Name string           `json:"name"`
			TLS  map[string]int64 `json:"tls"`
		} `json:"frontends"`
	}
	in.MustDo(200, "GET", "/api/v1/stats", nil).JSON(t, &s)
	for _, f := range s.Frontends {
		if f.Name == name {
			return f.TLS
		}
	}
	t.Fatalf("frontend %s not in /api/v1/stats", name)
	return nil
}

// tlsGet sends one GET over a new TLS connection to addr and returns the
// body and the connection state.
func tlsGet(t *testing.T, addr string, cfg *tls.Config) (string, tls.ConnectionState) {
	t.Helper()
	d := &net.Dialer{Timeout: 5 * time.Second}
	c, err := tls.DialWithDialer(d, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("dial %s (sni %q): %v", addr, cfg.ServerName, err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	body, err := getOn(c, bufio.NewReader(c))
	if err != nil {
		t.Fatal(err)
	}
	return body, c.ConnectionState()
}

// getOn sends a GET on an open connection and reads its answer.
func getOn(c net.Conn, br *bufio.Reader) (string, error) {
	if _, err := io.WriteString(c, "GET / HTTP/1.1\r\nHost: x\r\nX-Client-Cert-Verified: SUCCESS\r\n\r\n"); err != nil {
		return "", err
	}
	resp, err := http.ReadResponse(br, nil)
	if err != nil {
		return "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 {
		return string(b), fmt.Errorf("status %d: %s", resp.StatusCode, b)
	}
	return string(b), err
}

// TestTLSTerminationEndToEnd: an https frontend serves the certificate the
// SNI names (exact, wildcard, else the bind's first), negotiates ALPN,
// refuses TLS 1.1, answers plain HTTP with a 400, counts full and resumed
// handshakes; a certificate replaced with PUT serves the new handshakes
// while an established connection lives on; a certificate in use cannot
// be deleted; a tcp frontend terminates TLS too.
func TestTLSTerminationEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	first := testutil.NewCert(t, testutil.CertSpec{Names: []string{"first.example.com"}})
	exact := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.example.com"}})
	wild := testutil.NewCert(t, testutil.CertSpec{Names: []string{"*.w.example.com"}, RSABits: 2048})
	uploadCert(in, "first", first, false)
	uploadCert(in, "a", exact, false)
	uploadCert(in, "wild", wild, false)
	roots := x509.NewCertPool()
	for _, c := range []*testutil.Cert{first, exact, wild} {
		roots.AddCert(c.X509)
	}

	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "echo", "mode": "tcp", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": echoOrigin(t)}},
	})
	port, tport := testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "https", "mode": "http", "default_backend": "web",
		"http":  map[string]any{"x_forwarded_proto": true},
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port, "tls": map[string]any{"certificates": []string{"first", "a", "wild"}}}},
	})
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "tlstcp", "mode": "tcp", "default_backend": "echo",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": tport, "tls": map[string]any{"certificates": []string{"a"}}}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)

	// Certificate per SNI, ALPN, X-Forwarded-Proto.
	for _, c := range []struct{ sni, want string }{
		{"a.example.com", "a.example.com"},
		{"x.w.example.com", "*.w.example.com"},
		{"A.Example.Com", "a.example.com"},
		{"other.example.com", "first.example.com"},
		{"", "first.example.com"},
	} {
		cfg := &tls.Config{ServerName: c.sni, RootCAs: roots, NextProtos: []string{"http/1.1"}}
		if c.sni == "" || c.sni == "other.example.com" {
			cfg.InsecureSkipVerify = true // the bind's first does not name it
		}
		body, st := tlsGet(t, addr, cfg)
		if got := st.PeerCertificates[0].DNSNames[0]; got != c.want {
			t.Errorf("sni %q: certificate of %q, want %q", c.sni, got, c.want)
		}
		if st.NegotiatedProtocol != "http/1.1" {
			t.Errorf("sni %q: ALPN %q, want http/1.1", c.sni, st.NegotiatedProtocol)
		}
		if !strings.Contains(body, "X-Forwarded-Proto=https\n") {
			t.Errorf("sni %q: origin saw %q", c.sni, body)
		}
	}

	// TLS 1.1 is refused by default.
	d := &net.Dialer{Timeout: 5 * time.Second}
	if c, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "a.example.com", RootCAs: roots,
		MinVersion: tls.VersionTLS10, MaxVersion: tls.VersionTLS11}); err == nil {
		c.Close()
		t.Error("a TLS 1.1 handshake succeeded")
	}

	// Plain HTTP to the TLS port: nginx's 497, as a 400.
	pc, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	pc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(pc, "GET / HTTP/1.1\r\nHost: x\r\n\r\n")
	resp, err := http.ReadResponse(bufio.NewReader(pc), nil)
	if err != nil {
		t.Fatalf("plain http: %v", err)
	}
	b, _ := io.ReadAll(resp.Body)
	pc.Close()
	if resp.StatusCode != 400 || !strings.Contains(string(b), "plain HTTP request was sent to HTTPS port") ||
		resp.Header.Get("Cache-Control") != "no-cache" {
		t.Errorf("plain http: %d %q %v", resp.StatusCode, b, resp.Header)
	}

	// A resumed handshake (session ticket) is counted apart.
	cache := tls.NewLRUClientSessionCache(4)
	for i := range 2 {
		_, st := tlsGet(t, addr, &tls.Config{ServerName: "a.example.com", RootCAs: roots, ClientSessionCache: cache})
		if st.DidResume != (i == 1) {
			t.Errorf("connection %d resumed: %v", i, st.DidResume)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		s := tlsStats(t, in, "https")
		return s["handshakes_resumed"] == 1 && s["handshakes_full"] == 6 && s["handshakes_failed"] == 2
	}, "stats: 6 full (5 SNI + 1), 1 resumed, 2 failed (TLS 1.1, plain HTTP)")
	metrics := string(in.MustDo(200, "GET", "/metrics", nil).Body)
	for _, l := range []string{
		`spliced_frontend_tls_handshakes_total{frontend="https",result="resumed"} 1`,
		`spliced_frontend_tls_handshakes_total{frontend="https",result="failed"} 2`,
	} {
		if !strings.Contains(metrics, l+"\n") {
			t.Errorf("/metrics lacks %s", l)
		}
	}

	// Hot swap: an established keep-alive connection, then the certificate
	// replaced: new handshakes get the new one, the old connection lives.
	old, err := tls.DialWithDialer(d, "tcp", addr, &tls.Config{ServerName: "a.example.com", RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer old.Close()
	old.SetDeadline(time.Now().Add(30 * time.Second))
	obr := bufio.NewReader(old)
	if _, err := getOn(old, obr); err != nil {
		t.Fatal(err)
	}
	exact2 := testutil.NewCert(t, testutil.CertSpec{Names: []string{"a.example.com"}})
	roots.AddCert(exact2.X509)
	uploadCert(in, "a", exact2, true)
	_, st := tlsGet(t, addr, &tls.Config{ServerName: "a.example.com", RootCAs: roots})
	if got := st.PeerCertificates[0].SerialNumber; got.Cmp(exact2.X509.SerialNumber) != 0 {
		t.Errorf("after PUT: serial %v, want the new certificate's %v", got, exact2.X509.SerialNumber)
	}
	if _, err := getOn(old, obr); err != nil {
		t.Errorf("the connection established before the PUT: %v", err)
	}

	// A certificate in use cannot be deleted.
	in.MustDo(409, "DELETE", "/api/v1/certificates/wild", nil)

	// A tcp frontend terminates TLS: the clear bytes reach the server.
	tc, err := tls.DialWithDialer(d, "tcp", "127.0.0.1:"+strconv.Itoa(tport), &tls.Config{ServerName: "a.example.com", RootCAs: roots})
	if err != nil {
		t.Fatal(err)
	}
	defer tc.Close()
	tc.SetDeadline(time.Now().Add(10 * time.Second))
	msg := "hello through a terminated tunnel\n"
	io.WriteString(tc, msg)
	got := make([]byte, len(msg))
	if _, err := io.ReadFull(tc, got); err != nil || string(got) != msg {
		t.Fatalf("tcp over TLS: %q %v", got, err)
	}
}

// TestTLSClientCertificatesEndToEnd: a bind with client_ca refuses a client
// without a certificate; with one, the origin gets its fields, and a field
// the client forged is not passed on.
func TestTLSClientCertificatesEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	client := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"alice"}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "mtls", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port,
			"tls": map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM}}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := &tls.Config{ServerName: "m.example.com", RootCAs: srv.Pool()}

	// No certificate: the handshake fails (in TLS 1.3 the client learns it
	// at its first read).
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, cfg)
	if err == nil {
		c.SetDeadline(time.Now().Add(10 * time.Second))
		_, err = getOn(c, bufio.NewReader(c))
		c.Close()
	}
	if err == nil {
		t.Fatal("a client without a certificate was served")
	}

	cfg.Certificates = []tls.Certificate{client.TLS()}
	body, _ := tlsGet(t, addr, cfg)
	for _, want := range []string{
		"X-Client-Cert-Subject=" + client.X509.Subject.String() + "\n",
		"X-Client-Cert-Issuer=" + ca.X509.Subject.String() + "\n",
		"X-Client-Cert-Verified=SUCCESS\n", // one value: the forged one is gone
	} {
		if !strings.Contains(body, want) {
			t.Errorf("origin saw %q, want %q in it", body, want)
		}
	}
	if s := tlsStats(t, in, "mtls"); s["handshakes_failed"] != 1 || s["handshakes_full"] != 1 {
		t.Errorf("stats %v: want 1 failed, 1 full", s)
	}
}

// TestTLSHandshakeTimeoutEndToEnd: half a ClientHello, then silence: the
// connection is closed after the frontend's handshake_ms, counted as a
// timeout.
func TestTLSHandshakeTimeoutEndToEnd(t *testing.T) {
	in := startSpliced(t, "")
	uploadCert(in, "c", testutil.NewCert(t, testutil.CertSpec{Names: []string{"c.example.com"}}), false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "echo", "mode": "tcp", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": echoOrigin(t)}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "slow", "mode": "tcp", "default_backend": "echo", "timeouts": map[string]any{"handshake_ms": 300},
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port, "tls": map[string]any{"certificates": []string{"c"}}}},
	})
	// Before the dial: handshake_ms counts from the accept, which can
	// come before DialTimeout returns.
	start := time.Now()
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(port), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.Write([]byte{0x16, 0x03, 0x01, 0x01, 0x00, 0x01, 0x00})
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	_, err = c.Read(make([]byte, 1))
	var ne net.Error
	if err == nil || errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("read %v: want the connection closed", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond || d > 5*time.Second {
		t.Errorf("closed after %v, want about handshake_ms (300 ms)", d)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		s := tlsStats(t, in, "slow")
		return s["handshake_timeouts"] == 1 && s["handshakes_failed"] == 1
	}, "the timeout counted")
}

// TestTLSRenegotiationRefusedEndToEnd: a TLS 1.2 client that asks to
// renegotiate (openssl s_client's "R") is refused and its connection
// ends (crypto/tls fails the read, the proxy resets the connection: openssl
// reads ECONNRESET); it does not hang, and the bind serves the next client.
func TestTLSRenegotiationRefusedEndToEnd(t *testing.T) {
	t.Parallel()
	openssl, err := exec.LookPath("openssl")
	if err != nil {
		t.Fatal("openssl is needed (make test installs it)")
	}
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"r.example.com"}})
	uploadCert(in, "r", srv, false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "echo", "mode": "tcp", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": echoOrigin(t)}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "reneg", "mode": "tcp", "default_backend": "echo",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port, "tls": map[string]any{"certificates": []string{"r"}}}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cmd := exec.Command(openssl, "s_client", "-connect", addr, "-tls1_2", "-servername", "r.example.com", "-no_ign_eof")
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	var out testutil.SyncBuffer
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	// An echo through the tunnel first: the handshake is done.
	io.WriteString(stdin, "ping\n")
	testutil.Eventually(t, 10*time.Second, func() bool { return strings.Contains(out.String(), "\nping\n") }, "the echo through TLS")
	io.WriteString(stdin, "R\n")
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		cmd.Process.Kill()
		t.Fatalf("the client asking to renegotiate is still connected:\n%s", out.String())
	}
	if !strings.Contains(out.String(), "RENEGOTIATING") {
		t.Errorf("openssl did not try to renegotiate:\n%s", out.String())
	}
	stdin.Close()
	// The bind serves the next client.
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", addr, &tls.Config{ServerName: "r.example.com", RootCAs: srv.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(c, "again\n")
	got := make([]byte, 6)
	if _, err := io.ReadFull(c, got); err != nil || string(got) != "again\n" {
		t.Fatalf("after the refused renegotiation: %q %v", got, err)
	}
}

// TestTLSSurvivesRestartEndToEnd: a TLS bind is served again after a
// restart from the state directory (the bundles are read back from
// certs/), and a session ticket issued before the restart still resumes
// (the ticket keys are kept in the state directory).
func TestTLSSurvivesRestartEndToEnd(t *testing.T) {
	t.Parallel()
	in := startSpliced(t, "")
	c := testutil.NewCert(t, testutil.CertSpec{Names: []string{"k.example.com"}})
	uploadCert(in, "k", c, false)
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	port := testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "https", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{{"name": "b1", "address": "127.0.0.1", "port": port, "tls": map[string]any{"certificates": []string{"k"}}}},
	})
	addr := "127.0.0.1:" + strconv.Itoa(port)
	cfg := &tls.Config{ServerName: "k.example.com", RootCAs: c.Pool(), ClientSessionCache: tls.NewLRUClientSessionCache(4)}
	if _, st := tlsGet(t, addr, cfg); st.DidResume {
		t.Fatal("the first connection resumed")
	}
	if err := in.Stop(15 * time.Second); err != nil {
		t.Fatalf("stop: %v", err)
	}
	again := startSpliced(t, in.StateDir)
	body, st := tlsGet(t, addr, cfg)
	if !strings.Contains(body, "X-Forwarded-Proto=") {
		t.Errorf("after restart the origin answered %q", body)
	}
	if !st.DidResume {
		t.Error("a ticket issued before the restart did not resume after it")
	}
	if s := tlsStats(t, again, "https"); s["handshakes_resumed"] != 1 {
		t.Errorf("stats after restart %v: want 1 resumed", s)
	}
}

// TestTLSClientCertFieldsCannotBeForgedOnOtherBinds: a frontend whose bind
// b1 verifies client certificates also has a plain bind and a TLS bind
// without client_ca, and they reach the same origin: a client of those
// binds must not be able to hand the origin X-Client-Cert-* fields (the
// origin cannot tell the binds apart), in any letter case.
func TestTLSClientCertFieldsCannotBeForgedOnOtherBinds(t *testing.T) {
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	mtls, plain, tlsOnly := testutil.FreePort(t), testutil.FreePort(t), testutil.FreePort(t)
	in.MustDo(201, "POST", "/api/v1/frontends", map[string]any{
		"name": "mixed", "mode": "http", "default_backend": "web",
		"binds": []map[string]any{
			{"name": "b1", "address": "127.0.0.1", "port": mtls,
				"tls": map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM}},
			{"name": "plain", "address": "127.0.0.1", "port": plain},
			{"name": "tls", "address": "127.0.0.1", "port": tlsOnly,
				"tls": map[string]any{"certificates": []string{"m"}}},
		},
	})
	forged := "GET / HTTP/1.1\r\nHost: x\r\nX-Client-Cert-Verified: SUCCESS\r\n" +
		"x-client-cert-subject: CN=admin\r\nX-CLIENT-CERT-ISSUER: CN=forged\r\nConnection: close\r\n\r\n"
	check := func(name string, c net.Conn) {
		t.Helper()
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.WriteString(c, forged); err != nil {
			t.Fatal(err)
		}
		resp, err := http.ReadResponse(bufio.NewReader(c), nil)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		for _, f := range []string{"Subject", "Issuer", "Verified"} {
			if !strings.Contains(string(b), "X-Client-Cert-"+f+"=\n") {
				t.Errorf("bind %s: the origin got a forged X-Client-Cert-%s:\n%s", name, f, b)
			}
		}
	}
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(plain), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	check("plain", c)
	tc, err := tls.DialWithDialer(&net.Dialer{Timeout: 5 * time.Second}, "tcp", "127.0.0.1:"+strconv.Itoa(tlsOnly),
		&tls.Config{ServerName: "m.example.com", RootCAs: srv.Pool()})
	if err != nil {
		t.Fatal(err)
	}
	check("tls", tc)
}

// TestTLSClientCertFieldsStrippedOnKeptAliveConnections: a bind of a
// frontend gets client_ca while a client of its other, plain bind keeps
// its connection alive: from the next request on, that client's
// X-Client-Cert-* fields are dropped too (requests follow the frontend's
// current generation).
func TestTLSClientCertFieldsStrippedOnKeptAliveConnections(t *testing.T) {
	in := startSpliced(t, "")
	srv := testutil.NewCert(t, testutil.CertSpec{Names: []string{"m.example.com"}})
	uploadCert(in, "m", srv, false)
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"clients"}})
	in.MustDo(201, "POST", "/api/v1/backends", map[string]any{
		"name": "web", "mode": "http", "servers": []map[string]any{{"name": "s1", "address": "127.0.0.1", "port": headerOrigin(t)}},
	})
	tlsPort, plain := testutil.FreePort(t), testutil.FreePort(t)
	fe := func(tlsCfg map[string]any) map[string]any {
		return map[string]any{
			"name": "mixed", "mode": "http", "default_backend": "web",
			"binds": []map[string]any{
				{"name": "b1", "address": "127.0.0.1", "port": tlsPort, "tls": tlsCfg},
				{"name": "plain", "address": "127.0.0.1", "port": plain},
			},
		}
	}
	in.MustDo(201, "POST", "/api/v1/frontends", fe(map[string]any{"certificates": []string{"m"}}))
	c, err := net.DialTimeout("tcp", "127.0.0.1:"+strconv.Itoa(plain), 5*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(20 * time.Second))
	br := bufio.NewReader(c)
	// Before: no bind verifies client certificates, the field passes.
	if body, err := getOn(c, br); err != nil || !strings.Contains(body, "X-Client-Cert-Verified=SUCCESS\n") {
		t.Fatalf("before client_ca: %q %v", body, err)
	}
	in.MustDo(200, "PUT", "/api/v1/frontends/mixed", fe(map[string]any{"certificates": []string{"m"}, "client_ca": ca.CertPEM}))
	body, err := getOn(c, br)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(body, "X-Client-Cert-Verified=\n") {
		t.Errorf("after client_ca, the kept-alive plain connection forged a field:\n%s", body)
	}
}
