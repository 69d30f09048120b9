package proxy

import (
	"bufio"
	"crypto/tls"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/spliced-proxy/spliced/internal/testutil"
)

// TestHTTPClientCertInAccessLog: an http request over a TLS bind that
// asks for client certificates logs the client's subject, whether or not
// the frontend adds certificate fields to the requests; without them the
// client's forged fields are still stripped (CertStrip).
func TestHTTPClientCertInAccessLog(t *testing.T) {
	ca := testutil.NewCert(t, testutil.CertSpec{CA: true, Names: []string{"client ca"}})
	client := testutil.NewCert(t, testutil.CertSpec{Client: true, Parent: ca, Names: []string{"alice"}})
	for _, header := range []string{"", "X-Client-Cert-"} {
		e := newEnv(t, defaultTuning())
		o := newRawOrigin(t, okAnswer("ok"))
		fe := httpFrontend(t, nil, o.addr)
		fe.CertHeader = header
		fe.CertStrip = []byte("X-Client-Cert-")
		entries := logged(t, e, fe)
		srv, cli := tlsPair(t, tls.VersionTLS13)
		srv.ClientCAs = ca.Pool()
		srv.ClientAuth = tls.RequireAndVerifyClientCert
		tlsFront(fe, srv, 5*time.Second)
		cli.Certificates = []tls.Certificate{client.TLS()}
		tc := tls.Client(e.dialTLS(fe), cli)
		io.WriteString(tc, "GET / HTTP/1.1\r\nHost: a\r\nX-Client-Cert-Subject: forged\r\n\r\n")
		if resp, err := http.ReadResponse(bufio.NewReader(tc), nil); err != nil || resp.StatusCode != 200 {
			t.Fatalf("cert_header %q: %v %v", header, resp, err)
		}
		tc.Close()
		le := entries(1)[0]
		if le.ClientCert != client.X509.Subject.String() {
			t.Errorf("cert_header %q: client_cert %q, want %q", header, le.ClientCert, client.X509.Subject.String())
		}
		if got := o.received(); strings.Contains(got, "forged") {
			t.Errorf("cert_header %q: the client's forged field reached the server:\n%s", header, got)
		}
	}
}
